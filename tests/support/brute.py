"""The brute-force oracle of the index tests: every subscription's expression evaluated on
the event by ``betree.lang.expr.evaluate`` (the truth table as code). It never sees the
index, so an answer that equals it was not computed from the index's own data.

Memoized per schema (bounded): each expression text is compiled once (compiling is over ten
times the cost of evaluating), and each expression's truth on each distinct event is
evaluated once. The sweeps ask the same subscriptions about the same events after every
write (a batch sweep over 3,900 edge atoms spent 60% of its time re-evaluating them); an
event is told apart from another by its validated values, type by type (``1``, ``1.0`` and
``True``, ``0.0`` and ``-0.0`` are different events), so a remembered truth is the one
``evaluate`` would give again."""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema


@dataclass
class _Memo:
    schema: Schema  # kept alive here, so that its id is not reused
    compiled: dict[str, Any] = field(default_factory=dict)  # text -> node
    events: dict[Hashable, int] = field(default_factory=dict)  # frozen values -> number
    truths: list[dict[str, bool]] = field(default_factory=list)  # by event: text -> truth
    size: int = 0  # texts compiled and truths remembered


#: By schema id; emptied when it holds more than 64 schemas, 4,096 events of one schema or
#: a million truths in all (about 150 MB).
_MEMO: dict[int, _Memo] = {}


def _memo(schema: Schema) -> _Memo:
    entry = _MEMO.get(id(schema))
    if entry is None or entry.schema is not schema or len(entry.events) > 1 << 12:
        entry = _MEMO[id(schema)] = _Memo(schema)
    if len(_MEMO) > 64 or sum(m.size for m in _MEMO.values()) > 1 << 20:
        _MEMO.clear()
        entry = _MEMO[id(schema)] = _Memo(schema)
    return entry


_SCALARS = {str: "s", int: "i", bool: "b", type(None): "n"}


def _frozen(value: object) -> Hashable:
    """A key equal for equal values of equal types only (``None``: a value of another type,
    which is not remembered)."""
    kind = type(value)
    if kind in _SCALARS:
        return (_SCALARS[kind], value)
    if kind is float:
        return ("f", repr(value))  # -0.0 apart from 0.0
    if kind is tuple or kind is list:
        items = tuple(_frozen(v) for v in value)  # type: ignore[attr-defined]
        return None if None in items else (kind.__name__, items)
    if kind is dict:
        pairs = tuple((k, _frozen(v)) for k, v in sorted(value.items()))  # type: ignore[attr-defined]
        return None if any(p[1] is None for p in pairs) else ("d", pairs)
    return None


def brute(subs: dict[Any, str], schema: Schema, ev: dict[str, Any]) -> set[Any]:
    """The ids in ``subs`` (id -> expression text) whose expression ``ev`` satisfies."""
    values = schema.validate_event(ev)
    memo = _memo(schema)
    key = _frozen(values)
    if key is None:
        truths: dict[str, bool] = {}
    else:
        number = memo.events.setdefault(key, len(memo.events))
        if number == len(memo.truths):
            memo.truths.append({})
        truths = memo.truths[number]
    compiled = memo.compiled
    found = set()
    for ident, expr in subs.items():
        truth = truths.get(expr)
        if truth is None:
            node = compiled.get(expr)
            if node is None:
                node = compiled[expr] = compile_expr(expr, schema)
                memo.size += 1
            truth = truths[expr] = evaluate(node, values)
            memo.size += 1
        if truth:
            found.add(ident)
    return found


def brute_answers(doc: dict[str, Any], subs: list[tuple[Any, str]], events: list[Any]) -> list[Any]:
    """Per event, the JSON of every id in ``subs`` whose expression holds, sorted (the form
    the loader tests compare a store's answers in); ``doc``: the schema document."""
    schema = Schema.from_json(doc)
    compiled = [(i, compile_expr(e, schema)) for i, e in subs]
    out = []
    for ev in events:
        values = schema.validate_event(ev)
        out.append(sorted(json.dumps(i) for i, c in compiled if evaluate(c, values)))
    return out
