"""A batch's rows keyed by their clause's rarest atom, the rows whose key holds for no
event of the batch never read (:func:`betree.packed.flatbatch._keys`), the truth matrix
lent from kept buffers (:mod:`betree.packed.scratch`), and the rows by slot shared by a
view's two numberings (:func:`betree.packed.numbering.rows_by_slot`): ``match_many``
against the brute force on rich rules (every form of the language, clauses of several
rows, absent attributes), python-loaded and sharded, with repeated, one-event, empty and
one-of-a-kind batches, through deletes, additions and a reopening; the keyed path checked
taken with rows skipped."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flatbatch, scratch
from betree.stores.sharded import open_index
from tests.support.brute import brute
from tests.support.loads import python_loaded
from tests.support.workload import SCHEMA, build_hashed
from tools.bench import gen_rich

Rich = tuple[dict[str, Any], dict[Any, str], list[Any]]


@pytest.fixture(scope="module")
def rich() -> Rich:
    schema_doc, subs_list, events, _ = gen_rich.make(
        900, 300, check=False, seed=81, target_rate=0.01
    )
    return schema_doc, dict(subs_list), events


def _tree(idx: Index) -> None:
    """The view built at once, matched on the tree (never by intervals)."""
    idx.engine.flat.after = 0
    idx.engine.ranging.margin = 0


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Every keyed shard a batch tested, with its :class:`flatbatch.Keyed`."""
    seen: list[tuple[Any, Any]] = []
    keys = flatbatch._keys

    def record(shard: flatbatch.Shard, reach: np.ndarray, sat: np.ndarray) -> Any:
        keyed = keys(shard, reach, sat)
        if keyed is not None:
            seen.append((shard, keyed))
        return keyed

    monkeypatch.setattr(flatbatch, "_keys", record)
    return seen


def _sweep(match_many: Any, subs: dict[Any, str], schema: Schema, batches: list[Any]) -> int:
    """Each batch matched at once against the brute force, event by event; the matches."""
    total = 0
    for batch in batches:
        got = match_many(batch)
        assert len(got) == len(batch)
        for ev, ids in zip(batch, got, strict=True):
            want = brute(subs, schema, ev)
            assert len(ids) == len(set(ids)) and set(ids) == want, ev
            total += len(want)
    return total


def _batches(rng: random.Random, events: list[Any]) -> list[list[Any]]:
    """The events; a hundred of them twice, shuffled; some with ~40% of their top-level
    attributes left out; one event 150 times; every event alone in a batch of others'
    absences (only its keys hold)."""
    twice = events[:100] * 2
    rng.shuffle(twice)
    absent = [{k: v for k, v in ev.items() if rng.random() < 0.6} for ev in events[100:260]]
    alone = [events[7]] + [{} for _ in range(flatbatch.LEAST)]
    return [events, twice, absent, [events[3]] * 150, alone]


def _skipped(seen: list[tuple[Any, Any]]) -> None:
    """The keyed path was taken on a view whose clauses span several rows, and read
    fewer rows than some word reached."""
    assert seen
    several = [s for s, _ in seen if s.view.row_clause is not None]
    assert several, "no clause of several rows keyed"
    assert any(len(k.rows) < len(s.view.rows) for s, k in seen)
    for shard, keyed in seen:  # (the clause's rows kept together, keyed alike)
        view = shard.view
        assert np.all(np.diff(keyed.rows) > 0)
        if view.row_clause is not None and len(keyed.rows):
            clause = view.row_clause[keyed.rows]
            per = np.bincount(clause, minlength=len(view.row_at) - 1)
            kept = np.flatnonzero(per)
            assert np.array_equal(per[kept], np.diff(view.row_at)[kept])
            same = clause[1:] == clause[:-1]
            assert np.array_equal(keyed.key[1:][same], keyed.key[:-1][same])


def test_keyed_rows_against_the_brute_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    rng = random.Random(82)
    python_loaded(tmp_path / "py", subs, schema_doc)
    batches = _batches(rng, events)
    seen = _recorded(monkeypatch)
    monkeypatch.setattr(scratch, "SMALL", 0)  # (every batch's matrix lent, reused)
    with Index.open(tmp_path / "py") as idx:
        _tree(idx)
        assert _sweep(idx.match_many, subs, schema, batches) > 200
        _skipped(seen)
        assert idx.match_many([]) == []
        items = list(subs.items())
        for ident, _ in items[::4]:  # deletes, then additions: the view's delta
            assert idx.unsubscribe(ident)
            del subs[ident]
        added = {f"c{k}": e for k, e in items[1::4][:40]}
        added.update({f"n{k}": e for k, e in gen_rich.make(20, 1, check=False, seed=83)[1]})
        idx.subscribe_many(added.items())
        subs.update(added)
        idx.check()
        seen.clear()
        assert _sweep(idx.match_many, subs, schema, batches) > 200
        _skipped(seen)
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        _tree(idx)
        seen.clear()
        assert _sweep(idx.match_many_arrays, subs, schema, batches[:2]) > 100
        _skipped(seen)


@pytest.mark.parametrize("keyed", [flatbatch.KEYED, 0.0], ids=["default", "keys"])
def test_sharded_rich_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich, keyed: float
) -> None:
    """A sharded store's joined views (each shard's own rows and keys), as the default
    decides and with every shard keyed; through deletes."""
    monkeypatch.setattr(flatbatch, "KEYED", keyed)
    monkeypatch.setattr(scratch, "SMALL", 0)
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    root = Path(build_hashed(tmp_path / "s", subs, 3, schema_doc))
    seen = _recorded(monkeypatch)
    batches = _batches(random.Random(84), events)
    with open_index(str(root), readonly=False) as store:
        store.match_many(events)  # (the views built)
        assert _sweep(store.match_many, subs, schema, batches) > 200
        if keyed == 0.0:
            assert len({id(s.view) for s, _ in seen}) == 3
            _skipped(seen)
        gone = list(subs)[5:200:3]
        store.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        assert _sweep(store.match_many, subs, schema, batches[:3]) > 100


def test_rows_by_slot_shared_by_the_numberings(tmp_path: Path, rich: Rich) -> None:
    """The per-event numbering and the batch's hold one copy of the rows by slot, made by
    whichever comes first; answers exact both ways."""
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    for first in ("events", "batch"):
        with Index.open(tmp_path / "py", readonly=True) as idx:
            _tree(idx)
            for _ in range(2):
                if first == "batch":
                    _sweep(idx.match_many, subs, schema, [events])
                for ev in events:
                    assert set(idx.match(ev)) == brute(subs, schema, ev)
                first = "batch"
            with idx.store.read() as txn:
                held = idx.engine.flat.held(txn.gen)
            assert held is not None
            slots, numbering = held.view.slots, held.view.numbering
            assert slots is not None and numbering is not None
            assert slots.rows is numbering.rows
            assert np.array_equal(slots.slot, numbering.slot)
            assert slots.shared != numbering.shared  # (counted once, by the first made)
            assert np.array_equal(numbering.rows, numbering.slot.take(held.view.rows))


def test_scratch_lends_zeroed_buffers() -> None:
    """A buffer comes back zeroed whatever its last batch wrote, smaller matrices from a
    larger buffer; two lent at once never share memory; past the limit or under
    :data:`scratch.SMALL`, a fresh matrix."""
    limit = 64 << 20
    with scratch.zeroed(6, 100_000, limit) as a:
        assert a.shape == (6, 100_000) and not a.any()
        a[:] = 7
        first = a
    with scratch.zeroed(4, 90_001, limit) as b:
        assert b.shape == (4, 90_001) and not b.any()
        assert np.shares_memory(b, first)  # (the same buffer, lent again)
        b[:] = 9
        with scratch.zeroed(3, 80_000, limit) as c:
            assert not c.any() and not np.shares_memory(b, c)
            c[:] = 5
    with scratch.zeroed(6, 100_000, limit) as d:
        assert not d.any()
    with scratch.zeroed(2, 10, limit) as small, scratch.zeroed(10, 1 << 20, limit) as big:
        assert not small.any() and not big.any()
        assert not np.shares_memory(small, first) and not np.shares_memory(big, first)


@pytest.mark.parametrize("floats", [False, True], ids=["strings", "strings-and-floats"])
def test_in_lists_of_many_values_summed(tmp_path: Path, floats: bool) -> None:
    """``in`` lists of strings (and floats: no narrow int path) whose atoms sit under
    several keys, several of whose values fall in one word of events: each value's run
    summed into the matrix (disjoint events), with ``>=``/``<=`` bounds and ``not in``
    beside them; against the brute force, through deletes."""
    rng = random.Random(85)
    words = ["a", "ab", "abc", "b", "ba", "\u00e9t\u00e9", "z", "", "zz", "q"]
    subs: dict[Any, str] = {}
    for k in range(500):
        picked = ", ".join(f'"{w}"' for w in rng.sample(words, rng.randint(2, 7)))
        form = rng.choice(
            ["s in ({})", "not (s in ({}))", "s in ({}) and b", "s in ({}) or i > 15"]
        )
        subs[k] = form.format(picked)
        if floats and k % 3 == 0:
            values = ", ".join(str(rng.choice([-2.5, 0.0, 1.0, 3.5, 4.75])) for _ in range(4))
            subs[k] += f" and f in ({values})" if k % 2 else f" or f >= {rng.choice([0.0, 1.0])}"
    schema = Schema.from_json(SCHEMA)
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(subs.items())
        _tree(idx)
        events = []
        for _ in range(400):
            ev: dict[str, Any] = {"s": rng.choice(words), "b": rng.random() < 0.5}
            ev["i"] = rng.randint(0, 20)
            if floats:
                ev["f"] = rng.choice([-2.5, 0.0, 1.0, 3.5, 4.75, 2.0])
            if rng.random() < 0.1:
                del ev["s"]
            events.append(ev)
        assert _sweep(idx.match_many, subs, schema, [events, events[:90] * 2]) > 500
        for k in rng.sample(sorted(subs), 120):
            idx.unsubscribe(k)
            del subs[k]
        assert _sweep(idx.match_many, subs, schema, [events]) > 300
