"""The be-tree library's forms (int_enum, segments, frequency caps, geo, ``now``) through the
index, online and bulk-built, against the brute-force evaluator on random workloads.

Events leave attributes undefined (``now``, ``longitude`` alone, the lists), hold points
beyond the coordinate ranges (the haversine formula accepts them) and on the edges of the
radius boxes; expressions mix the forms with ``and``/``or``/``not`` and plain atoms.  Also:
the geo box never excludes a point within the radius, and the event checks refuse bad
values by name.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk.bulk import build_index
from betree.index import Index
from betree.lang import special
from betree.lang.atoms import TestAtom
from betree.lang.dnf import to_clauses
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.matching.direct import DirectAtoms
from storage.errors import InvalidInput
from tests.support.brute import brute
from tests.support.differential import online_differential
from tests.support.direct import held

SCHEMA = {
    "attributes": {
        "latitude": {"type": "float", "min": -90, "max": 90},
        "longitude": {"type": "float", "min": -180, "max": 180},
        "now": {"type": "int", "min": 0, "max": 100},
        "segments_with_timestamp": {"type": "segments"},
        "seg": {"type": "segments"},
        "frequency_caps": {"type": "frequency_caps"},
        "e": {"type": "int_enum"},
        "i": {"type": "int", "min": 0, "max": 10},
    }
}
# Centres of the geo atoms, and the points events sit near (some beyond the ranges).
CENTRES = [(0.0, 0.0), (45.5, -73.6), (-33.9, 151.2), (89.99, 10.0), (10.0, 179.9), (100.0, 100.0)]
RADII = ["0", "1", "50", "500.5", "3000", "12000", "25000", "-1"]
CAP_TYPES = ["flight", "campaign", "product:ip"]


def _geo(rng: random.Random) -> str:
    lat, lon = rng.choice(CENTRES)
    return f"geo_within_radius({lat}, {lon}, {rng.choice(RADII)})"


def atom(rng: random.Random) -> str:
    form = rng.randrange(8)
    if form <= 1:
        return _geo(rng)
    if form == 2:
        func = rng.choice(["segment_within", "segment_before"])
        attr = rng.choice(["", "seg, ", "segments_with_timestamp, "])
        return f"{func}({attr}{rng.randint(0, 4)}, {rng.randint(-5, 60)})"
    if form == 3:
        kind = rng.choice(CAP_TYPES)
        ident = f"{rng.randint(0, 2)}, " if rng.random() < 0.6 else ""
        ns = rng.choice(["a", "b"])
        limit, length = rng.randint(0, 5), rng.randint(-1, 30)
        return f'within_frequency_cap("{kind}", {ident}"{ns}", {limit}, {length})'
    if form == 4:
        op = rng.choice(["=", "<>", "!="])
        n = rng.randint(0, 4)
        return f"e {op} {n}" if rng.random() < 0.8 else f"{n} {op} e"
    if form == 5:
        values = ", ".join(str(rng.randint(0, 4)) for _ in range(rng.randint(0, 3)))
        return f"e {'not ' if rng.random() < 0.4 else ''}in ({values})"
    if form == 6:
        attr = rng.choice(["e", "now", "seg", "frequency_caps", "latitude", "longitude"])
        return f"{attr} is {'not ' if rng.random() < 0.5 else ''}null"
    return rng.choice([f"i > {rng.randint(0, 10)}", f"latitude < {rng.randint(-90, 90)}"])


def expression(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth >= 2 or r < 0.4:
        return atom(rng)
    if r < 0.75:
        parts = [expression(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        return "(" + " and ".join(parts) + ")"
    if r < 0.9:
        return "(" + " or ".join(expression(rng, depth + 1) for _ in range(2)) + ")"
    return "not " + expression(rng, depth + 1)


def _point(rng: random.Random) -> tuple[float, float]:
    r = rng.random()
    if r < 0.6:  # near a centre: within a few hundred km
        lat, lon = rng.choice(CENTRES)
        return lat + rng.uniform(-3, 3), lon + rng.uniform(-3, 3)
    if r < 0.7:
        return rng.choice(CENTRES)
    return rng.uniform(-200, 200), rng.uniform(-400, 400)


def event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if rng.random() < 0.85:
        ev["latitude"], ev["longitude"] = _point(rng)
        if rng.random() < 0.1:
            del ev[rng.choice(["latitude", "longitude"])]
    if rng.random() < 0.8:
        ev["now"] = rng.randint(0, 100)
    for attr in ("segments_with_timestamp", "seg"):
        if rng.random() < 0.75:
            ev[attr] = [
                [rng.randint(0, 4), rng.randint(-10, 110) * 10**6 + rng.randint(-999_999, 999_999)]
                for _ in range(rng.randint(0, 3))
            ]
    if rng.random() < 0.75:
        caps = []
        for _ in range(rng.randint(0, 3)):
            key = [rng.choice(CAP_TYPES), rng.randint(0, 2), rng.choice(["a", "b"])]
            count = rng.randint(0, 6)
            ts = rng.choice([None, rng.randint(0, 100) * 1_000_000 + rng.randint(0, 999_999)])
            caps.append([key, count, ts] if rng.random() < 0.3 else [*key, count, ts])
        ev["frequency_caps"] = caps
    if rng.random() < 0.8:
        ev["e"] = rng.randint(0, 4)
    if rng.random() < 0.6:
        ev["i"] = rng.randint(0, 10)
    return ev


@pytest.mark.parametrize(("seed", "settings"), [(1, {"max_cap": 3, "min_size": 2}), (2, {})])
def test_online_index_matches_brute_force(
    tmp_path: Path, seed: int, settings: dict[str, int]
) -> None:
    matched = online_differential(tmp_path / "s", SCHEMA, settings, expression, event, seed, 200)
    assert matched > 50  # the workload does match


def test_bulk_built_index_matches_brute_force(tmp_path: Path) -> None:
    rng = random.Random(11)
    subs = {f"s{i}": expression(rng) for i in range(300)}
    schema = Schema.from_json(SCHEMA)
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 4, "min_size": 2}) as idx:
        compiled = [
            (ident, expr, idx.engine.compiler().compile(ident, expr))
            for ident, expr in subs.items()
        ]
        build_index(idx, compiled)
        idx.check()
        for _ in range(80):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, schema, ev)
        ident = next(iter(subs))
        ev = event(rng)
        report = idx.explain(ident, ev)
        assert report["matches"] == (ident in brute(subs, schema, ev))


def test_geo_box_encloses_every_point_within_the_radius() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        lat0, lon0 = rng.uniform(-120, 120), rng.uniform(-400, 400)
        radius = rng.choice([0.0, 0.5, 10.0, 300.0, 2000.0, 9000.0, rng.uniform(0, 21000)])
        box = special.geo_box(lat0, lon0, radius)
        assert box is not None
        (la, lb), (oa, ob) = box
        for _ in range(20):
            # points on and near the circle, in the coordinate ranges
            bearing = rng.uniform(0, 2 * math.pi)
            d = radius * rng.choice([1.0, 0.999999, rng.random()]) / special.EARTH_RADIUS_KM
            c_lat = math.radians(lat0)
            c_lat = math.asin(math.sin(c_lat))  # back into [-90, 90] like the box's centre
            plat = math.asin(
                math.sin(c_lat) * math.cos(d) + math.cos(c_lat) * math.sin(d) * math.cos(bearing)
            )
            plon = math.radians(lon0) + math.atan2(
                math.sin(bearing) * math.sin(d) * math.cos(c_lat),
                math.cos(d) - math.sin(c_lat) * math.sin(plat),
            )
            lat = math.degrees(plat)
            lon = (math.degrees(plon) + 180) % 360 - 180
            if special.geo_within(lat0, lon0, lat, lon, radius):
                assert la <= lat <= lb and oa <= lon <= ob, (lat0, lon0, radius, lat, lon)
    assert special.geo_box(1.0, 2.0, -0.5) is None


def test_geo_clauses_keep_the_exact_test_and_prune_by_box() -> None:
    schema = Schema.from_json(SCHEMA)
    clauses = to_clauses(compile_expr("geo_within_radius(45.5, -73.6, 10)", schema))
    inside = max(clauses, key=len)
    assert {a.attr for a in inside} == {"latitude", "longitude"}
    assert len(clauses) == 2  # the box, and the points beyond the coordinate ranges
    assert to_clauses(compile_expr("geo_within_radius(1, 2, 1e5)", schema)) == [
        (TestAtom("latitude", "geo_within_radius", (1.0, 2.0, 1e5)),)
    ]
    assert to_clauses(compile_expr("geo_within_radius(1, 2, -1)", schema)) == []


@pytest.mark.parametrize(
    ("expr", "column", "reason"),
    [
        ("e < 3", 3, 'operator "<" does not apply to int_enum attribute "e"'),
        ("e between 1 and 2", 3, '"between" does not apply to int_enum attribute "e"'),
        ("e = 1.5", 5, 'float literal compared to int_enum attribute "e"'),
        ("segment_within(1)", 1, "segment_within takes 2 or 3 arguments, not 1"),
        ("segment_within(i, 1, 2)", 16, 'segment_within needs segments attribute "i", not int'),
        ("segment_within(nope, 1, 2)", 16, 'segment_within reads attribute "nope"'),
        ("segment_before(1, 2.5)", 19, "segment_before takes an integer here"),
        ('within_frequency_cap("nope", "a", 1, 2)', 22, "unknown frequency cap type 'nope'"),
        ('within_frequency_cap("flight", 1, 2, 3)', 32, "within_frequency_cap takes a str here"),
        ('geo_within_radius(1, "x", 3)', 22, "geo_within_radius takes a number here"),
        ("geo_within_radius(1, 2, 3", 26, "unexpected end of expression"),
        ("seg = 1", 5, 'operator "=" does not apply to segments attribute "seg"'),
        ("frequency_caps is empty", 16, '"is empty" does not apply to frequency_caps'),
    ],
)
def test_errors_name_the_column(expr: str, column: int, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        compile_expr(expr, Schema.from_json(SCHEMA))
    assert info.value.column == column  # type: ignore[attr-defined]
    assert reason in str(info.value)


def test_enum_order_comparison_hints_at_the_operators() -> None:
    with pytest.raises(InvalidInput) as info:
        compile_expr("e >= 3", Schema.from_json(SCHEMA))
    assert info.value.hint is not None and '"in"' in info.value.hint


def test_the_time_functions_need_now_declared() -> None:
    schema = Schema.from_json({"attributes": {"seg": {"type": "segments"}}})
    with pytest.raises(InvalidInput, match='reads attribute "now"'):
        compile_expr("segment_within(seg, 1, 2)", schema)
    geo = Schema.from_json({"attributes": {"latitude": {"type": "float"}}})
    with pytest.raises(InvalidInput, match='reads attribute "longitude"'):
        compile_expr("geo_within_radius(1, 2, 3)", geo)


@pytest.mark.parametrize(
    ("attr", "value", "reason"),
    [
        ("seg", [[1]], "list element 0 is not a [segment_id, timestamp] pair"),
        ("seg", [[1, 2.5]], "list element 0 is not a [segment_id, timestamp] pair"),
        ("seg", [[1, 2**63]], "list element 0"),
        ("seg", 5, "expected a list of [segment_id, timestamp] pairs"),
        ("frequency_caps", [["nope", 1, "a", 1, 2]], "unknown cap type"),
        ("frequency_caps", [["flight", 1, 2, 1, 2]], "the namespace must be a string"),
        ("frequency_caps", [["flight", 1, "a", 1, "x"]], "the timestamp must be"),
        ("frequency_caps", [["flight", 1]], "is not [type, id, namespace, count, timestamp]"),
        ("frequency_caps", [["flight", True, "a", 1, 2]], "the id and the count"),
        ("e", 1.5, 'attribute "e": expected an integer'),
        ("e", 2**63, "outside the signed 64-bit range"),
    ],
)
def test_bad_event_values_are_refused_by_name(attr: str, value: object, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Schema.from_json(SCHEMA).validate_event({attr: value})
    assert reason in str(info.value)
    assert attr in str(info.value)


def test_event_forms_and_edges() -> None:
    schema = Schema.from_json(SCHEMA)
    values = schema.validate_event(
        {
            "seg": [[3, 5], [1, -(2**63)], [2**63 - 1, 2**63 - 1]],
            "frequency_caps": [[["flight", 1, "a"], 2, None], ["campaign", 0, "", 0, 7]],
            "e": -(2**63),
        }
    )
    assert values["seg"] == ((1, -(2**63)), (3, 5), (2**63 - 1, 2**63 - 1))
    assert values["frequency_caps"] == (("flight", 1, "a", None, 2), ("campaign", 0, "", 7, 0))
    ev = {"now": 0, "seg": [[1, -1]]}  # -1 µs is 0 s (C division truncates toward zero)
    assert evaluate(compile_expr("segment_within(seg, 1, 0)", schema), schema.validate_event(ev))
    assert not evaluate(
        compile_expr("segment_before(seg, 1, 0)", schema), schema.validate_event(ev)
    )
    # an empty list of caps is within every cap, even without "now"
    empty = schema.validate_event({"frequency_caps": []})
    assert evaluate(compile_expr('within_frequency_cap("flight", "a", 0, 0)', schema), empty)
    assert not evaluate(compile_expr('within_frequency_cap("flight", "a", 0, 0)', schema), {})
    assert evaluate(compile_expr('not within_frequency_cap("flight", "a", 0, 0)', schema), {})


EDGE_EXPRS = [
    "e = -9223372036854775808",
    "e in (9223372036854775807, 0)",
    "e not in (-9223372036854775808)",
    "e <> 9223372036854775807",
    "geo_within_radius(1.7e308, -1.7e308, 1e308)",
    "geo_within_radius(-0.0, 0.0, 0)",
    "geo_within_radius(90, 180, 0.001)",
    "geo_within_radius(-90, -180, 20037.5)",
    "not geo_within_radius(0, 0, 5e-324)",
    "segment_within(9223372036854775807, -9223372036854775808)",
    "segment_before(seg, -9223372036854775808, 9223372036854775807)",
    'within_frequency_cap("flight", -9223372036854775808, "", 9223372036854775807, 0)',
]
EDGE_EVENTS = [
    {"e": -(2**63), "latitude": 1.7e308, "longitude": -1.7e308},
    {"e": 2**63 - 1, "latitude": -0.0, "longitude": 0.0},
    {"e": 0, "latitude": 90.0, "longitude": -180.0, "now": 0},
    {"latitude": -90.0, "longitude": 180.0, "now": 2**63 - 1},
    {"latitude": 5e-324, "longitude": -5e-324},
    {"longitude": 0.0, "seg": [[-(2**63), 2**63 - 1]], "now": -(2**63)},
    {
        "now": 2**63 - 1,
        "segments_with_timestamp": [[2**63 - 1, -(2**63)]],
        "frequency_caps": [["flight", -(2**63), "", 2**63 - 1, -(2**63)]],
    },
    {},
]


def test_edges_of_the_domains_match_the_brute_force(tmp_path: Path) -> None:
    schema = Schema.from_json(SCHEMA)
    subs = {f"x{k}": expr for k, expr in enumerate(EDGE_EXPRS)}
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
        idx.check()
        for ev in EDGE_EVENTS:
            assert set(idx.match(ev)) == brute(subs, schema, ev), ev
        assert idx.match({"e": -(2**63)}) != []


def test_inference_types_what_the_functions_read() -> None:
    schema = Schema.infer(
        [
            (1, "segment_within(seg, 1, 2) and e = 3"),
            (2, 'within_frequency_cap("flight", "ns", 1, 0)'),
            (3, "geo_within_radius(1, 2, 3)"),
        ]
    )
    types = {name: spec.type for name, spec in schema.attributes.items()}
    assert types == {
        "seg": "segments",
        "frequency_caps": "frequency_caps",
        "now": "int",
        "latitude": "float",
        "longitude": "float",
        "e": "int",
    }
    with pytest.raises(InvalidInput, match='"seg"'):
        Schema.infer([(1, "segment_within(seg, 1, 2)"), (2, "seg = 1")])


def test_schema_documents_of_the_new_types_round_trip() -> None:
    schema = Schema.from_json(SCHEMA)
    assert Schema.from_json(schema.to_json()) == schema
    with pytest.raises(InvalidInput, match='"min" does not apply to a segments attribute'):
        Schema.from_json({"attributes": {"s": {"type": "segments", "min": 1}}})
    with pytest.raises(InvalidInput, match="signed 64-bit"):
        Schema.from_json({"attributes": {"e": {"type": "int_enum", "max": 1.5}}})


def test_segment_hits_are_the_segment_tests_that_hold() -> None:
    """The index finds segment tests by bisection (betree.matching.direct): exactly those that
    hold."""
    rng = random.Random(9)
    schema = Schema.from_json(SCHEMA)
    atoms = []
    for aid in range(400):
        func = rng.choice(["segment_within", "segment_before"])
        args = (rng.randint(0, 6), rng.randint(-50, 50))
        atoms.append((aid, TestAtom("seg", func, args)))
    atoms.append((400, TestAtom("seg", "not_segment_within", (1, 2))))
    group = DirectAtoms(atoms)
    assert group.always == []  # the negated test too: the complement of its bisection
    for _ in range(300):
        ev = event(rng)
        if rng.random() < 0.5:
            ev["now"] = rng.choice([-(2**63), 0, 2**63 - 1])
        values = schema.validate_event(ev)
        if "seg" not in values:
            continue
        want = sorted(aid for aid, atom in atoms if atom.holds(values))
        assert held(group, "seg", values, len(atoms)) == want
