"""Normalization to clauses of canonical atoms; expected clauses are written out by hand."""

from __future__ import annotations

import pytest

from betree.lang.atoms import (
    Atom,
    OrderAtom,
    TestAtom,
    atom_from_tuple,
    make_test,
    string_successor,
)
from betree.lang.dnf import clauses_hold, clauses_to_expr, to_clauses
from betree.lang.parser import parse
from storage.errors import InvalidInput


def O(attr: str, *entries: tuple[str, object]) -> OrderAtom:  # noqa: E743
    return OrderAtom(attr, entries)


def T(attr: str, test: str, arg: object = None) -> TestAtom:
    return TestAtom(attr, test, arg)


def clauses(text: str, **kw: object) -> set[frozenset[Atom]]:
    got = to_clauses(parse(text), **kw)  # type: ignore[arg-type]
    for c in got:  # each clause a sorted tuple of distinct atoms
        assert list(c) == sorted(set(c))
    assert got == sorted(got)
    return {frozenset(c) for c in got}


def cl(*cs: tuple[Atom, ...]) -> set[frozenset[Atom]]:
    return {frozenset(c) for c in cs}


NULL_A = T("a", "undefined")
DEF_A = T("a", "defined")

EXPECTED: list[tuple[str, set[frozenset[Atom]]]] = [
    # comparisons and their negations under the truth table
    ("a = 1", cl((O("a", ("=", 1)),))),
    ("1 < a", cl((O("a", (">", 1)),))),
    ("not (a = 1)", cl((NULL_A,), (O("a", ("!=", 1)),))),
    ("not (a <> 1)", cl((NULL_A,), (O("a", ("=", 1)),))),
    ("not (a < 1)", cl((NULL_A,), (O("a", (">=", 1)),))),
    ("not (a >= 'x')", cl((NULL_A,), (O("a", ("<", "x")),))),
    ("not not (a > 1)", cl((O("a", (">", 1)),))),
    # in / not in
    ("a in (3, 1, 2, 1)", cl((O("a", ("=", 1), ("=", 2), ("=", 3)),))),
    ("a in (1, 1.0)", cl((O("a", ("=", 1)),))),
    ("a not in (1, 2)", cl((O("a", ("!=", 1)), O("a", ("!=", 2))))),
    ("not (a in (1, 2))", cl((NULL_A,), (O("a", ("!=", 1)), O("a", ("!=", 2))))),
    ("not (a not in (1, 2))", cl((NULL_A,), (O("a", ("=", 1), ("=", 2)),))),
    ("a in ()", set()),
    ("a not in ()", cl((DEF_A,))),
    ("not (a in ())", cl(())),
    ("not (a not in ())", cl((NULL_A,))),
    # between
    ("a between 1 and 5", cl((O("a", (">=", 1)), O("a", ("<=", 5))))),
    ("a between 3 and 3", cl((O("a", ("=", 3)),))),
    ("a between 5 and 1", set()),
    ("not (a between 5 and 1)", cl(())),
    ("a not between 5 and 1", cl((DEF_A,))),
    ("not (a not between 5 and 1)", cl((NULL_A,))),
    ("a not between 1 and 5", cl((O("a", ("<", 1), (">", 5)),))),
    ("not (a between 1 and 5)", cl((NULL_A,), (O("a", ("<", 1), (">", 5)),))),
    ("not (a not between 1 and 5)", cl((NULL_A,), (O("a", (">=", 1)), O("a", ("<=", 5))))),
    ("a not between 3 and 3.0", cl((O("a", ("!=", 3)),))),
    # starts_with
    ("starts_with(a, 'ab')", cl((O("a", (">=", "ab")), O("a", ("<", "ac"))))),
    ("starts_with(a, '')", cl((DEF_A,))),
    ("not starts_with(a, '')", cl((NULL_A,))),
    ("starts_with(a, '\U0010ffff')", cl((O("a", (">=", "\U0010ffff")),))),
    ("starts_with(a, 'a\U0010ffff')", cl((O("a", (">=", "a\U0010ffff")), O("a", ("<", "b"))))),
    ("not starts_with(a, 'ab')", cl((NULL_A,), (O("a", ("<", "ab"), (">=", "ac")),))),
    ("not starts_with(a, '\U0010ffff')", cl((NULL_A,), (O("a", ("<", "\U0010ffff")),))),
    # tests
    ("a is null", cl((NULL_A,))),
    ("a is not null", cl((DEF_A,))),
    ("not (a is null)", cl((DEF_A,))),
    ("b", cl((T("b", "bool_true"),))),
    ("not b", cl((T("b", "undefined"),), (T("b", "bool_false"),))),
    ("b = true", cl((T("b", "bool_true"),))),
    ("b <> false", cl((T("b", "bool_true"),))),
    ("b = false", cl((T("b", "bool_false"),))),
    ("true <> b", cl((T("b", "bool_false"),))),
    ("not (b = false)", cl((T("b", "undefined"),), (T("b", "bool_true"),))),
    ("l is empty", cl((T("l", "empty"),))),
    ("not (l is empty)", cl((T("l", "undefined"),), (T("l", "not_empty"),))),
    ("1 in l", cl((T("l", "has", 1),))),
    ("1.0 in l", cl((T("l", "has", 1),))),
    ("'x' not in l", cl((T("l", "lacks", "x"),))),
    ("not (1 in l)", cl((T("l", "undefined"),), (T("l", "lacks", 1),))),
    ("l one of (2, 1, 2)", cl((T("l", "one_of", (1, 2)),))),
    ("l one of (1)", cl((T("l", "has", 1),))),
    ("l one of ()", set()),
    ("not (l one of ())", cl(())),
    ("l none of (2, 1)", cl((T("l", "none_of", (1, 2)),))),
    ("l none of (1)", cl((T("l", "lacks", 1),))),
    ("l none of ()", cl((T("l", "defined"),))),
    ("not (l none of (1, 2))", cl((T("l", "undefined"),), (T("l", "one_of", (1, 2)),))),
    ("l all of ('b', 'a')", cl((T("l", "all_of", ("a", "b")),))),
    ("l all of ('a')", cl((T("l", "has", "a"),))),
    ("l all of ()", cl((T("l", "defined"),))),
    ("not (l all of ())", cl((T("l", "undefined"),))),
    ("not (l all of (1, 2))", cl((T("l", "undefined"),), (T("l", "not_all_of", (1, 2)),))),
    ("ends_with(s, 'x')", cl((T("s", "ends_with", "x"),))),
    ("ends_with(s, '')", cl((T("s", "defined"),))),
    ("not ends_with(s, '')", cl((T("s", "undefined"),))),
    ("not contains(s, 'x')", cl((T("s", "undefined"),), (T("s", "not_contains", "x"),))),
    # constants
    ("true", cl(())),
    ("false", set()),
    ("a = 1 or true", cl(())),
    ("a = 1 and false", set()),
    ("a = 1 and true", cl((O("a", ("=", 1)),))),
    # obvious contradictions and redundancy
    ("a is null and a = 1", set()),
    ("a is null and a is not null", set()),
    ("a is not null and a = 1", cl((O("a", ("=", 1)),))),
    ("a > 5 and a < 3", set()),
    ("a > 3 and a < 3", set()),
    ("a >= 3 and a <= 3", cl((O("a", ("=", 3)),))),
    ("a >= 3 and a <= 3 and a <> 3", set()),
    ("a >= 3 and a <= 3 and a <> 4", cl((O("a", ("=", 3)),))),
    ("a = 1 and a = 2", set()),
    ("a = 1 and a in (1, 2)", cl((O("a", ("=", 1)),))),
    ("a = 3 and a in (1, 2)", set()),
    ("a > 1 and a > 3 and a <= 9 and a < 9", cl((O("a", (">", 3)), O("a", ("<", 9))))),
    ("a > 1 and a <> 0 and a <> 5", cl((O("a", (">", 1)), O("a", ("!=", 5))))),
    ("a in (1, 2) and a > 7", set()),
    ("a in (1, 8) and a > 7", cl((O("a", ("=", 1), ("=", 8)), O("a", (">", 7))))),
    ("a not between 1 and 5 and a >= 2 and a <= 4", set()),
    ("a not between 1 and 5 and a between 1 and 5", set()),
    (
        "a not between 1 and 5 and a >= 1 and a < 5.5",
        cl((O("a", ("<", 1), (">", 5)), O("a", (">=", 1)), O("a", ("<", 5.5)))),
    ),
    (
        "a not between 1 and 5 and a > 0 and a <= 1",
        cl((O("a", ("<", 1), (">", 5)), O("a", (">", 0)), O("a", ("<=", 1)))),
    ),
    ("not starts_with(a, 'b') and a >= 'b' and a < 'c'", set()),
    ("b and not b", set()),
    ("1 in l and 1 not in l", set()),
    ("l is empty and 1 in l", set()),
    ("l is empty and not (l is empty)", set()),
    ("l is empty and l is not null", cl((T("l", "empty"),))),
    ("ends_with(s, 'x') and not ends_with(s, 'x')", set()),
    # distribution, dedupe and absorption
    (
        "(a = 1 or b) and (c = 2 or d)",
        cl(
            (O("a", ("=", 1)), O("c", ("=", 2))),
            (O("a", ("=", 1)), T("d", "bool_true")),
            (T("b", "bool_true"), O("c", ("=", 2))),
            (T("b", "bool_true"), T("d", "bool_true")),
        ),
    ),
    ("a = 1 or a = 1.0 or 1 = a", cl((O("a", ("=", 1)),))),
    ("a = 1 or (a = 1 and b)", cl((O("a", ("=", 1)),))),
    ("(a = 1 or a = 2) and a = 1", cl((O("a", ("=", 1)),))),
    (
        "not (x and (y or not z))",
        cl(
            (T("x", "undefined"),),
            (T("x", "bool_false"),),
            (T("y", "undefined"), T("z", "bool_true")),
            (T("y", "bool_false"), T("z", "bool_true")),
        ),
    ),
]


@pytest.mark.parametrize(("text", "expected"), EXPECTED, ids=[t for t, _ in EXPECTED])
def test_normal_form(text: str, expected: set[frozenset[Atom]]) -> None:
    assert clauses(text) == expected


def test_always_defined_attributes_drop_null_tests() -> None:
    assert clauses("not (r = 1)", always_defined={"r"}) == cl((O("r", ("!=", 1)),))
    assert clauses("r is null or a = 1", always_defined={"r"}) == cl((O("a", ("=", 1)),))
    assert clauses("r is not null", always_defined={"r"}) == cl(())
    assert clauses("not b", always_defined={"b"}) == cl((T("b", "bool_false"),))


def test_max_clauses() -> None:
    text = "(a = 1 or a = 2) and (b = 1 or b = 2) and (c = 1 or c = 2)"
    assert len(to_clauses(parse(text))) == 8
    assert len(to_clauses(parse(text), max_clauses=8)) == 8
    with pytest.raises(InvalidInput) as info:
        to_clauses(parse(text), max_clauses=7)
    assert "more than 7 clauses in disjunctive normal form" in str(info.value)


def test_max_clauses_stops_a_blow_up_early() -> None:
    text = " and ".join(f"(x{i} = 1 or y{i} = 2)" for i in range(40))  # 2**40 clauses
    with pytest.raises(InvalidInput, match="more than 100 clauses"):
        to_clauses(parse(text), max_clauses=100)


# -- atoms ---------------------------------------------------------------------------------------


def test_atoms_are_canonical() -> None:
    assert O("a", ("=", 1)) == O("a", ("=", 1.0))
    assert hash(O("a", ("=", 1))) == hash(O("a", ("=", 1.0)))
    assert O("a", ("=", 1.0)).entries == (("=", 1),)
    assert type(O("a", ("=", -0.0)).entries[0][1]) is int
    assert O("a", ("=", 1e300)).entries == (("=", 1e300),)  # beyond int64: stays a float
    assert O("a", ("=", 2), ("=", 1), ("=", 2)).entries == (("=", 1), ("=", 2))
    assert O("a", ("=", 1)) != O("b", ("=", 1))
    assert O("a", ("=", 1)) != O("a", ("<=", 1))
    assert O("a", ("=", 1)) != O("a", ("=", "1"))
    assert T("l", "one_of", (2, 1, 1)) == T("l", "one_of", (1, 2))
    assert T("l", "one_of", (2, 1)).arg == (1, 2)
    assert T("l", "has", 1) != T("l", "has", "1")
    assert len({O("a", ("=", 1)), O("a", ("=", 1.0)), T("a", "undefined")}) == 2


def test_atoms_sort_across_kinds_and_types() -> None:
    atoms = [
        T("a", "has", "x"),
        O("b", ("<", "x")),
        O("a", ("<", 1)),
        T("a", "undefined"),
        O("a", ("<", 1.5)),
        T("a", "one_of", (1, 2)),
    ]
    assert sorted(atoms) == [
        O("a", ("<", 1)),
        O("a", ("<", 1.5)),
        T("a", "undefined"),
        T("a", "has", "x"),
        T("a", "one_of", (1, 2)),
        O("b", ("<", "x")),
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("a", "nope"), "unknown test"),
        (("a", "undefined", 1), "takes no argument"),
        (("a", "has", True), "takes a number or a string"),
        (("a", "has", b"x"), "takes a number or a string"),
        (("a", "one_of", (1,)), "non-canonical"),
        (("a", "one_of", [1, 2]), "takes a tuple"),
        (("a", "ends_with", ""), "non-empty string"),
    ],
)
def test_non_canonical_tests_are_refused(args: tuple[object, ...], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        TestAtom(*args)  # type: ignore[arg-type]


def test_order_atoms_refuse_bad_entries() -> None:
    with pytest.raises(ValueError):
        OrderAtom("a", [])
    with pytest.raises(ValueError):
        OrderAtom("a", [("~", 1)])
    with pytest.raises(ValueError):
        OrderAtom("a", [("=", True)])
    with pytest.raises(ValueError):
        OrderAtom("a", [("=", 1), ("=", "x")])


@pytest.mark.parametrize(
    ("test", "arg", "expected"),
    [
        ("one_of", (), None),
        ("one_of", (5,), T("l", "has", 5)),
        ("one_of", (5, 5), T("l", "has", 5)),
        ("all_of", (5,), T("l", "has", 5)),
        ("all_of", (), T("l", "defined")),
        ("none_of", (), T("l", "defined")),
        ("none_of", (5,), T("l", "lacks", 5)),
        ("not_all_of", (), None),
        ("not_all_of", (5,), T("l", "lacks", 5)),
        ("ends_with", "", T("l", "defined")),
        ("contains", "", T("l", "defined")),
        ("not_ends_with", "", None),
        ("not_contains", "", None),
        ("has", 3, T("l", "has", 3)),
    ],
)
def test_make_test(test: str, arg: object, expected: TestAtom | None) -> None:
    assert make_test("l", test, arg) == expected


def test_interval() -> None:
    assert O("a", ("<", 5)).interval() == (None, False, 5, False)
    assert O("a", ("<=", 5)).interval() == (None, False, 5, True)
    assert O("a", ("=", 5)).interval() == (5, True, 5, True)
    assert O("a", (">=", "k")).interval() == ("k", True, None, False)
    assert O("a", (">", 2.5)).interval() == (2.5, False, None, False)
    assert O("a", ("!=", 5)).interval() is None
    assert O("a", ("=", 1), ("=", 2)).interval() is None


def test_holds_and_requires_defined() -> None:
    ev: dict[str, object] = {"a": 3, "s": "abc", "l": (1, 2), "b": False, "e": ()}
    table: list[tuple[Atom, bool]] = [
        (O("a", ("<", 5)), True),
        (O("a", ("!=", 3)), False),
        (O("a", ("<", 1), (">", 2)), True),
        (O("a", ("=", 1), ("=", 3.0)), True),
        (O("z", ("!=", 3)), False),
        (T("z", "undefined"), True),
        (T("a", "undefined"), False),
        (T("a", "defined"), True),
        (T("b", "bool_false"), True),
        (T("b", "bool_true"), False),
        (T("z", "bool_false"), False),
        (T("e", "empty"), True),
        (T("l", "not_empty"), True),
        (T("z", "not_empty"), False),
        (T("l", "has", 2), True),
        (T("l", "lacks", 2), False),
        (T("z", "lacks", 2), False),
        (T("l", "one_of", (2, 9)), True),
        (T("l", "none_of", (3, 9)), True),
        (T("z", "none_of", (3, 9)), False),
        (T("l", "all_of", (1, 2)), True),
        (T("l", "not_all_of", (1, 3)), True),
        (T("s", "ends_with", "bc"), True),
        (T("s", "not_ends_with", "bc"), False),
        (T("s", "contains", "b"), True),
        (T("s", "not_contains", "x"), True),
        (T("z", "not_contains", "x"), False),
    ]
    for atom, expected in table:
        assert atom.holds(ev) is expected, atom
        is_null_test = atom in (T("z", "undefined"), T("a", "undefined"))
        assert atom.requires_defined is not is_null_test, atom


def test_negations() -> None:
    assert O("a", ("<", 1), (">", 5)).negate() == [
        (NULL_A,),
        (O("a", (">=", 1)), O("a", ("<=", 5))),
    ]
    assert T("a", "undefined").negate() == [(DEF_A,)]
    assert T("a", "defined").negate() == [(NULL_A,)]
    assert T("a", "has", 1).negate() == [(NULL_A,), (T("a", "lacks", 1),)]
    assert T("a", "one_of", (1, 2)).defined_negation() == T("a", "none_of", (1, 2))


def test_tuple_round_trip() -> None:
    atoms = [O("a", ("<", 1), (">", 2.5)), O("s", (">=", "x")), T("l", "one_of", ("a", "b"))]
    atoms += [T("a", "undefined"), T("l", "has", 3)]
    for atom in atoms:
        assert atom_from_tuple(atom.as_tuple()) == atom
        assert atom_from_tuple([list(x) if isinstance(x, tuple) else x for x in atom.as_tuple()])


@pytest.mark.parametrize(
    "consts",
    [
        (3, 1, 2),
        (1, 1, 2),  # a repeat (a damaged record): the constructor's answer
        ("b", "a", "\U0010ffff", ""),
        (1, 2.0, 2.5),
        (True, 2),
        (-(2**63), 2**63 - 1, 2**63),
        (1, "a"),
    ],
)
def test_in_list_tuples_rebuild_as_the_constructor_builds(consts: tuple[object, ...]) -> None:
    """The fast path of ``atom_from_tuple`` for ``=``-only entries gives the constructor's
    atom (entries, key, hash), or its error."""
    t = ("order", "a", [["=", c] for c in consts])
    try:
        want = OrderAtom("a", [("=", c) for c in consts])
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)[:20]):
            atom_from_tuple(t)
        return
    got = atom_from_tuple(t)
    assert got == want and hash(got) == hash(want)
    assert got.entries == want.entries and got._key == want._key  # type: ignore[attr-defined]


def test_string_successor() -> None:
    assert string_successor("ab") == "ac"
    assert string_successor("a\U0010ffff") == "b"
    assert string_successor("\U0010ffff\U0010ffff") is None
    assert string_successor("") is None
    assert string_successor("\ud7ff") == "\ue000"  # surrogates are skipped


def test_clauses_hold() -> None:
    cs = [(O("a", ("=", 1)), T("b", "bool_true")), (T("a", "undefined"),)]
    assert clauses_hold(cs, {})
    assert clauses_hold(cs, {"a": 1, "b": True})
    assert not clauses_hold(cs, {"a": 1, "b": False})
    assert not clauses_hold([], {})
    assert clauses_hold([()], {})


@pytest.mark.parametrize(
    "text",
    [t for t, _ in EXPECTED] + ['s = "a\\"b\\\\c\\n\\u0001"', "f = 1.5e300", "f < -2.5e-7"],
)
def test_rendering_normalizes_back(text: str) -> None:
    cs = to_clauses(parse(text))
    assert to_clauses(parse(clauses_to_expr(cs))) == cs
