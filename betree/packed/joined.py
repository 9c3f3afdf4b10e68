"""The packed views of a sharded store's shards joined: one node test, one search an attribute.

Matching a sharded store shard by shard from their views (:mod:`betree.packed.flat`) repeats,
for each of 16 shards, ~20 numpy calls of node testing and a PB+tree search per event
attribute: ~4 ms of a 14 ms event at 10M.  Joined, the shards' nodes are one set of
arrays (each shard's after the one before, attributes numbered across all), every
attribute's PB+tree lists are merged by key with each shard's atom ids offset by the
atoms of the shards before it, and an event is validated, placed on the grid, tested
against every node and searched once; only gathering and checking the reached rows stays
per shard (:meth:`betree.packed.flat.FlatTree.check`).  A join stays valid while every shard
holds the very base views it joined: views survive writes (:mod:`betree.packed.delta`), so a
shard written to keeps its base view and the join stays, each shard's answer masked and
extended by its own delta; a shard that folds its delta into a new base makes a new
join.  Cost: joining 16 shards of a 10M store took 0.3 s (the merge of list items by
key in Python); it holds ~30 MB, outside the page-cache budget.

The shards' deltas are joined too (:class:`JoinedDelta`), once a set of them: a service
written to 10 times a second has a small delta in every shard, and testing each shard's
added clauses on its own cost ~16 x 8 numpy calls an event (1.3 of 19 ms CPU an event
at 10M, a writer at 10/s in another process); joined, one set of calls on the joined
phase-1 truths.  Making it: O(the deltas), once a write per reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from betree.lang.atoms import Atom
from betree.matching.direct import mark
from betree.packed.delta import Based, Delta, live_hits, newer_truths
from betree.packed.flatbatch import Shard
from betree.packed.reach import reach, tiers
from pbtree.view import SearchView


class Joined:
    """Every shard's view as one (see the module docstring)."""

    def __init__(self, parts: Sequence[Based]) -> None:
        self.views = [part.view for part in parts]
        #: the candidate clauses the last :meth:`match` checked
        self.candidates = 0
        self.delta: JoinedDelta | None = None  # the last deltas joined
        self.direct = [part.grouped for part in parts]
        self.bases = np.cumsum([0] + [part.atoms for part in parts])  # shard k's first atom
        names = [sorted(view.attrs, key=view.attrs.__getitem__) for view in self.views]
        self.attrs: dict[str, int] = {}
        for local in names:
            for name in local:
                self.attrs.setdefault(name, len(self.attrs))
        root = len(self.attrs)
        self.node_at = np.cumsum([0] + [len(v.node_attr) for v in self.views])
        codes: list[np.ndarray] = []
        blocks: dict[int, list[np.ndarray]] = {}
        for view, local, at in zip(self.views, names, self.node_at.tolist(), strict=False):
            codes.append(np.array([self.attrs[n] for n in local] + [root])[view.node_attr])
            for i, spans in view.blocks.items():
                blocks.setdefault(self.attrs[local[i]], []).append(spans + at)
        self.node_attr = np.concatenate(codes).astype(np.int32)
        self.node_lo = np.concatenate([v.node_lo for v in self.views])
        self.node_hi = np.concatenate([v.node_hi for v in self.views])
        self.node_end = np.concatenate(
            [v.node_end + at for v, at in zip(self.views, self.node_at.tolist(), strict=False)]
        )
        self.blocks = {attr: np.concatenate(spans, axis=1) for attr, spans in blocks.items()}
        self.levels, self.by_attr = tiers(self.node_attr, self.node_end, root + 1)
        roots = self.node_at[:-1].astype(np.int64)
        self.always = (roots, roots + 1)
        bases = self.bases[:-1].tolist()
        self.searches = {
            name: SearchView.merged(
                [v.searches[name] for v in self.views if name in v.searches],
                [b for v, b in zip(self.views, bases, strict=True) if name in v.searches],
            )
            for name in sorted({name for view in self.views for name in view.searches})
        }

    def shards(self, deltas: Sequence[Delta] = ()) -> list[Shard]:
        """The shards' views as :mod:`betree.packed.flatbatch` matches them together (each
        with its delta of ``deltas``, if given)."""
        ds: Sequence[Delta | None] = deltas or [None] * len(self.views)
        return [
            Shard(view, direct, int(at), int(base), int(end - base), delta)
            for view, direct, at, base, end, delta in zip(
                self.views, self.direct, self.node_at, self.bases, self.bases[1:], ds, strict=False
            )
        ]

    def match_slotted(
        self, values: Mapping[str, object], types: Mapping[str, str], deltas: Sequence[Delta] = ()
    ) -> np.ndarray | None:
        """:meth:`match` shard by shard by the keys and the truths by slot, as a plain
        store's view matches (:meth:`betree.packed.flat.FlatTree.match_slotted`), once
        every shard's keys are settled; else None.  Joined, the searches give atom ids
        one by one (rich rules: ~100K ids an event at 100K, ~10 times more at 1M) and
        the reach and rows run on all clauses; by slot, each list's ids are a few
        slices and the keys find the candidates."""
        slotted = []
        for view, direct, atoms in zip(
            self.views, self.direct, np.diff(self.bases).tolist(), strict=True
        ):
            slots = view.slotted(atoms, direct)
            if slots is None:
                return None
            slotted.append(slots)
        ids = []
        self.candidates = 0
        for k, (view, direct, slots) in enumerate(
            zip(self.views, self.direct, slotted, strict=True)
        ):
            sat = slots.truths(view.searches, direct, types, values)
            got, candidates = view.match_slotted(sat, slots)
            self.candidates += candidates
            ids.append(deltas[k].matched(got, sat, values, slots.slot) if deltas else got)
        return np.concatenate(ids)

    def holds(self, parts: Sequence[Based | None]) -> bool:
        """Whether these are the base views joined (every shard still holds its own)."""
        return len(parts) == len(self.views) and all(
            p is not None and p.view is v for p, v in zip(parts, self.views, strict=True)
        )

    def match(
        self,
        coords: Mapping[str, int],
        values: Mapping[str, object],
        deltas: Sequence[Delta] = (),
    ) -> np.ndarray:
        """The external ids of every subscription an event satisfies, each once, across
        the shards (``coords``: its grid coordinates; ``values``: it validated), each
        shard's base view brought to its snapshot by its delta (:mod:`betree.packed.delta`), or
        the base views' answers alone without ``deltas``."""
        sat = np.zeros(int(self.bases[-1]), dtype=bool)
        sat[self.bases[:-1]] = True  # every shard's atom 0
        found: list[np.ndarray] = []
        for attr, value in values.items():
            search = self.searches.get(attr)
            if search is not None:
                found += search.collect(value)
        if found:
            sat[np.concatenate(found)] = True
        for base, direct in zip(self.bases.tolist(), self.direct, strict=False):
            mark(sat, direct, values, base)
        nodes = reach(self, coords)  # ascending: by shard
        cuts = np.searchsorted(nodes, self.node_at).tolist()
        ids = []
        self.candidates = 0
        for k, view in enumerate(self.views):
            local = nodes[cuts[k] : cuts[k + 1]] - self.node_at[k]
            got, candidates = view.check(local, sat[self.bases[k] : self.bases[k + 1]])
            self.candidates += candidates
            ids.append(deltas[k].mask(got) if deltas else got)
        if deltas:  # after every shard's base answer, as a batch gives them (delta.settle)
            if self.delta is None or not self.delta.joins(deltas):
                self.delta = JoinedDelta(deltas, self.bases)
            ids.append(self.delta.hits(sat, values))
        return np.concatenate(ids)


class JoinedDelta:
    """The added subscriptions of every shard's delta as one delta of the joined views:
    a shard's base atom ``a`` is ``bases[k] + a`` of the joined phase-1 truths, its newer
    atoms follow all the base atoms, shard after shard (the module docstring)."""

    def __init__(self, deltas: Sequence[Delta], bases: np.ndarray) -> None:
        self.deltas = list(deltas)
        total = int(bases[-1])
        flats, starts, subs, alive = [], [], [], []
        self.atoms: list[Atom] = []
        self.by_attr: dict[str, list[int]] = {}
        self.undefined: list[int] = []
        at = held = 0  # atoms in flat, subscriptions so far
        for d, base in zip(deltas, bases.tolist(), strict=False):
            new = total + len(self.atoms)  # where this shard's newer atoms begin
            flat = d.flat
            flats.append(np.where(flat < d.base_atoms, flat + base, flat - d.base_atoms + new))
            starts.append(d.starts + at)
            subs.append(d.clause_sub + held)
            alive.append(d.alive)
            at += len(flat)
            for attr, positions in d.by_attr.items():
                self.by_attr.setdefault(attr, []).extend(p + new - total for p in positions)
            self.undefined += [p + new - total for p in d.undefined]
            self.atoms += d.new_atoms
            held += len(d.exts)
        self.any = any(d.where for d in deltas)
        self.flat = np.concatenate(flats)
        self.starts = np.concatenate(starts)
        self.clause_sub = np.concatenate(subs)
        self.alive = np.concatenate(alive)
        self.ids = np.concatenate([d.ids for d in deltas])

    def joins(self, deltas: Sequence[Delta]) -> bool:
        """Whether these are the very deltas joined."""
        return len(deltas) == len(self.deltas) and all(
            a is b for a, b in zip(deltas, self.deltas, strict=True)
        )

    def hits(self, sat: np.ndarray, values: Mapping[str, object]) -> np.ndarray:
        """The added subscriptions an event satisfies, given the joined phase-1 truths
        (as :meth:`betree.packed.delta.Delta.added_hits` does for one shard)."""
        if not self.any or not len(self.starts):
            return np.empty(0, dtype=np.int64)
        new = newer_truths(self.atoms, self.by_attr, self.undefined, values)
        truth = np.concatenate([sat, new]).take(self.flat)
        return live_hits(truth, self.starts, self.clause_sub, self.alive, self.ids)
