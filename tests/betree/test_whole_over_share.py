"""A whole view too big for the page cache's share whose interval matcher is no cheaper
than the walks (rich rules: the walks reach most clauses, the keys find few) is held
whole within ``LEAN_TIMES`` the cache's budget, the share taken
(:meth:`betree.packed.held.FlatSlot.get`, ``whole``), not given up for the walks; past
that bound the pages are walked.  Rich rules' tree shape says their intervals would not
pay: the whole view is built first, no lean one built and thrown away.  A held view that
grows past its bound (its numbering for batches) is dropped, and the next one is tried
lean, never whole again.  Answers against the brute force, one by one and in batches,
through writes (the delta, a fold) and reopening."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk import catalog
from betree.disk.tree import BETree
from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import leanbuild, ranging
from betree.packed.delta import Based, Delta
from betree.packed.flat import build
from betree.packed.flatbatch import Shard
from betree.packed.held import LEAN_TIMES
from betree.packed.intervals import Intervals, parts
from betree.stores.sharded import (
    HASH,
    ShardedIndex,
    open_index,
    shard_name,
    shard_of,
    write_manifest,
)
from storage.codec import encode_id
from tests.support.brute import brute
from tests.support.workload import SCHEMA, expression
from tools.bench import gen_rich

#: the page cache: 4x holds the whole view of 600 rich rules (~0.3 MB), its share does not
CACHE = 1 << 20
SHARE = 8 << 10


@pytest.fixture(scope="module")
def rich() -> tuple[dict[str, Any], dict[Any, str], list[Any]]:
    schema_doc, subs_list, events, _ = gen_rich.make(
        600, 60, check=False, seed=37, target_rate=0.01
    )
    return schema_doc, dict(subs_list), events


@pytest.fixture
def costly(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Intervals always worth trying (built lean from the pages first), never cheaper
    than the walks (as rich 1M's at the default cache); the lean builds counted."""
    built: list[int] = []
    lean_view = leanbuild.lean_view

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return lean_view(*args, **kwargs)

    monkeypatch.setattr(leanbuild, "lean_view", counted)
    monkeypatch.setattr(ranging.Ranging, "worth", lambda self, clauses, unbounded=0: True)
    monkeypatch.setattr(ranging.Ranging, "lean", lambda self, based, limit: None)
    return built


def _check(
    idx: Index | ShardedIndex, subs: dict[Any, str], schema: Schema, events: list[Any]
) -> None:
    want = [brute(subs, schema, ev) for ev in events]
    for ev, expected in zip(events, want, strict=True):
        got = idx.match(ev)
        assert len(got) == len(set(got)), ev
        assert set(got) == expected, ev
    for batch in (events, events[:3]):
        for ev, got, expected in zip(batch, idx.match_many(batch), want, strict=False):
            assert sorted(got, key=repr) == sorted(expected, key=repr), ev


def _small(idx: Index) -> None:
    idx.engine.flat.after = 0
    idx.engine.flat.share = SHARE


def _whole_held(idx: Index) -> None:
    flat = idx.engine.flat
    held = flat.held(flat.held_gen())
    assert held is not None and held.view.ranged is None and len(held.view.rows) > 0
    assert SHARE < held.view.nbytes <= LEAN_TIMES * idx.engine.store.cache.budget
    assert idx.engine.store.cache.max_bytes == idx.engine.store.cache.budget - SHARE


def test_whole_view_over_its_share_is_held(
    tmp_path: Path, costly: list[int], rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    rng = random.Random(37)
    with Index.open(tmp_path, schema=schema_doc, cache_bytes=CACHE) as idx:
        idx.subscribe_many(subs.items())
        _small(idx)
        _check(idx, subs, schema, events)
        assert costly, "the lean build from the pages was not tried first"
        _whole_held(idx)
        builds = idx.engine.flat.builds
        for ident in rng.sample(sorted(subs, key=repr), 40):  # the delta, then a fold
            idx.unsubscribe(ident)
            del subs[ident]
        moved = list(subs.items())[:30]
        for ident, expr in moved:
            idx.subscribe(f"again-{ident}", expr)
            subs[f"again-{ident}"] = expr
        _check(idx, subs, schema, events)
        idx.engine.flat.wait()
        _check(idx, subs, schema, events[:20])
        assert idx.engine.flat.builds >= builds
        _whole_held(idx)
        idx.check()
    with Index.open(tmp_path, cache_bytes=CACHE) as idx:
        _small(idx)
        _check(idx, subs, schema, events)
        _whole_held(idx)


def test_whole_view_past_the_bound_walks(
    tmp_path: Path, costly: list[int], rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    with Index.open(tmp_path, schema=schema_doc, cache_bytes=16 << 10) as idx:
        idx.subscribe_many(subs.items())
        _small(idx)
        idx.engine.flat.share = 4 << 10
        _check(idx, subs, schema, events)
        assert not idx.engine.flat.describe()["held"]
        assert idx.engine.store.cache.max_bytes == idx.engine.store.cache.budget


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lean builds from the pages counted, intervals never cheaper than the walks (as
    rich 1M's; here, rich 600, the whole view's intervals would be stripped to: the shape's
    estimate errs, 40% unbounded against ~30%, and ``_fit`` still tries them on the
    whole view), whether to try them left to the shape."""
    monkeypatch.setattr(ranging.Ranging, "lean", lambda self, based, limit: None)
    built: list[int] = []
    lean_view = leanbuild.lean_view

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return lean_view(*args, **kwargs)

    monkeypatch.setattr(leanbuild, "lean_view", counting)
    return built


def test_whole_view_built_first_by_the_shape(
    tmp_path: Path, counted: list[int], rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    with Index.open(tmp_path, schema=schema_doc, cache_bytes=CACHE) as idx:
        idx.subscribe_many(subs.items())
        _small(idx)
        idx.match(events[0])  # (walked: the walks' cost known)
        with idx.engine.store.read() as txn:
            tree = BETree(txn, catalog.root_record(txn))
            unbounded = leanbuild.unbounded(tree, idx.engine.types)
        assert not idx.engine.ranging.worth(len(subs), unbounded)
        assert idx.engine.ranging.worth(len(subs))  # (the bitsets alone would pay)
        _check(idx, subs, schema, events)
        assert not counted, "a lean view was built from the pages and thrown away"
        _whole_held(idx)
        assert idx.engine.flat.builds == 1


def test_held_view_grown_past_its_bound_is_dropped(
    tmp_path: Path, costly: list[int], rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    batch = events * 3  # (past flatbatch.LEAST: the view numbers its atoms and rows)
    with Index.open(tmp_path, schema=schema_doc, cache_bytes=CACHE) as idx:
        idx.subscribe_many(subs.items())
        _small(idx)
        _check(idx, subs, schema, events[:5])
        taken = idx.engine.flat.describe()["bytes"]
        idx.match_many(batch)
        grown = idx.engine.flat.describe()["bytes"]
    assert taken < grown
    with Index.open(tmp_path, cache_bytes=CACHE) as idx:
        _small(idx)
        flat, cache = idx.engine.flat, idx.engine.store.cache
        _check(idx, subs, schema, events[:5])
        flat.limit = (taken + grown) // 2  # (taken within the bound, grown past it)
        assert flat.describe()["bytes"] == taken and not flat.outgrown
        lean_before = len(costly)
        idx.match_many(batch)
        idx.match(events[0])  # (counted again: past the bound, dropped)
        assert flat.outgrown and not flat.describe()["held"]
        assert cache.max_bytes == cache.budget  # (the share given back)
        _check(idx, subs, schema, events)  # (walked; then tried lean from the pages)
        assert len(costly) > lean_before, "the other view was not tried"
        assert not flat.describe()["held"]  # (its intervals no cheaper: walks)
        builds = flat.builds
        _check(idx, subs, schema, events)
        assert flat.builds == builds  # (no whole view built again)


def test_sharded_store_holds_whole_views_built_first(
    tmp_path: Path, counted: list[int], rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    parts: list[list[tuple[Any, str]]] = [[], []]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), 2)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(tmp_path / shard_name(k), schema=schema_doc) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(tmp_path, entries, {"by": "id", "hash": HASH, "shards": 2})
    with open_index(tmp_path, readonly=False, cache_bytes=2 * CACHE) as store:
        for shard in store.indexes:
            _small(shard)
        _check(store, subs, schema, events)
        assert not counted
        for shard in store.indexes:
            _whole_held(shard)
        gone = sorted(subs, key=repr)[::7]  # (a write: each shard's delta, or a new view)
        store.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        _check(store, subs, schema, events)
        assert not counted


def _unbounded_counts(path: Path, schema_doc: dict[str, Any], subs: dict[Any, str]) -> None:
    with Index.open(path, schema=schema_doc) as idx:
        idx.subscribe_many(subs.items())
        engine = idx.engine
        with engine.store.read() as txn:
            rec, snap = catalog.root_record(txn), engine.snapshot(txn)
            tree = BETree(txn, rec)
            based = Based(build(tree, snap.trees), snap.grouped, rec["next_atom"], Delta.empty(rec))
            shard = Shard(based.view, based.grouped, 0, 0, based.atoms)
            exact = Intervals(parts([shard]), engine.types).unbounded
            assert 0 < exact < len(based.view.exts)
            assert ranging.unbounded(based, engine.types) == exact
            estimate = leanbuild.unbounded(tree, engine.types)
            assert exact / 2 <= estimate <= len(based.view.exts)


def test_unbounded_clauses_counted_before_building(
    tmp_path: Path, rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    """:func:`ranging.unbounded` on a whole view is the matcher's own count, known before
    building it; the tree's shape (:func:`leanbuild.unbounded`) estimates it: rich rules,
    and every operator with clauses of more than a row (8 atoms), some bounded by their
    last atom alone, some by none."""
    schema_doc, subs, _ = rich
    _unbounded_counts(tmp_path / "rich", schema_doc, subs)
    rng = random.Random(39)
    mixed: dict[Any, str] = {i: expression(rng) for i in range(300)}
    for k in range(30):
        strings = " and ".join(f's != "{k}-{n}"' for n in range(9))
        mixed[f"long{k}"] = f"{strings} and i > {k % 7}"
        mixed[f"open{k}"] = " and ".join(f"j != {k + n}" for n in range(10))
    _unbounded_counts(tmp_path / "mixed", SCHEMA, mixed)
