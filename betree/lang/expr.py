"""Syntax tree of bexdb's expression language, and a brute-force reference evaluator.

Why: the parser (:mod:`betree.lang.parser`) builds these nodes, normalization
(:mod:`betree.lang.dnf`) turns them into clauses of indexable atoms, and :func:`evaluate`
gives the meaning of a tree straight from the truth table (README: Language), with no
cleverness at all.  It is the oracle the index and the normalizer are tested against, so it
stays deliberately literal: one ``if`` per form, every atom false on an undefined attribute
except ``a is null`` (true), ``not`` plain Boolean negation.

Nodes are frozen dataclasses: hashable, compared by value, cheap to build (the parser makes
a few per atom).  Attribute names are ``str``; literals are ``int`` (signed 64-bit),
``float`` (finite), ``str`` or ``bool``; list literals are tuples.  A flipped comparison
``3 < a`` is stored as ``a > 3``.  The nodes a bulk load builds most (``Compare``,
``Between``, ``InList``, ``And``) define their own ``__init__``, which sets the slots through
their descriptors: about 0.3 µs, two thirds or less of the time of the generated frozen
``__init__`` (which goes through ``object.__setattr__``); the other methods are generated.

Cost: :func:`evaluate` walks the whole tree, one step per node and one dict lookup per atom
(list atoms add a scan of the list): fine for tests and for ``explain``, never for matching
many subscriptions.

>>> evaluate(Compare("price", "<", 10), {"price": 7})
True
>>> evaluate(Not(Compare("price", "<", 10)), {})
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

import re2

from betree.lang import special
from pbtree.operators import BY_SYMBOL
from storage.errors import InvalidInput

#: A literal value: int (signed 64-bit), float (finite), str or bool.
Scalar = int | float | str | bool
#: An element of a list literal (lists hold numbers or strings, never bools).
ListItem = int | float | str


class ExpressionError(InvalidInput):
    """An expression was rejected: ``column`` (1-based, in code points) and ``reason``.

    ``str(err)`` reads ``column 7: unexpected ")"``; ``err.reason`` is the bare reason.
    """

    column: int

    def __init__(self, reason: str, column: int, hint: str | None = None) -> None:
        super().__init__(f"column {column}: {reason}", column, hint)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Const:
    """``true`` or ``false``."""

    value: bool


@dataclass(frozen=True, slots=True)
class Not:
    """``not child``: plain Boolean negation."""

    child: Node


@dataclass(frozen=True, slots=True)
class And:
    """``c1 and c2 and …`` (two or more children, none of them an ``And``)."""

    children: tuple[Node, ...]

    def __init__(self, children: tuple[Node, ...]) -> None:
        _AND_SLOTS(self, children)


@dataclass(frozen=True, slots=True)
class Or:
    """``c1 or c2 or …`` (two or more children, none of them an ``Or``)."""

    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    """``attr op value``, ``op`` one of :data:`~pbtree.operators.OPS`; ``3 < a``
    is stored as ``a > 3``."""

    attr: str
    op: str
    value: Scalar

    def __init__(self, attr: str, op: str, value: Scalar) -> None:
        set_attr, set_op, set_value = _COMPARE_SLOTS
        set_attr(self, attr)
        set_op(self, op)
        set_value(self, value)


@dataclass(frozen=True, slots=True)
class Between:
    """``attr between lo and hi`` (``lo <= a <= hi``), or ``attr not between …``."""

    attr: str
    lo: ListItem
    hi: ListItem
    negated: bool = False

    def __init__(self, attr: str, lo: ListItem, hi: ListItem, negated: bool = False) -> None:
        set_attr, set_lo, set_hi, set_negated = _BETWEEN_SLOTS
        set_attr(self, attr)
        set_lo(self, lo)
        set_hi(self, hi)
        set_negated(self, negated)


@dataclass(frozen=True, slots=True)
class InList:
    """``attr in (v, …)`` (scalar membership), or ``attr not in (v, …)``."""

    attr: str
    values: tuple[ListItem, ...]
    negated: bool = False

    def __init__(self, attr: str, values: tuple[ListItem, ...], negated: bool = False) -> None:
        set_attr, set_values, set_negated = _IN_LIST_SLOTS
        set_attr(self, attr)
        set_values(self, values)
        set_negated(self, negated)


@dataclass(frozen=True, slots=True)
class Contains:
    """``value in attr`` (the list attribute contains ``value``), or ``value not in attr``."""

    attr: str
    value: ListItem
    negated: bool = False


@dataclass(frozen=True, slots=True)
class ListOp:
    """``attr one of (…)`` / ``none of`` / ``all of``: ``op`` is ``one_of``, ``none_of`` or
    ``all_of``."""

    attr: str
    op: str
    values: tuple[ListItem, ...]


@dataclass(frozen=True, slots=True)
class IsNull:
    """``attr is null`` (undefined), or ``attr is not null`` when ``negated``."""

    attr: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsEmpty:
    """``attr is empty``: the list attribute is defined and empty."""

    attr: str


@dataclass(frozen=True, slots=True)
class BoolAttr:
    """A bare ``attr``: the bool attribute is true."""

    attr: str


@dataclass(frozen=True, slots=True)
class StrFunc:
    """``starts_with(attr, "p")`` / ``ends_with`` / ``contains``: ``func`` names which."""

    func: str
    attr: str
    arg: str


@dataclass(frozen=True, slots=True)
class Pattern:
    """``attr like "p"`` / ``attr matches "re"`` (``kind``), or ``attr not like …`` /
    ``attr not matches …`` when ``negated``: the whole value (:mod:`betree.lang.patterns`)."""

    attr: str
    kind: str
    pattern: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Special:
    """A function of the be-tree library (:mod:`betree.lang.special`): ``func`` is
    ``segment_within``, ``segment_before``, ``within_frequency_cap`` or
    ``geo_within_radius``; ``attr`` the attribute it reads (for the geo one the latitude:
    ``latitude`` unless named); ``args`` its constants (the frequency cap's are ``(type, id
    or None, namespace, value, length)``, the geo one's ``(lat, lon, km)`` and the longitude
    attribute when it is not ``longitude``: :func:`betree.lang.special.geo_constants`)."""

    func: str
    attr: str
    args: tuple[Scalar | None, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """``any attr (child)``: ``attr`` names an array of objects; true when some element
    satisfies ``child``, whose attributes are paths inside the element (``sku`` for
    ``items.sku``).  A validated event holds the elements under ``attr`` as a tuple of
    dicts, one per element, of its values by those paths (``Schema.validate_event``)."""

    attr: str
    child: Node


def _slot_setters(cls: type) -> tuple[Callable[[object, object], None], ...]:
    """The ``__set__`` of each field's slot descriptor (they bypass the frozen check)."""
    return tuple(cls.__dict__[f.name].__set__ for f in fields(cls))


(_AND_SLOTS,) = _slot_setters(And)
_COMPARE_SLOTS = _slot_setters(Compare)
_BETWEEN_SLOTS = _slot_setters(Between)
_IN_LIST_SLOTS = _slot_setters(InList)

Node = (
    Const | Not | And | Or | Compare | Between | InList | Contains | ListOp | IsNull | IsEmpty
    | BoolAttr | StrFunc | Pattern | Special | AnyOf
)  # fmt: skip


def evaluate(node: Node, event: Mapping[str, object]) -> bool:
    """The truth of ``node`` on a validated event (the README's truth table, literally).

    ``event`` maps attribute names to defined values, as returned by
    ``Schema.validate_event``; an absent key (or ``None``) is an undefined attribute.
    Numbers compare by exact value (Python compares ``int`` with ``float`` exactly), strings
    by code point.
    """
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Not):
        return not evaluate(node.child, event)
    if isinstance(node, And):
        return all(evaluate(c, event) for c in node.children)
    if isinstance(node, Or):
        return any(evaluate(c, event) for c in node.children)
    if isinstance(node, Special):  # may read other attributes too (now, longitude)
        return special.truth(node.func, node.attr, node.args, event)
    if isinstance(node, AnyOf):  # false when undefined or empty, else some element
        elements = event.get(node.attr)
        return elements is not None and any(evaluate(node.child, e) for e in elements)  # type: ignore[attr-defined]
    value = event.get(node.attr)
    if isinstance(node, IsNull):
        return (value is not None) if node.negated else (value is None)
    if value is None:
        return False  # every other atom is false on an undefined attribute
    if isinstance(node, Compare):
        return bool(BY_SYMBOL[node.op].holds(value, node.value))
    if isinstance(node, Between):
        inside: bool = node.lo <= value <= node.hi  # type: ignore[operator]
        return not inside if node.negated else inside
    if isinstance(node, InList):
        found = any(value == v for v in node.values)
        return not found if node.negated else found
    if isinstance(node, Contains):
        found = any(x == node.value for x in value)  # type: ignore[attr-defined]
        return not found if node.negated else found
    if isinstance(node, ListOp):
        present = [any(x == v for x in value) for v in node.values]  # type: ignore[attr-defined]
        if node.op == "one_of":
            return any(present)
        if node.op == "none_of":
            return not any(present)
        if node.op == "all_of":
            return all(present)
        raise ValueError(f"unknown list operator {node.op!r}")
    if isinstance(node, IsEmpty):
        return len(value) == 0  # type: ignore[arg-type]
    if isinstance(node, BoolAttr):
        return value is True
    if isinstance(node, StrFunc):
        if not isinstance(value, str):
            return False
        if node.func == "starts_with":
            return value.startswith(node.arg)
        if node.func == "ends_with":
            return value.endswith(node.arg)
        if node.func == "contains":
            return node.arg in value
        raise ValueError(f"unknown string function {node.func!r}")
    if isinstance(node, Pattern):
        if node.kind == "like":
            found = like_holds(node.pattern, value)  # type: ignore[arg-type]
        else:  # RE2's syntax is the definition: RE2 itself
            found = re2.fullmatch(node.pattern, value) is not None  # type: ignore[arg-type]
        return not found if node.negated else found
    raise TypeError(f"not an expression node: {node!r}")


def like_holds(pattern: str, value: str) -> bool:
    """``value like pattern``, by the definition and nothing else (the index uses RE2):
    which prefixes of ``value`` the pattern's first k tokens can match, token by token."""
    tokens: list[tuple[str, str]] = []  # ("*", ""), ("?", ""), or ("=", a character)
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            tokens.append(("=", pattern[i + 1]))
            i += 2
        else:
            c = pattern[i]
            tokens.append((c, "") if c in "*?" else ("=", c))
            i += 1
    ends = {0}  # lengths of the prefixes of value matched so far
    for kind, c in tokens:
        if kind == "*":
            ends = set(range(min(ends), len(value) + 1)) if ends else set()
        elif kind == "?":
            ends = {n + 1 for n in ends if n < len(value)}
        else:
            ends = {n + 1 for n in ends if n < len(value) and value[n] == c}
    return len(value) in ends
