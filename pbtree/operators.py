"""The six order operators ``< <= = != >= >``, declared once: what each means, its negation,
its mirror, the interval it bounds and where a PB+tree keeps its predicates.

Why here: the PB+tree is the lowest layer that knows the operators, so their table lives
with it and every layer above (the language's parser and atoms, the grid, the bulk load,
the checks) reads it instead of listing the operators again (``tests/test_architecture.py``
refuses another literal collection of them).  The rows are in the order the language ranks
operators (an order atom sorts its entries by it); ``code`` is the operator's slot in the
bulk build's columns and :meth:`pbtree.tree.PBTree.predicate_columns` (in memory only,
but the build takes a list's parts as consecutive codes); ``list_kind`` and ``part`` are
where its predicates lie on disk (:mod:`pbtree.nodes`).  The places and the row order are
stored (in the pages, and in the order of an order atom's entries in the catalog): changed,
existing stores would no longer read (``tests/pbtree/test_pbtree_operators.py`` and
``tests/betree/lang/test_lang_testkinds.py`` pin them).

It imports nothing of bexdb, and the package loads its other modules only when asked
(``pbtree/__init__.py``), so the language (:mod:`betree.lang`) reads this table without
loading the tree.  Cost: none per call; tables built once at import.

>>> BY_SYMBOL["<"].negation, BY_SYMBOL["<"].flip, BY_SYMBOL["<"].holds(1, 2)
('>=', '>', True)
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

#: The kinds of the PB+tree's three lists (the ``list_kind`` of a list node, :mod:`pbtree.nodes`).
GT, LT, NE = 0, 1, 2


class OrderOp(NamedTuple):
    """One order operator: ``value symbol constant``."""

    #: as the language writes it after parsing (``<>`` is read as ``!=``)
    symbol: str
    #: the slot of the bulk build's columns and of ``predicate_columns`` (0 is ``=``)
    code: int
    #: the PB+tree list holding its predicates (GT, LT, NE), ``None``: the leaves' ``=`` runs
    list_kind: int | None
    #: its part within a list item (0 the non-strict ``>=``/``<=``, 1 the strict)
    part: int
    #: the operator that holds exactly where this one does not (on a defined value)
    negation: str
    #: ``c op v`` is ``v flip c``
    flip: str
    #: the truth function of (value, constant)
    holds: Callable[[Any, Any], Any]
    #: whether it bounds values from below (``value >= c``, ``> c`` or ``= c``)
    lower: bool
    #: whether it bounds values from above (``value <= c``, ``< c`` or ``= c``)
    upper: bool
    #: whether the bound excludes the constant (``<``, ``>``; ``!=`` bounds nothing)
    strict: bool
    #: whether it asks only for equality (``=``, ``!=``), which unordered types allow
    equality: bool


#: The operators, in the language's rank order (an order atom's entries sort by it).
ORDER_OPS = (
    OrderOp("<", 4, LT, 1, ">=", ">", operator.lt, False, True, True, False),
    OrderOp("<=", 3, LT, 0, ">", ">=", operator.le, False, True, False, False),
    OrderOp("=", 0, None, 0, "!=", "=", operator.eq, True, True, False, True),
    OrderOp("!=", 5, NE, 0, "=", "!=", operator.ne, False, False, False, True),
    OrderOp(">=", 1, GT, 0, "<", "<=", operator.ge, True, False, False, False),
    OrderOp(">", 2, GT, 1, "<=", "<", operator.gt, True, False, True, False),
)
#: Each operator's row, by symbol.
BY_SYMBOL = {op.symbol: op for op in ORDER_OPS}
#: The symbols in rank order.
OPS = tuple(BY_SYMBOL)
#: The rows by code (``BY_CODE[code]``).
BY_CODE = tuple(sorted(ORDER_OPS, key=lambda op: op.code))
#: The symbols by code (``OPERATORS[code]``).
OPERATORS = tuple(op.symbol for op in BY_CODE)
#: symbol -> code.
SLOT = {op.symbol: op.code for op in ORDER_OPS}
#: symbol -> (list kind or ``None`` for the leaf's ``=`` run, part within the list item).
PLACE = {op.symbol: (op.list_kind, op.part) for op in ORDER_OPS}
#: Per list kind, the codes of its parts in part order (the bulk build's column slices).
LIST_CODES = {
    kind: tuple(op.code for op in sorted(ORDER_OPS, key=lambda op: op.part) if op.list_kind == kind)
    for kind in (GT, LT, NE)
}


def bounds(symbol: str, c: Any) -> tuple[Any, bool, Any, bool] | None:
    """``(lo, lo_inclusive, hi, hi_inclusive)`` of the values ``v`` where ``v symbol c``
    holds (``None`` sides unbounded), or ``None`` for ``!=`` (not an interval)."""
    op = BY_SYMBOL[symbol]
    if not (op.lower or op.upper):
        return None
    lo, lo_inc = (c, not op.strict) if op.lower else (None, False)
    hi, hi_inc = (c, not op.strict) if op.upper else (None, False)
    return lo, lo_inc, hi, hi_inc
