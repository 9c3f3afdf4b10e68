"""The packed view of a snapshot's tree (betree.packed.flat) against the page walk.

The answers of both are also checked against the brute-force evaluator in
test_index_differential (``flat=True``); here: the view reaches exactly the nodes the
walk visits (same candidate count, which an over-reaching view would not keep), its
building policy, its share of the page-cache budget, sharded stores, and edge ids.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.disk import grid
from betree.disk.tree import BETree
from betree.index import Index
from betree.lang.schema import Schema
from betree.packed.delta import Based, Delta
from betree.packed.flat import LEARN, WIDTH, FlatTree, build, pack_rows
from betree.packed.held import FlatSlot
from betree.stores.sharded import open_index
from storage.cache import PageCache
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, edge_atoms, edge_events
from tests.support.workload import SCHEMA, build_hashed, event, expression

SCHEMA_ = Schema.from_json(SCHEMA)

WIDE = {"attributes": {f"a{k}": {"type": "int", "min": 0, "max": 100} for k in range(12)}}


def _wide_expr(rng: random.Random) -> str:
    parts = []
    for attr in rng.sample(range(12), rng.randint(1, 11)):  # up to 11 atoms: two rows
        lo = rng.randint(0, 90)
        parts.append(f"a{attr} between {lo} and {lo + rng.randint(0, 40)}")
    expr = " and ".join(parts)
    return expr if rng.random() < 0.8 else f"({expr}) or a{rng.randrange(12)} = 3"


def _wide_event(rng: random.Random) -> dict[str, Any]:
    return {f"a{k}": rng.randint(0, 100) for k in range(12) if rng.random() < 0.8}


def _both(idx: Index, ev: dict[str, Any]) -> tuple[tuple[list[Any], int], tuple[list[Any], int]]:
    """(ids, candidates) from the walk, then from a view (its tree: never by intervals,
    which tests/betree/test_intervals.py checks)."""
    idx.engine.ranging.margin = 0
    idx.engine.flat.after = 1 << 40
    walked = sorted(idx.match(ev), key=repr), idx.engine.last_stats["candidates"]
    idx.engine.flat.after = 0
    viewed = sorted(idx.match(ev), key=repr), idx.engine.last_stats["candidates"]
    assert idx.engine.flat.describe()["held"]
    with idx.store.read() as txn:
        held = idx.engine.flat.held(txn.gen)
    if held is not None and held.view.by_key is not None:
        # matched by keys: the count is of the clauses whose key held, not of those reached
        viewed = viewed[0], walked[1]
    return walked, viewed


@pytest.mark.parametrize("seed", [1, 2])
def test_view_reaches_what_the_walk_visits(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with Index.open(tmp_path, schema=WIDE, settings={"max_cap": 4, "min_size": 2}) as idx:
        idx.subscribe_many((k, _wide_expr(rng)) for k in range(600))
        for k in rng.sample(range(600), 150):  # deletions: merged and emptied buckets
            idx.unsubscribe(k)
        idx.check()
        for _ in range(120):
            walked, viewed = _both(idx, _wide_event(rng))
            assert viewed == walked


def test_view_of_every_type_and_string_ids(tmp_path: Path) -> None:
    rng = random.Random(9)
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many((f"s-{k}\u00e9", expression(rng)) for k in range(300))
        for _ in range(80):
            walked, viewed = _both(idx, event(rng))
            assert viewed == walked


def test_empty_store_and_rows(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=WIDE) as idx:
        idx.engine.flat.after = 0
        assert idx.match({"a1": 5}) == []
        assert idx.engine.flat.describe()["held"]
        idx.subscribe(1, " and ".join(f"a{k} >= 1" for k in range(12)))  # 12 atoms
        idx.subscribe(2, "a0 = 5")
        with idx.store.read() as txn:
            view = build(BETree(txn, idx.engine.snapshot(txn).rec), {})
        assert view.rows.shape[1] == WIDTH
        assert len(view.row_at) == 3 and int(view.row_at[-1]) == 3  # two rows, then one
        assert sorted(idx.match({f"a{k}": 5 for k in range(12)})) == [1, 2]
        assert idx.match({f"a{k}": 5 for k in range(11)}) == [2]


def test_built_after_walks_and_kept_across_writes(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=WIDE) as idx:
        idx.subscribe_many((k, f"a1 between {k} and {k + 10}") for k in range(50))
        idx.engine.flat.after = 3
        for _ in range(3):
            idx.match({"a1": 20})
            assert not idx.engine.flat.describe()["held"]
        assert sorted(idx.match({"a1": 20})) == list(range(10, 21))
        held = idx.engine.flat.describe()
        assert held["held"] and held["bytes"] > 0 and idx.engine.flat.builds == 1
        cache = idx.store.cache
        assert cache.max_bytes == cache.budget // 4 + cache.budget % 4  # the view takes 3/4
        idx.subscribe(99, "a1 = 20")  # a new generation: the same view, and a delta
        idx.subscribe(12, "a1 = 7")  # replaced: masked in the view, matched in the delta
        assert sorted(idx.match({"a1": 20})) == [10, 11, *range(13, 21), 99]
        assert sorted(idx.match({"a1": 7})) == [0, 1, 2, 3, 4, 5, 6, 7, 12]
        held = idx.engine.flat.describe()
        assert held["held"] and (held["added"], held["removed"]) == (2, 1)
        assert idx.engine.flat.builds == 1
        idx.unsubscribe(99)
        assert sorted(idx.match({"a1": 20})) == [10, 11, *range(13, 21)]
        assert idx.engine.flat.describe()["added"] == 1
    assert not idx.engine.flat.describe()["held"]  # closing gives the bytes back
    assert idx.store.cache.max_bytes == idx.store.cache.budget


def test_built_once_the_walks_took_long_enough(tmp_path: Path) -> None:
    """However few the events, once the walks since the last view took
    ``walk_seconds`` (a dense store's walk reads most pages: 6.2 s at 1M)."""
    with Index.open(tmp_path, schema=WIDE) as idx:
        idx.subscribe_many((k, f"a1 between {k} and {k + 10}") for k in range(50))
        idx.engine.flat.after = 1000
        for _ in range(5):  # quick walks: no view
            assert sorted(idx.match({"a1": 20})) == list(range(10, 21))
        assert not idx.engine.flat.describe()["held"]
        idx.engine.flat.walk_seconds = 1e-9  # the walks so far took longer than that
        assert sorted(idx.match({"a1": 20})) == list(range(10, 21))
        assert idx.engine.flat.describe()["held"] and idx.engine.flat.builds == 1


def test_not_built_past_the_budget(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=WIDE, cache_pages=None) as idx:
        idx.subscribe_many((k, f"a1 between {k} and {k + 10}") for k in range(2000))
    with Index.open(tmp_path, readonly=True, cache_bytes=64 << 10) as idx:
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0  # (no interval matcher in its stead: test_intervals.py)
        for _ in range(3):
            assert sorted(idx.match({"a1": 20})) == list(range(10, 21))
        assert not idx.engine.flat.describe()["held"] and idx.engine.flat.builds == 0
        assert idx.store.cache.max_bytes == idx.store.cache.budget


def test_sharded_views(tmp_path: Path) -> None:
    rng = random.Random(4)
    subs: dict[Any, str] = {k: expression(rng) for k in range(400)}
    events = [event(rng) for _ in range(60)]
    root = build_hashed(tmp_path / "s", subs)
    with open_index(root, readonly=False) as store:
        for idx in store.indexes:
            idx.engine.flat.after = 0
        for ev in events[:30]:
            assert set(store.match(ev)) == brute(subs, SCHEMA_, ev)
        assert all(idx.engine.flat.describe()["held"] for idx in store.indexes)
        assert store.join is not None  # the shards' views joined
        before = store.join
        for ev in events[:30]:
            got = store.match(ev)
            assert len(got) == len(set(got)) and set(got) == brute(subs, SCHEMA_, ev)
        store.subscribe_many([(1000, "i >= 0"), (3, "j = 1")])  # a new one, a replacement
        subs.update({1000: "i >= 0", 3: "j = 1"})
        store.unsubscribe(7)
        del subs[7]
        for ev in events[30:]:
            assert set(store.match(ev)) == brute(subs, SCHEMA_, ev)
        assert store.join is before  # the join kept across the writes, with deltas


def test_joined_views_of_many_shards(tmp_path: Path) -> None:
    """Multi-clause subscriptions, string ids, direct atoms, deletions, across 5 shards:
    joined views against per-shard views, the walk and the brute-force evaluator."""
    rng = random.Random(21)
    subs: dict[Any, str] = {}
    for k in range(500):
        ident: Any = k if k % 3 else f"id-{k}\u00e9"
        subs[ident] = (
            f"({expression(rng)}) or ({expression(rng)})" if k % 4 == 0 else expression(rng)
        )
    root = build_hashed(tmp_path / "s", subs, shards=5)
    events = [event(rng) for _ in range(80)]
    with open_index(root, readonly=False) as store:
        walked = [sorted(store.match(ev), key=repr) for ev in events]
        for idx in store.indexes:
            idx.engine.flat.after = 0
        store.match(events[0])
        assert store.join is not None
        joined = [sorted(store.match(ev), key=repr) for ev in events]
        assert joined == walked
        for ev, got in zip(events, joined, strict=True):
            assert set(got) == brute(subs, SCHEMA_, ev)
        store.unsubscribe_many(list(subs)[:50])
        for ident in list(subs)[:50]:
            del subs[ident]
        assert all(set(store.match(ev)) == brute(subs, SCHEMA_, ev) for ev in events)


def test_page_cache_reservations() -> None:
    cache = PageCache(1000)
    for page in range(3):
        cache.publish(page, object(), 1, 1, 0)  # 512 bytes each: one fits in 1000
    assert len(cache) == 1
    assert not cache.reserve(800)
    assert cache.reserve(600)
    assert cache.max_bytes == 400 and len(cache) == 0  # the page evicted to fit
    assert not cache.reserve(200)  # would leave under a quarter
    cache.release(600)
    assert cache.max_bytes == 1000
    cache.release(600)
    assert cache.max_bytes == 1000  # never past the budget


EMPTY_REC = {"next_sid": 0, "subs": 0, "next_atom": 1}


def build_empty() -> FlatTree:
    """The view of an empty tree: its root alone."""
    nodes = {"node_attr": np.zeros(1, np.int32), "node_end": np.ones(1, np.int64)}
    nodes |= {"node_lo": np.zeros(1, np.uint64), "node_hi": np.zeros(1, np.uint64)}
    rows = pack_rows(np.empty(0, np.intp), np.empty(0, np.uint32))
    nodes |= {"clause_at": np.zeros(2, np.int64), "exts": np.empty(0)}
    return FlatTree({}, {}, {**nodes, **rows})


def test_slot_counts_walks_across_generations() -> None:
    """A view survives writes (betree.packed.delta), so the walks that pay for it count across
    generations; a generation older than the held view's walks."""
    slot = FlatSlot(PageCache(1 << 20), after=2)
    built: list[Any] = []

    def make() -> Any:
        built.append(Based(build_empty(), {}, 1, Delta.empty(EMPTY_REC)))
        return built[-1]

    assert slot.get(1, make, 10) is None
    assert slot.get(2, make, 10) is None
    assert slot.describe()["held"] is False
    assert slot.get(3, make, 10) is built[0] and slot.builds == 1
    assert slot.get(2, make, 10) is None  # older than the view: walked
    assert slot.get(4, make, 10, catch_up=lambda held: held) is built[0]
    assert slot.get(5, make, 10, catch_up=lambda held: None) is built[1]  # rebuilt at once
    assert slot.describe()["gen"] == 5 and slot.builds == 2


@pytest.mark.parametrize("top", [0xFFFF, 0x10000])
def test_rows_hold_each_clause_in_order(top: int) -> None:
    """Clauses of 1 to 20 atoms in rows of 8 padded with atom 0; 2-byte ids when all fit."""
    rng = random.Random(top)
    lens = np.array([rng.randint(1, 20) for _ in range(200)], dtype=np.intp)
    atoms = np.array([rng.randint(1, top) for _ in range(int(lens.sum()))], dtype=np.uint32)
    atoms[-1] = top
    made = pack_rows(lens, atoms)
    rows, row_at = made["rows"], made["row_at"]
    assert rows.dtype == (np.uint16 if top <= 0xFFFF else np.uint32)
    at = 0
    for k, n in enumerate(lens.tolist()):
        held = rows[row_at[k] : row_at[k + 1]].ravel()
        assert len(held) == -(-n // WIDTH) * WIDTH
        assert held[:n].tolist() == atoms[at : at + n].tolist() and not held[n:].any()
        at += n


@pytest.mark.parametrize("events_n", [100, 300])  # one by one on the view, and a batch
def test_batches_walked_and_on_a_view_match_alike(tmp_path: Path, events_n: int) -> None:
    rng = random.Random(12)
    subs: dict[Any, str] = {k: expression(rng) for k in range(300)}
    events: list[Any] = [event(rng) for _ in range(events_n)]
    events[7] = {"i": "not an int"}  # a bad event keeps its own error
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 1 << 40
        walked = idx.match_many(events)
        assert not idx.engine.flat.describe()["held"] and idx.engine.last_stats["pages"] > 0
        idx.engine.flat.drop()  # (the walks counted anew)
        idx.engine.flat.after = events_n - 1  # this batch's valid events count: the next builds
        idx.match_many(events)
        assert not idx.engine.flat.describe()["held"]
        viewed = idx.match_many(events)
        assert idx.engine.flat.describe()["held"]
        assert idx.engine.last_stats["pages"] == 0  # matched from the view
    assert isinstance(viewed[7], Exception) and str(viewed[7]) == str(walked[7])
    for k, (a, b) in enumerate(zip(walked, viewed, strict=True)):
        if k != 7:
            assert isinstance(a, list) and isinstance(b, list)
            assert sorted(a, key=repr) == sorted(b, key=repr)
            assert set(a) == brute(subs, SCHEMA_, events[k])


def test_clauses_of_many_rows(tmp_path: Path) -> None:
    """Clauses of 1 to 28 atoms (up to 4 rows) next to one-row ones, with deletions."""
    schema = {"attributes": {f"a{k}": {"type": "int", "min": 0, "max": 9} for k in range(28)}}
    rng = random.Random(3)

    def expr() -> str:
        picked = rng.sample(range(28), rng.randint(1, 28))
        return " and ".join(
            f"a{k} {rng.choice(['<=', '>=', '!='])} {rng.randint(0, 9)}" for k in picked
        )

    with Index.open(tmp_path, schema=schema, settings={"max_cap": 4, "min_size": 2}) as idx:
        idx.subscribe_many((k, expr()) for k in range(400))
        for k in range(0, 400, 7):
            idx.unsubscribe(k)
        for _ in range(60):
            ev = {f"a{k}": rng.randint(0, 9) for k in range(28) if rng.random() < 0.95}
            walked, viewed = _both(idx, ev)
            assert viewed == walked
        with idx.store.read() as txn:
            assert build(BETree(txn, idx.engine.snapshot(txn).rec), {}).max_rows == 4


@pytest.mark.parametrize("skewed", [False, True])
@pytest.mark.parametrize("most", [8, 28])
def test_rows_checked_under_any_truths(tmp_path: Path, most: int, skewed: bool) -> None:
    """Random atom truths against each reached clause checked atom by atom: the first
    LEARN events checked row by row, the next through each clause's key atom, and the
    others so too if few keys held (``skewed``: two atoms in three rarely hold), else row
    by row again (every atom holds for 93% of the events, so that long clauses often
    hold but for one row); clauses of one row, or of up to 4."""
    schema = {"attributes": {f"a{k}": {"type": "int", "min": 0, "max": 9} for k in range(28)}}
    rng = random.Random(8)
    with Index.open(tmp_path, schema=schema, settings={"max_cap": 4, "min_size": 2}) as idx:
        for k in range(300):
            picked = rng.sample(range(28), rng.randint(1, most))
            idx.subscribe(k, " and ".join(f"a{a} != {rng.randint(0, 9)}" for a in picked))
        with idx.store.read() as txn:
            snap = idx.engine.snapshot(txn)
            view = build(BETree(txn, snap.rec), {})
    assert view.max_rows == (4 if most == 28 else 1)
    rate = [0.02 if skewed and a % 3 else 0.93 for a in range(snap.next_atom)]
    for k in range(100):
        # keys chosen after LEARN events, dropped after as many more unless selective
        assert (view.key is not None) == (k >= LEARN and (skewed or k < 2 * LEARN))
        assert view.learnt == (k >= LEARN)
        coords = {f"a{k}": grid.coord("int", rng.randint(0, 9)) for k in range(28)}
        sat = np.array([rng.random() < r for r in rate])
        sat[0] = True
        expected = set()
        for node in view.reached(coords).tolist():
            for c in range(int(view.clause_at[node]), int(view.clause_at[node + 1])):
                if sat[view.rows[view.row_at[c] : view.row_at[c + 1]].ravel()].all():
                    expected.add(int(view.exts[c]))
        found, candidates = view.check(view.reached(coords), sat)  # (truths not an event's)
        assert sorted(found.tolist()) == sorted(expected)
        assert candidates == int(view.clause_at[view.reached(coords) + 1].sum()) - int(
            view.clause_at[view.reached(coords)].sum()
        )


def test_slot_skips_stores_that_cannot_fit() -> None:
    cache = PageCache(4000)  # a view may take 3,000 bytes
    slot = FlatSlot(cache, after=0)
    built: list[int] = []

    def make() -> Any:
        built.append(1)
        return type("Big", (), {"view": type("View", (), {"nbytes": 5000, "ranged": None})()})()

    assert slot.get(1, make, clauses=200) is None  # 200 clauses need >= 5,600 bytes
    assert built == [] and cache.max_bytes == 4000
    assert slot.get(1, make, clauses=10) is None  # may fit: built, found too big
    assert built == [1] and cache.max_bytes == 4000
    assert slot.get(2, make, clauses=10) is None  # not read again for nothing
    assert built == [1]
    slot = FlatSlot(cache, after=0)
    assert slot.get(1, make, clauses=10, predicates=lambda: 700) is None  # 3,080 bytes
    assert built == [1] and slot.get(1, make, clauses=10, predicates=lambda: 600) is None
    assert built == [1, 1]  # 2,680 bytes may fit: built, found too big


def test_view_at_the_ends_of_every_domain(tmp_path: Path) -> None:
    """Every comparison form with every edge literal (±2**63, ±max doubles, -0.0, planes'
    first and last code points), alone and in pairs, matched by edge events."""
    rng = random.Random(14)
    atoms = edge_atoms()
    subs = [*atoms, *(f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(400))]
    with Index.open(tmp_path, schema=EDGE_SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(enumerate(subs))
        for ev in edge_events():
            walked, viewed = _both(idx, ev)
            assert viewed == walked, ev
