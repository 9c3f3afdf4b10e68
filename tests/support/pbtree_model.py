"""A trivially correct model of a PB+tree: a set of (operator, constant, id) triples."""

from __future__ import annotations

import operator
from typing import Any

CMP = {
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    ">": operator.gt,
}


def brute_search(model: set[tuple[str, Any, int]], value: Any) -> set[int]:
    """Ids of the triples whose predicate `value op constant` holds."""
    return {ident for op, const, ident in model if CMP[op](value, const)}
