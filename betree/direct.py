"""The atoms matching tests per event (not through a PB+tree), grouped by what they need.

Why: phase 1 of matching (:meth:`betree.index.Index.match_validated`,
:func:`betree.batch.satisfied`) evaluates every *direct* atom of every attribute an event
defines.  Most such atoms are few and shared (list and bool tests), but a store of ad-tech
subscriptions holds thousands of distinct ``segment_within``/``segment_before`` tests
(:mod:`betree.lang.special`), and each can hold only on an event whose segments hold its
segment id.  :class:`DirectAtoms` keys those tests by segment id and sorts them by their
seconds, so that an event finds the ones that hold by one bisection per segment it
carries: ``segment_within(id, s)`` holds iff ``s >= now - t`` (``t`` the segment's time in
whole seconds), ``segment_before(id, s)`` iff ``s < now - t``, the same integer arithmetic
as the tests themselves.

Cost: built once per commit with the index's snapshot (one sort per segment id); per event,
one bisection per segment it carries, plus the ids that hold.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping

from betree.lang.atoms import Atom, TestAtom
from betree.lang.special import NOW

#: (seconds of each test sorted, their atom ids in that order) for within and before.
_Sorted = tuple[list[int], list[int]]


class DirectAtoms:
    """One attribute's direct atoms: ``atoms`` all of them, ``always`` those tested on every
    event defining the attribute, ``by_segment`` the segment tests by segment id (see
    :meth:`segment_hits`)."""

    __slots__ = ("always", "atoms", "by_segment")

    def __init__(self, atoms: list[tuple[int, Atom]]) -> None:
        self.atoms = atoms
        self.always: list[tuple[int, Atom]] = []
        tests: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
        for aid, atom in atoms:
            if isinstance(atom, TestAtom) and atom.test in ("segment_within", "segment_before"):
                sid: int = atom.arg[0]  # type: ignore[index]
                secs: int = atom.arg[1]  # type: ignore[index]
                within, before = tests.setdefault(sid, ([], []))
                (within if atom.test == "segment_within" else before).append((secs, aid))
            else:
                self.always.append((aid, atom))
        self.by_segment: dict[int, tuple[_Sorted, _Sorted]] = {
            sid: (_sorted(within), _sorted(before)) for sid, (within, before) in tests.items()
        }

    def segment_hits(self, segments: object, event: Mapping[str, object]) -> list[int]:
        """The ids of the segment tests that hold on ``event``, whose value of the
        attribute is ``segments`` (validated: pairs sorted by segment id)."""
        now = event.get(NOW)
        if now is None:
            return []
        hits: list[int] = []
        by_segment = self.by_segment
        last = None
        for sid, ts in segments:  # type: ignore[attr-defined]
            if sid == last:
                continue  # a repeated id counts at its first occurrence
            last = sid
            found = by_segment.get(sid)
            if found is None:
                continue
            q = ts // 1_000_000 if ts >= 0 else -(-ts // 1_000_000)
            bound = now - q  # type: ignore[operator]
            (w_secs, w_ids), (b_secs, b_ids) = found
            hits.extend(w_ids[bisect_left(w_secs, bound) :])
            hits.extend(b_ids[: bisect_left(b_secs, bound)])
        return hits


def _sorted(tests: list[tuple[int, int]]) -> _Sorted:
    tests.sort()
    return [secs for secs, _ in tests], [aid for _, aid in tests]
