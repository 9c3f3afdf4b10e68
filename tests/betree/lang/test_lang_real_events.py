"""The language for real events (SPEC section 11): ``float_list``, ``geo_within_radius`` over
named attributes, ``any PATH (EXPR)``; each form through every path (online with deletes and
reopening, match, match_many, the python load, a sharded store taking writes, the Spark load)
against the brute-force evaluator, and their edges, inference and errors."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.dnf import to_clauses
from betree.lang.expr import ExpressionError, evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import InferenceError, Schema
from storage.errors import InvalidInput
from tests.support import real_events as rw
from tools.cli import main

FORMS = (rw.float_list_atom, rw.geo_atom, rw.any_atom)


@pytest.mark.parametrize("seed", [1, 2])
def test_online_matches_brute_force(tmp_path: Path, seed: int) -> None:
    assert rw.online_differential(tmp_path / "s", seed, FORMS) > 50


def test_python_load_and_sharded_match_brute_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = rw.accepted(rw.workload(5, 300, FORMS))
    path = rw.write_jsonl(tmp_path / "subs.jsonl", [{"id": i, "expr": e} for i, e in subs.items()])
    (tmp_path / "schema.json").write_text(json.dumps(rw.SCHEMA))
    store = str(tmp_path / "loaded")
    argv = ["load", store, path, "--schema", str(tmp_path / "schema.json"), "--engine", "python"]
    assert main(argv) == 0
    capsys.readouterr()
    schema = Schema.from_json(rw.SCHEMA)
    rng = random.Random(6)
    with Index.open(store, readonly=True) as idx:
        idx.check()
        events = [rw.event(rng) for _ in range(150)]
        for ev, res in zip(events, idx.match_many(events), strict=True):
            want = rw.brute(subs, schema, ev)
            assert set(idx.match(ev)) == want, ev
            assert set(res) == want, ev  # type: ignore[arg-type]
    rw.sharded_differential(tmp_path / "sharded", subs, 7, FORMS)


# -- float_list ----------------------------------------------------------------------------------


def _truth(text: str, event: dict[str, Any]) -> bool:
    schema = Schema.from_json(rw.SCHEMA)
    return evaluate(compile_expr(text, schema), schema.validate_event(event))


@pytest.mark.parametrize(
    ("text", "event", "want"),
    [
        ("9007199254740993 in p", {"p": [9007199254740992.0]}, False),
        ("9007199254740992.0 in p", {"p": [9007199254740993]}, False),
        ("9007199254740993 in p", {"p": [9007199254740993]}, True),
        ("0 in p", {"p": [-0.0]}, True),
        ("-0.0 in p", {"p": [0]}, True),
        ("2.5 in p", {"p": [2.5, 1]}, True),
        ("1 in p", {"p": [1.0]}, True),
        ("1.7976931348623157e308 in p", {"p": [1.7976931348623157e308]}, True),
        ("-1.7976931348623157e308 not in p", {"p": [1.7976931348623157e308]}, True),
        ("9223372036854775807 in p", {"p": [9223372036854775807.0]}, False),
        ("1 not in p", {}, False),
        ("p none of (1)", {}, False),
        ("p all of ()", {"p": []}, True),
        ("p one of ()", {"p": [1]}, False),
        ("p is empty", {"p": []}, True),
        ("p is empty", {}, False),
        ("p is null", {"p": None}, True),
        ("p all of (1, 2.5)", {"p": [2.5, 1.0]}, True),
        ("10.5 in items.price", {"items": [{"price": 10.5}, {"price": 3}]}, True),
        ("3 in items.price", {"items": [{"price": None}, {"price": 3.0}]}, True),
    ],
)
def test_float_list_truth_table(text: str, event: dict[str, Any], want: bool) -> None:
    assert _truth(text, event) is want


def test_float_list_edges_through_the_index(tmp_path: Path) -> None:
    texts = [
        "9007199254740993 in p",
        "9007199254740992.0 in p",
        "0 in p",
        "p one of (2.5, -1.7976931348623157e308)",
        "p all of (1, 2.5)",
        "p none of (0)",
        "p is empty",
        "not (1 in p)",
        "7.25 in items.price and 'a1' in items.sku",
    ]
    subs = {k: t for k, t in enumerate(texts)}
    events = [
        {"p": [9007199254740992.0]},
        {"p": [9007199254740993]},
        {"p": [-0.0]},
        {"p": [2.5, 1]},
        {"p": [-1.7976931348623157e308]},
        {"p": []},
        {},
        {"items": [{"sku": "a1", "price": 7.25}]},
        {"items": [{"sku": "b2"}, {"price": 7.25}]},
    ]
    schema = Schema.from_json(rw.SCHEMA)
    with Index.open(tmp_path / "s", schema=rw.SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
        idx.check()
        for ev, res in zip(events, idx.match_many(events), strict=True):
            want = rw.brute(subs, schema, ev)
            assert set(idx.match(ev)) == want == set(res), ev  # type: ignore[arg-type]
        got = idx.match({"p": [9007199254740993]})
        assert 0 in got and 1 not in got  # the int, not its nearest double


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([1, None], 'attribute "p": list element 1 is null'),
        ([1, "x"], 'attribute "p": expected a number, got a string ("x") (list element 1)'),
        ([True], 'attribute "p": expected a number, got a bool (true) (list element 0)'),
        ([float("nan")], 'attribute "p": NaN and infinities are not allowed (list element 0)'),
        ([10**400], 'attribute "p": the number is too large for a float (list element 0)'),
        (2.5, 'attribute "p": expected a list of numbers, got a float (2.5)'),
    ],
)
def test_float_list_event_errors_name_the_attribute(value: Any, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Schema.from_json(rw.SCHEMA).validate_event({"p": value})
    assert str(info.value).startswith(reason), str(info.value)


def test_float_list_values_keep_ints_exact() -> None:
    values = Schema.from_json(rw.SCHEMA).validate_event({"p": [1, 2.5, -0.0, 2**63]})
    assert values["p"] == (1, 2.5, -0.0, 2**63)
    assert [type(v) for v in values["p"]] == [int, float, float, int]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("p = 1", 3, 'operator "=" does not apply to float_list attribute "p"'),
        ('"x" in p', 1, 'string literal compared to float_list attribute "p"'),
        ("p one of (1, 'x')", 14, "string literal compared to float_list"),
        ("p in (1)", 3, '"in (…)" does not apply to float_list attribute "p"'),
        ("true in p", 1, '"in" needs a number or a string before it'),
    ],
)
def test_float_list_expression_errors(text: str, column: int, reason: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expr(text, Schema.from_json(rw.SCHEMA))
    assert info.value.column == column and reason in info.value.reason, str(info.value)


def test_float_list_inference() -> None:
    inferred = Schema.infer([(1, "1.5 in z"), (2, "z one of (1, 2)"), (3, "2 in y")])
    assert inferred.attributes["z"].type == "float_list"
    assert inferred.attributes["y"].type == "int_list"
    with pytest.raises(InferenceError, match='"z"'):
        Schema.infer([(1, "1.5 in z"), (2, "z > 1")])
    doc = {"attributes": {"z": {"type": "float_list", "min": -1.5, "max": 2}}}
    assert Schema.from_json(Schema.from_json(doc).to_json()) == Schema.from_json(doc)
    with pytest.raises(InvalidInput, match='"min" must be a finite number'):
        Schema.from_json({"attributes": {"z": {"type": "float_list", "min": "a"}}})


# -- geo_within_radius over named attributes -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "event", "want"),
    [
        (
            "geo_within_radius(user.geo.lat, user.geo.lon, 52.52, 13.40, 10)",
            {"user": {"geo": {"lat": 52.55, "lon": 13.41}}},
            True,
        ),
        (
            "geo_within_radius(user.geo.lat, user.geo.lon, 52.52, 13.40, 10)",
            {"user": {"geo": {"lat": 52.55}}, "latitude": 52.52, "longitude": 13.40},
            False,
        ),
        (
            "not geo_within_radius(user.geo.lat, user.geo.lon, 52.52, 13.40, 10)",
            {"user": {"geo": {"lat": 52.55, "lon": None}}},
            True,
        ),
        (
            "geo_within_radius(52.52, 13.40, 10)",
            {"user.geo.lat": 52.52, "user.geo.lon": 13.4},
            False,
        ),
        (
            "geo_within_radius(home_lat, longitude, 52.52, 13.40, 10)",
            {"home_lat": 52.52, "longitude": 13.4},
            True,
        ),
        (
            "geo_within_radius(home_lat, longitude, 52.52, 13.40, 10)",
            {"latitude": 52.52, "longitude": 13.4},
            False,
        ),
    ],
)
def test_geo_named_truth_table(text: str, event: dict[str, Any], want: bool) -> None:
    assert _truth(text, event) is want


def test_geo_named_forms_compile_to_their_attributes() -> None:
    schema = Schema.from_json(rw.SCHEMA)
    three = to_clauses(compile_expr("geo_within_radius(45.5, -73.6, 10)", schema))
    five = to_clauses(
        compile_expr("geo_within_radius(latitude, longitude, 45.5, -73.6, 10)", schema)
    )
    assert three == five  # one atom for both spellings
    named = to_clauses(
        compile_expr("geo_within_radius(user.geo.lat, user.geo.lon, 45.5, -73.6, 10)", schema)
    )
    inside = max(named, key=len)
    assert {a.attr for a in inside} == {"user.geo.lat", "user.geo.lon"}  # the box prunes on them
    (geo,) = [a for a in inside if getattr(a, "test", "") == "geo_within_radius"]
    assert geo.to_expr().startswith("geo_within_radius(user.geo.lat, user.geo.lon, 45.5")
    assert to_clauses(compile_expr(geo.to_expr(), schema)) == named  # written back, the same
    inferred = Schema.infer([(1, "geo_within_radius(a.lat, a.lon, 1, 2, 3)")])
    assert {n: s.type for n, s in inferred.attributes.items()} == {
        "a.lat": "float",
        "a.lon": "float",
    }


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("geo_within_radius(1, 2, 3, 4)", 1, "geo_within_radius takes 3 or 5 arguments, not 4"),
        (
            "geo_within_radius(1, user.geo.lon, 2, 3, 4)",
            19,
            'unexpected "1", expected an attribute name',
        ),
        ("geo_within_radius(user.geo.lat, n, 2, 3, 4)", 33, 'needs float attribute "n", not int'),
        ("geo_within_radius(user.geo.lat, nope, 2, 3, 4)", 33, 'reads attribute "nope"'),
        (
            "geo_within_radius(user.geo.lat, user.geo.lon, 2, p, 4)",
            50,
            'unexpected "p", expected a number',
        ),
        ("geo_within_radius(user.geo.lat, user.geo.lon, 2, 3)", 1, "takes 3 or 5 arguments, not 4"),
    ],
)
def test_geo_named_errors(text: str, column: int, reason: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expr(text, Schema.from_json(rw.SCHEMA))
    assert info.value.column == column and reason in info.value.reason, str(info.value)


# -- any PATH (EXPR) ----------------------------------------------------------------------

ANY = 'any items (sku = "a1" and price > 10)'
ANY_SCHEMA = {
    "attributes": {
        **rw.SCHEMA["attributes"],
        "order.items.sku": {"type": "string_list"},
    }
}


@pytest.mark.parametrize(
    ("text", "event", "want"),
    [
        (ANY, {"items": [{"sku": "a1", "price": 12}]}, True),
        (ANY, {"items": [{"sku": "a1", "price": 5}, {"sku": "b2", "price": 12}]}, False),
        (ANY, {}, False),  # undefined path
        (ANY, {"items": []}, False),  # empty array
        (ANY, {"items": None}, False),
        (ANY, {"items": [{"sku": "a1"}, {"price": 12}]}, False),  # elements missing one
        (ANY, {"items": [{"sku": "a1", "price": None}]}, False),  # a nested null
        (ANY, {"items.sku": ["a1"], "items.price": [12]}, False),  # flat lists: no elements
        ("not " + ANY, {}, True),
        ("not " + ANY, {"items": []}, True),
        ("not " + ANY, {"items": [{"sku": "a1", "price": 12}]}, False),
        ("any items (price is null)", {"items": [{"sku": "a1"}]}, True),
        ("any items (price is null)", {"items": [{"price": None}]}, True),
        ("any items (price is null)", {"items": []}, False),
        ("any items (not (price > 1))", {"items": [{"sku": "a1"}]}, True),
        ("any items (true)", {"items": [{}]}, True),
        ("any items (true)", {"items": []}, False),
        ("any items (false)", {"items": [{"sku": "a1"}]}, False),
        ("not any items (false)", {}, True),
        ("any items (price = 9007199254740993)", {"items": [{"price": 9007199254740992.0}]}, False),
        ("any items (price = 9007199254740993)", {"items": [{"price": 9007199254740993}]}, True),
        ("any items (price = 0)", {"items": [{"price": -0.0}]}, True),
        ("any items (tags is null)", {"items": [{"tags": ["a1"]}]}, True),  # an array in one
        (
            "any items (sku = 'a1') and 12 in items.price",
            {"items": [{"sku": "a1"}, {"price": 12}]},
            True,
        ),
        ("any order.items (sku = 'a1')", {"order": {"items": [{"sku": "a1"}]}}, True),
        ("any order.items (sku = 'a1')", {"order.items": [{"sku": "a1"}]}, True),
    ],
)
def test_any_truth_table(tmp_path: Path, text: str, event: dict[str, Any], want: bool) -> None:
    schema = Schema.from_json(ANY_SCHEMA)
    assert evaluate(compile_expr(text, schema), schema.validate_event(event)) is want
    with Index.open(tmp_path / "s", schema=ANY_SCHEMA) as idx:  # the index too
        idx.subscribe("s", text)
        idx.check()
        assert idx.match(event) == (["s"] if want else [])
        assert idx.match_many([event]) == [["s"] if want else []]


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("any items (skuu = 'a')", 12, 'unknown attribute "skuu"'),
        ("any items (sku > 3)", 18, 'int literal compared to string attribute "items.sku"'),
        ("any items (price one of (1))", 18, '"one of" does not apply to float attribute'),
        ("any nope (sku = 'a')", 5, '"nope" is not an array of objects of the schema'),
        ("any p (x = 1)", 5, '"p" is not an array of objects'),
        ("any items sku = 'a'", 11, 'unexpected "sku", expected "(" after "any items"'),
        ("any items (sku = 'a'", 11, '"(" is never closed'),
        ("any items (any items (sku = 'a'))", 12, '"any" cannot nest inside "any"'),
        ("any (sku = 'a')", 5, "the path of an array of objects"),
        ("items = 1", 7, 'operator "=" does not apply to objects attribute "items"'),
        ("any = 1", 1, '"any" is a reserved word'),
        (
            "any items (starts_with(price, 'a'))",
            12,
            'does not apply to float attribute "items.price"',
        ),
    ],
)
def test_any_errors(text: str, column: int, reason: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expr(text, Schema.from_json(ANY_SCHEMA))
    assert info.value.column == column and reason in info.value.reason, str(info.value)


def test_any_schema_paths_inference_and_text() -> None:
    schema = Schema.from_json(ANY_SCHEMA)
    arrays = {n for n, s in schema.attributes.items() if s.type == "objects"}
    assert arrays == {"items", "order", "order.items", "user", "user.geo"} - {"user", "user.geo"}
    assert schema.to_json() == ANY_SCHEMA  # derived, never written
    assert Schema.from_json(schema.to_json()) == schema
    values = schema.validate_event({"items": [{"sku": "a1", "price": 3, "other": 1}, {}]})
    assert values["items"] == ({"sku": "a1", "price": 3}, {})
    assert values["items.sku"] == ("a1",)
    with pytest.raises(InvalidInput, match=r'attribute "items\.price": expected a number'):
        schema.validate_event({"items": [{"price": "x"}]})
    inferred = Schema.infer(
        [(1, "any items (sku = 'a' and price > 2.5 and qty < 3)"), (2, "4 in items.qty")]
    )
    types = {n: s.type for n, s in inferred.attributes.items()}
    assert types == {
        "items": "objects",
        "items.price": "float_list",
        "items.qty": "int_list",
        "items.sku": "string_list",
    }
    node = compile_expr("not any items (sku in ('a1', 'b2') and price > 10 or qty = 2)", schema)
    clauses = to_clauses(node)
    for clause in clauses:
        for atom in clause:  # written back, each atom compiles to itself
            assert to_clauses(compile_expr(atom.to_expr(), schema)) in ([(atom,)], clauses), atom


def test_any_fold_case(tmp_path: Path) -> None:
    doc = {"attributes": {"items.sku": {"type": "string_list", "fold_case": True}}}
    with Index.open(tmp_path / "s", schema=doc) as idx:
        idx.subscribe("s", "any items (sku = 'STRASSE')")
        assert idx.match({"items": [{"sku": "Straße"}]}) == ["s"]
        assert idx.match({"items": [{"sku": "Strase"}]}) == []


@pytest.mark.spark
def test_spark_load_plain_sharded_and_inferred(spark: Any, tmp_path: Path) -> None:
    """The Spark load of every form (given the schema, and inferring it; plain and sharded)
    answers as the brute force."""
    from betree.stores.sharded import open_index
    from loaders.spark import driver

    subs = rw.accepted(rw.workload(31, 400, FORMS))
    path = rw.write_jsonl(tmp_path / "subs.jsonl", [{"id": i, "expr": e} for i, e in subs.items()])
    kw: dict[str, Any] = {"spark": spark, "settings": rw.SETTINGS, "progress": None}
    plain = driver.load(tmp_path / "plain", [path], rw.SCHEMA, split_bytes=8192, **kw)
    sharded = driver.load(tmp_path / "sharded", [path], rw.SCHEMA, shards=2, **kw)
    assert plain["loaded"] == sharded["loaded"] == len(subs)
    schema = Schema.from_json(rw.SCHEMA)
    rng = random.Random(32)
    events = [rw.event(rng) for _ in range(150)]
    want = [rw.brute(subs, schema, ev) for ev in events]
    for store in ("plain", "sharded"):
        with open_index(tmp_path / store) as idx:
            assert len(idx) == len(subs)
            for ev, w, res in zip(events, want, idx.match_many(events), strict=True):
                assert set(idx.match(ev)) == w == set(res), (store, ev)  # type: ignore[arg-type]
    with Index.open(tmp_path / "plain", readonly=True) as idx:
        idx.check()
    # matching on Spark: nested events from JSON Lines, each line's answer
    from loaders.spark.match import match_events

    events_path = rw.write_jsonl(tmp_path / "events.jsonl", events)
    match_events(tmp_path / "plain", [events_path], tmp_path / "out", spark=spark)
    lines = [
        json.loads(line)
        for part in sorted((tmp_path / "out").glob("part-*"))
        for line in part.read_text().splitlines()
    ]
    assert sorted(d["line"] for d in lines) == list(range(1, len(events) + 1))
    for doc in lines:
        assert set(doc["matches"]) == want[doc["line"] - 1], doc
    # inferred: only the any and float_list forms (the geo attributes' types come from it)
    only = rw.accepted(rw.workload(33, 200, (rw.float_list_atom, rw.any_atom)))
    path = rw.write_jsonl(tmp_path / "only.jsonl", [{"id": i, "expr": e} for i, e in only.items()])
    inferred = driver.load(tmp_path / "inferred", [path], None, **kw)
    with Index.open(tmp_path / "inferred", readonly=True) as idx:
        idx.check()
        got_schema = idx.schema
        assert got_schema.attributes["items"].type == "objects"
        assert got_schema.attributes["items.price"].type == "float_list"
        for ev in events:
            try:
                expected = rw.brute(only, got_schema, ev)
            except InvalidInput:
                continue  # an event the inferred schema types otherwise
            assert set(idx.match(ev)) == expected, ev
    assert inferred["loaded"] == len(only)


def test_element_index_hits_are_the_any_atoms_that_hold() -> None:
    """betree.matching.sameelement finds exactly the any/not_any atoms that hold, and tests far
    fewer inner clauses than atoms x elements when the clauses carry an equality."""
    from betree.lang.atoms import TestAtom
    from betree.matching.direct import DirectAtoms, counting
    from tests.support.direct import held

    rng = random.Random(41)
    schema = Schema.from_json(rw.SCHEMA)
    atoms: list[tuple[int, Any]] = []
    for text in {rw.any_atom(rng) for _ in range(300)}:
        for clause in to_clauses(compile_expr(text, schema)):
            atoms += [
                (len(atoms), a) for a in clause if isinstance(a, TestAtom) and a.attr == "items"
            ]
    group = DirectAtoms(atoms)
    assert group.always == []
    events = [schema.validate_event(rw.event(rng)) for _ in range(300)]
    for values in events:
        if "items" not in values:
            continue
        want = sorted(aid for aid, atom in atoms if atom.holds(values))
        assert held(group, "items", values, len(atoms)) == want, values
    selective = [
        (
            k,
            TestAtom(
                "items",
                "any",
                ((("order", "sku", (("=", f"k{k}"),)), ("order", "price", ((">", 1),))),),
            ),
        )
        for k in range(2000)
    ]
    group = DirectAtoms(selective)  # type: ignore[arg-type]
    values = schema.validate_event({"items": [{"sku": f"k{k}", "price": 5} for k in range(5)]})
    with counting() as counts:
        assert held(group, "items", values, len(selective)) == [0, 1, 2, 3, 4]
    assert counts["any"][1] == 5  # one exact test per element, not 2,000 x 5
