"""The geo grid's batch form (:class:`GeoMany`), and its one-event array path
(:meth:`GeoMany.one`), apart from the other kinds' batch forms
(:mod:`betree.matching.directmany`, which hands a geo attribute here).

Why: every event's grid cell at every level at once (the cells found by a dict lookup
per level), each entry's centre kept as a point on the unit sphere so that a distance is
a chord (no trigonometry an entry), and only a pair within :data:`DOUBT` of its radius
decided by the atom's own Python test: the answer is the per-event one to the bit.
For a packed batch (:meth:`GeoMany.words`) the events are grouped by cell, each large
cell's entries tested once for all its events as a block (the squared chords one matrix
product of the centres and the points), its held bits packed 64 a word and ORed into
its atoms' rows over the batch's words; the small cells' (entry, event) pairs are
tested together in one pass and their held pairs set a bit at a time.
Cost: built once per snapshot, linear in the geo atoms (a 6-row float table); per event
or batch, ~12 numpy calls over the entries of the events' cells; a packed batch's
large cells ~14 numpy calls each (rich 100K, seed 7: ~190 of ~460 cells a batch of
1,024, the rest in one pass) and a ``geo atoms x words`` matrix (~2 MB there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from betree.lang import special
from betree.matching import directkinds
from betree.matching.manybase import NONE, Event, Many, Words, each, join_parts
from pbtree.view import ranges

#: a haversine in numpy this close (km, and relative) to its radius is decided by the
#: atom's own test in Python (numpy's sine may differ from libm's by an ulp or two)
DOUBT = 1e-6
#: :meth:`GeoMany.words` answers by rows over words where the batch's (entry, event) pairs
#: of its grid cells are at least this many (below it the pairs path's few numpy calls
#: cost less than a cell group's loop)
GEO_PAIRS_LEAST = 20_000
#: :meth:`GeoMany.words` takes a squared chord as ``2 - 2 x`` the dot product of two unit
#: vectors (one matrix product a cell): within this of its bounds, beyond :data:`DOUBT`'s
#: band, a pair is decided by the atom's own test (the product's rounding, a few ulps of
#: 1, is absolute where the difference's is relative to the chord)
SLACK = 1e-14
#: :meth:`GeoMany._blocks` tests a cell of fewer (entry, event) pairs than this with the
#: other small cells' pairs at once (one pass over their pairs, the held ones set a bit
#: at a time) rather than as a block of its own (~14 numpy calls a cell: rich 100K, seed
#: 7, 271 of 462 cells a batch of 1,024, 32K of 2M pairs; ``_blocks`` there ~50 µs an
#: event at 250-500, ~60 at 2,000, ~70 at 0 and 8,000; at 20K seed 11 alike at 500 and
#: 2,000: docs/bench/match-rich-batch/README.md, richbatch45)
BLOCK_PAIRS = 500


def _cell_key(level: Any, i: Any, j: Any) -> Any:
    """A grid cell as one int64 (levels under 16, |i| and |j| under 2,048)."""
    return (level << 24) | ((i + 2048) << 12) | (j + 2048)


def _on_grid(lat: Any, lon: Any) -> bool:
    """Whether a point is one :meth:`GeoMany.found` places on the grid (floats in range)."""
    return (
        type(lat) is float
        and type(lon) is float
        and -90.0 <= lat <= 90.0
        and -180.0 <= lon <= 180.0
    )


class GeoMany:
    """:class:`directkinds.GeoGrid` for a batch (one per longitude attribute read)."""

    __slots__ = (
        "aid",
        "atom_at",
        "box",
        "cells",
        "centre",
        "entries",
        "exact",
        "index",
        "keys",
        "levels",
        "neg",
        "negated",
        "parts",
        "runs",
        "signed",
        "starts",
        "table",
    )

    def __init__(self, index: directkinds.GeoGrid) -> None:
        self.index = index
        self.parts = [GeoMany(part) for part in index.parts]
        self.levels = [(k, w) for k, w in index.levels]
        keys = sorted(index.cells, key=lambda c: _cell_key(*c))
        self.keys = np.array([_cell_key(*c) for c in keys], dtype=np.int64)
        lens = [len(index.cells[c]) for c in keys]
        self.starts = np.concatenate(([0], np.cumsum(lens, dtype=np.int64)))
        #: the cells' entries end to end: (atom id, negated, exact test)
        self.entries = [(aid, neg, holds) for c in keys for aid, neg, *_, holds in index.cells[c]]
        self.aid = np.array([aid for aid, _, _ in self.entries], dtype=np.int64)
        self.neg = np.array([neg for _, neg, _ in self.entries], dtype=bool)
        self.box = np.array(
            [(la, lb, oa, ob) for c in keys for _, _, la, lb, oa, ob, _ in index.cells[c]],
            dtype=np.float64,
        ).reshape(-1, 4)
        # each entry's centre and radius, its sine and cosine of latitude as the test keeps
        # them (the same Python floats), its longitude and radius
        centre = []
        for aid, _, _ in self.entries:
            lat0, lon0, km = index.args[aid]
            la2 = lat0 * special.TO_RAD
            centre.append((math.sin(la2), math.cos(la2), lon0, km))
        self.centre = np.array(centre, dtype=np.float64).reshape(-1, 4)
        #: :meth:`one`'s columns, one row a field (each contiguous over the entries): the
        #: centre as a point of the unit sphere (x, y, z), the squared chords within which
        #: the point surely is (:func:`_chords`) and beyond which it surely is not, and
        #: the entry's atom id (negated: ``-1 - id``)
        self.table = _one_table(index, self.aid, self.neg)
        #: the entries' atoms (signed as in ``table``), each once, ascending, and each
        #: entry's among them (:meth:`_blocks`: an atom's entries lie in distinct cells of
        #: one level, each event in one of them)
        self.signed, self.atom_at = np.unique(self.table[5].astype(np.int64), return_inverse=True)
        #: the atoms :meth:`words` gives rows of, in their order (:func:`geo_runs`)
        self.runs = _runs(self.signed)
        #: per level, :meth:`one`'s cell lookup: the key of its cell (0, 0) (a cell's key
        #: is that plus ``i << 12`` plus ``j``: :func:`_cell_key` within its bounds), its
        #: width, and its cells' keys -> their entries' range
        self.cells: list[tuple[int, float, dict[int, tuple[int, int]]]] = []
        bounds = self.starts.tolist()
        for k, w in self.levels:
            cells = {
                key: (bounds[c], bounds[c + 1])
                for c, key in enumerate(self.keys.tolist())
                if key >> 24 == k
            }
            self.cells.append((_cell_key(k, 0, 0), w, cells))
        #: each entry's atom's own test, by atom id (the band of doubt's), and whether
        #: any entry is negated
        self.exact = {aid: holds for aid, _, holds in self.entries}
        self.negated = bool(self.neg.any())

    def _points(
        self, values: Sequence[object], events: Sequence[Event]
    ) -> tuple[list[float], list[float], list[int], list[int]]:
        """The events' points on the grid (latitudes, longitudes, their events' places) and
        the places of the events off it; an event without a longitude has neither (the
        haversine is false: every negation holds)."""
        lon_attr = self.index.lon
        lats: list[float] = []
        lons: list[float] = []
        at: list[int] = []
        odd: list[int] = []
        for k, (lat, event) in enumerate(zip(values, events, strict=True)):
            lon = event.get(lon_attr)
            if lon is None:
                continue
            if _on_grid(lat, lon):
                lats.append(lat)  # type: ignore[arg-type]
                lons.append(lon)  # type: ignore[arg-type]
                at.append(k)
            else:
                odd.append(k)
        return lats, lons, at, odd

    def _cells(self, lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The grid cells holding each point at every level (their places in ``keys``) and
        the point each is for, cells with no entry left out."""
        keys = np.concatenate(
            [
                _cell_key(k, np.floor(lat / w).astype(np.int64), np.floor(lon / w).astype(np.int64))
                for k, w in self.levels
            ]
        )
        point = np.tile(np.arange(len(lat), dtype=np.int64), len(self.levels))
        cell = np.searchsorted(self.keys, keys)
        hit = cell < len(self.keys)
        hit[hit] = self.keys[cell[hit]] == keys[hit]
        return cell[hit], point[hit]

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        if self.parts:
            return join_parts([part.found(values, events) for part in self.parts])
        lats, lons, at, odd = self._points(values, events)
        found = self._grid(np.array(lats), np.array(lons), np.array(at, dtype=np.int64), events)
        if odd or self.index.loose:
            rest = each(self.index, odd, values, events)
            loose = self._loose(at, events)
            return join_parts([found, rest, loose])
        return found

    def words(
        self, values: Sequence[object], events: Sequence[Event], rows: np.ndarray
    ) -> tuple[Many, list[Words]]:
        """:meth:`found`, but the grid's answer as rows of bits over the batch's words
        (``rows``: each event's own bit as a row over them), held atoms and failing
        negations apart, where the (entry, event) pairs of the events' cells are at least
        :data:`GEO_PAIRS_LEAST`.

        The events are grouped by cell (every level's at once): a cell of at least
        :data:`BLOCK_PAIRS` (entry, event) pairs has its entries tested once for all its
        events, as a block (entries x events, the points and centres on the unit sphere as
        :meth:`one` takes them: no box test, no trigonometry an entry, no gather a pair;
        the squared chord ``2 - 2 x`` their dot product, one matrix product, within
        :data:`SLACK` of a bound in doubt), its held bits packed 64 a word and ORed into
        its atoms' rows (an atom's entries lie in cells of one level, an event in one of
        them: the ORs never meet); the smaller cells' pairs are tested together
        (:meth:`_pairs`) and their held pairs answered as pairs.  A chord within an
        entry's band of doubt is decided by the atom's own test (a pair of the answer's).
        Rich 100K (seed 7), 1,024 events: ~2M (entry, event) pairs in ~460 cell groups,
        ~850K held, which the pairs path set one bit at a time; ~190 cells are blocks
        (docs/bench/match-rich-batch/README.md, richbatch43 and richbatch45)."""
        if self.parts or self.index.loose or not len(self.keys):
            return self.found(values, events), []
        lats, lons, at, odd = self._points(values, events)
        rest = [each(self.index, odd, values, events)] if odd else []
        if not at:
            return join_parts([(NONE, NONE, NONE, NONE, 0), *rest]), []
        lat_a, lon_a = np.array(lats), np.array(lons)
        cell, point = self._cells(lat_a, lon_a)
        lo, hi = self.starts[cell], self.starts[cell + 1]
        pairs = int((hi - lo).sum())
        if pairs < GEO_PAIRS_LEAST:
            found = self._grid(lat_a, lon_a, np.array(at, dtype=np.int64), events)
            return join_parts([found, *rest]), []
        held, planes = self._blocks(
            lat_a, lon_a, np.array(at, dtype=np.int64), cell, point, rows, events
        )
        return join_parts([(*held, pairs), *rest]), planes

    def _blocks(
        self,
        lat: np.ndarray,
        lon: np.ndarray,
        at: np.ndarray,
        cell: np.ndarray,
        point: np.ndarray,
        rows: np.ndarray,
        events: Sequence[Event],
    ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], list[Words]]:
        """:meth:`words`' cell groups (``cell``, ``point``: each point's cell at each level
        holding one): the held rows (and failing negations'), and the pairs in doubt the
        atoms' own tests held (held, their positions, failed, theirs)."""
        word = rows[at].argmax(axis=1)  # (each event's row holds its one bit)
        place = np.bitwise_count(rows[at, word] - np.uint64(1)).astype(np.int64)  # its bit
        la, lo_ = lat * special.TO_RAD, lon * special.TO_RAD
        cos1 = np.cos(la)
        xyz = np.stack((cos1 * np.cos(lo_), cos1 * np.sin(lo_), np.sin(la)))
        order = np.lexsort((point, cell))  # by cell, a cell's points ascending (by word)
        cell, point = cell[order], point[order]
        firsts = np.flatnonzero(np.concatenate(([True], cell[1:] != cell[:-1])))
        cells = cell[firsts]
        lo, hi = self.starts[cells], self.starts[cells + 1]
        size = np.diff(np.append(firsts, len(cell)))
        small = (hi - lo) * size < BLOCK_PAIRS
        table, atom_at = self.table, self.atom_at
        held, doubt_entry, doubt_point = self._pairs(
            lo[small], hi[small], firsts[small], size[small], point, xyz
        )
        own = np.zeros((len(self.signed), rows.shape[1]), dtype=np.uint64)
        big = ~small
        lo, hi, firsts, size = lo[big], hi[big], firsts[big], size[big]
        for a, b, f, n in zip(
            lo.tolist(), hi.tolist(), firsts.tolist(), size.tolist(), strict=True
        ):
            pts = point[f : f + n]
            block = table[:, a:b]
            chord = block[:3].T @ xyz[:, pts]  # (the squared chord: 2 - 2 x the dot)
            chord *= -2.0
            chord += 2.0
            yes = chord < (block[3] - SLACK)[:, None]
            maybe = chord <= (block[4] + SLACK)[:, None]
            if np.count_nonzero(maybe) > np.count_nonzero(yes):
                i, j = np.nonzero(maybe ^ yes)
                doubt_entry.append(i + a)
                doubt_point.append(pts[j])
            # the held bits packed 64 a word over the words the cell's points lie in, ORed
            # into their atoms' rows (an atom once a cell: one fancy OR)
            w = word[pts]
            moved = w[1:] != w[:-1]
            spread = np.zeros((b - a, 64 * (int(np.count_nonzero(moved)) + 1)), dtype=bool)
            spread[:, (np.concatenate(([0], np.cumsum(moved))) << 6) + place[pts]] = yes
            packed = np.packbits(spread, axis=1, bitorder="little").view("<u8")
            own[atom_at[a:b, None], w[np.concatenate(([True], moved))]] |= packed
        k = int(np.searchsorted(self.signed, 0))  # (the negations lead: :attr:`runs`)
        planes: list[Words] = [
            (aids, own[k:].T if on else own[:k].T, on) for aids, on in self.runs if big.any()
        ]
        doubted = self._doubted(doubt_entry, doubt_point, at, events)
        signed = table[5].take(held[0]).astype(np.int64)
        on = signed >= 0
        got = (signed[on], at[held[1][on]], -1 - signed[~on], at[held[1][~on]])
        return (
            tuple(np.concatenate(pair) for pair in zip(got, doubted, strict=True)),  # type: ignore[return-value]
            planes,
        )

    def _pairs(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        first: np.ndarray,
        size: np.ndarray,
        point: np.ndarray,
        xyz: np.ndarray,
    ) -> tuple[tuple[np.ndarray, np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """:meth:`_blocks`' small cells (entries ``lo`` to ``hi``, their points ``size``
        of ``point`` from ``first``) tested at once, every (entry, point) pair of theirs as
        :meth:`one` tests it: the held pairs (entries, points), and those in doubt."""
        n = (hi - lo) * size
        k = ranges(np.zeros_like(n), n)  # (a pair's place in its cell's entries x points)
        across = np.repeat(size, n)
        entry = np.repeat(lo, n) + k // across
        at = point.take(np.repeat(first, n) + k % across)
        table = self.table
        d = table[:3].take(entry, axis=1) - xyz.take(at, axis=1)
        d *= d
        chord = d[0] + d[1]
        chord += d[2]
        yes = chord < table[3].take(entry)
        doubt = (chord <= table[4].take(entry)) & ~yes
        return (entry[yes], at[yes]), [entry[doubt]], [at[doubt]]

    def _doubted(
        self,
        entry: list[np.ndarray],
        point: list[np.ndarray],
        at: np.ndarray,
        events: Sequence[Event],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The (entry, point) pairs within their band of doubt that the atom's own test
        holds: (held ids, their events' positions, failed negations, theirs)."""
        if not entry:
            return NONE, NONE, NONE, NONE
        signed = self.table[5]
        held: list[int] = []
        held_at: list[int] = []
        failed: list[int] = []
        failed_at: list[int] = []
        pairs = zip(np.concatenate(entry).tolist(), np.concatenate(point).tolist(), strict=True)
        for i, p in pairs:
            aid = int(signed[i])
            k = int(at[p])
            if self.exact[aid if aid >= 0 else -1 - aid](events[k]):
                if aid >= 0:
                    held.append(aid)
                    held_at.append(k)
                else:
                    failed.append(-1 - aid)
                    failed_at.append(k)
        ids = directkinds.ids
        return ids(held), ids(held_at), ids(failed), ids(failed_at)

    def one(self, value: object, event: Event) -> directkinds.Found:
        """:meth:`found` of one event: its cell at each level found in Python, then the
        chord from the point to each of the cells' entries' centres in numpy (the point and
        the centres as points of the unit sphere: no trigonometry an entry, no box test:
        ~12 numpy calls on the few hundred entries of the event's cells).  A chord within
        an entry's band of doubt (:data:`DOUBT` around its radius: the atom's formula and
        this one differ by a few ulps) is decided by the atom's own test.  Tests: the
        entries whose chord was taken (all those of the event's cells, not those inside
        their box)."""
        lon: Any = event.get(self.index.lon)
        if lon is None:  # the haversine is false: every negation holds
            return NONE, NONE, 0
        lat: Any = value
        if self.parts or self.index.loose or not _on_grid(lat, lon):
            held, _, failed, _, tests = self.found([value], [event])
            return held, failed, tests
        table, floor = self.table, math.floor
        blocks = []
        for base, w, cells in self.cells:
            at = cells.get(base + (floor(lat / w) << 12) + floor(lon / w))
            if at is not None:
                blocks.append(table[:, at[0] : at[1]])
        if not blocks:
            return NONE, NONE, 0
        rows = np.concatenate(blocks, axis=1) if len(blocks) > 1 else blocks[0]
        la1, lo1 = lat * special.TO_RAD, lon * special.TO_RAD
        cos1 = math.cos(la1)
        d = rows[:3] - np.array(
            ((cos1 * math.cos(lo1),), (cos1 * math.sin(lo1),), (math.sin(la1),))
        )
        d *= d
        chord = d[0] + d[1]
        chord += d[2]
        yes = chord < rows[3]
        maybe = chord <= rows[4]
        if np.count_nonzero(maybe) > np.count_nonzero(yes):  # some within their band of doubt
            signed = rows[5]
            for i in np.flatnonzero(maybe ^ yes).tolist():  # decided by the atom's own test
                aid = int(signed[i])
                yes[i] = self.exact[aid if aid >= 0 else -1 - aid](event)
        got = rows[5][yes].astype(np.int64)
        if not self.negated:
            return got, NONE, rows.shape[1]
        neg = got < 0
        return got[~neg], -1 - got[neg], rows.shape[1]

    def _loose(self, at: list[int], events: Sequence[Event]) -> Many:
        """The boxes no grid level holds (none for finite constants), each tested."""
        held: list[int] = []
        failed: list[int] = []
        held_at: list[int] = []
        failed_at: list[int] = []
        for k in at:
            for aid, negated, *_, holds in self.index.loose:
                if holds(events[k]):
                    (failed if negated else held).append(aid)
                    (failed_at if negated else held_at).append(k)
        ids = directkinds.ids
        return ids(held), ids(held_at), ids(failed), ids(failed_at), len(at) * len(self.index.loose)

    def _grid(
        self, lat: np.ndarray, lon: np.ndarray, at: np.ndarray, events: Sequence[Event]
    ) -> Many:
        if not len(at) or not len(self.keys):
            return NONE, NONE, NONE, NONE, 0
        cell, point = self._cells(lat, lon)
        lo, hi = self.starts[cell], self.starts[cell + 1]
        entry = ranges(lo, hi)
        point = np.repeat(point, hi - lo)
        box = self.box.take(entry, axis=0)  # (take: ~6x a fancy index of rows, alone)
        y, x = lat.take(point), lon.take(point)
        inside = (box[:, 0] <= y) & (y <= box[:, 1]) & (box[:, 2] <= x) & (x <= box[:, 3])
        entry, point = entry[inside], point[inside]
        y, x = lat.take(point), lon.take(point)
        sin2, cos2, lon0, km = self.centre.take(entry, axis=0).T
        with np.errstate(invalid="ignore"):
            dlon = (x - lon0) * special.TO_RAD
            la1 = y * special.TO_RAD
            cos1 = np.cos(la1)
            dz = np.sin(la1) - sin2
            dx = np.cos(dlon) * cos1 - cos2
            dy = np.sin(dlon) * cos1
            half = np.sqrt(dx * dx + dy * dy + dz * dz) / 2
            dist = np.arcsin(np.minimum(half, 1.0)) * 2 * special.EARTH_RADIUS_KM
        yes = (half <= 1.0) & (dist <= km)
        doubt = np.flatnonzero(
            (np.abs(dist - km) <= DOUBT * np.maximum(1.0, np.abs(km)))
            | (np.abs(half - 1.0) <= DOUBT)
        )
        entries = self.entries
        for i in doubt.tolist():  # decided by the atom's own test
            yes[i] = entries[int(entry[i])][2](events[int(at[point[i]])])
        entry, point = entry[yes], point[yes]
        aid, neg, ev = self.aid[entry], self.neg[entry], at[point]
        return aid[~neg], ev[~neg], aid[neg], ev[neg], int(inside.sum())


def geo_runs(index: directkinds.GeoGrid) -> list[tuple[np.ndarray, bool]]:
    """The atoms :meth:`GeoMany.words` gives rows of, in their order (:attr:`GeoMany.runs`),
    none where it gives none (several longitude attributes, boxes off the grid)."""
    if index.parts or index.loose or not index.cells:
        return []
    entries = [(aid, neg) for listed in index.cells.values() for aid, neg, *_ in listed]
    signed = np.array([-1 - aid if neg else aid for aid, neg in entries], dtype=np.int64)
    return _runs(np.unique(signed))


def _runs(signed: np.ndarray) -> list[tuple[np.ndarray, bool]]:
    """The held atoms (ascending) and the negations (``signed`` ``-1 - id``, ascending:
    their ids descending) of an ascending signed run, those present."""
    k = int(np.searchsorted(signed, 0))
    out = [(signed[k:], True)] if k < len(signed) else []
    return [*out, (-1 - signed[:k], False)] if k else out


def _one_table(index: directkinds.GeoGrid, aid: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """:attr:`GeoMany.table`: for the entries (atom ids ``aid``, ``neg`` the negated), one
    row a field: the centre on the unit sphere (x, y, z: the formula's chord is the
    distance between the two points), the squared chords of the radius less and plus its
    band of doubt (:func:`_chords`), the atom id (negated: ``-1 - id``; exact in a float)."""
    centre = np.zeros((6, len(aid)), dtype=np.float64)
    for i, a in enumerate(aid.tolist()):
        lat0, lon0, km = index.args[a]
        la, lo = lat0 * special.TO_RAD, lon0 * special.TO_RAD
        cos0 = math.cos(la)
        centre[:3, i] = cos0 * math.cos(lo), cos0 * math.sin(lo), math.sin(la)
        centre[3:5, i] = _chords(km)
    centre[5] = np.where(neg, -1 - aid, aid)
    return centre


def _chords(km: float) -> tuple[float, float]:
    """The squared chords (on the unit sphere) within which a point is surely within
    ``km`` of a centre, and beyond which it surely is not: those of ``km`` less and plus
    :data:`DOUBT` (relative past 1 km).  The chord of an angle ``t`` is ``2 sin(t / 2)``,
    increasing up to ``t = pi`` (the library's ``asin`` of the half chord): a radius
    whose band reaches near there (~20,000 km) is in doubt everywhere (-1 and inf), as
    is a radius that is not a finite number."""
    tol = DOUBT * max(1.0, abs(km)) if math.isfinite(km) else math.inf
    lo, hi = (km - tol) / (2 * special.EARTH_RADIUS_KM), (km + tol) / (2 * special.EARTH_RADIUS_KM)
    near = math.pi / 2 - 1e-3  # (half the angle; sin's slope there still ~1e-3)
    sure = (2 * math.sin(lo)) ** 2 if 0.0 < lo < near else -1.0
    beyond = (2 * math.sin(hi)) ** 2 if 0.0 <= hi < near else math.inf
    return sure, beyond
