"""A list attribute's validated event value: a tuple that answers membership from a set.

Why: every list test of every subscription (``v in a``, ``a one of (...)``, ``none of``,
``all of`` and their negations: :mod:`betree.lang.holds`) used to scan the event's list, so
an event with a list of a million elements cost (list atoms) x (list length): 7.3 s per
event at 5,699 subscriptions (issue 28).  :meth:`Schema.validate_event
<betree.lang.schema.Schema.validate_event>` makes each list value an :class:`Elements`, whose
set of elements is built once, on the first test that needs it, and shared by every atom
tested on that event: ``v in a`` is one hash lookup, ``one of``/``none of`` a
``frozenset.isdisjoint`` (which walks the smaller of the atom's constants and the event's
elements), ``all of`` a subset test over the atom's constants.

Limit: an event's lists may hold at most :data:`MAX_EVENT_ELEMENTS` elements in all (every
list attribute, nested arrays flattened included); a larger event is an error for that
event alone (``match``: an error line; HTTP: 400), before anything is built from it.

Cost: building the set, about 50 ns an element, once per list attribute an event defines
and a list test reads; each test then costs its constants (or the event's elements, if
fewer), not the list.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

#: The most list elements one event may hold, over all its list attributes (README:
#: Language, events).  2**20: a list of a million elements is still one event.
MAX_EVENT_ELEMENTS = 1 << 20


class Elements(tuple[Any, ...]):
    """A validated list value: a tuple (order and repeats kept, as sent) whose ``in`` and
    :attr:`members` use a frozenset of its elements built on first use."""

    @cached_property
    def members(self) -> frozenset[Any]:
        """The distinct elements (built once: one pass over the list)."""
        return frozenset(self)

    def __contains__(self, x: object) -> bool:
        return x in self.members

    def __reduce__(self) -> tuple[type[Elements], tuple[tuple[Any, ...]]]:
        return Elements, (tuple(self),)  # not the set: it is rebuilt when needed


def members(value: Iterable[Any]) -> frozenset[Any]:
    """The distinct elements of a list value (an :class:`Elements`' own set, built once)."""
    if type(value) is Elements:
        return value.members
    return frozenset(value)
