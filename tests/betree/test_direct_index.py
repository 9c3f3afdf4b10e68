"""The direct atoms' indexes (betree.matching.direct, betree.matching.directkinds) against the
atoms' own tests,
and the index on the ``rich`` workload against the brute-force evaluator.

Per kind: random atoms and values with the edges (geo at the poles, on the ±180 meridian, on
box edges, radii 0 / negative / around the world; empty and long lists, ints at the ends of
int64; needles longer than the value, Unicode, repeated; caps with and without ids, ``now``
undefined), and the answer compared with testing every atom.  Then stores: online
subscribe with deletes and a reopen, a python bulk load and a sharded store, on the rich
generator's workload, ``match`` and ``match_many`` against the brute force.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang import special
from betree.lang.atoms import Atom, TestAtom, make_test
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.matching import direct, directkinds
from betree.matching.direct import DirectAtoms, counting
from betree.stores.sharded import HASH, open_index, shard_name, shard_of, write_manifest
from storage.codec import encode_id
from tests.support.direct import agree, held, held_many, list_atoms
from tests.support.loads import python_loaded
from tools.bench import gen_rich

I64 = (-(2**63), 2**63 - 1)


def _postings_way(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """List postings asked id by id (``short``), as arrays (``arrays``: long ones), or
    through their batch form one event at a time (``many``: very long ones)."""
    monkeypatch.setattr(direct, "LIST_POSTING_MOST", -1 if way == "many" else 1 << 40)
    monkeypatch.setattr(directkinds, "LONG_POSTINGS", -1 if way == "arrays" else 1 << 40)


@pytest.mark.parametrize("way", ["short", "arrays", "many"])
def test_list_postings_are_exact(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Event by event through each way of asking the postings (:func:`_postings_way`)."""
    _postings_way(way, monkeypatch)
    rng = random.Random(3)
    pool: list[object] = [*range(-3, 12), *I64]
    atoms = list_atoms(rng, "il", pool, 600, 6)
    atoms += [(600, TestAtom("il", "empty")), (601, TestAtom("il", "undefined"))]
    atoms += [(602, TestAtom("il", "not_empty")), (603, TestAtom("il", "defined"))]
    events: list[dict[str, Any]] = [{}]
    events += [{"il": ()}, {"il": tuple(range(-5, 20))}, {"il": tuple(range(100_000))}]
    events += [{"il": tuple(rng.choices(pool, k=rng.randint(0, 9)))} for _ in range(300)]
    assert agree(atoms, events, "il") > 1000


@pytest.mark.parametrize("way", ["short", "arrays", "many"])
def test_string_list_postings_with_unicode(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Event by event through each way of asking the postings (:func:`_postings_way`)."""
    _postings_way(way, monkeypatch)
    rng = random.Random(4)
    pool = ["", "a", "é", "e\u0301", "ß", "ss", "\U0001f600", "x" * 1000]
    atoms = list_atoms(rng, "sl", pool, 300, 4)
    events = [{"sl": tuple(rng.choices(pool, k=rng.randint(0, 6)))} for _ in range(200)]
    assert agree(atoms, events, "sl") > 500


@pytest.mark.parametrize("tests", [["bool_true", "bool_false"], ["bool_false"], ["undefined"]])
def test_presence_pairs_are_exact(tests: list[str]) -> None:
    atoms: list[tuple[int, Atom]] = [(k, TestAtom("b", t)) for k, t in enumerate(tests)]
    events: list[dict[str, Any]] = [{"b": True}, {"b": False}, {}]
    agree(atoms, events, "b")


@pytest.mark.parametrize("test", ["ends_with", "contains"])
def test_suffixes_and_needles_are_exact(test: str) -> None:
    rng = random.Random(5)
    alphabet = ["a", "b", "é", "\U0001f600", "/", "."]
    atoms: list[tuple[int, Atom]] = []
    for aid in range(400):
        needle = "".join(rng.choices(alphabet, k=rng.randint(0, 6)))
        atom = make_test("s", rng.choice([test, "not_" + test]), needle)
        if atom is not None:
            atoms.append((aid, atom))
    words = ["", "a", "ab" * 500, "é\U0001f600"]
    words += ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(300)]
    assert agree(atoms, [{"s": w} for w in words], "s") > 1000


CENTRES = [(90.0, 0.0), (-90.0, 45.0), (89.99, 179.99), (0.0, 180.0), (0.0, -180.0), (10, -179.9)]
CENTRES += [(45.0, 7.0), (-33.9, 151.2), (0.0, 0.0)]


@pytest.mark.parametrize("by_many", [False, True])
def test_geo_grid_never_misses_at_the_poles_and_the_antimeridian(
    by_many: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Event by event through the grid's own loop, or (``by_many``: a grid of many entries
    a cell) through its arrays one event at a time (:meth:`GeoMany.one`)."""
    if by_many:
        monkeypatch.setattr(direct, "GEO_LOOP_MOST", -1)
    rng = random.Random(6)
    atoms: list[tuple[int, Atom]] = []
    radii = [0.0, 0.5, 5.0, 80.0, 700.0, 5000.0, 20050.0, 1e308, -1.0]
    for aid in range(500):
        lat, lon = rng.choice(CENTRES)
        lat, lon = (
            lat + rng.choice([0, rng.uniform(-2, 2)]),
            lon + rng.choice([0, rng.uniform(-2, 2)]),
        )
        test = "geo_within_radius" if rng.random() < 0.8 else "not_geo_within_radius"
        atoms.append((aid, TestAtom("latitude", test, (lat, lon, rng.choice(radii)))))
    atoms += [
        (500, TestAtom("latitude", special.OUT_OF_RANGE, ())),
        (501, TestAtom("latitude", "defined")),
    ]
    events: list[dict[str, Any]] = [{"latitude": 1.0}, {"latitude": -0.0, "longitude": -0.0}]
    for _ in range(800):
        lat, lon = rng.choice(CENTRES)
        r = rng.random()
        if r < 0.6:  # near a centre, wrapped into the ranges
            lat = max(-90.0, min(90.0, lat + rng.uniform(-3, 3)))
            lon = (lon + rng.uniform(-3, 3) + 180.0) % 360.0 - 180.0
        elif r < 0.7:
            lat, lon = rng.choice([90.0, -90.0]), rng.uniform(-180, 180)
        elif r < 0.8:
            lon = rng.choice([180.0, -180.0])
        elif r < 0.9:  # beyond the ranges: every atom tested
            lat, lon = rng.uniform(-200, 200), rng.uniform(-400, 400)
        events.append({"latitude": float(lat), "longitude": float(lon)})
    assert agree(atoms, events, "latitude") > 2000
    # the grid skips most atoms (a tenth of the events, beyond the ranges, test them all),
    # event by event and in a batch
    group = DirectAtoms(atoms)
    for one_by_one in (True, False):
        with counting() as counts:
            if one_by_one:
                for ev in events:
                    held(group, "latitude", ev, 502)
            else:
                held_many(group, "latitude", events, 502)
        assert counts["geo"][0] == len(events)
        # (GeoMany.one takes a distance for every entry of the event's cells, the loop
        # and the batch for those inside their box: the bound of the looser)
        assert counts["geo"][1] < 500 * len(events) * 0.6


def test_caps_and_segments_are_exact() -> None:
    rng = random.Random(7)
    kinds, spaces = ["flight", "campaign", "product:ip"], ["a", "b"]
    caps: list[tuple[int, Atom]] = []
    segs: list[tuple[int, Atom]] = []
    for aid in range(400):
        ident = rng.choice([None, 0, 1, 2])
        args = (rng.choice(kinds), ident, rng.choice(spaces), rng.randint(0, 5), rng.randint(-1, 9))
        neg = "not_" if rng.random() < 0.3 else ""
        caps.append((aid, TestAtom("frequency_caps", neg + "within_frequency_cap", args)))
        func = neg + rng.choice(["segment_within", "segment_before"])
        segs.append((aid, TestAtom("seg", func, (rng.randint(0, 5), rng.randint(-5, 20)))))
    events = []
    for _ in range(400):
        ev: dict[str, Any] = {}
        if rng.random() < 0.8:
            ev["now"] = rng.choice([0, 10, 20, *I64])
        ev["frequency_caps"] = tuple(
            (rng.choice(kinds), rng.randint(0, 2), rng.choice(spaces),
             rng.choice([None, rng.randint(0, 20) * 10**6]), rng.randint(0, 6))
            for _ in range(rng.randint(0, 4))
        )  # fmt: skip
        ev["seg"] = tuple(
            sorted(
                (rng.randint(0, 5), rng.randint(-5, 25) * 10**6) for _ in range(rng.randint(0, 4))
            )
        )
        events.append(ev)
    assert agree(caps, events, "frequency_caps") > 1000
    assert agree(segs, events, "seg") > 1000


# -- stores on the rich workload ----------------------------------------------------------------


def _brute(schema: Schema, subs: dict[Any, str], events: list[dict[str, Any]]) -> list[set[Any]]:
    nodes = {ident: compile_expr(expr, schema) for ident, expr in subs.items()}
    values = [schema.validate_event(e) for e in events]
    return [{i for i, n in nodes.items() if evaluate(n, v)} for v in values]


def _rich(n: int, events: int, seed: int) -> tuple[dict[str, Any], dict[Any, str], list[Any]]:
    schema, subs, evs, _ = gen_rich.make(n, events, check=False, seed=seed, target_rate=0.01)
    return schema, dict(subs), evs


def _one_event_arrays(arrays: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``arrays``, one event's geo grid through :meth:`GeoMany.one` and its list
    postings as arrays (the paths of rich 100K), which these small workloads do not reach
    by themselves (segments take theirs always)."""
    if arrays:
        monkeypatch.setattr(direct, "GEO_LOOP_MOST", -1)
        _postings_way("arrays", monkeypatch)


@pytest.mark.parametrize("arrays", [False, True])
def test_online_rich_store_matches_brute_force(
    arrays: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_event_arrays(arrays, monkeypatch)
    schema_doc, subs, events = _rich(1280, 120, seed=11)  # the last 80: written online
    schema = Schema.from_json(schema_doc)
    items = list(subs.items())
    later, items = items[1200:], items[:1200]
    subs = dict(items)
    with Index.open(tmp_path / "s", schema=schema_doc, settings={"max_cap": 8}) as idx:
        for start in range(0, len(items), 100):
            idx.subscribe_many(items[start : start + 100])
        gone = [ident for ident, _ in items[::7]]
        for ident in gone:
            assert idx.unsubscribe(ident)
            del subs[ident]
        idx.check()
    want = _brute(schema, subs, events)
    assert sum(map(len, want)) > 100  # the workload does match
    with Index.open(tmp_path / "s") as idx:  # reopened
        for ev, w in zip(events, want, strict=True):
            assert set(idx.match(ev)) == w
        for _ in range(2):  # the second after 64 events: on the packed view
            for got, w in zip(idx.match_many(events), want, strict=True):
                assert set(got) == w  # type: ignore[arg-type]
        for ev, w in zip(events, want, strict=True):  # on the view, rows by their keys
            assert set(idx.match(ev)) == w
        # written online beside the view (its delta): new rules, a replacement, deletes
        added = {f"new-{k}": e for k, e in enumerate(dict(later).values())}
        added[items[1][0]] = items[2][1]
        idx.subscribe_many(list(added.items()))
        subs.update(added)
        changed = set(added)
        for ident in [i for i, _ in items[3::11] if i in subs]:
            assert idx.unsubscribe(ident)
            del subs[ident]
            changed.add(ident)
        # the brute force's answers again: those of the rules unchanged kept, the rest anew
        new = _brute(schema, {i: subs[i] for i in changed if i in subs}, events)
        want = [(w - changed) | n for w, n in zip(want, new, strict=True)]
        for ev, w in zip(events, want, strict=True):
            assert set(idx.match(ev)) == w
        for got, w in zip(idx.match_many(events), want, strict=True):
            assert set(got) == w  # type: ignore[arg-type]


@pytest.mark.parametrize("arrays", [False, True])
def test_python_load_and_sharded_rich_stores_match_brute_force(
    arrays: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _one_event_arrays(arrays, monkeypatch)
    schema_doc, subs, events = _rich(900, 100, seed=12)
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(3)]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), 3)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(tmp_path / "sh" / shard_name(k), schema=schema_doc) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(tmp_path / "sh", entries, {"by": "id", "hash": HASH, "shards": 3})
    want = _brute(schema, subs, events)
    assert sum(map(len, want)) > 80
    for path in (tmp_path / "py", tmp_path / "sh"):
        with open_index(path) as idx:
            idx.check()
            for _ in range(2):  # the second on the views, rows by their keys
                for ev, w in zip(events, want, strict=True):
                    assert set(idx.match(ev)) == w
            for _ in range(2):
                for got, w in zip(idx.match_many(events), want, strict=True):
                    assert set(got) == w  # type: ignore[arg-type]
