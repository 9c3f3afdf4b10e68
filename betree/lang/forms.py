"""The atoms of each atomic form of the language: a node of the syntax tree, or its
negation, as clauses of atoms (:mod:`betree.lang.dnf` combines them).

Why apart from the atoms (:mod:`betree.lang.atoms`: what an atom is, its text, negation
and truth): here is the truth table (README: Language) applied form by form, where every
atom but ``a is null`` is false on an undefined attribute: ``not P`` for such an atom is
``a is null OR (a defined and not-P)``, so ``not (a = 1)`` gives the two clauses
``a is null`` and ``a <> 1``; ``between``, ``in``, ``starts_with`` and patterns become
ranges that the PB+trees and the c-directories prune with.

Cost: the positive comparisons, ``between`` and ``in`` (:func:`order_atoms`) ~0.2 µs when
their atom is interned; the others a few atoms built.

>>> atom_clauses(Compare("a", "=", 1), False)
[(TestAtom('a', 'undefined'),), (OrderAtom('a', (('!=', 1),)),)]
"""

from __future__ import annotations

from betree.lang import patterns
from betree.lang.atoms import (
    Atom,
    Clause,
    OrderAtom,
    TestAtom,
    Value,
    canonical,
    equal_any,
    interned,
    make_test,
    negated_clauses,
    order_atom,
    string_successor,
)
from betree.lang.expr import (
    Between,
    BoolAttr,
    Compare,
    Contains,
    InList,
    IsEmpty,
    IsNull,
    ListOp,
    Node,
    Pattern,
    StrFunc,
)
from betree.lang.testkinds import KINDS
from pbtree.operators import OPS

_NUMBER_TYPES = (int, float)
_ORDER_OPS = frozenset(OPS)


def _made_negation(attr: str, test: str, arg: object) -> TestAtom | None:
    """:func:`make_test` of the negation on a defined value of ``test`` with ``arg``."""
    neg = KINDS[test].negation
    return None if neg is None else make_test(attr, neg, arg)


def order_atoms(node: Node) -> tuple[Atom, ...] | None:
    """The atoms of a positive comparison, ``between`` or ``in`` node as a conjunct, ``()``
    if it is false (an empty range or list), or ``None`` for any other node (left to
    :func:`atom_clauses`).

    These atoms go to the PB+trees: ``a op c``; ``a between lo and hi`` is ``a >= lo and
    a <= hi`` (what :mod:`betree.lang.dnf` simplifies it to), or ``a = lo`` when ``lo == hi``;
    ``a in (...)`` is one atom of ``=`` entries.  Cost: ~0.2 µs when interned.
    """
    if type(node) is Compare:
        v = node.value
        if type(v) is int or type(v) is str:
            atom = interned((node.attr, node.op, v))
            if atom is not None:  # (only valid operators and canonical constants are there)
                return (atom,)
        if type(v) is not bool and node.op in _ORDER_OPS:
            return compare_atoms(node.attr, node.op, canonical(v))
    elif type(node) is Between:
        lo, hi = node.lo, node.hi
        if not node.negated and (
            (type(lo) is str and type(hi) is str)
            or (isinstance(lo, _NUMBER_TYPES) and isinstance(hi, _NUMBER_TYPES))
        ):
            return between_atoms(node.attr, canonical(lo), canonical(hi))
    elif type(node) is InList and not node.negated:
        return in_atoms(node.attr, set(map(canonical, node.values)))
    return None


def compare_atoms(attr: str, op: str, c: Value) -> tuple[Atom, ...]:
    """The atoms of ``attr op c`` (``op`` one of :data:`pbtree.operators.OPS`, ``c`` canonical)."""
    return (order_atom(attr, op, c),)


def between_atoms(attr: str, lo: Value, hi: Value) -> tuple[Atom, ...]:
    """The atoms of ``attr between lo and hi`` (canonical, both numbers or both strings)."""
    if lo < hi:  # type: ignore[operator]
        return (order_atom(attr, ">=", lo), order_atom(attr, "<=", hi))
    if lo == hi:
        return (order_atom(attr, "=", lo),)
    return ()


def in_atoms(attr: str, values: set[Value]) -> tuple[Atom, ...]:
    """The atoms of ``attr in (…)`` for the set of its canonical values."""
    return (equal_any(attr, values),) if values else ()


def atom_clauses(node: Node, pos: bool) -> list[Clause]:
    """Clauses of one atomic node (``pos``) or of its negation, before simplification
    (:mod:`betree.lang.dnf` simplifies and combines them)."""
    if isinstance(node, Compare):
        a, op, v = node.attr, node.op, node.value
        if isinstance(v, bool):
            true_test = "bool_true" if (op == "=") == v else "bool_false"
            t = TestAtom(a, true_test)
            return [(t,)] if pos else negated_clauses(a, t.defined_negation())
        atom = OrderAtom(a, ((op, v),))
        return [(atom,)] if pos else atom.negate()
    if isinstance(node, Between):
        return _between(node, pos)
    if isinstance(node, InList):
        return _in_list(node, pos)
    if isinstance(node, Contains):
        test = "lacks" if node.negated else "has"
        t = TestAtom(node.attr, test, canonical(node.value))
        return [(t,)] if pos else negated_clauses(node.attr, t.defined_negation())
    if isinstance(node, ListOp):
        values = tuple(canonical(v) for v in node.values)
        t2 = make_test(node.attr, node.op, values)
        if pos:
            return [(t2,)] if t2 is not None else []
        return negated_clauses(node.attr, _made_negation(node.attr, node.op, values))
    if isinstance(node, IsNull):
        test = "undefined" if node.negated != pos else "defined"
        return [(TestAtom(node.attr, test),)]
    if isinstance(node, IsEmpty):
        t = TestAtom(node.attr, "empty")
        return [(t,)] if pos else negated_clauses(node.attr, t.defined_negation())
    if isinstance(node, BoolAttr):
        t = TestAtom(node.attr, "bool_true")
        return [(t,)] if pos else negated_clauses(node.attr, t.defined_negation())
    if isinstance(node, StrFunc):
        return _str_func(node, pos)
    if isinstance(node, Pattern):
        return _pattern(node, pos)
    raise TypeError(f"not an atomic expression node: {node!r}")


def _between(node: Between, pos: bool) -> list[Clause]:
    a = node.attr
    lo, hi = canonical(node.lo), canonical(node.hi)
    inside = not node.negated  # the atom holds inside [lo, hi] (else outside), when defined
    if lo > hi:  # type: ignore[operator]  # the interval is empty
        if inside:
            return [] if pos else [()]
        return [(TestAtom(a, "defined"),)] if pos else [(TestAtom(a, "undefined"),)]
    if inside == pos:  # (only the atoms a form needs are built)
        in_clause: Clause = (OrderAtom(a, ((">=", lo),)), OrderAtom(a, (("<=", hi),)))
        return [in_clause] if pos else [(TestAtom(a, "undefined"),), in_clause]
    # outside [lo, hi]: "a < lo or a > hi", which is "a <> lo" for a single point
    out_entries = (("!=", lo),) if lo == hi else (("<", lo), (">", hi))
    out_atom = OrderAtom(a, out_entries)
    return [(out_atom,)] if pos else [(TestAtom(a, "undefined"),), (out_atom,)]


def _in_list(node: InList, pos: bool) -> list[Clause]:
    a = node.attr
    values = {canonical(v) for v in node.values}
    member = not node.negated  # the atom holds for members (else non-members), when defined
    if not values:
        if member:
            return [] if pos else [()]
        return [(TestAtom(a, "defined"),)] if pos else [(TestAtom(a, "undefined"),)]
    # "in" holds on a defined value in the list (any_eq), "not in" off it (all_ne); only
    # the one a form needs is built (all_ne is an atom a value: rich rules' lists of 100)
    if member == pos:
        any_eq: Clause = (equal_any(a, values),)
        return [any_eq] if pos else [(TestAtom(a, "undefined"),), any_eq]
    all_ne: Clause = tuple(order_atom(a, "!=", v) for v in values)
    return [all_ne] if pos else [(TestAtom(a, "undefined"),), all_ne]


def _str_func(node: StrFunc, pos: bool) -> list[Clause]:
    a, p = node.attr, node.arg
    if node.func == "starts_with":
        if not p:
            return [(TestAtom(a, "defined"),)] if pos else [(TestAtom(a, "undefined"),)]
        succ = string_successor(p)
        ge = OrderAtom(a, ((">=", p),))
        if succ is None:  # every string >= p starts with p
            return [(ge,)] if pos else ge.negate()
        if pos:
            return [(ge, OrderAtom(a, (("<", succ),)))]
        return [(TestAtom(a, "undefined"),), (OrderAtom(a, (("<", p), (">=", succ))),)]
    t = make_test(a, node.func, p)
    if pos:
        return [(t,)] if t is not None else []
    return negated_clauses(a, _made_negation(a, node.func, p))


def _pattern(node: Pattern, pos: bool) -> list[Clause]:
    """``a like "p"`` and the rest: one test, beside it the range of the pattern's literal
    prefix (as ``starts_with``), so that the PB+tree and the c-directory prune; a pattern
    that spells out its values is the ``in`` list of them (:func:`patterns.literals`)."""
    a = node.attr
    values = patterns.literals(node.kind, node.pattern)
    if values is not None:
        return _in_list(InList(a, values, node.negated), pos)
    t = TestAtom(a, ("not_" if node.negated else "") + node.kind, node.pattern)
    if not pos:
        return negated_clauses(a, t.defined_negation())
    prefix = "" if node.negated else patterns.literal_prefix(node.kind, node.pattern)
    if not prefix:
        return [(t,)]
    succ = string_successor(prefix)
    ge = OrderAtom(a, ((">=", prefix),))
    return [(ge, t) if succ is None else (ge, OrderAtom(a, (("<", succ),)), t)]
