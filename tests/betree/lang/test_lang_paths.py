"""Nested JSON events (betree.lang.paths): every event is matched as written flat (dotted
keys, the oracle) and as nested objects and arrays of objects; they must agree with each
other and with the brute force, through online, batched and reopened indexes; and the
errors of an event that gives an attribute twice, nests too deep or mixes an array."""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from betree.index import Index
from betree.lang.expr import ExpressionError, evaluate
from betree.lang.parser import compile_expr
from betree.lang.paths import MAX_DEPTH, flatten
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.cli import main

SCHEMA = {
    "attributes": {
        "user.age": {"type": "int"},
        "user.name": {"type": "string"},
        "user.address.city": {"type": "string"},
        "items.sku": {"type": "string_list"},
        "items.qty": {"type": "int_list"},
        "flag": {"type": "bool"},
    }
}


def expression(rng: random.Random) -> str:
    forms = [
        lambda: f"user.age {rng.choice(['<', '>=', '=', '!='])} {rng.randint(10, 60)}",
        lambda: 'user.name in ("ann", "bob")',
        lambda: f'user.address.city = "{rng.choice(["oslo", "rome"])}"',
        lambda: f'items.sku one of ("{rng.choice("abc")}")',
        lambda: f'"{rng.choice("abc")}" in items.sku',
        lambda: f"items.qty all of ({rng.randint(1, 3)})",
        lambda: "items.sku is empty",
        lambda: "user.age is null",
        lambda: "flag",
    ]
    parts = [rng.choice(forms)() for _ in range(rng.randint(1, 3))]
    text = rng.choice([" and ", " or "]).join(parts)
    return f"not ({text})" if rng.random() < 0.2 else text


def flat_event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if rng.random() < 0.8:
        ev["user.age"] = rng.randint(5, 70)
    if rng.random() < 0.7:
        ev["user.name"] = rng.choice(["ann", "bob", "cy"])
    if rng.random() < 0.6:
        ev["user.address.city"] = rng.choice(["oslo", "rome"])
    if rng.random() < 0.8:
        n = rng.randint(0, 3)
        ev["items.sku"] = [rng.choice("abcd") for _ in range(n)]
        ev["items.qty"] = [rng.randint(1, 3) for _ in range(n)]
    if rng.random() < 0.5:
        ev["flag"] = rng.random() < 0.5
    return ev


def nested(ev: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The same event with its user.* values nested (each, or left flat) and its items as
    an array of objects."""
    out: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in ev.items():
        if key.startswith("user.") and rng.random() < 0.8:
            *path, leaf = key.split(".")[1:]
            node = user
            for step in path:
                node = node.setdefault(step, {})
            node[leaf] = value
        elif key.startswith("items."):
            continue
        else:
            out[key] = value
    if user:
        out["user"] = user
    if ev.get("items.sku"):
        out["items"] = [
            {"sku": s, "qty": q} for s, q in zip(ev["items.sku"], ev["items.qty"], strict=True)
        ]
    elif "items.sku" in ev:  # an empty list stays flat: no objects to carry it
        out["items.sku"] = ev["items.sku"]
        out["items.qty"] = ev["items.qty"]
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_nested_events_match_as_their_flat_form(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs: dict[int, str] = {}
    for phase in range(2):
        with Index.open(tmp_path / "s", schema=SCHEMA if phase == 0 else None) as idx:
            for k in range(120):
                subs[phase * 1000 + k] = expression(rng)
                idx.subscribe(phase * 1000 + k, subs[phase * 1000 + k])
            idx.check()
            flats = [flat_event(rng) for _ in range(100)]
            deep = [nested(ev, rng) for ev in flats]
            for flat, tree, batched in zip(flats, deep, idx.match_many(deep), strict=True):
                values = schema.validate_event(flat)
                expected = {i for i, t in subs.items() if evaluate(compile_expr(t, schema), values)}
                assert set(idx.match(flat)) == expected, flat
                assert set(idx.match(tree)) == expected, tree
                assert isinstance(batched, list) and set(batched) == expected, tree


def test_bad_nested_events_are_errors_for_that_event() -> None:
    schema = Schema.from_json(SCHEMA)
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_DEPTH + 1):
        node["k"] = {}
        node = node["k"]
    for event, words in (
        ({"user": {"age": 3}, "user.age": 4}, "both as a flat key and nested"),
        ({"user": {"age": 3, "age.x": 1}, "user.age.x": 2}, "both"),
        ({"items": [{"sku": "a"}, "b"]}, "mixes objects"),
        ({"user": {"address": {"city": 3}}}, '"user.address.city"'),
        (deep, f"deeper than {MAX_DEPTH}"),
    ):
        with pytest.raises(InvalidInput) as err:
            schema.validate_event(event)
        assert words in err.value.message, (event, err.value.message)
    assert schema.validate_event({"user": {"age": None, "name": "x"}, "other": {"a": 1}}) == {
        "user.name": "x"
    }


def test_a_path_both_in_an_object_and_in_an_array_of_objects_is_given_twice() -> None:
    """A list under an object and the same path in an array of objects, either order: an
    error naming the path, and the event left as it was (the gathering of the array's
    values once extended the event's own list, so a repeated event changed its value)."""
    for event in (
        {"b": {"a": {"b": [1]}}, "b.a": [{"b": 2}]},
        {"b.a": [{"b": 2}], "b": {"a": {"b": [1]}}},
        {"b": {"a": [{"b": 2}], "a.b": [1]}},
    ):
        before = json.dumps(event)
        for _ in range(2):
            with pytest.raises(InvalidInput) as err:
                flatten(event)
            assert 'attribute "b.a.b" is given twice' in err.value.message, event
        assert json.dumps(event) == before
    assert flatten({"x": [{"y": [1]}, {"y": 2}], "z": {"w": [3]}}) == {"x.y": [1, 2], "z.w": [3]}


class _Record(Mapping[str, Any]):
    """An object that is a Mapping but no dict."""

    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def test_objects_of_any_mapping_type_and_plain_arrays() -> None:
    """Objects that are no ``dict`` (a dict subclass, a read-only proxy, a Mapping of its
    own) are flattened where a ``dict`` is; arrays of arrays (and tuples) are values, not
    objects; an array in an object mixing objects with other values is an error wherever
    the object sits in it."""
    schema = Schema.from_json(
        {**SCHEMA, "attributes": {**SCHEMA["attributes"], "pairs": {"type": "segments"}}}
    )
    plain = {
        "user": {"age": 31, "address": {"city": "rome"}},
        "items": [{"sku": "a", "qty": 2}, {"sku": "b"}],
        "pairs": [[3, 10], (1, 20)],
        "flag": True,
    }
    want = schema.validate_event(plain)
    assert want["user.address.city"] == "rome" and want["items.sku"] == ("a", "b")
    for wrap in (OrderedDict, MappingProxyType, _Record):
        event = {
            "user": wrap({"age": 31, "address": wrap({"city": "rome"})}),
            "items": [wrap({"sku": "a", "qty": 2}), wrap({"sku": "b"})],
            "pairs": ([3, 10], (1, 20)),
            "flag": True,
        }
        assert schema.validate_event(event) == want, wrap
        assert schema.validate_event(wrap(event)) == want, wrap
        for mixed in ([wrap({"sku": "a"}), ["b"]], [("b",), wrap({"sku": "a"})], ["b", wrap({})]):
            with pytest.raises(InvalidInput) as err:
                schema.validate_event({"user": {"tags": mixed}})
            assert "mixes objects" in err.value.message, mixed


def test_dotted_names_in_schemas_and_expressions() -> None:
    schema = Schema.from_json(SCHEMA)
    assert compile_expr("user.address.city = 'x' and items.sku one of ('a')", schema)
    for text, column in (("user.nope > 3", 1), ("user. age > 3", 1), ("user.age. > 3", 9)):
        with pytest.raises(ExpressionError) as err:
            compile_expr(text, schema)
        assert err.value.column == column, (text, str(err.value))
    with pytest.raises(InvalidInput):
        Schema.from_json({"attributes": {"user..age": {"type": "int"}}})
    inferred = Schema.infer([(1, "user.age > 3 and 'x' in items.sku")]).to_json()
    assert inferred == {
        "attributes": {"items.sku": {"type": "string_list"}, "user.age": {"type": "int"}}
    }


def test_nested_events_through_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = tmp_path / "subs.jsonl"
    subs.write_text(
        json.dumps({"id": 1, "expr": "user.age > 18 and items.sku one of ('a')"}) + "\n"
    )
    store = str(tmp_path / "s")
    assert main(["load", store, str(subs), "--engine", "python"]) == 0  # schema inferred
    events = tmp_path / "e.jsonl"
    events.write_text(
        json.dumps({"user": {"age": 30}, "items": [{"sku": "a"}, {"sku": "b"}]}) + "\n"
        + json.dumps({"user": {"age": 30}, "user.age": 31}) + "\n"
    )  # fmt: skip
    capsys.readouterr()
    assert main(["match", store, str(events)]) == 3
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0] == {"matches": [1]} and "both" in out[1]["error"]
