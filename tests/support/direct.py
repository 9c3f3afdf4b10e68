"""One attribute's direct atoms that hold on an event, as the matchers set them
(:func:`betree.matching.direct.mark`: the defaults less the failures, and the other hits), for
tests to compare with every atom's own test."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from betree.matching.direct import DirectAtoms, mark


def held(group: DirectAtoms, attr: str, event: Mapping[str, object], size: int) -> list[int]:
    """The ids, ascending, of ``group``'s atoms on ``attr`` (ids under ``size``) that hold
    on ``event``."""
    sat = np.zeros(size, dtype=bool)
    mark(sat, {attr: group}, event)
    return np.flatnonzero(sat).tolist()  # type: ignore[no-any-return]
