"""Matching while subscriptions change: per-commit state kept across commits
(:mod:`betree.matching.snapshot`), packed views with a delta of what was written since."""

from __future__ import annotations

import gc
import json
import math
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree import engine as index_module
from betree.disk import pending
from betree.disk.catalog import root_record
from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import delta, flatbatch
from betree.stores.live import LiveIndex
from betree.stores.sharded import ShardedIndex
from tests.support.brute import brute
from tests.support.workload import SCHEMA as WORKLOAD
from tests.support.workload import build_hashed, event, expression
from tests.support.writers import writer_batches

SCHEMA_ = Schema.from_json(WORKLOAD)
TAGS = {
    "attributes": {
        "n": {"type": "int"},
        "tags": {"type": "string_list"},
        "flag": {"type": "bool"},
    }
}


def test_a_commit_decodes_only_the_attributes_it_changed(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=TAGS) as idx:
        idx.subscribe_many([(1, '"a" in tags'), (2, "flag = true"), (3, "n > 3")])
        with idx.store.read() as txn:
            first = idx.engine.snapshot(txn).grouped
        assert sorted(first) == ["flag", "tags"]
        idx.subscribe(4, '"b" in tags')  # a new direct atom of tags only
        with idx.store.read() as txn:
            second = idx.engine.snapshot(txn).grouped
        assert idx.engine._records.decoded == ["tags"]
        assert second["flag"] is first["flag"] and second["tags"] is not first["tags"]
        idx.subscribe(5, "n > 3 and flag = true")  # shares its atoms: no record changes
        with idx.store.read() as txn:
            assert idx.engine.snapshot(txn).grouped["tags"] is second["tags"]
        assert idx.engine._records.decoded == []
        assert sorted(idx.match({"n": 4, "tags": ["b"], "flag": True})) == [2, 3, 4, 5]
        idx.unsubscribe(4)
        assert sorted(idx.match({"n": 4, "tags": ["b"], "flag": True})) == [2, 3, 5]
        idx.check()


def test_a_small_write_catches_the_view_up_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write of a few subscriptions brings this process's held view to its commit (the
    next match pays no catch-up); a larger one leaves it to the next match.  Either way
    the answers are the brute force's and no view is rebuilt."""
    rng = random.Random(5)
    subs: dict[Any, str] = {k: expression(rng) for k in range(60)}
    with Index.open(tmp_path, schema=WORKLOAD) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        ev = event(rng)
        _check_answers(idx.match(ev), subs, ev, "first")
        builds = idx.engine.flat.builds
        for k in range(30):
            if k % 5 == 4:
                gone = rng.choice(sorted(subs))
                assert idx.unsubscribe(gone)
                del subs[gone]
            else:
                ident = rng.choice([100 + k, *subs])  # new or a replacement
                subs[ident] = expression(rng)
                idx.subscribe(ident, subs[ident])
            with idx.store.read() as txn:
                assert idx.engine.flat.held_gen() == txn.gen, k
            ev = event(rng)
            _check_answers(idx.match(ev), subs, ev, f"write {k}")
        monkeypatch.setattr(index_module, "CATCH_UP_WRITES", 3)
        batch = [(200 + k, expression(rng)) for k in range(4)]
        idx.subscribe_many(batch)
        subs.update(batch)
        with idx.store.read() as txn:
            assert idx.engine.flat.held_gen() < txn.gen
            gen = txn.gen
        ev = event(rng)
        _check_answers(idx.match(ev), subs, ev, "batch")
        assert idx.engine.flat.held_gen() == gen and idx.engine.flat.builds == builds
        idx.check()


def test_removed_int_ids_are_masked_in_the_view_answers(tmp_path: Path) -> None:
    """A held view's answers (int ids: one int64 array) less the ids unsubscribed or
    replaced since its base (:meth:`betree.packed.delta.Delta.mask`, by one search of the
    sorted removed ids), at the ends of int64 too; against the brute force."""
    schema = Schema.from_json(TAGS)
    edges = [-(2**63), -(2**63) + 1, -1, 0, 1, 2**62, 2**63 - 2, 2**63 - 1]
    subs: dict[Any, str] = {k: "n > 3" for k in [*edges, *range(2, 40)]}
    with Index.open(tmp_path, schema=TAGS) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        events = [{"n": 5}, {"n": -3}, {"n": 5, "flag": True}]
        for ev in events:
            assert set(idx.match(ev)) == brute(subs, schema, ev)
        rng = random.Random(3)
        for k, ident in enumerate(rng.sample(sorted(subs), 24)):
            if k % 3 == 0:
                assert idx.unsubscribe(ident)
                del subs[ident]
            else:  # replaced: by one that holds for n = 5 (kept) or not (masked)
                subs[ident] = "n > 4" if k % 3 == 1 else "n < 0"
                idx.subscribe(ident, subs[ident])
            for ev in events:
                assert set(idx.match(ev)) == brute(subs, schema, ev), (k, ident, ev)
        with idx.store.read() as txn:
            based = idx.engine.flat.held(txn.gen)
        assert based is not None and based.view.exts.dtype == np.int64
        assert len(based.delta.removed) == 24 and idx.engine.flat.builds == 1
        idx.check()


def test_a_fold_runs_in_the_background(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A delta due for folding is matched (exactly) while a new base is built in a thread
    (started by the write that made it due, which caught the view up), which a later
    match takes in; one far past its bound is folded at once by the next match."""
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)
    rng = random.Random(6)
    subs: dict[Any, str] = {k: expression(rng) for k in range(60)}
    with Index.open(tmp_path, schema=WORKLOAD) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0

        def check(where: str) -> None:
            ev = event(rng)
            _check_answers(idx.match(ev), subs, ev, where)

        check("first")
        assert idx.engine.flat.builds == 1
        gate = threading.Event()  # (the fold held until the held view's state is seen)
        build = idx.engine.flat.background
        assert build is not None

        def gated() -> Any:
            gate.wait()
            return build()

        idx.engine.flat.background = gated
        batch = [(100 + k, expression(rng)) for k in range(12)]
        idx.subscribe_many(batch)  # due: caught up by the write, a fold started aside
        subs.update(batch)
        with idx.store.read() as txn:
            assert idx.engine.flat.held_gen() == txn.gen
        assert idx.engine.flat.builds == 1 and idx.engine.flat.describe()["added"] > 8
        check("due")  # answers from the held view and its delta while the fold runs
        gate.set()
        idx.engine.flat.wait()
        check("taken in")
        assert idx.engine.flat.builds == 2 and idx.engine.flat.describe()["added"] == 0
        batch = [(200 + j, expression(rng)) for j in range(80)]  # past BEHIND times the bound
        idx.subscribe_many(batch)
        subs.update(batch)
        with idx.store.read() as txn:
            assert idx.engine.flat.held_gen() < txn.gen  # not caught up by the write
        check("far behind")  # folded at once
        assert idx.engine.flat.builds == 3 and idx.engine.flat.describe()["added"] == 0
        idx.check()


# -- differential: random interleavings of writes, matches and maintenance -----------------


@pytest.fixture(autouse=True)
def _every_batch_deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch's clauses wait in the pending area (betree.disk.pending), however small."""
    monkeypatch.setattr(pending, "DEFER_FROM", 1)
    monkeypatch.setattr(pending, "DEFER_STORE", 0)


def _indexes(store: Any) -> list[Index]:
    return store.indexes if isinstance(store, ShardedIndex) else [store.index]


def _eager(live: LiveIndex, margin: float | None = None) -> Any:
    """The store now, every shard building its view at its first event (so that the
    views, their deltas and folds are what the matches use); with ``margin``, the views
    matched by intervals (``math.inf``) or on the tree (0) from the first event."""
    store = live.current()
    for idx in _indexes(store):
        idx.engine.flat.after = 0
        if margin is not None:
            idx.engine.ranging.after, idx.engine.ranging.margin = 0, margin
    return store


def _forbidding_direct(
    live: LiveIndex, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[dict[str, Any]]]:
    """The live store's current object with ``Delta.direct`` (every atom of a delta tested
    event by event) made to fail, and each index's description of its view and delta."""

    def direct(*args: object) -> None:
        raise AssertionError("every atom of a delta tested event by event")

    monkeypatch.setattr(delta.Delta, "direct", direct)
    store = _eager(live, 0)
    return store, [idx.engine.flat.describe() for idx in _indexes(store)]


def _check_answers(got: list[Any], subs: dict[Any, str], ev: dict[str, Any], where: str) -> None:
    assert len(got) == len(set(got)), f"an id returned twice ({where})"
    assert set(got) == brute(subs, SCHEMA_, ev), where


def _pending(live: LiveIndex) -> bool:
    """Whether a shard has clauses waiting for placement (betree.disk.pending)."""
    for idx in _indexes(live.current()):
        with idx.store.read() as txn:
            if root_record(txn).get("pending_from") is not None:
                return True
    return False


def test_only_big_stores_defer_and_their_area_stays_a_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch into a store under ``DEFER_STORE`` subscriptions is placed at once (a small
    tree places cheaply; pending clauses would be much of what each event walks); past
    it a batch defers, and the area is placed once past ``PLACE_SHARE`` of the store,
    though well under ``PLACE_CLAUSES``; answers equal the brute force throughout."""
    monkeypatch.setattr(pending, "DEFER_FROM", 10)
    monkeypatch.setattr(pending, "DEFER_STORE", 200)
    monkeypatch.setattr(pending, "PLACE_SHARE", 1 / 4)
    rng = random.Random(36)
    subs: dict[Any, str] = {}
    seen = []
    with Index.open(tmp_path / "s", schema=WORKLOAD) as idx:
        for k in range(8):
            batch = [(100 * k + i, expression(rng)) for i in range(100)]
            idx.subscribe_many(batch)
            subs.update(batch)
            idx.check()
            with idx.store.read() as txn:
                rec = root_record(txn)
                seen.append(rec.get("pending_from") is not None)
            for _ in range(5):
                ev = event(rng)
                assert set(idx.match(ev)) == brute(subs, SCHEMA_, ev)
    # 100 and 200 before their batches: placed at once; then deferred, placed at a quarter
    assert seen[:2] == [False, False] and True in seen[2:] and False in seen[3:], seen


def bexdb(*argv: str) -> None:
    """A ``bexdb`` command in a process of its own (one LMDB environment of a path per
    process: this one holds the store open)."""
    run = [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())"]
    done = subprocess.run([*run, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def interleave(
    path: Path, seed: int, steps: int, sharded: bool, margin: float | None = None
) -> None:
    """Random subscribe, replace, unsubscribe, subscribe_many, match, match_many, reopen,
    compact and (plain stores) ``load --replace``, every answer against the brute force
    (``margin``: :func:`_eager`'s).  Batches leave their clauses pending
    (:mod:`betree.disk.pending`), placed before some matches (a generator of their own:
    the other steps as before); matches with clauses pending and placements are counted."""
    rng = random.Random(seed)
    placing = random.Random(seed + 1000)
    subs: dict[Any, str] = {f"s{k}": expression(rng) for k in range(40)}
    if sharded:
        build_hashed(path, subs)
    else:
        with Index.open(path, schema=WORKLOAD) as idx:
            idx.subscribe_many(subs.items())
    live = LiveIndex(path, readonly=False)
    builds: dict[int, int] = {}  # views built, by index object (a fold is a build past one)
    kinds = ("subscribe", "subscribe_many", "unsubscribe", "match", "match_many", "reopen")
    kinds += ("compact", "load")  # by the bounds of r below (sharded: no load)
    done: set[str] = set()  # the kinds of step taken: every one, at the end
    try:
        for step in range(steps):
            r = rng.random()
            where = f"seed {seed} step {step}"
            kind = kinds[sum(r >= bound for bound in (0.2, 0.3, 0.42, 0.7, 0.82, 0.9, 0.95))]
            kind = "match" if kind == "unsubscribe" and not subs else kind  # as below
            if r < 0.2:
                ident: Any = rng.choice([*subs, f"n{step}", step]) if subs else step
                expr = expression(rng)
                new = live.write(lambda idx: idx.subscribe(ident, expr))  # noqa: B023
                assert new == (ident not in subs), where
                kind = "subscribe" if new else "replace"
                subs[ident] = expr
            elif r < 0.3:
                batch = [(rng.choice([f"m{step}-{k}", *subs]), expression(rng)) for k in range(9)]
                batch.append((batch[0][0], expression(rng)))  # an id twice: the last wins
                created = live.write(lambda idx: idx.subscribe_many(batch))  # noqa: B023
                expect = []
                for ident, expr in batch:
                    expect.append(ident not in subs)
                    subs[ident] = expr
                assert created == expect, where
            elif r < 0.42 and subs:
                gone = rng.sample(sorted(subs, key=repr), min(len(subs), rng.choice([1, 3])))
                found = live.write(lambda idx: idx.unsubscribe_many([*gone, "absent"]))  # noqa: B023
                assert found == [True] * len(gone) + [False], where
                for ident in gone:
                    del subs[ident]
            elif r < 0.7:
                if placing.random() < 0.2:
                    moved = live.write(lambda idx: sum(i.engine.place() for i in idx.indexes))
                    done.update(["place"] if moved else [])
                done.update(["pending"] if _pending(live) else [])
                ev = event(rng)
                _check_answers(_eager(live, margin).match(ev), subs, ev, where)
            elif r < 0.82:
                evs = [event(rng) for _ in range(rng.choice([3, 130]))]  # one by one, a batch
                for got, ev in zip(_eager(live, margin).match_many(evs), evs, strict=True):
                    _check_answers(got, subs, ev, where)
            elif r < 0.9:
                live.close()
                live = LiveIndex(path, readonly=False)
            elif r < 0.95:
                bexdb("compact", str(path))
            elif not sharded:
                data = path.parent / "replace.jsonl"
                subs = dict(list(subs.items())[: len(subs) // 2])
                lines = [json.dumps({"id": i, "expr": e}) for i, e in subs.items()]
                data.write_text("".join(line + "\n" for line in lines))
                schema = path.parent / "schema.json"
                schema.write_text(json.dumps(WORKLOAD))
                argv = ["load", "--engine", "python", "--replace", "--schema", str(schema)]
                bexdb(*argv, str(path), str(data))
            done.add(kind)
            for idx in _indexes(live.current()):
                builds[id(idx)] = idx.engine.flat.builds
            if step % 40 == 39:
                live.current().check()
        live.current().check()
        assert sum(n - 1 for n in builds.values() if n) > 0, "no delta was folded"
        every = {*kinds, "replace", "place", "pending"} - ({"load"} if sharded else set())
        assert done >= every, f"steps never taken: {every - done}"  # (steps too few)
    finally:
        live.close()


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [1, 2])
def test_plain_store_under_random_interleavings(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)  # a fold every few writes
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)
    interleave(tmp_path / "store", seed, 100, sharded=False)


def test_plain_store_by_intervals_under_random_interleavings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held view matched by intervals from the first event: its delta brought in by
    testing the atoms directly (``Delta.direct``), one event or a batch."""
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)
    interleave(tmp_path / "store", 5, 90, sharded=False, margin=math.inf)


@pytest.mark.parametrize("seed", [3])
def test_sharded_store_under_random_interleavings(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)
    interleave(tmp_path / "store", seed, 90, sharded=True)


@pytest.mark.parametrize("margin", [0, math.inf], ids=["tree", "intervals"])
def test_sharded_views_on_the_tree_and_by_intervals_under_interleavings(
    tmp_path: Path, margin: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The joined views' deltas applied from the tree's phase 1, and after the intervals."""
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)
    interleave(tmp_path / "store", 4, 90, sharded=True, margin=margin)


def test_a_sharded_match_after_a_batch_tests_only_the_newer_atoms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One event on the joined views takes the truths of the atoms older than each base
    from the tree's phase 1 (:meth:`betree.packed.joined.Joined.match` with the deltas),
    never testing every atom of the delta (``Delta.direct``: 42-48 ms an event after a
    batch of 1,000 at 100K); the answers are the brute force's."""
    rng = random.Random(8)
    subs: dict[Any, str] = {f"s{k}": expression(rng) for k in range(60)}
    path = tmp_path / "store"
    build_hashed(path, subs)
    live = LiveIndex(path, readonly=False)
    try:
        for _ in range(3):
            ev = event(rng)
            _check_answers(_eager(live, 0).match(ev), subs, ev, "before")
        batch = [(rng.choice([f"b{k}", *subs]), expression(rng)) for k in range(30)]
        live.write(lambda idx: idx.subscribe_many(batch))
        subs.update(batch)
        gone = sorted(subs)[:5]
        live.write(lambda idx: idx.unsubscribe_many(gone))
        for ident in gone:
            del subs[ident]

        store, deltas = _forbidding_direct(live, monkeypatch)
        for _ in range(20):
            ev = event(rng)
            _check_answers(store.match(ev), subs, ev, "after")
        assert all(d["held"] for d in deltas) and sum(d["added"] for d in deltas) > 0
        assert sum(d["removed"] for d in deltas) > 0
        store.check()
    finally:
        live.close()


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
@pytest.mark.parametrize("words", [1, 0], ids=["word-passes", "one-pass"])
def test_a_batch_after_writes_takes_the_delta_from_its_own_phase_1(
    tmp_path: Path, sharded: bool, words: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``match_many`` on the tree after subscribe, subscribe_many, replace and unsubscribe
    (int and string ids) applies each view's delta from the batch's bitsets
    (:meth:`betree.packed.delta.Delta.batch_hits`: removed clauses dropped, added ones
    ANDed 64 events a word), never testing every atom of the delta (``Delta.direct``),
    in passes of one word or one pass; the answers are the brute force's."""
    rng = random.Random(11)
    subs: dict[Any, str] = {f"s{k}": expression(rng) for k in range(60)}
    path = tmp_path / "store"
    if sharded:
        build_hashed(path, subs)
    else:
        with Index.open(path, schema=WORKLOAD) as idx:
            idx.subscribe_many(subs.items())
    if words:  # a pass of one word (64 events) at a time
        monkeypatch.setattr(flatbatch, "SAT_BYTES", 8)
    live = LiveIndex(path, readonly=False)
    try:
        evs = [event(rng) for _ in range(flatbatch.LEAST)]
        for got, ev in zip(_eager(live, 0).match_many(evs), evs, strict=True):
            _check_answers(got, subs, ev, "before")
        batch = [(rng.choice([f"b{k}", k, *subs]), expression(rng)) for k in range(30)]
        live.write(lambda idx: idx.subscribe_many(batch))
        subs.update(batch)
        for ident in [*sorted(subs, key=repr)[:3], 1000]:
            expr = expression(rng)
            live.write(lambda idx: idx.subscribe(ident, expr))  # noqa: B023
            subs[ident] = expr
        gone = sorted(subs, key=repr)[3:8]
        live.write(lambda idx: idx.unsubscribe_many(gone))
        for ident in gone:
            del subs[ident]

        store, described = _forbidding_direct(live, monkeypatch)
        assert all(d["held"] for d in described) and sum(d["added"] for d in described) > 0
        assert sum(d["removed"] for d in described) > 0
        evs = [event(rng) for _ in range(300)]
        for lists in (False, True):
            found = store.match_many(evs) if lists else store.match_many_arrays(evs)
            for got, ev in zip(found, evs, strict=True):
                _check_answers(list(got), subs, ev, f"after, lists {lists}")
        store.check()
    finally:
        live.close()


# -- two processes: a writer's every commit seen by the next match here (SPEC section 7) --

WRITER = """
import random, sys
from betree.disk import pending
from betree.stores.sharded import open_index
from tests.support.writers import writer_batches
path, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pending.DEFER_FROM, pending.DEFER_STORE = 1, 0  # every batch pending until placed (every other)
with open_index(path, readonly=False) as store:
    for k, (batch, gone) in enumerate(writer_batches(seed, n)):
        store.subscribe_many(batch)
        if gone:
            store.unsubscribe_many(gone)
        if k % 2:  # the pending clauses placed (betree.disk.pending), in a commit of its own
            for shard in store.indexes:
                shard.engine.place()
        print(k, flush=True)
        sys.stdin.readline()  # the reader matched: next batch (the last one: killed in it)
"""


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_every_commit_of_another_process_seen_and_a_killed_writer(
    tmp_path: Path, sharded: bool
) -> None:
    path = tmp_path / "store"
    if sharded:
        build_hashed(path, {})
    else:
        Index.open(path, schema=WORKLOAD).close()
    rng = random.Random(5)
    n = 8
    every = writer_batches(5, n)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "5", str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    subs: dict[Any, str] = {}
    with LiveIndex(path) as live:
        try:
            for k in range(n - 1):
                assert int(proc.stdout.readline()) == k
                batch, gone = every[k]
                subs.update(batch)
                for ident in gone:
                    subs.pop(ident, None)
                store = _eager(live)
                for _ in range(4):  # the view caught up with each commit
                    ev = event(rng)
                    _check_answers(store.match(ev), subs, ev, f"batch {k}")
                evs = [event(rng) for _ in range(130)]
                for got, ev in zip(store.match_many(evs), evs, strict=True):
                    _check_answers(got, subs, ev, f"batch {k}, a batch")
                if k < n - 2:
                    proc.stdin.write("\n")
                    proc.stdin.flush()
            proc.stdin.write("\n")  # the last batch: killed somewhere in it
            proc.stdin.flush()
            time.sleep(rng.random() * 0.05)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        if sharded:  # SPEC section 10: the next open (here another process's) completes
            # or undoes a killed writer's batch; a reader open across the kill may see it half
            opener = (
                "import sys; from betree.stores.sharded import open_index; open_index(sys.argv[1])"
            )
            subprocess.run([sys.executable, "-c", opener, str(path)], check=True)
        store = _eager(live)
        present = dict(store.subscriptions())
        batch, gone = every[n - 1]
        if present != subs:  # the last batch committed before the kill: whole
            subs.update(batch)
            assert present == {i: e for i, e in subs.items() if i not in gone} or present == subs
            subs = present
        for _ in range(20):
            ev = event(rng)
            _check_answers(store.match(ev), subs, ev, "after the kill")
    with LiveIndex(path, readonly=False) as live:
        live.current().check()


def test_a_write_leaves_nothing_for_the_cyclic_collector(tmp_path: Path) -> None:
    """A write transaction (its decoded dirty pages, the records it wrote) is freed by
    reference counting when the write ends, not kept in a cycle until a full collection
    (a big heap makes those rare: rich 50K kept ~4 MB a single write until the next fold)."""
    from storage.txn import WriteTxn

    def open_txns() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, WriteTxn))

    rng = random.Random(7)
    with Index.open(tmp_path, schema=WORKLOAD) as idx:
        idx.subscribe_many([(i, expression(rng)) for i in range(300)])
        idx.engine.flat.after = 0  # a held view, caught up by each write below
        idx.match(event(rng))
        assert idx.engine.flat.held_gen() >= 0
        gc.collect()
        enabled = gc.isenabled()
        gc.disable()
        try:
            before = open_txns()
            idx.subscribe(1000, expression(rng))
            idx.subscribe(5, expression(rng))  # a replacement
            idx.unsubscribe(7)
            idx.subscribe_many([(1001 + i, expression(rng)) for i in range(20)])
            idx.unsubscribe_many([1001, 1002])
            idx.match(event(rng))
            assert open_txns() == before
        finally:
            if enabled:
                gc.enable()
