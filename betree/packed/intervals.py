"""Clause-level interval matching by mismatch counting: dense range workloads, no atom
tested for every event.

On the range workloads of REIN, TAMA and HEM (every event defines every attribute, each
subscription a conjunction of wide ``between`` ranges) ~70% of all atoms hold for any
event and half of all clauses reach the BE-Tree's l-nodes: phase 1 and the clause check
then touch every atom.  This matcher works from the other side, as HEM's mismatch
counting does (docs/REFERENCES.md; not its code): per clause, its order atoms on each int
or float attribute collapse to one exact interval ``[lo, hi]`` of grid coordinates
(:mod:`betree.packed.bounds`); an event value ``x`` fails the clause there iff ``x < lo`` or
``x > hi``, and an undefined attribute fails it.  Per attribute, the attribute's values
are cut into at most :data:`BUCKETS` buckets at quantiles of the clauses' ends.  For each
bucket one bitset (a bit a clause) holds the clauses that fail for *every* value in it
(``hi`` below the bucket, ``lo`` above it); one more holds every clause constraining the
attribute (it fails them all when undefined).  An event ORs one bitset an attribute; the
clauses whose bits stay clear (the matches, and the few whose ``lo`` or ``hi`` lies in the
event's own bucket of some attribute: dense 1M, ~85 a shard of 500K clauses) have their
intervals checked against the event's values, read from a table of each clause's
intervals end to end.  Those that hold are the candidates; those with other atoms
(``!=``, ``in``, strings, lists, tests) are checked in a truth array of just those atoms:
PB+tree searches of the attributes that hold such atoms, and the direct tests.

Cost per event: one OR of ``attributes x clauses / 8`` bytes, in place into one row
(in cache), a bisection an attribute (a batch: one ``searchsorted`` an attribute for all
its events), the intervals of the clauses left, and per candidate its other atoms.
Memory: at most :data:`ROWS` bitsets of ``clauses / 8`` bytes (20 attributes: 83 bytes a
clause), a clause's start in the table (4 bytes), and per interval its attribute (1 byte)
and its two ends as uint32 offsets (8 bytes) when every attribute's ends span under 2**32
(closed ranges, as HEM's), else as u64 coordinates (16 bytes).  Built from packed views
(:mod:`betree.packed.flat`; a sharded store's shards together) or straight from the pages
(:mod:`betree.packed.leanbuild`), one attribute at a time (besides 9 bytes an atom of a
clause, the build holds one attribute's PB+trees and intervals, not arrays over every
atom), it describes their snapshot(s).
:mod:`betree.packed.ranging` decides, by cost, when it is used instead of the BE-Tree.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from betree.disk.grid import float_coord
from betree.matching.direct import DirectAtoms, mark
from betree.packed.bounds import atom_intervals, event_coords
from betree.packed.flat import WIDTH
from betree.packed.flatbatch import Shard
from pbtree.view import SearchView, ranges

#: the most buckets of one attribute (dense 1M, a shard of 500K clauses, 300 events: 64
#: buckets 0.37-0.49 ms an event, 32 0.39-0.51, for 74 MB of bitsets less)
BUCKETS = 32
#: the most bitsets in all (bounds memory at ROWS / 8 bytes a clause)
ROWS = 1280
_KINDS = ("int", "float")
_SIGN = 1 << 63
_SPAN = 1 << 32
_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))


class Part(NamedTuple):
    """One shard's clauses as the matcher is built from them: from a packed view
    (:func:`parts`) or straight from the pages (:mod:`betree.packed.leanbuild`)."""

    exts: np.ndarray  # the clauses' external ids
    sids: np.ndarray | None  # their subscription numbers, when one has several clauses
    aid: np.ndarray  # every clause's atom ids end to end (atom 0 left out), uint32
    clause: np.ndarray  # and the clause of each, int32
    searches: Mapping[str, SearchView]  # the PB+trees by attribute (may read each when asked)
    direct: Mapping[str, DirectAtoms]  # the direct atoms by attribute
    atoms: int  # its first atom in the whole's numbering
    size: int  # the atom ids it numbers


class Intervals:
    """The clauses of some shards as intervals and bitsets (module docstring)."""

    def __init__(self, shards: Sequence[Part], kinds: Mapping[str, str]) -> None:
        self.atoms = shards[-1].atoms + shards[-1].size
        sizes = [len(s.exts) for s in shards]
        self.clauses = n = int(sum(sizes))
        self.words = (n + 63) // 64
        self.exts = shards[0].exts if len(shards) == 1 else np.concatenate([s.exts for s in shards])
        self.sids = _sid_keys(shards)
        names = sorted({a for s in shards for a in s.searches if kinds.get(a) in _KINDS})
        self.names = names
        self.kinds = [kinds[a] for a in names]
        #: per shard: the searches of the attributes whose atoms are not all intervals
        #: (read for the clauses using those atoms), its direct atoms, its first atom
        self.kept = [
            ({a: s.searches[a] for a in s.searches if a not in names}, s.direct, s.atoms)
            for s in shards
        ]
        bases = np.cumsum([0, *sizes])
        done = [np.zeros(len(s.aid), dtype=bool) for s in shards]  # the pairs of intervals
        ends = _Ends(len(names), n)
        for name in names:  # one attribute at a time: its PB+trees, then its ends
            cs, los, his = [], [], []
            for s, base, mine, (kept, _, _) in zip(shards, bases, done, self.kept, strict=False):
                search = s.searches.get(name)
                if search is None:
                    continue
                at, alo, ahi, others = atom_intervals(search, kinds[name])
                if others:
                    kept[name] = search
                pos = np.full(s.size, -1, dtype=np.int32)  # atom -> its interval
                pos[at] = np.arange(len(at), dtype=np.int32)
                which = pos[s.aid]
                del pos
                sel = np.flatnonzero(which >= 0)
                mine[sel] = True
                which = which[sel]
                cs.append(s.clause[sel].astype(np.int64) + base)
                los.append(alo[which])
                his.append(ahi[which])
            ends.add(*(np.concatenate(part) for part in (cs, los, his)))
        #: attributes whose PB+trees hold other atoms: searched for the clauses using them
        self.searched = {a for kept, _, _ in self.kept for a in kept}
        self.direct = any(s.direct for s in shards)
        self._rest(shards, done, bases, n)
        del done
        #: clauses no interval constrains: candidates for every event
        self.unbounded = n - int(np.count_nonzero(ends.bounded))
        self.bits, self.row0, self.pad = ends.finish()
        self.edges, self.at, self.wide = ends.edges, ends.at, ends.wide
        self.ptr, self.iattr, self.ilo, self.ihi = ends.table()
        self.bucket_ends = ends.bucket_ends
        # (the edges as Python lists: one event's bucket found without a numpy call)
        self.edge_list = [e.tolist() for e in self.edges]

    def _rest(
        self, shards: Sequence[Part], done: Sequence[np.ndarray], bases: np.ndarray, n: int
    ) -> None:
        """Each clause's atoms other than intervals, end to end (``rest_at``: n + 1
        entries, one when no clause has any)."""
        ids = [s.aid[~d].astype(np.int64) + s.atoms for s, d in zip(shards, done, strict=True)]
        cls = [s.clause[~d] + b for s, d, b in zip(shards, done, bases, strict=False)]
        self.rest_ids = np.concatenate([np.zeros(0, dtype=np.int64), *ids])
        clause = np.concatenate([np.zeros(0, dtype=np.int64), *cls])
        counts = np.bincount(clause, minlength=n)
        self.has_rest = counts > 0
        self.rest_at = np.zeros(n + 1 if len(clause) else 1, dtype=np.int64)
        if len(clause):
            np.cumsum(counts, out=self.rest_at[1:])

    @property
    def nbytes(self) -> int:
        """Memory held (the views it was built from not counted)."""
        arrays = [self.bits, self.rest_ids, self.rest_at, self.has_rest, *self.edges]
        arrays += [self.ptr, self.iattr, self.ilo, self.ihi]
        return sum(int(a.nbytes) for a in arrays)

    def cost(self) -> float:
        """Estimated work an event, in words touched: the bitsets ORed, the ends of one
        bucket an attribute (a bound on the clauses left to check by their intervals), and
        the candidates checked through other atoms."""
        return len(self.names) * self.words + self.bucket_ends + self.unbounded * WIDTH

    def match(self, batch: Sequence[Mapping[str, object]]) -> tuple[list[np.ndarray], int]:
        """Per validated event, the external ids it matches, each once (as
        :func:`betree.disk.nodes.id_array`); and the candidate clauses counted over the batch.
        A batch shares its bucket search (one ``searchsorted`` an attribute for all its
        events) and the check of the clauses its bitsets leave by their intervals; each
        event ORs its bitsets in place into one row reused (it stays in cache)."""
        if not batch:
            return [], 0
        if len(batch) == 1:
            row, query = self._one(batch[0])
            rows, queries = [row], np.array([query], dtype=self.ilo.dtype)
        else:
            at, queries = self._cuts(batch)
            rows = at.tolist()
        fail = np.empty(self.words, dtype=np.uint64)
        passed = [self._passing(r, fail) for r in rows]
        event = np.repeat(np.arange(len(batch), dtype=np.int64), [len(p) for p in passed])
        clause = np.concatenate([np.zeros(0, dtype=np.int64), *passed])
        keep = self._within(event, clause, queries)
        event, clause = event[keep], clause[keep]
        return self._results(batch, event, clause), len(clause)

    def _passing(self, rows: list[int], fail: np.ndarray) -> np.ndarray:
        """The clauses (in order) that no bitset of ``rows`` fails (one an attribute: its
        event's bucket, or its row for undefined), ORed in place into ``fail``."""
        bits = self.bits
        if rows:
            np.copyto(fail, bits[rows[0]])
            for row in rows[1:]:
                np.bitwise_or(fail, bits[row], out=fail)
        else:
            fail[:] = 0
        if len(fail):
            fail[-1] |= self.pad[0]
        np.invert(fail, out=fail)
        word = np.flatnonzero(fail)
        if not len(word):
            return word
        bit = np.unpackbits(fail[word].view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        r, j = np.nonzero(bit)
        return word[r] * 64 + j

    def _within(self, event: np.ndarray, clause: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """Whether each (event, clause) pair's every interval holds the event's value:
        ``queries`` (events x attributes) as the intervals are stored (:func:`_query`)."""
        lo, hi = self.ptr[clause], self.ptr[clause + 1]
        at = ranges(lo, hi)
        if not len(at):
            return np.ones(len(clause), dtype=bool)
        a = self.iattr[at]
        q = queries[np.repeat(event, hi - lo), a]
        out = (q < self.ilo[at]) | (q > self.ihi[at])
        owner = np.repeat(np.arange(len(clause), dtype=np.int64), hi - lo)
        return np.bincount(owner[out], minlength=len(clause)) == 0

    def _one(self, values: Mapping[str, object]) -> tuple[list[int], list[int]]:
        """:meth:`_cuts` of one event, as Python lists (fewer numpy calls)."""
        rows, queries = [], []
        for a, name in enumerate(self.names):
            v = values.get(name)
            if v is None:
                rows.append(self.row0[a] + len(self.edges[a]))
                queries.append(0)
                continue
            x = v + _SIGN if self.kinds[a] == "int" else float_coord(v)  # type: ignore[operator, arg-type]
            rows.append(self.row0[a] + bisect_right(self.edge_list[a], x) - 1)
            queries.append(x if self.wide else _query(x, self.at[a]))
        return rows, queries

    def _cuts(self, batch: Sequence[Mapping[str, object]]) -> tuple[np.ndarray, np.ndarray]:
        """Per event, the bitset of each attribute (its bucket's, or the attribute's
        undefined row) and its value as the intervals are stored (events x attributes)."""
        e_count, a_count = len(batch), len(self.names)
        rows = np.empty((e_count, a_count), dtype=np.int64)
        queries = np.zeros((e_count, a_count), dtype=self.ilo.dtype)
        every = self._defined(batch)  # (every event defining every attribute: no masks)
        for a, name in enumerate(self.names):
            if every is not None:
                has: Any = slice(None)
                x = every[:, a]
            else:
                values = [v.get(name) for v in batch]
                has = np.array([x is not None for x in values], dtype=bool)
                rows[:, a] = self.row0[a] + len(self.edges[a])  # undefined: fails all
                if not has.any():
                    continue
                x = event_coords(self.kinds[a], [v for v in values if v is not None])
            rows[has, a] = self.row0[a] + np.searchsorted(self.edges[a], x, "right") - 1
            queries[has, a] = x if self.wide else _queries(x, self.at[a])
        return rows, queries

    def _defined(self, batch: Sequence[Mapping[str, object]]) -> np.ndarray | None:
        """The events' coordinates (events x attributes) when every event defines every
        attribute (the dense workloads), in two array conversions; else None."""
        coords = np.empty((len(batch), len(self.names)), dtype=np.uint64)
        for kind in _KINDS:
            cols = [a for a, k in enumerate(self.kinds) if k == kind]
            if not cols:
                continue
            names = [self.names[a] for a in cols]
            try:
                table = [[v[n] for n in names] for v in batch]
            except KeyError:
                return None
            coords[:, cols] = event_coords(kind, table)
        return coords

    def _results(
        self, batch: Sequence[Mapping[str, object]], event: np.ndarray, clause: np.ndarray
    ) -> list[np.ndarray]:
        """Per event of ``batch``, the ids of its candidates whose other atoms hold."""
        if len(clause) and self.has_rest[clause].any():
            keep = np.ones(len(clause), dtype=bool)
            for e in np.unique(event[self.has_rest[clause]]).tolist():
                mine = np.flatnonzero((event == e) & self.has_rest[clause])
                keep[mine] = self._others_hold(batch[e], clause[mine])
            event, clause = event[keep], clause[keep]
        cuts = np.searchsorted(event, np.arange(len(batch) + 1))
        out = []
        for e in range(len(batch)):
            mine = clause[cuts[e] : cuts[e + 1]]
            if self.sids is not None and len(mine):
                _, first = np.unique(self.sids[mine], return_index=True)
                mine = mine[np.sort(first)]
            out.append(self.exts[mine])
        return out

    def _others_hold(self, values: Mapping[str, object], clauses: np.ndarray) -> np.ndarray:
        """Whether each of ``clauses``' atoms other than intervals hold for one event."""
        sat = np.zeros(self.atoms, dtype=bool)
        found: list[np.ndarray] = []
        for searches, direct, base in self.kept:
            for name, search in searches.items():
                if name in values:
                    found += [run.astype(np.int64) + base for run in search.collect(values[name])]
            if direct:
                mark(sat, direct, values, base)
        if found:
            sat[np.concatenate(found)] = True
        lo, hi = self.rest_at[clauses], self.rest_at[clauses + 1]
        truth = sat[self.rest_ids[ranges(lo, hi)]]
        return np.logical_and.reduceat(truth, np.r_[0, np.cumsum(hi - lo)[:-1]])


class _Ends:
    """The build's per-attribute state: each attribute's intervals merged per clause, its
    buckets cut and its bitsets filled as they come (:meth:`add`); then the bitsets
    (:meth:`finish`) and each clause's intervals end to end (:meth:`table`).  Memory: the
    bitsets (rows never filled are never touched), every attribute's intervals (12 or 20
    bytes each) until :meth:`table`, and one attribute's sorted ends at a time."""

    def __init__(self, attrs: int, n: int) -> None:
        self.buckets = max(1, min(BUCKETS, ROWS // max(attrs, 1) - 1))
        self.bounded = np.zeros(n, dtype=bool)  # clauses some interval constrains
        self.n = n
        w = (n + 63) // 64
        self.bits = np.zeros((attrs * (self.buckets + 1), w), dtype=np.uint64)
        self.mask = np.zeros(w * 64, dtype=bool)
        self.rows = 0
        self.row0: list[int] = []
        self.edges: list[np.ndarray] = []
        self.at: list[int | None] = []
        self.wide = False  # some attribute's ends span 2**32 - 2 or more: all kept as u64
        self.bucket_ends = 0.0  # the lo ends of one bucket, summed over the attributes
        self.cls: list[np.ndarray] = []
        self.los: list[np.ndarray] = []
        self.his: list[np.ndarray] = []

    def add(self, clause: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """One attribute's intervals (a clause's several on it intersected)."""
        order = np.argsort(clause, kind="stable")
        clause = clause[order]
        first = np.flatnonzero(np.r_[True, clause[1:] != clause[:-1]]) if len(clause) else clause
        if len(first):
            lo = np.maximum.reduceat(lo[order], first)
            hi = np.minimum.reduceat(hi[order], first)
        c = clause[first]
        del order, clause
        self.bounded[c] = True
        lo_order, hi_order = np.argsort(lo, kind="stable"), np.argsort(hi, kind="stable")
        xs, ys = lo[lo_order], hi[hi_order]
        ends = np.sort(np.concatenate([xs, ys]))
        buckets = self.buckets
        picks = ends[(np.arange(1, buckets) * len(ends)) // buckets] if len(ends) else ends
        del ends
        edges = np.unique(np.concatenate([np.zeros(1, dtype=np.uint64), picks]))
        self.edges.append(edges)
        self.bucket_ends += len(xs) / len(edges)
        lcut = np.append(np.searchsorted(xs, edges, "left"), len(xs)).tolist()
        hcut = np.searchsorted(ys, edges, "left").tolist()
        xc, yc = c[lo_order], c[hi_order]
        del lo_order, hi_order
        self.row0.append(self.rows)
        mask = self.mask
        for b in range(len(edges)):  # fails for every value of bucket b
            mask[:] = False
            mask[xc[lcut[b + 1] :]] = True
            mask[yc[: hcut[b]]] = True
            self._row(mask)
        mask[:] = False
        mask[c] = True  # the attribute undefined
        self._row(mask)
        del xc, yc
        at = _offsets(xs, ys)
        self.at.append(at)
        self.cls.append(c.astype(np.int32))
        if at is None:
            self.wide = self.wide or len(c) > 0
            self.los.append(lo)
            self.his.append(hi)
        else:
            base = np.uint64(at)
            self.los.append((lo - base).astype(np.uint32))
            self.his.append((hi - base).astype(np.uint32))

    def _row(self, mask: np.ndarray) -> None:
        self.bits[self.rows] = np.packbits(mask, bitorder="little").view(np.uint64)
        self.rows += 1

    def finish(self) -> tuple[np.ndarray, list[int], np.ndarray]:
        """The bitsets (a row a bucket, one for the attribute undefined), each attribute's
        first row, and the last word's padding bits."""
        self.mask = np.zeros(0, dtype=bool)
        n, w = self.n, self.bits.shape[1]
        pad = np.zeros(w * 64, dtype=bool)
        pad[n:] = True
        last = np.packbits(pad, bitorder="little").view(np.uint64)[-1:] if w else np.zeros(0)
        return self.bits[: self.rows], self.row0, last.astype(np.uint64)

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each clause's intervals end to end, in attribute order: where each clause's
        start (clauses + 1), their attributes, and their ``lo``/``hi`` (uint32 offsets from
        each attribute's :attr:`at`, or u64 coordinates when :attr:`wide`)."""
        n = self.n
        counts = np.zeros(n, dtype=np.int64)
        for c in self.cls:
            counts[c] += 1
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        del counts
        total = int(ptr[-1])
        kind = (
            np.uint8
            if len(self.cls) <= 1 << 8
            else np.uint16
            if len(self.cls) <= 1 << 16
            else np.int32
        )
        attr = np.empty(total, dtype=kind)
        ends = np.uint64 if self.wide else np.uint32
        lo_all, hi_all = np.empty(total, dtype=ends), np.empty(total, dtype=ends)
        fill = ptr[:-1].copy()
        for a, (c, lo, hi, at) in enumerate(
            zip(self.cls, self.los, self.his, self.at, strict=True)
        ):
            pos = fill[c]
            attr[pos] = a
            if self.wide and at is not None:  # (back to coordinates)
                lo, hi = lo.astype(np.uint64) + np.uint64(at), hi.astype(np.uint64) + np.uint64(at)
            lo_all[pos], hi_all[pos] = lo, hi
            fill[c] += 1
        self.cls, self.los, self.his = [], [], []
        small = ptr.astype(np.int32) if total < 1 << 31 else ptr
        return small, attr, lo_all, hi_all


def _offsets(xs: np.ndarray, ys: np.ndarray) -> int | None:
    """The base of an attribute's intervals kept as uint32 offsets (one less than the
    least end: the offsets run ``1 .. 2**32 - 2``; 0 when the least end is coordinate 0,
    below which no event lies), when its sorted ends ``xs`` and ``ys`` span under
    ``2**32 - 2``; else None (kept as u64 coordinates)."""
    if not len(xs):
        return None
    least, most = min(int(xs[0]), int(ys[0])), max(int(xs[-1]), int(ys[-1]))
    if most - least >= _SPAN - 2:
        return None
    return max(least - 1, 0)


def _query(x: int, at: int | None) -> int:
    """An event coordinate as its attribute's intervals are stored (:func:`_offsets`):
    an offset clipped to ``[0, 2**32 - 1]``, which orders against every stored offset
    (``1 .. 2**32 - 2``) as the coordinate does against the ends (``at`` None: the
    attribute holds no interval, 0)."""
    if at is None:
        return 0
    return min(max(x - at, 0), _SPAN - 1)


def _queries(x: np.ndarray, at: int | None) -> np.ndarray:
    """:func:`_query` of an array of coordinates."""
    if at is None:
        return np.zeros(len(x), dtype=np.uint32)
    base = np.uint64(at)
    return np.minimum(np.where(x > base, x - base, 0), _SPAN - 1).astype(np.uint32)


def parts(shards: Sequence[Shard]) -> list[Part]:
    """The shards' packed views as :class:`Part` s: each clause's atom ids read off its
    rows (the true atoms 0 left out; uint32 and int32: half the build's memory)."""
    found = []
    for s in shards:
        view = s.view
        per: np.ndarray = np.diff(view.row_at.astype(np.int64)) * WIDTH
        ids = view.rows.reshape(-1)
        keep = ids != 0
        clause = np.repeat(np.arange(len(view.exts), dtype=np.int32), per)[keep]
        aid = ids[keep].astype(np.uint32)
        found.append(
            Part(view.exts, view.sids, aid, clause, view.searches, s.direct, s.atoms, s.size)
        )
    return found


def _sid_keys(shards: Sequence[Part]) -> np.ndarray | None:
    """Per clause, its subscription (shard in the high bits) when some subscription has
    several clauses, so that each is reported once; else None."""
    if all(s.sids is None for s in shards):
        return None
    keys = []
    for k, s in enumerate(shards):
        sids = s.sids if s.sids is not None else np.arange(len(s.exts), dtype=np.uint64)
        keys.append(sids.astype(np.uint64) | np.uint64(k << 48))
    return np.concatenate(keys)
