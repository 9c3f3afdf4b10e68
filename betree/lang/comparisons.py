"""Plain conjunctions of numeric comparisons read straight to ``(attribute, operator,
constant)`` triples: the bulk load's columnar compile (no parse tree, no normal form, no
atom object).

Why: the dense range workloads of the matching literature (REIN, TAMA, HEM: every event
defines every attribute, a subscription is ~10 ``between`` of wide ranges, none shared)
compile to two order atoms a ``between``, which the batch build
(:class:`betree.disk.bulk.Batch`) holds as columns anyway.  Through the parser or the
conjunct memo (:class:`betree.lang.conjuncts.ConjunctMemo`) each range costs a tree, two
atom objects and a remembered piece that is never asked for again; here it is one regular
expression match and two tuples.

What it answers: a text cut at its top-level ``and`` (the memo's cut, same reasons) whose
every piece is ``a op n`` (``<``, ``<=``, ``=``, ``!=``/``<>``, ``>=``, ``>``) or ``a
between n and m`` on a distinct ``int`` or ``float`` attribute of the schema, keywords in
any case, spaces only, each number an integer or a float literal as
:func:`betree.lang.literals.literal` reads it.  The triples are the atoms of
:func:`betree.lang.dnf.to_clauses` of :func:`betree.lang.parser.compile_expr` of the text:
constants made canonical (:func:`betree.lang.atoms.canonical`: integral floats in int64's
range are ints, so ``-0.0`` is ``0``), a ``between`` two atoms (``>= lo``, ``<= hi``), one
``=`` when its ends are equal, false (``[]``) when crossed; sorted as the atoms sort
(attribute, constant, operator).  Anything else (``in``, ``or``, ``not``, parentheses, an
attribute twice, a string, an unknown or non-numeric attribute, tabs, an integer outside
int64, a float that overflows) answers ``None``: the caller compiles the text the general
way, which reports any error with its reason and column.  ``tests/betree/test_comparisons.py``
checks the triples against the general path on random and edge texts.

Cost: ~2 µs a ``between`` (one ``fullmatch``, two ``int``/``float`` calls, a sort of the
clause's triples), against ~10 through the memo's atoms; no memory kept.
"""

from __future__ import annotations

import re
from typing import cast

from betree.lang.atoms import canonical
from betree.lang.lexicon import INT64_MAX, INT64_MIN
from betree.lang.schema import Schema
from pbtree.operators import OPS

#: Cut a text at "and" between spaces and before what can start a predicate (the memo's).
_CUT = re.compile(r" +[Aa][Nn][Dd] +(?=[A-Za-z_(])").split

#: A number token as the tokenizer cuts it and :func:`~betree.lang.literals.literal` takes
#: it: an integer of at most 18 digits (in int64's range whatever they are: read by ``int``
#: alone, the common case), else any number (an integer's range checked after, or a float).
_SHORT = r"(-?[0-9]{1,18})"
_NUM = r"(-?[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)?)"
_PIECE = re.compile(
    rf"([A-Za-z_][A-Za-z0-9_]*) *(?:(<=|>=|<>|!=|<|>|=) *(?:{_SHORT}|{_NUM})"
    rf"| +(?i:between) +(?:{_SHORT}|{_NUM}) +(?i:and) +(?:{_SHORT}|{_NUM}))"
).fullmatch
_NUMERIC = frozenset(("int", "float"))

#: An operator's rank (an order atom's entries, and atoms of one attribute, sort by it).
_RANK = {op: i for i, op in enumerate(OPS)}
_GE, _LE, _EQ = _RANK[">="], _RANK["<="], _RANK["="]
_DIGITS = frozenset("0123456789-")

Number = int | float
Triple = tuple[str, str, Number]


def number(s: str) -> Number | None:
    """The canonical constant of the number token ``s``, or None when the language refuses
    it (an integer outside int64, a float that overflows a double)."""
    if _DIGITS.issuperset(s):  # an integer ("-" only as its first character: the regex's)
        v = int(s)
        return v if INT64_MIN <= v <= INT64_MAX else None
    f = float(s)
    if f in (_INF, -_INF):
        return None
    return cast(Number, canonical(f))  # (a float in: an int or a float out)


_INF = float("inf")


def comparisons(text: str, schema: Schema) -> list[Triple] | None:
    """The one clause of ``text`` as ``(attribute, operator, constant)`` triples, one an
    atom, in the clause's order, when ``text`` is a plain conjunction of numeric
    comparisons (see the module's docstring); ``[]`` when it is false; else ``None``."""
    attributes = schema.attributes
    seen: set[str] = set()
    out: list[tuple[str, Number, int]] = []
    false = False
    for part in _CUT(text):
        m = _PIECE(part)
        if m is None:
            return None
        attr, op, c, cn, lo, lon, hi, hin = m.groups()
        spec = attributes.get(attr)
        if spec is None or spec.type not in _NUMERIC or attr in seen:
            return None
        seen.add(attr)
        if op is not None:
            v = int(c) if c is not None else number(cn)
            if v is None:
                return None
            out.append((attr, v, _RANK["!=" if op == "<>" else op]))
            continue
        low = int(lo) if lo is not None else number(lon)
        high = int(hi) if hi is not None else number(hin)
        if low is None or high is None:
            return None
        if low < high:
            out.append((attr, low, _GE))
            out.append((attr, high, _LE))
        elif low == high:
            out.append((attr, low, _EQ))
        else:
            false = True  # (false only once every piece has been read: an error wins)
    if false:
        return []
    out.sort()
    return [(attr, OPS[rank], c) for attr, c, rank in out]
