"""Indexes of the direct atoms by kind: each finds, per event, the few atoms that may hold and
tests only those (:class:`betree.matching.direct.DirectAtoms` holds one per kind an attribute has).

Why: testing every direct atom for every event that defines its attribute made phase 1 cost
in proportion to the subscriptions, not to what matches (5,400 haversine tests and ~9,500
``isdisjoint`` an event on 20K ad-targeting rules).  Each class here is built from one
attribute's atoms alone (so that a snapshot may rebuild one attribute) and answers
``found(value, event) -> (held, failed, exact tests run)``.  Its ``default`` atoms (the
negated forms, and the frequency caps no cap names) hold for most events: they are held
whenever the attribute is defined unless listed in ``failed``, so that an event costs the
few that fail, not the thousands that hold (a batch ORs them in once an attribute);
``held`` are the others that hold:

- :class:`ListPostings` (``has``/``lacks``/``one_of``/``none_of``/``all_of``/``not_all_of``):
  value -> atoms postings, one lookup a distinct value of the event's list; ``all_of`` posted
  under its rarest value alone, held where its values are a subset of the event's; the
  negative forms are the complements (all of them but the few whose positive form held).
- :class:`Suffixes` (``ends_with``/``not_ends_with``): needle -> atoms, one dict lookup per
  distinct needle length (the value's suffix of that length).
- :class:`Needles` (``contains``/``not_contains``): each needle posted under its rarest
  trigram (or its whole self when shorter); the event's value yields its own trigrams (or
  shorter pieces), and only the needles posted there are tested.
- :class:`GeoGrid` (``geo_within_radius`` and its negation): each radius's conservative
  latitude/longitude box (:func:`betree.lang.special.geo_box`, whole longitudes at a pole
  or across ±180) in the 2x2 cells of the one grid level whose cells are at least as wide;
  an event looks up its cell at each level, the box, then the haversine.  A point beyond
  the coordinate ranges (which the formula accepts) tests every atom.
- :class:`CapGroups` (``within_frequency_cap`` and its negation): atoms by (type,
  namespace, id) (id ``None`` for the four-argument form); only the groups the event's
  caps name are tested, the others hold as when no cap applies.
- :class:`SegmentTests` (``segment_within``/``segment_before`` and their negations): keyed by
  segment id and sorted by seconds; one bisection per segment, form and sign the event
  carries, its atoms a slice of one array.
- :class:`Patterns` (``like``/``matches`` and negations): one RE2 set, one call an event.
- :class:`Presence` (``defined``, ``undefined``, ``bool_true``/``bool_false``,
  ``empty``/``not_empty``, the geo test's out-of-range points): one check of the value
  decides each group of them (``defined`` is the default: no check).

Every answer is exact (the differential tests compare them with the atoms' own ``holds``).
Cost: built once per snapshot, linear in the atoms (a geo atom in at most 4 cells); per
event, work in proportion to the value's length and the candidates, not to the atoms.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from betree.lang import patterns, special
from betree.lang.atoms import Atom, TestAtom
from betree.lang.testkinds import TEST_KINDS

Event = Mapping[str, object]
#: (ids held beyond the index's ``default``, ids of ``default`` that fail: int64, read-only,
#: an id possibly twice; the exact tests run)
Found = tuple[np.ndarray, np.ndarray, int]
_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False


def ids(found: list[int] | set[int]) -> np.ndarray:
    """Atom ids as the int64 arrays :data:`Found` gives."""
    return np.fromiter(found, dtype=np.int64, count=len(found)) if found else _NONE


def _frozen(found: list[int]) -> np.ndarray:
    """Atom ids as a read-only int64 array (returned by :data:`Found` as they are)."""
    out = np.array(found, dtype=np.int64)
    out.flags.writeable = False
    return out


class Complement:
    """An index's ``default`` atoms (the negated ones, mostly): all of them hold but
    those found failing (the attribute defined); ``where`` each one's place."""

    __slots__ = ("ids", "where")

    def __init__(self, negated: list[int]) -> None:
        self.ids = np.array(negated, dtype=np.int64)
        self.ids.flags.writeable = False
        self.where = {aid: i for i, aid in enumerate(negated)}

    def __len__(self) -> int:
        return len(self.ids)


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts as one array (no copy for one)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return _NONE
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


#: The kind (counter name) of the index serving each test name (declared with the test
#: kind: :mod:`betree.lang.testkinds`; ``any`` is :mod:`betree.matching.sameelement`'s).
KIND_OF = {kind.name: kind.direct for kind in TEST_KINDS}

_NEGATIVE = frozenset(("lacks", "none_of", "not_all_of"))
#: list postings of more ids a value than this on average are joined as arrays (measured,
#: one event alone, load ~12: rich 20K's interests, 10.4, 34 µs id by id against 25 as
#: arrays; rich 100K's audiences, 2.6, 26 against 20, but an array a value there is ~12 MB
#: of small arrays; rich 20K's audiences, 1.3, 19 against 21)
LONG_POSTINGS = 8


def _exact(atoms: list[tuple[int, Atom]], default: Complement, event: Event) -> Found:
    """Every atom tested (the value is not of the form an index reads: never once
    validated, kept so that the answer stays exact)."""
    held, failed = [], []
    for aid, atom in atoms:
        if atom.holds(event):
            if aid not in default.where:
                held.append(aid)
        elif aid in default.where:
            failed.append(aid)
    return ids(held), ids(failed), len(atoms)


class ListPostings:
    """List tests through value -> atom postings."""

    __slots__ = (
        "all_need",
        "atoms",
        "by_value",
        "count_of",
        "default",
        "long",
        "neg_any",
        "neg_count",
        "pos_any",
    )

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        self.atoms: list[tuple[int, Atom]] = list(atoms)
        self.pos_any: dict[object, list[int]] = {}  # has, one_of
        self.neg_any: dict[object, list[int]] = {}  # lacks, none_of
        self.count_of: dict[object, list[int]] = {}  # all_of, not_all_of
        self.all_need: dict[int, int] = {}  # all_of's atoms and their lengths
        self.neg_count: dict[int, int] = {}  # not_all_of's
        negated: list[int] = []  # lacks, none_of, not_all_of: the default
        whole: list[tuple[int, frozenset[object], bool]] = []  # all_of, not_all_of
        for aid, atom in atoms:
            t = atom.test
            values = (atom.arg,) if t in ("has", "lacks") else atom.arg
            if t in ("all_of", "not_all_of"):
                (self.all_need if t == "all_of" else self.neg_count)[aid] = len(values)  # type: ignore[arg-type]
                posting = self.count_of
                whole.append((aid, frozenset(values), t == "not_all_of"))  # type: ignore[call-overload]
            else:
                posting = self.neg_any if t in _NEGATIVE else self.pos_any
            if t in _NEGATIVE:
                negated.append(aid)
            for v in values:  # type: ignore[attr-defined]
                posting.setdefault(v, []).append(aid)
        self.default = Complement(negated)
        postings = (self.pos_any, self.neg_any, self.count_of)
        total = sum(len(found) for posting in postings for found in posting.values())
        #: when long (:data:`LONG_POSTINGS` ids a value on average), :attr:`by_value`'s
        #: postings as arrays, an event's ids joined in numpy rather than id by id (rich
        #: 100K's interests, ~1,900 ids an event: 175 -> 57 µs, load ~13)
        self.long = total > LONG_POSTINGS * max(1, sum(map(len, postings)))
        #: :meth:`found`'s postings, one lookup a value: its ``has``/``one_of`` atoms, its
        #: ``lacks``/``none_of`` atoms (lists, or arrays when :attr:`long`; None for none)
        #: and the ``all_of``/``not_all_of`` atoms posted under it (None for none: rich
        #: 100K's audiences, 56K values, have none), each under its rarest value alone
        #: (the fewest atoms posted), as (atom id, its values, negated): held where its
        #: values are a subset of the event's, not counted value by value
        self.by_value: dict[
            object, tuple[Any, Any, list[tuple[int, frozenset[object], bool]] | None]
        ]
        self.by_value = {}
        posted = {v: sum(len(p.get(v, ())) for p in postings) for p in postings for v in p}
        for v in posted:
            pos: Any = self.pos_any.get(v)
            neg: Any = self.neg_any.get(v)
            if self.long:
                pos = None if pos is None else _frozen(pos)
                neg = None if neg is None else _frozen(neg)
            self.by_value[v] = (pos, neg, None)
        for aid, values, negative in whole:
            if values:  # (an empty all_of is never counted: it holds nowhere, as before)
                rarest = min(values, key=lambda v: (posted[v], repr(v)))
                pos, neg, counted = self.by_value[rarest]
                if counted is None:
                    counted = []
                    self.by_value[rarest] = (pos, neg, counted)
                counted.append((aid, values, negative))

    def found(self, value: object, event: Event) -> Found:
        if not isinstance(value, tuple):
            return _exact(self.atoms, self.default, event)
        held: list[Any] = []  # (the postings met: arrays when :attr:`long`, else lists)
        failed: list[Any] = []
        whole: list[int] = []
        whole_failed: list[int] = []
        tests = 0
        by_value = self.by_value
        present = set(value)
        for v in present:
            got = by_value.get(v)
            if got is None:
                continue
            pos, neg, counted = got
            if pos is not None:
                held.append(pos)
                tests += len(pos)
            if neg is not None:
                failed.append(neg)
                tests += len(neg)
            for aid, values, negative in counted or ():
                tests += 1
                if values <= present:  # all_of holds, not_all_of fails
                    (whole_failed if negative else whole).append(aid)
        # (an id may come twice: set twice)
        return self._ids(held, whole), self._ids(failed, whole_failed), tests

    def _ids(self, postings: list[Any], more: list[int]) -> np.ndarray:
        """The ids of ``postings`` (:meth:`found`'s) and ``more`` as one array: arrays
        joined in numpy when :attr:`long`, else lists joined id by id (``more`` grown)."""
        if self.long:
            if more:
                postings.append(ids(more))
            return joined(postings)
        out = more
        for posting in postings:
            out += posting
        return ids(out)


class Suffixes:
    """``ends_with`` tests: needle -> atoms, one lookup per distinct needle length."""

    __slots__ = ("atoms", "by_needle", "default", "lengths")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        self.atoms: list[tuple[int, Atom]] = list(atoms)
        self.by_needle: dict[str, tuple[list[int], list[int]]] = {}  # (positive, negated)
        negated: list[int] = []
        for aid, atom in atoms:
            pos, neg = self.by_needle.setdefault(atom.arg, ([], []))  # type: ignore[arg-type]
            (neg if atom.test.startswith("not_") else pos).append(aid)
        for _, neg in self.by_needle.values():
            negated += neg
        self.default = Complement(negated)
        self.lengths = sorted({len(n) for n in self.by_needle})

    def found(self, value: object, event: Event) -> Found:
        if not isinstance(value, str):
            return _exact(self.atoms, self.default, event)
        out: list[int] = []
        failed: list[int] = []
        tests = 0
        by_needle, n = self.by_needle, len(value)
        for length in self.lengths:
            if length > n:
                break
            tests += 1
            found = by_needle.get(value[n - length :])
            if found is not None:
                out += found[0]
                failed += found[1]
        return ids(out), ids(failed), tests


#: The length of the pieces :class:`Needles` posts a needle under.
GRAM = 3


class Needles:
    """``contains`` tests: each needle under its rarest trigram (a shorter needle under
    itself), tested only when the value holds that piece."""

    __slots__ = ("atoms", "by_piece", "default", "short")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        self.atoms: list[tuple[int, Atom]] = list(atoms)
        needles: dict[str, tuple[list[int], list[int]]] = {}
        negated: list[int] = []
        for aid, atom in atoms:
            pos, neg = needles.setdefault(atom.arg, ([], []))  # type: ignore[arg-type]
            (neg if atom.test.startswith("not_") else pos).append(aid)
            if atom.test.startswith("not_"):
                negated.append(aid)
        self.default = Complement(negated)
        freq: dict[str, int] = {}
        for needle in needles:
            for g in _grams(needle):
                freq[g] = freq.get(g, 0) + 1
        # piece -> [(needle, positive ids, negated ids)]
        self.by_piece: dict[str, list[tuple[str, list[int], list[int]]]] = {}
        for needle, (pos, neg) in needles.items():
            piece = (
                min(_grams(needle), key=lambda g: (freq[g], g)) if len(needle) >= GRAM else needle
            )
            self.by_piece.setdefault(piece, []).append((needle, pos, neg))
        self.short = sorted({len(p) for p in self.by_piece if len(p) < GRAM})

    def found(self, value: object, event: Event) -> Found:
        if not isinstance(value, str):
            return _exact(self.atoms, self.default, event)
        out: list[int] = []
        failed: list[int] = []
        tests = 0
        by_piece, n = self.by_piece, len(value)
        pieces = {value[i : i + GRAM] for i in range(n - GRAM + 1)}
        for length in self.short:
            pieces.update(value[i : i + length] for i in range(n - length + 1))
        for piece in pieces:
            found = by_piece.get(piece)
            if found is None:
                continue
            for needle, pos, neg in found:
                tests += 1
                if needle in value:
                    out += pos
                    failed += neg
        return ids(out), ids(failed), tests


def _grams(needle: str) -> list[str]:
    return [needle[i : i + GRAM] for i in range(len(needle) - GRAM + 1)]


#: Cell widths (degrees) of the geo grid's levels; a box goes to the first level whose
#: cells are at least as wide and as tall as it, so it overlaps at most 2x2 cells.
GEO_LEVELS = tuple(0.125 * 2**k for k in range(13))  # 0.125 .. 512

#: (atom id, negated, lat_lo, lat_hi, lon_lo, lon_hi, exact test)
_GeoEntry = tuple[int, bool, float, float, float, float, Callable[[Event], bool]]


class GeoGrid:
    """``geo_within_radius`` through a multi-level grid of the radii's boxes (one grid per
    longitude attribute the atoms read: ``parts`` when they read several)."""

    __slots__ = ("args", "atoms", "cells", "default", "levels", "lon", "loop", "loose", "parts")
    default: Complement
    loop: float

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        by_lon: dict[str, list[tuple[int, TestAtom]]] = {}
        for aid, atom in atoms:
            by_lon.setdefault(special.longitude_attr(atom.arg), []).append((aid, atom))  # type: ignore[arg-type]
        self.lon = next(iter(by_lon), special.LONGITUDE)
        self.parts = [GeoGrid(group) for group in by_lon.values()] if len(by_lon) > 1 else []
        if self.parts:
            atoms = []
        self.atoms: list[tuple[int, Atom]] = list(atoms)
        self.cells: dict[tuple[int, int, int], list[_GeoEntry]] = {}
        self.loose: list[_GeoEntry] = []  # boxes the grid cannot hold (never, for finite args)
        #: each atom's centre and radius (lat, lon, km)
        self.args: dict[int, tuple[float, float, float]] = {}
        held_by_default = [aid for aid, atom in atoms if atom.test.startswith("not_")]
        for part in self.parts:
            held_by_default += part.default.ids.tolist()
        self.default = Complement(held_by_default)
        used: set[int] = set()
        for aid, atom in atoms:
            negated = atom.test.startswith("not_")
            args: tuple[float, float, float] = atom.arg[:3]  # type: ignore[index]
            self.args[aid] = args
            box = special.geo_box(*args)
            if box is None:  # a negative radius: the positive form holds nowhere
                continue
            (la, lb), (oa, ob) = box
            holds = special.holds_factory(atom.test.removeprefix("not_"), atom.attr, atom.arg)
            entry: _GeoEntry = (aid, negated, la, lb, oa, ob, holds)
            level = next(
                (k for k, w in enumerate(GEO_LEVELS) if lb - la <= w and ob - oa <= w), None
            )
            if level is None:
                self.loose.append(entry)
                continue
            used.add(level)
            w = GEO_LEVELS[level]
            for i in range(math.floor(la / w), math.floor(lb / w) + 1):
                for j in range(math.floor(oa / w), math.floor(ob / w) + 1):
                    self.cells.setdefault((level, i, j), []).append(entry)
        self.levels = [(k, GEO_LEVELS[k]) for k in sorted(used)]
        #: the entries an event's cells hold, expected (each level's mean a cell, summed):
        #: what :meth:`found` loops over in Python
        self.loop = sum((part.loop for part in self.parts), 0.0)
        per_level: dict[int, list[int]] = {}
        for (k, _, _), entries in self.cells.items():
            n = per_level.setdefault(k, [0, 0])
            n[0] += len(entries)
            n[1] += 1
        self.loop += sum(n / cells for n, cells in per_level.values())

    def found(self, value: object, event: Event) -> Found:
        if self.parts:
            answers = [part.found(value, event) for part in self.parts]
            return (
                joined([held for held, _, _ in answers]),
                joined([failed for _, failed, _ in answers]),
                sum(tests for _, _, tests in answers),
            )
        lat = value
        lon: Any = event.get(self.lon)
        if lon is None:  # the haversine is false: every negation holds
            return _NONE, _NONE, 0
        if not (isinstance(lat, float) and -90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
            return _exact(self.atoms, self.default, event)
        out: list[int] = []
        failed: list[int] = []
        tests = 0
        cells = self.cells
        for k, w in self.levels:
            found = cells.get((k, math.floor(lat / w), math.floor(lon / w)))
            if found is None:
                continue
            for aid, negated, la, lb, oa, ob, holds in found:
                if la <= lat <= lb and oa <= lon <= ob:
                    tests += 1
                    if holds(event):
                        (failed if negated else out).append(aid)
        for aid, negated, _, _, _, _, holds in self.loose:
            tests += 1
            if holds(event):
                (failed if negated else out).append(aid)
        return ids(out), ids(failed), tests


class CapGroups:
    """``within_frequency_cap`` tests by (type, namespace, id or ``None``): only the groups
    the event's caps name are tested (a test's first cap of its type, namespace and id
    decides it: :func:`betree.lang.special.truth`'s arithmetic, on the group's cap found
    once); the others hold as when no cap applies."""

    __slots__ = ("default", "groups", "neg_all")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        #: (type, namespace, id) -> (atom id, negated, limit, length)
        self.groups: dict[tuple[object, object, object], list[tuple[int, bool, Any, Any]]] = {}
        # a group the caps do not name: no cap applies, the positive form holds
        self.default = Complement([aid for aid, atom in atoms if not atom.test.startswith("not_")])
        self.neg_all = ids([aid for aid, atom in atoms if atom.test.startswith("not_")])
        for aid, atom in atoms:
            args: tuple[object, ...] = atom.arg  # type: ignore[assignment]
            entry = (aid, atom.test.startswith("not_"), args[3], args[4])
            self.groups.setdefault((args[0], args[2], args[1]), []).append(entry)

    def found(self, value: object, event: Event) -> Found:
        caps: Any = value
        if not caps:  # no cap applies: every positive test holds
            return _NONE, _NONE, 0
        now = event.get(special.NOW)
        if not isinstance(now, int) or isinstance(now, bool):  # the positive form is false
            return self.neg_all, self.default.ids, 0
        out: list[int] = []
        failed: list[int] = []
        tests = 0
        seen: set[tuple[object, object, object]] = set()
        groups = self.groups
        for kind, ident, namespace, ts, count in caps:
            for key in ((kind, namespace, ident), (kind, namespace, None)):
                if key in seen:
                    continue
                seen.add(key)
                entries = groups.get(key)
                if entries is None:
                    continue
                tests += len(entries)
                age = None if ts is None else now - special.seconds(ts)
                for aid, negated, limit, length in entries:
                    if length <= 0 or (age is not None and age <= length):
                        holds = limit > count
                    else:  # the cap's window has passed
                        holds = True
                    if not holds:  # (the positive form: a negated atom holds)
                        (out if negated else failed).append(aid)
        return ids(out), ids(failed), tests


#: (seconds of each test sorted, their atom ids in that order) for within and before.
_Sorted = tuple[list[int], list[int]]


class SegmentTests:
    """Segment tests keyed by segment id, sorted by seconds: ``segment_within(id, s)`` holds
    iff ``s >= now - t`` (``t`` the segment's time in whole seconds), ``segment_before(id,
    s)`` iff ``s < now - t``, the same integer arithmetic as the tests; a negated test holds
    where its positive form does not (the attribute defined)."""

    __slots__ = ("by_segment", "by_sid", "default", "flat")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        tests: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
        self.default = Complement([aid for aid, atom in atoms if atom.test.startswith("not_")])
        for aid, atom in atoms:
            negated = atom.test.startswith("not_")
            sid: int = atom.arg[0]  # type: ignore[index]
            secs: int = atom.arg[1]  # type: ignore[index]
            within, before = tests.setdefault(sid, ([], []))
            within_test = atom.test.removeprefix("not_") == "segment_within"
            (within if within_test else before).append((secs, -aid - 1 if negated else aid))
        #: (the batch's form: :class:`betree.matching.directmany.SegmentMany`)
        self.by_segment: dict[int, tuple[_Sorted, _Sorted]] = {
            sid: (_sorted(within), _sorted(before)) for sid, (within, before) in tests.items()
        }
        #: :meth:`found`'s: per segment, its non-empty lists of one form and sign as
        #: (within, negated, their seconds ascending, where their ids start in :attr:`flat`):
        #: an event's atoms of a list a slice of one array (rich 100K: ~670 ids an event
        #: from ~15 segments), not a Python list extended and split by sign
        self.by_sid: dict[int, list[tuple[bool, bool, list[int], int]]] = {}
        flat: list[int] = []
        for sid, forms in self.by_segment.items():
            lists = self.by_sid[sid] = []
            for is_within, (times, aids) in zip((True, False), forms, strict=True):
                for sign in (False, True):
                    mine = [(x, a) for x, a in zip(times, aids, strict=True) if (a < 0) == sign]
                    if mine:
                        lists.append((is_within, sign, [x for x, _ in mine], len(flat)))
                        flat += [-a - 1 if sign else a for _, a in mine]
        self.flat = _frozen(flat)

    def found(self, value: object, event: Event) -> Found:
        """The tests that hold on ``event`` (and the negated ones that fail), whose value
        of the attribute is ``value`` (validated: pairs sorted by segment id)."""
        now: Any = event.get(special.NOW)
        if now is None:  # every positive test fails, every negated one holds
            return _NONE, _NONE, 0
        held: list[np.ndarray] = []
        failed: list[np.ndarray] = []
        by_sid, flat = self.by_sid, self.flat
        last = None
        tests = 0
        for sid, ts in value:  # type: ignore[attr-defined]
            if sid == last:
                continue  # a repeated id counts at its first occurrence
            last = sid
            found = by_sid.get(sid)
            if found is None:
                continue
            tests += 1
            q = ts // 1_000_000 if ts >= 0 else -(-ts // 1_000_000)
            bound = now - q
            for within, negated, secs, at in found:
                i = bisect_left(secs, bound)
                if within:  # (the seconds from ``bound`` on)
                    if i < len(secs):
                        (failed if negated else held).append(flat[at + i : at + len(secs)])
                elif i:  # (before: those under ``bound``)
                    (failed if negated else held).append(flat[at : at + i])
        return joined(held), joined(failed), tests


def _sorted(tests: list[tuple[int, int]]) -> _Sorted:
    tests.sort()
    return [secs for secs, _ in tests], [aid for _, aid in tests]


class Patterns:
    """``like``/``matches`` tests: the attribute's patterns in one RE2 set, one call per event
    (about 2.5 µs for 1,000 patterns; compiled at the first event, about 6 ms for 1,000);
    each pattern's atoms hold or fail from its answer.  Tests: the set's calls."""

    __slots__ = ("by_pattern", "default", "set")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        regexes: dict[str, int] = {}
        self.by_pattern: list[list[tuple[int, bool]]] = []  # (atom id, negated), by regex
        negated: list[int] = []
        for aid, atom in atoms:
            kind = atom.test.removeprefix("not_")
            expr = patterns.regex(kind, atom.arg)  # type: ignore[arg-type]
            k = regexes.setdefault(expr, len(regexes))
            if k == len(self.by_pattern):
                self.by_pattern.append([])
            self.by_pattern[k].append((aid, atom.test != kind))
            if atom.test != kind:
                negated.append(aid)
        self.default = Complement(negated)
        self.set = patterns.PatternSet(list(regexes))

    def found(self, value: object, event: Event) -> Found:
        if not isinstance(value, str):  # (validated: never)
            return _NONE, self.default.ids, 0
        out: list[int] = []
        failed: list[int] = []
        for k in self.set.match(value):
            for aid, negated in self.by_pattern[k]:
                (failed if negated else out).append(aid)
        return ids(out), ids(failed), 1


#: Presence tests of which exactly one holds on a defined (validated) value.
_PAIRS = {"bool_true": "bool_false", "empty": "not_empty", "defined": "undefined"}


class Presence:
    """Tests of the value's presence, truth or length, in pairs of which exactly one holds
    on a defined value (``bool_true``/``bool_false``, ``empty``/``not_empty``,
    ``defined``/``undefined``): one check of the value each pair (``defined``: the
    default, held wherever the attribute is); the out-of-range test alone.  ``by_value``:
    whether the answer depends on the value alone (no out-of-range test, which reads the
    longitude too)."""

    __slots__ = ("by_value", "default", "pairs")

    def __init__(self, atoms: list[tuple[int, TestAtom]]) -> None:
        listed: dict[str, tuple[list[int], TestAtom]] = {}
        beyond: dict[object, tuple[list[int], TestAtom]] = {}  # by the longitude they read
        for aid, atom in atoms:
            if atom.test == special.OUT_OF_RANGE:
                beyond.setdefault(atom.arg, ([], atom))[0].append(aid)
            else:
                listed.setdefault(atom.test, ([], atom))[0].append(aid)
        #: (the first test's atom; ids where it holds; where not)
        self.pairs: list[tuple[TestAtom, np.ndarray, np.ndarray]] = []
        for first, second in _PAIRS.items():
            if first != "defined" and (first in listed or second in listed):
                yes = listed[first][0] if first in listed else []
                no = listed[second][0] if second in listed else []
                check = listed[first if yes else second][1]
                self.pairs.append((check, ids(yes), ids(no)))
        for found, atom in beyond.values():
            self.pairs.append((atom, ids(found), ids([])))
        self.default = Complement(listed["defined"][0] if "defined" in listed else [])
        self.by_value = not beyond

    def found(self, value: object, event: Event) -> Found:
        parts = []
        for check, yes, no in self.pairs:
            holds = check.holds(event)
            first = check.test in _PAIRS or check.test == special.OUT_OF_RANGE
            parts.append(yes if holds == first else no)
        return joined(parts), _NONE, len(self.pairs)
