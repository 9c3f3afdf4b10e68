"""SPEC section 4's truth table and section 3's value rules, checked by hand-written outcomes on
both the reference evaluator and the normalized clauses."""

from __future__ import annotations

import pytest

from betree.lang.dnf import clauses_hold, to_clauses
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema

SCHEMA = Schema.from_json(
    {
        "attributes": {
            "a": {"type": "int"},
            "f": {"type": "float"},
            "s": {"type": "string"},
            "b": {"type": "bool"},
            "l": {"type": "int_list"},
            "t": {"type": "string_list"},
        }
    }
)


def outcome(text: str, event: dict[str, object]) -> bool:
    node = compile_expr(text, SCHEMA)
    ev = SCHEMA.validate_event(event)
    got = evaluate(node, ev)
    assert clauses_hold(to_clauses(node), ev) == got, "clauses disagree with the evaluator"
    return got


# SPEC section 4: for an event without the attribute.
UNDEFINED_TABLE = [
    ("a = 1", False),
    ("a <> 1", False),
    ("a < 1", False),
    ("a in (1, 2)", False),
    ("a not in (1, 2)", False),
    ("a between 1 and 2", False),
    ("1 in l", False),
    ("1 not in l", False),
    ("l one of (1)", False),
    ("l none of (1)", False),
    ("l all of (1)", False),
    ("l is empty", False),
    ("not (a = 1)", True),
    ("not (a <> 1)", True),
    ("a is null", True),
    # the rest of the language follows the same rule
    ("a is not null", False),
    ("a not between 1 and 2", False),
    ("a in ()", False),
    ("a not in ()", False),
    ("l none of ()", False),
    ("l all of ()", False),
    ("b", False),
    ("not b", True),
    ("b = false", False),
    ("b <> true", False),
    ('starts_with(s, "")', False),
    ('ends_with(s, "x")', False),
    ('contains(s, "")', False),
    ('not contains(s, "x")', True),
    ("not (a between 1 and 2)", True),
    ("not (a not in (1))", True),
    ("not (l is empty)", True),
    ("not (a is not null)", True),
    ("not (a is null)", False),
    ("true", True),
    ("false", False),
]


@pytest.mark.parametrize(("text", "expected"), UNDEFINED_TABLE)
@pytest.mark.parametrize("event", [{}, {"a": None, "l": None, "b": None, "s": None}])
def test_undefined_truth_table(text: str, expected: bool, event: dict[str, object]) -> None:
    assert outcome(text, event) is expected


DEFINED_CASES: list[tuple[str, dict[str, object], bool]] = [
    # exact numbers across int and float
    ("f = 9007199254740993", {"f": 9007199254740992.0}, False),
    ("f = 9007199254740992", {"f": 9007199254740992.0}, True),
    ("f < 9007199254740993", {"f": 9007199254740992.0}, True),
    ("a > 9007199254740992.0", {"a": 9007199254740993}, True),
    ("a = 9007199254740992.0", {"a": 9007199254740993}, False),
    ("a in (9007199254740992.0)", {"a": 9007199254740993}, False),
    ("a > 2.5", {"a": 3}, True),
    ("a > 2.5", {"a": 2}, False),
    ("a = 3.0", {"a": 3}, True),
    ("a <> 3.5", {"a": 3}, True),
    ("f = 3", {"f": 3}, True),
    ("f between 1 and 2", {"f": 2.0}, True),
    ("f between 1 and 2", {"f": 2.0000000000000004}, False),
    # strings by code point
    ('s < "b"', {"s": "a"}, True),
    ('s < "b"', {"s": "B"}, True),
    ('s > "z"', {"s": "é"}, True),
    ('s < "\uffff"', {"s": "😀"}, False),
    ('s between "a" and "b"', {"s": "az"}, True),
    ('s between "a" and "b"', {"s": "b"}, True),
    ('s between "a" and "b"', {"s": "ba"}, False),
    ('starts_with(s, "ab")', {"s": "ab"}, True),
    ('starts_with(s, "ab")', {"s": "ac"}, False),
    ('starts_with(s, "a\U0010ffff")', {"s": "a\U0010ffffz"}, True),
    ('starts_with(s, "a\U0010ffff")', {"s": "b"}, False),
    ('starts_with(s, "\U0010ffff")', {"s": "\U0010ffff"}, True),
    ('starts_with(s, "\U0010ffff")', {"s": "\U0010fffe"}, False),
    ('starts_with(s, "\ud7ff")', {"s": "\ue000"}, False),
    ('starts_with(s, "\ud7ff")', {"s": "\ud7ff\ue000"}, True),
    ('not starts_with(s, "ab")', {"s": "ac"}, True),
    ('ends_with(s, "")', {"s": ""}, True),
    # between with lo > hi matches nothing
    ("a between 5 and 1", {"a": 3}, False),
    ("a not between 5 and 1", {"a": 3}, True),
    ("not (a between 5 and 1)", {}, True),
    ("a between 3 and 3", {"a": 3}, True),
    ("a not between 3 and 3", {"a": 3}, False),
    ("a not between 3 and 3", {"a": 4}, True),
    # empty lists
    ("a in ()", {"a": 1}, False),
    ("a not in ()", {"a": 1}, True),
    ("l one of ()", {"l": [1]}, False),
    ("l none of ()", {"l": [1]}, True),
    ("l all of ()", {"l": []}, True),
    ("l none of (1, 2)", {"l": [3]}, True),
    ("l none of (1, 2)", {"l": [3, 2]}, False),
    ("l all of (1, 2)", {"l": [2, 1, 5]}, True),
    ("l all of (1, 2)", {"l": [2, 5]}, False),
    ("l is empty", {"l": []}, True),
    ("t is empty", {"t": ["x"]}, False),
    ("1 in l", {"l": []}, False),
    ("1 not in l", {"l": []}, True),
    # bools
    ("b", {"b": True}, True),
    ("b = false", {"b": False}, True),
    ("b <> true", {"b": False}, True),
    ("b != false", {"b": True}, True),
    ("not b", {"b": False}, True),
    # logic
    ("a = 1 or a is null", {}, True),
    ("a = 1 and not (a = 2)", {"a": 1}, True),
    ("not (a = 1 or b)", {}, True),
    ("not (a = 1 and b)", {"a": 1, "b": True}, False),
]


@pytest.mark.parametrize(("text", "event", "expected"), DEFINED_CASES)
def test_value_rules(text: str, event: dict[str, object], expected: bool) -> None:
    assert outcome(text, event) is expected
