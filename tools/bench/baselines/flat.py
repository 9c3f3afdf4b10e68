"""The clauses of the first n subscriptions as one flat list: what OpIndex and PS-Tree index.

The papers index conjunctions; a subscription here is a DNF (a list of clauses), so each
clause is indexed as a conjunction of its own and a subscription matches when any of its
clauses does (OpIndex's DNF rule, sec. 6.1).  A clause's atoms split into

* **order atoms** (``OrderAtom``: ``< <= = != >= >`` against constants, ``in`` lists,
  ``not between``...), grouped by attribute: what the structures index;
* **residual atoms** (``TestAtom``: ``is null``, list operators, ``ends_with``,
  ``contains``, booleans): evaluated directly on each candidate, as the papers' full
  ``Match(event, sub)`` would.

A clause with no atom that needs a defined attribute (``true``, or only ``a is null``)
cannot be reached from any event attribute: such clauses are *free* and evaluated on every
event.

Cost: O(atoms) Python work to build; no copy of the atoms (the lists share them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from betree.lang.atoms import OrderAtom
from tools.bench.baselines.scan import Compiled

Event = Mapping[str, object]
Check = Callable[[Event], bool]


def gather(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indexes ``concat(arange(s, e) for s, e in zip(starts, ends))`` without a loop."""
    lens = ends - starts
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)


class Flat:
    """Clauses of the first ``n`` subscriptions, numbered 0..; see the module docstring.

    ``orders[c]`` maps each attribute to the clause's order atoms on it (a conjunction);
    ``residual[c]`` holds the ``holds`` of its other atoms; ``clause_sub[c]`` its
    subscription; ``free`` the clauses evaluated on every event.
    """

    def __init__(self, compiled: Compiled, n: int | None = None) -> None:
        n = len(compiled.ids) if n is None else n
        self.ids = compiled.ids[:n]
        self.orders: list[dict[str, tuple[OrderAtom, ...]]] = []
        self.residual: list[tuple[Check, ...]] = []
        self.anchors: list[tuple[str, ...]] = []  # attributes the clause needs defined
        subs: list[int] = []
        free: list[int] = []
        for s, clauses in enumerate(compiled.clauses[:n]):
            for clause in clauses:
                per_attr: dict[str, list[OrderAtom]] = {}
                rest: list[Check] = []
                need: set[str] = set()
                for atom in clause:
                    if isinstance(atom, OrderAtom):
                        per_attr.setdefault(atom.attr, []).append(atom)
                    else:
                        rest.append(atom.holds)
                    if atom.requires_defined:
                        need.add(atom.attr)
                if not need:
                    free.append(len(subs))
                self.orders.append({a: tuple(v) for a, v in per_attr.items()})
                self.residual.append(tuple(rest))
                self.anchors.append(tuple(sorted(need)))
                subs.append(s)
        self.clause_sub = np.array(subs, dtype=np.int64)
        self.free = free

    def __len__(self) -> int:
        return len(self.clause_sub)

    def drop_build_state(self) -> None:
        """Forget the per-clause atom maps once an index is built (matching never reads them:
        only ``residual``, ``free`` and ``clause_sub``), so memory figures are the index's."""
        self.orders = []
        self.anchors = []

    def attr_ids(self) -> dict[str, int]:
        """Every attribute of an order atom, numbered in name order."""
        names = sorted({a for per in self.orders for a in per})
        return {a: i for i, a in enumerate(names)}

    @staticmethod
    def verify(
        cands: Iterable[int], values: Event, checks: Sequence[tuple[Check, ...]]
    ) -> list[int]:
        """The candidate clauses whose ``checks`` all hold.

        Cost: one ``holds`` call per atom checked (~0.3 µs), in Python.
        """
        out = []
        for c in cands:
            for holds in checks[c]:
                if not holds(values):
                    break
            else:
                out.append(c)
        return out

    def subs_of(self, clauses: Iterable[int], values: Event) -> list[Any]:
        """The ids of the subscriptions of ``clauses`` and of the free clauses that hold."""
        hits = set(self.clause_sub[np.fromiter(clauses, dtype=np.int64)].tolist())
        for c in self.verify(self.free, values, self.residual):
            hits.add(int(self.clause_sub[c]))
        ids = self.ids
        return [ids[i] for i in sorted(hits)]
