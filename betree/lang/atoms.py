"""Atoms: the predicates on one attribute that clauses are made of (the atoms of each form
of the language are :mod:`betree.lang.forms`').

Why: the BE-Tree indexes conjunctions of atoms.  Each atom either goes to the attribute's
PB+tree (an :class:`OrderAtom`: value order or equality against constants) or is tested
directly per event (a :class:`TestAtom`); :mod:`betree.lang.dnf` builds the clauses from
them, the index stores them (:meth:`Atom.as_tuple`) and tests them (``holds``).

Negation follows the truth table (README: Language), where every atom but ``a is null`` is false
on an undefined attribute: ``not P`` for such an atom is ``a is null OR (a defined and
not-P)``, so ``not (a = 1)`` gives the two clauses ``a is null`` and ``a <> 1`` (see
:func:`negated_clauses` and :func:`betree.lang.forms.atom_clauses`).  ``a is null``
(``TestAtom(a, "undefined")``) is the only atom true on an undefined attribute.

Atoms are canonical, hashable and ordered, so equal meaning gives equal atoms in the common
cases (``a = 1`` and ``a = 1.0``; list arguments sorted and deduplicated; ``a one of (1)``
is ``1 in a``; ``ends_with(a, "")`` is ``a is not null``) and the index can intern them.

Cost: one-entry order atoms, the most frequent, are interned (:func:`order_atom`): one
dict lookup when found, a fifth of the constructor's time; each atom's ``holds`` (made on
first use) is one dict lookup and one comparison (list atoms: a scan of the event's list).

>>> OrderAtom("a", [("=", 1)]).negate()
[(TestAtom('a', 'undefined'),), (OrderAtom('a', (('!=', 1),)),)]
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from betree.lang.bounded import forget_older_half
from betree.lang.lexicon import INT64_MAX, INT64_MIN, literal
from betree.lang.testkinds import KINDS, RANK
from pbtree.operators import BY_SYMBOL, OPS, bounds

#: A constant of an order atom: a number or a string (never a bool).
Value = int | float | str
#: (lo, lo_inclusive, hi, hi_inclusive); ``None`` for an unbounded side.
Interval = tuple[Value | None, bool, Value | None, bool]
Event = Mapping[str, object]
Clause = tuple["Atom", ...]

_OP_RANK = {op: i for i, op in enumerate(OPS)}

_MAX_CHAR = "\U0010ffff"


def canonical(c: object) -> Value:
    """A constant in canonical form: integral floats in int64 range become ints."""
    if type(c) is int or type(c) is str:  # the common case, kept cheap
        return c
    if type(c) is float:
        if c.is_integer() and INT64_MIN <= c <= INT64_MAX:
            return int(c)
        return c
    if isinstance(c, bool) or not isinstance(c, (int, float, str)):
        raise ValueError(f"not a number or string constant: {c!r}")
    return c


def _ckey(c: Value) -> tuple[int, Value]:
    """Sort key that orders numbers before strings (never compares a number with a string)."""
    return (1, c) if isinstance(c, str) else (0, c)


def string_successor(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``.

    ``None`` when there is none (``prefix`` is empty or all U+10FFFF).  Surrogate code
    points are skipped (they never occur in a valid string).
    """
    p = prefix.rstrip(_MAX_CHAR)
    if not p:
        return None
    nxt = ord(p[-1]) + 1
    if nxt == 0xD800:
        nxt = 0xE000
    return p[:-1] + chr(nxt)


class Atom:
    """An atomic predicate on one attribute; see :class:`OrderAtom` and :class:`TestAtom`.

    ``holds(event)`` evaluates it on a validated event; ``requires_defined`` is False only
    for ``TestAtom(a, "undefined")``.  Atoms compare and hash by a canonical key.
    """

    __slots__ = ("_hash", "_key", "attr", "holds")

    attr: str
    #: ``holds(event) -> bool`` on a validated event: a closure made on first access (most
    #: atoms compiled by a bulk load are never evaluated in Python), then a plain slot.
    holds: Callable[[Event], bool]
    _key: tuple[object, ...]
    _hash: int

    if not TYPE_CHECKING:  # hidden from mypy, which would accept any attribute name

        def __getattr__(self, name: str) -> object:
            # Reached only when normal lookup fails, i.e. for "holds" before its first use.
            if name != "holds":
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}",
                    name=name,
                    obj=self,
                )
            holds = self._make_holds()
            self.holds = holds
            return holds

    def _make_holds(self) -> Callable[[Event], bool]:
        raise NotImplementedError

    @property
    def requires_defined(self) -> bool:
        """False only for ``TestAtom(a, "undefined")``, the one atom true on undefined."""
        return True

    def _set_key(self, key: tuple[object, ...]) -> None:
        self._key = key
        self._hash = hash(key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Atom) -> bool:
        return self._key < other._key

    def __le__(self, other: Atom) -> bool:
        return self._key <= other._key

    def __gt__(self, other: Atom) -> bool:
        return self._key > other._key

    def __ge__(self, other: Atom) -> bool:
        return self._key >= other._key

    def negate(self) -> list[Clause]:
        """``not self`` under the truth table, as clauses."""
        raise NotImplementedError

    def to_expr(self) -> str:
        """The atom in the expression language (parsing and normalizing it gives it back)."""
        raise NotImplementedError

    def as_tuple(self) -> tuple[object, ...]:
        """A plain, msgpack-able form; :func:`atom_from_tuple` inverts it."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_expr()


class OrderAtom(Atom):
    """True iff ``attr`` is defined and ANY ``(op, const)`` entry holds (``value op const``).

    Entries go to the attribute's PB+tree under one predicate id.  Constants are numbers
    (compared exactly, int with float) or strings (by code point); entries are sorted and
    deduplicated, integral floats stored as ints.
    """

    __slots__ = ("entries",)

    entries: tuple[tuple[str, Value], ...]

    def __init__(self, attr: str, entries: Iterable[tuple[str, object]]) -> None:
        items = entries if type(entries) is tuple else tuple(entries)
        if len(items) == 1:  # the common case, kept cheap
            op, c = items[0]
            rank = _OP_RANK.get(op)
            if rank is None:
                raise ValueError(f"unknown order operator {op!r}")
            c = canonical(c)
            es: tuple[tuple[str, Value], ...] = ((op, c),)
            key: tuple[object, ...] = ((_ckey(c), rank),)
        else:
            canon = set()
            for op, c in items:
                if op not in _OP_RANK:
                    raise ValueError(f"unknown order operator {op!r}")
                canon.add((op, canonical(c)))
            if not canon:
                raise ValueError("an OrderAtom needs at least one entry")
            if len({isinstance(c, str) for _, c in canon}) > 1:
                raise ValueError("an OrderAtom's constants are all numbers or all strings")
            # Sort on (constant key, operator rank): distinct entries never tie on it.
            ranked = sorted([(_ckey(c), _OP_RANK[op], op, c) for op, c in canon])
            es = tuple([(op, c) for _, _, op, c in ranked])
            key = tuple([(ck, rank) for ck, rank, _, _ in ranked])
        self.attr = attr
        self.entries = es
        key = (attr, 0, key)
        self._key = key
        self._hash = hash(key)

    def _make_holds(self) -> Callable[[Event], bool]:
        return _order_holds(self.attr, self.entries)

    def interval(self) -> Interval | None:
        """``(lo, lo_inclusive, hi, hi_inclusive)`` for a one-entry atom other than ``!=``
        (``None`` sides are unbounded), else ``None``."""
        if len(self.entries) != 1:
            return None
        op, c = self.entries[0]
        return bounds(op, c)

    def negate(self) -> list[Clause]:
        """``a is null`` OR the conjunction of the negated entries."""
        a = self.attr
        negs = tuple(sorted(OrderAtom(a, ((BY_SYMBOL[op].negation, c),)) for op, c in self.entries))
        return [(TestAtom(self.attr, "undefined"),), negs]

    def to_expr(self) -> str:
        a = self.attr
        es = self.entries
        if len(es) == 1:
            op, c = es[0]
            return f"{a} {op} {literal(c)}"
        if all(op == "=" for op, _ in es):
            return f"{a} in ({', '.join(literal(c) for _, c in es)})"
        if len(es) == 2:
            (op1, c1), (op2, c2) = es
            if op1 == "<" and op2 == ">" and c1 < c2:  # type: ignore[operator]
                return f"{a} not between {literal(c1)} and {literal(c2)}"
            if op1 == "<" and op2 == ">=" and isinstance(c1, str) and string_successor(c1) == c2:
                return f"({a} is not null and not starts_with({a}, {literal(c1)}))"
        return "(" + " or ".join(f"{a} {op} {literal(c)}" for op, c in es) + ")"

    def as_tuple(self) -> tuple[object, ...]:
        return ("order", self.attr, self.entries)

    def __repr__(self) -> str:
        return f"OrderAtom({self.attr!r}, {self.entries!r})"


_new_atom = object.__new__


#: One-entry order atoms with an int or string constant, by ``(attr, op, constant)``;
#: when full, the older half is forgotten.  (Floats are left out: an int out of int64
#: range equals a float.)  Why that many: a workload of few repeated predicates
#: (``bexdb gen --profile wide``) uses ~200K distinct atoms per 100K subscriptions, and an
#: atom forgotten while the compiled pieces holding it live is a second object for the
#: same atom, found in the dicts downstream by ``__eq__`` only.  Memory: ~100 bytes an
#: entry beyond the atoms, most of which the caller's caches hold anyway.
_INTERNED: dict[tuple[str, str, Value], OrderAtom] = {}
_INTERNED_MAX = 1 << 18
#: the interned one-entry order atom of ``(attr, op, constant)``, or None (a fast path)
interned = _INTERNED.get


def forget_interned() -> None:
    """Empty the intern table (:func:`order_atom`): for a bulk loader done compiling,
    whose atoms would otherwise stay alive in it (up to ``_INTERNED_MAX`` of them)."""
    _INTERNED.clear()


def order_atom(attr: str, op: str, c: Value) -> OrderAtom:
    """``OrderAtom(attr, ((op, c),))`` for a known ``op`` and a *canonical* ``c`` (see
    :func:`canonical`), without the checks.

    Interned for int and string constants, so that a bulk load's many equal atoms are
    one object: each is built once, and the dicts keyed by atoms downstream (grid spans,
    store keys) find it by identity, without calling :meth:`Atom.__eq__`.  Cost: ~0.1 µs
    when interned, else ~0.4 µs (a fifth, and two thirds, of the constructor's).
    """
    if type(c) is not float:
        atom = _INTERNED.get((attr, op, c))
        if atom is None:
            if len(_INTERNED) >= _INTERNED_MAX:
                forget_older_half(_INTERNED)
            atom = _INTERNED[(attr, op, c)] = _neworder_atom(attr, op, c)
        return atom
    return _neworder_atom(attr, op, c)


def _neworder_atom(attr: str, op: str, c: Value) -> OrderAtom:
    atom: OrderAtom = _new_atom(OrderAtom)
    atom.attr = attr
    atom.entries = ((op, c),)
    key = (attr, 0, (((1, c) if type(c) is str else (0, c), _OP_RANK[op]),))
    atom._key = key
    atom._hash = hash(key)
    return atom


def equal_any(attr: str, values: set[Value]) -> OrderAtom:
    """``OrderAtom(attr, [("=", v) for v in values])`` for a non-empty set of *canonical*
    values: ``attr in (…)``.  Cheap when they are all numbers or all strings (else the
    constructor raises)."""
    if len(values) == 1:
        (c,) = values
        return order_atom(attr, "=", c)
    types = set(map(type, values))
    if types <= _NUMBER_TYPE_SET:
        tag = 0
    elif types == _STR_TYPE_SET:
        tag = 1
    else:
        return OrderAtom(attr, [("=", v) for v in values])
    consts = sorted(values)  # (numbers by value, strings by code point: as _ckey orders them)
    atom: OrderAtom = _new_atom(OrderAtom)
    atom.attr = attr
    atom.entries = tuple([("=", c) for c in consts])
    key = (attr, 0, tuple([((tag, c), _EQ_RANK) for c in consts]))
    atom._key = key
    atom._hash = hash(key)
    return atom


_NUMBER_TYPE_SET = frozenset((int, float))
_STR_TYPE_SET = frozenset((str,))
_EQ_RANK = _OP_RANK["="]


def _order_holds(attr: str, entries: tuple[tuple[str, Value], ...]) -> Callable[[Event], bool]:
    if len(entries) == 1:
        op, c = entries[0]
        fn = BY_SYMBOL[op].holds

        def holds_one(event: Event) -> bool:
            v = event.get(attr)
            return v is not None and fn(v, c)

        return holds_one
    if all(op == "=" for op, _ in entries):
        # Python's numeric hash agrees with exact equality, so set membership is exact.
        consts = frozenset(c for _, c in entries)

        def holds_in(event: Event) -> bool:
            v = event.get(attr)
            return v is not None and v in consts

        return holds_in
    pairs = tuple((BY_SYMBOL[op].holds, c) for op, c in entries)

    def holds_any(event: Event) -> bool:
        v = event.get(attr)
        return v is not None and any(fn(v, c) for fn, c in pairs)

    return holds_any


class TestAtom(Atom):
    """A test evaluated directly per event; ``test`` names a kind of :mod:`betree.lang.testkinds`.

    ``undefined`` (``a is null``) is the only atom true on an undefined attribute; every
    other test requires ``attr`` defined.  ``defined``, ``bool_true``, ``bool_false``
    (defined and false), ``empty``/``not_empty`` (a defined list), ``has``/``lacks`` (the
    list contains / lacks ``arg``), ``one_of``/``none_of``/``all_of``/``not_all_of`` (``arg``
    a sorted tuple of two or more values), ``ends_with``/``not_ends_with``/
    ``contains``/``not_contains`` (``arg`` a non-empty string).  Arguments must be canonical:
    use :func:`make_test`, which rewrites the degenerate forms.
    """

    __test__ = False  # not a pytest test class
    __slots__ = ("arg", "test")

    test: str
    arg: object

    def __init__(self, attr: str, test: str, arg: object = None) -> None:
        row = KINDS.get(test)
        if row is None:
            raise ValueError(f"unknown test {test!r}")
        kind = row.arg
        if kind == "none":
            if arg is not None:
                raise ValueError(f"test {test!r} takes no argument")
            argkey: tuple[object, ...] = ()
        elif kind == "value":
            if isinstance(arg, bool) or not isinstance(arg, (int, float, str)):
                raise ValueError(f"test {test!r} takes a number or a string")
            argkey = (_ckey(arg),)
        elif kind == "list":
            if not isinstance(arg, tuple) or any(
                isinstance(v, bool) or not isinstance(v, (int, float, str)) for v in arg
            ):
                raise ValueError(f"test {test!r} takes a tuple of numbers or strings")
            arg = tuple(sorted(set(arg), key=_ckey))
            if len(arg) < 2:
                raise ValueError(f"non-canonical {test!r} of {arg!r}: use make_test()")
            argkey = tuple(_ckey(v) for v in arg)
        elif kind == "pattern":
            if not isinstance(arg, str):
                raise ValueError(f"test {test!r} takes a pattern string")
            argkey = ((1, arg),)
        elif kind == "special":
            if not isinstance(arg, tuple):
                raise ValueError(f"test {test!r} takes a tuple of constants")
            argkey = (2, repr(arg))
        elif kind == "elements":
            if not isinstance(arg, (tuple, list)):
                raise ValueError(f"test {test!r} takes a tuple of clauses")
            arg = _deep_tuple(arg)  # (msgpack gives lists back)
            argkey = (3, repr(arg))
        else:
            if not isinstance(arg, str) or not arg:
                raise ValueError(f"test {test!r} takes a non-empty string: use make_test()")
            argkey = ((1, arg),)
        self.attr = attr
        self.test = test
        self.arg = arg
        self._set_key((attr, 1, RANK[test], argkey))

    def _make_holds(self) -> Callable[[Event], bool]:
        return KINDS[self.test].holds(self.attr, self._held_arg())

    def _held_arg(self) -> object:
        """The argument the kind's truth function and text take: for ``any``, atoms."""
        return self.inner() if KINDS[self.test].arg == "elements" else self.arg

    @property
    def requires_defined(self) -> bool:
        return self.test != "undefined"

    def inner(self) -> list[Clause]:
        """An ``any``/``not_any`` test's inner clauses, as atoms over an element's paths."""
        return [tuple(atom_from_tuple(t) for t in clause) for clause in self.arg]  # type: ignore[attr-defined]

    def defined_negation(self) -> TestAtom | None:
        """The test that holds exactly where this one fails on a defined value (``None``:
        nowhere; for ``undefined``, ``defined``)."""
        neg = KINDS[self.test].negation
        if neg is None:
            return None
        if KINDS[neg].arg != KINDS[self.test].arg:
            return TestAtom(self.attr, neg, self.arg)
        # The argument is canonical already and keyed as the negation keys it: the
        # constructor's sort and key of every value not done again (rich rules' in-lists:
        # ~1 µs a value; each simplified clause asks this of each test on an attribute).
        atom = TestAtom.__new__(TestAtom)
        atom.attr, atom.test, atom.arg = self.attr, neg, self.arg
        atom._set_key((self.attr, 1, RANK[neg], self._key[3]))
        return atom

    def negate(self) -> list[Clause]:
        if self.test == "undefined":
            return [(TestAtom(self.attr, "defined"),)]
        return negated_clauses(self.attr, self.defined_negation())

    def to_expr(self) -> str:
        text = KINDS[self.test].text
        if text is not None:
            return text(self.attr, self._held_arg())
        pos = self.defined_negation()
        if pos is None:  # cannot happen: a kind without text has a negation (testkinds)
            raise ValueError(self.test)
        return f"({self.attr} is not null and not ({pos.to_expr()}))"

    def as_tuple(self) -> tuple[object, ...]:
        return ("test", self.attr, self.test, self.arg)

    def __repr__(self) -> str:
        if self.arg is None:
            return f"TestAtom({self.attr!r}, {self.test!r})"
        return f"TestAtom({self.attr!r}, {self.test!r}, {self.arg!r})"


def _deep_tuple(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_deep_tuple(v) for v in value)
    return value


def make_test(attr: str, test: str, arg: object = None) -> TestAtom | None:
    """The canonical atom for a test, rewriting degenerate arguments; ``None`` if the test
    holds on no event at all.

    ``one_of ()`` and ``not_all_of ()`` hold nowhere; ``none_of ()``, ``all_of ()``,
    ``ends_with ""`` and ``contains ""`` are ``defined``; ``not_ends_with ""`` and
    ``not_contains ""`` hold nowhere; a one-value ``one_of``/``all_of`` is ``has`` and a
    one-value ``none_of``/``not_all_of`` is ``lacks``.
    """
    row = KINDS.get(test)
    kind = row.arg if row is not None else None
    if kind == "list":
        distinct = set(arg)  # type: ignore[call-overload]
        types = set(map(type, distinct))
        plain = types in (_STR_TYPE_SET, _INT_TYPE_SET)
        # (all strings, or all ints: sorted as _ckey sorts them, each keyed as it keys it)
        values = tuple(sorted(distinct) if plain else sorted(distinct, key=_ckey))
        if not values:
            if test in ("one_of", "not_all_of"):
                return None
            return TestAtom(attr, "defined")
        if len(values) == 1:
            single = "has" if test in ("one_of", "all_of") else "lacks"
            return TestAtom(attr, single, values[0])
        if plain:
            return _list_test(attr, test, values, 1 if types == _STR_TYPE_SET else 0)
        return TestAtom(attr, test, values)
    if kind == "string" and arg == "":
        if test.startswith("not_"):
            return None
        return TestAtom(attr, "defined")
    return TestAtom(attr, test, arg)


_INT_TYPE_SET = frozenset((int,))


def _list_test(attr: str, test: str, values: tuple[Value, ...], tag: int) -> TestAtom:
    """``TestAtom(attr, test, values)`` of a list test (:func:`make_test`) for two or more
    sorted distinct values, all strings (``tag`` 1) or all ints (0), without the
    constructor's checks and its second sort: rich rules' ``one of`` lists of a dozen
    names (~1 µs a value there)."""
    atom: TestAtom = _new_atom(TestAtom)
    atom.attr, atom.test, atom.arg = attr, test, values
    atom._set_key((attr, 1, RANK[test], tuple([(tag, v) for v in values])))
    return atom


def atom_from_tuple(t: Sequence[object]) -> Atom:
    """Rebuild an atom from :meth:`Atom.as_tuple` (lists accepted for tuples).

    Cost: ~0.5 µs for a one-entry order atom with an int or string constant (interned:
    :func:`order_atom`), else the constructor's ~3 µs and more.
    """
    if t[0] == "order":
        attr, entries = t[1], t[2]
        if type(attr) is str and len(entries) == 1:  # type: ignore[arg-type]
            op, c = entries[0]  # type: ignore[index]
            if (type(c) is int or type(c) is str) and op in _OP_RANK:
                return order_atom(attr, op, c)  # what the constructor would build
        if type(attr) is str and all(op == "=" for op, _ in entries):  # type: ignore[attr-defined]
            consts = {c for _, c in entries}  # type: ignore[attr-defined]
            kinds = set(map(type, consts))
            if len(consts) == len(entries) and (kinds == {int} or kinds == {str}):  # type: ignore[arg-type]
                return equal_any(attr, consts)  # an in list, as the constructor builds it
        return OrderAtom(str(attr), [(str(op), c) for op, c in entries])  # type: ignore[attr-defined]
    if t[0] == "test":
        arg = t[3]
        if isinstance(arg, list):
            arg = tuple(arg)
        return TestAtom(str(t[1]), str(t[2]), arg)
    raise ValueError(f"not an atom tuple: {t!r}")


def stored_atom(t: Sequence[object], keys: dict[object, tuple[int, object]]) -> Atom:
    """:func:`atom_from_tuple` for a stored atom (a direct record's), a test of no argument,
    a value or a list made without the constructor's canonicalizing when its stored form is
    already canonical (what a canonical atom stores: checked, a list strictly increasing by
    :func:`_ckey`, of two or more ints or strings); its values' keys are shared through
    ``keys`` (one tuple a distinct value, not one a value of each atom: ~56 bytes saved a
    value; an int key stands for the equal float's).  Anything else goes through
    :func:`atom_from_tuple`.

    Why: a reopened store's first match decodes every direct atom
    (:class:`betree.matching.snapshot.Records`); rich rules' are mostly lists of strings
    (``one_of``, ``none_of``, ``all_of``: 2-15 values), whose constructor's checks, sort
    and keys cost ~13 µs an atom; here ~40% less (docs/bench/match-rich-sharded/README.md,
    live41)."""
    if t[0] != "test" or type(t[1]) is not str:
        return atom_from_tuple(t)
    test, arg = str(t[2]), t[3]
    row = KINDS.get(test)
    kind = row.arg if row is not None else None
    argkey: tuple[object, ...]
    if kind == "list" and type(arg) is list and len(arg) > 1:
        try:
            argkey = tuple([keys[v] for v in arg])
        except (KeyError, TypeError):  # (a value not seen yet, or not hashable)
            for v in arg:
                if type(v) is not str and type(v) is not int:
                    return atom_from_tuple(t)  # (floats, and anything else: rare)
                if v not in keys:
                    keys[v] = (1, v) if type(v) is str else (0, v)
            argkey = tuple([keys[v] for v in arg])
        if sorted(argkey) != list(argkey) or len(set(arg)) < len(arg):  # type: ignore[type-var]
            return atom_from_tuple(t)  # (not canonical: the constructor sorts it)
        arg = tuple(arg)
    elif kind == "value" and type(arg) in (int, float, str):
        argkey = ((1, arg) if type(arg) is str else (0, arg),)
    elif kind == "none" and arg is None:
        argkey = ()
    else:
        return atom_from_tuple(t)
    atom: TestAtom = _new_atom(TestAtom)
    atom.attr, atom.test, atom.arg = t[1], test, arg  # type: ignore[assignment]
    atom._set_key((t[1], 1, RANK[test], argkey))
    return atom


def negated_clauses(attr: str, neg: Atom | None) -> list[Clause]:
    """``a is null OR neg`` (``neg`` on a defined value; ``None``: never)."""
    undefined = TestAtom(attr, "undefined")
    if neg is None:
        return [(undefined,)]
    if isinstance(neg, TestAtom) and neg.test == "defined":
        return [()]  # a is null or a is not null
    return [(undefined,), (neg,)]


#: The sort key of an atom: ``sorted(atoms, key=atom_key)`` orders as ``sorted(atoms)``
#: without a Python-level ``__lt__`` call per comparison.
atom_key: Callable[[Atom], tuple[object, ...]] = operator.attrgetter("_key")
