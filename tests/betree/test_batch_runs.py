"""A batch's direct runs (:mod:`betree.packed.numbering`: each list's and geo grid's atoms
numbered consecutively, their rows over words ORed as one slice of the truths,
:func:`betree.packed.numbering.word_planes`), forced on and off
(:data:`betree.packed.numbering.RUNS`): ``match_many`` against the brute force and both ways
alike (the same ids in the same order), on rich rules with the list and geo indexes
answering by rows (:func:`tests.support.direct.forced_rows`) and by their own thresholds,
python-loaded and sharded (3 shards), through deletes, additions (the view's delta) and a
reopening; the slices seen taken (and not when off); and the numbering itself: each run's
atoms at consecutive slots (but those placed before it), the failing defaults' runs within
their attribute's run of defaults, every run of the view's direct groups placed."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flatbatch, numbering, views
from betree.stores.sharded import open_index
from tests.support.brute import brute
from tests.support.direct import batch_cases, both_ways, churn, forced_rows
from tests.support.loads import python_loaded
from tests.support.workload import build_hashed
from tools.bench import gen_rich

Rich = tuple[dict[str, Any], dict[Any, str], list[Any]]


@pytest.fixture(scope="module")
def rich() -> Rich:
    schema_doc, subs_list, events, _ = gen_rich.make(
        800, 300, check=False, seed=171, target_rate=0.02
    )
    return schema_doc, dict(subs_list), events


def _slices(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    """Each plane :func:`numbering.word_planes` gave: (a slice, held)."""
    seen: list[tuple[bool, bool]] = []
    planes = numbering.word_planes

    def record(numbered: Any, attr: str, *args: Any) -> Any:
        got = planes(numbered, attr, *args)
        seen.extend((isinstance(ids, slice), args[-2]) for _, ids, _ in got)
        return got

    monkeypatch.setattr(flatbatch, "word_planes", record)
    return seen


def _numberings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Each (numbering, direct groups) the batches' views made."""
    made: list[tuple[Any, Any]] = []
    numbered = views.numbered

    def record(view: Any, atoms: int, grouped: Any) -> Any:
        got = numbered(view, atoms, grouped)
        made.append((got, grouped))
        made_for.append((view, atoms, grouped))
        return got

    monkeypatch.setattr(views, "numbered", record)
    return made


#: the views each numbering was made for: (view, atoms, direct groups)
made_for: list[tuple[Any, int, Any]] = []


def _forcing(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The runs turned off or on."""
    return lambda on: monkeypatch.setattr(numbering, "RUNS", on)


def _runs_placed(made: list[tuple[Any, Any]]) -> int:
    """Every numbering's runs as :func:`numbering.number` promises; the runs checked."""
    checked = 0
    for numbered, grouped in made:
        slot = numbered.slot.astype(np.int64)
        assert np.array_equal(np.sort(slot), np.arange(len(slot)))  # (a permutation)
        for attr, group in grouped.items():
            for aids, hit in group.runs():
                where = numbered.run(attr, aids, hit)
                assert where is not None, (attr, hit)
                own = slot.take(aids)
                inside = np.arange(len(aids)) if where.inside is None else where.inside
                assert np.array_equal(own[inside], np.arange(where.lo, where.hi))
                assert len(inside) + len(where.rest) == len(aids)
                assert (own[where.rest] < where.lo).all()  # (placed before the run)
                if not hit and attr in numbered.defaults:  # within the run of defaults
                    first = numbered.defaults[attr]
                    assert first <= where.lo and where.hi <= first + len(group.default)
                    assert not len(where.rest)
                checked += 1
    return checked


@pytest.mark.parametrize("forced", [True, False], ids=["rows", "thresholds"])
def test_direct_runs_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich, forced: bool
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    batches = batch_cases(random.Random(172), events)
    seen = _slices(monkeypatch)
    made = _numberings(monkeypatch)
    with forced_rows(True) if forced else contextlib.nullcontext():
        with Index.open(tmp_path / "py") as idx:
            idx.engine.flat.after = 0  # (the view at once, matched on the tree)
            idx.engine.ranging.margin = 0
            assert both_ways(_forcing(monkeypatch), idx.match_many, subs, schema, batches) > 300
            assert _runs_placed(made) >= (4 if forced else 1)
            if forced:  # held runs and failing defaults' runs both sliced
                assert (True, True) in seen and (True, False) in seen
            churn(idx, subs, 173)  # deletes, then additions: the view's delta
            assert both_ways(_forcing(monkeypatch), idx.match_many, subs, schema, batches) > 200
            seen.clear()
            monkeypatch.setattr(numbering, "RUNS", False)
            idx.match_many(events)
            assert not any(sliced for sliced, _ in seen)
            monkeypatch.setattr(numbering, "RUNS", True)
        with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
            idx.engine.flat.after = 0
            idx.engine.ranging.margin = 0
            for ev in events[:20]:  # (one by one first: the keys numbered, then the runs)
                assert set(idx.match(ev)) == brute(subs, schema, ev)
            made.clear()
            seen.clear()
            assert (
                both_ways(_forcing(monkeypatch), idx.match_many_arrays, subs, schema, batches[:3])
                > 200
            )
            assert made and _runs_placed(made)
            assert any(sliced for sliced, _ in seen) or not forced


def test_direct_runs_sharded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich) -> None:
    """A sharded store (its shards matched one by one, each on its numbered view, or
    joined, by id): the same answers both ways."""
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    root = Path(build_hashed(tmp_path / "s", subs, 3, schema_doc))
    seen = _slices(monkeypatch)
    batches = batch_cases(random.Random(174), events)
    with forced_rows(True), open_index(str(root), readonly=False) as store:
        store.match_many(events)  # (the views built)
        assert (
            both_ways(_forcing(monkeypatch), store.match_many, subs, schema, batches, False) > 300
        )
        assert seen
        gone = list(subs)[3:300:3]
        store.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        assert (
            both_ways(_forcing(monkeypatch), store.match_many, subs, schema, batches[:3], False)
            > 200
        )


def test_runs_with_keys_placed_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich
) -> None:
    """A view numbered with keys among its runs' atoms (a keyed view's, placed before the
    runs): each run's other atoms one slice, the keys by slot; the rows each plane gives
    are the rows by slot, with the runs on and off and by atom id (no numbering)."""
    schema_doc, subs, events = rich
    python_loaded(tmp_path / "py", subs, schema_doc)
    made_for.clear()
    _numberings(monkeypatch)
    with forced_rows(True), Index.open(tmp_path / "py") as idx:
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0
        idx.match_many(events)
    view, atoms, grouped = made_for[-1]
    runs = [(attr, aids, hit) for attr, g in grouped.items() for aids, hit in g.runs()]
    keys = np.unique(np.concatenate([aids[1::3] for _, aids, hit in runs if hit]))
    numbered = numbering.Numbered(view.searches, atoms, grouped, view.rows, None, keys)
    assert _runs_placed([(numbered, grouped)]) == len(runs)
    assert any(len(numbered.run(a, aids, hit).rest) for a, aids, hit in runs)
    rng = np.random.default_rng(175)
    words = np.array([0, 2, 3], dtype=np.int64)
    for attr, aids, hit in runs:
        bits = rng.integers(0, 2**64, size=(len(aids), 3), dtype=np.uint64).T  # (as given)
        bits[:, rng.random(len(aids)) < 0.3] = 0
        for on, by in ((True, numbered), (False, numbered), (False, None)):
            monkeypatch.setattr(numbering, "RUNS", on)
            sat = np.zeros((4, atoms + 5), dtype=np.uint64)
            planes = numbering.word_planes(by, attr, words, aids, bits, hit, 5)
            assert any(isinstance(ids, slice) for _, ids, _ in planes) == (by is not None and on)
            flatbatch._or_planes(sat, planes)
            want = np.zeros_like(sat)
            cols = 5 + (aids if by is None else numbered.slot.take(aids).astype(np.int64))
            want[words[:, None], cols[None, :]] = bits
            assert np.array_equal(sat, want), (attr, hit, on)
