"""A batch's truths by slot (:mod:`betree.packed.numbering`: each PB+tree list's atoms and
each attribute's direct defaults numbered consecutively, ORed as slices) against the same
batch's truths by atom id on every atom, and ``match_many`` on the numbered view against
the brute force: rich rules python-loaded (every form of the language, absent
attributes), events repeated in a batch, empty batches and batches of one matched as
batches, through deletes and additions (the delta reads the truths by atom id), reopened;
stores whose lists share atoms (``i < 3 or i > 9``) with the edge literals; and views
merged with themselves, every atom twice in its lists."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flatbatch
from betree.packed.numbering import Numbered
from pbtree.view import SearchView
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, edge_atoms, edge_events
from tests.support.loads import python_loaded
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_rich


def _tree(idx: Index) -> None:
    """The view built at once, matched on the tree (never by intervals)."""
    idx.engine.flat.after = 0
    idx.engine.ranging.margin = 0


def _numbered(idx: Index) -> Any:
    """The held view's numbering, made by a batch."""
    with idx.store.read() as txn:
        held = idx.engine.flat.held(txn.gen)
    assert held is not None and held.view.numbering is not None
    return held


def _same_truths(idx: Index, batch: list[Any]) -> int:
    """The batch's ``words x atoms`` truths with the view numbered equal those by atom id,
    every atom and word (columns brought back through the permutation); the atoms held."""
    engine = idx.engine
    with idx.store.read() as txn:
        based = engine.flat.held(txn.gen)
        assert based is not None
        view, numbered = based.view, based.view.numbering
        assert numbered is not None
        assert sorted(numbered.slot.tolist()) == list(range(based.atoms))  # a permutation
        schema = engine.schema_in(txn)
        values = [schema.validate_event(ev) for ev in batch]
    order, slots = flatbatch.arrange(values)
    ordered = [values[e] for e in order]
    where = flatbatch.Layout.of(slots)
    cols = flatbatch.columns(ordered, engine.types, where)
    args = (view, based.grouped, 0, 0, based.atoms)
    plain = flatbatch.Shard(*args)
    slotted = flatbatch.Shard(*args, None, numbered)
    want = flatbatch.satisfied(view.searches, [plain], ordered, cols, where)
    got = flatbatch.satisfied(view.searches, [slotted], ordered, cols, where)
    assert np.array_equal(got.take(numbered.slot, axis=1), want)
    return int(np.bitwise_count(want).sum())


def _sweep(idx: Any, subs: dict[Any, str], schema: Schema, batches: list[list[Any]]) -> int:
    """Each batch matched at once against the brute force, event by event; the matches."""
    total = 0
    for batch in batches:
        got = idx.match_many(batch)
        assert len(got) == len(batch)
        for ev, ids in zip(batch, got, strict=True):
            want = brute(subs, schema, ev)
            assert len(ids) == len(set(ids)) and set(ids) == want, ev
            total += len(want)
    return total


def _absent(rng: random.Random, events: list[Any]) -> list[Any]:
    """Copies of ``events`` with some top-level attributes left out."""
    out = []
    for ev in events:
        keep = {k: v for k, v in ev.items() if rng.random() < 0.6}
        out.append(keep)
    return out


@pytest.fixture(scope="module")
def rich() -> tuple[dict[str, Any], dict[Any, str], list[Any]]:
    schema_doc, subs_list, events, _ = gen_rich.make(
        700, 260, check=False, seed=71, target_rate=0.01
    )
    return schema_doc, dict(subs_list), events


def test_rich_batches_by_slot_against_the_brute_force(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rich: tuple[dict[str, Any], dict[Any, str], list[Any]],
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    rng = random.Random(72)
    python_loaded(tmp_path / "py", subs, schema_doc)
    twice = events[:90] * 2
    rng.shuffle(twice)
    absent = _absent(rng, events[:150])
    batches = [events, twice, absent + events[150:]]
    with Index.open(tmp_path / "py") as idx:
        _tree(idx)
        assert _sweep(idx, subs, schema, batches) > 200
        _numbered(idx)
        assert _same_truths(idx, events) > 0
        assert _same_truths(idx, absent) > 0
        assert idx.match_many([]) == []
        monkeypatch.setattr(flatbatch, "LEAST", 1)  # batches of one, as batches
        assert _sweep(idx, subs, schema, [[ev] for ev in events[:40]]) > 0
        _sweep(idx, subs, schema, [[], absent[:3], [events[5]] * 70])
        monkeypatch.undo()
        items = list(subs.items())
        for ident, _ in items[::3]:  # deletes, then additions: the view's delta
            assert idx.unsubscribe(ident)
            del subs[ident]
        added = {f"c{k}": e for k, e in items[1::3][:40]}
        fresh = gen_rich.make(15, 1, check=False, seed=73, target_rate=0.01)[1]
        added.update({f"n{k}": e for k, e in fresh})
        idx.subscribe_many(added.items())
        subs.update(added)
        idx.check()
        held = _numbered(idx)
        assert held.delta.clauses and held.delta.added
        assert _sweep(idx, subs, schema, batches) > 200
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        _tree(idx)
        assert _sweep(idx, subs, schema, batches) > 200
        _numbered(idx)
        _same_truths(idx, twice)


def test_shared_and_repeated_atoms_and_edges(tmp_path: Path) -> None:
    """Every comparison type, disjunctions of one attribute (an atom in GT and LT, or twice
    in one list: read through its items' slots), ``in`` lists of many values, absent
    attributes and the edge literals, through deletes."""
    rng = random.Random(74)
    subs: dict[Any, str] = {k: expression(rng) for k in range(400)}
    for k in range(150):
        a, b = sorted(rng.sample(range(-3, 24), 2))
        x, y = sorted(rng.sample(range(-100, 100), 2))
        forms = [f"i < {a} or i > {b}", f"i < {a} or i < {b}", f"i >= {a} or i >= {b}"]
        forms += [f"j < {x} or j > {y}", f"f <= {x / 20} or f > {y / 20}"]
        forms += [f"i in ({', '.join(str(v) for v in rng.sample(range(-3, 24), 9))})"]
        subs[f"o{k}"] = rng.choice(forms)
    schema = Schema.from_json(SCHEMA)
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(subs.items())
        _tree(idx)
        events = [event(rng) for _ in range(300)]
        assert _sweep(idx, subs, schema, [events]) > 50
        assert _same_truths(idx, events) > 0
        for k in rng.sample(range(400), 60):
            idx.unsubscribe(k)
            del subs[k]
        assert _sweep(idx, subs, schema, [events, events[:70] * 2]) > 50
    atoms = edge_atoms()
    edged = {f"e{k}": f"{rng.choice(atoms)} and {rng.choice(atoms)}" for k in range(300)}
    with Index.open(tmp_path / "edge", schema=EDGE_SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(edged.items())
        _tree(idx)
        evs = edge_events()
        evs = (evs * (1 + flatbatch.LEAST // len(evs)))[: max(len(evs), flatbatch.LEAST)]
        _sweep(idx, edged, Schema.from_json(EDGE_SCHEMA), [evs])
        _same_truths(idx, evs)


def test_lists_holding_an_atom_twice(tmp_path: Path) -> None:
    """Each tree's view merged with itself (every id twice in its lists, as shards' views
    of one atom would be: such a list is read through its items' slots, never as a slice)
    and with a shifted copy: a batch's truths by slot equal those by atom id."""
    rng = random.Random(75)
    subs = {k: expression(rng) for k in range(300)}
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(subs.items())
        _tree(idx)
        events = [event(rng) for _ in range(200)]
        idx.match_many(events)
        with idx.store.read() as txn:
            based = idx.engine.flat.held(txn.gen)
            assert based is not None
            schema = idx.engine.schema_in(txn)
            values = [schema.validate_event(ev) for ev in events]
    atoms = based.atoms
    order, slots = flatbatch.arrange(values)
    ordered = [values[e] for e in order]
    where = flatbatch.Layout.of(slots)
    cols = flatbatch.columns(ordered, idx.engine.types, where)
    for bases in ([0, 0], [0, atoms]):
        searches = {
            name: SearchView.merged([s, s], bases) for name, s in based.view.searches.items()
        }
        assert any(not p.distinct for s in searches.values() for p in (s.gt, s.lt, s.ne)) == (
            bases == [0, 0]
        )
        numbered = Numbered(searches, 2 * atoms, {}, np.zeros((0, 8), dtype=np.uint32))
        assert sorted(numbered.slot.tolist()) == list(range(2 * atoms))
        plain = flatbatch.Shard(cast(Any, None), {}, 0, 0, 2 * atoms)
        slotted = flatbatch.Shard(cast(Any, None), {}, 0, 0, 2 * atoms, None, numbered)
        want = flatbatch.satisfied(searches, [plain], ordered, cols, where)
        got = flatbatch.satisfied(searches, [slotted], ordered, cols, where)
        assert np.array_equal(got.take(numbered.slot, axis=1), want)
