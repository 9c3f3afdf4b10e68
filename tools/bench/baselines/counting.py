"""Two-phase counting (PB+tree-counting of the BE-Tree paper's baselines), in memory.

Phase 1 finds the satisfied atoms with a per-attribute Grouped-Filter style index: for each
operator the sorted constants of every order-atom entry, one ``searchsorted`` per operator
and event attribute, the satisfied ids being a slice; test atoms (lists, ``ends_with``,
``is null``...) are evaluated one by one.  Phase 2: an inverted index atom -> the clause ids
using it (CSR arrays), ``np.bincount`` of the clause ids of the satisfied atoms, and the
clauses whose count equals their size match.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from betree.lang.atoms import Atom, OrderAtom
from tools.bench.baselines.flat import gather
from tools.bench.baselines.scan import Compiled

Event = Mapping[str, object]


class _OpIndex:
    """Sorted constants of one (attribute, operator) with the atom id of each entry."""

    __slots__ = ("aids", "consts")

    def __init__(self, pairs: list[tuple[Any, int]]) -> None:
        pairs.sort(key=lambda p: p[0])
        self.consts = np.array([c for c, _ in pairs])
        self.aids = np.array([a for _, a in pairs], dtype=np.int64)


class Counting:
    """Two-phase counting (PB+tree-counting in memory) over the first n subscriptions.

    Phase 1 cost: per event attribute and operator one ``searchsorted`` (O(log e)) and a
    slice of the satisfied atom ids.  Phase 2 cost: a gather of the clause ids of every
    satisfied atom and one ``bincount`` over all clauses (O(pairs + clauses)).
    """

    name = "counting"

    def __init__(self, compiled: Compiled, n: int | None = None) -> None:
        n = len(compiled.ids) if n is None else n
        aid_of: dict[Atom, int] = {}
        pair_atom: list[int] = []
        pair_clause: list[int] = []
        sizes: list[int] = []
        clause_sub: list[int] = []
        for s, clauses in enumerate(compiled.clauses[:n]):
            for clause in clauses:
                cid = len(sizes)
                sizes.append(len(clause))
                clause_sub.append(s)
                for atom in clause:
                    aid = aid_of.setdefault(atom, len(aid_of))
                    pair_atom.append(aid)
                    pair_clause.append(cid)
        self.ids = compiled.ids[:n]
        self.n_atoms = len(aid_of)
        self.sizes = np.array(sizes, dtype=np.int64)
        self.clause_sub = np.array(clause_sub, dtype=np.int64)
        atoms_arr = np.array(pair_atom, dtype=np.int64)
        order = np.argsort(atoms_arr, kind="stable")
        self.post = np.array(pair_clause, dtype=np.int64)[order]  # clause ids by atom
        self.ptr = np.zeros(self.n_atoms + 1, dtype=np.int64)
        np.cumsum(np.bincount(atoms_arr, minlength=self.n_atoms), out=self.ptr[1:])
        entries: dict[str, dict[str, list[tuple[Any, int]]]] = {}
        self.tests: list[tuple[int, Atom]] = []
        for atom, aid in aid_of.items():
            if isinstance(atom, OrderAtom):
                per_op = entries.setdefault(atom.attr, {})
                for op, c in atom.entries:
                    per_op.setdefault(op, []).append((c, aid))
            else:
                self.tests.append((aid, atom))
        self.index = {
            attr: {op: _OpIndex(pairs) for op, pairs in per_op.items()}
            for attr, per_op in entries.items()
        }

    def satisfied(self, values: Event) -> np.ndarray:
        """Phase 1: a bool array over atom ids."""
        sat = np.zeros(self.n_atoms, dtype=bool)
        for attr, value in values.items():
            per_op = self.index.get(attr)
            if per_op is None:
                continue
            x: Any = value
            for op, ix in per_op.items():
                aids = ix.aids
                lo = int(np.searchsorted(ix.consts, x))  # consts[:lo] < x
                hi = int(np.searchsorted(ix.consts, x, "right"))  # consts[hi:] > x
                if op == "=":
                    sat[aids[lo:hi]] = True
                elif op == "<":  # x < c
                    sat[aids[hi:]] = True
                elif op == "<=":
                    sat[aids[lo:]] = True
                elif op == ">":  # x > c
                    sat[aids[:lo]] = True
                elif op == ">=":
                    sat[aids[:hi]] = True
                else:  # "!="
                    sat[aids[:lo]] = True
                    sat[aids[hi:]] = True
        for aid, atom in self.tests:
            if atom.holds(values):
                sat[aid] = True
        return sat

    def match(self, values: Event) -> list[Any]:
        """Phase 2: count satisfied atoms per clause; a clause matches at its size."""
        sat = np.flatnonzero(self.satisfied(values))
        clauses = self.post[gather(self.ptr[sat], self.ptr[sat + 1])]
        counts = np.bincount(clauses, minlength=len(self.sizes))
        hits = np.unique(self.clause_sub[counts == self.sizes])
        ids = self.ids
        return [ids[i] for i in hits.tolist()]
