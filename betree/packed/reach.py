"""Which nodes of a packed BE-Tree an event reaches: one pass over the candidate nodes.

:func:`reach` tests the nodes under the root's p-nodes of the attributes an event defines
in one vectorised pass and cuts out the subtrees of those failing with a difference array
(no loop over the depth); :func:`tiers` precomputes what a batch reads instead
(:mod:`betree.packed.flatbatch`).  Both read only the node arrays (:class:`Nodes`): a
:class:`betree.packed.flat.FlatTree`, or the shards' joined (:mod:`betree.packed.joined`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from pbtree.view import ranges


class Nodes(Protocol):
    """The node arrays :func:`reach` reads (a :class:`FlatTree`, or the shards' joined)."""

    attrs: dict[str, int]
    blocks: dict[int, np.ndarray]
    always: tuple[np.ndarray, np.ndarray]
    node_attr: np.ndarray
    node_lo: np.ndarray
    node_hi: np.ndarray
    node_end: np.ndarray
    levels: list[tuple[np.ndarray, np.ndarray]]
    by_attr: tuple[np.ndarray, np.ndarray]


def tiers(
    node_attr: np.ndarray, node_end: np.ndarray, codes: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
    """What a batch reads besides the nodes (:mod:`betree.packed.flatbatch`): per depth from 1,
    its nodes and their parents; and the nodes sorted by attribute code with where each
    code's start (``codes + 1`` entries).  Cost: a few numpy passes over the nodes."""
    n = len(node_end)
    step = np.ones(n + 1, dtype=np.int64)  # i lies inside j's subtree: j < i < end[j]
    step[0] = 0
    np.add.at(step, node_end, -1)
    depth = np.cumsum(step)[:n]
    order = np.argsort(depth, kind="stable")  # by depth, then preorder
    cuts = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    levels = []
    for d in range(1, len(cuts) - 1):
        above, nodes = order[cuts[d - 1] : cuts[d]], order[cuts[d] : cuts[d + 1]]
        levels.append((nodes, above[np.searchsorted(above, nodes) - 1]))
    by_code = np.argsort(node_attr, kind="stable")
    bounds = np.searchsorted(node_attr[by_code], np.arange(codes + 1))
    return levels, (by_code, bounds)


def reach(view: Nodes, coords: Mapping[str, int]) -> np.ndarray:
    """Preorder indices, ascending, of the nodes an event with these grid coordinates
    reaches: the nodes under the root's p-nodes of the attributes it defines, tested in
    one pass, less the subtrees of those failing."""
    index = view.attrs
    xs = np.zeros(len(index) + 1, dtype=np.uint64)
    defined = np.zeros(len(index) + 1, dtype=bool)
    defined[-1] = True  # the root's pseudo-attribute
    lo = [view.always[0]]
    hi = [view.always[1]]
    for attr, x in coords.items():
        i = index.get(attr)
        if i is not None:
            xs[i] = x
            defined[i] = True
            spans = view.blocks.get(i)
            if spans is not None:
                lo.append(spans[0])
                hi.append(spans[1])
    lo_all, hi_all = np.concatenate(lo), np.concatenate(hi)
    order = np.argsort(lo_all)  # (disjoint subtrees: the nodes come out ascending)
    nodes = ranges(lo_all[order], hi_all[order])
    attr = view.node_attr[nodes]
    x = xs[attr]
    ok = defined[attr]
    ok &= view.node_lo[nodes] <= x
    ok &= x <= view.node_hi[nodes]
    bad = np.flatnonzero(~ok)
    if not len(bad):
        return nodes
    # a failing node's subtree ends at its position plus its subtree's size (the
    # blocks are whole subtrees, side by side in preorder)
    n = len(nodes)
    cut = np.bincount(bad, minlength=n + 1)
    cut -= np.bincount(bad + (view.node_end[nodes[bad]] - nodes[bad]), minlength=n + 1)
    return nodes[np.cumsum(cut[:n]) == 0]
