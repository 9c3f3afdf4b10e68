"""The packed-view strategies: matching on a held view of a plain store, or on a sharded
store's views joined.

The same answers as the page strategy (:mod:`betree.matching.pages`), from a snapshot's
packed arrays (:mod:`betree.packed.flat`) and the delta since their base
(:mod:`betree.packed.delta`): one event in a few dozen numpy calls, a batch of at least
:data:`betree.packed.flatbatch.LEAST` events 64 a machine word
(:mod:`betree.packed.flatbatch`), each by intervals instead when
:mod:`betree.packed.ranging` found them cheaper.  :class:`betree.engine.Engine` chooses a
plain store's strategy; a sharded store (:mod:`betree.stores.sharded`) uses
:class:`JoinedViews` while every shard holds a view.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.disk import grid
from betree.disk.catalog import SubId
from betree.disk.nodes import listed
from betree.matching.direct import DirectAtoms
from betree.matching.pages import phase1
from betree.packed import flatbatch
from betree.packed.delta import Based, Delta, settle
from betree.packed.flat import FlatTree
from betree.packed.joined import Joined
from betree.packed.numbering import Numbered
from betree.packed.ranging import Ranging
from storage.txn import ReadTxn


def event_coords(types: Mapping[str, str], values: Mapping[str, object]) -> dict[str, int]:
    """A validated event's grid coordinate on each attribute it defines."""
    return {attr: grid.event_coord(types[attr], value) for attr, value in values.items()}


def on_views(
    ranging: Ranging,
    whole: flatbatch.Whole,
    shards: Sequence[flatbatch.Shard],
    batch: Sequence[Mapping[str, object]],
    types: Mapping[str, str],
    txns: Sequence[ReadTxn],
) -> tuple[list[Any], dict[str, int], dict[str, float]]:
    """A validated batch matched on packed views (:mod:`betree.packed.flatbatch`), each
    event's ids an array, brought to the shards' deltas (from the batch's phase 1 on the
    tree; by :func:`betree.packed.delta.settle` by intervals; ``txns`` the shards' snapshots);
    with the candidates checked and the seconds taken."""
    t0 = time.perf_counter()
    tree = []

    def on_tree() -> tuple[list[Any], int]:
        tree.append(True)
        return flatbatch.match(whole, shards, batch, types)

    found, candidates = ranging.match(shards, batch, on_tree)
    if not tree:
        deltas = [shard.delta for shard in shards]
        found = settle(found, [d for d in deltas if d is not None], batch, txns)
    return found, {"candidates": candidates, "pages": 0}, {"views": time.perf_counter() - t0}


def numbered(view: FlatTree, atoms: int, grouped: Mapping[str, DirectAtoms]) -> Numbered:
    """``view``'s ``atoms`` and rows numbered list by list for a batch, its direct atoms
    ``grouped`` (:mod:`betree.packed.numbering`; made at the first call, kept on the view)."""
    numbering = view.numbering
    if numbering is None or len(numbering.slot) != atoms:
        other = None if view.slots is None else (view.slots.slot, view.slots.rows)
        keys = None if view.slots is None else view.slots.keys  # (the same numbering)
        numbering = Numbered(view.searches, atoms, grouped, view.rows, other, keys)
        view.numbering = numbering
    return numbering


class HeldView:
    """Matching in one read snapshot of a plain store on the view it holds (``based``)."""

    def __init__(
        self, txn: ReadTxn, based: Based, ranging: Ranging, types: Mapping[str, str]
    ) -> None:
        self.txn = txn
        self.based = based
        self.ranging = ranging
        self.types = types
        self.stats: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    def match(self, values: Mapping[str, object]) -> list[SubId]:
        """The ids a validated event matches, each once."""
        return self.match_array(values).tolist()  # type: ignore[no-any-return]

    def match_array(self, values: Mapping[str, object]) -> np.ndarray:
        """:meth:`match` as one array (:func:`betree.disk.nodes.id_array` form)."""
        based, txn = self.based, self.txn
        truths: list[np.ndarray] = []
        slotted: list[np.ndarray] = []  # (the truths by slot: the atoms' slots)

        def tree() -> tuple[list[np.ndarray], int]:
            view = based.view
            slots = view.slotted(based.atoms, based.grouped)
            if slots is not None:  # matched by keys, the truths by slot
                sat = slots.truths(view.searches, based.grouped, self.types, values)
                truths.append(sat)
                slotted.append(slots.slot)
                found, candidates = view.match_slotted(sat, slots)
                return [found], candidates
            keyed = view.by_key is not None  # (matched by keys: no node reached)
            sat, coords, _ = phase1(
                txn,
                based.view.searches,
                based.grouped,
                based.atoms,
                self.types,
                values,
                True,
                not keyed,
            )
            truths.append(sat)
            found, candidates = based.view.match(coords, sat)
            return [found], candidates

        shard = flatbatch.Shard(based.view, based.grouped, 0, 0, based.atoms)
        (found,), candidates = self.ranging.match([shard], [values], tree)
        self.stats = {"candidates": candidates, "pages": 0}
        if truths:  # the tree's phase 1 serves the delta's older atoms
            return based.delta.matched(found, truths[0], values, *slotted)
        return settle([found], [based.delta], [values], [txn])[0]  # matched by intervals

    def match_many(self, batch: Sequence[Mapping[str, object]], lists: bool = False) -> list[Any]:
        """Each validated event's ids (arrays, or lists): by :mod:`betree.packed.flatbatch`,
        or one by one under ``flatbatch.LEAST`` events."""
        if len(batch) < flatbatch.LEAST:
            return listed([self.match_array(v) for v in batch], lists)
        view = self.based
        numbering = numbered(view.view, view.atoms, view.grouped)
        shard = flatbatch.Shard(view.view, view.grouped, 0, 0, view.atoms, view.delta, numbering)
        found, self.stats, self.timings = on_views(
            self.ranging, view.view, [shard], batch, self.types, [self.txn]
        )
        return listed(found, lists)


class JoinedViews:
    """Matching in one read snapshot of every shard of a sharded store on their views
    joined (:mod:`betree.packed.joined`: one node test and one search for all shards),
    each shard's answers brought to its snapshot by its delta."""

    def __init__(
        self,
        joined: Joined,
        deltas: Sequence[Delta],
        txns: Sequence[ReadTxn],
        ranging: Ranging,
        types: Mapping[str, str],
    ) -> None:
        self.joined = joined
        self.deltas = deltas
        self.txns = txns
        self.ranging = ranging
        self.types = types
        self.stats: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    def _coords(self, values: Mapping[str, object]) -> dict[str, int]:
        return event_coords(self.types, values)

    def match(self, values: Mapping[str, object]) -> list[SubId]:
        """The ids a validated event matches, each once."""
        found, settled = self.ranging.match_joined(self.joined, [values], self._coords, self.deltas)
        if not settled:  # matched by intervals: no phase 1 to bring the deltas' older atoms
            found = settle(found, self.deltas, [values], self.txns)
        return found[0].tolist()  # type: ignore[no-any-return]

    def match_many(self, batch: Sequence[Mapping[str, object]], lists: bool = False) -> list[Any]:
        """Each validated event's ids (arrays, or lists)."""
        joined = self.joined
        if len(batch) >= flatbatch.LEAST:
            found, self.stats, self.timings = on_views(
                self.ranging, joined, joined.shards(self.deltas), batch, self.types, self.txns
            )
            return listed(found, lists)
        found, settled = self.ranging.match_joined(joined, batch, self._coords, self.deltas)
        if not settled:
            found = settle(found, self.deltas, batch, self.txns)
        return listed(found, lists)
