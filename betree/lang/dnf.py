"""Normalization of expressions to disjunctive normal form over indexable atoms.

Why: the BE-Tree indexes conjunctions.  A subscription becomes a set of *clauses* of
:mod:`atoms <betree.lang.atoms>` (its expression is true iff some clause has all its atoms
true): negation is pushed down to the atoms (each atomic node's clauses, positive or
negated, come from :func:`~betree.lang.forms.atom_clauses`, or for the library's functions
and ``any`` from :mod:`betree.lang.compound`), conjunctions multiply out,
disjunctions unite.

Each clause is a sorted tuple of distinct atoms; obviously contradictory clauses are dropped
(``a is null`` with an atom that needs ``a``; empty intervals such as ``a > 5 and a < 3``;
an atom with its own negation), ``a is not null`` is dropped beside another atom on ``a``,
bounds on one attribute are merged into at most two, clauses that contain another clause are
dropped (absorption), and duplicates are removed.

Cost: linear in the expression for a conjunction of atoms (the common subscription: a fast
path, about 1 µs per atom); a conjunction of disjunctions multiplies out (``(a or b) and (c
or d)`` gives four clauses), which is why ``max_clauses`` bounds it, at every step; and
the work of the general path is bounded by a constant per node of the expression
(:class:`_Normalizer`): every expression is accepted or rejected in time linear in its
length.  A conjunction whose product has few clauses (rich ad-targeting rules: a ``not``,
an ``or``, a geo radius beside one-clause atoms) is multiplied out directly
(:func:`_small_product`: its clauses compared pairwise once, no index of them); there a
clause of the product whose two halves share no attribute is their union as it is, not
simplified again (:func:`_simplify` is idempotent, and its outputs on disjoint attributes
are simplified group by group: ``tests/betree/lang/test_lang_compile_shortcuts.py``), and
the commonest group simplified, a lower and an upper bound (``between``, ``starts_with``,
a pattern's prefix), is kept in one step (:func:`_two_bounds`).

>>> from betree.lang.parser import parse
>>> to_clauses(parse("not (a = 1)"))
[(OrderAtom('a', (('!=', 1),)),), (TestAtom('a', 'undefined'),)]
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from betree.lang.atoms import (
    Atom,
    Clause,
    Event,
    OrderAtom,
    TestAtom,
    Value,
    atom_key,
)
from betree.lang.compound import any_clauses, special_clauses
from betree.lang.expr import (
    And,
    AnyOf,
    Between,
    BoolAttr,
    Compare,
    Const,
    Contains,
    InList,
    IsEmpty,
    IsNull,
    ListOp,
    Node,
    Not,
    Or,
    Pattern,
    Special,
    StrFunc,
)
from betree.lang.forms import atom_clauses, order_atoms
from pbtree.operators import BY_SYMBOL, ORDER_OPS
from storage.errors import InvalidInput

#: Default bound on the number of clauses of one subscription.
MAX_CLAUSES = 512


def clauses_hold(clauses: Iterable[Iterable[Atom]], event: Event) -> bool:
    """True iff some clause has all its atoms true on the validated ``event``."""
    for clause in clauses:
        for atom in clause:
            if not atom.holds(event):
                break
        else:
            return True
    return False


def clauses_to_expr(clauses: Sequence[Clause]) -> str:
    """The clauses as one expression (``false`` for none, ``true`` for one empty clause)."""
    if not clauses:
        return "false"
    parts = []
    for clause in clauses:
        if not clause:
            return "true"
        parts.append("(" + " and ".join(a.to_expr() for a in clause) + ")")
    return " or ".join(parts)


# -- normalization --------------------------------------------------------------------------------

_DNF = set[frozenset[Atom]]
_TRUE: frozenset[Atom] = frozenset()
#: Node types a conjunction may hold for :func:`_conjunction_clauses` (no "or", no "not").
_CONJUNCT_TYPES = frozenset(
    (
        Const,
        Compare,
        Between,
        InList,
        Contains,
        ListOp,
        IsNull,
        IsEmpty,
        BoolAttr,
        StrFunc,
        Pattern,
        Special,
    )
)


def to_clauses(
    node: Node,
    max_clauses: int = MAX_CLAUSES,
    always_defined: Collection[str] = (),
) -> list[Clause]:
    """The expression as sorted clauses of canonical atoms (see the module docstring).

    ``true`` gives ``[()]`` (one empty clause), ``false`` gives ``[]``.  Raises
    ``InvalidInput`` if the expression has more than ``max_clauses`` clauses in disjunctive
    normal form.  ``node`` should come from ``compile_expr`` (type-checked).

    ``always_defined`` names attributes every valid event defines (``allow_undefined:
    false`` in the schema): on them ``a is null`` is false and ``a is not null`` true, so
    ``not (r = 1)`` gives just ``r <> 1``.

    Cost: a conjunction of atoms (no ``or``, no ``not``: the common subscription) takes a
    fast path, :func:`_conjunction_clauses`, about 1 µs per atom; anything else goes through
    :func:`_dnf_clauses`, several times slower per atom and multiplying out disjunctions.
    """
    if max_clauses >= 1:  # (with max_clauses < 1 even one clause may be too many)
        clauses = _conjunction_clauses(node, always_defined)
        if clauses is not None:
            return clauses
    return _dnf_clauses(node, max_clauses, always_defined)


def _dnf_clauses(node: Node, max_clauses: int, always_defined: Collection[str]) -> list[Clause]:
    """:func:`to_clauses` the general way: clause sets for every node, multiplied out."""
    normalizer = _Normalizer(max_clauses, frozenset(always_defined), _size(node))
    if isinstance(node, And):  # (as normalizer.dnf does it, the product aside)
        parts = [normalizer.dnf(c, True) for c in node.children]
        small = _small_product(parts, normalizer)
        if small is not None:
            return [()] if _TRUE in small else _sorted_clauses(small)
        dnf = normalizer._product(parts)
    else:
        dnf = normalizer.dnf(node, True)
    if _TRUE in dnf:
        return [()]
    return _sorted_clauses(normalizer.minimal(dnf, bounded=False))


def _sorted_clauses(dnf: _DNF) -> list[Clause]:
    """``sorted(tuple(sorted(c)) for c in dnf)``, ordered by the atoms' keys instead: the
    same order (atoms compare by their keys, and a clause's atoms are distinct, as its
    clauses are), without a Python ``__lt__`` and ``__eq__`` call per comparison."""
    clauses = [tuple(sorted(c, key=atom_key)) for c in dnf]
    if len(clauses) > 1:
        clauses.sort(key=_clause_key)
    return clauses


def _clause_key(clause: Clause) -> tuple[tuple[object, ...], ...]:
    return tuple(map(atom_key, clause))


#: (:func:`_small_product`) the most clauses a product of parts may give to be formed directly
SMALL_PRODUCT = 64


def _small_product(parts: list[_DNF], normalizer: _Normalizer) -> _DNF | None:
    """The minimal clauses of the product of ``parts`` (each a node's clauses), as
    :meth:`_Normalizer._product` and the minimal passes after it give them, when the
    product has at most :data:`SMALL_PRODUCT` clauses; else ``None``.

    Why: rich ad-targeting rules (``bexdb gen --profile rich``) join a few atoms of two
    clauses (``not``, ``or``, ``geo_within_radius``, cidr blocks) to one-clause atoms: the
    product is a handful of clauses, which :class:`_Minimal`'s indexes, built three times
    (the product, its minimal pass, :func:`_dnf_clauses`'), cost more than comparing them
    pairwise once.  Same clauses: the same unions simplified in the same way, then the
    clauses that contain no other (what :class:`_Minimal` keeps, in any order of
    insertion).  Same refusals: formed here only when the general path could not raise
    either (the product's clauses within ``max_clauses``, and a bound on the atoms it
    would touch and compare below the normalizer's budgets left); else left to it.
    """
    size, longest = 1, 0
    for p in parts:
        size *= len(p)
        if size > SMALL_PRODUCT:
            return None
        longest += max(map(len, p), default=0)
    if not size or size > normalizer.max_clauses:
        return None  # (a false part: the general path answers at once)
    steps = len(parts) + 2
    work = longest * (1 + 2 * size * steps) + steps * size * (longest + size)
    if work >= normalizer.budget or 2 * steps * size * size * longest >= normalizer.comparing:
        return None
    joined = _join_singles(sorted(parts, key=len))
    if joined is None:
        return set()
    acc = joined[0]
    for p in joined[1:]:
        if not acc:
            break
        new: _DNF = set()
        right = [(c2, {a.attr for a in c2}) for c2 in p]
        for c1 in acc:
            left = {a.attr for a in c1}
            for c2, attrs in right:
                if not (c1 and c2):
                    c: frozenset[Atom] | None = c1 or c2
                elif left.isdisjoint(attrs):
                    c = c1 | c2  # (_simplify's fixed points on other attributes: one too)
                else:
                    c = _simplify(c1 | c2)
                if c is not None:
                    new.add(c)
        acc = _minimal_of(new)
    return _minimal_of(acc)


def _join_singles(
    parts: list[_DNF], spend: Callable[[int], None] | None = None
) -> list[_DNF] | None:
    """``parts`` (none empty, sorted by length) with the one-clause parts conjoined in one
    step (the common case: a conjunction of atoms) into one clause, first; ``None`` if that
    clause cannot hold.  ``spend``: told the atoms joined (the general product's budget)."""
    singles = [next(iter(p)) for p in parts if len(p) == 1]
    if len(singles) < 2:
        return parts
    if spend is not None:
        spend(sum(map(len, singles)))
    merged = _simplify(frozenset().union(*singles))
    if merged is None:
        return None
    return [{merged}, *parts[len(singles) :]]


def _minimal_of(dnf: _DNF) -> _DNF:
    """The clauses of ``dnf`` that contain no other clause of it (pairwise: few clauses)."""
    if len(dnf) < 2:
        return dnf
    return {c for c in dnf if not any(k < c for k in dnf)}


def _size(node: Node) -> int:
    """The atoms and list values of the tree, and its connectives: what its text spells."""
    size = 0
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        size += 1
        if isinstance(n, (And, Or)):
            stack.extend(n.children)
        elif isinstance(n, (Not, AnyOf)):
            stack.append(n.child)
        elif isinstance(n, (InList, ListOp)):
            size += len(n.values)
    return size


def _conjunction_clauses(node: Node, always_defined: Collection[str]) -> list[Clause] | None:
    """:func:`to_clauses` of an atom or a conjunction of atoms and constants, else ``None``.

    A positive atom gives at most one clause, so a conjunction of atoms gives at most one
    clause: the union of its atoms' clauses, simplified, with no product to form.  This is
    what :func:`_dnf_clauses` computes on such a tree (``tests/betree/lang/test_lang_fastpath.py``
    checks that they agree), without its sets of clause sets: the frequent atoms
    (comparisons, ``between``, ``in``) come straight from
    :func:`~betree.lang.forms.order_atoms`, the others go through
    :func:`~betree.lang.forms.atom_clauses` as there, and only when two atoms share an
    attribute does the clause go through :func:`_simplify`.

    Cost: about 1 µs per atom; a comparison whose atom is interned (see
    :func:`~betree.lang.forms.order_atoms`) is found by one dict lookup.
    """
    children = node.children if type(node) is And else (node,)
    if not _CONJUNCT_TYPES.issuperset(map(type, children)):
        return None  # "or", "not" or a nested "and" (never made by the parser)
    atoms: list[Atom] = []
    false = False
    seen: set[str] = set()  # the attributes of the atoms so far
    merge = False  # whether _simplify must see the union (as _Normalizer._product does)
    defined: frozenset[str] | None = None  # always_defined, made a set on first use
    for child in children:
        if type(child) is Const:
            if not child.value:
                false = True
            continue
        a = child.attr  # type: ignore[union-attr]
        if a in seen:
            merge = True  # two atoms on one attribute: bounds to merge, contradictions
        else:
            seen.add(a)
        found = order_atoms(child)
        if found is not None:
            if found:
                atoms.extend(found)
            else:
                false = True
            continue
        # Every other atom, as _Normalizer.dnf does it.
        if type(child) is Special:
            clauses = special_clauses(child, True)
        else:
            clauses = atom_clauses(child, True)
        if defined is None:
            defined = frozenset(always_defined)
        if a in defined:
            clauses = _assume_defined(clauses)
        if not clauses:
            false = True
        elif len(clauses) > 1:
            return None  # a positive atom has one clause at most: cannot happen
        elif len(clauses[0]) > 1:
            clause = _simplify(frozenset(clauses[0]))
            if clause is None:
                false = True
            else:
                atoms.extend(clause)
                merge = True  # as _Normalizer._product would, simplify it again
        else:
            atoms.extend(clauses[0])
    if false:
        return []
    # _Normalizer._product simplifies the union of two or more one-clause parts; it changes
    # nothing unless two atoms share an attribute, or one part has several atoms (a
    # "between" part is "a >= lo and a <= hi" with lo < hi, which it keeps as it is).
    if merge and len(children) > 1:
        merged = _simplify(frozenset(atoms))
        if merged is None:
            return []
        return [tuple(sorted(merged, key=atom_key))]
    return [tuple(sorted(atoms, key=atom_key))]


#: (:class:`_Normalizer`): the atoms one expression may touch, ``WORK_BASE`` plus
#: ``WORK_PER_NODE`` per node of its tree: far more than any expression below
#: ``max_clauses`` needs unless it re-simplifies ever longer clauses (``(a <> 1 or b) and
#: (a <> 2 or b) and ...``).
WORK_PER_NODE = 32
WORK_BASE = 1 << 20
#: A separate budget for comparing clauses with each other (absorption), ``WORK_PER_CLAUSE_PAIR
#: * max_clauses ** 2`` plus ``WORK_PER_NODE`` per node: what multiplying out up to
#: ``max_clauses`` clauses of different lengths costs (``(a0 = 1 or (b0 = 1 and c0 = 1 and
#: d0 = 1)) and ...`` nine times, 512 clauses, compares about 4.1 million atoms, half the
#: budget), so that the limit such an expression meets is the one documented, on the
#: clauses produced.
WORK_PER_CLAUSE_PAIR = 32


class _Normalizer:
    """Clause sets of a tree, bounded: at most ``max_clauses`` minimal clauses at every step
    (each union and product is kept free of absorbed clauses as it grows, so it stops at
    the first clause past the bound), and at most ``WORK_BASE + WORK_PER_NODE * size``
    atoms touched in all, plus at most ``WORK_PER_CLAUSE_PAIR * max_clauses ** 2 +
    WORK_PER_NODE * size`` compared between clauses (:meth:`compare`).

    Why: without the bounds, 20,000 ``a = i`` joined by ``or`` took 10 s to reject (every
    clause compared with every other); now a union stops at clause 513, and no expression
    costs more than a constant per node of its tree (an expression is accepted or rejected
    in time linear in its length).
    """

    __slots__ = ("always_defined", "budget", "comparing", "max_clauses")

    def __init__(self, max_clauses: int, always_defined: frozenset[str], size: int = 0) -> None:
        self.max_clauses = max_clauses
        self.always_defined = always_defined
        self.budget = WORK_BASE + WORK_PER_NODE * size
        self.comparing = WORK_PER_CLAUSE_PAIR * max_clauses**2 + WORK_PER_NODE * size

    def _too_many(self) -> InvalidInput:
        return InvalidInput(
            f"the expression has more than {self.max_clauses} clauses in disjunctive normal form",
            hint="simplify it, or split it into several subscriptions",
        )

    def spend(self, work: int) -> None:
        """Count ``work`` atoms touched; raise once the expression's budget is spent."""
        self.budget -= work
        if self.budget < 0:
            raise self._too_costly()

    def compare(self, work: int) -> None:
        """Count ``work`` atoms compared between clauses; raise once that budget is spent."""
        self.comparing -= work
        if self.comparing < 0:
            raise self._too_costly()

    def _too_costly(self) -> InvalidInput:
        return InvalidInput(
            "the expression is too costly to put in disjunctive normal form "
            "(its clauses are multiplied out and simplified again and again)",
            hint="simplify it, or split it into several subscriptions",
        )

    def dnf(self, node: Node, pos: bool) -> _DNF:
        """Clauses of ``node`` (``pos``) or of ``not node`` (not ``pos``)."""
        if isinstance(node, (And, Or)):
            if isinstance(node, And) == pos:
                return self._product([self.dnf(c, pos) for c in node.children])
            return self._union(node.children, pos)
        if isinstance(node, Not):
            return self.dnf(node.child, not pos)
        if isinstance(node, Const):
            return {_TRUE} if node.value == pos else set()
        if pos and type(node) in _ORDER_NODES:
            # a positive comparison, "between" or "in": its interned atoms (what
            # atom_clauses builds, simplified below; not "between" of one point, whose
            # two atoms atom_clauses gives and the budget counts)
            found = order_atoms(node)
            if found is not None and (len(found) != 1 or type(node) is not Between):
                if not found:
                    return set()
                self.spend(len(found))
                c = _simplify(frozenset(found))
                return set() if c is None else {c}
        if isinstance(node, AnyOf):  # one test atom over the inner expression's clauses
            inner = to_clauses(node.child, self.max_clauses)
            self.spend(sum(map(len, inner)))
            clauses = any_clauses(node.attr, inner, pos)
        elif isinstance(node, Special):
            clauses = special_clauses(node, pos)
        else:
            clauses = atom_clauses(node, pos)
        if node.attr in self.always_defined:
            clauses = _assume_defined(clauses)
        out: _DNF = set()
        for clause in clauses:
            self.spend(len(clause))
            c = _simplify(frozenset(clause))
            if c is not None:
                out.add(c)
        if _TRUE in out:
            return {_TRUE}
        return out

    def _union(self, children: Sequence[Node], pos: bool) -> _DNF:
        """The union of the children's clauses, stopping at the first past the bound.

        The bound holds as the union grows, as it does in a product: constants first (a
        true one ends it), then atoms (short clauses, which absorb the longer ones of the
        connectives after them), so ``x1 or ... or x600 or true`` is true, but a union of
        600 minimal clauses is refused even if a later one would have absorbed them all.
        """
        out = _Minimal(self)
        for child in sorted(children, key=_union_rank):
            part = self.dnf(child, pos)
            if _TRUE in part:
                return {_TRUE}
            for c in part:
                out.add(c)
        return out.clauses

    def _product(self, parts: list[_DNF]) -> _DNF:
        parts.sort(key=len)
        if not parts[0]:
            return set()
        joined = _join_singles(parts, self.spend)
        if joined is None:
            return set()
        acc = joined[0]
        for p in joined[1:]:
            if not acc:
                break
            new = _Minimal(self)
            for c1 in acc:
                for c2 in p:
                    if c1 and c2:
                        self.spend(len(c1) + len(c2))
                        c = _simplify(c1 | c2)
                    else:
                        c = c1 or c2
                    if c is not None:
                        new.add(c)
            acc = new.clauses
        return self.minimal(acc)

    def minimal(self, dnf: _DNF, *, bounded: bool = True) -> _DNF:
        """``dnf`` without the clauses that contain another (absorbed: they add no matches);
        raises past ``max_clauses`` when ``bounded``."""
        if len(dnf) < 2:
            if bounded and len(dnf) > self.max_clauses:
                raise self._too_many()
            return dnf
        out = _Minimal(self, bounded=bounded)
        for c in sorted(dnf, key=len):
            out.add(c)
        return out.clauses


#: (:meth:`_Normalizer.dnf`) the nodes :func:`~betree.lang.forms.order_atoms` may answer
_ORDER_NODES = frozenset((Compare, Between, InList))


def _union_rank(node: Node) -> int:
    return 0 if type(node) is Const else 2 if isinstance(node, (And, Or, Not)) else 1


class _Minimal:
    """A growing set of clauses none of which contains another, at most ``max_clauses``.

    Each clause is listed under every one of its atoms (to find the clauses a new one
    would absorb: those listed under all its atoms, so under its rarest) and under one
    anchor atom (to find a clause that absorbs the new one: its anchor is among the new
    clause's atoms).  Only a shorter clause can absorb the new one and only a longer one be
    absorbed by it, so the clause lengths present are counted and a search no length allows
    is skipped: the clauses of a product of disjunctions of atoms all have one length, and
    ``(x0 = 1 or x1 = 1) and ...`` with nine ``or`` (512 clauses) costs its length per
    clause instead of the clauses listed under its atoms (it was refused as too costly while
    ``[4, 4, 4, 4, 2]`` was accepted).  Cost: per added clause, its length, the distinct
    lengths present, and the clauses listed under its atoms when a length allows absorption,
    each compared once (spent from the normalizer's budget).
    """

    __slots__ = ("anchored", "bounded", "clauses", "lengths", "listed", "normalizer")

    def __init__(self, normalizer: _Normalizer, *, bounded: bool = True) -> None:
        self.normalizer = normalizer
        self.bounded = bounded
        self.clauses: _DNF = set()
        self.listed: dict[Atom, set[frozenset[Atom]]] = {}
        self.anchored: dict[Atom, set[frozenset[Atom]]] = {}
        self.lengths: dict[int, int] = {}  # clause length -> clauses of that length

    def add(self, c: frozenset[Atom]) -> None:
        clauses = self.clauses
        if c in clauses or _TRUE in clauses:
            return
        spend = self.normalizer.spend
        spend(len(c))
        if not c:  # the empty clause (true) absorbs every other
            clauses.clear()
            self.listed.clear()
            self.anchored.clear()
            self.lengths = {0: 1}
            clauses.add(c)
            return
        lengths = self.lengths
        spend(len(lengths))
        size = len(c)
        anchored = self.anchored
        compare = self.normalizer.compare
        if lengths and min(lengths) < size:
            for atom in c:
                for k in anchored.get(atom, ()):
                    compare(len(k))
                    if k <= c:
                        return  # absorbed
        listed = self.listed
        if lengths and max(lengths) > size:
            rarest = min((listed.get(atom, ()) for atom in c), key=len)
            if rarest:
                absorbed = [k for k in rarest if c < k]
                compare(len(rarest) * size)
                for k in absorbed:
                    self._remove(k)
        lengths[size] = lengths.get(size, 0) + 1
        clauses.add(c)
        for atom in c:
            listed.setdefault(atom, set()).add(c)
        anchored.setdefault(next(iter(c)), set()).add(c)
        if self.bounded and len(clauses) > self.normalizer.max_clauses:
            raise self.normalizer._too_many()

    def _remove(self, k: frozenset[Atom]) -> None:
        self.clauses.discard(k)
        left = self.lengths[len(k)] - 1
        if left:
            self.lengths[len(k)] = left
        else:
            del self.lengths[len(k)]
        for atom in k:
            self.listed[atom].discard(k)
        self.anchored[next(iter(k))].discard(k)


def _assume_defined(clauses: list[Clause]) -> list[Clause]:
    """The clauses of an atom on an attribute every event defines: ``a is null`` is false
    (its clause goes), ``a is not null`` is true (it leaves its clause)."""
    out: list[Clause] = []
    for clause in clauses:
        kept: list[Atom] = []
        for atom in clause:
            if isinstance(atom, TestAtom) and atom.test in ("undefined", "defined"):
                if atom.test == "undefined":
                    break
            else:
                kept.append(atom)
        else:
            out.append(tuple(kept))
    return out


# -- clause simplification -------------------------------------------------------------------------


def _simplify(clause: frozenset[Atom]) -> frozenset[Atom] | None:
    """The clause with obvious redundancy removed, or ``None`` if it can never hold."""
    if len(clause) < 2 or len({a.attr for a in clause}) == len(clause):
        return clause  # one atom per attribute: nothing to merge or contradict
    groups: dict[str, list[Atom]] = {}
    for atom in clause:
        groups.setdefault(atom.attr, []).append(atom)
    out: list[Atom] = []
    for atoms in groups.values():
        if len(atoms) == 1:
            out.append(atoms[0])
            continue
        kept = _simplify_attr(atoms)
        if kept is None:
            return None
        out.extend(kept)
    return frozenset(out)


def _simplify_attr(atoms: list[Atom]) -> list[Atom] | None:
    """Two or more distinct atoms on one attribute, all required: simplified, or ``None``."""
    tests: list[TestAtom] = []
    orders: list[OrderAtom] = []
    for atom in atoms:
        if isinstance(atom, TestAtom):
            if atom.test == "undefined":
                return None  # every other atom needs the attribute defined
            if atom.test != "defined":
                tests.append(atom)
        else:
            orders.append(atom)  # type: ignore[arg-type]
    if tests:
        present = set(tests)
        empty = False
        for t in tests:
            if t.defined_negation() in present:
                return None
            empty = empty or t.test == "empty"
        if empty and any(t.test in ("has", "one_of", "all_of", "not_empty") for t in tests):
            return None
    out: list[Atom] = list(tests)
    if orders:
        try:
            merged = _merge_orders(orders)
        except TypeError:  # numbers and strings on one attribute (an unchecked tree)
            merged = orders  # type: ignore[assignment]
        if merged is None:
            return None
        out.extend(merged)
    if not out:  # only "defined" was there (twice cannot happen: atoms are distinct)
        out.append(TestAtom(atoms[0].attr, "defined"))
    return out


def _merge_orders(orders: list[OrderAtom]) -> list[Atom] | None:
    """Intersect the one-interval atoms, drop implied ``!=`` and bounds; ``None`` if empty."""
    if len(orders) == 2:
        kept = _two_bounds(orders[0], orders[1])
        if kept is not None:
            return kept
    attr = orders[0].attr
    lo: Value | None = None
    hi: Value | None = None
    lo_inc = hi_inc = False
    lo_atom = hi_atom = orders[0]  # the atoms that gave lo and hi (reused when unchanged)
    bounded = False
    excluded: list[Value] = []
    unions: list[OrderAtom] = []
    for atom in orders:
        iv = atom.interval()
        if iv is None:
            if len(atom.entries) == 1:  # a single "!="
                excluded.append(atom.entries[0][1])
            else:
                unions.append(atom)
            continue
        bounded = True
        a_lo, a_lo_inc, a_hi, a_hi_inc = iv
        if a_lo is not None and (
            lo is None or a_lo > lo or (a_lo == lo and not a_lo_inc)  # type: ignore[operator]
        ):
            lo, lo_inc, lo_atom = a_lo, a_lo_inc, atom
        if a_hi is not None and (
            hi is None or a_hi < hi or (a_hi == hi and not a_hi_inc)  # type: ignore[operator]
        ):
            hi, hi_inc, hi_atom = a_hi, a_hi_inc, atom
    if not bounded:
        return list(orders)
    if lo is not None and hi is not None:
        if lo > hi or (lo == hi and not (lo_inc and hi_inc)):  # type: ignore[operator]
            return None
        if lo == hi:  # a single point: every other atom is decided by it
            for c in excluded:
                if c == lo:
                    return None
            for u in unions:
                if not u.holds({attr: lo}):
                    return None
            if lo_atom.entries[0][0] == "=":
                return [lo_atom]
            return [OrderAtom(attr, (("=", lo),))]

    def inside(v: Value) -> bool:
        if lo is not None and (v < lo or (v == lo and not lo_inc)):  # type: ignore[operator]
            return False
        return not (hi is not None and (v > hi or (v == hi and not hi_inc)))  # type: ignore[operator]

    # Not a point, so the bounds come from one-sided atoms ("=" would have made a point).
    out: list[Atom] = []
    if lo is not None:
        out.append(lo_atom)
    if hi is not None:
        out.append(hi_atom)
    out.extend(OrderAtom(attr, (("!=", c),)) for c in excluded if inside(c))
    for u in unions:
        if not any(_entry_meets(op, c, inside, lo, lo_inc, hi, hi_inc) for op, c in u.entries):
            return None
        out.append(u)
    return out


#: (:func:`_two_bounds`) the operators that bound a value from below only, from above only
_LOWER = frozenset(op.symbol for op in ORDER_OPS if op.lower and not op.upper)
_UPPER = frozenset(op.symbol for op in ORDER_OPS if op.upper and not op.lower)


def _two_bounds(a: OrderAtom, b: OrderAtom) -> list[Atom] | None:
    """:func:`_merge_orders` of ``[a, b]`` when one is a lower bound and the other an
    upper bound (one entry each: ``>``/``>=`` and ``<``/``<=``) of a non-empty, non-point
    interval: both kept, the lower first, as the general loop keeps them; else ``None``
    (then the general loop answers).  The pair a ``between``, a ``starts_with`` and a
    pattern's prefix give: most of the groups the rich rules' clauses simplify, again in
    every clause of a product.  A number against a string raises ``TypeError`` as there."""
    ea, eb = a.entries, b.entries
    if len(ea) != 1 or len(eb) != 1:
        return None
    (op_a, ca), (op_b, cb) = ea[0], eb[0]
    if op_a in _LOWER and op_b in _UPPER:
        return [a, b] if ca < cb else None  # type: ignore[operator]
    if op_b in _LOWER and op_a in _UPPER:
        return [b, a] if cb < ca else None  # type: ignore[operator]
    return None


def _entry_meets(
    op: str,
    c: Value,
    inside: Callable[[Value], bool],
    lo: Value | None,
    lo_inc: bool,
    hi: Value | None,
    hi_inc: bool,
) -> bool:
    """Whether some value of the interval satisfies ``value op c`` (conservatively True)."""
    o = BY_SYMBOL[op]
    if o.lower and o.upper:  # "="
        return inside(c)
    if o.upper:  # some value below (or at) c: the interval's low end must allow it
        if lo is None:
            return True
        return lo < c or (lo == c and lo_inc and not o.strict)  # type: ignore[operator]
    if o.lower:
        if hi is None:
            return True
        return hi > c or (hi == c and hi_inc and not o.strict)  # type: ignore[operator]
    return True  # "!=": the interval is not a single point here
