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
(:mod:`betree.packed.flat`; a sharded store's shards together), it describes their snapshot(s).
:mod:`betree.packed.ranging` decides, by cost, when it is used instead of the BE-Tree.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.disk.grid import float_coord
from betree.matching.direct import mark
from betree.packed.bounds import atom_intervals, event_coords
from betree.packed.flat import WIDTH
from betree.packed.flatbatch import Shard
from pbtree.view import ranges

#: the most buckets of one attribute
BUCKETS = 64
#: the most bitsets in all (bounds memory at ROWS / 8 bytes a clause)
ROWS = 1280
#: the most bytes of bitsets ORed at once (events x attributes x words)
CHUNK_BYTES = 8 << 20
_KINDS = ("int", "float")
_SIGN = 1 << 63
_SPAN = 1 << 32
_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))


class Intervals:
    """The clauses of some packed views as intervals and bitsets (module docstring)."""

    def __init__(self, shards: Sequence[Shard], kinds: Mapping[str, str]) -> None:
        self.shards = list(shards)
        self.atoms = self.shards[-1].atoms + self.shards[-1].size
        sizes = [len(s.view.exts) for s in self.shards]
        self.clauses = n = int(sum(sizes))
        self.words = w = (n + 63) // 64
        self.exts = np.concatenate([s.view.exts for s in self.shards])
        self.sids = _sid_keys(self.shards)
        names = sorted({a for s in self.shards for a in s.view.searches if kinds.get(a) in _KINDS})
        self.names = names
        self.kinds = [kinds[a] for a in names]
        code = {a: i for i, a in enumerate(names)}
        # per atom id (all shards numbered together): interval or not, attribute, ends
        simple = np.zeros(self.atoms, dtype=bool)
        attr = np.full(self.atoms, -1, dtype=np.int32)
        lo = np.zeros(self.atoms, dtype=np.uint64)
        hi = np.zeros(self.atoms, dtype=np.uint64)
        #: attributes whose PB+trees hold other atoms: searched for the clauses using them
        self.searched: set[str] = set()
        for s in self.shards:
            for name, search in s.view.searches.items():
                if name not in code:
                    self.searched.add(name)
                    continue
                at, alo, ahi, others = atom_intervals(search, kinds[name])
                at += s.atoms
                simple[at], attr[at], lo[at], hi[at] = True, code[name], alo, ahi
                if others:
                    self.searched.add(name)
        aid, clause = _clause_atoms(self.shards, sizes)
        one = simple[aid]
        self._rest(aid[~one], clause[~one], n)
        self._build(clause[one], attr[aid[one]], lo[aid[one]], hi[aid[one]], n, w)
        bounded = np.zeros(n, dtype=bool)
        bounded[clause[one]] = True
        #: clauses no interval constrains: candidates for every event
        self.unbounded = int(n - np.count_nonzero(bounded))

    def _rest(self, aid: np.ndarray, clause: np.ndarray, n: int) -> None:
        """Each clause's atoms other than intervals, end to end (``rest_at``: n + 1)."""
        self.rest_ids = aid
        self.rest_at = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(clause, minlength=n), out=self.rest_at[1:])
        self.has_rest = np.diff(self.rest_at) > 0
        self.direct = any(s.direct for s in self.shards)

    def _build(
        self, clause: np.ndarray, attr: np.ndarray, lo: np.ndarray, hi: np.ndarray, n: int, w: int
    ) -> None:
        """Intervals merged per (clause, attribute), sorted ends and bitsets per attribute."""
        a_count = max(len(self.names), 1)
        key = clause.astype(np.int64) * a_count + attr
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else key
        lo = np.maximum.reduceat(lo[order], first) if len(first) else lo
        hi = np.minimum.reduceat(hi[order], first) if len(first) else hi
        clause, attr = key[first] // a_count, key[first] % a_count
        buckets = max(1, min(BUCKETS, ROWS // a_count - 1))
        self.edges: list[np.ndarray] = []
        self.lcut: list[np.ndarray] = []
        self.hcut: list[np.ndarray] = []
        self.row0: list[int] = []
        lo_vals, lo_cls, hi_vals, hi_cls = [], [], [], []
        #: per attribute, what its ends are stored less (uint32 offsets), or None (uint64)
        self.at: list[int | None] = []
        self.lo_at = [0]
        self.hi_at = [0]
        rows: list[np.ndarray] = []
        mask = np.zeros(w * 64, dtype=bool)
        by_attr = np.argsort(attr, kind="stable")
        cuts = np.searchsorted(attr[by_attr], np.arange(len(self.names) + 1))
        for a in range(len(self.names)):
            sel = by_attr[cuts[a] : cuts[a + 1]]
            c, x, y = clause[sel], lo[sel], hi[sel]
            lo_order, hi_order = np.argsort(x, kind="stable"), np.argsort(y, kind="stable")
            xs, ys = x[lo_order], y[hi_order]
            xc, yc = c[lo_order].astype(np.int32), c[hi_order].astype(np.int32)
            ends = np.sort(np.concatenate([xs, ys]))
            picks = ends[(np.arange(1, buckets) * len(ends)) // buckets] if len(ends) else ends
            edges = np.unique(np.concatenate([np.zeros(1, dtype=np.uint64), picks]))
            lcut = np.append(np.searchsorted(xs, edges, "left"), len(xs))
            hcut = np.searchsorted(ys, edges, "left")
            self.row0.append(len(rows))
            for b in range(len(edges)):  # fails for every value of bucket b
                mask[:] = False
                mask[xc[lcut[b + 1] :]] = True
                mask[yc[: hcut[b]]] = True
                rows.append(np.packbits(mask, bitorder="little").view(np.uint64))
            mask[:] = False
            mask[c] = True  # the attribute undefined
            rows.append(np.packbits(mask, bitorder="little").view(np.uint64))
            self.edges.append(edges)
            self.lcut.append(lcut.astype(np.int64))
            self.hcut.append(hcut.astype(np.int64))
            at, (xs, ys) = _offsets(xs, ys)
            self.at.append(at)
            lo_vals.append(xs)
            hi_vals.append(ys)
            lo_cls.append(xc)
            hi_cls.append(yc)
            self.lo_at.append(self.lo_at[-1] + len(xs))
            self.hi_at.append(self.hi_at[-1] + len(ys))
        self.lo_vals, self.hi_vals = lo_vals, hi_vals
        # (the same as Python lists: one event's bucket found without a numpy call)
        self.edge_list = [e.tolist() for e in self.edges]
        self.lcut_list = [c.tolist() for c in self.lcut]
        self.hcut_list = [c.tolist() for c in self.hcut]
        self.ends_clause = np.concatenate([np.zeros(0, dtype=np.int32), *lo_cls, *hi_cls])
        self.hi_base = self.lo_at[-1]
        self.bits = np.stack(rows) if rows else np.zeros((0, w), dtype=np.uint64)
        pad = np.zeros(w * 64, dtype=bool)
        pad[n:] = True
        self.pad = np.packbits(pad, bitorder="little").view(np.uint64)[-1:] if w else pad[:0]

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
        :func:`betree.disk.nodes.id_array`); and the candidate clauses counted over the batch."""
        a_count = len(self.names)
        step = max(1, CHUNK_BYTES // ((a_count + 8) * max(self.words, 1) * 8))  # (no clause: 0)
        found: list[np.ndarray] = []
        candidates = 0
        for k in range(0, len(batch), step):
            part = batch[k : k + step]
            pairs = self._candidates(part)
            candidates += len(pairs[0])
            found += self._results(part, *pairs)
        return found, candidates

    def _candidates(self, batch: Sequence[Mapping[str, object]]) -> tuple[np.ndarray, np.ndarray]:
        """The (event, clause) pairs no interval fails, in event then clause order."""
        rows, starts, stops = self._one(batch[0]) if len(batch) == 1 else self._cuts(batch)
        e_count, w = len(batch), self.words
        if len(self.names):
            fail = np.bitwise_or.reduce(self.bits[rows], axis=1)
        else:
            fail = np.zeros((e_count, w), dtype=np.uint64)
        stops = np.maximum(starts, stops)
        per = (stops - starts).sum(axis=1)
        at = ranges(starts.ravel(), stops.ravel())
        if len(at):  # the failing ends of the events' buckets: scattered, then packed
            ids = self.ends_clause[at] + np.repeat(np.arange(e_count, dtype=np.int64) * w * 64, per)
            hit = np.zeros(e_count * w * 64, dtype=bool)
            hit[ids] = True
            fail |= np.packbits(hit, bitorder="little").view(np.uint64).reshape(e_count, w)
        if w:
            fail[:, -1] |= self.pad[0]
        np.invert(fail, out=fail)
        event, word = np.nonzero(fail)
        if not len(event):
            return event, word
        bits = np.unpackbits(
            fail[event, word].view(np.uint8).reshape(-1, 8), axis=1, bitorder="little"
        )
        r, j = np.nonzero(bits)
        return event[r], word[r] * 64 + j

    def _one(self, values: Mapping[str, object]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_cuts` of one event, with Python scalars (fewer numpy calls)."""
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
        return (
            np.array([rows]),
            np.array([starts], dtype=np.int64),
            np.array([stops], dtype=np.int64),
        )

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
        for s in self.shards:
            for name in self.searched:
                search = s.view.searches.get(name)
                if search is not None and name in values:
                    found += [
                        run.astype(np.int64) + s.atoms for run in search.collect(values[name])
                    ]
            if s.direct:
                mark(sat, s.direct, values, s.atoms)
        if found:
            sat[np.concatenate(found)] = True
        lo, hi = self.rest_at[clauses], self.rest_at[clauses + 1]
        truth = sat[self.rest_ids[ranges(lo, hi)]]
        return np.logical_and.reduceat(truth, np.r_[0, np.cumsum(hi - lo)[:-1]])


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


def _clause_atoms(shards: Sequence[Shard], sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Every clause's atom ids (numbered across the shards; the true atoms 0 left out)
    and its clause number, in clause order (int32 when every number fits: half the
    build's memory)."""
    aids, clauses = [], []
    base = 0
    last = shards[-1]
    small = last.atoms + last.size < 1 << 31 and sum(sizes) < 1 << 31
    kind = np.int32 if small else np.int64
    for s, size in zip(shards, sizes, strict=True):
        view = s.view
        per: np.ndarray = np.diff(view.row_at.astype(np.int64)) * WIDTH
        ids = view.rows.reshape(-1)
        keep = ids != 0
        mine: np.ndarray = ids[keep].astype(kind)
        aids.append(mine + s.atoms)
        clause = np.repeat(np.arange(base, base + size, dtype=kind), per)
        clauses.append(clause[keep])
        base += size
    return np.concatenate(aids), np.concatenate(clauses)


def _sid_keys(shards: Sequence[Shard]) -> np.ndarray | None:
    """Per clause, its subscription (shard in the high bits) when some subscription has
    several clauses, so that each is reported once; else None."""
    if all(s.view.sids is None for s in shards):
        return None
    keys = []
    for k, s in enumerate(shards):
        view = s.view
        sids = view.sids if view.sids is not None else np.arange(len(view.exts), dtype=np.uint64)
        keys.append(sids.astype(np.uint64) | np.uint64(k << 48))
    return np.concatenate(keys)
