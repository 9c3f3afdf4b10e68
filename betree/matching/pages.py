"""The page strategy: matching on a snapshot's pages (the PB+trees and the BE-Tree walk).

One event (:meth:`Pages.match`): phase 1 marks the satisfied atoms in a boolean array (one
PB+tree search per event attribute, plus the direct tests: :func:`phase1`); phase 2 walks
the BE-Tree (:meth:`betree.disk.tree.BETree.match`), counting per-node statistics for
self-adjustment when a collector is given.  A batch (:meth:`Pages.match_many`): both
phases once for all its events (:mod:`betree.matching.batch`).  The packed-view strategy
(:mod:`betree.packed.views`) answers the same, from arrays; :class:`betree.engine.Engine`
chooses between them.  Cost: see :mod:`betree.disk.tree` and :mod:`betree.matching.batch`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.disk import grid
from betree.disk.adjust import Collector
from betree.disk.catalog import SubId
from betree.disk.nodes import id_array, listed
from betree.disk.tree import BETree
from betree.matching import batch as batching
from betree.matching.direct import DirectAtoms, mark
from betree.matching.snapshot import Snapshot
from pbtree import PBTree
from storage.txn import ReadTxn

SCALAR = ("int", "float", "string")  #: the grid kinds whose atoms sit in PB+trees


def phase1(
    txn: ReadTxn,
    trees: Mapping[str, Any],
    grouped: Mapping[str, DirectAtoms],
    next_atom: int,
    types: Mapping[str, str],
    values: Mapping[str, object],
    based: bool,
    placed: bool = True,
) -> tuple[np.ndarray, dict[str, int], int]:
    """The satisfied atoms (by atom id), the event's grid coordinates (none unless
    ``placed``: a view matching by keys reaches no node) and the PB+tree pages read: from
    the snapshot's pages (``trees`` their records), or (``based``, ``trees`` a base view's
    searches) from a base view's sorted arrays, by the base's atom ids."""
    sat = np.zeros(next_atom, dtype=bool)
    sat[0] = True
    pages = 0
    coords: dict[str, int] = {}
    found: list[np.ndarray] = []  # from the view: set at once
    for attr, value in values.items():
        kind = types[attr]
        if placed:
            coords[attr] = grid.event_coord(kind, value)
        if kind not in SCALAR or attr not in trees:
            continue
        if based:
            found += trees[attr].collect(value)
            continue
        pbtree = PBTree(txn, attr, record=trees[attr])
        ids = pbtree.search_array(value)
        if len(ids):
            sat[ids] = True
        pages += pbtree.pages_read
    if found:
        sat[np.concatenate(found, dtype=np.intp)] = True  # (cast once: 2x the scatter)
    mark(sat, grouped, values)
    return sat, coords, pages


class Pages:
    """Matching in one read snapshot from its pages (``snap`` read with its records).

    ``collector``: per-node statistics gathered by each event's walk (self-adjustment), a
    batch then matched event by event.  ``stats`` holds the last call's candidates and
    pages read, ``timings`` a batch's seconds per phase.
    """

    def __init__(
        self,
        txn: ReadTxn,
        snap: Snapshot,
        types: Mapping[str, str],
        scalar: frozenset[str],
        collector: Collector | None = None,
    ) -> None:
        self.txn = txn
        self.snap = snap
        self.types = types
        self.scalar = scalar
        self.collector = collector
        self.stats: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    def match(self, values: Mapping[str, object]) -> list[SubId]:
        """The ids a validated event matches, each once."""
        snap = self.snap
        sat, coords, pages = phase1(
            self.txn, snap.trees, snap.grouped, snap.next_atom, self.types, values, False
        )
        tree = BETree(self.txn, snap.rec)
        out: dict[int, SubId] = {}
        candidates = tree.match(coords, sat, out, self.collector)
        if self.collector is not None:
            self.collector.events += 1
        self.stats = {"candidates": candidates, "pages": pages + tree.pages_read}
        return list(out.values())

    def match_many(self, batch: Sequence[Mapping[str, object]], lists: bool = False) -> list[Any]:
        """Each validated event's ids (:func:`betree.disk.nodes.id_array`, or lists), in one
        pass over the index (:mod:`betree.matching.batch`: one PB+tree search per distinct
        value, each reached node and l-node page read and checked once for the batch);
        event by event when collecting statistics."""
        if len(batch) <= 1 or self.collector is not None:
            return listed([id_array(self.match(v)) for v in batch], lists)
        if len(batch) > batching.MAX_EVENTS:  # bounds the bit matrix: see betree.matching.batch
            step = batching.MAX_EVENTS
            found: list[Any] = []
            stats: dict[str, int] = {}
            timings: dict[str, float] = {}
            for k in range(0, len(batch), step):
                found.extend(self.match_many(batch[k : k + step], lists))
                for key, n in self.stats.items():
                    stats[key] = stats.get(key, 0) + n
                for key, seconds in self.timings.items():
                    timings[key] = timings.get(key, 0.0) + seconds
            self.stats, self.timings = stats, timings  # the whole batch's
            return found
        txn, snap = self.txn, self.snap
        order = batching.shape_order(batch)
        batch = [batch[e] for e in order]
        clock = time.perf_counter
        t0 = clock()
        types = self.types
        sat, pages = batching.satisfied(
            txn, snap.trees, snap.grouped, snap.next_atom, self.scalar, batch
        )
        t1 = clock()
        coords = [
            {attr: grid.event_coord(types[attr], value) for attr, value in values.items()}
            for values in batch
        ]
        tree = BETree(txn, snap.rec)
        reached = batching.reached_pages(tree, coords)
        t2 = clock()
        hits = batching.check_pages(reached, sat, len(batch))
        t3 = clock()
        arrays = hits.arrays()
        found = list(arrays)
        for k, ids in zip(order, arrays, strict=True):
            found[k] = ids
        self.stats = {"candidates": hits.candidates, "pages": pages + tree.pages_read}
        self.timings = {  # seconds
            "phase1": t1 - t0,
            "walk": t2 - t1,
            "check": t3 - t2,
            "results": clock() - t3,
        }
        return listed(found, lists)
