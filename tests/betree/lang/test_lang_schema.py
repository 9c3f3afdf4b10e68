"""Schema documents, event validation (SPEC section 1) and schema inference (section 2)."""

from __future__ import annotations

import math

import pytest

from betree.lang.schema import AttrSpec, InferenceError, Schema
from storage.errors import InvalidInput
from tests.support.schemas import EVERY_TYPE, SPEC_EXAMPLE


def test_spec_example_loads_and_round_trips() -> None:
    s = Schema.from_json(SPEC_EXAMPLE)
    assert s.attributes["price"] == AttrSpec("price", "int", 0, 100000, True)
    assert s.attributes["tags"] == AttrSpec("tags", "string_list")
    assert list(s.attributes) == list(SPEC_EXAMPLE["attributes"])
    assert s.to_json() == SPEC_EXAMPLE
    assert Schema.from_json(s.to_json()) == s


def test_allow_undefined_round_trips() -> None:
    doc = {"attributes": {"x": {"type": "int", "allow_undefined": False}}}
    s = Schema.from_json(doc)
    assert s.attributes["x"].allow_undefined is False
    assert s.to_json() == doc


def test_attributes_are_read_only() -> None:
    s = Schema.from_json(SPEC_EXAMPLE)
    with pytest.raises(TypeError):
        s.attributes["x"] = AttrSpec("x", "int")  # type: ignore[index]


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"attributes": {"price": {"type": "integer"}}}, 'attribute "price": unknown type'),
        ({"attributes": {"price": {}}}, 'attribute "price" has no "type"'),
        ({"attributes": {"price": "int"}}, 'attribute "price" must be a JSON object'),
        ({"attributes": {"price": {"type": "int", "mn": 0}}}, 'attribute "price": unknown key'),
        ({"attributes": {"price": {"type": "int", "min": "0"}}}, 'attribute "price": "min"'),
        ({"attributes": {"price": {"type": "int", "min": 0.5}}}, 'attribute "price": "min"'),
        ({"attributes": {"price": {"type": "int", "max": True}}}, 'attribute "price": "max"'),
        ({"attributes": {"price": {"type": "int", "max": 2**63}}}, 'attribute "price": "max"'),
        ({"attributes": {"p": {"type": "int", "min": 5, "max": 1}}}, 'attribute "p": "min" (5)'),
        ({"attributes": {"r": {"type": "float", "min": math.nan}}}, 'attribute "r": "min"'),
        ({"attributes": {"r": {"type": "float", "max": math.inf}}}, 'attribute "r": "max"'),
        ({"attributes": {"r": {"type": "float", "min": 2.5, "max": 1}}}, 'attribute "r": "min"'),
        ({"attributes": {"g": {"type": "string", "min": 1}}}, 'attribute "g": "min"'),
        ({"attributes": {"b": {"type": "bool", "min": 0}}}, 'attribute "b": "min"'),
        (
            {"attributes": {"b": {"type": "bool", "allow_undefined": "no"}}},
            'attribute "b": "allow_undefined"',
        ),
        ({"attributes": {"and": {"type": "int"}}}, 'attribute name "and" is a reserved word'),
        ({"attributes": {"Null": {"type": "int"}}}, 'attribute name "Null" is a reserved word'),
        ({"attributes": {"a b": {"type": "int"}}}, 'attribute name "a b" is not an identifier'),
        ({"attributes": {"1a": {"type": "int"}}}, 'attribute name "1a" is not an identifier'),
        ({"attributes": []}, '"attributes" must be a JSON object'),
        ({"attrs": {}}, 'unknown key "attrs"'),
    ],
)
def test_bad_documents_name_the_attribute(doc: dict[str, object], needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Schema.from_json(doc)
    assert needle in str(info.value)


def test_valid_hints() -> None:
    s = Schema.from_json(
        {
            "attributes": {
                "f": {"type": "float", "min": 0, "max": 2.5},
                "g": {"type": "string", "min": "a", "max": "m"},
                "il": {"type": "int_list", "min": -3, "max": 3},
            }
        }
    )
    assert s.attributes["f"].max == 2.5
    assert s.attributes["g"].min == "a"


def test_duplicate_spec() -> None:
    with pytest.raises(InvalidInput, match='"x" is declared twice'):
        Schema([AttrSpec("x", "int"), AttrSpec("x", "float")])


# -- events ----------------------------------------------------------------------------------------

EVENT_SCHEMA = Schema.from_json(EVERY_TYPE)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"i": 3}, {"i": 3}),
        ({"i": -(2**63)}, {"i": -(2**63)}),
        ({"i": 2**63 - 1}, {"i": 2**63 - 1}),
        ({"f": 2.5}, {"f": 2.5}),
        ({"f": 3}, {"f": 3.0}),
        ({"f": -0.0}, {"f": 0.0}),
        ({"s": ""}, {"s": ""}),
        ({"s": "日本 😀"}, {"s": "日本 😀"}),
        ({"b": True, "i": 0}, {"b": True, "i": 0}),
        ({"b": False}, {"b": False}),
        ({"il": [1, 2, 2]}, {"il": (1, 2, 2)}),
        ({"il": []}, {"il": ()}),
        ({"sl": ["a", "b"]}, {"sl": ("a", "b")}),
        ({"sl": ("a",)}, {"sl": ("a",)}),
        ({"i": None, "s": None}, {}),  # null means undefined
        ({}, {}),
        ({"other": "ignored", "i": 1, "x": None}, {"i": 1}),
        ({"other": [None, math.nan]}, {}),  # unknown attributes are not checked
    ],
)
def test_valid_events(event: dict[str, object], expected: dict[str, object]) -> None:
    got = EVENT_SCHEMA.validate_event(event)
    assert got == expected
    for k, v in expected.items():
        if isinstance(v, tuple):  # a list value (an Elements: a tuple), its elements typed
            assert isinstance(got[k], tuple)
            assert [type(x) for x in got[k]] == [type(x) for x in v]  # type: ignore[attr-defined]
        else:
            assert type(got[k]) is type(v)


@pytest.mark.parametrize(
    ("event", "needle"),
    [
        ({"i": 3.0}, 'attribute "i": expected an integer, got a float (3.0)'),
        ({"i": True}, 'attribute "i": expected an integer, got a bool (true)'),
        ({"i": "3"}, 'attribute "i": expected an integer, got a string ("3")'),
        ({"i": 2**63}, 'attribute "i": integer 9223372036854775808 is outside'),
        ({"i": -(2**63) - 1}, 'attribute "i": integer -9223372036854775809 is outside'),
        ({"i": math.nan}, 'attribute "i": expected an integer'),
        ({"f": math.nan}, 'attribute "f": NaN and infinities are not allowed'),
        ({"f": math.inf}, 'attribute "f": NaN and infinities are not allowed'),
        ({"f": -math.inf}, 'attribute "f": NaN and infinities are not allowed'),
        ({"f": False}, 'attribute "f": expected a number, got a bool (false)'),
        ({"f": "1.5"}, 'attribute "f": expected a number'),
        ({"f": 10**400}, 'attribute "f": the number is too large for a float'),
        ({"b": 1}, 'attribute "b": expected true or false, got an integer (1)'),
        ({"b": "true"}, 'attribute "b": expected true or false'),
        ({"s": 5}, 'attribute "s": expected a string, got an integer (5)'),
        ({"s": ["a"]}, 'attribute "s": expected a string, got a list'),
        ({"s": "\ud800"}, 'attribute "s": the string holds a lone surrogate'),
        ({"il": 1}, 'attribute "il": expected a list of integers'),
        ({"il": [1, None]}, 'attribute "il": list element 1 is null'),
        (
            {"il": [1, 2.0]},
            'attribute "il": expected an integer, got a float (2.0) (list element 1)',
        ),
        ({"il": [True]}, 'attribute "il": expected an integer, got a bool'),
        ({"il": ["1"]}, 'attribute "il": expected an integer'),
        ({"il": [2**63]}, 'attribute "il": integer'),
        ({"sl": [1]}, 'attribute "sl": expected a string, got an integer (1) (list element 0)'),
        ({"sl": "abc"}, 'attribute "sl": expected a list of strings'),
        ({"sl": {"a": 1}}, 'attribute "sl": expected a list of strings, got an object'),
    ],
)
def test_invalid_events_name_the_attribute(event: dict[str, object], needle: str) -> None:
    with pytest.raises(InvalidInput) as info:
        EVENT_SCHEMA.validate_event(event)
    assert needle in str(info.value)


def test_event_must_be_an_object() -> None:
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        EVENT_SCHEMA.validate_event([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("event", [{}, {"r": None}, {"x": 1}])
def test_required_attribute(event: dict[str, object]) -> None:
    s = Schema.from_json(
        {"attributes": {"r": {"type": "int", "allow_undefined": False}, "x": {"type": "int"}}}
    )
    with pytest.raises(InvalidInput) as info:
        s.validate_event(event)
    assert 'attribute "r" is missing or null' in str(info.value)
    assert s.validate_event({"r": 0}) == {"r": 0}


# -- inference ------------------------------------------------------------------------------


def types_of(s: Schema) -> dict[str, str]:
    return {n: a.type for n, a in s.attributes.items()}


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([(1, "a = 1")], {"a": "int"}),
        ([(1, "a = 1"), (2, "a > 2.5")], {"a": "float"}),
        ([(1, "a in (1, 2.5)")], {"a": "float"}),
        ([(1, "a between 1 and 2.5")], {"a": "float"}),
        ([(1, "a = 1 and a is null")], {"a": "int"}),
        ([(1, "b")], {"b": "bool"}),
        ([(1, "not b")], {"b": "bool"}),
        ([(1, "b = false"), (2, "b")], {"b": "bool"}),
        ([(1, "g = 'x'"), (2, "g in ('y')")], {"g": "string"}),
        ([(1, 'starts_with(g, "x")'), (2, "g is not null")], {"g": "string"}),
        ([(1, "1 in l")], {"l": "int_list"}),
        ([(1, "l one of ('a', 'b')")], {"l": "string_list"}),
        ([(1, "l is empty"), (2, "3 not in l")], {"l": "int_list"}),
        ([(1, "l all of ()"), (2, "l none of (1)")], {"l": "int_list"}),
        ([(1, "a = 1 and (b or c = 'x')")], {"a": "int", "b": "bool", "c": "string"}),
        ([(1, "a = 1"), (2, "this does not parse (")], {"a": "int"}),
        ([], {}),
    ],
)
def test_infer(records: list[tuple[int | str, str]], expected: dict[str, str]) -> None:
    s = Schema.infer(records)
    assert types_of(s) == expected
    assert all(a.allow_undefined and a.min is None for a in s.attributes.values())


@pytest.mark.parametrize(
    ("records", "attr", "ids", "needle"),
    [
        ([(1, "x = 1"), (2, 'x = "s"')], "x", [1, 2], "conflicting types: int (ids 1) vs string"),
        ([("a", "x = 1.5"), ("b", "x")], "x", ["a", "b"], 'float (ids "a") vs bool (ids "b")'),
        ([(1, "y is null")], "y", [1], "no literal reveals its type (ids 1)"),
        ([(1, "y is null"), (2, "y is not null")], "y", [1, 2], "no literal reveals its type"),
        ([(1, "y in ()")], "y", [1], "no literal reveals its type"),
        ([(1, "y is empty")], "y", [1], "no literal reveals its type"),
        ([(7, "1 in z"), (8, "z = 1")], "z", [8, 7], "int (ids 8) vs int_list (ids 7)"),
        ([(1, "z is empty"), (2, "z < 3")], "z", [2, 1], "int (ids 2) vs a list (ids 1)"),
        ([(1, "1 in z"), (2, "'a' in z")], "z", [1, 2], "int_list (ids 1) vs string_list"),
        ([(1, "1.5 in z"), (2, "'a' in z")], "z", [2, 1], "string_list (ids 2) vs a list of"),
        ([(5, "x = 1"), ("5", "x = 'a'")], "x", [5, "5"], 'int (ids 5) vs string (ids "5")'),
    ],
)
def test_infer_errors_name_attribute_and_ids(
    records: list[tuple[int | str, str]], attr: str, ids: list[int | str], needle: str
) -> None:
    with pytest.raises(InferenceError) as info:
        Schema.infer(records)
    err = info.value
    assert isinstance(err, InvalidInput)
    assert f'attribute "{attr}"' in str(err)
    assert needle in str(err)
    assert err.problems == {attr: ids}


def test_infer_reports_every_bad_attribute() -> None:
    with pytest.raises(InferenceError) as info:
        Schema.infer([(1, "a = 1 and b is null"), (2, "a = 'x' and c = 2"), (3, "d")])
    assert info.value.problems == {"a": [1, 2], "b": [1]}


def test_infer_lists_many_ids_briefly() -> None:
    records: list[tuple[int | str, str]] = [(i, "x = 1") for i in range(20)]
    records.append((99, "x"))
    with pytest.raises(InferenceError) as info:
        Schema.infer(records)
    assert "and 10 more" in str(info.value)
    assert len(info.value.problems["x"]) == 21
