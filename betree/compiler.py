"""The pure compiler: an expression's text in, its clauses out — schema and limits only.

Why its own home: compiling needs no store.  The index (online ``subscribe``), the Spark
compile job (one per Python worker, kept across tasks) and validation (``bexdb validate``,
``POST /validate``) all compile with this one object, so an expression is accepted or
rejected the same way on every path, and a compile task opens no LMDB environment.

Cost: a plain conjunction whose pieces were seen before is joined from them
(:class:`betree.lang.conjuncts.ConjunctMemo`: O(pieces)); anything else is parsed and
normalized (:func:`betree.lang.parser.compile_expr`, :func:`betree.lang.dnf.to_clauses`:
linear in the text's length, the normal form bounded by ``max_clauses``).  The memo is
asked only while it answers: of rich ad-targeting rules (``bexdb gen --profile rich``)
it answered 1.8%, each refusal after parsing the new pieces the general path parses
again (~37 µs of a record's ~300); past :data:`MEMO_WINDOW` tries answering fewer than
one in :data:`MEMO_HITS`, it is asked one expression in :data:`MEMO_SAMPLE` until a
window of those answers more.  Memory: the memo's bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from betree.lang.atoms import Clause
from betree.lang.comparisons import Triple, comparisons
from betree.lang.conjuncts import ConjunctMemo
from betree.lang.dnf import MAX_CLAUSES, to_clauses
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage import codec
from storage.errors import InvalidInput

#: the memo's tries judged at once, the share of answers below which it is left (one in
#: this many), and while left, one expression in this many still asks it
MEMO_WINDOW, MEMO_HITS, MEMO_SAMPLE = 1024, 8, 16


class Compiler:
    """Compiles subscriptions against one schema under one clause limit.

    >>> Compiler.of({"attributes": {"x": {"type": "int"}}}, None).compile("s1", "x > 3")
    ... # doctest: +SKIP
    """

    def __init__(self, schema: Schema, max_clauses: int = MAX_CLAUSES) -> None:
        self.schema = schema
        self.max_clauses = max_clauses
        self._always_defined = tuple(
            name for name, spec in schema.attributes.items() if not spec.allow_undefined
        )
        self._conjuncts = ConjunctMemo(schema)
        self._memo_left = False  # (see the module's "Cost")
        self._memo_tries = self._memo_hits = self._skipped = 0

    @classmethod
    def of(cls, schema: Mapping[str, Any] | Schema, settings: Mapping[str, int] | None) -> Compiler:
        """A compiler of a schema document and a store's settings (``max_clauses``)."""
        parsed = schema if isinstance(schema, Schema) else Schema.from_json(schema)
        return cls(parsed, int((settings or {}).get("max_clauses", MAX_CLAUSES)))

    def comparisons(self, ident: Any, expr: object) -> list[Triple] | None:
        """``expr``'s one clause as ``(attribute, operator, constant)`` triples when it is a
        plain conjunction of comparisons and ``between`` on int and float attributes
        (:func:`betree.lang.comparisons.comparisons`: the atoms :meth:`compile` would give,
        without an object each), ``[]`` when false, else ``None`` (then :meth:`compile`
        it).  ``ident`` is validated as in :meth:`compile`."""
        codec.encode_id(ident)
        if not isinstance(expr, str) or self.max_clauses < 1:
            return None
        return comparisons(expr, self.schema)

    def compile(self, ident: Any, expr: object) -> list[Clause]:
        """Type-check and normalize one expression; errors name the subscription ``ident``
        (itself validated as a subscription id) and the column."""
        codec.encode_id(ident)
        if not isinstance(expr, str):
            raise InvalidInput(f"subscription {ident!r}: the expression must be a string")
        if self.max_clauses >= 1:
            clauses = self._memo_clauses(expr)
            if clauses is not None:
                return clauses
        try:
            node = compile_expr(expr, self.schema)
            return to_clauses(node, self.max_clauses, always_defined=self._always_defined)
        except InvalidInput as exc:
            raise InvalidInput(
                f"subscription {ident!r}: {exc.message}", column=exc.column, hint=exc.hint
            ) from exc

    def _memo_clauses(self, expr: str) -> list[Clause] | None:
        """The memo's clauses of ``expr``, or None (not a plain conjunction, or the memo
        not asked: see the module's "Cost")."""
        if self._memo_left:
            self._skipped += 1
            if self._skipped % MEMO_SAMPLE:
                return None
        clauses = self._conjuncts.clauses(expr)
        self._memo_tries += 1
        if clauses is not None:
            self._memo_hits += 1
        if self._memo_tries == MEMO_WINDOW:
            self._memo_left = self._memo_hits * MEMO_HITS < MEMO_WINDOW
            self._memo_tries = self._memo_hits = 0
        return clauses
