"""Compiling plain conjunctions from their conjuncts' texts, each compiled once.

Why: most subscriptions are conjunctions of simple predicates (``price between 20 and 40
and genre = "classics" and format in ("paper", "audio")``), and across a large set the
same predicate texts recur: the 7.0M conjuncts of 1M BEGen subscriptions have 75K distinct
texts.  :class:`ConjunctMemo` cuts a text at its top-level ``and``, compiles each distinct
conjunct once (parser, type check, atoms: :func:`betree.lang.forms.order_atoms`) and
joins the remembered atoms into the one clause.  Cost: ~4 µs for a BEGen subscription of
8 conjuncts, where parsing and normalizing it takes ~35 µs.

Why the result is exactly :func:`betree.lang.dnf.to_clauses` of :func:`compile_expr`: the
memo answers only when every piece of the cut is, on its own, a valid comparison,
``between`` or ``in`` on one attribute, and no two pieces share an attribute.

* The cut is right.  Pieces are separated by ``and`` between spaces and followed by a
  letter, ``_`` or ``(``.  A cut inside a string literal leaves the piece before it with an
  unterminated string, which does not compile; a cut inside ``between lo and hi`` leaves
  ``a between lo``, which does not compile either.  So when every piece compiles to one
  predicate (not an ``and``, ``or`` or ``not`` node), the text is the conjunction of the
  pieces' predicates: ``and`` binds tighter than ``or``, and no piece holds an ``or``.
* The normal form is the pieces' atoms, sorted: with distinct attributes the conjunction
  fast path of :func:`~betree.lang.dnf.to_clauses` merges nothing and simplifies nothing
  (it would for two atoms on one attribute), and a false piece (an empty range or list)
  makes the whole false.
* Errors: any piece that does not compile makes the memo answer ``None``; the caller then
  compiles the whole text the general way, which reports the error with its column.

``tests/betree/lang/test_lang_fastpath.py`` checks the memo against the general path on random
texts,
strings with ``and`` inside included.

A new piece of the commonest forms on a numeric attribute (``a op 12``, ``a between 1 and
5``, ``a in (1, 2)``) is read by one regular expression (:func:`read_simple`: 3.8 µs a
piece, atoms included, against 6.2 µs through the parser; 150K distinct pieces of ``bexdb
gen --profile wide``, collector paused as the loaders run it).

Memory: bounded by ``limit`` remembered pieces (~400 bytes each with their atoms, none
longer than :data:`LONGEST_PIECE`: the default 2**19 is at most ~210 MB);
when full, the older half is forgotten.  Why that many:
a workload whose predicates rarely repeat (``bexdb gen --profile wide``: 1.05M distinct
pieces in 1M subscriptions) compiled 114 µs per subscription when the memo was cleared at
2**17 pieces, 67 µs when it kept them (300K subscriptions, one process).
"""

from __future__ import annotations

import re
from itertools import chain
from operator import itemgetter
from typing import Any

from betree.lang.atoms import Atom, Clause, atom_key
from betree.lang.bounded import forget_older_half
from betree.lang.expr import Between, Compare, InList
from betree.lang.forms import between_atoms, compare_atoms, in_atoms, order_atoms
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput

#: Cut a text at "and" between spaces and before what can start a predicate.
_first, _second = itemgetter(0), itemgetter(1)
_CUT = re.compile(r" +[Aa][Nn][Dd] +(?=[A-Za-z_(])").split

#: The commonest pieces, read without the parser (see :func:`read_simple`): a name, then an
#: operator and an integer, ``between`` two integers or ``in`` a list of them; keywords in
#: any case, spaces only, integers of at most 18 digits without leading zeros.
_INT = r"-?(?:0|[1-9][0-9]{0,17})"
_SIMPLE = re.compile(
    rf"([A-Za-z_][A-Za-z0-9_]*) *(?:(<=|>=|<>|!=|<|>|=) *({_INT})"
    rf"| +(?i:between) +({_INT}) +(?i:and) +({_INT})"
    rf"| +(?i:in) *\(((?: *{_INT} *,)* *{_INT}) *\))"
).fullmatch
_INTS = re.compile(_INT).findall
_NUMERIC = frozenset(("int", "float"))

#: Pieces longer than this are not remembered: such texts rarely recur, and parsing one
#: here and again on the general path (which it takes when it is not one predicate, as
#: 20,000 terms joined by "or") would double its cost; the memory stays small too.
LONGEST_PIECE = 4096

#: A remembered piece: its attribute and atoms (``()`` when it is false), or None.
Piece = tuple[str, tuple[Atom, ...]] | None


class ConjunctMemo:
    """The clauses of plain conjunctions over ``schema``, by their pieces' texts."""

    __slots__ = ("_pieces", "limit", "schema")

    def __init__(self, schema: Schema, limit: int = 1 << 19) -> None:
        self.schema = schema
        self.limit = limit
        self._pieces: dict[str, Piece] = {}

    def clauses(self, text: str) -> list[Clause] | None:
        """``to_clauses(compile_expr(text, schema))`` when ``text`` is a plain conjunction
        (see the module docstring), else ``None``."""
        pieces = self._pieces
        parts = _CUT(text)
        found: list[Any] = list(map(pieces.get, parts))  # (no None left past the loop)
        if None in found:  # new pieces (or one remembered as not a predicate)
            for i, piece in enumerate(found):
                if piece is None:
                    part = parts[i]
                    if part in pieces or len(part) > LONGEST_PIECE:
                        return None  # (a long piece is left to the general path, parsed there)
                    piece = self._learn(part)
                    if piece is None:
                        return None
                    found[i] = piece
        if len(set(map(_first, found))) != len(found):
            return None  # bounds to merge, contradictions: the general path's work
        if not all(map(_second, found)):
            return []  # a false piece
        atoms = list(chain.from_iterable(map(_second, found)))
        atoms.sort(key=atom_key)
        return [tuple(atoms)]

    def _learn(self, part: str) -> Piece:
        piece = read_simple(part, self.schema)
        if piece is None:
            piece = self._parse(part)
        if len(self._pieces) >= self.limit:
            forget_older_half(self._pieces)
        self._pieces[part] = piece
        return piece

    def _parse(self, part: str) -> tuple[str, tuple[Atom, ...]] | None:
        """A piece's attribute and atoms by the parser, if it is one order predicate."""
        try:
            node = compile_expr(part, self.schema)
        except InvalidInput:
            return None
        if isinstance(node, (Compare, Between, InList)):  # one predicate, on one attribute
            atoms = order_atoms(node)
            if atoms is not None:
                return node.attr, atoms
        return None


def read_simple(part: str, schema: Schema) -> tuple[str, tuple[Atom, ...]] | None:
    """The attribute and atoms of ``part`` if it is one of the commonest predicates on a
    numeric attribute (``a op 12``, ``a between 1 and 5``, ``a in (1, 2)``), else ``None``.

    Why: on a workload whose predicates rarely repeat (1.55 new pieces a subscription), a
    piece parsed costs 6.2 µs (tokens, tree, type check, atoms), read by one regular
    expression 3.8, the atoms coming from the same constructors
    (:func:`~betree.lang.forms.compare_atoms` …) as :func:`~betree.lang.forms.order_atoms`
    of the parsed node, so the result is the same (``tests/betree/lang/test_lang_fastpath.py``
    checks
    it against the parser on random texts).
    """
    m = _SIMPLE(part)
    if m is None:
        return None
    attr, op, c, lo, hi, values = m.groups()
    spec = schema.attributes.get(attr)
    if spec is None or spec.type not in _NUMERIC:
        return None  # unknown, or not compared as numbers: the parser says what it is
    if op is not None:
        return attr, compare_atoms(attr, "!=" if op == "<>" else op, int(c))
    if lo is not None:
        return attr, between_atoms(attr, int(lo), int(hi))
    return attr, in_atoms(attr, set(map(int, _INTS(values))))
