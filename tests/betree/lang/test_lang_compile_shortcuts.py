"""The rich compile's shortcuts give what the code without them gives (richload48).

- :func:`betree.lang.dnf._two_bounds` (a lower and an upper bound kept in one step) gives
  :func:`~betree.lang.dnf._merge_orders`' general loop's answer, or declines;
- :func:`~betree.lang.dnf._simplify` is idempotent, and the union of two of its outputs on
  disjoint attributes is one of its fixed points (why :func:`~betree.lang.dnf._small_product`
  joins such clauses without simplifying them again);
- :func:`betree.lang.atoms.make_test`'s list tests of all strings or all ints are the
  constructor's atoms;
- :meth:`betree.lang.parser._Parser._plain_strings` reads a list of plain strings as the
  element loop does: trees and errors (reason, column);
- end to end: rich rules of ``bexdb gen --profile rich`` on two seeds, and texts mutated
  from them (errors, escapes, other types, ``or``/``not``), compile to the same clauses as
  stored bytes, or the same error, with every shortcut turned off (the general product
  included).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from betree.compiler import Compiler
from betree.lang import atoms, dnf
from betree.lang.atoms import Atom, OrderAtom, TestAtom, make_test
from betree.lang.expr import ExpressionError
from betree.lang.parser import _Parser, compile_expr
from betree.lang.schema import Schema
from storage import codec
from storage.errors import InvalidInput
from tools.bench import gen_rich

RICH = Schema.from_json(gen_rich.SCHEMA)


def _outcome(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except (TypeError, ValueError) as e:
        return (type(e).__name__,)


_CONSTANTS: list[object] = [0, 1, 2, -1, 5, 2**62, -(2**63), 0.5, 1.5, -0.0, 1e300, math.inf]
_CONSTANTS += [math.nan, "", "a", "ab", "b", "é", "\U0010ffff"]
_OPS = ["<", "<=", ">", ">=", "=", "!="]


def _order(rng: random.Random) -> OrderAtom:
    n = 1 if rng.random() < 0.8 else 2
    numbers = rng.random() < 0.5
    pool = [c for c in _CONSTANTS if isinstance(c, str) != numbers]
    return OrderAtom("a", [(rng.choice(_OPS), rng.choice(pool)) for _ in range(n)])


def _general_merge(orders: list[OrderAtom]) -> object:
    """``_merge_orders`` without the shortcut: three atoms given, the third one of the two
    again (equal, another object: the loop's answer for the pair, ties kept first)."""
    return dnf._merge_orders([*orders, OrderAtom(orders[0].attr, orders[0].entries)])


def test_two_bounds_as_the_general_loop() -> None:
    rng = random.Random(48)
    taken = 0
    for _ in range(20000):
        a = _order(rng)
        b = _order(rng) if rng.random() < 0.7 else OrderAtom("a", [(rng.choice(_OPS), "x")])
        fast = _outcome(lambda: dnf._two_bounds(a, b))  # noqa: B023
        if fast is None:
            continue
        taken += 1
        general = _outcome(lambda: _general_merge([a, b]))  # noqa: B023
        if isinstance(fast, tuple):
            assert general == fast  # (a number against a string: TypeError on both)
            continue
        assert isinstance(general, list)
        assert [x._key for x in fast] == [x._key for x in general]  # type: ignore[attr-defined]
        assert fast[0] is a or fast[0] is b  # type: ignore[index]
    assert taken > 1000


def _clause(rng: random.Random, pool: list[Atom]) -> frozenset[Atom]:
    return frozenset(rng.sample(pool, rng.randint(1, min(6, len(pool)))))


def _atom_pool() -> list[Atom]:
    """The atoms of rich rules' clauses (every kind the generator makes), plus random order
    atoms and tests on a few attributes (bounds, points, ``!=``, in-lists, ``undefined``)."""
    p = gen_rich.params(seed=48)
    pool: set[Atom] = set()
    for i in range(600):
        try:
            clauses = Compiler(RICH).compile(i, gen_rich.subscription(p, i, 20))
        except InvalidInput:
            continue
        for clause in clauses:
            pool.update(clause)
    rng = random.Random(5)
    for attr in ("x", "y"):
        for _ in range(60):
            op, c = rng.choice(_OPS), rng.choice([0, 1, 2, 3, 5, 8, 2.5])
            pool.add(OrderAtom(attr, ((op, c),)))
        pool.add(OrderAtom(attr, (("=", 1), ("=", 3), ("=", 9))))
        pool.add(OrderAtom(attr, (("<", 1), (">", 4))))
        pool.update(TestAtom(attr, t) for t in ("defined", "undefined"))
    return sorted(pool)


def test_simplify_is_idempotent_and_joins_disjoint_attributes() -> None:
    pool = _atom_pool()
    by_attr: dict[str, list[Atom]] = {}
    for a in pool:
        by_attr.setdefault(a.attr, []).append(a)
    rng = random.Random(11)
    joined = 0
    for _ in range(20000):
        attrs = rng.sample(sorted(by_attr), rng.randint(1, 4))
        atoms_ = [
            a for attr in attrs for a in rng.sample(by_attr[attr], min(3, len(by_attr[attr])))
        ]
        once = dnf._simplify(frozenset(rng.sample(atoms_, rng.randint(1, len(atoms_)))))
        if once is None:
            continue
        assert dnf._simplify(once) == once
        other = dnf._simplify(_clause(rng, pool))
        if other is None or not {a.attr for a in once}.isdisjoint({a.attr for a in other}):
            continue
        assert dnf._simplify(once | other) == once | other
        joined += 1
    assert joined > 1000


def test_list_tests_as_the_constructor_builds_them() -> None:
    rng = random.Random(3)
    pools: list[list[object]] = [
        ["a", "b", "é", "", "Z", "\U0010ffff", "ab"],
        [0, 1, -1, 2**62, -(2**63), 7],
        [0, 1, 1.5, -2.0, 3],  # mixed: the constructor's path
    ]
    fast_paths = 0
    for _ in range(5000):
        values = tuple(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, 6)))
        for test in ("one_of", "none_of", "all_of", "not_all_of"):
            got = make_test("l", test, values)
            if got is None or got.test != test:
                continue
            want = TestAtom("l", test, values)
            assert (got._key, got.arg, got.as_tuple()) == (want._key, want.arg, want.as_tuple())
            assert hash(got) == hash(want) and repr(got) == repr(want)
            fast_paths += type(values[0]) is not float
    assert fast_paths > 5000


_SCHEMA = Schema.from_json(
    {
        "attributes": {
            "s": {"type": "string"},
            "f": {"type": "string", "fold_case": True},
            "sl": {"type": "string_list"},
            "i": {"type": "int"},
            "il": {"type": "int_list"},
            "ip": {"type": "ip"},
            "b": {"type": "bool"},
        }
    }
)
_ELEMENTS = ['"a"', "'b'", '"é"', '"\\u00e9"', '"x\\"y"', '"\ud800"', '""', "'", "3", "-2", "1.5"]
_ELEMENTS.append("x")
_FORMS = ["{a} in ({v})", "{a} not in ({v})", "{a} one of ({v})", "{a} none of ({v})"]


def _parsed(text: str, schema: Schema) -> object:
    try:
        return compile_expr(text, schema)
    except ExpressionError as e:
        return ("error", e.message, e.column, e.hint)


def test_plain_string_lists_read_as_the_loop_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    texts = []
    for _ in range(3000):
        n = rng.randrange(1, 6)
        plain = rng.random() < 0.5  # many lists of plain strings only
        pool = _ELEMENTS[:3] if plain else _ELEMENTS
        values = [rng.choice(pool) for _ in range(n)]
        sep = rng.choice([", ", ",", " , ", " "]) if rng.random() < 0.2 else ", "
        attr = rng.choice(["s", "f", "sl", "i", "il", "ip", "b", "nope"])
        if attr == "ip" and plain:
            values = [rng.choice(['"10.0.0.1"', "'::1'", '"x"']) for _ in range(n)]
        text = rng.choice(_FORMS).format(a=attr, v=sep.join(values))
        if rng.random() < 0.1:
            text = text[:-1]  # no ")"
        texts.append(text + rng.choice(["", " and i = 1", ")"]))
    fast = [_parsed(t, _SCHEMA) for t in texts]
    monkeypatch.setattr(_Parser, "_plain_strings", lambda self, i: None)
    loop = [_parsed(t, _SCHEMA) for t in texts]
    assert fast == loop
    assert sum(not isinstance(o, tuple) for o in fast) > 150  # lists read...
    assert sum(isinstance(o, tuple) for o in fast) > 300  # ... and errors met


_MUTATIONS: list[Callable[[str, int], str]] = [
    lambda t, k: t[:k] + t[k + 1 :],
    lambda t, k: t[:k] + '"' + t[k:],
    lambda t, k: t[:k] + "\\" + t[k:],
    lambda t, k: t[:k] + "\ud800" + t[k:],
    lambda t, k: t[:k] + ", 3" + t[k:],
    lambda t, k: t[:k] + ", 'x'" + t[k:],
    lambda t, k: t.replace("user.country", "device.ip", 1),
    lambda t, k: t.replace("user.interests", "user.age", 1),
    lambda t, k: t.replace('("', "('", 1).replace('",', "',", 1),
    lambda t, k: t.replace(" and ", " or ", 1),
    lambda t, k: "not (" + t + ")",
    lambda t, k: t[:k] + ")" + t[k:],
    lambda t, k: t.replace('("', '("é\\u00e9', 1),
    lambda t, k: t.replace(" between ", " not between ", 1),
    lambda t, k: t + " and user.age >= 30 and user.age < 60 and not (user.age = 40)",
]


def _texts() -> list[str]:
    rng = random.Random(48)
    texts = []
    for seed, n in ((7, 600), (11, 400)):
        p = gen_rich.params(seed=seed)
        for i in range(n):
            text = gen_rich.subscription(p, i, 20)
            texts.append(text)
            texts.extend(m(text, rng.randrange(len(text) + 1)) for m in _MUTATIONS[:: 1 + i % 3])
    return texts


def _compiled(compiler: Compiler, texts: list[str]) -> list[object]:
    out: list[object] = []
    for i, text in enumerate(texts):
        try:
            clauses = compiler.compile(i, text)
        except InvalidInput as e:
            out.append(("error", e.message, e.column, e.hint))
            continue
        out.append([[codec.encode_value(a.as_tuple()) for a in c] for c in clauses])
    return out


def test_rich_compile_as_without_the_shortcuts(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _texts()
    fast = _compiled(Compiler(RICH), texts)
    monkeypatch.setattr(dnf, "_two_bounds", lambda a, b: None)
    monkeypatch.setattr(dnf, "SMALL_PRODUCT", 0)  # every product the general one
    monkeypatch.setattr(dnf, "_sorted_clauses", lambda cs: sorted(tuple(sorted(c)) for c in cs))
    monkeypatch.setattr(atoms, "_list_test", lambda a, t, v, tag: TestAtom(a, t, v))
    monkeypatch.setattr(_Parser, "_plain_strings", lambda self, i: None)
    general = _compiled(Compiler(RICH), texts)
    assert fast == general
    errors = sum(isinstance(o, tuple) for o in fast)
    assert errors > 1000 and len(fast) - errors > 2000  # both met
    assert sum(isinstance(o, list) and len(o) > 1 for o in fast) > 500  # products formed
