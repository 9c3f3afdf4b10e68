"""The atoms matching tests per event (not through a PB+tree), grouped by what they need.

Why: phase 1 of matching (:meth:`betree.index.Index.match_validated`,
:func:`betree.batch.satisfied`) evaluates the *direct* atoms of every attribute an event
defines, and sets those true on an undefined attribute (``a is null``).  Most such atoms
are few and shared (list and bool tests), but two kinds come by the thousand:

- ``segment_within``/``segment_before`` tests of ad-tech subscriptions
  (:mod:`betree.lang.special`): each can hold only on an event whose segments hold its
  segment id.  They are keyed by segment id and sorted by their seconds, so that an event
  finds the ones that hold by one bisection per segment it carries: ``segment_within(id,
  s)`` holds iff ``s >= now - t`` (``t`` the segment's time in whole seconds),
  ``segment_before(id, s)`` iff ``s < now - t``, the same integer arithmetic as the tests.
- ``like``/``matches`` patterns (:mod:`betree.lang.patterns`): an attribute's patterns
  run in one RE2 set, one call per event (about 2.5 µs for 1,000 patterns, where one
  call per pattern costs 2-5 µs each); each pattern's atoms hold or fail from its answer.

Cost: built once per commit with the index's snapshot (one sort per segment id; the RE2
set compiled at its first event, about 6 ms for 1,000 patterns); per event, one bisection
per segment it carries, one RE2 set match per attribute with patterns, and a test per
other direct atom.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping

from betree.lang import patterns
from betree.lang.atoms import TESTS, Atom, TestAtom
from betree.lang.special import NOW

#: (seconds of each test sorted, their atom ids in that order) for within and before.
_Sorted = tuple[list[int], list[int]]


class DirectAtoms:
    """One attribute's direct atoms: ``undefined`` the ids of those true when the event
    does not define the attribute; :meth:`hits` those that hold when it does."""

    __slots__ = ("always", "by_pattern", "by_segment", "negated", "set", "undefined")

    def __init__(self, atoms: list[tuple[int, Atom]]) -> None:
        self.undefined = [aid for aid, atom in atoms if not atom.requires_defined]
        self.always: list[tuple[int, Atom]] = []
        regexes: dict[str, int] = {}
        self.by_pattern: list[list[tuple[int, bool]]] = []  # (atom id, negated), by regex
        self.negated: list[int] = []  # the negated patterns' atom ids
        tests: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
        for aid, atom in atoms:
            test = atom.test if isinstance(atom, TestAtom) else ""
            if test in ("segment_within", "segment_before"):
                sid: int = atom.arg[0]  # type: ignore[attr-defined]
                secs: int = atom.arg[1]  # type: ignore[attr-defined]
                within, before = tests.setdefault(sid, ([], []))
                (within if test == "segment_within" else before).append((secs, aid))
            elif TESTS.get(test) == "pattern":
                kind = test.removeprefix("not_")
                expr = patterns.regex(kind, atom.arg)  # type: ignore[attr-defined]
                k = regexes.setdefault(expr, len(regexes))
                if k == len(self.by_pattern):
                    self.by_pattern.append([])
                self.by_pattern[k].append((aid, test != kind))
                if test != kind:
                    self.negated.append(aid)
            else:
                self.always.append((aid, atom))
        self.set = patterns.PatternSet(list(regexes)) if regexes else None
        self.by_segment: dict[int, tuple[_Sorted, _Sorted]] = {
            sid: (_sorted(within), _sorted(before)) for sid, (within, before) in tests.items()
        }

    def hits(self, value: object, event: Mapping[str, object]) -> list[int]:
        """The ids of the atoms that hold on ``event``, which defines the attribute as
        ``value`` (validated)."""
        out = [aid for aid, atom in self.always if atom.holds(event)]
        if self.set is not None:
            out.extend(self._pattern_hits(value))
        if self.by_segment:
            out.extend(self.segment_hits(value, event))
        return out

    def _pattern_hits(self, value: object) -> list[int]:
        if not isinstance(value, str) or self.set is None:  # (validated: never)
            return []
        out: list[int] = []
        failed: set[int] = set()
        for k in self.set.match(value):
            for aid, negated in self.by_pattern[k]:
                if negated:
                    failed.add(aid)
                else:
                    out.append(aid)
        out.extend(aid for aid in self.negated if aid not in failed)
        return out

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


def holding(direct: Mapping[str, DirectAtoms], values: Mapping[str, object]) -> list[int]:
    """The ids of every direct atom that holds on a validated event: per attribute, the
    :meth:`DirectAtoms.hits` of its value, or the atoms true when it is undefined."""
    out: list[int] = []
    for attr, group in direct.items():
        out += group.hits(values[attr], values) if attr in values else group.undefined
    return out
