"""Matching by the clauses' key atoms alone (:meth:`betree.packed.flat.FlatTree.match` once
the keys passed their trial: the tree's reach skipped) against the brute force, event by
event on rich rules: python-loaded and online, through deletes and additions (the delta),
reopened; with each event's ids in the order a batch gives them; stores of every
comparison type and of the edge literals, keys kept whatever their share held; and a
folded view's keys taken over from the view it replaces."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.matching import direct
from betree.matching.snapshot import Records
from betree.packed import delta, flat
from betree.packed.flat import LEARN
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, edge_atoms, edge_events
from tests.support.loads import python_loaded
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_rich


def _keyed(idx: Index) -> bool:
    """Whether the store's held view matches by keys."""
    with idx.store.read() as txn:
        held = idx.engine.flat.held(txn.gen)
    return held is not None and held.view.by_key is not None


def _sweep(idx: Index, subs: dict[Any, str], schema: Schema, events: list[Any]) -> int:
    """Every event matched one by one against the brute force; the matches found."""
    total = 0
    for ev in events:
        want = brute(subs, schema, ev)
        assert set(idx.match(ev)) == want, ev
        total += len(want)
    return total


def test_rich_events_one_by_one_by_keys(tmp_path: Path) -> None:
    schema_doc, subs_list, events, _ = gen_rich.make(
        600, 130, check=False, seed=41, target_rate=0.01
    )
    subs: dict[Any, str] = dict(subs_list)
    schema = Schema.from_json(schema_doc)
    assert any(len(ev) < len(schema_doc["attributes"]) for ev in events)  # absent attributes
    python_loaded(tmp_path / "py", subs, schema_doc)
    with Index.open(tmp_path / "py") as idx:
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0  # the tree, never intervals
        for ev in events[: 3 * LEARN]:  # the view, its keys learnt and on trial
            idx.match(ev)
        assert _keyed(idx)
        assert _sweep(idx, subs, schema, events) > 100
        batched = idx.match_many(events)
        assert batched == [idx.match(ev) for ev in events]  # the same ids in the same order
        items = list(subs.items())
        for ident, _ in items[::4]:  # deletes, then additions: the view's delta
            assert idx.unsubscribe(ident)
            del subs[ident]
        added = dict(gen_rich.make(80, 1, check=False, seed=42, target_rate=0.01)[1])
        idx.subscribe_many((f"n{k}", e) for k, e in added.items())
        subs.update({f"n{k}": e for k, e in added.items()})
        idx.check()
        _sweep(idx, subs, schema, events)
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0  # the tree, never intervals
        for ev in events[: 3 * LEARN]:
            idx.match(ev)
        assert _keyed(idx)
        _sweep(idx, subs, schema, events)


def test_rich_online_store_by_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Online, each event's geo atoms through the grid's batch form (as on a big grid)."""
    monkeypatch.setattr(direct, "GEO_LOOP_MOST", -1)
    schema_doc, subs_list, events, _ = gen_rich.make(
        500, 120, check=False, seed=43, target_rate=0.02
    )
    subs = {f"s{i}": e for i, e in subs_list}
    schema = Schema.from_json(schema_doc)
    with Index.open(tmp_path, schema=schema_doc, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0  # the tree, never intervals
        for ev in events[: 3 * LEARN]:
            idx.match(ev)
        assert _keyed(idx)
        assert _sweep(idx, subs, schema, events) > 50


def test_keys_of_every_type_and_edges_against_the_brute_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every comparison type (ints, floats, strings, lists, absent attributes) and the
    edge literals and events, the keys kept whatever share of them holds (so that the
    path runs on workloads whose keys would be dropped), events one by one against the
    brute force, through deletes."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    rng = random.Random(44)
    subs: dict[Any, str] = {k: expression(rng) for k in range(500)}
    atoms = edge_atoms()
    subs.update({f"e{k}": f"{rng.choice(atoms)} and {rng.choice(atoms)}" for k in range(300)})
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many((k, e) for k, e in subs.items() if not str(k).startswith("e"))
        for k in rng.sample(range(500), 80):
            idx.unsubscribe(k)
            del subs[k]
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0  # the tree, never intervals
        events = [event(rng) for _ in range(200)]
        for ev in events[: 3 * LEARN]:
            idx.match(ev)
        assert _keyed(idx)
        schema = Schema.from_json(SCHEMA)
        plain = {k: e for k, e in subs.items() if not str(k).startswith("e")}
        assert _sweep(idx, plain, schema, events) > 50
    with Index.open(tmp_path / "edge", schema=EDGE_SCHEMA, settings={"max_cap": 3}) as idx:
        edged = {k: e for k, e in subs.items() if str(k).startswith("e")}
        idx.subscribe_many(edged.items())
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0  # the tree, never intervals
        evs = edge_events()
        for ev in (evs * (1 + 3 * LEARN // len(evs)))[: 3 * LEARN]:
            idx.match(ev)
        assert _keyed(idx)
        _sweep(idx, edged, Schema.from_json(EDGE_SCHEMA), evs)


def _keys_are_atoms_of_their_clauses(view: flat.FlatTree) -> None:
    """Each clause's key and second key are atoms of its rows (what keeps the keyed match
    exact), the second another than the key unless padding."""
    assert view.key is not None and view.second is not None
    per = np.diff(view.row_at.astype(np.int64))
    clause = np.repeat(np.arange(len(per)), per)  # each row's clause
    for keys in (view.key, view.second):
        in_row = (view.rows == keys[clause][:, None]).any(axis=1)
        found = np.zeros(len(per), dtype=bool)
        np.logical_or.at(found, clause, in_row)
        assert (found | (keys == 0)).all()
        assert (found[per > 0] | (keys[per > 0] == 0)).all()
    assert ((view.key != view.second) | (view.second == 0)).all()


def _folding_rich_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Schema, dict[Any, str], list[Any], list[tuple[Any, str]]]:
    """A rich store in ``tmp_path / "py"`` whose deltas fold after 20 clauses or 40 atoms:
    its schema, subscriptions and events, and rules to add (sorted by id)."""
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 20)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 40)
    schema_doc, subs_list, events, _ = gen_rich.make(
        500, 100, check=False, seed=45, target_rate=0.01
    )
    subs: dict[Any, str] = dict(subs_list)
    python_loaded(tmp_path / "py", subs, schema_doc)
    added = sorted(gen_rich.make(230, 1, check=False, seed=46, target_rate=0.01)[1])
    return Schema.from_json(schema_doc), subs, events, added


def _learnt(idx: Index, events: list[Any]) -> None:
    """A view held at once, on the tree (never intervals), keyed by ``events``' counts."""
    idx.engine.flat.after = 0
    idx.engine.ranging.margin = 0
    for ev in events[: 3 * LEARN]:
        idx.match(ev)


def test_a_folded_view_takes_over_the_keys_and_the_trees_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view rebuilt by a fold (in the background, then at once) is keyed from its first
    event, with keys chosen from the counts its predecessor learnt (:mod:`betree.packed.carry`),
    the tree's choice carried over; otherwise the same arrays as a fresh build of its
    snapshot, whose direct atoms come prepared (their first match's indexes made in the
    fold); every answer against the brute force."""
    schema, subs, events, added = _folding_rich_store(tmp_path, monkeypatch)
    with Index.open(tmp_path / "py") as idx:
        slot = idx.engine.flat
        _learnt(idx, events)
        assert _keyed(idx) and idx.engine.ranging.describe()["decided"]
        items = list(subs.items())
        news = iter(added)
        for step, size in (("background", 25), ("at once", 200)):
            for ident, _ in items[:10]:
                assert idx.unsubscribe(ident)
                del subs[ident]
            items = items[10:]
            batch = [(f"n{k}", e) for k, e in (next(news) for _ in range(size))]
            idx.subscribe_many(batch)
            subs.update(batch)
            before = slot.builds
            slot.wait()  # (the background fold the batch started, if any)
            with idx.store.read() as txn:
                gen = txn.gen
            assert set(idx.match(events[0])) == brute(subs, schema, events[0])
            held = slot.held(gen)
            assert held is not None and slot.builds == before + 1, step  # folded
            view = held.view
            assert view.learnt and view.trial is None and view.by_key is not None, step
            assert idx.engine.ranging.describe()["decided"], step  # not watched again
            _keys_are_atoms_of_their_clauses(view)
            fresh_gen, fresh = flat.fresh_base(idx.store, Records(lambda k, w: k.decode()))
            assert fresh_gen == gen
            for name in flat.FlatTree.__slots__:
                mine, theirs = getattr(view, name), getattr(fresh.view, name)
                if isinstance(theirs, np.ndarray) and name not in ("key", "second", "counts"):
                    assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), name
            assert held.atoms == fresh.atoms and list(held.grouped) == list(fresh.grouped)
            assert all(atoms.one is not None for atoms in fresh.grouped.values())  # prepared
            _sweep(idx, subs, schema, events)
        idx.check()


def test_a_background_fold_takes_its_view_in_keyed_and_sized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold in the background does in its own thread what its view would cost the first
    match after it: once the fold is done, before any match, its view is the held one
    (the matching thread swaps nothing in), keyed from the counts of the view it replaced,
    its keys sorted and its atoms slotted as that one's were, within the page cache's
    share; every answer after against the brute force, on that same view."""
    schema, subs, events, added = _folding_rich_store(tmp_path, monkeypatch)
    with Index.open(tmp_path / "py") as idx:
        slot = idx.engine.flat
        _learnt(idx, events)
        with idx.store.read() as txn:
            held = slot.held(txn.gen)
        assert held is not None and held.view.slots is not None and _keyed(idx)
        for rnd in range(2):
            for ident in list(subs)[:5]:
                assert idx.unsubscribe(ident)
                del subs[ident]
            batch = [(f"n{k}", e) for k, e in added[10 * rnd : 10 * (rnd + 1)]]
            before = slot.builds
            idx.subscribe_many(batch)  # (past the bound: a fold started in the background)
            subs.update(batch)
            slot.wait()
            with idx.store.read() as txn:
                gen = txn.gen
            held = slot.held(gen)
            assert held is not None and slot.builds == before + 1, rnd  # in, unmatched
            view = held.view
            assert not held.delta.clauses and not held.delta.removed, rnd
            assert view.learnt and view.trial is None and view.by_key is not None, rnd
            assert view.slots is not None and len(view.slots.slot) == held.atoms, rnd
            assert slot.describe()["bytes"] <= slot.share, rnd
            _keys_are_atoms_of_their_clauses(view)
            assert _sweep(idx, subs, schema, events) > 0
            assert slot.held(gen) is held and slot.builds == before + 1, rnd  # the same view
        idx.check()
