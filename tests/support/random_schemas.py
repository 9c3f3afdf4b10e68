"""Random schemas and workloads over them (stop 36's checker), apart from the fixed
schemas of :mod:`tests.support.workload` and :mod:`tests.support.edges`: other attribute
counts (1 to 45 ints: past 39, fewer interval buckets an attribute), hints narrow, wide or
at the int64 ends, constants drawn from a small pool an attribute (so that clause ends
coincide and events fall on bucket edges, one below and one above them; a hinted int's
pool now and then only within its hints, which may lie at the int64 ends), the ends of
every domain, string and float lists, and events with undefined and null attributes.

:func:`draw_schema` gives a schema document; :class:`Draw` its expressions and events;
:data:`BAD_EVENTS` events every path must refuse (as :class:`storage.errors.InvalidInput`).
"""

from __future__ import annotations

import math
import random
from typing import Any

from tests.support.edges import FLOAT_VALUES, INT_VALUES, STRING_VALUES, string_literal

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
F64_MAX = 1.7976931348623157e308

#: refused by every path, whatever the schema (``i0`` is an int, ``f0`` a float: every
#: drawn schema has ``i0``; events naming ``f0`` or lists are kept only where declared)
BAD_EVENTS: list[Any] = [
    7,
    None,
    "x",
    [1],
    {"i0": float("nan")},
    {"i0": float("inf")},
    {"i0": 2**63},
    {"i0": -(2**63) - 1},
    {"i0": 1.5},
    {"i0": True},
    {"i0": "1"},
    {"f0": float("-inf")},
    {"f0": "1"},
    {"sl": ["a", None]},
    {"sl": ["a", 1]},
]


def draw_schema(rng: random.Random) -> dict[str, Any]:
    """A schema document: ``i0``.. ints (1 to 45), ``f0``.. floats (0 to 7), and now and
    then ``s`` (string), ``il`` (int_list), ``sl`` (string_list), ``b`` (bool)."""
    attrs: dict[str, Any] = {}
    for k in range(rng.choice([1, 2, 5, 41, 45])):
        spec: dict[str, Any] = {"type": "int"}
        r = rng.random()
        if r < 0.3:
            lo = rng.choice([0, -5, I64_MIN, 2**40, -(2**31), I64_MAX - 2**32])
            span = rng.choice([3, 100, 2**32 - 1, 2**32, 2**33])
            spec.update(min=lo, max=min(I64_MAX, lo + span))
        elif r < 0.4:
            spec.update(min=I64_MIN, max=I64_MAX)
        attrs[f"i{k}"] = spec
    for k in range(rng.choice([0, 1, 3, 7])):
        spec = {"type": "float"}
        if rng.random() < 0.3:
            spec.update(min=rng.choice([-1.0, 0.0, -F64_MAX]), max=rng.choice([1.0, 1e10, F64_MAX]))
        attrs[f"f{k}"] = spec
    for name, kind, p in (
        ("s", "string", 0.6),
        ("il", "int_list", 0.4),
        ("sl", "string_list", 0.4),
    ):
        if rng.random() < p:
            attrs[name] = {"type": kind}
    if rng.random() < 0.3:
        attrs["b"] = {"type": "bool"}
    return {"attributes": attrs}


def _float_text(v: float) -> str:
    text = repr(v)
    return text if ("e" in text or "." in text) else text + ".0"


class Draw:
    """Expressions and events over one drawn schema, from its pools of constants."""

    def __init__(self, rng: random.Random, doc: dict[str, Any]) -> None:
        self.rng = rng
        self.attrs: dict[str, Any] = doc["attributes"]
        self.nums = [a for a, s in self.attrs.items() if s["type"] in ("int", "float")]
        self.pool: dict[str, list[Any]] = {a: self._pool(self.attrs[a]) for a in self.nums}
        self.strings = STRING_VALUES[:12]

    def _pool(self, spec: dict[str, Any]) -> list[Any]:
        rng = self.rng
        if spec["type"] == "int":
            lo, hi = spec.get("min", -1000), spec.get("max", 1000)
            vals = [rng.randint(lo, hi) for _ in range(12)]
            if "min" not in spec or rng.random() < 0.5:  # else closed: ends within the hints
                vals += rng.sample(INT_VALUES, 3)
            return [*vals, lo, hi, max(lo - 1, I64_MIN), min(hi + 1, I64_MAX)]
        lo, hi = spec.get("min", -10.0), spec.get("max", 10.0)
        vals = [rng.uniform(max(lo, -1e300), min(hi, 1e300)) for _ in range(10)]
        vals += [*rng.sample(FLOAT_VALUES, 4), float(lo), float(hi), -0.0, 0.0]
        return vals + [math.nextafter(v, math.inf) for v in vals[:3]]

    def _literal(self, attr: str) -> str:
        v = self.rng.choice(self.pool[attr])
        if isinstance(v, float):
            return _float_text(v)
        if self.attrs[attr]["type"] == "int" and self.rng.random() < 0.15:
            return _float_text(float(v))  # a float literal on an int attribute
        return str(v)

    def atom(self) -> str:
        rng = self.rng
        kinds = ["num"] * 6 * bool(self.nums) + [
            k for k in ("s", "il", "sl", "b") if k in self.attrs
        ]
        kind = rng.choice(kinds)
        if kind == "num":
            a = rng.choice(self.nums)
            form = rng.randrange(10)
            if form < 4:
                return f"{a} between {self._literal(a)} and {self._literal(a)}"
            if form < 7:
                return f"{a} {rng.choice(['<', '<=', '>', '>='])} {self._literal(a)}"
            if form == 7:
                return f"{a} {rng.choice(['=', '!=', '<>'])} {self._literal(a)}"
            if form == 8:
                items = ", ".join(self._literal(a) for _ in range(rng.randint(0, 4)))
                return f"{a} {rng.choice(['in', 'not in'])} ({items})"
            return f"{a} is {rng.choice(['null', 'not null'])}"
        if kind == "s":
            v, w = (string_literal(rng.choice(STRING_VALUES)) for _ in range(2))
            return rng.choice(
                [
                    *(f"s = {v}", f"s < {v}", f"s >= {v}", f"starts_with(s, {v})", "s is null"),
                    *(f"s between {v} and {w}", f"contains(s, {v})", f"s in ({v}, {w})"),
                ]
            )
        if kind == "il":
            items = ", ".join(str(rng.choice([0, 1, -1, I64_MAX, I64_MIN, 7])) for _ in range(3))
            return rng.choice(
                [
                    *(f"il one of ({items})", f"il none of ({items})", f"il all of ({items})"),
                    *("il is empty", f"{rng.choice([0, 7, I64_MAX])} in il"),
                ]
            )
        if kind == "sl":
            items = ", ".join(string_literal(rng.choice(self.strings)) for _ in range(3))
            one = string_literal(rng.choice(self.strings))
            return rng.choice(
                [
                    *(f"sl one of ({items})", f"sl none of ({items})", f"sl all of ({items})"),
                    *("sl is empty", f"{one} in sl", f"{one} not in sl"),
                ]
            )
        return rng.choice(["b", "not b", "b = false"])

    def expression(self) -> str:
        rng = self.rng
        text = " and ".join(self.atom() for _ in range(rng.choice([1, 1, 2, 3, 5, 8])))
        r = rng.random()
        if r < 0.1:
            return f"({text}) or ({self.atom()})"
        return f"not ({text})" if r < 0.15 else text

    def _value(self, attr: str) -> Any:
        rng = self.rng
        kind = self.attrs[attr]["type"]
        if kind == "int":
            v = rng.choice(self.pool[attr])
            v = int(v) if isinstance(v, int) else 0
            return max(I64_MIN, min(I64_MAX, v + rng.choice([0, 0, 0, -1, 1])))
        if kind == "float":
            v = float(rng.choice(self.pool[attr]))
            if rng.random() < 0.2:
                v = math.nextafter(v, rng.choice([math.inf, -math.inf]))
            if rng.random() < 0.1:
                return rng.choice(INT_VALUES)  # an int on a float attribute
            return v if math.isfinite(v) else 0.0
        if kind == "string":
            return rng.choice(STRING_VALUES)
        if kind == "int_list":
            return [rng.choice([0, 1, -1, I64_MAX, I64_MIN, 7]) for _ in range(rng.randint(0, 4))]
        if kind == "string_list":
            return [rng.choice(self.strings) for _ in range(rng.choice([0, 1, 3]))]
        return rng.random() < 0.5

    def event(self) -> dict[str, Any]:
        ev: dict[str, Any] = {}
        for attr in self.attrs:
            r = self.rng.random()
            if r >= 0.13:
                ev[attr] = self._value(attr)
            elif r >= 0.1:
                ev[attr] = None
        return ev

    def bad_events(self) -> list[Any]:
        """:data:`BAD_EVENTS` that name only this schema's attributes."""
        return [b for b in BAD_EVENTS if not isinstance(b, dict) or set(b) <= set(self.attrs)]
