"""Clause-level interval matching by mismatch counting: dense range workloads, no atom
tested for every event.

On the range workloads of REIN, TAMA and HEM (every event defines every attribute, each
subscription a conjunction of wide ``between`` ranges) ~70% of all atoms hold for any
event and half of all clauses reach the BE-Tree's l-nodes: phase 1 and the clause check
then touch every atom.  This matcher works from the other side, as HEM's mismatch
counting does (docs/REFERENCES.md; not its code): per clause, its order atoms on each int
or float attribute collapse to one exact interval ``[lo, hi]`` of grid coordinates
(:mod:`betree.packed.bounds`); an event value ``x`` fails the clause there iff ``x < lo`` or
``x > hi``, and an undefined attribute fails it.  Per attribute, the clauses' ``lo`` and
``hi`` are kept sorted, and the attribute's values are cut into at most :data:`BUCKETS`
buckets at quantiles of those ends.  For each bucket one bitset (a bit a clause) holds
the clauses that fail for *every* value in it (``hi`` below the bucket, ``lo`` above
it); one more holds every clause constraining the attribute (it fails them all when
undefined).  An event ORs one bitset an attribute and sets the bits of the clauses whose
``lo`` or ``hi`` lies in its own bucket and fails: two slices of the sorted ends.  The
clauses whose bits stay clear are the candidates; those with other atoms (``!=``, ``in``,
strings, lists, tests) are checked in a truth array of just those atoms: PB+tree searches
of the attributes that hold such atoms, and the direct tests.

Cost per event: one OR of ``attributes x clauses / 8`` bytes, two ``searchsorted`` an
attribute, the ends of one bucket an attribute, and per candidate its other atoms.
Memory: at most :data:`ROWS` bitsets of ``clauses / 8`` bytes (160 bytes a clause), and
per interval 16 bytes (its two ends as uint32 offsets when an attribute's ends span
under 2**32, else 24, and their clause numbers).  Built from packed views
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

#: the most buckets of one attribute
BUCKETS = 64
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
        self.words = w = (n + 63) // 64
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
        self.bits, self.row0, self.ends_clause, self.pad = ends.finish(w, n)
        self.edges, self.lcut, self.hcut, self.at = ends.edges, ends.lcut, ends.hcut, ends.at
        self.lo_vals, self.hi_vals = ends.lo_vals, ends.hi_vals
        self.lo_at: list[int] = np.cumsum([0, *(len(v) for v in self.lo_vals)]).tolist()
        self.hi_at: list[int] = np.cumsum([0, *(len(v) for v in self.hi_vals)]).tolist()
        self.hi_base = self.lo_at[-1]
        # (the same as Python lists: one event's bucket found without a numpy call)
        self.edge_list = [e.tolist() for e in self.edges]
        self.lcut_list = [c.tolist() for c in self.lcut]
        self.hcut_list = [c.tolist() for c in self.hcut]

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
        arrays = [self.bits, self.ends_clause, self.rest_ids, self.rest_at, self.has_rest]
        arrays += self.lo_vals + self.hi_vals + self.edges + self.lcut + self.hcut
        return sum(int(a.nbytes) for a in arrays)

    def cost(self) -> float:
        """Estimated work an event, in words touched: the bitsets ORed, the ends of one
        bucket an attribute, and the candidates checked through other atoms."""
        ends = sum(len(v) / max(len(e), 1) for v, e in zip(self.lo_vals, self.edges, strict=True))
        return len(self.names) * self.words + ends + self.unbounded * WIDTH

    def match(self, batch: Sequence[Mapping[str, object]]) -> tuple[list[np.ndarray], int]:
        """Per validated event, the external ids it matches, each once (as
        :func:`betree.disk.nodes.id_array`); and the candidate clauses counted over the batch.
        A batch shares its bucket and slice search (one ``searchsorted`` an attribute for
        all its events), then each event takes its bitset ORs and slices in two buffers
        reused (one row of bitset and one byte a clause: they stay in cache)."""
        if not batch:
            return [], 0
        if len(batch) == 1:
            cuts = [self._one(batch[0])]
        else:
            rows, starts, stops = self._cuts(batch)
            cuts = list(zip(rows.tolist(), starts.tolist(), stops.tolist(), strict=True))
        fail = np.empty(self.words, dtype=np.uint64)
        hit = np.zeros(self.words * 64, dtype=bool)
        passed = [self._passing(*cut, fail, hit) for cut in cuts]
        counts = [len(p) for p in passed]
        event = np.repeat(np.arange(len(batch), dtype=np.int64), counts)
        clause = np.concatenate([np.zeros(0, dtype=np.int64), *passed])
        return self._results(batch, event, clause), int(sum(counts))

    def _passing(
        self,
        rows: list[int],
        starts: list[int],
        stops: list[int],
        fail: np.ndarray,
        hit: np.ndarray,
    ) -> np.ndarray:
        """One event's candidates, in clause order: the clauses no interval fails.
        ``rows``: its bitset of each attribute, ORed in place into ``fail``; ``starts``/
        ``stops``: the slices of :attr:`ends_clause` whose clauses fail individually,
        marked in ``hit`` (a byte a clause; int64 ids: numpy scatters int32 ones 2.5x
        slower) and packed onto ``fail``."""
        bits = self.bits
        if rows:
            np.copyto(fail, bits[rows[0]])
            for row in rows[1:]:
                np.bitwise_or(fail, bits[row], out=fail)
        else:
            fail[:] = 0
        ends = self.ends_clause
        cut = [ends[s:e] for s, e in zip(starts, stops, strict=True) if e > s]
        if cut:
            hit[:] = False
            hit[np.concatenate(cut, dtype=np.int64)] = True
            fail |= np.packbits(hit, bitorder="little").view(np.uint64)
        if len(fail):
            fail[-1] |= self.pad[0]
        np.invert(fail, out=fail)
        word = np.flatnonzero(fail)
        if not len(word):
            return word
        bit = np.unpackbits(fail[word].view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        r, j = np.nonzero(bit)
        return word[r] * 64 + j

    def _one(self, values: Mapping[str, object]) -> tuple[list[int], list[int], list[int]]:
        """:meth:`_cuts` of one event, as Python lists (fewer numpy calls)."""
        rows, starts, stops = [], [], []
        for a, name in enumerate(self.names):
            v = values.get(name)
            if v is None:
                rows.append(self.row0[a] + len(self.edges[a]))
                continue
            x = v + _SIGN if self.kinds[a] == "int" else float_coord(v)  # type: ignore[operator, arg-type]
            b = bisect_right(self.edge_list[a], x) - 1
            rows.append(self.row0[a] + b)
            xu = _query(x, self.at[a])
            starts.append(self.lo_at[a] + int(self.lo_vals[a].searchsorted(xu, "right")))
            stops.append(self.lo_at[a] + self.lcut_list[a][b + 1])
            base = self.hi_base + self.hi_at[a]
            starts.append(base + self.hcut_list[a][b])
            stops.append(base + int(self.hi_vals[a].searchsorted(xu, "left")))
        return rows, starts, stops

    def _cuts(
        self, batch: Sequence[Mapping[str, object]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per event, the bitset of each attribute (``rows``), and the slices of the
        sorted ends whose clauses fail individually (``starts``/``stops``, two an
        attribute, indices into :attr:`ends_clause`)."""
        e_count, a_count = len(batch), len(self.names)
        rows = np.empty((e_count, a_count), dtype=np.int64)
        starts = np.zeros((e_count, 2 * a_count), dtype=np.int64)
        stops = np.zeros((e_count, 2 * a_count), dtype=np.int64)
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
            b = np.searchsorted(self.edges[a], x, "right") - 1
            rows[has, a] = self.row0[a] + b
            q = _queries(x, self.at[a])
            starts[has, 2 * a] = self.lo_at[a] + np.searchsorted(self.lo_vals[a], q, "right")
            stops[has, 2 * a] = self.lo_at[a] + self.lcut[a][b + 1]
            base = self.hi_base + self.hi_at[a]
            starts[has, 2 * a + 1] = base + self.hcut[a][b]
            stops[has, 2 * a + 1] = base + np.searchsorted(self.hi_vals[a], q, "left")
        return rows, starts, stops

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
    """The build's per-attribute state: each attribute's intervals merged per clause,
    their ends sorted and bucketed as they come (:meth:`add`), then every bitset in one
    array (:meth:`finish`).  Memory: the kept ends, and one attribute's pairs at a time."""

    def __init__(self, attrs: int, n: int) -> None:
        self.buckets = max(1, min(BUCKETS, ROWS // max(attrs, 1) - 1))
        self.bounded = np.zeros(n, dtype=bool)  # clauses some interval constrains
        self.edges: list[np.ndarray] = []
        self.lcut: list[np.ndarray] = []
        self.hcut: list[np.ndarray] = []
        self.at: list[int | None] = []
        self.lo_vals: list[np.ndarray] = []
        self.hi_vals: list[np.ndarray] = []
        self.lo_cls: list[np.ndarray] = []
        self.hi_cls: list[np.ndarray] = []

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
        self.lo_cls.append(c[lo_order].astype(np.int32))
        self.hi_cls.append(c[hi_order].astype(np.int32))
        del lo_order, hi_order, c
        ends = np.sort(np.concatenate([xs, ys]))
        buckets = self.buckets
        picks = ends[(np.arange(1, buckets) * len(ends)) // buckets] if len(ends) else ends
        edges = np.unique(np.concatenate([np.zeros(1, dtype=np.uint64), picks]))
        self.edges.append(edges)
        self.lcut.append(np.append(np.searchsorted(xs, edges, "left"), len(xs)).astype(np.int64))
        self.hcut.append(np.searchsorted(ys, edges, "left").astype(np.int64))
        at, (xs, ys) = _offsets(xs, ys)
        self.at.append(at)
        self.lo_vals.append(xs)
        self.hi_vals.append(ys)

    def finish(self, w: int, n: int) -> tuple[np.ndarray, list[int], np.ndarray, np.ndarray]:
        """The bitsets (a row a bucket, one for the attribute undefined), each attribute's
        first row, the clauses of the sorted ends (every attribute's lo, then hi) and the
        last word's padding bits."""
        rows = sum(len(e) + 1 for e in self.edges)
        bits = np.zeros((rows, w), dtype=np.uint64)
        mask = np.zeros(w * 64, dtype=bool)
        row0 = []
        row = 0
        for edges, lcut, hcut, xc, yc in zip(
            self.edges, self.lcut, self.hcut, self.lo_cls, self.hi_cls, strict=True
        ):
            row0.append(row)
            for b in range(len(edges)):  # fails for every value of bucket b
                mask[:] = False
                mask[xc[lcut[b + 1] :]] = True
                mask[yc[: hcut[b]]] = True
                bits[row] = np.packbits(mask, bitorder="little").view(np.uint64)
                row += 1
            mask[:] = False
            mask[xc] = True  # the attribute undefined
            bits[row] = np.packbits(mask, bitorder="little").view(np.uint64)
            row += 1
        clauses = np.concatenate([np.zeros(0, dtype=np.int32), *self.lo_cls, *self.hi_cls])
        self.lo_cls = self.hi_cls = []
        pad = np.zeros(w * 64, dtype=bool)
        pad[n:] = True
        last = np.packbits(pad, bitorder="little").view(np.uint64)[-1:] if w else np.zeros(0)
        return bits, row0, clauses, last.astype(np.uint64)


def _offsets(xs: np.ndarray, ys: np.ndarray) -> tuple[int | None, tuple[np.ndarray, np.ndarray]]:
    """An attribute's sorted ends as uint32 offsets from one less than the least (half
    the memory: 8 bytes an end with its clause), when they span under ``2**32 - 2``;
    else as they are (None)."""
    if not len(xs):
        return None, (xs, ys)
    least, most = min(int(xs[0]), int(ys[0])), max(int(xs[-1]), int(ys[-1]))
    if most - least >= _SPAN - 2:
        return None, (xs, ys)
    at = np.uint64(least - 1)
    return least - 1, ((xs - at).astype(np.uint32), (ys - at).astype(np.uint32))


def _query(x: int, at: int | None) -> np.unsignedinteger[Any]:
    """An event coordinate as its attribute's ends are stored (:func:`_offsets`): an
    offset clipped to ``[0, 2**32 - 1]``, which orders against every stored offset
    (``1 .. 2**32 - 2``) as the coordinate does against the ends."""
    if at is None:
        return np.uint64(x)
    return np.uint32(min(max(x - at, 0), _SPAN - 1))


def _queries(x: np.ndarray, at: int | None) -> np.ndarray:
    """:func:`_query` of an array of coordinates."""
    if at is None:
        return x
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
