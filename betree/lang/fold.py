"""Case folding: attributes declared ``"fold_case": true`` compare after Unicode case
folding (``str.casefold``) in every operator (README: Language).

Why one place: a folded attribute must see folded strings on both sides of every
comparison, so the constants of an expression are folded once when it is compiled
(:func:`fold_constants`, from :func:`betree.lang.parser.compile_expr`) and the values of an
event once when it is validated (:func:`fold_value`, from
:meth:`betree.lang.schema.Schema.validate_event`); the index, the PB+trees and the
brute-force evaluator then compare folded strings and need no rule of their own.  Order
comparisons and ``between`` order folded strings by code point, as unfolded ones.  The
text of a subscription is kept as given (``bexdb export``); ``explain`` shows an event's
value as sent and as folded.

Cost: one ``casefold`` per string constant at compile time, one per string (or list
element) of a folded attribute per event; nothing for attributes that do not fold.
"""

from __future__ import annotations

import operator
from collections.abc import Collection
from dataclasses import replace
from typing import TypeVar

from betree.lang.expr import (
    And,
    AnyOf,
    Between,
    Compare,
    Contains,
    InList,
    ListOp,
    Node,
    Not,
    Or,
    Pattern,
    StrFunc,
)

T = TypeVar("T")


def fold_value(value: object) -> object:
    """A validated string, or tuple of strings, folded; anything else as it is."""
    if isinstance(value, str):
        return value.casefold()
    if isinstance(value, tuple):  # (a list value keeps its type: betree.lang.elements)
        return type(value)(x.casefold() if isinstance(x, str) else x for x in value)
    return value


def _fold(x: T) -> T:
    return x.casefold() if isinstance(x, str) else x  # type: ignore[return-value]


def fold_constants(node: Node, folded: Collection[str]) -> Node:
    """``node`` with every string constant on an attribute of ``folded`` case-folded."""
    if isinstance(node, (And, Or)):
        children = tuple([fold_constants(c, folded) for c in node.children])
        if all(map(operator.is_, children, node.children)):
            return node  # (nothing folded below: the tree kept, not rebuilt)
        return type(node)(children)
    if isinstance(node, Not):
        child = fold_constants(node.child, folded)
        return node if child is node.child else Not(child)
    if isinstance(node, AnyOf):  # inside, attributes are paths in an element
        prefix = node.attr + "."
        inner = {a[len(prefix) :] for a in folded if a.startswith(prefix)}
        return AnyOf(node.attr, fold_constants(node.child, inner)) if inner else node
    if getattr(node, "attr", None) not in folded:
        return node
    if isinstance(node, (Compare, Contains)):
        return replace(node, value=_fold(node.value))
    if isinstance(node, Between):
        return replace(node, lo=_fold(node.lo), hi=_fold(node.hi))
    if isinstance(node, (InList, ListOp)):
        values = node.values
        if all(type(v) is str for v in values):  # (a list is all strings or all numbers)
            return replace(node, values=tuple(map(str.casefold, values)))  # type: ignore[arg-type]
        return replace(node, values=tuple(map(_fold, values)))
    if isinstance(node, StrFunc):
        return replace(node, arg=node.arg.casefold())
    if isinstance(node, Pattern):  # a regex keeps its escapes: RE2's case-insensitive mode
        if node.kind == "like":
            return replace(node, pattern=node.pattern.casefold())
        return replace(node, pattern=f"(?i:{node.pattern})")
    return node
