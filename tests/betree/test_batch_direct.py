"""A batch's direct atoms (lists, geo, segments, caps, string tests) found from the batch's
columns (:func:`betree.packed.flatbatch._direct`: each attribute's values and events read
off its column, the hits' and failing defaults' events as slots) and the geo entries'
boxes gathered by rows (:class:`betree.matching.directmany.GeoMany`): ``match_many``
against the brute force on rich rules, python-loaded and sharded, with batches where
attributes are left out (defaults and ``undefined`` atoms), kept alone, repeated, in
shuffled order, through deletes, additions and a reopening; the direct hits and failing
defaults seen set.  The list postings' and segments' atoms both as (atom, event) pairs and
as rows over the batch's words (:meth:`betree.matching.directmany.ListMany.words`,
:meth:`~betree.matching.directmany.SegmentMany.words`, and the geo grid's cell groups,
:meth:`betree.matching.geomany.GeoMany.words`, forced by their thresholds), each path seen
taken."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.matching import directmany, geomany
from betree.packed import flatbatch
from betree.stores.sharded import open_index
from tests.support.brute import brute
from tests.support.loads import python_loaded
from tests.support.workload import build_hashed
from tools.bench import gen_rich

Rich = tuple[dict[str, Any], dict[Any, str], list[Any]]


@pytest.fixture(scope="module")
def rich() -> Rich:
    schema_doc, subs_list, events, _ = gen_rich.make(
        700, 260, check=False, seed=91, target_rate=0.02
    )
    return schema_doc, dict(subs_list), events


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int]]:
    """Every (atom, event) pair set (True) or cleared by the direct atoms, counted a call."""
    seen: list[tuple[bool, int]] = []
    set_bits = flatbatch._set_bits

    def record(sat: np.ndarray, atoms: np.ndarray, slots: np.ndarray, on: bool) -> None:
        seen.append((on, len(atoms)))
        set_bits(sat, atoms, slots, on)

    monkeypatch.setattr(flatbatch, "_set_bits", record)
    return seen


def _rows_path(monkeypatch: pytest.MonkeyPatch, on: bool) -> list[int]:
    """The list postings, segment and geo atoms answered as rows over words always (``on``:
    the geo grid's every cell a block) or never; the rows each call returned, recorded
    (the geo grid's as negative counts: ``-1 - rows``)."""
    for name in ("PAIRS_A_CELL", "SEGMENT_PAIRS_A_CELL", "SEGMENT_PAIRS_LEAST"):
        monkeypatch.setattr(directmany, name, 0.0 if on else float("inf"))
    monkeypatch.setattr(geomany, "GEO_PAIRS_LEAST", 0.0 if on else float("inf"))
    monkeypatch.setattr(geomany, "BLOCK_PAIRS", 0.0)  # (every cell a block of its own)
    seen: list[int] = []
    for kind in (directmany.ListMany, directmany.SegmentMany, geomany.GeoMany):

        def record(self: Any, *args: Any, words: Any = kind.words) -> Any:
            got = words(self, *args)
            seen.append(-1 - len(got[1]) if isinstance(self, geomany.GeoMany) else len(got[1]))
            return got

        monkeypatch.setattr(kind, "words", record)
    return seen


def _geo_seen(planes: list[int], rows: bool) -> None:
    """The geo grid asked for rows over words, and answering by them where forced."""
    geo = [-1 - n for n in planes if n < 0]
    assert geo and (max(geo) > 0) == rows


def _sweep(match_many: Any, subs: dict[Any, str], schema: Schema, batches: list[Any]) -> int:
    """Each batch matched at once against the brute force, event by event; the matches."""
    total = 0
    for batch in batches:
        got = match_many([dict(ev) for ev in batch])
        assert len(got) == len(batch)
        for ev, ids in zip(batch, got, strict=True):
            want = brute(subs, schema, ev)
            assert len(ids) == len(set(ids)) and set(ids) == want, ev
            total += len(want)
    return total


def _batches(rng: random.Random, events: list[Any]) -> list[list[Any]]:
    """The events; each attribute left out of about half of them; three attributes of
    each kept; a shuffled repeat; one event among empty ones (every ``undefined`` atom
    holds for them)."""
    halves = [{k: v for k, v in ev.items() if rng.random() < 0.5} for ev in events]
    few = [dict(rng.sample(sorted(ev.items()), min(3, len(ev)))) for ev in events[:200]]
    again = events[:150] * 2
    rng.shuffle(again)
    alone = [events[11]] + [{} for _ in range(flatbatch.LEAST)]
    return [events, halves, few, again, alone]


def _direct_seen(seen: list[tuple[bool, int]]) -> None:
    """Direct hits set and failing defaults cleared, in some batch."""
    assert any(on and n for on, n in seen)
    assert any(not on and n for on, n in seen)


@pytest.mark.parametrize(
    ("rows", "blocks"),
    [(True, 0.0), (True, float("inf")), (False, 0.0)],
    ids=["rows", "rows-small-cells", "pairs"],
)
def test_direct_atoms_from_columns_against_the_brute_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich, rows: bool, blocks: float
) -> None:
    """``blocks``: the geo cells under this many (entry, event) pairs tested together
    (:data:`geomany.BLOCK_PAIRS`: 0, every cell a block of its own)."""
    planes = _rows_path(monkeypatch, rows)
    monkeypatch.setattr(geomany, "BLOCK_PAIRS", blocks)
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    batches = _batches(random.Random(92), events)
    seen = _recorded(monkeypatch)
    with Index.open(tmp_path / "py") as idx:
        idx.engine.flat.after = 0  # (the view at once, matched on the tree)
        idx.engine.ranging.margin = 0
        assert _sweep(idx.match_many, subs, schema, batches) > 200
        _direct_seen(seen)
        items = list(subs.items())
        for ident, _ in items[::3]:  # deletes, then additions: the view's delta
            assert idx.unsubscribe(ident)
            del subs[ident]
        added = {f"d{k}": e for k, e in items[1::5][:40]}
        added.update({f"m{k}": e for k, e in gen_rich.make(25, 1, check=False, seed=93)[1]})
        idx.subscribe_many(added.items())
        subs.update(added)
        idx.check()
        seen.clear()
        assert _sweep(idx.match_many, subs, schema, batches) > 150
        _direct_seen(seen)
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0
        seen.clear()
        assert _sweep(idx.match_many_arrays, subs, schema, batches[:3]) > 100
        _direct_seen(seen)
    assert planes and (max(planes) > 0) == rows
    _geo_seen(planes, rows and not blocks)  # (all cells small: the grid's held pairs)


def test_sharded_direct_atoms_from_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich
) -> None:
    """Three shards' joined views (each shard's direct atoms from base ``atoms``), through
    deletes, the list postings, segments and geo grid as rows over words."""
    planes = _rows_path(monkeypatch, True)
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    root = Path(build_hashed(tmp_path / "s", subs, 3, schema_doc))
    seen = _recorded(monkeypatch)
    batches = _batches(random.Random(94), events)
    with open_index(str(root), readonly=False) as store:
        store.match_many(events)  # (the views built)
        seen.clear()
        assert _sweep(store.match_many, subs, schema, batches) > 200
        _direct_seen(seen)
        gone = list(subs)[3:300:4]
        store.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        assert _sweep(store.match_many, subs, schema, batches[:3]) > 100
    assert planes and max(planes) > 0
    _geo_seen(planes, True)
