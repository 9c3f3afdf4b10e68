"""The fast paths of event validation (issue 26) agree exactly with the general paths they
shortcut, on seeded random valid and invalid values: same values (types included) or the
same error message.

- ``paths.flatten``: an object's scalar leaves and lists of scalars stored without a
  recursive call, against the recursive walk it replaced (kept here as the oracle);
- ``special.check_segments``: the by-type-set test of plain pairs, against the per-pair
  test it replaced (the oracle);
- a ``fold_case`` attribute's check: the list comprehension over an ``Elements``, against
  ``fold_value`` of the unfolded check;
- ``Schema.validate_event`` on whole nested events, against itself with the oracle's
  flatten.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from betree.lang import schema as schema_module
from betree.lang.fold import fold_value
from betree.lang.paths import MAX_DEPTH, flatten, is_nested
from betree.lang.schema import Schema
from betree.lang.special import check_segments
from storage.errors import InvalidInput

# -- the oracles: the general paths as they were before the fast paths ----------------------

_LEAVES = frozenset((str, int, float, bool, type(None)))


def _is_object(x: object) -> bool:
    return isinstance(x, Mapping)


def reference_flatten(event: Mapping[str, object]) -> dict[str, object]:
    flat: dict[str, object] = {}
    nested: dict[str, object] = {}
    made: set[str] = set()
    for key, value in event.items():
        if is_nested(value):
            _reference_walk(key, value, 1, nested, made, in_array=False)
        else:
            flat[key] = value
    twice = sorted(k for k in nested if k in flat and flat[k] is not None)
    if twice:
        raise InvalidInput(
            f'attribute "{twice[0]}" is given both as a flat key and nested: give it once'
        )
    flat.update(nested)
    return flat


def _reference_walk(
    path: str, value: Any, depth: int, out: dict[str, object], made: set[str], in_array: bool
) -> None:
    if depth > MAX_DEPTH:
        raise InvalidInput(f'"{path}" nests deeper than {MAX_DEPTH} objects')
    if _is_object(value):
        for key, child in value.items():
            _reference_walk(f"{path}.{key}", child, depth + 1, out, made, in_array)
        return
    if isinstance(value, list) and value and any(map(_is_object, value)):
        if not all(map(_is_object, value)):
            raise InvalidInput(f'"{path}" is an array that mixes objects and other values')
        for element in value:
            _reference_walk(path, element, depth + 1, out, made, in_array=True)
        return
    if value is None:
        return
    if not in_array:
        if path in out:
            raise InvalidInput(f'attribute "{path}" is given twice')
        out[path] = value
        return
    if path not in out:
        made.add(path)
        out[path] = []
    elif path not in made:  # (given outside an array too: a list of the event's own)
        raise InvalidInput(f'attribute "{path}" is given twice')
    gathered = out[path]
    assert isinstance(gathered, list)
    if isinstance(value, list):
        gathered.extend(value)
    else:
        gathered.append(value)


def _int64(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v <= 2**63 - 1


def reference_segments(name: str, v: object) -> tuple[tuple[int, int], ...]:
    if not isinstance(v, (list, tuple)):
        raise InvalidInput(f'attribute "{name}": expected a list of [segment_id, timestamp] pairs')
    out = []
    for i, pair in enumerate(v):
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not _int64(pair[0])
            or not _int64(pair[1])
        ):
            raise InvalidInput(
                f'attribute "{name}": list element {i} is not a [segment_id, timestamp] pair '
                "of signed 64-bit integers"
            )
        out.append((int(pair[0]), int(pair[1])))
    out.sort(key=lambda p: p[0])
    return tuple(out)


# -- random values ---------------------------------------------------------------------------


class MyInt(int):
    pass


class MyStr(str):
    pass


_EDGE = [
    0,
    1,
    -1,
    2**63 - 1,
    -(2**63),
    2**63,
    -(2**63) - 1,
    2**64,
    True,
    False,
    MyInt(5),
    0.0,
    -0.0,
    1.5,
    1.8e308,
    -1.8e308,
    5e-324,
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    "",
    "a",
    "Straße",
    "ÜNÏ",
    "İ",
    "日本",
    "\ud800",
    "x" * 70_000,
    MyStr("Abc"),
    "1.2.3.4",
    None,
]
_KEYS = ["a", "b", "c", "d", "a.b", "b.c", "é", "x.y.z", "c.a", "b.a", ""]


def scalar(rng: random.Random) -> object:
    return rng.choice(_EDGE)


def value(rng: random.Random, depth: int) -> object:
    r = rng.random()
    if depth > 3 or r < 0.4:
        return scalar(rng)
    if r < 0.55:
        return [scalar(rng) for _ in range(rng.randint(0, 4))]
    if r < 0.6:
        return tuple(scalar(rng) for _ in range(rng.randint(0, 3)))
    if r < 0.68:
        return [[rng.choice(_EDGE[:8]), rng.choice(_EDGE[:8])] for _ in range(rng.randint(0, 3))]
    if r < 0.8:
        return [obj(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    if r < 0.83:
        return [obj(rng, depth + 1), scalar(rng)]
    return obj(rng, depth + 1)


def obj(rng: random.Random, depth: int) -> Mapping[str, object]:
    d = {rng.choice(_KEYS): value(rng, depth) for _ in range(rng.randint(0, 4))}
    r = rng.random()
    if r < 0.05:
        return MappingProxyType(d)
    if r < 0.1:
        return OrderedDict(d)
    return d


def deep(rng: random.Random) -> dict[str, object]:
    """A chain of objects around the depth limit, a leaf (or a list) at its end."""
    leaf: object = rng.choice([scalar(rng), [1, 2], {"k": 1}, [{"k": 1}]])
    for _ in range(rng.randint(MAX_DEPTH - 2, MAX_DEPTH + 1)):
        leaf = {rng.choice(["a", "b"]): leaf}
    return {"a": leaf}


def canon(x: object) -> object:
    """Values with their types (NaN equal to itself, -0.0 unequal to 0.0)."""
    if isinstance(x, Mapping):
        return (type(x).__name__, [(k, canon(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [canon(v) for v in x])
    return (type(x).__name__, repr(x))


def fresh(x: object) -> object:
    """A copy of an event, types kept: each call gets its own (``flatten`` once extended an
    event's own list, a path given as a list and again inside an array)."""
    if isinstance(x, MappingProxyType):
        return MappingProxyType({k: fresh(v) for k, v in x.items()})
    if isinstance(x, Mapping):
        return type(x)((k, fresh(v)) for k, v in x.items())  # type: ignore[call-arg]
    if isinstance(x, list):
        return [fresh(v) for v in x]
    if isinstance(x, tuple):
        return tuple(fresh(v) for v in x)
    return x


def outcome(f: Any, *args: object) -> object:
    try:
        return ("ok", canon(f(*map(fresh, args))))
    except InvalidInput as e:
        return ("error", str(e))


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_flatten_against_the_recursive_walk(seed: int) -> None:
    rng = random.Random(seed)
    errors = 0
    for k in range(3000):
        event = deep(rng) if k % 10 == 0 else obj(rng, 0)
        want = outcome(reference_flatten, event)
        assert outcome(flatten, event) == want, event
        errors += want[0] == "error"
    assert 100 < errors < 2900  # both outcomes exercised


def test_segments_against_the_per_pair_check() -> None:
    rng = random.Random(7)
    ints = [0, 1, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, True, MyInt(3), 1.0, None, "1"]
    cases: list[object] = [None, 3, "x", {}, [], (), [[]], [[1]], [[1, 2, 3]], [(1, 2)], ((1, 2),)]
    for _ in range(4000):
        pairs = []
        for _ in range(rng.randint(0, 6)):
            r = rng.random()
            if r < 0.8:
                p: object = [
                    rng.choice(ints[:5]) if rng.random() < 0.9 else rng.choice(ints)
                    for _ in range(2)
                ]
            elif r < 0.9:
                p = tuple(rng.choice(ints) for _ in range(rng.choice([1, 2, 3])))
            else:
                p = rng.choice([None, 5, "ab", {"a": 1}, [1, 2, 3]])
            pairs.append(p)
        cases.append(pairs if rng.random() < 0.9 else tuple(pairs))
    oks = 0
    for v in cases:
        want = outcome(reference_segments, "seg", v)
        assert outcome(check_segments, "seg", v) == want, v
        oks += want[0] == "ok"
    assert 500 < oks < len(cases) - 500


@pytest.mark.parametrize("kind", ["string", "string_list"])
def test_folded_checks_against_fold_value(kind: str) -> None:
    folded = Schema.from_json({"attributes": {"a": {"type": kind, "fold_case": True}}})
    plain = Schema.from_json({"attributes": {"a": {"type": kind}}})
    rng = random.Random(11)
    for _ in range(3000):
        v = value(rng, 2) if rng.random() < 0.5 else [scalar(rng) for _ in range(rng.randint(0, 5))]
        want = outcome(
            lambda e: {n: fold_value(x) for n, x in plain.validate_event(e).items()}, {"a": v}
        )
        assert outcome(folded.validate_event, {"a": v}) == want, v


RICH = Schema.from_json(
    {
        "attributes": {
            "a": {"type": "int"},
            "b": {"type": "float"},
            "c": {"type": "string", "fold_case": True},
            "a.b": {"type": "string_list", "fold_case": True},
            "b.c": {"type": "int_list"},
            "d": {"type": "bool"},
            "x.y.z": {"type": "segments"},
            "c.a": {"type": "ip"},
            "c.b": {"type": "float_list"},
            "b.a": {"type": "frequency_caps"},
        }
    }
)


def test_validate_event_against_the_general_flatten(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    events = [deep(rng) if k % 10 == 0 else obj(rng, 0) for k in range(6000)]
    got = [outcome(RICH.validate_event, e) for e in events]
    monkeypatch.setattr(schema_module, "flatten", reference_flatten)
    want = [outcome(RICH.validate_event, e) for e in events]
    assert got == want
    assert 100 < sum(w[0] == "ok" and w[1] != ("dict", []) for w in want) < len(want) - 100
