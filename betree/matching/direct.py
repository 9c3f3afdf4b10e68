"""The atoms matching tests per event (not through a PB+tree), indexed by kind.

Why: phase 1 of matching (:meth:`betree.matching.pages.Pages.match`,
:func:`betree.matching.batch.satisfied`, :mod:`betree.packed.flatbatch`) needs the *direct* atoms
that hold
on each event: those of every attribute the event defines, and those true on an undefined
attribute (``a is null``).  Testing each of them for every event made phase 1 cost in
proportion to the subscriptions; instead each kind of test has an index
(:mod:`betree.matching.directkinds`: list postings, suffixes, trigrams, a geo grid, frequency-cap
groups, segment bisection, one RE2 set of patterns; :mod:`betree.matching.sameelement`: the ``any``
atoms over an event's elements) that finds the few atoms that may hold
and tests only those.  The rest (``defined``, ``bool``, ``empty`` and the like: a handful an
attribute) are tested each event.

The atoms that hold for most events (``none of``, ``not ends_with`` and the other negated
forms, the frequency caps no cap names: thousands an event on ad-targeting rules) are each
attribute's ``default``: held wherever the attribute is defined, but for the few an index
finds failing.  :func:`mark` sets one event's truths so, and a batch ORs an attribute's
defaults into the events defining it at once (:func:`found`: the rest, event by event).

A :class:`DirectAtoms` is built from one attribute's atoms alone, so that a snapshot may
rebuild only the attributes that changed.  :func:`counting` collects, per kind, the exact
tests run and the atoms that held (for ``bexdb bench``); off, it costs one global read per
attribute and event.

Cost: built once per snapshot, linear in the atoms; per event, work in proportion to the
value and to the candidates each index yields (see :mod:`betree.matching.directkinds`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol

import numpy as np

from betree.lang import special
from betree.lang.atoms import Atom, TestAtom
from betree.matching import directkinds, directmany, geomany, manybase, sameelement


class _Index(Protocol):
    default: directkinds.Complement

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None: ...

    def found(self, value: object, event: Mapping[str, object]) -> directkinds.Found: ...


_INDEXES: dict[str, type[_Index]] = {
    "list": directkinds.ListPostings,
    "suffix": directkinds.Suffixes,
    "contains": directkinds.Needles,
    "geo": directkinds.GeoGrid,
    "cap": directkinds.CapGroups,
    "segment": directkinds.SegmentTests,
    "pattern": directkinds.Patterns,
    "presence": directkinds.Presence,
    "any": sameelement.ElementIndex,
}

#: A geo grid whose event's cells hold more entries than this, expected, answers one event
#: through its arrays (:meth:`betree.matching.geomany.GeoMany.one`: ~12 numpy calls over
#: the cells' entries), against ~0.5-0.8 µs an entry looped in Python (measured, load ~10
#: on 2 cores, with ~25 numpy calls: rich 20K, ~143 entries, 64-73 µs against 71-86 looped;
#: rich 100K, ~712 entries, 96-146 µs against 483-547 looped and 194-210 through the batch
#: form; with ~12, docs/bench/match-rich-sharded/README.md, richev41; re-measured with ~12,
#: load ~16, richkey43: rich 3K, ~46 entries, 18.6 µs against 39.0 looped; rich 20K seed
#: 11, ~265, 36.7 against 479: ~17 µs fixed against ~0.8 an entry looped, even at ~20)
GEO_LOOP_MOST = 32
#: List postings longer than this on average (atoms a list element) answer one event through
#: their batch form (:class:`betree.matching.directmany.ListMany`: arrays, where the loop
#: joins Python lists; rich 100K's interests, ~112 an element: 148 -> 88 µs an event;
#: rich 20K's, ~22: 39 µs looped against 77)
LIST_POSTING_MOST = 64

#: Per kind, [events, exact tests, atoms held] while :func:`counting` is on, else ``None``.
_counts: dict[str, list[int]] | None = None


#: (held ids beyond the defaults, their events' positions, failed defaults, theirs)
Many = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class DirectAtoms:
    """One attribute's direct atoms: ``undefined`` the ids of those true when the event
    does not define the attribute; when it does, ``default`` (those held unless found
    failing) and :meth:`found`'s."""

    __slots__ = (
        "active",
        "always",
        "batched",
        "busy",
        "default",
        "indexes",
        "one",
        "ran",
        "reads",
        "undefined",
    )

    def __init__(self, atoms: list[tuple[int, Atom]]) -> None:
        self.undefined = [aid for aid, atom in atoms if not atom.requires_defined]
        #: the atoms tested every event (no index: a few an attribute)
        self.always: list[tuple[int, Atom]] = []
        by_kind: dict[str, list[tuple[int, TestAtom]]] = {}
        for aid, atom in atoms:
            kind = directkinds.KIND_OF.get(atom.test) if isinstance(atom, TestAtom) else None
            if kind is None:
                self.always.append((aid, atom))
            else:
                by_kind.setdefault(kind, []).append((aid, atom))  # type: ignore[arg-type]
        self.indexes: list[tuple[str, _Index]] = [
            (kind, _INDEXES[kind](listed)) for kind, listed in by_kind.items()
        ]
        #: the atoms that hold when the attribute is defined, but for those found failing
        self.default = directkinds.Complement(
            [aid for _, index in self.indexes for aid in index.default.ids.tolist()]
        )
        #: the indexes that may find something (not those of defaults alone: ``defined``)
        self.active = [
            (kind, index)
            for kind, index in self.indexes
            if not isinstance(index, directkinds.Presence) or index.pairs
        ]
        #: whether :meth:`found` has anything to do (not so for an attribute whose only
        #: direct atoms are ``defined`` or ``is null``: 11 of rich rules' 18, a call each an
        #: event skipped)
        self.busy = bool(self.always or self.active)
        #: the other attributes :meth:`found` may read on the event (``now`` for the segment
        #: and cap tests, the longitude for the geo ones), so that its answer is a function
        #: of the value and theirs (memoised so: :class:`betree.packed.slots.Slots`); None
        #: where not known (``any`` atoms, atoms no index covers)
        self.reads = (
            None
            if self.always
            else _reads([atom for _, atom in atoms if isinstance(atom, TestAtom)])
        )
        #: the indexes' batch forms (:mod:`betree.matching.directmany`), made at first use
        self.batched: list[tuple[str, directmany.Batched]] | None = None
        #: the indexes :meth:`found` asks, each by its own or its batch form (made at first use)
        self.one: list[tuple[str, _Index | _OneByMany | _OneGeo]] | None = None
        #: :meth:`runs`' answer (made at first use)
        self.ran: list[tuple[np.ndarray, bool]] | None = None

    def runs(self) -> list[tuple[np.ndarray, bool]]:
        """The atoms whose bits :meth:`found_words` may give as rows over words, each kind's
        held atoms (True) and failing defaults (False) in the order its rows come
        (:func:`betree.matching.directmany.list_runs`, :func:`betree.matching.geomany.geo_runs`;
        not the segments', whose atoms differ by batch): a batch's numbering
        (:mod:`betree.packed.numbering`) makes each a run of slots, its rows one slice."""
        if self.ran is None:
            self.ran = []
            for _, index in self.active:
                if isinstance(index, directkinds.ListPostings):
                    self.ran += directmany.list_runs(index)
                elif isinstance(index, directkinds.GeoGrid):
                    self.ran += geomany.geo_runs(index)
        return self.ran

    def prepare(self) -> None:
        """Make now what :meth:`found` makes at its first use (a fold's thread does: rich
        50K's ``latitude`` geo grid, ~150 ms, out of the first match after the fold; its
        pattern sets compiled, ~7 ms)."""
        if self.one is None:
            self.one = [(kind, _one(kind, index)) for kind, index in self.active]
            for _, index in self.active:
                if isinstance(index, directkinds.Patterns):
                    index.set.compile()

    def found(
        self,
        value: object,
        event: Mapping[str, object],
        held: list[np.ndarray],
        failed: list[np.ndarray],
    ) -> None:
        """On ``event``, which defines the attribute as ``value`` (validated): the ids of
        the atoms that hold beyond ``default`` appended to ``held``, those of ``default``
        that fail to ``failed`` (arrays, joined once by the caller)."""
        counts = _counts
        if self.always:  # atoms no index covers (none of the tests of today)
            ok = directkinds.ids([aid for aid, atom in self.always if atom.holds(event)])
            held.append(ok)
            if counts is not None:
                _add(counts, "other", len(self.always), len(ok))
        if self.one is None:
            self.prepare()
        for kind, index in self.one or ():
            ok, gone, tests = index.found(value, event)
            if len(ok):
                held.append(ok)
            if len(gone):
                failed.append(gone)
            if counts is not None:
                held_n = len(np.unique(ok)) + len(index.default) - len(np.unique(gone))
                _add(counts, kind, tests, held_n)

    def found_many(self, values: Sequence[object], events: Sequence[Mapping[str, object]]) -> Many:
        """:meth:`found` for events that all define the attribute (``values[k]`` that of
        ``events[k]``): the held ids beyond ``default`` and the positions (in ``values``)
        of the events they hold for, the failing defaults and theirs."""
        return self.found_words(values, events, None)[0]

    def found_words(
        self,
        values: Sequence[object],
        events: Sequence[Mapping[str, object]],
        rows: np.ndarray | None,
    ) -> tuple[Many, list[manybase.Words]]:
        """:meth:`found_many`, with (given ``rows``: each event's own bit as a row over the
        batch's words) the long list postings' atoms, segment atoms held by many events and
        a geo grid's over many (entry, event) pairs, as rows of bits over those words (a
        list's and a grid's of every atom of one of :meth:`runs`, held or not)
        (:meth:`betree.matching.directmany.ListMany.words`,
        :meth:`betree.matching.directmany.SegmentMany.words`,
        :meth:`betree.matching.geomany.GeoMany.words`) rather than (atom, event) pairs."""
        counts = _counts
        if self.batched is None:
            self.batched = [(kind, directmany.many(kind, index)) for kind, index in self.active]
        parts: list[manybase.Many] = []
        planes: list[manybase.Words] = []
        if self.always:
            parts.append(manybase.each_atom(self.always, values, events))
        for kind, index in self.batched:
            got: manybase.Many
            own: list[manybase.Words] = []
            if rows is not None and isinstance(
                index, directmany.ListMany | directmany.SegmentMany | geomany.GeoMany
            ):
                got, own = index.words(values, events, rows)
                planes += own
            else:
                got = index.found(values, events)
            parts.append(got)
            if counts is not None:
                gone = len(np.unique(got[3] * (1 << 32) + got[2])) if len(got[2]) else 0
                bits = [int(np.bitwise_count(b).sum()) * (1 if on else -1) for _, b, on in own]
                held = len(got[0]) + len(index.index.default) * len(values) - gone + sum(bits)
                c = counts.setdefault(kind, [0, 0, 0])
                c[0] += len(values)
                c[1] += got[4]
                c[2] += held
        on, on_at, off, off_at, _ = manybase.joined(parts)
        return (on, on_at, off, off_at), planes


class _OneByMany:
    """An index answering one event through its batch form (:data:`GEO_LOOP_MOST`,
    :data:`LIST_POSTING_MOST`)."""

    __slots__ = ("default", "many")

    def __init__(self, kind: str, index: _Index) -> None:
        self.default = index.default
        self.many = directmany.many(kind, index)

    def found(self, value: object, event: Mapping[str, object]) -> directkinds.Found:
        held, _, failed, _, tests = self.many.found([value], [event])
        return held, failed, tests


class _OneGeo:
    """A geo grid of many entries a cell, answering one event by
    :meth:`geomany.GeoMany.one` (the cells in Python, their entries in numpy)."""

    __slots__ = ("default", "many")

    def __init__(self, index: directkinds.GeoGrid) -> None:
        self.default = index.default
        self.many = geomany.GeoMany(index)

    def found(self, value: object, event: Mapping[str, object]) -> directkinds.Found:
        return self.many.one(value, event)


def _one(kind: str, index: _Index) -> _Index | _OneByMany | _OneGeo:
    """How :meth:`DirectAtoms.found` asks ``index``: a geo grid of many entries a cell
    through its arrays, list postings long on average by their batch form; any other by
    itself."""
    if isinstance(index, directkinds.GeoGrid) and index.loop > GEO_LOOP_MOST:
        return _OneGeo(index)
    if isinstance(index, directkinds.ListPostings):
        postings = [index.pos_any, index.neg_any, index.count_of]
        ids = sum(len(atoms) for posting in postings for atoms in posting.values())
        if ids > LIST_POSTING_MOST * max(1, sum(map(len, postings))):
            return _OneByMany(kind, index)
    return index


def _reads(atoms: list[TestAtom]) -> tuple[str, ...] | None:
    """The attributes beyond their own that the truths of ``atoms`` read: ``now`` for the
    time functions, the longitude of a geo test (and of its out-of-range test); None where
    an ``any`` atom's inner tests may read more."""
    out: dict[str, None] = {}
    for atom in atoms:
        base = atom.test.removeprefix("not_")
        args: tuple[object, ...] = atom.arg if isinstance(atom.arg, tuple) else ()
        if base == "any":
            return None
        if base.startswith("segment_") or base == "within_frequency_cap":
            out[special.NOW] = None
        elif base == "geo_within_radius":
            out[special.longitude_attr(args)] = None
        elif base == special.OUT_OF_RANGE:
            out[str(args[0]) if args else special.LONGITUDE] = None
    return tuple(out)


def counting_now() -> bool:
    """Whether :func:`counting` is open (every index asked, none answered from a memo)."""
    return _counts is not None


def _add(counts: dict[str, list[int]], kind: str, tests: int, held: int) -> None:
    c = counts.setdefault(kind, [0, 0, 0])
    c[0] += 1
    c[1] += tests
    c[2] += held


@contextmanager
def counting() -> Iterator[dict[str, list[int]]]:
    """Collect, while open, per kind of direct atom ``[event-attribute lookups, exact tests
    run, atoms that held]`` (kinds: those of :mod:`betree.matching.directkinds`, and ``other``)."""
    global _counts
    saved, _counts = _counts, {}
    try:
        yield _counts
    finally:
        _counts = saved


def found(
    direct: Mapping[str, DirectAtoms], values: Mapping[str, object]
) -> tuple[np.ndarray, np.ndarray]:
    """For a validated event: the ids (int64) of the direct atoms that hold beyond the
    ``default`` of the attributes it defines (with, for those it does not define, the
    atoms true there), and the ids of those defaults that fail."""
    held: list[np.ndarray] = []
    failed: list[np.ndarray] = []
    undefined: list[int] = []
    for attr, group in direct.items():
        if attr in values:
            if group.busy:
                group.found(values[attr], values, held, failed)
        else:
            undefined += group.undefined
    held.append(directkinds.ids(undefined))
    return directkinds.joined(held), directkinds.joined(failed)


def found_batch(
    direct: Mapping[str, DirectAtoms], batch: Sequence[Mapping[str, object]]
) -> tuple[list[tuple[DirectAtoms, np.ndarray]], Many]:
    """For a batch of validated events: per attribute, its atoms and the positions of the
    events defining it (int64, ascending; the ``default`` holds there, the ``undefined``
    atoms on the others); and, with the events' positions in the batch, the atoms held
    beyond those and the defaults that fail (:meth:`DirectAtoms.found_many`)."""
    defining: dict[str, list[int]] = {attr: [] for attr in direct}
    for e, values in enumerate(batch):
        for attr in values:
            got = defining.get(attr)
            if got is not None:
                got.append(e)
    groups = []
    parts: list[manybase.Many] = []
    for attr, group in direct.items():
        events = np.array(defining[attr], dtype=np.int64)
        groups.append((group, events))
        if not len(events):
            continue
        on, on_at, off, off_at = group.found_many(
            [batch[e][attr] for e in defining[attr]], [batch[e] for e in defining[attr]]
        )
        parts.append((on, events[on_at], off, events[off_at], 0))
    held, held_at, failed, failed_at, _ = manybase.joined(parts)
    return groups, (held, held_at, failed, failed_at)


def mark(
    sat: np.ndarray,
    direct: Mapping[str, DirectAtoms],
    values: Mapping[str, object],
    base: int = 0,
) -> None:
    """Set in ``sat`` (truth by atom id, this group's ids from ``base``) every direct atom
    that holds on a validated event, and only those (their other entries left as found)."""
    held, failed = found(direct, values)
    defaults = [g.default.ids for attr, g in direct.items() if attr in values and len(g.default)]
    if base:  # (a shard's group: its ids shifted; else not copied)
        defaults, held, failed = [ids + base for ids in defaults], held + base, failed + base
    if defaults:
        sat[directkinds.joined(defaults)] = True
        if len(failed):
            sat[failed] = False
    if len(held):
        sat[held] = True
