"""One attribute's direct atoms that hold on an event, as the matchers set them
(:func:`betree.matching.direct.mark`: the defaults less the failures, and the other hits), and
on a batch of events at once (:func:`betree.matching.direct.found_batch`), for tests to compare
with every atom's own test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from betree.matching.direct import DirectAtoms, found_batch, mark


def held(group: DirectAtoms, attr: str, event: Mapping[str, object], size: int) -> list[int]:
    """The ids, ascending, of ``group``'s atoms on ``attr`` (ids under ``size``) that hold
    on ``event``."""
    sat = np.zeros(size, dtype=bool)
    mark(sat, {attr: group}, event)
    return np.flatnonzero(sat).tolist()  # type: ignore[no-any-return]


def held_many(
    group: DirectAtoms, attr: str, events: Sequence[Mapping[str, object]], size: int
) -> list[list[int]]:
    """:func:`held` of each event, from one batch of them all (as the batch matchers set
    the truths: the defaults and ``undefined`` atoms by the events defining the attribute,
    then the hits, then the failures cleared)."""
    sat = np.zeros((len(events), size), dtype=bool)
    [(_, defining)], (on, on_at, off, off_at) = found_batch({attr: group}, events)
    others = np.setdiff1d(np.arange(len(events)), defining)
    sat[np.ix_(defining, group.default.ids)] = True
    sat[np.ix_(others, np.array(group.undefined, dtype=np.int64))] = True
    sat[on_at, on] = True
    sat[off_at, off] = False
    return [np.flatnonzero(row).tolist() for row in sat]
