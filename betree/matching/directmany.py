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
- :class:`~betree.matching.geomany.GeoMany` (its own module): every event's grid cell at
  every level at once, distances as chords on the unit sphere, a pair near its radius
  decided by the atom's own test: the answer is the per-event one to the bit; for a
  packed batch of many (entry, event) pairs, each cell's entries tested once for all its
  events and held as rows over words (:meth:`~betree.matching.geomany.GeoMany.words`).
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

from collections.abc import Sequence
from typing import Any

import numpy as np

from betree.lang import special
from betree.matching import directkinds
from betree.matching.geomany import GeoMany
from betree.matching.manybase import NONE, Each, Event, Many, Words, each, join_parts
from pbtree.view import ranges, uniq

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
_I64 = 2**62  # bounds within which int64 arithmetic on segment times cannot overflow


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
        return join_parts([found, *self._counted(ev, code), *self._odd(odd, values, events)])

    def words(
        self, values: Sequence[object], events: Sequence[Event], rows: np.ndarray
    ) -> tuple[Many, list[Words]]:
        """:meth:`found`, but where the ``any`` postings would give many (atom, event) pairs
        (:data:`PAIRS_A_CELL`), their atoms' bits as rows over words (``rows``: each
        event's own bit as a row over the batch's words): a word's bits of an atom are the
        OR of its values' (each value present in the batch a row, its events' bits; each
        atom the OR of its values' rows, read through the postings inverted, atom by atom):
        the held atoms (``True``) and the failing defaults (``False``), ``words x atoms``,
        every atom of the postings (:func:`list_runs`), held for some event or not.
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
        planes: list[Words] = [  # (each part's atoms all, as :func:`list_runs` gives them)
            (part.atoms, part.ored(bits).T, on)
            for part, on in zip(self.inverse, (True, False), strict=True)
            if part.size
        ]
        found: Many = (NONE, NONE, NONE, NONE, pairs)
        return join_parts(
            [found, *self._counted(ev, code), *self._odd(odd, values, events)]
        ), planes

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
        return [each(self.index, odd, values, events)] if odd else []


def list_runs(index: directkinds.ListPostings) -> list[tuple[np.ndarray, bool]]:
    """The atoms :meth:`ListMany.words` gives rows of, in their order: the ``any``
    postings' held atoms, then their negations' (failing defaults), each in
    :class:`_Inverted`'s order (by their values, most first)."""
    out = []
    for postings, on in ((index.pos_any, True), (index.neg_any, False)):
        ids = [aid for atoms in postings.values() for aid in atoms]
        if ids:
            atoms, counts = np.unique(np.array(ids, dtype=np.int64), return_counts=True)
            out.append((atoms.take(_most_first(counts)), on))
    return out


def _most_first(counts: np.ndarray) -> np.ndarray:
    """The order of atoms (ascending, each with ``counts`` values) by their values, most
    first, ascending among equals."""
    return np.argsort(-counts, kind="stable")


class _Inverted:
    """Postings (starts by value slot, atom ids) inverted, atom by atom, in layers: the
    atoms ordered by their values, most first (:func:`_most_first`), layer k holds the
    k-th value of each atom with more than k, which are a prefix of them: an atom's
    values are ORed by one OR a layer into a slice of whole rows of words (no gather and
    scatter of the rows a layer ORs into: rich 100K, 1,024 events, the two list
    attributes' 51 and 31 layers ~53 -> ~20 µs an event; numpy's ``reduceat`` over rows
    costs ~20 ns a (segment, word), ~1.3x the gathered layers at rich 20K)."""

    __slots__ = ("atoms", "layers", "size")

    def __init__(self, starts: np.ndarray, ids: np.ndarray) -> None:
        value = np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts))
        order = np.argsort(ids, kind="stable")
        value, ids = value[order], ids[order]
        firsts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))[: len(ids)]
        sizes = np.diff(np.append(firsts, len(ids)))
        most = _most_first(sizes)
        #: the atoms, by their values, most first (as :func:`list_runs` gives them)
        self.atoms = ids[firsts].take(most)
        self.size = len(ids)
        #: per layer k, the value slots of the k-th value of the first atoms (those with
        #: more than k values)
        self.layers = [
            value[firsts.take(most[: int((sizes > k).sum())]) + k]
            for k in range(int(sizes.max(initial=0)))
        ]

    def ored(self, bits: np.ndarray) -> np.ndarray:
        """Each of :attr:`atoms`' rows (``bits``: each value slot's row of words), the OR
        of its values'."""
        own = bits.take(self.layers[0], axis=0)
        for value in self.layers[1:]:
            own[: len(value)] |= bits.take(value, axis=0)
        return own


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
        parts = [each(self.index, alone, values, events)] if alone else []
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
        return join_parts(parts)


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
            return each(index, range(len(values)), values, events), []
        cuts = [_bisect(secs, s[segs], s[segs + 1], bound) for s, secs, _, _ in self.sorts]
        planes: list[Words] = []
        if rows is not None and len(at) and self._by_rows(at, segs, cuts, rows.shape[1]):
            planes = self._rows(at, segs, cuts, rows)
            found: Many = (NONE, NONE, NONE, NONE, len(at))
        else:
            found = self._pairs(at, segs, cuts)
        if odd:
            return join_parts([found, each(index, odd, values, events)]), planes
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
