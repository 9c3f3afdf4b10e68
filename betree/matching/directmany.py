"""The direct atoms' indexes for a batch of events at once (issue 26 section 4).

Why: a batch (:mod:`betree.packed.flatbatch`, :mod:`betree.matching.batch`) used to run
each index of :mod:`betree.matching.directkinds` event by event, so ``match_many`` paid
the per-event Python of phase 1 in full: on 20K ad-targeting rules, ~60% of a batch.
Here each kind answers for all the events of a batch defining one attribute
(:func:`many`: the events' positions in the batch with the atoms held beyond the
index's ``default``, and with the defaults that fail), doing once a batch what does not
depend on the event:

- :class:`ListMany`: the batch's list elements through one dict lookup each into
  postings held as arrays (value -> a range of atom ids); (event, element) pairs
  deduplicated with numpy; ``all_of``/``not_all_of`` by counting (event, atom) pairs.
  Where the ``any`` postings are long (rich 100K: one attribute, 3,000 values, ~85 atoms
  a value, ~0.8-2M (atom, event) pairs a batch of 1,024), :meth:`ListMany.words` gives a
  packed batch its atoms' bits as rows over the batch's words instead (each value's
  events' bits, ORed into its atoms through the postings inverted): sequential ORs of
  whole rows where the pairs were scattered one bit at a time.
- :class:`GeoMany`: every event's grid cell at every level at once (one ``searchsorted``
  into the grid's sorted cell keys), the boxes tested as arrays, the haversine in numpy;
  only a pair whose distance lies within :data:`DOUBT` of its radius (or whose chord is
  near the sphere's diameter) is decided by the atom's own Python test, so the answer is
  the per-event one to the bit.
- :class:`SegmentMany`: every (event, segment) pair's bound ``now - seconds(ts)`` at once
  and, per segment, a bisection of its sorted seconds as arrays; for a packed batch where
  the pairs would be many, :meth:`SegmentMany.words` gives the held atoms' bits as rows
  over words (each atom's, the XOR of two rows of one XOR prefix of the events' bits
  placed at their cuts).
- :class:`ByValue` (suffixes, needles, patterns, presence without the geo out-of-range
  test): one answer per distinct value of the batch.
- Any other kind (caps, the ``any`` atoms), and an event whose value is not of the form
  an array path reads (values beyond int64, coordinates beyond their ranges): the
  per-event ``found``.

Every answer is the per-event one (``tests/betree/test_direct_many.py`` compares them,
and both with each atom's ``holds``).  Cost: built at a batch's first use of an index
(linear in its atoms); per batch, a few dozen numpy calls a kind and attribute plus one
dict lookup per list element or distinct value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.lang import special
from betree.matching import directkinds
from pbtree.view import ranges, uniq

Event = Mapping[str, object]
#: (held ids, their events' positions, failed default ids, their positions, exact tests),
#: ids and positions int64
Many = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]
#: atoms' bits as rows over a batch's words: (atom ids, ``words x atoms`` bits, held (True)
#: or a failing default (False))
Words = tuple[np.ndarray, np.ndarray, bool]
_NONE = np.zeros(0, dtype=np.int64)
#: :meth:`ListMany.words` sets rows of bits where the batch's (atom, event) pairs would be
#: at least this many a (posting, word) cell of the layers (:class:`_Inverted`): ~25 ns a
#: pair scattered (sorted by bit, one fancy OR a bit) against ~3 ns a cell
PAIRS_A_CELL = 0.1
#: :meth:`SegmentMany.words` sets rows of bits where the batch's (atom, event) pairs would
#: be at least this many a (touched segment's atom, word) cell, and at least
#: :data:`SEGMENT_PAIRS_LEAST`: rich 100K (seed 7), batches of 1,024, the phases' rows
#: against pairs ~0.77x at ~1.36 pairs a cell, ~0.94x at ~0.86, ~1.03-1.11x at ~0.53; at
#: 20K's batches of 128 (~16K pairs) 0.91x and 1.15x in two runs
#: (docs/bench/match-rich-batchkeys/README.md, richmany42)
SEGMENT_PAIRS_A_CELL = 0.75
SEGMENT_PAIRS_LEAST = 20_000
#: a haversine in numpy this close (km, and relative) to its radius is decided by the
#: atom's own test in Python (numpy's sine may differ from libm's by an ulp or two)
DOUBT = 1e-6
_I64 = 2**62  # bounds within which int64 arithmetic on segment times cannot overflow


class Each:
    """The per-event ``found`` of an index, event by event (the kinds not batched)."""

    __slots__ = ("index",)

    def __init__(self, index: Any) -> None:
        self.index = index

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        return _each(self.index, range(len(values)), values, events)


def _each(index: Any, at: Sequence[int], values: Sequence[object], events: Sequence[Event]) -> Many:
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
        _NONE,
        _NONE,
        len(atoms) * len(values),
    )


def joined(parts: list[Many]) -> Many:
    """Several answers for the same events as one."""
    return _join(parts)


def _join(parts: list[Many]) -> Many:
    return (
        directkinds.joined([p[0] for p in parts]),
        directkinds.joined([p[1] for p in parts]),
        directkinds.joined([p[2] for p in parts]),
        directkinds.joined([p[3] for p in parts]),
        sum(p[4] for p in parts),
    )


def _csr(postings: dict[object, list[int]], slot: dict[object, int]) -> tuple[Any, Any]:
    """Postings as (starts by slot, ids): the slot of value v is ``slot[v]``."""
    lens = np.zeros(len(slot) + 1, dtype=np.int64)
    ids: list[int] = []
    for v, k in slot.items():
        got = postings.get(v, [])
        lens[k + 1] = len(got)
        ids += got
    return np.cumsum(lens), np.array(ids, dtype=np.int64)


class ListMany:
    """:class:`directkinds.ListPostings` for a batch."""

    __slots__ = ("count", "index", "inverse", "need", "neg", "pos", "slot", "whose")

    def __init__(self, index: directkinds.ListPostings) -> None:
        self.index = index
        self.slot: dict[object, int] = {}
        for postings in (index.pos_any, index.neg_any, index.count_of):
            for v in postings:
                self.slot.setdefault(v, len(self.slot))
        self.pos = _csr(index.pos_any, self.slot)
        self.neg = _csr(index.neg_any, self.slot)
        self.count = _csr(index.count_of, self.slot)
        counted = {**index.all_need, **{aid: -n for aid, n in index.neg_count.items()}}
        self.whose = np.array(sorted(counted), dtype=np.int64)  # the counted atoms, sorted
        self.need = np.array([counted[a] for a in self.whose.tolist()], dtype=np.int64)
        #: the ``any`` postings inverted, made at :meth:`words`' first use
        self.inverse: tuple[_Inverted, _Inverted] | None = None

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        return self._pairs(*self._codes(values), values, events)

    def _pairs(
        self,
        odd: list[int],
        ev: np.ndarray,
        code: np.ndarray,
        values: Sequence[object],
        events: Sequence[Event],
    ) -> Many:
        """:meth:`found` from :meth:`_codes`' answer."""
        tests = 0
        out = []
        for starts, ids in (self.pos, self.neg):
            lo, hi = starts[code], starts[code + 1]
            out.append((ids[ranges(lo, hi)], np.repeat(ev, hi - lo)))
            tests += len(out[-1][0])
        held, held_at = out[0]
        failed, failed_at = out[1]
        found: Many = (held, held_at, failed, failed_at, tests)
        return _join([found, *self._counted(ev, code), *self._odd(odd, values, events)])

    def words(
        self, values: Sequence[object], events: Sequence[Event], rows: np.ndarray
    ) -> tuple[Many, list[Words]]:
        """:meth:`found`, but where the ``any`` postings would give many (atom, event) pairs
        (:data:`PAIRS_A_CELL`), their atoms' bits as rows over words (``rows``: each
        event's own bit as a row over the batch's words): a word's bits of an atom are the
        OR of its values' (each value present in the batch a row, its events' bits; each
        atom the OR of its values' rows, read through the postings inverted, atom by atom):
        the held atoms (``True``) and the failing defaults (``False``), ``words x atoms``.
        Rich 100K (seed 7), 1,024 events: one list attribute's ~2.1M (atom, event) pairs
        as ~0.9M (word, atom) cells; ``_set_bits`` ~235 -> ~79 µs an event, the batch
        ~0.87x (docs/bench/match-rich-batchkeys/README.md, richmany41)."""
        odd, ev, code = self._codes(values)
        pairs = 0
        for starts, _ in (self.pos, self.neg):
            pairs += int((starts[code + 1] - starts[code]).sum())
        if not pairs:
            return self._pairs(odd, ev, code, values, events), []
        if self.inverse is None:
            self.inverse = (_Inverted(*self.pos), _Inverted(*self.neg))
        width = rows.shape[1]
        if pairs < PAIRS_A_CELL * width * sum(part.size for part in self.inverse):
            return self._pairs(odd, ev, code, values, events), []
        order = np.argsort(code, kind="stable")
        by_value = code[order]
        firsts = np.flatnonzero(np.concatenate(([True], by_value[1:] != by_value[:-1])))
        # each value's events' bits (each (event, value) pair once: distinct bits, ORed)
        bits = np.zeros((len(self.slot), width), dtype=np.uint64)
        bits[by_value[firsts]] = np.bitwise_or.reduceat(
            rows.take(ev[order], axis=0), firsts, axis=0
        )
        planes: list[Words] = []
        for part, on in zip(self.inverse, (True, False), strict=True):
            if part.size:
                atoms, own = part.ored(bits)
                planes.append((atoms, np.ascontiguousarray(own.T), on))
        found: Many = (_NONE, _NONE, _NONE, _NONE, pairs)
        return _join([found, *self._counted(ev, code), *self._odd(odd, values, events)]), planes

    def _codes(self, values: Sequence[object]) -> tuple[list[int], np.ndarray, np.ndarray]:
        """The events whose value is no tuple (asked one by one), and the (event, element
        slot) pairs of the others, each once (int64, by event)."""
        odd = [k for k, v in enumerate(values) if not isinstance(v, tuple)]
        lists: Any = values
        if odd:
            lists = [v if isinstance(v, tuple) else () for v in values]
        lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        slot = self.slot
        flat = [v for t in lists for v in t]
        codes = np.fromiter(map(slot.get, flat, [-1] * len(flat)), np.int64, len(flat))
        ev = np.repeat(np.arange(len(lists), dtype=np.int64), lens)
        keep = codes >= 0
        pair = uniq(ev[keep] * len(slot) + codes[keep])[0]  # (event, element) once each
        ev, code = np.divmod(pair, max(len(slot), 1))
        return odd, ev, code

    def _counted(self, ev: np.ndarray, code: np.ndarray) -> list[Many]:
        """``all_of`` and ``not_all_of`` by counting the (event, atom) pairs."""
        starts, ids = self.count
        lo, hi = starts[code], starts[code + 1]
        if not len(ids) or not int((hi - lo).sum()):
            return []
        atom = ids[ranges(lo, hi)]
        tests = len(atom)
        key, _, counts = uniq(np.repeat(ev, hi - lo) * (int(self.whose[-1]) + 1) + atom)
        at, atom = np.divmod(key, int(self.whose[-1]) + 1)
        need = self.need[np.searchsorted(self.whose, atom)]
        yes, no = counts == need, counts == -need
        return [(atom[yes], at[yes], atom[no], at[no], tests)]

    def _odd(self, odd: list[int], values: Sequence[object], events: Sequence[Event]) -> list[Many]:
        return [_each(self.index, odd, values, events)] if odd else []


class _Inverted:
    """Postings (starts by value slot, atom ids) inverted, atom by atom, in layers: layer
    k holds each atom's k-th value (an atom's values ORed by one fancy OR a layer, over
    whole rows of words: numpy's ``reduceat`` over rows costs ~20 ns a (segment, word),
    ~1.3x the layers at rich 20K)."""

    __slots__ = ("atoms", "layers", "size")

    def __init__(self, starts: np.ndarray, ids: np.ndarray) -> None:
        value = np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts))
        order = np.argsort(ids, kind="stable")
        value, ids = value[order], ids[order]
        firsts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))[: len(ids)]
        sizes = np.diff(np.append(firsts, len(ids)))
        #: the atoms, ascending; the (atom position, value slot) pairs by layer
        self.atoms = ids[firsts]
        self.size = len(ids)
        rank = np.arange(len(ids), dtype=np.int64) - np.repeat(firsts, sizes)
        at = np.repeat(np.arange(len(firsts), dtype=np.int64), sizes)
        by_rank = np.argsort(rank, kind="stable")
        layers = int(sizes.max(initial=0))
        cuts = np.searchsorted(rank[by_rank], np.arange(layers + 1)).tolist()
        self.layers = [
            (at[by_rank[cuts[k] : cuts[k + 1]]], value[by_rank[cuts[k] : cuts[k + 1]]])
            for k in range(layers)
        ]

    def ored(self, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The atoms some event holds (``bits``: each value slot's row of words) and their
        rows, the OR of their values'."""
        own = bits.take(self.layers[0][1], axis=0)
        for at, value in self.layers[1:]:
            own[at] |= bits.take(value, axis=0)
        some = np.flatnonzero(own.any(axis=1))
        return self.atoms.take(some), own.take(some, axis=0)


class ByValue:
    """An index whose answer depends on the value alone, asked once per distinct value."""

    __slots__ = ("index",)

    def __init__(self, index: Any) -> None:
        self.index = index

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        by_key: dict[object, list[int]] = {}
        alone: list[int] = []  # (unhashable values: asked for themselves)
        for k, v in enumerate(values):
            try:
                by_key.setdefault((type(v), v), []).append(k)
            except TypeError:
                alone.append(k)
        parts = [_each(self.index, alone, values, events)] if alone else []
        # (each answer's ids once a value's event, its events each once an id: joined by
        # one concatenation and one repeat, not a tile and a repeat a value)
        held: list[np.ndarray] = []
        failed: list[np.ndarray] = []
        held_at: list[int] = []
        failed_at: list[int] = []
        held_n: list[int] = []
        failed_n: list[int] = []
        tests = 0
        for at in by_key.values():
            ok, gone, n = self.index.found(values[at[0]], events[at[0]])
            tests += n
            if len(ok):
                held += [ok] * len(at)
                held_at += at
                held_n += [len(ok)] * len(at)
            if len(gone):
                failed += [gone] * len(at)
                failed_at += at
                failed_n += [len(gone)] * len(at)
        joined, ids = directkinds.joined, directkinds.ids
        held_where = np.repeat(ids(held_at), held_n)
        failed_where = np.repeat(ids(failed_at), failed_n)
        parts.append((joined(held), held_where, joined(failed), failed_where, tests))
        return _join(parts)


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

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        if self.parts:
            return _join([part.found(values, events) for part in self.parts])
        lon_attr = self.index.lon
        lats: list[float] = []
        lons: list[float] = []
        at: list[int] = []
        odd: list[int] = []
        for k, (lat, event) in enumerate(zip(values, events, strict=True)):
            lon = event.get(lon_attr)
            if lon is None:  # the haversine is false: every negation holds
                continue
            if _on_grid(lat, lon):
                lats.append(lat)  # type: ignore[arg-type]
                lons.append(lon)  # type: ignore[arg-type]
                at.append(k)
            else:
                odd.append(k)
        found = self._grid(np.array(lats), np.array(lons), np.array(at, dtype=np.int64), events)
        if odd or self.index.loose:
            rest = _each(self.index, odd, values, events)
            loose = self._loose(at, events)
            return _join([found, rest, loose])
        return found

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
            return _NONE, _NONE, 0
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
            return _NONE, _NONE, 0
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
            return got, _NONE, rows.shape[1]
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
            return _NONE, _NONE, _NONE, _NONE, 0
        keys = np.concatenate(
            [
                _cell_key(k, np.floor(lat / w).astype(np.int64), np.floor(lon / w).astype(np.int64))
                for k, w in self.levels
            ]
        )
        point = np.tile(np.arange(len(at), dtype=np.int64), len(self.levels))
        cell = np.searchsorted(self.keys, keys)
        hit = cell < len(self.keys)
        hit[hit] = self.keys[cell[hit]] == keys[hit]
        cell, point = cell[hit], point[hit]
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


class SegmentMany:
    """:class:`directkinds.SegmentTests` for a batch: each segment's within and before
    tests as sorted arrays end to end, bisected for every (event, segment) pair at once."""

    __slots__ = ("index", "sid", "sorts")

    def __init__(self, index: directkinds.SegmentTests) -> None:
        self.index = index
        sids = sorted(index.by_segment)
        self.sid = {s: k for k, s in enumerate(sids)}
        #: per form (within, before): (starts by segment, seconds, atom ids (negated -id-1))
        self.sorts = []
        for form in (0, 1):
            lens = [len(index.by_segment[s][form][0]) for s in sids]
            secs = [x for s in sids for x in index.by_segment[s][form][0]]
            ids = [a for s in sids for a in index.by_segment[s][form][1]]
            ok = all(-_I64 < x < _I64 for x in secs)
            self.sorts.append(
                (
                    np.concatenate(([0], np.cumsum(lens, dtype=np.int64))),
                    np.array(secs if ok else [], dtype=np.int64),
                    np.array(ids, dtype=np.int64),
                    ok,
                )
            )

    def found(self, values: Sequence[object], events: Sequence[Event]) -> Many:
        return self.words(values, events, None)[0]

    def words(
        self, values: Sequence[object], events: Sequence[Event], rows: np.ndarray | None
    ) -> tuple[Many, list[Words]]:
        """:meth:`found`, but (given ``rows``: each event's own bit as a row over the
        batch's words) where the (atom, event) pairs would be many
        (:data:`SEGMENT_PAIRS_A_CELL`), the atoms' bits as rows over words: an (event,
        segment) pair holds a run of its segment's atoms sorted by seconds (within: from
        its cut on; before: below it), so a segment's atoms' rows are prefix (suffix) ORs
        of its events' bits sorted by cut, as :func:`betree.packed.flatbatch._search` does
        a PB+tree's GT and LT lists.  Each event holds a segment once (a validated value
        is sorted by id, as :class:`directkinds.SegmentTests` needs, a repeat skipped), so
        over one segment's positions an XOR is the OR, and one XOR prefix over the touched
        segments' positions end to end gives each atom's row as the XOR of two of its
        rows.  Rich 100K (seed 7), 1,024 events: ~640K held pairs as ~470K (word, atom)
        cells, ~0.75x the pairs' cost (docs/bench/match-rich-batchkeys/README.md,
        richmany42)."""
        index = self.index
        at, segs, bound, odd = self._bounds(values, events)
        if at is None:
            return _each(index, range(len(values)), values, events), []
        cuts = [_bisect(secs, s[segs], s[segs + 1], bound) for s, secs, _, _ in self.sorts]
        planes: list[Words] = []
        if rows is not None and len(at) and self._by_rows(at, segs, cuts, rows.shape[1]):
            planes = self._rows(at, segs, cuts, rows)
            found: Many = (_NONE, _NONE, _NONE, _NONE, len(at))
        else:
            found = self._pairs(at, segs, cuts)
        if odd:
            return _join([found, _each(index, odd, values, events)]), planes
        return found, planes

    def _bounds(
        self, values: Sequence[object], events: Sequence[Event]
    ) -> tuple[Any, Any, Any, list[int]]:
        """The (event, segment) pairs (int64: positions in ``values``, segment numbers)
        and their bounds ``now - seconds(ts)``, and the events asked one by one (times
        beyond int64's safe range); ``None`` pairs where every event is to be."""
        sid = self.sid
        ev: list[int] = []
        seg: list[int] = []
        ts: list[int] = []
        now: list[int] = []
        odd: list[int] = []
        for k, (value, event) in enumerate(zip(values, events, strict=True)):
            t: Any = event.get(special.NOW)
            if t is None:
                continue
            if not -_I64 < t < _I64:
                odd.append(k)
                continue
            last = None
            for s, stamp in value:  # type: ignore[attr-defined]
                if s == last:
                    continue  # a repeated id counts at its first occurrence
                last = s
                j = sid.get(s)
                if j is not None:
                    ev.append(k)
                    seg.append(j)
                    ts.append(stamp)
                    now.append(t)
        if not all(s[3] for s in self.sorts):
            return None, None, None, odd
        stamps = np.array(ts, dtype=np.int64)
        at = np.array(ev, dtype=np.int64)
        segs = np.array(seg, dtype=np.int64)
        nows = np.array(now, dtype=np.int64)
        beyond = (stamps <= -_I64) | (stamps >= _I64)  # (-stamps would overflow)
        if beyond.any():  # those events one by one
            gone = np.unique(at[beyond])
            odd = sorted([*odd, *gone.tolist()])
            keep = ~np.isin(at, gone)
            stamps, at, segs, nows = stamps[keep], at[keep], segs[keep], nows[keep]
        q = np.where(stamps >= 0, stamps // 1_000_000, -(-stamps // 1_000_000))
        return at, segs, nows - q, odd

    def _pairs(self, at: np.ndarray, segs: np.ndarray, cuts: list[np.ndarray]) -> Many:
        """The held and failing (atom, event) pairs from each pair's cut in each form."""
        hits: list[np.ndarray] = []
        hits_at: list[np.ndarray] = []
        for form, ((starts, _, ids, _), cut) in enumerate(zip(self.sorts, cuts, strict=True)):
            lo, hi = starts[segs], starts[segs + 1]
            a, b = (cut, hi) if form == 0 else (lo, cut)  # within: from the cut; before: below
            hits.append(ids[ranges(a, b)])
            hits_at.append(np.repeat(at, b - a))
        hit, hit_at = np.concatenate(hits), np.concatenate(hits_at)
        neg = hit < 0
        return hit[~neg], hit_at[~neg], -hit[neg] - 1, hit_at[neg], len(at)

    def _by_rows(
        self, at: np.ndarray, segs: np.ndarray, cuts: list[np.ndarray], width: int
    ) -> bool:
        """Whether the pairs are at least :data:`SEGMENT_PAIRS_A_CELL` a (touched atom,
        word) cell and :data:`SEGMENT_PAIRS_LEAST`."""
        touched = _touched(segs, len(self.sid))[0]
        pairs = cells = 0
        for form, ((starts, _, _, _), cut) in enumerate(zip(self.sorts, cuts, strict=True)):
            lo, hi = starts[segs], starts[segs + 1]
            pairs += int((hi - cut).sum() if form == 0 else (cut - lo).sum())
            cells += int((starts[touched + 1] - starts[touched]).sum()) * width
        return pairs >= SEGMENT_PAIRS_A_CELL * cells and pairs >= SEGMENT_PAIRS_LEAST

    def _rows(
        self, at: np.ndarray, segs: np.ndarray, cuts: list[np.ndarray], rows: np.ndarray
    ) -> list[Words]:
        """The held atoms' and failing negations' rows over words (:meth:`words`), built
        without sorting (numpy 2.4's stable ``argsort`` and ``unique`` cost ~2-4 ms on
        ~11K pairs): each pair's bit XORed into its position's word (one ``ufunc.at``)."""
        width = rows.shape[1]
        word = rows.argmax(axis=1)  # (each event's row holds its one bit)
        bit = rows[np.arange(len(rows)), word]
        ids_out: list[np.ndarray] = []
        bits_out: list[np.ndarray] = []
        for form, ((starts, _, ids, _), cut) in enumerate(zip(self.sorts, cuts, strict=True)):
            lo, hi = starts[segs], starts[segs + 1]
            # within: atom p holds for the pairs at or below it (cut <= p); before: for
            # those above it (cut - 1 >= p); a pair holding nothing is left out
            pos = cut if form == 0 else cut - 1
            keep = (cut < hi) if form == 0 else (cut > lo)
            if not keep.any():
                continue
            pos, seg, ev = pos[keep], segs[keep], at[keep]
            touched, number = _touched(seg, len(self.sid))
            first, end = starts[touched], starts[touched + 1]
            base = np.cumsum(end - first) - (end - first)  # each touched segment's, compact
            t = number[seg]
            pos = base[t] + pos - first[t]
            size = int(base[-1] + end[-1] - first[-1])
            # the XOR prefix by word, column 0 empty: positions i..j of one segment are
            # columns j+1 ^ i (an event once a segment: there its XOR is its OR)
            prefix = np.zeros((width, size + 1), dtype=np.uint64)
            np.bitwise_xor.at(prefix.reshape(-1), word[ev] * (size + 1) + pos + 1, bit[ev])
            np.bitwise_xor.accumulate(prefix, axis=1, out=prefix)
            p = np.arange(size, dtype=np.int64)
            at_seg = np.repeat(np.arange(len(touched)), end - first)
            if form == 0:
                own = prefix[:, p + 1] ^ prefix[:, base[at_seg]]
            else:
                own = prefix[:, (base + end - first)[at_seg]] ^ prefix[:, p]
            some = np.flatnonzero(own.any(axis=0))
            ids_out.append(ids[ranges(first, end)].take(some))
            bits_out.append(own.take(some, axis=1))
        if not ids_out:
            return []
        hit, bits = np.concatenate(ids_out), np.concatenate(bits_out, axis=1)
        neg = hit < 0
        planes: list[Words] = []
        for part, on in ((~neg, True), (neg, False)):
            if part.any():
                aids = hit[part] if on else -hit[part] - 1
                planes.append((aids, bits.compress(part, axis=1), on))
        return planes


def _touched(segs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The segment numbers among ``segs`` (ascending) and each number's place among them
    (by a mask over all ``n``: no sort)."""
    mask = np.zeros(n, dtype=bool)
    mask[segs] = True
    return np.flatnonzero(mask), np.cumsum(mask) - 1


def _bisect(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``bisect_left(keys, x, lo, hi)`` for each row, as arrays."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        less = open_ & (keys[np.minimum(mid, len(keys) - 1)] < x)
        lo = np.where(less, mid + 1, lo)
        hi = np.where(open_ & ~less, mid, hi)


Batched = Each | ListMany | ByValue | GeoMany | SegmentMany


def many(kind: str, index: Any) -> Batched:
    """The batch form of one attribute's index of ``kind`` (``found(values, events)``)."""
    if kind == "list":
        return ListMany(index)
    if kind == "geo":
        return GeoMany(index)
    if kind == "segment":
        return SegmentMany(index)
    if kind in ("suffix", "contains", "pattern") or (kind == "presence" and index.by_value):
        return ByValue(index)
    return Each(index)
