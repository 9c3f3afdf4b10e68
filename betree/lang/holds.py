"""What each test atom (:class:`betree.lang.atoms.TestAtom`) checks on a validated event:
one closure per test name, built once per atom.

Why apart: the tests' meaning is a table of small functions, used by the atoms and by
nothing else of the language; keeping it here leaves :mod:`betree.lang.atoms` to what an
atom is and how expressions become atoms.  Cost: one call and a dict lookup per test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from betree.lang import patterns
from betree.lang.elements import members

Event = Mapping[str, object]


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
        return lambda e: (v := e.get(a)) is not None and x in members(v)  # type: ignore[arg-type]

    def lacks(a: str, x: object) -> Callable[[Event], bool]:
        return lambda e: (v := e.get(a)) is not None and x not in members(v)  # type: ignore[arg-type]

    # the list tests read the event's set of elements (betree.lang.elements: built once per
    # event and attribute); isdisjoint walks the smaller of the two sets, issubset the
    # atom's constants: neither walks a long list once per atom
    def one_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and not s.isdisjoint(members(v))  # type: ignore[arg-type]

    def none_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and s.isdisjoint(members(v))  # type: ignore[arg-type]

    def all_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and s <= members(v)  # type: ignore[arg-type]

    def not_all_of(a: str, xs: object) -> Callable[[Event], bool]:
        s = frozenset(xs)  # type: ignore[call-overload]
        return lambda e: (v := e.get(a)) is not None and not s <= members(v)  # type: ignore[arg-type]

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


TEST_HOLDS = _holds_factories()


def pattern_holds(attr: str, test: str, pattern: str) -> Callable[[Event], bool]:
    kind = test.removeprefix("not_")
    full = patterns.matcher(kind, pattern)
    if test == kind:
        return lambda e: (v := e.get(attr)) is not None and full(v)  # type: ignore[arg-type]
    return lambda e: (v := e.get(attr)) is not None and not full(v)  # type: ignore[arg-type]
