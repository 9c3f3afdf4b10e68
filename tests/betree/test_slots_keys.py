"""A keyed view's keys numbered first of the rest (:mod:`betree.packed.numbering` with
``keys``), their truths read as one slice (:meth:`betree.packed.slots.Slots.candidates`);
the direct groups set in one loop (``Slots._direct``) and the PB+tree cuts from their
plans: against the same steps on the general route (keys gathered, groups through
:func:`betree.matching.direct.found`, lists through ``spans``) on every event, and the
answers against the brute force on rich rules, one by one and in batches (the batch's
numbering sharing the permutation), with attributes left undefined, through deletes and
additions, and reopened."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flat, flatbatch
from betree.packed import slots as slots_mod
from betree.packed.flat import LEARN
from betree.packed.views import numbered
from tests.support.brute import brute
from tests.support.loads import python_loaded
from tools.bench import gen_rich


def _settle(idx: Index, events: list[Any]) -> None:
    """The view built, its keys learnt, tried and settled, its slots made (events one
    by one: the slots before any batch's numbering)."""
    idx.engine.flat.after = 0
    idx.engine.ranging.margin = 0  # the tree, never intervals
    for ev in (events * (1 + 4 * LEARN // len(events)))[: 4 * LEARN]:
        idx.match(ev)


def _thinned(events: list[Any], seed: int) -> list[Any]:
    """The events, and copies with some top-level attributes left out (their groups'
    atoms true where undefined)."""
    rng = random.Random(seed)
    out = list(events)
    for ev in events[::2]:
        keep = [k for k in ev if rng.random() < 0.6]
        out.append({k: ev[k] for k in keep})
    return out


def _same_steps(idx: Index, events: list[Any], run: bool) -> int:
    """Each event's truths and clauses by the new steps equal the general route's; the
    keys' run present (``run``) as asserted.  The clauses found, summed."""
    engine = idx.engine
    total = 0
    with idx.store.read() as txn:
        based = engine.flat.held(txn.gen)
        assert based is not None
        view, slots = based.view, based.view.slots
        assert slots is not None and view.by_key is not None
        assert slots.grouped is based.grouped  # (the one loop's route, after writes too)
        keys = slots.by_key[0]
        m, lo, hi = slots.run
        assert (m < len(keys)) == run
        if run:  # the run's slots are the last keys, consecutive
            assert np.array_equal(keys[m:], np.arange(lo, hi))
            assert hi - lo >= slots_mod.KEY_RUN
        schema = engine.schema_in(txn)
        other = dict(based.grouped)  # (another mapping: the general route)
        plans = slots.plans
        for ev in events:
            values = schema.validate_event(ev)
            got = slots.truths(view.searches, based.grouped, engine.types, values)
            slots.plans = {}
            try:
                want = slots.truths(view.searches, other, engine.types, values)
            finally:
                slots.plans = plans
            assert np.array_equal(got, want), ev
            clauses = slots.candidates(got)
            hits, tested = slots.held(got)  # (against every candidate's rows at once)
            want_hits = view._clauses_held(np.sort(slots.by_key[2].take(clauses)), got, slots.rows)
            assert tested == len(clauses)
            assert np.array_equal(view._distinct(hits, True), want_hits), ev
            kept = slots.run
            slots.run = (len(keys), 0, 0)  # (every key gathered)
            try:
                assert np.array_equal(clauses, slots.candidates(got)), ev
            finally:
                slots.run = kept
            total += len(clauses)
    return total


def _sweep(idx: Index, subs: dict[Any, str], schema: Schema, events: list[Any]) -> int:
    """Every event matched one by one, then in batches, against the brute force."""
    wants = [brute(subs, schema, ev) for ev in events]
    for ev, want in zip(events, wants, strict=True):
        assert set(idx.match(ev)) == want, ev
    step = max(2, flatbatch.LEAST)
    for k in range(0, len(events), step):
        got = idx.match_many(events[k : k + step])
        assert [set(ids) for ids in got] == wants[k : k + step]
    return sum(map(len, wants))


@pytest.fixture(scope="module")
def rich() -> tuple[dict[str, Any], dict[Any, str], list[Any]]:
    schema_doc, subs_list, events, _ = gen_rich.make(
        700, 100, check=False, seed=71, target_rate=0.01
    )
    return schema_doc, dict(subs_list), _thinned(events, 72)


def test_keys_first_one_slice_and_direct_in_one_loop(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rich: tuple[dict[str, Any], dict[Any, str], list[Any]],
) -> None:
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    with Index.open(tmp_path / "py") as idx:
        _settle(idx, events)
        assert _same_steps(idx, events, True) > 0
        assert _sweep(idx, subs, schema, events) > 100
        with idx.store.read() as txn:  # the batch's numbering: the same permutation
            based = idx.engine.flat.held(txn.gen)
        assert based is not None and based.view.slots is not None
        numbering = numbered(based.view, based.atoms, based.grouped)
        assert np.array_equal(numbering.slot, based.view.slots.slot) and numbering.shared
        items = list(subs.items())
        for ident, _ in items[::4]:  # deletes, then additions: the view's delta
            assert idx.unsubscribe(ident)
            del subs[ident]
        fresh = gen_rich.make(20, 1, check=False, seed=73, target_rate=0.01)[1]
        added = {f"n{k}": e for k, e in fresh} | {f"c{k}": e for k, e in items[1::5][:30]}
        idx.subscribe_many(added.items())
        subs.update(added)
        idx.check()
        assert _sweep(idx, subs, schema, events) > 100
        _same_steps(idx, events, True)  # (the delta's view, before a fold)
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        _settle(idx, events)
        _same_steps(idx, events, True)
        _sweep(idx, subs, schema, events)


def test_batch_first_keeps_its_numbering(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rich: tuple[dict[str, Any], dict[Any, str], list[Any]],
) -> None:
    """A batch's numbering made before the keys settled: the slots keep its permutation
    (no keys first; rows shared), their keys gathered, the answers the same."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    with Index.open(tmp_path / "py", readonly=True) as idx:
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0
        idx.match(events[0])  # (the view)
        idx.match_many(events[: max(2, flatbatch.LEAST)])  # its numbering, by atom order
        with idx.store.read() as txn:
            based = idx.engine.flat.held(txn.gen)
        assert based is not None and based.view.numbering is not None
        _settle(idx, events)
        with idx.store.read() as txn:
            based = idx.engine.flat.held(txn.gen)
        assert based is not None and based.view.slots is not None
        assert based.view.slots.keys is None and based.view.slots.shared
        _same_steps(idx, events, False)
        assert _sweep(idx, subs, schema, events) > 100


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_held_rows_in_key_order_against_each_clause(seed: int) -> None:
    """:meth:`Slots.held` (first rows, second rows, the rest) on random clauses of 0 to 30
    atoms (1 to 4 rows; one with none never holds) against each clause's atoms tested one
    by one, on random truths."""
    rng = np.random.default_rng(seed)
    atoms, n = 300, 400
    lens = rng.integers(0, 31, n)
    lens[rng.integers(0, n, 3)] = 0
    members = [rng.choice(np.arange(1, atoms), size=k, replace=False) for k in lens]
    packed = flat.pack_rows(lens, np.concatenate(members).astype(np.uint32))
    key = np.array([m[0] if len(m) else 0 for m in members], dtype=np.intp)
    second = np.array([m[-1] if len(m) else 0 for m in members], dtype=np.intp)
    order = np.argsort(key, kind="stable")
    keys, at = np.unique(key.take(order), return_index=True)
    by_key = (keys, np.append(at, n).astype(np.int64), order.astype(np.int32), second.take(order))
    rows, row_at = packed["rows"], packed["row_at"]
    slots = slots_mod.Slots({}, atoms, by_key, {}, rows, row_at)
    assert slots.long is not None and slots.empty is not None
    assert slots.next_row is not slots.first_row
    for _ in range(50):
        truth = rng.random(atoms) < rng.choice([0.7, 0.9, 0.97])
        truth[0] = True
        sat = np.zeros(atoms, dtype=bool)
        sat[slots.slot] = truth
        hits, _ = slots.held(sat)
        want = [c for c, m in enumerate(members) if len(m) and truth[m].all()]
        assert sorted(hits.tolist()) == want
        assert len(hits) == len(set(hits.tolist()))
