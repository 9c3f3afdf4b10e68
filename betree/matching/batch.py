"""Matching a batch of events in one pass over the index (``Index.match_many``, issue 16).

Per event, matching is phase 1 (the satisfied atoms: one PB+tree search per event
attribute, plus the direct tests) and phase 2 (the BE-Tree walk, then every clause of the
visited l-node pages checked against phase 1).  A batch of B events shares both:

* **Phase 1** (:func:`satisfied`): per attribute, one PB+tree search per *distinct* value
  in the batch; the result is a bit matrix ``atoms x events`` (``uint64`` words, bit e of
  an atom's row set when the atom holds for event e).  Direct atoms (lists, booleans,
  string tests) are evaluated per event, as :meth:`betree.matching.pages.Pages.match` does.
* **Phase 2** (:func:`reached_pages`): the BE-Tree is walked once, each node carrying the
  set of events that reach it (a Python int used as a bit set); a c-directory bucket is
  entered by the events whose coordinate it encloses (a bisection over the batch's sorted
  coordinates of that attribute).  Every node, and every l-node page, is read once per
  batch however many events reach it.
* **Checking** (:func:`check_pages`): the reached pages are concatenated, as the per-event
  check does, and each clause's event set is the AND of its atoms' rows
  (``np.bitwise_and.reduceat``) and of the page's reach set: one vectorised pass for the
  whole batch.  Then the (clause, event) pairs are unpacked, de-duplicated per subscription
  and split into one id list per event.  A clause is not also ANDed with the events that
  reached its page: an event satisfying a clause always reaches the clause's home (the
  tree's invariant: a clause sits below a p-node only if it needs that attribute defined,
  in a bucket enclosing every value its atoms allow), so the reach sets prune the walk
  but cannot change an answer.

Cost: phase 1 is bounded by the distinct (attribute, value) pairs of the batch, phase 2 by
the union of the nodes the events visit (at most the whole tree, however large the
batch), checking by the atoms of the reached pages times B/64 words.  Memory: the bit
matrix (``next_atom x ceil(B/64)`` words: 3 MB for 100K atoms and 256 events), and the
gathered rows of at most :data:`CHUNK_ATOMS` atoms at a time.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import Any, TypeVar

import numpy as np

from betree.disk.catalog import SubId
from betree.disk.nodes import PageArrays, id_array
from betree.disk.tree import BETree
from betree.matching.direct import DirectAtoms
from pbtree import PBTree
from storage.errors import InvalidInput

#: events matched in one pass (a larger batch is split): bounds the bit matrix at
#: ``next_atom x 16`` words (128 MB at 1M atoms), past where larger batches stop paying
MAX_EVENTS = 1024
#: atoms of reached l-node pages gathered at once in :func:`check_pages` (bounds the
#: temporary ``atoms x words`` matrix: 2 MB per word of events)
CHUNK_ATOMS = 1 << 18
_WORD = (1 << 64) - 1
_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))  # bit i of a word


def words(mask: int, width: int) -> np.ndarray:
    """A bit set of events (bit e: event e) as ``width`` little-endian ``uint64`` words."""
    return np.array([(mask >> (64 * k)) & _WORD for k in range(width)], dtype=np.uint64)


def satisfied(
    txn: Any,
    trees: Mapping[str, dict[str, Any]],
    direct: Mapping[str, DirectAtoms],
    next_atom: int,
    scalar: frozenset[str],
    batch: Sequence[Mapping[str, object]],
) -> tuple[np.ndarray, int]:
    """Phase 1 for a batch: the ``atoms x words`` bit matrix, and the PB+tree pages read.

    ``scalar`` names the attributes searched in PB+trees (int, float, string); ``trees``
    their PB+tree records; ``direct`` the atoms tested per event, by attribute (segment tests
    only on the events holding their segment id: :mod:`betree.matching.direct`).
    """
    width = (len(batch) + 63) // 64
    sat = np.zeros((next_atom, width), dtype=np.uint64)
    sat[0] = words((1 << len(batch)) - 1, width)  # atom 0 is always true
    groups: dict[str, dict[object, int]] = {}
    for e, values in enumerate(batch):
        bit = 1 << e
        for attr, value in values.items():
            if attr in scalar:
                by_value = groups.setdefault(attr, {})
                by_value[value] = by_value.get(value, 0) | bit
    pages = 0
    for attr, by_value in groups.items():
        record = trees.get(attr)
        if record is None:
            continue
        pbtree = PBTree(txn, attr, record=record)
        for value, mask in by_value.items():
            ids = pbtree.search_array(value)
            if len(ids):
                sat[ids] |= words(mask, width)
        pages += pbtree.pages_read
    # each attribute's defaults ORed in once for the events defining it, then each
    # event's other hits set and failing defaults cleared (betree.matching.direct)
    held: list[np.ndarray] = []
    failed: list[np.ndarray] = []
    held_at: list[np.ndarray] = []
    failed_at: list[np.ndarray] = []
    for attr, group in direct.items():
        undefined = defined = 0
        for e, values in enumerate(batch):
            if attr not in values:
                undefined |= 1 << e
                continue
            defined |= 1 << e
            on: list[np.ndarray] = []
            off: list[np.ndarray] = []
            group.found(values[attr], values, on, off)
            for got, into, at in ((on, held, held_at), (off, failed, failed_at)):
                if got:
                    into += got
                    at.append(np.full(sum(map(len, got)), e, dtype=np.int64))
        if undefined and group.undefined:
            sat[group.undefined] |= words(undefined, width)
        if defined and len(group.default):
            sat[group.default.ids] |= words(defined, width)
    if held:
        ev = np.concatenate(held_at)
        np.bitwise_or.at(sat, (np.concatenate(held), ev >> 6), _BIT[ev & 63])
    if failed:
        ev = np.concatenate(failed_at)
        np.bitwise_and.at(sat, (np.concatenate(failed), ev >> 6), ~_BIT[ev & 63])
    return sat, pages


class _Coords:
    """The batch's grid coordinates of one attribute, for bucket membership by bisection."""

    __slots__ = ("keys", "prefix")

    def __init__(self, pairs: list[tuple[int, int]]) -> None:
        pairs.sort()
        self.keys = [x for x, _ in pairs]
        # each event appears once per attribute: the sum of a run of bits is their union
        self.prefix = [0, *accumulate(bit for _, bit in pairs)]

    def within(self, lo: int, hi: int) -> int:
        """The events whose coordinate lies in ``[lo, hi]``."""
        return self.prefix[bisect_right(self.keys, hi)] - self.prefix[bisect_left(self.keys, lo)]


def reached_pages(
    tree: BETree, coords: Sequence[Mapping[str, int]]
) -> list[tuple[PageArrays, int]]:
    """Phase 2's walk for a batch: every l-node page some event reaches, with the set of
    events reaching it (bit e: event e), each page once.

    The same walk as :meth:`BETree.match` for each event: a p-node is entered by the
    events that define its attribute; a child bucket by those whose coordinate it
    encloses (the top bucket encloses everything).
    """
    pairs: dict[str, list[tuple[int, int]]] = {}
    for e, point in enumerate(coords):
        bit = 1 << e
        for attr, x in point.items():
            pairs.setdefault(attr, []).append((x, bit))
    by_attr = {attr: _Coords(p) for attr, p in pairs.items()}
    defined = {attr: c.prefix[-1] for attr, c in by_attr.items()}
    out: list[tuple[PageArrays, int]] = []
    stack = [(tree.node(tree.root), (1 << len(coords)) - 1)]
    while stack:
        node, reach = stack.pop()
        for lpage in tree.lnode_pages(node):
            out.append((lpage.arrays(), reach))
        for attr, top in node.pmap.items():
            entering = reach & defined.get(attr, 0)
            if not entering:
                continue
            within = by_attr[attr].within
            buckets = [(tree.node(top), entering)]
            while buckets:
                bucket, mask = buckets.pop()
                stack.append((bucket, mask))
                if not bucket.left:
                    continue
                for page in (bucket.left, bucket.right):
                    child = tree.node(page)
                    inside = mask & within(child.lo, child.hi)
                    if inside:
                        buckets.append((child, inside))
    return out


def check_pages(pages: list[tuple[PageArrays, int]], sat: np.ndarray, events: int) -> Hits:
    """Every clause of the reached pages checked for the events of the batch's words
    (64 events each) that reach its page.

    Pages are grouped by the words their reach set touches, and each group checks only
    those columns of the bit matrix: with the batch in shape order (:func:`shape_order`)
    most pages are reached from one word of events.  Returns the satisfied
    (clause, event) pairs as :class:`Hits`, and counts the (clause, event) candidates:
    each clause times the events that reached its page.
    """
    pages = [p for p in pages if len(p[0][1])]
    hits = Hits(events, sum(len(arrays[1]) * reach.bit_count() for arrays, reach in pages))
    columns = np.ascontiguousarray(sat.T)  # a word's column, one contiguous row each
    groups: dict[tuple[int, ...], list[PageArrays]] = {}
    used_by: dict[int, tuple[int, ...]] = {}  # the pages of a node share its reach set
    for arrays, reach in pages:
        used = used_by.get(reach)
        if used is None:
            used = used_by[reach] = tuple(
                k for k in range(sat.shape[1]) if (reach >> (64 * k)) & _WORD
            )
        groups.setdefault(used, []).append(arrays)
    for used, group in groups.items():
        cols = np.array(used, dtype=np.intp)
        start = 0
        while start < len(group):
            stop, size = start, 0
            while stop < len(group) and (size == 0 or size + len(group[stop][3]) <= CHUNK_ATOMS):
                size += len(group[stop][3])
                stop += 1
            chunk = group[start:stop]
            start = stop
            lens = np.concatenate([arrays[2] for arrays in chunk])
            starts = np.zeros(len(lens), dtype=np.intp)
            np.cumsum(lens[:-1], out=starts[1:])
            atoms = np.concatenate([arrays[3] for arrays in chunk])
            rows = np.stack([columns[c].take(atoms) for c in used], axis=1)
            hits.add(chunk, np.bitwise_and.reduceat(rows, starts, axis=0), cols)
    return hits


def shape_order(batch: Sequence[Mapping[str, object]]) -> list[int]:
    """The batch's events in the order of their shapes (the attributes they define).

    Events of one shape reach the same part of the tree, so in this order a page's reach
    set falls in few words of the bit matrix and :func:`check_pages` reads fewer columns:
    on 256 BEGen events over 100K subscriptions, the atoms of pages reached from one word
    went from 1% to 78%.  Cost: one sort of B short tuples.
    """
    return sorted(range(len(batch)), key=lambda e: tuple(sorted(batch[e])))


class Hits:
    """The satisfied (clause, event) pairs of a batch, turned into one id list per event."""

    def __init__(self, events: int, candidates: int) -> None:
        self.events = events
        self.candidates = candidates
        self._etype = np.int16 if events <= 1 << 15 else np.int64
        self._events: list[np.ndarray] = []
        #: per add, the chunk's clause ids and each pair's clause in it: the pairs'
        #: subscriptions are looked up only when one may match twice (``_repeats``)
        self._clauses: list[tuple[np.ndarray, np.ndarray]] = []
        self._repeats = False
        self._exts: list[np.ndarray] = []

    def add(self, chunk: list[PageArrays], masks: np.ndarray, cols: np.ndarray) -> None:
        """The clauses of the concatenated ``chunk`` hold for the events set in ``masks``
        (one row of words per clause; column j is the batch's word ``cols[j]``)."""
        # sparse (a clause holds for few events): unpack only the nonzero bytes, found
        # with one-dimensional nonzero (profiled: 2-D nonzero took a third of the check)
        octets = masks.astype("<u8", copy=False).view(np.uint8)
        width = octets.shape[1]
        flat = np.flatnonzero(octets)
        if not len(flat):
            return
        # (0/1 bytes seen as bool: numpy's nonzero over bool is four times faster)
        bits = np.flatnonzero(np.unpackbits(octets.ravel()[flat], bitorder="little").view(bool))
        # per nonzero octet its clause and first event, then per pair through its octet
        clauses, octet = np.divmod(flat, width)
        first = (np.repeat(cols * 64, 8) + np.tile(np.arange(0, 64, 8), len(cols))).astype(
            self._etype
        )
        at = bits >> 3
        clause = clauses[at]
        self._events.append(first[octet][at] + (bits & 7).astype(self._etype))
        cids = np.concatenate([arrays[0] for arrays in chunk])
        # a clause numbered 1 or more: its subscription may match twice in one event
        self._repeats = self._repeats or bool((cids & np.uint64(0xFFFF)).any())
        self._clauses.append((cids, clause))
        self._exts.append(np.concatenate([arrays[1] for arrays in chunk])[clause])

    def arrays(self) -> list[np.ndarray]:
        """Per event, the external ids it matched, each subscription once, as one array
        (views into one: :func:`betree.disk.nodes.id_array` says its dtype).

        A subscription with several clauses can match through more than one; only when
        the batch reached such a clause are the pairs sorted by subscription to drop the
        repeats.
        """
        if not self._events:
            return [id_array([]) for _ in range(self.events)]
        e = np.concatenate(self._events)
        exts = np.concatenate(self._exts)
        if self._repeats:
            sids = np.concatenate([cids[clause] for cids, clause in self._clauses])
            sids >>= np.uint64(16)
            order = np.lexsort((sids, e))
            e, sids = e[order], sids[order]
            first = np.ones(len(e), dtype=bool)
            first[1:] = (e[1:] != e[:-1]) | (sids[1:] != sids[:-1])
            order = order[first]
            e = e[first]
        else:
            order = np.argsort(e, kind="stable")
        exts = exts[order]
        bounds = [0, *np.cumsum(np.bincount(e, minlength=self.events)).tolist()]
        return [exts[bounds[k] : bounds[k + 1]] for k in range(self.events)]

    def results(self) -> list[list[SubId]]:
        """:meth:`arrays` as lists."""
        return [ids.tolist() for ids in self.arrays()]


R = TypeVar("R")


def match_batch(
    events: Sequence[object],
    validate: Callable[[object], Mapping[str, object]],
    matched: Callable[[list[Mapping[str, object]]], list[R]],
) -> list[R | InvalidInput]:
    """One result per event, in order: ``matched`` of the events ``validate`` accepts, and
    the :class:`InvalidInput` of each it refuses (that event alone)."""
    results: list[R | InvalidInput | None] = []
    valid: list[Mapping[str, object]] = []
    for event in events:
        try:
            valid.append(validate(event))
            results.append(None)
        except InvalidInput as exc:
            results.append(exc)
    found = iter(matched(valid))
    return [r if isinstance(r, InvalidInput) else next(found) for r in results]
