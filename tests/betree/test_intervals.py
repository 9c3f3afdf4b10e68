"""Interval matching (betree.packed.intervals, betree.packed.bounds, betree.packed.ranging) against
the brute-force evaluator: dense range workloads, mixed workloads with every operator,
undefined attributes, deletes, reopening, sharded stores, ``match`` and ``match_many``,
and the ends of the int and float domains; a view too big for the page cache held as its
interval matcher alone (betree.packed.held.FlatSlot.lean), built straight from the pages
(betree.packed.leanbuild) or from a whole view then stripped, folds included, and only
when cheaper than the walks."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from betree.disk import grid
from betree.disk.grid import float_coord
from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import intervals, leanbuild
from betree.packed.bounds import lower, upper
from betree.packed.held import LEAN_TIMES
from betree.stores.sharded import HASH, open_index, shard_name, shard_of, write_manifest
from storage.codec import encode_id
from tests.support.brute import brute
from tests.support.edges import (
    EDGE_SCHEMA,
    FLOAT_VALUES,
    INT_VALUES,
    NUMBER_LITERALS,
    edge_atoms,
    edge_events,
)
from tests.support.workload import SCHEMA, build_hashed, event, expression

DENSE = {
    "attributes": {
        **{f"a{k}": {"type": "int", "min": 0, "max": 1000} for k in range(6)},
        **{f"f{k}": {"type": "float", "min": 0, "max": 1} for k in range(3)},
        "s": {"type": "string"},
    }
}


def _dense_expr(rng: random.Random) -> str:
    """A conjunction of wide ranges, now and then with another form or a second clause."""
    parts = []
    for attr in rng.sample([*(f"a{k}" for k in range(6)), "f0", "f1", "f2"], rng.randint(1, 7)):
        if attr[0] == "a":
            lo = rng.randint(-5, 700)
            hi = lo + rng.randint(-3, 500)
            lo_t, hi_t = str(lo), rng.choice([str(hi), f"{hi}.5", f"{hi}.0"])
        else:
            lo_f = round(rng.random() * 0.7, 2)
            lo_t, hi_t = str(lo_f), rng.choice([str(lo_f + 0.4), str(rng.randint(0, 1))])
        form = rng.randrange(8)
        if form < 4:
            parts.append(f"{attr} between {lo_t} and {hi_t}")
        elif form == 4:
            parts.append(f"{attr} {rng.choice(['<', '<=', '>', '>='])} {lo_t}")
        elif form == 5:
            parts.append(f"{attr} = {lo_t}" if attr[0] == "a" else f"{attr} != {lo_t}")
        elif form == 6:
            parts.append(f"{attr} in ({lo_t}, {hi_t})")
        else:
            parts.append(f"{attr} <> {lo_t}")
    if rng.random() < 0.1:
        parts.append(rng.choice(['s = "x"', "s is null", 'starts_with(s, "a")', "a0 is null"]))
    expr = " and ".join(parts)
    return expr if rng.random() < 0.85 else f"({expr}) or a{rng.randrange(6)} > 600"


def _churn(
    idx: Index,
    subs: dict[Any, str],
    rng: random.Random,
    removed: int,
    base: int,
    added: int,
    make: Callable[[random.Random], str],
) -> list[Any]:
    """A delta: ``removed`` random subscriptions unsubscribed, then ``added`` made by
    ``make`` written under ids from ``base``, both kept in ``subs``; the removed ids."""
    gone = rng.sample(sorted(subs), removed)
    idx.unsubscribe_many(gone)
    for ident in gone:
        del subs[ident]
    fresh = {base + k: make(rng) for k in range(added)}
    idx.subscribe_many(fresh.items())
    subs.update(fresh)
    return gone


def _dense_event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {f"a{k}": rng.randint(-10, 1010) for k in range(6)}
    ev.update({f"f{k}": rng.choice([rng.random(), 0, 1, 0.5, -0.0]) for k in range(3)})
    if rng.random() < 0.5:
        ev["s"] = rng.choice(["x", "ab", ""])
    for attr in list(ev):
        if rng.random() < 0.05:
            del ev[attr]
    return ev


def _intervals_always(idx: Index) -> None:
    """Match from a packed view at once, by intervals whatever they cost."""
    idx.engine.flat.after = 0
    idx.engine.ranging.after = 0
    idx.engine.ranging.margin = math.inf


def _dense_workload(
    rng: random.Random, count: int, events: int
) -> tuple[Schema, dict[Any, str], list[dict[str, Any]]]:
    """The dense schema, ``count`` subscriptions by id and ``events`` events."""
    subs = {i: _dense_expr(rng) for i in range(count)}
    return Schema.from_json(DENSE), subs, [_dense_event(rng) for _ in range(events)]


def _check(idx: Any, subs: dict[Any, str], schema: Schema, events: list[dict[str, Any]]) -> None:
    """``match`` of each event and ``match_many`` of all (in two sizes of batch) equal
    the brute-force answers."""
    want = [brute(subs, schema, ev) for ev in events]
    for ev, expected in zip(events, want, strict=True):
        got = idx.match(ev)
        assert len(got) == len(set(got)), ev
        assert set(got) == expected, ev
    for batch in (events, events[:3]):
        many = idx.match_many(batch)
        for ev, got, expected in zip(batch, many, want, strict=False):
            assert sorted(got, key=repr) == sorted(expected, key=repr), ev


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dense_ranges_match_brute_force(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    schema, subs, events = _dense_workload(rng, 300, 60)
    for phase in range(3):
        with Index.open(tmp_path, schema=DENSE if phase == 0 else None) as idx:
            _intervals_always(idx)
            if phase == 0:
                idx.subscribe_many(subs.items())
            else:  # deletes and replacements: a new snapshot, chosen afresh
                gone = rng.sample(sorted(subs), 40)
                idx.unsubscribe_many(gone)
                for ident in gone:
                    del subs[ident]
                fresh = {1000 * phase + k: _dense_expr(rng) for k in range(30)}
                idx.subscribe_many(fresh.items())
                subs.update(fresh)
            _check(idx, subs, schema, events)
            assert idx.engine.ranging.describe()["intervals"]
            idx.check()


@pytest.mark.parametrize("seed", [4, 5])
def test_every_operator_matches_brute_force(tmp_path: Path, seed: int) -> None:
    """The mixed workload: lists, strings, bools, tests, ``or``/``not``: the atoms other
    than intervals are checked through their own truths."""
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = {i: expression(rng) for i in range(250)}
    events = [event(rng) for _ in range(60)]
    with Index.open(tmp_path, schema=SCHEMA) as idx:
        _intervals_always(idx)
        idx.subscribe_many(subs.items())
        _check(idx, subs, schema, events)
        assert idx.engine.ranging.describe()["intervals"]


def test_sharded_store_matches_brute_force(tmp_path: Path) -> None:
    rng = random.Random(6)
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = {i: expression(rng) for i in range(200)}
    subs.update(
        {f"d{i}": " and ".join(f"i between {k} and {k + 9}" for k in (i % 7, 3)) for i in range(40)}
    )
    events = [event(rng) for _ in range(50)]
    root = build_hashed(tmp_path / "sharded", subs)
    with open_index(root, readonly=False) as idx:
        for shard in idx.indexes:
            _intervals_always(shard)
        _check(idx, subs, schema, events)
        assert idx.indexes[0].engine.ranging.describe()["intervals"]
        # a write to one shard: new views, a new choice, the same answers
        gone = [ident for ident in subs if isinstance(ident, int) and ident % 5 == 0]
        idx.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        _check(idx, subs, schema, events)


def test_edges_of_the_domains_match_brute_force(tmp_path: Path) -> None:
    """Every comparison of int and float attributes with literals at the ends (±2**63,
    ±1.8e308, ±0.0, 2**53 + 1, subnormals), alone and in pairs, against events at the
    ends."""
    rng = random.Random(7)
    schema = Schema.from_json(EDGE_SCHEMA)
    atoms = [a for a in edge_atoms() if not a.startswith(("s ", "starts", "ends", "contains"))]
    exprs = [*atoms, *(f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(300))]
    subs = dict(enumerate(exprs))
    with Index.open(tmp_path, schema=EDGE_SCHEMA) as idx:
        _intervals_always(idx)
        idx.subscribe_many(subs.items())
        _check(idx, subs, schema, edge_events())
        assert idx.engine.ranging.describe()["intervals"]


def _holds(op: str, x: int | float, c: int | float) -> bool:
    return {"<": x < c, "<=": x <= c, ">": x > c, ">=": x >= c}[op]


@pytest.mark.parametrize("kind", ["int", "float"])
def test_bounds_are_exact_at_the_ends(kind: str) -> None:
    """``lower``/``upper`` admit a value's coordinate exactly when Python's exact
    comparison of the value with the constant holds."""
    values: list[int | float] = list(INT_VALUES) if kind == "int" else list(FLOAT_VALUES)
    values += [2**53, 2**53 + 2] if kind == "int" else [9007199254740994.0, -5e-324]
    keys = [c for _, c in NUMBER_LITERALS] + [2**53 + 1, -(2**53) - 1, 2**63 - 1, -(2**63)]
    for c in keys:
        for op in ("<", "<=", ">", ">="):
            if op[0] == ">":
                bound, admits = lower(kind, c, op == ">="), lambda b, x: b <= x
            else:
                bound, admits = upper(kind, c, op == "<="), lambda b, x: x <= b
            for v in values:
                x = grid.coord(kind, v) if kind == "int" else float_coord(float(v))
                got = bound is not None and admits(bound, x)
                assert got == _holds(op, v, c), (kind, v, op, c, bound)


def _choice(tmp_path: Path, attrs: int, width: int, defined: int) -> dict[str, object]:
    """The choice made on a workload of 600 subscriptions of 4 ranges of ``width`` over
    ``attrs`` attributes, its events defining ``defined`` of them (answers checked)."""
    rng = random.Random(8)
    schema = {"attributes": {f"a{k}": {"type": "int", "min": 0, "max": 999} for k in range(attrs)}}
    subs = {}
    for i in range(600):
        parts = []
        for attr in rng.sample(range(attrs), 4):
            lo = rng.randint(0, 999 - width)
            parts.append(f"a{attr} between {lo} and {lo + width}")
        subs[i] = " and ".join(parts)
    events = [
        {f"a{k}": rng.randint(0, 999) for k in rng.sample(range(attrs), defined)} for _ in range(40)
    ]
    with Index.open(tmp_path, schema=schema, settings={"max_cap": 8, "min_size": 2}) as idx:
        idx.engine.flat.after = 0
        idx.subscribe_many(subs.items())
        want = [brute(subs, idx.schema, ev) for ev in events]
        for ev, expected in zip(events, want, strict=True):
            assert set(idx.match(ev)) == expected
        return idx.engine.ranging.describe()


def test_the_choice_follows_the_cost(tmp_path: Path) -> None:
    """Wide ranges on every attribute of the events (every clause reached) go to
    intervals; narrow ones over many attributes, few of them in each event, stay in the
    tree (a bitset an attribute would cost more than the clauses it reaches)."""
    assert _choice(tmp_path / "wide", 20, 900, 20)["intervals"]
    narrow = _choice(tmp_path / "narrow", 300, 2, 20)
    assert narrow["decided"] and not narrow["intervals"]


def test_intervals_of_a_store_left_empty_and_its_delta(tmp_path: Path) -> None:
    """A view with no clause by intervals (zero bitset words: a division by zero before),
    then the subscriptions written after it, from its delta."""
    rng = random.Random(11)
    with Index.open(tmp_path, schema=SCHEMA) as idx:
        idx.subscribe(0, expression(rng))
        idx.unsubscribe(0)
        _intervals_always(idx)
        schema = Schema.from_json(SCHEMA)
        _check(idx, {}, schema, [event(rng) for _ in range(3)])
        assert idx.engine.ranging.describe()["intervals"]
        subs = {k: expression(rng) for k in range(1, 20)}
        for k, expr in subs.items():
            idx.subscribe(k, expr)
        _check(idx, subs, schema, [event(rng) for _ in range(30)])
        idx.check()


#: a page cache of which 4x holds these stores' intervals; no whole view fits the share
SMALL = 1 << 20
SHARE = 8 << 10


def _lean_always(idx: Index) -> None:
    """Build a view at the first event; take the intervals whatever the walks cost."""
    idx.engine.flat.after = 0
    idx.engine.flat.share = SHARE
    idx.engine.ranging.margin = math.inf


def _is_lean(idx: Index) -> bool:
    held = idx.engine.flat._held
    if held is None:
        return False
    view = held[1].view
    assert view.nbytes <= LEAN_TIMES * idx.engine.store.cache.budget
    return view.ranged is not None and len(view.rows) == 0


#: The second path (a whole view stripped, the older one) on one representative test of
#: every operator and on the fold; the rest on the pages alone (CPU: issue 30 point 6).
BOTH_PATHS = pytest.mark.parametrize("lean_path", ["pages", "stripped"], indirect=True)
PAGES_PATH = pytest.mark.parametrize("lean_path", ["pages"], indirect=True)


@pytest.fixture
def lean_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A lean test on a path: the interval matcher built straight from the pages, or
    (the whole view estimated to fit) from a whole view then stripped; the pages builds
    counted, so that each test sees the path it names taken (a fold's build from the
    pages, whichever path built the first, is counted apart: 2, then its own 1)."""
    built: list[int] = []
    lean_view, lean_base = leanbuild.lean_view, leanbuild.lean_base

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return lean_view(*args, **kwargs)

    def folded(*args: Any, **kwargs: Any) -> Any:
        built.append(2)
        return lean_base(*args, **kwargs)

    monkeypatch.setattr(leanbuild, "lean_view", counted)
    monkeypatch.setattr(leanbuild, "lean_base", folded)
    if request.param == "stripped":
        monkeypatch.setattr(leanbuild, "PREDICATE_BYTES", -(1 << 40))  # estimated to fit
    built.append(0 if request.param == "stripped" else -1)  # the path, then the builds
    return built


def _took(lean_path: list[int]) -> None:
    """The path named was taken: some first build from the pages, or none (the folds'
    builds, each one lean_base and its lean_view, left out)."""
    builds = lean_path.count(1) - lean_path.count(2)
    assert builds > 0 if lean_path[0] else builds == 0


@PAGES_PATH
def test_a_view_too_big_for_the_cache_is_matched_by_intervals(
    tmp_path: Path, lean_path: list[int]
) -> None:
    rng = random.Random(21)
    schema, subs, events = _dense_workload(rng, 400, 60)
    with Index.open(tmp_path, schema=DENSE, cache_bytes=SMALL) as idx:
        idx.subscribe_many(subs.items())
    for phase in range(3):
        with Index.open(tmp_path, cache_bytes=SMALL) as idx:
            _lean_always(idx)
            _check(idx, subs, schema, events)
            assert _is_lean(idx)
            assert idx.engine.store.cache.max_bytes == SMALL  # (charged apart)
            gone = _churn(idx, subs, rng, 30, 1000 * (phase + 1), 25, _dense_expr)  # the delta
            subs[gone[0]] = _dense_expr(rng)  # an id back, another expression
            idx.subscribe(gone[0], subs[gone[0]])
            _check(idx, subs, schema, events)
            assert _is_lean(idx)
            idx.check()
    _took(lean_path)


@BOTH_PATHS
def test_a_fold_of_a_lean_view_is_lean_again(tmp_path: Path, lean_path: list[int]) -> None:
    """A delta due for folding: the new base view is lean too (built from the pages in
    the background, whichever path built the first), the same answers."""
    rng = random.Random(22)
    schema, subs, events = _dense_workload(rng, 300, 40)
    with Index.open(tmp_path, schema=DENSE, cache_bytes=SMALL) as idx:
        _lean_always(idx)
        idx.subscribe_many(subs.items())
        _check(idx, subs, schema, events)
        builds, first = idx.engine.flat.builds, len(lean_path)
        for k in range(400):  # one at a time: past the delta's bound, folded
            subs[5000 + k] = _dense_expr(rng)
            idx.subscribe(5000 + k, subs[5000 + k])
            if k % 50 == 0:
                idx.match(events[0])
        idx.engine.flat.wait()
        _check(idx, subs, schema, events)
        assert idx.engine.flat.builds > builds
        assert _is_lean(idx)
        assert len(lean_path) > first  # (the fold's build from the pages)


@PAGES_PATH
def test_a_sharded_store_too_big_for_the_cache(tmp_path: Path, lean_path: list[int]) -> None:
    """Each shard lean (no join), its writes through the journal, reopened."""
    rng = random.Random(23)
    schema, subs, events = _dense_workload(rng, 300, 40)
    parts: list[list[tuple[Any, str]]] = [[], [], []]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), 3)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(tmp_path / shard_name(k), schema=DENSE) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(tmp_path, entries, {"by": "id", "hash": HASH, "shards": 3})
    for _ in range(2):
        with open_index(tmp_path, readonly=False, cache_bytes=3 * SMALL) as idx:
            for shard in idx.indexes:
                _lean_always(shard)
            _check(idx, subs, schema, events)
            assert all(_is_lean(shard) for shard in idx.indexes)
            gone = [i for i in subs if i % 7 == 0][:20]
            idx.unsubscribe_many(gone)
            for ident in gone:
                del subs[ident]
            fresh = {9000 + len(subs) + k: _dense_expr(rng) for k in range(15)}
            idx.subscribe_many(fresh.items())
            subs.update(fresh)
            _check(idx, subs, schema, events)
            idx.check()
    _took(lean_path)


def test_intervals_costlier_than_the_walks_are_not_held(tmp_path: Path) -> None:
    """Narrow ranges over many attributes, few in each event: the walks reach few
    clauses, a bitset an attribute would cost more; the view too big is then not even
    built, and the pages walked, with the same answers."""
    rng = random.Random(24)
    spec = {"attributes": {f"a{k}": {"type": "int", "min": 0, "max": 999} for k in range(200)}}
    subs = {}
    for i in range(600):
        parts = []
        for attr in rng.sample(range(200), 4):
            lo = rng.randint(0, 997)
            parts.append(f"a{attr} between {lo} and {lo + 2}")
        subs[i] = " and ".join(parts)
    events = [{f"a{k}": rng.randint(0, 999) for k in rng.sample(range(200), 10)} for _ in range(30)]
    with Index.open(tmp_path, schema=spec, cache_bytes=SMALL) as idx:
        idx.engine.flat.after = 3
        idx.engine.flat.share = SHARE
        idx.subscribe_many(subs.items())
        _check(idx, subs, Schema.from_json(spec), events)
        assert idx.engine.flat.builds == 0  # (the bitsets alone would cost more: not tried)
        assert not idx.engine.flat.describe()["held"]
        assert not idx.engine.ranging.describe()["intervals"]


@pytest.mark.parametrize("buckets", [1, 2, 64])
def test_events_at_the_least_and_greatest_ends(
    tmp_path: Path, buckets: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attribute's ends are kept as uint32 offsets from one below the least (``a``:
    every range closed), or as coordinates when they span 2**32 or more (``b``): events
    one below, at and one above each end, the ends in one bucket (found by the sorted
    ends alone) or more.  ``c``'s ends all lie within 2**32 of -2**63, the least
    coordinate (no offset base below it), ``d``'s of 2**63 - 1."""
    monkeypatch.setattr(intervals, "BUCKETS", buckets)
    spec = {"attributes": {k: {"type": "int"} for k in "abcd"}}
    subs: dict[Any, str] = {
        0: "a between 100 and 200",
        1: "a between 150 and 300",
        2: "a >= 100 and a <= 101",
        3: "a > 100 and a < 300",
        4: "a = 300",
        5: "b between -3 and 4294967296",
        6: "b >= 4294967293",
        7: "b <= -3 and a between 100 and 300",
        8: f"c < {-(2**63) + 5}",
        9: f"c between {-(2**63)} and {-(2**63) + 2} and d >= {2**63 - 3}",
        10: f"d > {2**63 - 2}",
    }
    ends = [100, 150, 200, 300]
    values = sorted({v + d for v in ends for d in (-1, 0, 1)} | {-(2**63), 2**63 - 1})
    bvalues = [-(2**63), -4, -3, -2, 0, 4294967292, 4294967293, 4294967296, 4294967297]
    events: list[dict[str, Any]] = [{"a": a} for a in values]
    events += [{"b": b, "a": a} for b in bvalues for a in (99, 100)]
    events += [{"c": -(2**63) + k, "d": 2**63 - 1 - k} for k in range(7)]
    with Index.open(tmp_path, schema=spec) as idx:
        _intervals_always(idx)
        idx.subscribe_many(subs.items())
        _check(idx, subs, Schema.from_json(spec), events)
        assert idx.engine.ranging.describe()["intervals"]


@BOTH_PATHS
def test_lean_views_of_every_operator_and_the_domain_ends(
    tmp_path: Path, lean_path: list[int]
) -> None:
    """Built lean: the mixed workload (lists, strings, bools, tests, ``or``/``not``,
    several clauses a subscription), then the int and float ends (±2**63, ±1.8e308,
    ±0.0, 2**53 + 1) alone and in pairs, against events at the ends; deletes and adds
    after the view, reopened."""
    rng = random.Random(31)
    subs: dict[Any, str] = {i: expression(rng) for i in range(250)}
    with Index.open(tmp_path / "mixed", schema=SCHEMA, cache_bytes=SMALL) as idx:
        idx.subscribe_many(subs.items())
    for phase in range(2):
        with Index.open(tmp_path / "mixed", cache_bytes=SMALL) as idx:
            _lean_always(idx)
            _check(idx, subs, Schema.from_json(SCHEMA), [event(rng) for _ in range(40)])
            assert _is_lean(idx)
            _churn(idx, subs, rng, 25, 1000 * (phase + 1), 20, expression)
            _check(idx, subs, Schema.from_json(SCHEMA), [event(rng) for _ in range(40)])
            idx.check()
    atoms = [a for a in edge_atoms() if not a.startswith(("s ", "starts", "ends", "contains"))]
    exprs = [*atoms, *(f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(300))]
    edges = dict(enumerate(exprs))
    with Index.open(tmp_path / "edges", schema=EDGE_SCHEMA, cache_bytes=SMALL) as idx:
        _lean_always(idx)
        idx.subscribe_many(edges.items())
        _check(idx, edges, Schema.from_json(EDGE_SCHEMA), edge_events())
        assert _is_lean(idx)
    _took(lean_path)
