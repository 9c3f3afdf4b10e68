"""Bad input gets the documented error and changes nothing (SPEC sections 1-3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from storage.errors import InvalidInput

SCHEMA = {
    "attributes": {
        "price": {"type": "int"},
        "genre": {"type": "string"},
        "tags": {"type": "string_list"},
        "must": {"type": "int", "allow_undefined": False},
    }
}


@pytest.fixture
def idx(tmp_path: Path) -> Any:
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_clauses": 8}) as idx:
        idx.subscribe("keep", "price > 1")
        yield idx


@pytest.mark.parametrize(
    "expr,column,reason",
    [
        ("price > ", 9, "end"),
        ("price > )", 9, 'unexpected ")"'),
        ("pricee > 1", 1, 'unknown attribute "pricee"'),
        ("genre > 3", 9, "int"),
        ('price = "x"', 9, "string literal"),
        ("price > .5", 9, ""),
        ("price > 99999999999999999999", 9, "64-bit"),
        ("must is null", 6, "allow_undefined"),
        ('genre = "\\q"', 10, "escape"),
        ("price between 1 && 2", 17, ""),
    ],
)
def test_bad_expression_is_refused_with_its_column(
    idx: Index, expr: str, column: int, reason: str
) -> None:
    with pytest.raises(InvalidInput) as failed:
        idx.subscribe("new", expr)
    assert failed.value.column == column, str(failed.value)
    assert reason in str(failed.value)
    assert "subscription 'new'" in str(failed.value)
    assert idx.expression("new") is None and len(idx) == 1
    idx.check()


def test_too_many_clauses_names_the_subscription(idx: Index) -> None:
    expr = " and ".join(f"('a{i}' in tags or 'b{i}' in tags)" for i in range(4))  # 16 clauses
    with pytest.raises(InvalidInput, match=r"subscription 7: .*more than 8 clauses"):
        idx.subscribe(7, expr)
    assert len(idx) == 1


def test_failed_batch_changes_nothing(idx: Index) -> None:
    with pytest.raises(InvalidInput, match="subscription 'b'"):
        idx.subscribe_many([("a", "price > 5"), ("b", "price >"), ("keep", "price < 0")])
    assert idx.expression("a") is None
    assert idx.expression("keep") == "price > 1"
    assert idx.match({"price": 9, "must": 1}) == ["keep"]
    idx.check()


@pytest.mark.parametrize("ident", [True, 1.5, None, 1 << 63, ["x"]])
def test_bad_ids_are_refused(idx: Index, ident: Any) -> None:
    with pytest.raises(InvalidInput):
        idx.subscribe(ident, "price > 1")
    assert len(idx) == 1


@pytest.mark.parametrize(
    "event,attribute",
    [
        ({"price": 3.0, "must": 1}, "price"),
        ({"price": "3", "must": 1}, "price"),
        ({"price": True, "must": 1}, "price"),
        ({"price": 1 << 63, "must": 1}, "price"),
        ({"genre": 5, "must": 1}, "genre"),
        ({"tags": ["a", None], "must": 1}, "tags"),
        ({"tags": "a", "must": 1}, "tags"),
        ({"price": 1}, "must"),
        ({"price": 1, "must": None}, "must"),
    ],
)
def test_bad_event_names_the_attribute(idx: Index, event: dict[str, Any], attribute: str) -> None:
    with pytest.raises(InvalidInput, match=attribute):
        idx.match(event)


def test_unknown_attributes_are_ignored_and_floats_rejected(idx: Index) -> None:
    assert idx.match({"price": 2, "must": 0, "other": [1, {"x": 2}]}) == ["keep"]
    with pytest.raises(InvalidInput):
        idx.match({"price": float("nan"), "must": 0})
