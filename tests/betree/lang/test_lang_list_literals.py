"""The parser's list literals (``_Parser._list``) against the general literal decoder.

``_list`` decodes plain strings and small naturals itself and type-checks each literal
kind once, at its first element; everything else goes through
:func:`betree.lang.literals.literal`.  These tests check, on random lists and the edges
(empty strings, escapes, quotes of both kinds, every Unicode plane, ±2**63, 10,000
elements), that a list's values are the general decoder's, a malformed element is refused
with the decoder's reason, and a type error is reported at the first element of the
offending kind.
"""

from __future__ import annotations

import random

import pytest

from betree.lang.expr import ExpressionError
from betree.lang.literals import LiteralError, literal
from betree.lang.parser import compile_expr, parse
from betree.lang.schema import Schema

#: one character of every Unicode plane in use, and a few that are not plain ASCII
PLANES = ["A", "é", "\u0800", "\uffef", "\U00010000", "\U0002a6d6", "\U00030000"]
PLANES += ["\U000e0041", "\U000f0000", "\U0010fffd", "\x7f", "\x00"]
NUMBERS = ["0", "7", "-1", "1.5", "-0.25", "1e3", "9223372036854775807", "-9223372036854775808"]
NUMBERS += ["9223372036854775808", "-9223372036854775809", "123456789012345678", "00012"]


def _string(rng: random.Random) -> str:
    q = rng.choice("\"'")
    body = "".join(rng.choice(["a", "Z", " ", "-", *PLANES]) for _ in range(rng.randint(0, 6)))
    if rng.random() < 0.2:
        body += rng.choice(["\\n", "\\t", "\\\\", "\\u00e9", f"\\{q}"])
    return q + body + q


def _values(toks: list[str]) -> tuple[object, ...] | str:
    """The general decoder's values for ``toks``, or its first error's reason."""
    out = []
    for t in toks:
        try:
            out.append(literal(t)[0])
        except LiteralError as e:
            return e.reason
    return tuple(out)


def _parsed(toks: list[str]) -> tuple[object, ...] | str:
    try:
        node = parse(f"x in ({', '.join(toks)})")
    except ExpressionError as e:
        return str(e)
    return node.values  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("seed", range(6))
def test_random_lists_decode_as_the_general_decoder(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        n = rng.choice([1, 2, 5, 30])
        if rng.random() < 0.5:
            toks = [_string(rng) for _ in range(n)]
        else:
            toks = [rng.choice(NUMBERS) for _ in range(n)]
        want, got = _values(toks), _parsed(toks)
        if isinstance(want, tuple):
            assert got == want and [type(v) for v in got] == [type(v) for v in want]
        else:
            assert isinstance(got, str) and want in got


def test_edges() -> None:
    assert _parsed(['""', "''", '"a"']) == ("", "", "a")
    assert _parsed(["-9223372036854775808", "9223372036854775807"]) == (-(2**63), 2**63 - 1)
    assert "outside the signed 64-bit range" in str(_parsed(["1", "9223372036854775808"]))
    assert "outside the signed 64-bit range" in str(_parsed(["-9223372036854775809"]))
    every_plane = ['"' + c + '"' for c in PLANES if c != "\x00"]
    assert _parsed(every_plane) == _values(every_plane)
    big = [f'"s{i}"' for i in range(10_000)]
    assert _parsed(big) == tuple(f"s{i}" for i in range(10_000))
    nums = [str(i * 7919 - 2**62) for i in range(10_000)]
    assert _parsed(nums) == tuple(int(s) for s in nums)
    assert "mixes strings and numbers" in str(_parsed(['"a"', "1"]))


SCHEMA = Schema.from_json(
    {
        "attributes": {
            "s": {"type": "string"},
            "n": {"type": "int"},
            "tags": {"type": "string_list"},
            "nums": {"type": "int_list"},
            "f": {"type": "float"},
        }
    }
)


@pytest.mark.parametrize(
    ("expr", "column"),
    [
        ('s in ("a", "b", 3)', 17),  # a number where strings are: the mix is refused there
        ("s in (1, 2)", 7),  # the first element is the first of the wrong kind
        ('n in ("a")', 7),
        ("n in (1, 2, 2.5, 3.5)", 13),  # int takes floats: no error
        ("nums one of (1, 2, 2.5)", 20),
        ('tags one of ("a", "b", 1)', 24),
        ('f in (1, 2.5, "x")', 15),
    ],
)
def test_type_errors_at_the_first_element_of_the_kind(expr: str, column: int) -> None:
    if expr.startswith("n in (1, 2, 2.5"):
        compile_expr(expr, SCHEMA)
        return
    with pytest.raises(ExpressionError) as info:
        compile_expr(expr, SCHEMA)
    assert info.value.column == column
    assert "literal compared to" in info.value.reason  # (the type check's, not the mix's)
