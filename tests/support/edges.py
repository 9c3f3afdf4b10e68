"""Literals and event values at the ends of every domain, for tests (issue 13).

Each domain's ends: signed 64-bit ints (``±2**63`` boundaries, floats beyond them), doubles
(``±max``, the smallest subnormal ``5e-324``, the smallest normal, ``-0.0`` beside ``0.0``,
``2**63`` and ``2**53 + 1`` where ints and doubles part), strings (empty, ``U+0000``, the
first and last code point of every Unicode plane, 8-byte grid prefixes shared by longer
strings).  :data:`EDGE_SCHEMA` has each scalar type twice: without hints and with hints
that span the whole domain.

Deterministic lists (:func:`edge_atoms`, :data:`EVENTS`) for exhaustive tests, and
hypothesis strategies (:func:`literals`, :func:`expressions`, :func:`events`) that draw the
ends often and anything else in the domain otherwise.  A literal is ``(text, value)``: its
expression text and the value it denotes.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
F64_MAX = 1.7976931348623157e308
F64_MIN_NORMAL = 2.2250738585072014e-308
F64_MIN_SUBNORMAL = 5e-324

EDGE_SCHEMA: dict[str, Any] = {
    "attributes": {
        "x": {"type": "int"},
        "xh": {"type": "int", "min": I64_MIN, "max": I64_MAX},
        "f": {"type": "float"},
        "fh": {"type": "float", "min": -F64_MAX, "max": F64_MAX},
        "s": {"type": "string"},
        "b": {"type": "bool"},
    }
}
KINDS = {name: spec["type"] for name, spec in EDGE_SCHEMA["attributes"].items()}

#: int values at the ends, and where ints and doubles part
INT_VALUES = [I64_MIN, I64_MIN + 1, -1, 0, 1, 2**53 + 1, I64_MAX - 1, I64_MAX]
#: doubles at the ends (every value an event may give a float attribute)
FLOAT_VALUES = [
    -F64_MAX,
    -(2.0**63),
    -1.0,
    -F64_MIN_NORMAL,
    -F64_MIN_SUBNORMAL,
    -0.0,
    0.0,
    F64_MIN_SUBNORMAL,
    F64_MIN_NORMAL,
    0.5,
    2.0**53,
    2.0**63,
    F64_MAX,
]
#: strings at the ends: empty, U+0000, the first and last code point of every plane, and
#: strings that share their first 8 UTF-8 bytes (the grid coordinate) with a longer one
STRING_VALUES = sorted(
    {
        "",
        "\x00",
        "\x00\x00",
        "\x01",
        "a",
        "aaaaaaaa",
        "aaaaaaaa\x00",
        "aaaaaaaab",
        "\x7f",
        "\x80",
        "\ud7ff",
        "\ue000",
        "\uffff",
        "\U0010ffff",
        "\U0010ffff\U0010ffff",
        "\U0010ffff\U0010ffff\x00",
    }
    | {chr(plane << 16) for plane in range(17) if plane}
    | {chr(plane << 16 | 0xFFFF) for plane in range(17)}
)

_FLOAT_TEXTS = [
    "9.3e18",
    "-9.3e18",
    "9.223372036854775807e18",  # the double 2**63: one past the int range
    "-9.223372036854775808e18",  # -2**63 exactly
    "1.7976931348623157e308",
    "-1.7976931348623157e308",
    "5e-324",
    "-5e-324",
    "2.2250738585072014e-308",
    "0.0",
    "-0.0",
    "0.5",
    "-0.5",
    "9007199254740992.0",
]
#: numeric literals at the ends: ints and floats (both legal on int and float attributes)
NUMBER_LITERALS: list[tuple[str, int | float]] = [(str(v), v) for v in INT_VALUES] + [
    (t, float(t)) for t in _FLOAT_TEXTS
]


def string_literal(value: str) -> str:
    """``value`` as an expression's string literal (control characters escaped)."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


STRING_LITERALS: list[tuple[str, str]] = [(string_literal(v), v) for v in STRING_VALUES]

#: literals that are errors on every path (out of range, overflowing a double)
INVALID_EXPRESSIONS = [
    "x > 9223372036854775808",
    "x < -9223372036854775809",
    "f > 1.8e308",
    "f < -1.8e308",
    "xh = 1e309",
]

_OPS = ["<", "<=", "=", "<>", "!=", ">=", ">"]


def _numeric(attr: str) -> bool:
    return KINDS[attr] in ("int", "float")


def literal_texts(attr: str) -> list[str]:
    """The edge literals for ``attr``, in value order."""
    pairs = NUMBER_LITERALS if _numeric(attr) else STRING_LITERALS
    return [t for t, _ in sorted(pairs, key=lambda pair: pair[1])]


#: per domain (numeric or not), the literals at its very ends, for ``between``
_ENDS = {
    True: [
        "-1.7976931348623157e308",
        "-9.3e18",
        str(I64_MIN),
        str(I64_MAX),
        "9.3e18",
        "1.7976931348623157e308",
    ],
    False: [string_literal(v) for v in ("", "\x00", "\U0010ffff\U0010ffff\x00")],
}


def edge_atoms() -> list[str]:
    """Every comparison form of every scalar attribute with every edge literal: both
    orders, ``between`` of any two ends and of neighbouring literals, ``in`` lists."""
    out = []
    for attr in ("x", "xh", "f", "fh", "s"):
        texts = literal_texts(attr)
        for text, op in itertools.product(texts, _OPS):
            out.append(f"{attr} {op} {text}")
            if op in ("<", ">="):
                out.append(f"{text} {op} {attr}")
        pairs = itertools.product(_ENDS[_numeric(attr)], repeat=2)
        for a, b in [*pairs, *itertools.pairwise(texts)]:
            out.append(f"{attr} between {a} and {b}")
            out.append(f"{attr} not between {a} and {b}")
        out.append(f"{attr} in ({', '.join(texts)})")
        out.append(f"{attr} not in ({', '.join(texts[::3])})")
    for text in literal_texts("s"):
        out.extend(f"{fn}(s, {text})" for fn in ("starts_with", "ends_with", "contains"))
    return out


def edge_events() -> list[dict[str, Any]]:
    """Events at the ends of each domain, one attribute varying at a time (the others
    undefined or at a fixed value), and the empty event."""
    out: list[dict[str, Any]] = [{}]
    for x in INT_VALUES:
        out.append({"x": x, "xh": x, "b": True})
    for f in FLOAT_VALUES:
        out.append({"f": f, "fh": f, "x": 0})
    for s in STRING_VALUES:
        out.append({"s": s, "b": False})
    return out


EVENTS = edge_events()

# -- hypothesis strategies ---------------------------------------------------------------------


def _float_text(f: float) -> str:
    text = repr(f)
    return text if any(c in text for c in ".e") else text + ".0"


def literals(kind: str) -> st.SearchStrategy[tuple[str, Any]]:
    """Literals for an attribute of ``kind`` (int, float, string): the ends half the time."""
    if kind == "string":
        anything = st.text(max_size=6).map(lambda v: (string_literal(v), v))
        return st.one_of(st.sampled_from(STRING_LITERALS), anything)
    ints = st.integers(I64_MIN, I64_MAX).map(lambda v: (str(v), v))
    floats = st.floats(allow_nan=False, allow_infinity=False).map(lambda v: (_float_text(v), v))
    return st.one_of(st.sampled_from(NUMBER_LITERALS), ints, floats)


@st.composite
def atoms(draw: st.DrawFn) -> str:
    """One atomic expression over :data:`EDGE_SCHEMA` with literals from :func:`literals`."""
    attr = draw(st.sampled_from(["x", "xh", "f", "fh", "s", "b"]))
    if attr == "b":
        return draw(st.sampled_from(["b", "b = true", "b <> false", "b is null"]))
    lit = literals(KINDS[attr]).map(lambda pair: pair[0])
    form = draw(st.integers(0, 4))
    if form == 0:
        return f"{attr} {draw(st.sampled_from(_OPS))} {draw(lit)}"
    if form == 1:
        return f"{draw(lit)} {draw(st.sampled_from(_OPS))} {attr}"
    if form == 2:
        neg = draw(st.sampled_from(["", "not "]))
        return f"{attr} {neg}between {draw(lit)} and {draw(lit)}"
    if form == 3:
        neg = draw(st.sampled_from(["", "not "]))
        return f"{attr} {neg}in ({', '.join(draw(st.lists(lit, max_size=4)))})"
    return f"{attr} is {draw(st.sampled_from(['', 'not ']))}null"


def expressions() -> st.SearchStrategy[str]:
    """Expressions over :data:`EDGE_SCHEMA`: atoms at the ends under ``and``/``or``/``not``."""
    return st.recursive(
        atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(
                lambda t: f"({t[0]}) {t[1]} ({t[2]})"
            ),
            inner.map(lambda e: f"not ({e})"),
        ),
        max_leaves=4,
    )


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    """Events over :data:`EDGE_SCHEMA`: each attribute undefined, at an end, or anywhere."""
    out: dict[str, Any] = {}
    for attr, kind in KINDS.items():
        if kind == "int":
            value = st.one_of(st.sampled_from(INT_VALUES), st.integers(I64_MIN, I64_MAX))
        elif kind == "float":
            value = st.one_of(
                st.sampled_from(FLOAT_VALUES), st.floats(allow_nan=False, allow_infinity=False)
            )
        elif kind == "string":
            value = st.one_of(st.sampled_from(STRING_VALUES), st.text(max_size=6))
        else:
            value = st.booleans()
        if draw(st.booleans()):
            out[attr] = draw(value)
    return out
