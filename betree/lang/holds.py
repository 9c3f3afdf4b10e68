"""What each test atom (:class:`betree.lang.atoms.TestAtom`) checks on a validated event:
one factory per test kind, ``(attribute, argument) -> holds(event)``, called once per atom.

Why apart: the tests' meaning is a set of small functions, each named by its test kind's
row in :mod:`betree.lang.testkinds` (the registry pairs them with the kinds' names, text
and negations); keeping them here leaves :mod:`betree.lang.atoms` to what an atom is and
how expressions become atoms.  Cost: one call per test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from betree.lang import patterns
from betree.lang.elements import members

Event = Mapping[str, object]
Test = Callable[[Event], bool]


class Holds(Protocol):
    """Anything with a ``holds`` test of an event (an atom)."""

    @property
    def holds(self) -> Callable[[Event], bool]: ...


def undefined(a: str, _: object) -> Test:
    return lambda e: e.get(a) is None


def defined(a: str, _: object) -> Test:
    return lambda e: e.get(a) is not None


def bool_true(a: str, _: object) -> Test:
    return lambda e: e.get(a) is True


def bool_false(a: str, _: object) -> Test:
    return lambda e: e.get(a) is False


def empty(a: str, _: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and len(v) == 0  # type: ignore[arg-type]


def not_empty(a: str, _: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and len(v) > 0  # type: ignore[arg-type]


def has(a: str, x: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and x in members(v)  # type: ignore[arg-type]


def lacks(a: str, x: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and x not in members(v)  # type: ignore[arg-type]


# the list tests read the event's set of elements (betree.lang.elements: built once per
# event and attribute); isdisjoint walks the smaller of the two sets, issubset the atom's
# constants: neither walks a long list once per atom
def one_of(a: str, xs: object) -> Test:
    s = frozenset(xs)  # type: ignore[call-overload]
    return lambda e: (v := e.get(a)) is not None and not s.isdisjoint(members(v))  # type: ignore[arg-type]


def none_of(a: str, xs: object) -> Test:
    s = frozenset(xs)  # type: ignore[call-overload]
    return lambda e: (v := e.get(a)) is not None and s.isdisjoint(members(v))  # type: ignore[arg-type]


def all_of(a: str, xs: object) -> Test:
    s = frozenset(xs)  # type: ignore[call-overload]
    return lambda e: (v := e.get(a)) is not None and s <= members(v)  # type: ignore[arg-type]


def not_all_of(a: str, xs: object) -> Test:
    s = frozenset(xs)  # type: ignore[call-overload]
    return lambda e: (v := e.get(a)) is not None and not s <= members(v)  # type: ignore[arg-type]


def ends_with(a: str, x: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and v.endswith(x)  # type: ignore[attr-defined]


def not_ends_with(a: str, x: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and not v.endswith(x)  # type: ignore[attr-defined]


def contains(a: str, x: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and x in v  # type: ignore[operator]


def not_contains(a: str, x: object) -> Test:
    return lambda e: (v := e.get(a)) is not None and x not in v  # type: ignore[operator]


def pattern(kind: str, positive: bool) -> Callable[[str, object], Test]:
    """The factory of ``a like "p"`` (``kind`` ``like``) or ``a matches "re"``, or of its
    negation on a defined value (not ``positive``)."""

    def factory(attr: str, arg: object) -> Test:
        full = patterns.matcher(kind, arg)  # type: ignore[arg-type]
        if positive:
            return lambda e: (v := e.get(attr)) is not None and full(v)  # type: ignore[arg-type]
        return lambda e: (v := e.get(attr)) is not None and not full(v)  # type: ignore[arg-type]

    return factory


def elements(positive: bool) -> Callable[[str, object], Test]:
    """The factory of ``any attr (…)`` (or, not ``positive``, of its negation on a defined
    array); its argument is the inner clauses' atoms (each with a ``holds`` on one element's
    values)."""

    def factory(attr: str, inner: object) -> Test:
        clauses: Sequence[Sequence[Holds]] = inner  # type: ignore[assignment]

        def holds(e: Event) -> bool:
            found: Any = e.get(attr)
            if found is None:
                return False
            hit = any(all(a.holds(el) for a in c) for el in found for c in clauses)
            return hit if positive else not hit

        return holds

    return factory
