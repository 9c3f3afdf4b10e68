"""Normalization of expressions to disjunctive normal form over indexable atoms.

Why: the BE-Tree indexes conjunctions.  A subscription becomes a set of *clauses* (its
expression is true iff some clause has all its atoms true), and each atom either goes to the
attribute's PB+tree (an :class:`OrderAtom`: value order or equality against constants) or is
tested directly per event (a :class:`TestAtom`).

Negation is pushed to the atoms *under SPEC section 4's truth table*, where every atom but
``a is null`` is false on an undefined attribute.  So ``not P`` for such an atom is
``a is null OR (a defined and not-P)``: ``not (a = 1)`` becomes the two clauses
``a is null`` and ``a <> 1``, never just ``a <> 1``.  ``a is null`` (``TestAtom(a,
"undefined")``) is the only atom true on an undefined attribute.

Atoms are canonical, hashable and ordered, so equal meaning gives equal atoms in the common
cases (``a = 1`` and ``a = 1.0``; list arguments sorted and deduplicated; ``a one of (1)`` is
``1 in a``; ``ends_with(a, "")`` is ``a is not null``) and the index can intern them.  Each
clause is a sorted tuple of distinct atoms; obviously contradictory clauses are dropped
(``a is null`` with an atom that needs ``a``; empty intervals such as ``a > 5 and a < 3``;
an atom with its own negation), ``a is not null`` is dropped beside another atom on ``a``,
bounds on one attribute are merged into at most two, clauses that contain another clause are
dropped (absorption), and duplicates are removed.

Cost: linear in the expression for a conjunction of atoms (the common subscription: a fast
path, about 1 µs per atom); a conjunction of disjunctions multiplies out (``(a or b) and (c
or d)`` gives four clauses), which is why ``max_clauses`` bounds it, at every step; and
the work of the general path is bounded by a constant per node of the expression
(:class:`_Normalizer`): every expression is accepted or rejected in time linear in its
length (SPEC section 10).  Each atom's ``holds``
(made on first use) is one dict lookup and one comparison (list atoms: a scan of the
event's list).

>>> from betree.parser import parse
>>> to_clauses(parse("not (a = 1)"))
[(OrderAtom('a', (('!=', 1),)),), (TestAtom('a', 'undefined'),)]
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from betree.expr import (
    And,
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
    StrFunc,
)
from betree.parser import INT64_MAX, INT64_MIN
from storage.errors import InvalidInput

#: A constant of an order atom: a number or a string (never a bool).
Value = int | float | str
#: (lo, lo_inclusive, hi, hi_inclusive); ``None`` for an unbounded side.
Interval = tuple[Value | None, bool, Value | None, bool]
Event = Mapping[str, object]
Clause = tuple["Atom", ...]

#: Default bound on the number of clauses of one subscription.
MAX_CLAUSES = 512

ORDER_OPS = ("<", "<=", "=", "!=", ">=", ">")
_OP_RANK = {op: i for i, op in enumerate(ORDER_OPS)}
#: The operator that holds exactly where ``op`` does not (on a defined value).
NEGATE_OP = {"<": ">=", "<=": ">", "=": "!=", "!=": "=", ">=": "<", ">": "<="}
_OP_FUNCS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    ">": operator.gt,
}

#: Test names of :class:`TestAtom`, with the kind of argument each takes.
TESTS: dict[str, str] = {
    "undefined": "none",
    "defined": "none",
    "bool_true": "none",
    "bool_false": "none",
    "empty": "none",
    "not_empty": "none",
    "has": "value",
    "lacks": "value",
    "one_of": "list",
    "none_of": "list",
    "all_of": "list",
    "not_all_of": "list",
    "ends_with": "string",
    "not_ends_with": "string",
    "contains": "string",
    "not_contains": "string",
}
_TEST_RANK = {t: i for i, t in enumerate(TESTS)}
#: Each test's negation on a *defined* value (``defined`` has none: it is then false).
DEFINED_NEGATION = {
    "bool_true": "bool_false",
    "bool_false": "bool_true",
    "empty": "not_empty",
    "not_empty": "empty",
    "has": "lacks",
    "lacks": "has",
    "one_of": "none_of",
    "none_of": "one_of",
    "all_of": "not_all_of",
    "not_all_of": "all_of",
    "ends_with": "not_ends_with",
    "not_ends_with": "ends_with",
    "contains": "not_contains",
    "not_contains": "contains",
}
_MAX_CHAR = "\U0010ffff"


def _canon(c: object) -> Value:
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


def _lit(v: Value) -> str:
    """``v`` as a literal of the expression language."""
    if isinstance(v, str):
        out = []
        for ch in v:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ch == "\n":
                out.append("\\n")
            elif ch == "\t":
                out.append("\\t")
            elif ch == "\r":
                out.append("\\r")
            elif ch < " " or ch == "\x7f":
                out.append(f"\\u{ord(ch):04x}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'
    return repr(v)


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
            c = _canon(c)
            es: tuple[tuple[str, Value], ...] = ((op, c),)
            key: tuple[object, ...] = ((_ckey(c), rank),)
        else:
            canon = set()
            for op, c in items:
                if op not in _OP_RANK:
                    raise ValueError(f"unknown order operator {op!r}")
                canon.add((op, _canon(c)))
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
        if op == "=":
            return (c, True, c, True)
        if op == "<":
            return (None, False, c, False)
        if op == "<=":
            return (None, False, c, True)
        if op == ">":
            return (c, False, None, False)
        if op == ">=":
            return (c, True, None, False)
        return None

    def negate(self) -> list[Clause]:
        """``a is null`` OR the conjunction of the negated entries."""
        negs = tuple(sorted(OrderAtom(self.attr, ((NEGATE_OP[op], c),)) for op, c in self.entries))
        return [(TestAtom(self.attr, "undefined"),), negs]

    def to_expr(self) -> str:
        a = self.attr
        es = self.entries
        if len(es) == 1:
            op, c = es[0]
            return f"{a} {op} {_lit(c)}"
        if all(op == "=" for op, _ in es):
            return f"{a} in ({', '.join(_lit(c) for _, c in es)})"
        if len(es) == 2:
            (op1, c1), (op2, c2) = es
            if op1 == "<" and op2 == ">" and c1 < c2:  # type: ignore[operator]
                return f"{a} not between {_lit(c1)} and {_lit(c2)}"
            if op1 == "<" and op2 == ">=" and isinstance(c1, str) and string_successor(c1) == c2:
                return f"({a} is not null and not starts_with({a}, {_lit(c1)}))"
        return "(" + " or ".join(f"{a} {op} {_lit(c)}" for op, c in es) + ")"

    def as_tuple(self) -> tuple[object, ...]:
        return ("order", self.attr, self.entries)

    def __repr__(self) -> str:
        return f"OrderAtom({self.attr!r}, {self.entries!r})"


_new_atom = object.__new__


#: One-entry order atoms with an int or string constant, by ``(attr, op, constant)``;
#: cleared when full.  (Floats are left out: an int out of int64 range equals a float.)
_INTERNED: dict[tuple[str, str, Value], OrderAtom] = {}
_INTERNED_MAX = 1 << 16


def _order_atom(attr: str, op: str, c: Value) -> OrderAtom:
    """``OrderAtom(attr, ((op, c),))`` for a known ``op`` and a *canonical* ``c`` (see
    :func:`_canon`), without the checks.

    Interned for int and string constants, so that a bulk load's many equal atoms are
    one object: each is built once, and the dicts keyed by atoms downstream (grid spans,
    store keys) find it by identity, without calling :meth:`Atom.__eq__`.  Cost: ~0.1 µs
    when interned, else ~0.4 µs (a fifth, and two thirds, of the constructor's).
    """
    if type(c) is not float:
        atom = _INTERNED.get((attr, op, c))
        if atom is None:
            if len(_INTERNED) >= _INTERNED_MAX:
                _INTERNED.clear()
            atom = _INTERNED[(attr, op, c)] = _new_order_atom(attr, op, c)
        return atom
    return _new_order_atom(attr, op, c)


def _new_order_atom(attr: str, op: str, c: Value) -> OrderAtom:
    atom: OrderAtom = _new_atom(OrderAtom)
    atom.attr = attr
    atom.entries = ((op, c),)
    key = (attr, 0, (((1, c) if type(c) is str else (0, c), _OP_RANK[op]),))
    atom._key = key
    atom._hash = hash(key)
    return atom


def _equal_any(attr: str, values: set[Value]) -> OrderAtom:
    """``OrderAtom(attr, [("=", v) for v in values])`` for a non-empty set of *canonical*
    values: ``attr in (…)``.  Cheap when they are all numbers or all strings (else the
    constructor raises)."""
    if len(values) == 1:
        (c,) = values
        return _order_atom(attr, "=", c)
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
        fn = _OP_FUNCS[op]

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
    pairs = tuple((_OP_FUNCS[op], c) for op, c in entries)

    def holds_any(event: Event) -> bool:
        v = event.get(attr)
        return v is not None and any(fn(v, c) for fn, c in pairs)

    return holds_any


class TestAtom(Atom):
    """A test evaluated directly per event; ``test`` is one of :data:`TESTS`.

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
        kind = TESTS.get(test)
        if kind is None:
            raise ValueError(f"unknown test {test!r}")
        if kind == "none":
            if arg is not None:
                raise ValueError(f"test {test!r} takes no argument")
            argkey: tuple[object, ...] = ()
        elif kind == "value":
            if isinstance(arg, bool) or not isinstance(arg, (int, str)):
                raise ValueError(f"test {test!r} takes an int or a string")
            argkey = (_ckey(arg),)
        elif kind == "list":
            if not isinstance(arg, tuple) or any(
                isinstance(v, bool) or not isinstance(v, (int, str)) for v in arg
            ):
                raise ValueError(f"test {test!r} takes a tuple of ints or strings")
            arg = tuple(sorted(set(arg), key=_ckey))
            if len(arg) < 2:
                raise ValueError(f"non-canonical {test!r} of {arg!r}: use make_test()")
            argkey = tuple(_ckey(v) for v in arg)
        else:
            if not isinstance(arg, str) or not arg:
                raise ValueError(f"test {test!r} takes a non-empty string: use make_test()")
            argkey = ((1, arg),)
        self.attr = attr
        self.test = test
        self.arg = arg
        self._set_key((attr, 1, _TEST_RANK[test], argkey))

    def _make_holds(self) -> Callable[[Event], bool]:
        return _TEST_HOLDS[self.test](self.attr, self.arg)

    @property
    def requires_defined(self) -> bool:
        return self.test != "undefined"

    def defined_negation(self) -> TestAtom | None:
        """The test that holds exactly where this one fails on a defined value (``None``:
        nowhere; for ``undefined``, ``defined``)."""
        if self.test == "undefined":
            return TestAtom(self.attr, "defined")
        neg = DEFINED_NEGATION.get(self.test)
        if neg is None:
            return None
        return TestAtom(self.attr, neg, self.arg)

    def negate(self) -> list[Clause]:
        if self.test == "undefined":
            return [(TestAtom(self.attr, "defined"),)]
        return _negated(self.attr, self.defined_negation())

    def to_expr(self) -> str:
        a, t, arg = self.attr, self.test, self.arg
        if t == "undefined":
            return f"{a} is null"
        if t == "defined":
            return f"{a} is not null"
        if t == "bool_true":
            return a
        if t == "bool_false":
            return f"{a} = false"
        if t == "empty":
            return f"{a} is empty"
        if t in ("has", "lacks"):
            return f"{_lit(arg)} {'in' if t == 'has' else 'not in'} {a}"  # type: ignore[arg-type]
        if t in ("one_of", "none_of", "all_of"):
            return f"{a} {t[:-3]} of ({', '.join(_lit(v) for v in arg)})"  # type: ignore[attr-defined]
        if t in ("ends_with", "contains"):
            return f"{t}({a}, {_lit(arg)})"  # type: ignore[arg-type]
        pos = self.defined_negation()
        if pos is None:  # cannot happen: every remaining test has a negation
            raise ValueError(t)
        return f"({a} is not null and not ({pos.to_expr()}))"

    def as_tuple(self) -> tuple[object, ...]:
        return ("test", self.attr, self.test, self.arg)

    def __repr__(self) -> str:
        if self.arg is None:
            return f"TestAtom({self.attr!r}, {self.test!r})"
        return f"TestAtom({self.attr!r}, {self.test!r}, {self.arg!r})"


def _holds_factories() -> dict[str, Callable[[str, object], Callable[[Event], bool]]]:
    def undefined(a: str, _: object) -> Callable[[Event], bool]:
        return lambda e: e.get(a) is None

    def defined(a: str, _: object) -> Callable[[Event], bool]:
        return lambda e: e.get(a) is not None

    def bool_true(a: str, _: object) -> Callable[[Event], bool]:
        return lambda e: e.get(a) is True

    def bool_false(a: str, _: object) -> Callable[[Event], bool]:
        return lambda e: e.get(a) is False

    def empty(a: str, _: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and len(v) == 0  # type: ignore[arg-type]

    def not_empty(a: str, _: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and len(v) > 0  # type: ignore[arg-type]

    def has(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and x in v  # type: ignore[operator]

    def lacks(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and x not in v  # type: ignore[operator]

    def one_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and not s.isdisjoint(v)

    def none_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and s.isdisjoint(v)

    def all_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and s.issubset(v)

    def not_all_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and not s.issubset(v)

    def ends_with(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and v.endswith(x)  # type: ignore[attr-defined]

    def not_ends_with(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and not v.endswith(x)  # type: ignore[attr-defined]

    def contains(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and x in v  # type: ignore[operator]

    def not_contains(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and x not in v  # type: ignore[operator]

    return {
        "undefined": undefined,
        "defined": defined,
        "bool_true": bool_true,
        "bool_false": bool_false,
        "empty": empty,
        "not_empty": not_empty,
        "has": has,
        "lacks": lacks,
        "one_of": one_of,
        "none_of": none_of,
        "all_of": all_of,
        "not_all_of": not_all_of,
        "ends_with": ends_with,
        "not_ends_with": not_ends_with,
        "contains": contains,
        "not_contains": not_contains,
    }


_TEST_HOLDS = _holds_factories()


def make_test(attr: str, test: str, arg: object = None) -> TestAtom | None:
    """The canonical atom for a test, rewriting degenerate arguments; ``None`` if the test
    holds on no event at all.

    ``one_of ()`` and ``not_all_of ()`` hold nowhere; ``none_of ()``, ``all_of ()``,
    ``ends_with ""`` and ``contains ""`` are ``defined``; ``not_ends_with ""`` and
    ``not_contains ""`` hold nowhere; a one-value ``one_of``/``all_of`` is ``has`` and a
    one-value ``none_of``/``not_all_of`` is ``lacks``.
    """
    kind = TESTS.get(test)
    if kind == "list":
        values = tuple(sorted(set(arg), key=_ckey))  # type: ignore[call-overload]
        if not values:
            if test in ("one_of", "not_all_of"):
                return None
            return TestAtom(attr, "defined")
        if len(values) == 1:
            single = "has" if test in ("one_of", "all_of") else "lacks"
            return TestAtom(attr, single, values[0])
        return TestAtom(attr, test, values)
    if kind == "string" and arg == "":
        if test.startswith("not_"):
            return None
        return TestAtom(attr, "defined")
    return TestAtom(attr, test, arg)


def atom_from_tuple(t: Sequence[object]) -> Atom:
    """Rebuild an atom from :meth:`Atom.as_tuple` (lists accepted for tuples)."""
    if t[0] == "order":
        return OrderAtom(str(t[1]), [(str(op), c) for op, c in t[2]])  # type: ignore[attr-defined]
    if t[0] == "test":
        arg = t[3]
        if isinstance(arg, list):
            arg = tuple(arg)
        return TestAtom(str(t[1]), str(t[2]), arg)
    raise ValueError(f"not an atom tuple: {t!r}")


def _negated(attr: str, neg: Atom | None) -> list[Clause]:
    """``a is null OR neg`` (``neg`` on a defined value; ``None``: never)."""
    undefined = TestAtom(attr, "undefined")
    if neg is None:
        return [(undefined,)]
    if isinstance(neg, TestAtom) and neg.test == "defined":
        return [()]  # a is null or a is not null
    return [(undefined,), (neg,)]


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
    (Const, Compare, Between, InList, Contains, ListOp, IsNull, IsEmpty, BoolAttr, StrFunc)
)
_NUMBER_TYPES = (int, float)
_atom_key = operator.attrgetter("_key")


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
    dnf = normalizer.dnf(node, True)
    if _TRUE in dnf:
        return [()]
    return sorted(tuple(sorted(c)) for c in normalizer.minimal(dnf, bounded=False))


def _size(node: Node) -> int:
    """The atoms and list values of the tree, and its connectives: what its text spells."""
    size = 0
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        size += 1
        if isinstance(n, (And, Or)):
            stack.extend(n.children)
        elif isinstance(n, Not):
            stack.append(n.child)
        elif isinstance(n, (InList, ListOp)):
            size += len(n.values)
    return size


def _conjunction_clauses(node: Node, always_defined: Collection[str]) -> list[Clause] | None:
    """:func:`to_clauses` of an atom or a conjunction of atoms and constants, else ``None``.

    A positive atom gives at most one clause, so a conjunction of atoms gives at most one
    clause: the union of its atoms' clauses, simplified, with no product to form.  This is
    what :func:`_dnf_clauses` computes on such a tree (``tests/test_lang_fastpath.py``
    checks that they agree), without its sets of clause sets: the frequent atoms (comparisons,
    ``between``, ``in``) become :class:`OrderAtom` directly, the others go through
    :func:`_atom_clauses` as there, and only when two atoms share an attribute does the
    clause go through :func:`_simplify`.

    Cost: about 1 µs per atom; a comparison whose atom is interned (see
    :func:`_order_atom`) is found by one dict lookup.
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
        clauses = _atom_clauses(child, True)
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
        return [tuple(sorted(merged, key=_atom_key))]
    return [tuple(sorted(atoms, key=_atom_key))]


def order_atoms(node: Node) -> tuple[Atom, ...] | None:
    """The atoms of a positive comparison, ``between`` or ``in`` node as a conjunct, ``()``
    if it is false (an empty range or list), or ``None`` for any other node (left to
    :func:`_atom_clauses`).

    These atoms go to the PB+trees: ``a op c``; ``a between lo and hi`` is ``a >= lo and
    a <= hi`` (what :func:`_simplify` makes of it), or ``a = lo`` when ``lo == hi``;
    ``a in (...)`` is one atom of ``=`` entries.  Cost: ~0.2 µs when interned.
    """
    if type(node) is Compare:
        v = node.value
        if type(v) is int or type(v) is str:
            atom = _INTERNED.get((node.attr, node.op, v))
            if atom is not None:  # (only valid operators and canonical constants are there)
                return (atom,)
        if type(v) is not bool and node.op in _OP_RANK:
            return (_order_atom(node.attr, node.op, _canon(v)),)
    elif type(node) is Between:
        lo, hi = node.lo, node.hi
        if not node.negated and (
            (type(lo) is str and type(hi) is str)
            or (isinstance(lo, _NUMBER_TYPES) and isinstance(hi, _NUMBER_TYPES))
        ):
            lo, hi = _canon(lo), _canon(hi)
            if lo < hi:  # type: ignore[operator]
                return (_order_atom(node.attr, ">=", lo), _order_atom(node.attr, "<=", hi))
            if lo == hi:
                return (_order_atom(node.attr, "=", lo),)
            return ()
    elif type(node) is InList and not node.negated:
        values = set(map(_canon, node.values))
        return (_equal_any(node.attr, values),) if values else ()
    return None


#: Work (atoms touched) the general path may spend per node of the expression, and in all
#: (:class:`_Normalizer`); far more than any expression below ``max_clauses`` needs unless
#: it re-simplifies ever longer clauses (``(a <> 1 or b) and (a <> 2 or b) and ...``).
WORK_PER_NODE = 32
WORK_BASE = 1 << 20


class _Normalizer:
    """Clause sets of a tree, bounded: at most ``max_clauses`` minimal clauses at every step
    (each union and product is kept free of absorbed clauses as it grows, so it stops at
    the first clause past the bound), and at most ``WORK_BASE + WORK_PER_NODE * size``
    atoms touched in all.

    Why: without the bounds, 20,000 ``a = i`` joined by ``or`` took 10 s to reject (every
    clause compared with every other); now a union stops at clause 513, and no expression
    costs more than a constant per node of its tree (SPEC section 10: accepted or rejected
    in time linear in its length).
    """

    __slots__ = ("always_defined", "budget", "max_clauses")

    def __init__(self, max_clauses: int, always_defined: frozenset[str], size: int = 0) -> None:
        self.max_clauses = max_clauses
        self.always_defined = always_defined
        self.budget = WORK_BASE + WORK_PER_NODE * size

    def _too_many(self) -> InvalidInput:
        return InvalidInput(
            f"the expression has more than {self.max_clauses} clauses in disjunctive normal form",
            hint="simplify it, or split it into several subscriptions",
        )

    def spend(self, work: int) -> None:
        """Count ``work`` atoms touched; raise once the expression's budget is spent."""
        self.budget -= work
        if self.budget < 0:
            raise InvalidInput(
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
        clauses = _atom_clauses(node, pos)
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
        # Conjoin the one-clause parts in one step (the common case: a conjunction of atoms).
        singles = [next(iter(p)) for p in parts if len(p) == 1]
        if len(singles) > 1:
            self.spend(sum(map(len, singles)))
            merged = _simplify(frozenset().union(*singles))
            if merged is None:
                return set()
            parts = [{merged}, *parts[len(singles) :]]
        acc = parts[0]
        for p in parts[1:]:
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


def _union_rank(node: Node) -> int:
    return 0 if type(node) is Const else 2 if isinstance(node, (And, Or, Not)) else 1


class _Minimal:
    """A growing set of clauses none of which contains another, at most ``max_clauses``.

    Each clause is listed under every one of its atoms (to find the clauses a new one
    would absorb: those listed under all its atoms, so under its rarest) and under one
    anchor atom (to find a clause that absorbs the new one: its anchor is among the new
    clause's atoms).  Cost: per added clause, its length plus the clauses listed under its
    atoms, each compared once (spent from the normalizer's budget).
    """

    __slots__ = ("anchored", "bounded", "clauses", "listed", "normalizer")

    def __init__(self, normalizer: _Normalizer, *, bounded: bool = True) -> None:
        self.normalizer = normalizer
        self.bounded = bounded
        self.clauses: _DNF = set()
        self.listed: dict[Atom, set[frozenset[Atom]]] = {}
        self.anchored: dict[Atom, set[frozenset[Atom]]] = {}

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
            clauses.add(c)
            return
        anchored = self.anchored
        for atom in c:
            for k in anchored.get(atom, ()):
                spend(len(k))
                if k <= c:
                    return  # absorbed
        listed = self.listed
        rarest = min((listed.get(atom, ()) for atom in c), key=len)
        if rarest:
            absorbed = [k for k in rarest if c < k]
            spend(len(rarest) * len(c))
            for k in absorbed:
                self._remove(k)
        clauses.add(c)
        for atom in c:
            listed.setdefault(atom, set()).add(c)
        anchored.setdefault(next(iter(c)), set()).add(c)
        if self.bounded and len(clauses) > self.normalizer.max_clauses:
            raise self.normalizer._too_many()

    def _remove(self, k: frozenset[Atom]) -> None:
        self.clauses.discard(k)
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


def _atom_clauses(node: Node, pos: bool) -> list[Clause]:
    """Clauses of one atomic node (``pos``) or of its negation, before simplification."""
    if isinstance(node, Compare):
        a, op, v = node.attr, node.op, node.value
        if isinstance(v, bool):
            true_test = "bool_true" if (op == "=") == v else "bool_false"
            t = TestAtom(a, true_test)
            return [(t,)] if pos else _negated(a, t.defined_negation())
        atom = OrderAtom(a, ((op, v),))
        return [(atom,)] if pos else atom.negate()
    if isinstance(node, Between):
        return _between(node, pos)
    if isinstance(node, InList):
        return _in_list(node, pos)
    if isinstance(node, Contains):
        test = "lacks" if node.negated else "has"
        t = TestAtom(node.attr, test, _canon(node.value))
        return [(t,)] if pos else _negated(node.attr, t.defined_negation())
    if isinstance(node, ListOp):
        values = tuple(_canon(v) for v in node.values)
        t2 = make_test(node.attr, node.op, values)
        if pos:
            return [(t2,)] if t2 is not None else []
        return _negated(node.attr, make_test(node.attr, DEFINED_NEGATION[node.op], values))
    if isinstance(node, IsNull):
        test = "undefined" if node.negated != pos else "defined"
        return [(TestAtom(node.attr, test),)]
    if isinstance(node, IsEmpty):
        t = TestAtom(node.attr, "empty")
        return [(t,)] if pos else _negated(node.attr, t.defined_negation())
    if isinstance(node, BoolAttr):
        t = TestAtom(node.attr, "bool_true")
        return [(t,)] if pos else _negated(node.attr, t.defined_negation())
    if isinstance(node, StrFunc):
        return _str_func(node, pos)
    raise TypeError(f"not an atomic expression node: {node!r}")


def _between(node: Between, pos: bool) -> list[Clause]:
    a = node.attr
    lo, hi = _canon(node.lo), _canon(node.hi)
    inside = not node.negated  # the atom holds inside [lo, hi] (else outside), when defined
    if lo > hi:  # type: ignore[operator]  # the interval is empty
        if inside:
            return [] if pos else [()]
        return [(TestAtom(a, "defined"),)] if pos else [(TestAtom(a, "undefined"),)]
    in_clause: Clause = (OrderAtom(a, ((">=", lo),)), OrderAtom(a, (("<=", hi),)))
    # outside [lo, hi]: "a < lo or a > hi", which is "a <> lo" for a single point
    out_entries = (("!=", lo),) if lo == hi else (("<", lo), (">", hi))
    out_atom = OrderAtom(a, out_entries)
    undefined = (TestAtom(a, "undefined"),)
    if inside:
        return [in_clause] if pos else [undefined, (out_atom,)]
    return [(out_atom,)] if pos else [undefined, in_clause]


def _in_list(node: InList, pos: bool) -> list[Clause]:
    a = node.attr
    values = {_canon(v) for v in node.values}
    member = not node.negated  # the atom holds for members (else non-members), when defined
    if not values:
        if member:
            return [] if pos else [()]
        return [(TestAtom(a, "defined"),)] if pos else [(TestAtom(a, "undefined"),)]
    any_eq: Clause = (_equal_any(a, values),)
    all_ne: Clause = tuple(_order_atom(a, "!=", v) for v in values)
    undefined = (TestAtom(a, "undefined"),)
    if member:
        return [any_eq] if pos else [undefined, all_ne]
    return [all_ne] if pos else [undefined, any_eq]


def _str_func(node: StrFunc, pos: bool) -> list[Clause]:
    a, p = node.attr, node.arg
    if node.func == "starts_with":
        if not p:
            return [(TestAtom(a, "defined"),)] if pos else [(TestAtom(a, "undefined"),)]
        succ = string_successor(p)
        ge = OrderAtom(a, ((">=", p),))
        if succ is None:  # every string >= p starts with p
            return [(ge,)] if pos else ge.negate()
        if pos:
            return [(ge, OrderAtom(a, (("<", succ),)))]
        return [(TestAtom(a, "undefined"),), (OrderAtom(a, (("<", p), (">=", succ))),)]
    t = make_test(a, node.func, p)
    if pos:
        return [(t,)] if t is not None else []
    return _negated(a, make_test(a, "not_" + node.func, p))


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
    if op == "=":
        return inside(c)
    if op in ("<", "<="):  # some value below (or at) c: the interval's low end must allow it
        if lo is None:
            return True
        return lo < c or (lo == c and lo_inc and op == "<=")  # type: ignore[operator]
    if op in (">", ">="):
        if hi is None:
            return True
        return hi > c or (hi == c and hi_inc and op == ">=")  # type: ignore[operator]
    return True  # "!=": the interval is not a single point here
