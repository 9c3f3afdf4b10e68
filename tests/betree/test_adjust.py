"""Self-adjustment (betree.disk.adjust): statistics, ranking, recycling — and still correct.

The differential runs match random events with statistics collected, adjust (recycling
forced by a huge theta in some runs), check() every invariant, compare every answer with
the brute-force evaluator, and reopen the store.  The oracle never sees the index.
"""

from __future__ import annotations

import gc
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest

from betree.disk.adjust import Collector, load_state
from betree.disk.catalog import ADJ, ADJUST_STATE, NS, ROOT
from betree.disk.nodes import CNode
from betree.disk.tree import BETree
from betree.index import Index
from betree.lang.schema import Schema
from storage import codec
from storage.errors import CheckFailed, InvalidInput, StoreDamaged
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression
from tools.bench import adapt as bench_adapt
from tools.cli import build_parser
from tools.cli import main as cli_main

SMALL = {"max_cap": 3, "min_size": 2}


class Run:
    """A seeded random workload on one store; the model is the dict of live expressions.

    Each step is one of the methods in :data:`STEPS`, drawn with its weight; ``check()``
    runs after every adjustment and every 25 steps, and the store is reopened between
    phases (then once read-only at the end).
    """

    STEPS = (("subscribe", 40), ("unsubscribe", 15), ("match", 40), ("adjust", 5))

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.schema = Schema.from_json(SCHEMA)
        self.subs: dict[Any, str] = {}
        self.totals = dict.fromkeys(("recycled_pnodes", "recycled_lnodes", "reinserted"), 0)
        self.totals["evaluated"] = 0

    def subscribe(self, idx: Index, tag: str) -> None:
        rng = self.rng
        batch = [(f"s{rng.randint(0, 300)}", expression(rng))]
        if rng.random() < 0.2:
            batch += [(f"b{tag}-{k}", expression(rng)) for k in range(15)]
        idx.subscribe_many(batch)
        self.subs.update(batch)

    def unsubscribe(self, idx: Index, tag: str) -> None:
        ident = self.rng.choice(sorted(self.subs))
        assert idx.unsubscribe(ident), tag
        del self.subs[ident]

    def match(self, idx: Index, tag: str) -> None:
        ev = event(self.rng)
        got = idx.match(ev)
        assert len(got) == len(set(got)), f"an id returned twice at {tag}"
        assert set(got) == brute(self.subs, self.schema, ev), (ev, tag)

    def adjust(self, idx: Index, tag: str) -> None:
        report = idx.adjustment.flush()
        for key in self.totals:
            self.totals[key] += report[key]
        idx.check()

    def __call__(self, steps: int, settings: dict[str, int]) -> dict[str, int]:
        names = [name for name, _ in self.STEPS]
        weights = [w for _, w in self.STEPS]
        with tempfile.TemporaryDirectory() as path:
            for phase in range(3):
                with Index.open(path, schema=SCHEMA, settings=settings) as idx:
                    for step in range(steps):
                        op = self.rng.choices(names, weights)[0] if self.subs else "subscribe"
                        getattr(self, op)(idx, f"{phase}-{step}")
                        if step % 25 == 0:
                            idx.check()
                    idx.check()
                    assert len(idx) == len(self.subs)
            with Index.open(path, readonly=True) as idx:
                for k in range(40):
                    self.match(idx, f"read-only {k}")
        return self.totals


def run(seed: int, steps: int, settings: dict[str, int]) -> dict[str, int]:
    """Random subscribe / unsubscribe / match / adjust steps; returns recycling totals."""
    return Run(seed)(steps, settings)


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [1, 2])
def test_recycling_forced(seed: int) -> None:
    """theta far above any rank: every node whose window ends is recycled."""
    totals = run(seed, 150, {**SMALL, "adjust": 1, "adjust_window": 5, "theta": 10**9})
    assert totals["recycled_pnodes"] > 0 and totals["reinserted"] > 0


def test_paper_theta() -> None:
    """The paper's theta = 0 with windows of a few events, automatic flushes too."""
    totals = run(3, 150, {**SMALL, "adjust": 1, "adjust_window": 8})
    assert totals["evaluated"] > 0 and totals["recycled_lnodes"] > 0


def test_default_nodes() -> None:
    run(4, 120, {"adjust": 1, "adjust_window": 10, "theta": 10**9})


def _open(path: str, **settings: int) -> Index:
    return Index.open(path, schema=SCHEMA, settings={**SMALL, **settings})


def test_matching_stays_a_reader(tmp_path: Path) -> None:
    """Collecting writes nothing: the store's generation only moves at adjust()."""
    with _open(str(tmp_path), adjust=1, adjust_window=1000) as idx:
        idx.subscribe_many([(f"s{k}", f"i = {k % 5} and j > {k}") for k in range(30)])
        with idx.store.read() as txn:
            gen = txn.gen
        rng = random.Random(5)
        for _ in range(200):
            idx.match(event(rng))
        with idx.store.read() as txn:
            assert txn.gen == gen
        assert idx.adjustment.collector is not None and idx.adjustment.collector.events == 200
        report = idx.adjustment.flush()
        assert report["events"] == 200 and report["nodes"] > 0
        with idx.store.read() as txn:
            assert txn.gen == gen + 1
            assert load_state(txn)["events"] == 200
        idx.check()


def test_off_collects_nothing(tmp_path: Path) -> None:
    with _open(str(tmp_path)) as idx:
        idx.subscribe("a", "i = 1")
        idx.match({"i": 1})
        assert idx.adjustment.collector is None
        idx.engine.collecting = True
        idx.match({"i": 1})
        assert idx.adjustment.collector is not None and idx.adjustment.collector.events == 1


def test_collector_counts(tmp_path: Path) -> None:
    """Candidates, false candidates and discarded evaluations of one l-node."""
    with _open(str(tmp_path), max_cap=64) as idx:
        idx.subscribe_many([("t", "i = 1"), ("f", "i = 2"), ("ff", "i = 3 and j = 4")])
        idx.engine.collecting = True
        assert idx.match({"i": 1, "j": 5}) == ["t"]
        col = idx.adjustment.collector
        assert col is not None
        with idx.store.read() as txn:
            root = txn.get_obj(NS, ROOT)["root"]
        # one visit, three candidates, two false, discarding their 1 + 2 atoms
        assert col.nodes == {root: [1, 3, 2, 3]}
        idx.match({"i": 3, "j": 4})
        assert col.nodes == {root: [2, 6, 4, 5]}


def test_auto_flush_every_window(tmp_path: Path) -> None:
    with _open(str(tmp_path), adjust=1, adjust_window=10) as idx:
        idx.subscribe_many([(k, f"i = {k}") for k in range(10)])
        for k in range(25):
            idx.match({"i": k % 12})
        with idx.store.read() as txn:
            assert load_state(txn)["events"] == 20
    with Index.open(str(tmp_path)) as idx:  # close() flushed the last 5
        with idx.store.read() as txn:
            assert load_state(txn)["events"] == 25
        idx.check()


def test_feedback_steers_partitioning(tmp_path: Path) -> None:
    """Popularity first: i (in every clause) wins; with feedback that events check all
    of i's clauses, the less popular j is partitioned instead."""
    subs = [(k, f"i >= 0 and j = {k}" if k % 4 else f"i >= 0 and s = 'x{k}'") for k in range(8)]
    for measured, first in ((False, "i"), (True, "j")):
        path = tmp_path / str(measured)
        with _open(str(path), max_cap=4, min_size=2) as idx:
            if measured:
                with idx.store.write() as txn:
                    state = {"events": 0, "attrs": {"i": [10.0, 10.0]}, "recycled": [0, 0, 0]}
                    txn.put_obj(NS, ADJUST_STATE, state)
            idx.subscribe_many(subs)
            with idx.store.read() as txn:
                tree = BETree(txn, txn.get_obj(NS, ROOT))
                pdir = tree.node(tree.root).pdir
            assert pdir[0][0] == first, pdir
            idx.check()


def test_hot_root_lnode_is_cut(tmp_path: Path) -> None:
    """A root l-node below capacity whose clauses every event checks in vain ranks below
    theta = 0 (its gain is 0) and is cut anyway, down to buckets below half an l-node;
    answers stay right."""
    with _open(str(tmp_path), max_cap=16, min_size=4, adjust=1, adjust_window=20) as idx:
        idx.subscribe_many([(k, f"i = {k}") for k in range(10)])
        with idx.store.read() as txn:
            tree = BETree(txn, txn.get_obj(NS, ROOT))
            assert not tree.node(tree.root).pdir
        for _ in range(20):
            assert idx.match({"i": 15}) == []
        with idx.store.read() as txn:
            tree = BETree(txn, txn.get_obj(NS, ROOT))
            assert set(tree.node(tree.root).pmap) == {"i"}
            assert load_state(txn)["recycled"][1] == 1
        idx.check()
        assert idx.match({"i": 3}) == [3]
        assert idx.engine.last_stats["candidates"] <= 6  # the i directory was cut below 8


def test_underflowing_pnode_reinserted(tmp_path: Path) -> None:
    """With adjustment on, a p-node left below min_size is dissolved on deletion."""
    for adjust, left in ((0, True), (1, False)):
        with _open(str(tmp_path / str(adjust)), adjust=adjust, max_cap=2, min_size=3) as idx:
            idx.subscribe_many([(k, f"i = {k} and j > 0") for k in range(3)])
            idx.subscribe_many([(k, f"s = 'x{k}'") for k in range(3, 5)])
            with idx.store.read() as txn:
                tree = BETree(txn, txn.get_obj(NS, ROOT))
                assert "i" in tree.node(tree.root).pmap or "j" in tree.node(tree.root).pmap
            assert idx.unsubscribe(0)
            with idx.store.read() as txn:
                tree = BETree(txn, txn.get_obj(NS, ROOT))
                pmap = tree.node(tree.root).pmap
            assert bool({"i", "j"} & set(pmap)) == left, pmap
            idx.check()
            assert sorted(idx.match({"i": 1, "j": 1})) == [1]


def test_check_reports_bad_windows(tmp_path: Path) -> None:
    with _open(str(tmp_path), adjust=1) as idx:
        idx.subscribe("a", "i = 1")
        with idx.store.write() as txn:
            txn.put_obj(ADJ, codec.encode_u64(999_999), [0, 1, 1, 0, 0, 0])
            txn.put_obj(ADJ, codec.encode_u64(1), [0, 1, 1, 2, 1, 1])
            txn.put_obj(NS, ADJUST_STATE, {"events": 0, "attrs": {"nope": [1.0, 2.0]}})
        with pytest.raises(CheckFailed) as info:
            idx.check()
        text = str(info.value.violations)
        assert "page 999999: not a live c-node" in text
        assert "2 false of 1 candidates" in text
        assert "feedback on unknown attribute 'nope'" in text


def test_recycling_a_damaged_top_bucket_is_damage(tmp_path: Path) -> None:
    """A p-node whose top bucket, as read, is not one (a page written wrong but with a
    good checksum) fails recycling with the page and what was found, not an assert."""
    with _open(str(tmp_path), max_cap=2, min_size=2) as idx:
        idx.subscribe_many([(k, f"i = {k}") for k in range(6)])
        with idx.store.write() as txn, idx.engine.writer(txn) as w:
            (_, top, _), *_ = w.tree.node(w.tree.root).pdir
            txn.load_mut(w.rec["space"], top, CNode).top = False
            with pytest.raises(StoreDamaged, match=f"page {top}: not a p-node's top bucket"):
                w.tree.evict_pnode(top)


def test_freed_nodes_drop_their_windows(tmp_path: Path) -> None:
    with _open(str(tmp_path), adjust=1, adjust_window=1000) as idx:
        idx.subscribe_many([(k, f"i = {k % 3} and j = {k}") for k in range(20)])
        for k in range(20):
            idx.match({"i": k % 3, "j": k})
        idx.adjustment.flush()
        with idx.store.read() as txn:
            assert txn.count(ADJ) > 0
        idx.unsubscribe_many(list(range(20)))
        with idx.store.read() as txn:
            assert txn.count(ADJ) <= 1  # at most the root's
        idx.check()


def test_settings_validated(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        _open(str(tmp_path / "a"), adjust=2)
    with _open(str(tmp_path / "b")) as idx:
        assert idx.adjustment.settings()["adjust"] == 0
        idx.adjustment.set(True, window=50)
        assert (
            idx.adjustment.settings()["adjust"] == 1
            and idx.adjustment.settings()["adjust_window"] == 50
        )
        with pytest.raises(InvalidInput):
            idx.adjustment.set(window=0)


def test_collector_totals(tmp_path: Path) -> None:
    """Across folds, the collector's candidates add up to those ``last_stats`` reports."""
    rng = random.Random(9)
    with _open(str(tmp_path)) as idx:
        idx.subscribe_many([(k, expression(rng)) for k in range(150)])
        idx.engine.collecting = True
        total = 0
        for _ in range(Collector.FOLD + 50):
            idx.match(event(rng))
            total += idx.engine.last_stats["candidates"]
        col = idx.adjustment.collector
        assert col is not None and col.events == Collector.FOLD + 50
        counts = list(col.nodes.values())
        assert sum(c[1] for c in counts) == total
        assert all(0 < v <= c and f <= c and f <= d for v, c, f, d in counts)


def test_bench_adapt_smoke(tmp_path: Path) -> None:
    """``bexdb bench adapt`` end to end at a toy size: table, results.json, plot."""
    sizes = ["--subs", "200", "--events", "20", "--checkpoints", "1", "--repeat", "1"]
    args = build_parser().parse_args(["bench", "adapt", *sizes, "--out", str(tmp_path)])
    # The bench collects garbage before each of its 81 timed passes: a full collection
    # walks every object of this worker's earlier tests unless they are frozen out of it.
    gc.freeze()
    try:
        assert args.bench_main(args) == 0
    finally:
        gc.unfreeze()
    results = json.loads((tmp_path / "results.json").read_text())
    assert [r["zipf_share"] for r in results["rows"]] == [0.0, 1.0, 0.0]
    assert (tmp_path / "adapt_ms.png").stat().st_size > 0
    assert "recycled" in bench_adapt.format_table(results["rows"])


def test_reader_snapshots_adjust_when_due(tmp_path: Path) -> None:
    """``bexdb serve`` matches through Index snapshots: windows flush after them."""
    rng = random.Random(3)
    with _open(str(tmp_path), adjust=1, adjust_window=10) as idx:
        idx.subscribe_many([(k, expression(rng)) for k in range(60)])
        for _ in range(5):
            with idx.snapshot() as match:
                for _ in range(6):
                    match(idx.schema.validate_event(event(rng)))
        with idx.store.read() as txn:
            assert load_state(txn)["events"] == 24  # flushed after snapshots 2 and 4
        idx.check()
    with Index.open(str(tmp_path), readonly=True) as ro:  # read-only: nothing collected
        ro.match(event(rng))
        assert ro.adjustment.collector is None


def test_cli_adjust(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s")
    with _open(store) as idx:
        idx.subscribe_many([(k, f"i = {k % 3} and j > {k}") for k in range(20)])
    assert cli_main(["adjust", store, "--on", "--window", "7", "--theta", "-2"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["adjust"], shown["adjust_window"], shown["theta"]) == (1, 7, -2)
    with Index.open(store) as idx:
        for k in range(9):
            idx.match({"i": k % 3, "j": k})
    assert cli_main(["adjust", store, "--off", "--now"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["adjust"] == 0 and shown["events_flushed"] == 9 and "ran" in shown
    assert cli_main(["adjust", store, "--window", "0"]) == 3  # invalid input
