"""Compiling plain conjunctions from their conjuncts' texts, each compiled once.

Why: most subscriptions are conjunctions of simple predicates (``price between 20 and 40
and genre = "classics" and format in ("paper", "audio")``), and across a large set the
same predicate texts recur: the 7.0M conjuncts of 1M BEGen subscriptions have 75K distinct
texts.  :class:`ConjunctMemo` cuts a text at its top-level ``and``, compiles each distinct
conjunct once (parser, type check, normal form: :func:`betree.normal.order_atoms`) and
joins the remembered atoms into the one clause.  Cost: ~4 µs for a BEGen subscription of
8 conjuncts, where parsing and normalizing it takes ~35 µs.

Why the result is exactly :func:`betree.normal.to_clauses` of :func:`compile_expr`: the
memo answers only when every piece of the cut is, on its own, a valid comparison,
``between`` or ``in`` on one attribute, and no two pieces share an attribute.

* The cut is right.  Pieces are separated by ``and`` between spaces and followed by a
  letter, ``_`` or ``(``.  A cut inside a string literal leaves the piece before it with an
  unterminated string, which does not compile; a cut inside ``between lo and hi`` leaves
  ``a between lo``, which does not compile either.  So when every piece compiles to one
  predicate (not an ``and``, ``or`` or ``not`` node), the text is the conjunction of the
  pieces' predicates: ``and`` binds tighter than ``or``, and no piece holds an ``or``.
* The normal form is the pieces' atoms, sorted: with distinct attributes
  :func:`betree.normal._conjunction_clauses` merges nothing and simplifies nothing (it
  would for two atoms on one attribute), and a false piece (an empty range or list) makes
  the whole false.
* Errors: any piece that does not compile makes the memo answer ``None``; the caller then
  compiles the whole text the general way, which reports the error with its column.

``tests/test_lang_fastpath.py`` checks the memo against the general path on random texts,
strings with ``and`` inside included.  Memory: bounded by ``limit`` remembered pieces
(~200 bytes each; cleared when full).
"""

from __future__ import annotations

import re

from betree.expr import Between, Compare, InList
from betree.normal import Atom, Clause, _atom_key, order_atoms
from betree.parser import compile_expr
from betree.schema import Schema
from storage.errors import InvalidInput

#: Cut a text at "and" between spaces and before what can start a predicate.
_CUT = re.compile(r" +[Aa][Nn][Dd] +(?=[A-Za-z_(])").split

#: A remembered piece: its attribute and atoms (``()`` when it is false), or ``None``.
Piece = tuple[str, tuple[Atom, ...]] | None
_MISS: Piece = ("", ())  # (found by identity)


class ConjunctMemo:
    """The clauses of plain conjunctions over ``schema``, by their pieces' texts."""

    __slots__ = ("_pieces", "limit", "schema")

    def __init__(self, schema: Schema, limit: int = 1 << 17) -> None:
        self.schema = schema
        self.limit = limit
        self._pieces: dict[str, Piece] = {}

    def clauses(self, text: str) -> list[Clause] | None:
        """``to_clauses(compile_expr(text, schema))`` when ``text`` is a plain conjunction
        (see the module docstring), else ``None``."""
        pieces = self._pieces
        attrs: list[str] = []
        atoms: list[Atom] = []
        false = False
        for part in _CUT(text):
            piece = pieces.get(part, _MISS)
            if piece is _MISS:
                piece = self._learn(part)
            if piece is None:
                return None
            attr, found = piece
            attrs.append(attr)
            if found:
                atoms.extend(found)
            else:
                false = True
        if len(set(attrs)) != len(attrs):
            return None  # bounds to merge, contradictions: the general path's work
        if false:
            return []
        atoms.sort(key=_atom_key)
        return [tuple(atoms)]

    def _learn(self, part: str) -> Piece:
        try:
            node = compile_expr(part, self.schema)
        except InvalidInput:
            piece: Piece = None
        else:
            piece = None
            if isinstance(node, (Compare, Between, InList)):  # one predicate, on one attribute
                found = order_atoms(node)
                piece = None if found is None else (node.attr, found)
        if len(self._pieces) >= self.limit:
            self._pieces.clear()
        self._pieces[part] = piece
        return piece
