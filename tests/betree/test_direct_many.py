"""The direct indexes for a batch at once (betree.matching.directmany) at the edges, the
validation's fast paths, and batches of rich events on packed views against the brute force.

Per kind the batch's answer is compared with the per-event one and each atom's own
``holds`` (:func:`tests.support.direct.agree`): lists of 10,000 elements, empty lists, ints
at the ends of int64, Unicode; geo radii on the exact distance of the event's point (the
numpy haversine's doubtful band decided by the atom's test) and points at the poles, on
±180 and beyond the ranges; segment times and ``now`` at the ends of int64 (the events the
arrays cannot hold, answered one by one); several attributes with absent ones at once.
"""

from __future__ import annotations

import functools
import math
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang import special
from betree.lang.atoms import Atom, TestAtom, make_test
from betree.lang.schema import Schema
from betree.matching import direct, directmany, geomany
from betree.matching.direct import DirectAtoms, found_batch, mark
from betree.packed import flatbatch
from storage.errors import InvalidInput
from tests.support.brute import brute
from tests.support.direct import agree, forced_rows, list_atoms
from tests.support.loads import python_loaded
from tools.bench import gen_rich

I64 = (-(2**63), 2**63 - 1)


def test_lists_of_ten_thousand_elements_empty_and_at_the_ends_of_int64() -> None:
    rng = random.Random(21)
    pool: list[object] = [*range(-50, 50), *I64, I64[0] + 1, I64[1] - 1]
    atoms = list_atoms(rng, "il", pool, 800, 8)
    events: list[dict[str, Any]] = [{}, {"il": ()}, {"il": tuple(range(-5_000, 5_000))}]
    events += [{"il": tuple(rng.choices(pool, k=10_000))} for _ in range(3)]
    events += [{"il": tuple(rng.choices(pool, k=rng.randint(0, 30)))} for _ in range(200)]
    assert agree(atoms, events, "il") > 5_000


def test_string_lists_with_unicode_and_repeats() -> None:
    rng = random.Random(22)
    pool = ["", "a", "A", "é", "e\u0301", "ß", "ss", "\U0001f600", "\x00", "x" * 10_000]
    atoms = list_atoms(rng, "sl", pool, 400, 5)
    events = [{"sl": tuple(rng.choices(pool, k=rng.randint(0, 12)))} for _ in range(300)]
    assert agree(atoms, events, "sl") > 1_000


def test_list_rows_come_by_their_values_most_first_as_the_runs_say() -> None:
    """A list index's rows over words (its ``any`` postings inverted in layers, each
    layer a prefix of the atoms) come in :func:`directmany.list_runs`' order: the atoms
    with the most values first, ascending among equals (the numbering makes that order
    one run of slots); each row the OR of its values' events (``agree`` above)."""
    rng = random.Random(23)
    pool: list[object] = list(range(40))
    atoms = list_atoms(rng, "il", pool, 300, 12)
    group = DirectAtoms(atoms)
    [(_, index)] = group.active
    runs = directmany.list_runs(index)
    assert [on for _, on in runs] == [True, False]
    for (aids, _), postings in zip(runs, (index.pos_any, index.neg_any), strict=True):
        counts = {a: 0 for a in aids.tolist()}
        for ids in postings.values():
            for a in ids:
                counts[a] += 1
        want = sorted(counts, key=lambda a: (-counts[a], a))
        assert aids.tolist() == want
        assert len(set(counts.values())) > 3  # (several counts, ties among them)
    events = [{"il": tuple(rng.sample(pool, rng.randint(0, 9)))} for _ in range(130)]
    words = np.array([0, 1, 2], dtype=np.int64)
    rows = np.zeros((len(events), 3), dtype=np.uint64)
    rows[np.arange(len(events)), np.arange(len(events)) >> 6] = np.left_shift(
        np.uint64(1), (np.arange(len(events)) & 63).astype(np.uint64)
    )
    with forced_rows(True):
        _, planes = directmany.ListMany(index).words([ev["il"] for ev in events], events, rows)
    assert [(aids.tolist(), on) for aids, _, on in planes] == [
        (aids.tolist(), on) for aids, on in runs
    ]
    for aids, bits, _ in planes:  # (each row: the events whose list holds one of its values)
        for k, aid in enumerate(aids.tolist()):
            want = [
                e
                for e, ev in enumerate(events)
                if any(
                    aid in index.pos_any.get(v, ()) or aid in index.neg_any.get(v, ())
                    for v in ev["il"]
                )
            ]
            got = [
                int(w) * 64 + b
                for w in words.tolist()
                for b in range(64)
                if int(bits[w, k]) >> b & 1
            ]
            assert got == want


@pytest.mark.parametrize(
    ("one_by_arrays", "blocks"), [(False, 0.0), (True, 0.0), (False, float("inf"))]
)
def test_geo_radii_on_the_exact_distance_are_decided_by_the_atom(
    one_by_arrays: bool, blocks: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In batches; event by event through the grid's loop, or (``one_by_arrays``) through
    :meth:`GeoMany.one` (a grid of many entries a cell).  As rows over words
    (:func:`tests.support.direct.held_words`), every cell a block of its own (its chords
    one matrix product: :data:`geomany.SLACK`), or (``blocks`` infinite) every cell's
    pairs tested with the others' (:meth:`GeoMany._pairs`), each seen taken."""
    if one_by_arrays:
        monkeypatch.setattr(direct, "GEO_LOOP_MOST", -1)
    monkeypatch.setattr(geomany, "BLOCK_PAIRS", blocks)
    small: list[int] = []
    pairs = geomany.GeoMany._pairs

    def record(self: geomany.GeoMany, lo: Any, *args: Any) -> Any:
        small.append(len(lo))
        return pairs(self, lo, *args)

    monkeypatch.setattr(geomany.GeoMany, "_pairs", record)
    rng = random.Random(23)
    # enough points that numpy's haversine and the atom's differ on some (about one radius
    # in 70 at an ulp's distance): with either re-check of the doubtful band left out
    # (GeoMany.one, or the grid's), this seed fails
    points = [(rng.uniform(-89, 89), rng.uniform(-179, 179)) for _ in range(600)]
    points += [(90.0, 0.0), (-90.0, 180.0), (0.0, -180.0), (0.0, 180.0), (-0.0, -0.0)]
    atoms: list[tuple[int, Atom]] = []
    events: list[dict[str, Any]] = []
    for lat, lon in points:
        # a centre near the point, the radius its exact distance, one ulp either side
        lat0 = max(-90.0, min(90.0, lat + rng.uniform(-0.5, 0.5)))
        lon0 = lon + rng.uniform(-0.5, 0.5)
        d = special.geo_distance(lat0, lon0, lat, lon)
        assert d is not None
        for km in (d, math.nextafter(d, 0.0), math.nextafter(d, math.inf), 0.0):
            test = "geo_within_radius" if rng.random() < 0.7 else "not_geo_within_radius"
            atoms.append((len(atoms), TestAtom("latitude", test, (lat0, lon0, km))))
        events.append({"latitude": lat, "longitude": lon})
    events += [{"latitude": 10.0}, {"latitude": 95.0, "longitude": 0.0}]  # no lon; beyond
    events += [{"latitude": 0.0, "longitude": 400.0}, {"longitude": 1.0}]
    assert agree(atoms, events, "latitude") > 100
    assert small and (max(small) > 0) == (blocks > 0)


@pytest.mark.parametrize("ends", [False, True])
def test_segments_at_the_ends_of_int64(ends: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also as rows over words (:meth:`SegmentMany.words`, forced by ``agree``), taken
    where the seconds fit the arrays."""
    planes = []
    rows = directmany.SegmentMany._rows

    def record(self: directmany.SegmentMany, *args: Any) -> Any:
        planes.append(got := rows(self, *args))
        return got

    monkeypatch.setattr(directmany.SegmentMany, "_rows", record)
    rng = random.Random(24 + ends)
    secs = [*I64, 0, -1, 1] if ends else list(range(-5, 30))
    atoms: list[tuple[int, Atom]] = []
    for aid in range(300):
        func = rng.choice(["", "not_"]) + rng.choice(["segment_within", "segment_before"])
        atoms.append((aid, TestAtom("seg", func, (rng.randint(0, 6), rng.choice(secs)))))
    stamps = [*I64, 0, -1, 999_999, -999_999, 10**6, -(10**6), 25 * 10**6]
    events: list[dict[str, Any]] = []
    for _ in range(300):
        ev: dict[str, Any] = {}
        if rng.random() < 0.9:
            ev["now"] = rng.choice([0, 10, 20, *I64, I64[0] + 1, I64[1] - 1])
        pairs = [(rng.randint(0, 6), rng.choice(stamps)) for _ in range(rng.randint(0, 6))]
        ev["seg"] = tuple(sorted(pairs, key=lambda p: p[0]))  # repeats kept, first counts
        events.append(ev)
    assert agree(atoms, events, "seg") > 500
    assert any(planes) != ends


def test_a_batch_of_several_attributes_with_absent_ones() -> None:
    """:func:`found_batch` over several attributes equals :func:`mark` event by event."""
    rng = random.Random(25)
    by_attr: dict[str, list[tuple[int, Atom]]] = {"il": [], "s": [], "latitude": []}
    aid = 0
    for _ in range(300):
        v = tuple(sorted(rng.sample(range(20), 3)))
        atom = make_test("il", rng.choice(["one_of", "none_of", "all_of"]), v)
        assert atom is not None
        by_attr["il"].append((aid := aid + 1, atom))
        needle = "".join(rng.choices("abc", k=rng.randint(1, 3)))
        by_attr["s"].append(
            (aid := aid + 1, TestAtom("s", rng.choice(["ends_with", "contains"]), needle))
        )
        lat, lon = rng.uniform(-10, 10), rng.uniform(-10, 10)
        by_attr["latitude"].append(
            (aid := aid + 1, TestAtom("latitude", "geo_within_radius", (lat, lon, 500.0)))
        )
    for attr in by_attr:
        by_attr[attr].append((aid := aid + 1, TestAtom(attr, "undefined")))
        by_attr[attr].append((aid := aid + 1, TestAtom(attr, "defined")))
    direct = {attr: DirectAtoms(atoms) for attr, atoms in by_attr.items()}
    events: list[dict[str, Any]] = []
    for _ in range(400):
        ev: dict[str, Any] = {}
        if rng.random() < 0.7:
            ev["il"] = tuple(rng.choices(range(25), k=rng.randint(0, 6)))
        if rng.random() < 0.7:
            ev["s"] = "".join(rng.choices("abc", k=rng.randint(0, 8)))
        if rng.random() < 0.7:
            ev["latitude"] = rng.uniform(-12, 12)
        if rng.random() < 0.8:
            ev["longitude"] = rng.uniform(-12, 12)
        events.append(ev)
    size = aid + 1
    want = np.zeros((len(events), size), dtype=bool)
    for row, ev in zip(want, events, strict=True):
        mark(row, direct, ev)
        truth = [False] * size  # (ids are distinct: each atom's own test at its id)
        for atoms in by_attr.values():
            for a, atom in atoms:
                truth[a] = atom.holds(ev)
        assert row.tolist() == truth
    got = np.zeros_like(want)
    groups, (on, on_at, off, off_at) = found_batch(direct, events)
    for group, defining in groups:
        got[np.ix_(defining, group.default.ids)] = True
        others = np.setdiff1d(np.arange(len(events)), defining)
        got[np.ix_(others, np.array(group.undefined, dtype=np.int64))] = True
    got[on_at, on] = True
    got[off_at, off] = False
    assert (got == want).all()
    assert want.sum() > 1_000


def test_validation_fast_paths_refuse_as_before() -> None:
    """The lists and segments checked at once where plain give the same values, and the
    same errors where not (the element-by-element check names the element)."""
    schema = Schema.from_json(
        {
            "attributes": {
                "il": {"type": "int_list"},
                "sl": {"type": "string_list"},
                "fl": {"type": "string_list", "fold_case": True},
                "seg": {"type": "segments"},
            }
        }
    )
    ok = schema.validate_event(
        {
            "il": [*I64, 0],
            "sl": ["a", "é", "\U0001f600"],
            "fl": ["ÀB", "x"],
            "seg": [[2, 5], [1, -(2**63)]],
        }
    )
    assert ok["il"] == (*I64, 0) and ok["sl"] == ("a", "é", "\U0001f600")
    assert ok["fl"] == ("àb", "x") and ok["seg"] == ((1, -(2**63)), (2, 5))
    bad = [
        ({"il": [1, True]}, "list element 1"),
        ({"il": [1, 2**63]}, "outside the signed 64-bit range (list element 1)"),
        ({"il": [1.0]}, "list element 0"),
        ({"sl": ["a", "\ud800"]}, "lone surrogate (not valid Unicode) (list element 1)"),
        ({"sl": ["a", 1]}, "list element 1"),
        ({"seg": [[1, 2], [3, 2**63]]}, "list element 1 is not a [segment_id, timestamp] pair"),
        ({"seg": [[1, True]]}, "list element 0 is not"),
        ({"seg": [[1, 2, 3]]}, "list element 0 is not"),
    ]
    for event, message in bad:
        with pytest.raises(InvalidInput, match=re.escape(message)):
            schema.validate_event(event)


@functools.cache
def _rich_workload() -> tuple[Any, dict[Any, str], list[Any], list[Any], dict[str, str], list[Any]]:
    """The rich workload of the next test and its brute-force answers, before and after
    its writes (every fifth id removed, ``added`` subscribed): made once for both of its
    cases (the brute force is most of their time)."""
    schema_doc, subs_list, events, _ = gen_rich.make(
        1500, 300, check=False, seed=31, target_rate=0.01
    )
    subs = dict(subs_list)
    schema = Schema.from_json(schema_doc)
    before = [brute(subs, schema, ev) for ev in events]
    added = {
        f"n{k}": e
        for k, e in enumerate(
            dict(gen_rich.make(120, 1, check=False, seed=32, target_rate=0.01)[1]).values()
        )
    }
    after = {i: e for n, (i, e) in enumerate(subs.items()) if n % 5} | added
    return schema_doc, subs, events, before, added, [brute(after, schema, ev) for ev in events]


@pytest.mark.parametrize("keyed", [0.0, 2.0], ids=["keys", "no-keys"])
def test_rich_batches_on_views_match_the_brute_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: float
) -> None:
    """Batches of more than ``flatbatch.LEAST`` rich events (matched as batches on the
    packed view), python-loaded and online with writes and deletes, and reopened; each
    reached row's most selective atom tested first (``keys``) or not."""
    monkeypatch.setattr(flatbatch, "KEYED", keyed)
    schema_doc, subs, events, want, added, after = _rich_workload()
    python_loaded(tmp_path / "py", subs, schema_doc)
    assert sum(map(len, want)) > 200
    with Index.open(tmp_path / "py") as idx:
        for _ in range(3):  # the first builds the view
            for got, w in zip(idx.match_many(events), want, strict=True):
                assert set(got) == w  # type: ignore[arg-type]
        for ident in list(subs)[::5]:
            assert idx.unsubscribe(ident)
        idx.subscribe_many(list(added.items()))
        idx.check()
        want = after
        for got, w in zip(idx.match_many(events), want, strict=True):
            assert set(got) == w  # type: ignore[arg-type]
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened
        for _ in range(2):
            for got, w in zip(idx.match_many(events + events[:40]), want + want[:40], strict=True):
                assert set(got) == w  # type: ignore[arg-type]
