"""The brute-force oracle of the index tests: every subscription's expression evaluated on
the event by ``betree.lang.expr.evaluate`` (the truth table as code). It never sees the
index, so an answer that equals it was not computed from the index's own data.

Each expression text is compiled once per schema (a bounded memo): compiling is over ten
times the cost of evaluating, and the sweeps ask the same subscriptions about every event."""

from __future__ import annotations

from typing import Any

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema

#: Compiled expressions by schema (kept alive here, so its id is not reused) and text;
#: cleared when it grows past a few schemas or 65,536 texts.
_MEMO: dict[int, tuple[Schema, dict[str, Any]]] = {}


def _compiled(schema: Schema) -> dict[str, Any]:
    entry = _MEMO.get(id(schema))
    if entry is None or entry[0] is not schema or len(entry[1]) > 1 << 16:
        if len(_MEMO) > 64:
            _MEMO.clear()
        entry = _MEMO[id(schema)] = (schema, {})
    return entry[1]


def brute(subs: dict[Any, str], schema: Schema, ev: dict[str, Any]) -> set[Any]:
    """The ids in ``subs`` (id -> expression text) whose expression ``ev`` satisfies."""
    values = schema.validate_event(ev)
    memo = _compiled(schema)
    found = set()
    for ident, expr in subs.items():
        node = memo.get(expr)
        if node is None:
            node = memo[expr] = compile_expr(expr, schema)
        if evaluate(node, values):
            found.add(ident)
    return found
