"""Same-element matching: the ``any PATH (EXPR)`` atoms of one array path, indexed over the
elements' values (README: Language, same-element matching).

Why: an ``any`` atom holds when one element of the event's array satisfies its whole inner
expression.  Testing every ``any`` atom on every element costs atoms x elements; instead the
inner expressions are compiled once per snapshot (when :class:`betree.matching.direct.DirectAtoms`
is built) to their clauses over the elements' paths (:meth:`TestAtom.inner`), and each
distinct inner clause is posted under one of its atoms that an element's value finds by a
dict lookup: an equality or ``in`` atom (``sku = "a1"``, ``sku in ("a1", "b2")``), posted
under (path, value) for each of its constants.  A clause with no such atom (``price > 10``)
is *loose*: tested on every element.

Per event: for each element, one dict lookup per value it holds (path, value) gives the
clauses that may hold there, plus the loose ones; each is tested exactly (all its atoms'
``holds`` on the element) unless every atom it serves is already known to hold.  ``any``
atoms hold when one of their clauses held on some element; the ``not any`` ones hold but
those whose positive form did (the array defined); an empty array holds no ``any``.

Alternatives rejected: one inverted index per inner atom kind (the PB+trees' order search
for every element) would pay a tree search per element value for clauses that an equality
already prunes, in the common rule shape (a product id, then a bound); testing every atom
per element is what this replaces.

Cost: built in time linear in the inner atoms; per event, per element, one lookup per value
plus the exact tests of the candidate clauses (and the loose clauses): not in proportion to
the ``any`` atoms when their clauses carry an equality.  Measured (:func:`betree.matching.direct.
counting`): 10,000 atoms ``any items (sku = "kI" and price > N)`` over 2,000 skus, events
of 5 items: 24 exact clause tests an event, where testing every atom would be 10,000 atoms
on up to 5 elements each.
"""

from __future__ import annotations

from collections.abc import Mapping

from betree.lang.atoms import Atom, Clause, OrderAtom, TestAtom
from betree.matching.directkinds import Complement, Found, ids

Event = Mapping[str, object]


def _key_atom(clause: Clause) -> OrderAtom | None:
    """The clause's atom to post it under: an all-equality order atom with the fewest
    constants (the most selective), or ``None``."""
    best: OrderAtom | None = None
    for atom in clause:
        if (
            isinstance(atom, OrderAtom)
            and all(op == "=" for op, _ in atom.entries)
            and (best is None or len(atom.entries) < len(best.entries))
        ):
            best = atom
    return best


class ElementIndex:
    """The ``any``/``not_any`` atoms of one array path: inner clauses posted by (path,
    value) of one equality atom each, or loose."""

    __slots__ = ("atoms", "clauses", "default", "loose", "posted", "serves")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        self.atoms: list[tuple[int, Atom]] = list(atoms)
        index: dict[Clause, int] = {}
        #: the distinct inner clauses, and per clause the atoms it serves (id, negated)
        self.clauses: list[Clause] = []
        self.serves: list[list[tuple[int, bool]]] = []
        self.default = Complement([aid for aid, atom in atoms if atom.test == "not_any"])
        for aid, atom in atoms:
            for clause in atom.inner():
                k = index.get(clause)
                if k is None:
                    k = index[clause] = len(self.clauses)
                    self.clauses.append(clause)
                    self.serves.append([])
                self.serves[k].append((aid, atom.test == "not_any"))
        #: path inside an element -> value -> the clauses posted there
        self.posted: dict[str, dict[object, list[int]]] = {}
        self.loose: list[int] = []
        for k, clause in enumerate(self.clauses):
            key = _key_atom(clause)
            if key is None:
                self.loose.append(k)
                continue
            by_value = self.posted.setdefault(key.attr, {})
            for _, c in key.entries:
                by_value.setdefault(c, []).append(k)

    def found(self, value: object, event: Event) -> Found:
        """The positive atoms that hold and the negated ones that fail, given the event's
        elements ``value`` (a tuple of dicts)."""
        where = self.default.where
        if not isinstance(value, tuple):
            truths = [(aid, atom.holds(event)) for aid, atom in self.atoms]
            return (
                ids([aid for aid, holds in truths if holds and aid not in where]),
                ids([aid for aid, holds in truths if not holds and aid in where]),
                len(self.atoms),
            )
        held: set[int] = set()  # positive atoms, and negated ones whose positive form held
        tests = 0
        posted, clauses, serves, loose = self.posted, self.clauses, self.serves, self.loose
        done: set[int] = set()  # clauses that held (on some element): never tested again
        for element in value:
            candidates: list[int] = list(loose)
            for path, v in element.items():
                by_value = posted.get(path)
                if by_value is not None:
                    found = by_value.get(v)
                    if found is not None:
                        candidates += found
            for k in candidates:
                if k in done:
                    continue
                if all(aid in held for aid, _ in serves[k]):
                    continue  # every atom it serves already holds
                tests += 1
                if all(atom.holds(element) for atom in clauses[k]):
                    done.add(k)
                    held.update(aid for aid, _ in serves[k])
        negated_failed = [aid for aid in held if aid in where]
        positive = [aid for aid in held if aid not in where]
        return ids(positive), ids(negated_failed), tests
