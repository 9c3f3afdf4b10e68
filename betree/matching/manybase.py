"""What the batch forms of the direct atoms' indexes share: the answer's shape
(:data:`Many`, :data:`Words`), the per-event fallback (:class:`Each`, :func:`each`) and
joining answers (:func:`joined`).

Why apart: :mod:`betree.matching.directmany` and :mod:`betree.matching.geomany` both build
on these, and neither imports the other.  Cost: none of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.matching import directkinds

Event = Mapping[str, object]
#: (held ids, their events' positions, failed default ids, their positions, exact tests),
#: ids and positions int64
Many = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]
#: atoms' bits as rows over a batch's words: (atom ids, ``words x atoms`` bits, held (True)
#: or a failing default (False))
Words = tuple[np.ndarray, np.ndarray, bool]
NONE = np.zeros(0, dtype=np.int64)


class Each:
    """The per-event ``found`` of an index, event by event (the kinds not batched)."""

    __slots__ = ("index",)

    def __init__(self, index: Any) -> None:
        self.index = index

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        return each(self.index, range(len(values)), values, events)


def each(index: Any, at: Sequence[int], values: Sequence[object], events: Sequence[Event]) -> Many:
    held: list[np.ndarray] = []
    failed: list[np.ndarray] = []
    held_at: list[int] = []
    failed_at: list[int] = []
    tests = 0
    for k in at:
        ok, gone, n = index.found(values[k], events[k])
        tests += n
        if len(ok):
            held.append(ok)
            held_at += [k] * len(ok)
        if len(gone):
            failed.append(gone)
            failed_at += [k] * len(gone)
    return (
        directkinds.joined(held),
        directkinds.ids(held_at),
        directkinds.joined(failed),
        directkinds.ids(failed_at),
        tests,
    )


def each_atom(
    atoms: list[tuple[int, Any]], values: Sequence[object], events: Sequence[Event]
) -> Many:
    """Atoms no index covers, each tested on each event (none of the tests of today)."""
    held = [(aid, k) for k, event in enumerate(events) for aid, atom in atoms if atom.holds(event)]
    ids = directkinds.ids
    return (
        ids([a for a, _ in held]),
        ids([k for _, k in held]),
        NONE,
        NONE,
        len(atoms) * len(values),
    )


def joined(parts: list[Many]) -> Many:
    """Several answers for the same events as one."""
    return join_parts(parts)


def join_parts(parts: list[Many]) -> Many:
    return (
        directkinds.joined([p[0] for p in parts]),
        directkinds.joined([p[1] for p in parts]),
        directkinds.joined([p[2] for p in parts]),
        directkinds.joined([p[3] for p in parts]),
        sum(p[4] for p in parts),
    )
