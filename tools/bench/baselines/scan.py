"""SCAN: every subscription's compiled clauses evaluated on the event (the floor to beat).

:class:`Compiled` is also the input every baseline is built from: the subscriptions'
clauses (``to_clauses(compile_expr(...))``, the same normal form bexdb indexes), atoms
interned so equal atoms are one object.

Cost: compiling ~150-180 µs a subscription; matching O(subscriptions x atoms) Python work
per event (``clauses_hold`` stops at a clause's first false atom).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from betree.lang.atoms import Atom, Clause
from betree.lang.dnf import clauses_hold, to_clauses
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema

Event = Mapping[str, object]


class Compiled:
    """Subscriptions compiled to clauses once, atoms interned (equal atoms shared)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.ids: list[Any] = []
        self.clauses: list[list[Clause]] = []
        self._atoms: dict[Atom, Atom] = {}

    def extend(self, subs: Sequence[tuple[Any, str]]) -> None:
        atoms = self._atoms
        for ident, text in subs:
            cl = to_clauses(compile_expr(text, self.schema))
            self.ids.append(ident)
            self.clauses.append([tuple(atoms.setdefault(a, a) for a in c) for c in cl])


def scan(compiled: Compiled, n: int, values: Event) -> list[Any]:
    """SCAN: every subscription's clauses evaluated on the event.  O(n) per event."""
    ids = compiled.ids
    return [ids[i] for i, cl in enumerate(compiled.clauses[:n]) if clauses_hold(cl, values)]


class Scan:
    """:func:`scan` behind the interface the other baselines share (nothing to build)."""

    name = "SCAN"

    def __init__(self, compiled: Compiled, n: int | None = None) -> None:
        self.compiled = compiled
        self.n = len(compiled.ids) if n is None else n

    def match(self, values: Event) -> list[Any]:
        return scan(self.compiled, self.n, values)
