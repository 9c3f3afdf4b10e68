"""The brute-force oracle of the index tests: every subscription's expression evaluated on
the event by ``betree.lang.expr.evaluate`` (the truth table as code). It never sees the
index, so an answer that equals it was not computed from the index's own data."""

from __future__ import annotations

from typing import Any

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema


def brute(subs: dict[Any, str], schema: Schema, ev: dict[str, Any]) -> set[Any]:
    """The ids in ``subs`` (id -> expression text) whose expression ``ev`` satisfies."""
    values = schema.validate_event(ev)
    return {ident for ident, expr in subs.items() if evaluate(compile_expr(expr, schema), values)}
