"""``stored_atom``: a direct record's atom made from its stored form as the constructor
would make it (type, key, hash, argument, truth), or the constructor's error; damaged or
non-canonical forms go through ``atom_from_tuple``."""

from __future__ import annotations

import pytest

from betree.lang.atoms import OrderAtom, atom_from_tuple, atom_key, make_test, stored_atom
from storage import codec

CANONICAL = [
    make_test("l", "one_of", ("b", "a", "c")),
    make_test("l", "none_of", (3, 1, 2)),
    make_test("l", "all_of", (-(2**63), 2**63 - 1)),
    make_test("l", "not_all_of", ("x", 1)),
    make_test("l", "one_of", (1.5, 2)),
    make_test("l", "has", "topic-ü"),
    make_test("l", "lacks", 7),
    make_test("n", "has", 2.5),
    make_test("l", "empty"),
    make_test("a", "undefined"),
    make_test("a", "defined"),
    make_test("s", "ends_with", ".com"),
    make_test("s", "like", "a%b"),
    OrderAtom("a", [("<", 1), (">", 2.5)]),
    OrderAtom("a", [("=", 3)]),
]


def assert_same(got: object, want: object) -> None:
    assert type(got) is type(want)
    assert got == want and hash(got) == hash(want)
    assert got.as_tuple() == want.as_tuple()  # type: ignore[attr-defined]
    assert not got < want and not want < got  # type: ignore[operator]


@pytest.mark.parametrize("atom", CANONICAL, ids=repr)
def test_a_stored_canonical_atom_is_the_constructors(atom: object) -> None:
    stored = codec.decode_value(codec.encode_value(atom.as_tuple()))  # type: ignore[attr-defined]
    keys: dict[object, tuple[int, object]] = {}
    got = stored_atom(stored, keys)
    assert_same(got, atom)
    assert_same(got, atom_from_tuple(stored))
    events = ({}, {"l": ["a", "b", 1, 2, 3]}, {"l": []}, {"s": "x.com"}, {"a": 2}, {"n": [2.5]})
    for event in events:
        assert got.holds(event) == atom.holds(event)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "arg",
    [
        ["b", "a"],  # unsorted
        ["a", "a", "b"],  # a repeat
        [2, 1.0, 1],  # equal values of two types
        [True, 2],  # a bool: the constructor's error
        ["a"],  # one value: the constructor's error
        [[1], 2],  # not a value
        [float("nan"), 1.0],
        [1.0, 2.0],
    ],
)
def test_a_damaged_or_rare_list_is_the_constructors(arg: list[object]) -> None:
    """What ``atom_from_tuple`` gives (its canonical atom, or its error)."""
    t = ["test", "l", "one_of", arg]
    try:
        want = atom_from_tuple(t)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)):
            stored_atom(t, {})
        return
    assert_same(stored_atom(t, {}), want)


def test_values_keys_are_shared_between_atoms() -> None:
    keys: dict[object, tuple[int, object]] = {}
    one = stored_atom(["test", "l", "one_of", ["a", "b"]], keys)
    two = stored_atom(["test", "l", "none_of", ["a", "c"]], keys)
    assert set(keys) == {"a", "b", "c"}
    assert atom_key(one)[3][0] is atom_key(two)[3][0]  # (one tuple for "a")
