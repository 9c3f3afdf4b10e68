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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from betree.matching.direct import mark
from betree.packed.delta import Based, Delta
from betree.packed.flat import reach, tiers
from betree.packed.flatbatch import Shard
from pbtree.view import SearchView


class Joined:
    """Every shard's view as one (see the module docstring)."""

    def __init__(self, parts: Sequence[Based]) -> None:
        self.views = [part.view for part in parts]
        #: the candidate clauses the last :meth:`match` checked
        self.candidates = 0
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
        added = []  # after every shard's base answer, as a batch gives them (delta.settle)
        for k, view in enumerate(self.views):
            local = nodes[cuts[k] : cuts[k + 1]] - self.node_at[k]
            part = sat[self.bases[k] : self.bases[k + 1]]
            got, candidates = view.check(local, part)
            self.candidates += candidates
            if deltas:
                ids.append(deltas[k].mask(got))
                added.append(deltas[k].added_hits(part, values))
            else:
                ids.append(got)
        return np.concatenate(ids + added)
