"""PS-Tree with PSTBloom and PSTHash (Ji & Jacobsen, PVLDB 2018), in memory.

**PS-Tree** (one per dimension): the constants of the dimension's predicates cut its domain
into *predicate spaces*; with k distinct boundaries b_0 < ... < b_{k-1} these are the 2k+1
spaces (-inf, b_0), [b_0], (b_0, b_1), [b_1], ... (b_{k-1}, +inf), and a predicate is the
set of spaces it covers (ranges of space numbers: a conjunction of atoms on one attribute
intersects them, an ``in`` list is several one-space ranges).  Matching an event value is
point location: one space per event attribute.  The paper's trie over the value's digits
is replaced by ``bisect`` over the sorted boundaries (C, exact across int/float and
strings): the same point location, O(log k) instead of O(digits).  Each space keeps an
*event counter* filled from a sample of events at build time; a predicate's selectivity is
the number of sample events in the spaces it covers (fewer is better; the width in spaces
breaks ties and is the whole score without a sample, "=" first as in the paper's fallback
ranking).

**PSTBloom** (Alg. 4-5): each clause's most selective predicate is its *access predicate*:
the clause is listed in every space it covers (one CSR array per index: space -> clauses).
Its other predicates put the clause id into a per-space Bloom filter (``BLOOM_BITS`` bits per
id rounded up to a power of two, ``BLOOM_K`` = 3 hashes; the paper gives no sizes).  Per
event: the listed clauses of the event's spaces are the candidates; each of their other
predicates is tested against the Bloom filter of the event's space on that attribute
(an attribute the event lacks prunes the clause, as the semantics require), vectorised over
all (candidate, predicate) pairs; the survivors are evaluated exactly, skipping the access
predicate (no false positives).

**PSTHash** (Alg. 6-7, N = 2): the two most selective predicates of a clause (on two
attributes) are its access predicates, and only they are indexed, in PS-Trees of their own
(boundaries from access predicates only); the clause is stored under every 2-dimension key
(space of the lower attribute id, space of the higher) of the cross product of their
covers.  The hash table is a sorted numpy key array probed with ``searchsorted`` for the
C(|E|, 2) keys of an event; candidates are evaluated exactly, skipping both access
predicates.  A clause with a single predicate is listed per space, as in PSTBloom without a
filter (the paper's footnote 2).

Both: the exact check of a candidate (the paper's ``Match(event, sub)``, a few comparisons in
C) is done in numpy for all candidates at once: each non-access predicate is kept as its
ranges of spaces of the full PS-Trees, and the event's space on that attribute must fall in
one (a Python loop would cost ~3 µs a candidate and dominate).  Residual atoms (lists,
``ends_with``, ``contains``, ``is null``, booleans) are never indexed, only evaluated on
candidates in Python; a clause with no order atom is evaluated on every event.

Cost: a range predicate covers O(spaces) spaces, so the index holds O(predicates x spaces)
entries per dimension (PSTBloom) or O(cover_1 x cover_2) keys per clause (PSTHash) -- the
papers' O(N_p^2) space per dimension.  Both refuse to build past
``max_entries`` with :class:`TooBig` instead of exhausting memory.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.lang.atoms import OrderAtom
from storage.errors import BexdbError
from tools.bench.baselines.flat import Flat, gather
from tools.bench.baselines.scan import Compiled

Event = Mapping[str, object]
Ranges = list[tuple[int, int]]  # inclusive ranges of space numbers, sorted, disjoint
Pred = tuple[int, Ranges]  # (attribute id, covered spaces)

BLOOM_BITS = 10
BLOOM_K = 3
_MULT = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9], dtype=np.uint64)
MAX_ENTRIES = 40_000_000


class TooBig(BexdbError):
    """The index would hold more entries than allowed (range predicates over many spaces)."""


def _merge(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _intersect(xs: Ranges, ys: Ranges) -> Ranges:
    out: Ranges = []
    i = j = 0
    while i < len(xs) and j < len(ys):
        lo, hi = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


class Spaces:
    """The predicate spaces of one dimension (the leaves of its PS-Tree), in order."""

    __slots__ = ("bounds", "n")

    def __init__(self, constants: set[Any]) -> None:
        self.bounds = sorted(constants)
        self.n = 2 * len(self.bounds) + 1

    def locate(self, x: Any) -> int:
        """The space holding value ``x`` (MatchPair)."""
        bounds = self.bounds
        i = bisect_left(bounds, x)
        return 2 * i + 1 if i < len(bounds) and bounds[i] == x else 2 * i

    def cover(self, atoms: Sequence[OrderAtom]) -> Ranges:
        """The spaces where every atom holds (each atom: where any of its entries holds)."""
        top = self.n - 1
        out: Ranges = [(0, top)]
        for atom in atoms:
            rs: Ranges = []
            for op, c in atom.entries:
                j = 2 * bisect_left(self.bounds, c) + 1  # c's own space
                if op == "=":
                    rs.append((j, j))
                elif op == "<":
                    rs.append((0, j - 1))
                elif op == "<=":
                    rs.append((0, j))
                elif op == ">":
                    rs.append((j + 1, top))
                elif op == ">=":
                    rs.append((j, top))
                else:  # "!="
                    rs += [(0, j - 1), (j + 1, top)]
            out = _intersect(out, _merge([r for r in rs if r[0] <= r[1]]))
        return out


class _Forest:
    """One PS-Tree per dimension over the given predicates, spaces numbered globally."""

    def __init__(self, aid: dict[str, int], consts: dict[int, set[Any]]) -> None:
        self.spaces = {a: Spaces(cs) for a, cs in consts.items()}
        self.base = np.zeros(len(aid) + 1, dtype=np.int64)
        for a in range(len(aid)):
            sp = self.spaces.get(a)
            self.base[a + 1] = self.base[a] + (sp.n if sp else 0)
        self.n_leaves = int(self.base[-1])
        self.by_name = [(name, a, self.spaces[a]) for name, a in aid.items() if a in self.spaces]
        self.lookup = {name: (a, int(self.base[a]), sp) for name, a, sp in self.by_name}

    def locate(self, values: Event) -> list[tuple[int, int]]:
        """(attribute id, global space) of each event attribute that has a PS-Tree."""
        lookup = self.lookup
        out = []
        for attr, x in values.items():
            hit = lookup.get(attr)
            if hit is not None:
                a, base, sp = hit
                out.append((a, base + sp.locate(x)))
        return out


def _constants(flat: Flat, aid: dict[str, int]) -> dict[int, set[Any]]:
    """Per attribute id, the constants of every order atom on it (the boundaries)."""
    consts: dict[int, set[Any]] = {}
    for per in flat.orders:
        for attr, atoms in per.items():
            s = consts.setdefault(aid[attr], set())
            for atom in atoms:
                s.update(const for _, const in atom.entries)
    return consts


class _Selectivity:
    """Per-space event counters from a sample; scores predicates (lower = more selective)."""

    def __init__(self, forest: _Forest, sample: Sequence[Event]) -> None:
        counts = np.zeros(forest.n_leaves + 1, dtype=np.int64)
        for ev in sample:
            for _, leaf in forest.locate(ev):
                counts[leaf + 1] += 1
        self.cum = np.cumsum(counts)
        self.forest = forest

    def score(self, a: int, ranges: Ranges) -> tuple[int, float]:
        base = int(self.forest.base[a])
        cum = self.cum
        events = sum(int(cum[base + hi + 1] - cum[base + lo]) for lo, hi in ranges)
        width = sum(hi - lo + 1 for lo, hi in ranges) / self.forest.spaces[a].n
        return events, width


def _predicates(flat: Flat, aid: dict[str, int], sel: _Selectivity) -> list[list[Pred]]:
    """Each clause's predicates (one per attribute), most selective first."""
    spaces = sel.forest.spaces
    out = []
    for per in flat.orders:
        preds = [(aid[attr], spaces[aid[attr]].cover(atoms)) for attr, atoms in per.items()]
        preds.sort(key=lambda p: (sel.score(*p), p[0]))
        out.append(preds)
    return out


def _ptr(lengths: list[int]) -> np.ndarray:
    """CSR offsets of consecutive groups of these lengths."""
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr


def _budget(total: int, what: str, max_entries: int) -> None:
    if total > max_entries:
        raise TooBig(
            f"{what} would hold {total:,} entries (limit {max_entries:,})",
            "range predicates cover many spaces: fewer subscriptions or a lower cardinality",
        )


def _expand(starts: list[int], lens: list[int], owners: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(space, owner) for every space of every range."""
    s = np.array(starts, dtype=np.int64)
    n = np.array(lens, dtype=np.int64)
    return gather(s, s + n), np.repeat(np.array(owners, dtype=np.int64), n)


def _csr(keys: np.ndarray, values: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``values`` grouped by ``keys``: (ptr, grouped values)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=ptr[1:])
    return ptr, values[order]


class _Base:
    """What PSTBloom and PSTHash share: the clauses, the free ones, exact evaluation."""

    name = ""
    n_access = 1  # leading (most selective) predicates of a clause that the index holds

    def __init__(
        self,
        compiled: Compiled,
        n: int | None = None,
        sample: Sequence[Event] = (),
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.flat = Flat(compiled, n)
        self.aid = self.flat.attr_ids()
        self.scoring = _Forest(self.aid, _constants(self.flat, self.aid))
        self.sel = _Selectivity(self.scoring, sample)
        self.preds = _predicates(self.flat, self.aid, self.sel)
        # clauses that need a defined attribute but have no order atom: no access predicate
        self.unindexed = [c for c, p in enumerate(self.preds) if not p and self.flat.anchors[c]]
        self.entries = 0
        self._index(max_entries)
        self._exact_tables()
        self.flat.drop_build_state()  # keep only what matching reads
        del self.scoring, self.sel, self.preds

    def _index(self, max_entries: int) -> None:
        raise NotImplementedError

    def _exact_tables(self) -> None:
        """Each clause's non-access predicates as ranges of spaces of the full PS-Trees
        (``self.exact``), for the exact check of candidates in numpy."""
        f = self.exact = self.scoring
        attrs: list[int] = []
        n_ranges: list[int] = []
        lo: list[int] = []
        hi: list[int] = []
        n_preds: list[int] = []
        for preds in self.preds:
            rest = preds[self.n_access :]
            n_preds.append(len(rest))
            for a, ranges in rest:
                base = int(f.base[a])
                attrs.append(a)
                n_ranges.append(len(ranges))
                lo.extend(base + r[0] for r in ranges)
                hi.extend(base + r[1] for r in ranges)
        self.pred_attr = np.array(attrs, dtype=np.int64)
        self.rng_ptr = _ptr(n_ranges)
        self.rng_lo = np.array(lo, dtype=np.int64)
        self.rng_hi = np.array(hi, dtype=np.int64)
        self.pred_ptr = _ptr(n_preds)
        self.has_residual = np.array([bool(r) for r in self.flat.residual], dtype=bool)

    def _ev_leaf(self, forest: _Forest, values: Event) -> tuple[list[tuple[int, int]], np.ndarray]:
        """The event located in ``forest``, and the same as an array attribute id -> space
        (-1: no value)."""
        located = forest.locate(values)
        ev_leaf = np.full(len(self.aid), -1, dtype=np.int64)
        if located:
            loc = np.array(located, dtype=np.int64)
            ev_leaf[loc[:, 0]] = loc[:, 1]
        return located, ev_leaf

    def _finish(self, cands: np.ndarray, values: Event, ev_leaf: np.ndarray) -> list[Any]:
        """Exact check of the candidates' other predicates (vectorised over every (candidate,
        predicate, range) triple), then their residual atoms and the unindexed clauses."""
        if len(cands):
            starts, ends = self.pred_ptr[cands], self.pred_ptr[cands + 1]
            owner = np.repeat(np.arange(len(cands)), ends - starts)
            preds = gather(starts, ends)
            rs, re = self.rng_ptr[preds], self.rng_ptr[preds + 1]
            r_owner = np.repeat(np.arange(len(preds)), re - rs)
            ranges = gather(rs, re)
            leaf = ev_leaf[self.pred_attr[preds]][r_owner]  # -1 (undefined) is in no range
            inside = (self.rng_lo[ranges] <= leaf) & (leaf <= self.rng_hi[ranges])
            holds = np.bincount(r_owner[inside], minlength=len(preds)) > 0
            cands = cands[np.bincount(owner[~holds], minlength=len(cands)) == 0]
        flat = self.flat
        rest = self.has_residual[cands]
        hits = cands[~rest].tolist() + flat.verify(cands[rest].tolist(), values, flat.residual)
        hits += flat.verify(self.unindexed, values, flat.residual)
        return flat.subs_of(hits, values)


class PSTBloom(_Base):
    """PSTBloom over the first n subscriptions; see the module docstring."""

    name = "PSTBloom"

    def _index(self, max_entries: int) -> None:
        forest = self.forest = self.scoring
        acc: tuple[list[int], list[int], list[int]] = ([], [], [])
        other: tuple[list[int], list[int], list[int]] = ([], [], [])
        na_attr: list[int] = []
        na_len: list[int] = []
        for c, preds in enumerate(self.preds):
            for i, (a, ranges) in enumerate(preds):
                base = int(forest.base[a])
                into = acc if i == 0 else other
                for lo, hi in ranges:
                    into[0].append(base + lo)
                    into[1].append(hi - lo + 1)
                    into[2].append(c)
            na_attr.extend(a for a, _ in preds[1:])
            na_len.append(max(0, len(preds) - 1))
        self.entries = sum(acc[1]) + sum(other[1])
        _budget(self.entries, "PSTBloom", max_entries)
        leaves, owners = _expand(*acc)
        self.acc_ptr, self.acc_clauses = _csr(leaves, owners, forest.n_leaves)
        self.na_attr = np.array(na_attr, dtype=np.int64)
        self.na_ptr = _ptr(na_len)
        # Bloom filters: per space BLOOM_BITS bits per id, rounded up to a power of two
        leaves, owners = _expand(*other)
        count = np.bincount(leaves, minlength=forest.n_leaves)
        exp = np.ceil(np.log2(np.maximum(count, 1) * BLOOM_BITS)).astype(np.int64)
        self.bsize = np.where(count > 0, np.left_shift(1, exp), 0)
        self.boff = np.zeros(forest.n_leaves + 1, dtype=np.int64)
        np.cumsum(self.bsize, out=self.boff[1:])
        self.hashes = self._hash(np.arange(len(self.flat), dtype=np.uint64))
        self.bits = np.zeros(int(self.boff[-1]) // 8 + 1, dtype=np.uint8)
        for j in range(BLOOM_K):
            pos = self.boff[leaves] + (self.hashes[owners, j] & (self.bsize[leaves] - 1))
            np.bitwise_or.at(self.bits, pos >> 3, (1 << (pos & 7)).astype(np.uint8))

    @staticmethod
    def _hash(ids: np.ndarray) -> np.ndarray:
        """(ids, BLOOM_K) hash values (multiplicative hashing, top bits)."""
        h = (ids[:, None] + np.uint64(1)) * _MULT[None, :BLOOM_K]
        return (h >> np.uint64(24)).astype(np.int64)

    def match(self, values: Event) -> list[Any]:
        located, ev_leaf = self._ev_leaf(self.forest, values)
        leaves = np.array([leaf for _, leaf in located], dtype=np.int64)
        cands = self.acc_clauses[gather(self.acc_ptr[leaves], self.acc_ptr[leaves + 1])]
        if len(cands):
            starts, ends = self.na_ptr[cands], self.na_ptr[cands + 1]
            owner = np.repeat(np.arange(len(cands)), ends - starts)
            leaf = ev_leaf[self.na_attr[gather(starts, ends)]]
            size = self.bsize[np.maximum(leaf, 0)]
            ok = (leaf >= 0) & (size > 0)
            h = self.hashes[cands[owner]]
            off = self.boff[np.maximum(leaf, 0)]
            mask = np.maximum(size - 1, 0)  # an empty filter (size 0) already failed above
            for j in range(BLOOM_K):
                pos = off + (h[:, j] & mask)
                ok &= ((self.bits[pos >> 3] >> (pos & 7)) & 1).astype(bool)
            fails = np.bincount(owner[~ok], minlength=len(cands))
            cands = cands[fails == 0]
        return self._finish(cands, values, ev_leaf)


class PSTHash(_Base):
    """PSTHash (N = 2) over the first n subscriptions; see the module docstring."""

    name = "PSTHash"
    n_access = 2

    def _index(self, max_entries: int) -> None:
        names = {a: name for name, a in self.aid.items()}
        access = [sorted(p[:2], key=lambda q: q[0]) for p in self.preds]
        # PS-Tree_H: boundaries from the access predicates only
        consts: dict[int, set[Any]] = {}
        for c, acc in enumerate(access):
            for a, _ in acc:
                atoms = self.flat.orders[c][names[a]]
                consts.setdefault(a, set()).update(k for at in atoms for _, k in at.entries)
        forest = self.forest = _Forest(self.aid, consts)
        nl = forest.n_leaves
        single: tuple[list[int], list[int], list[int]] = ([], [], [])
        rect: list[tuple[int, int, int, int, int]] = []  # lo1, n1, lo2, n2, clause
        for c, acc in enumerate(access):
            covers = []
            for a, _ in acc:
                sp = forest.spaces[a]
                base = int(forest.base[a])
                rs = sp.cover(self.flat.orders[c][names[a]])
                covers.append([(base + lo, hi - lo + 1) for lo, hi in rs])
            if len(covers) == 1:
                for lo, k in covers[0]:
                    single[0].append(lo)
                    single[1].append(k)
                    single[2].append(c)
            elif len(covers) == 2:
                rect.extend((l1, n1, l2, n2, c) for l1, n1 in covers[0] for l2, n2 in covers[1])
        r = np.array(rect, dtype=np.int64).reshape(-1, 5)
        area = r[:, 1] * r[:, 3]
        self.entries = int(area.sum()) + sum(single[1])
        _budget(self.entries, "PSTHash", max_entries)
        t = gather(np.zeros(len(r), dtype=np.int64), area)  # cell number within its rectangle
        rep = np.repeat(np.arange(len(r)), area)
        n2 = r[rep, 3]
        keys = (r[rep, 0] + t // n2) * nl + r[rep, 2] + t % n2
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.key_clauses = r[rep, 4][order]
        leaves, owners = _expand(*single)
        self.one_ptr, self.one_clauses = _csr(leaves, owners, nl)

    def match(self, values: Event) -> list[Any]:
        located = sorted(self.forest.locate(values))
        leaves = np.array([leaf for _, leaf in located], dtype=np.int64)
        i, j = np.triu_indices(len(leaves), 1)
        probe = leaves[i] * self.forest.n_leaves + leaves[j]
        lo = np.searchsorted(self.keys, probe, "left")
        hi = np.searchsorted(self.keys, probe, "right")
        cands = self.key_clauses[gather(lo, hi)]
        ones = self.one_clauses[gather(self.one_ptr[leaves], self.one_ptr[leaves + 1])]
        cands = np.concatenate([cands, ones])
        return self._finish(cands, values, self._ev_leaf(self.exact, values)[1])
