"""A snapshot's interval matcher built straight from its pages, no packed view first.

A store whose packed view (:mod:`betree.packed.flat`) cannot fit the page cache's share is
matched by its interval matcher (:mod:`betree.packed.intervals`) alone.  Building the whole
view only to strip it held that view (dense 1M, a shard of 500K clauses: ~445 MB of
PB+tree ids, keys and rows of atom ids) beside the matcher's build: a ~3 GB peak for
~330 MB kept.  Here the BE-Tree's l-node pages give each clause's id and atom ids (uint32,
with an int32 clause number each), and each attribute's PB+tree is read as a
:class:`pbtree.view.SearchView` only while its intervals are made, then dropped (kept when
it holds atoms that are not intervals).

Cost: every page read once, as a view's build; memory: 8 bytes an atom of a clause, one
attribute's PB+tree at a time, and the matcher itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from betree.disk import catalog
from betree.disk.nodes import CNode, id_array
from betree.disk.tree import BETree
from betree.matching.direct import DirectAtoms
from betree.matching.snapshot import Records
from betree.packed.delta import Based, Delta
from betree.packed.flat import LEAST_BYTES, PAUSE_EVERY, WIDTH, FlatTree, lnode_chain
from betree.packed.intervals import Intervals, Part
from pbtree.view import SearchView
from storage.store import Store

#: bytes a whole view takes a predicate of its PB+trees, estimated (measured 37 on BEGen
#: 100K, 46 on dense 100K: ids, keys and rows): a store the interval matcher is worth
#: trying on whose estimate exceeds the page cache's share is built lean (:func:`too_big`)
PREDICATE_BYTES = 24


class PageSearches(Mapping[str, SearchView]):
    """A snapshot's PB+trees by attribute, each read from its pages when asked, not kept
    (what the caller keeps of it stays; the rest is freed)."""

    def __init__(self, tree: BETree, records: Mapping[str, dict[str, Any]]) -> None:
        self.txn = tree.txn
        self.records = records

    def __getitem__(self, name: str) -> SearchView:
        return SearchView(self.txn, name, self.records[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


def too_big(clauses: int, predicates: int, share: int) -> bool:
    """Whether a whole view of ``clauses`` clauses and ``predicates`` predicates is
    estimated past ``share`` bytes (:data:`PREDICATE_BYTES`)."""
    return clauses * LEAST_BYTES + predicates * PREDICATE_BYTES > share


def unbounded(tree: BETree, kinds: Mapping[str, str]) -> int:
    """The clauses of ``tree`` estimated to have no interval (no int or float attribute's
    atom): those whose l-node is not below a c-node of such an attribute (from the c-nodes
    alone, no l-node page read).  An estimate both ways (a clause placed by a string atom
    may have a range too; one below an int attribute may hold ``!=`` alone there): rich
    5K, 4,239 estimated of 10,098 clauses against 3,038; dense and BEGen: 54 and 62 (the
    root's l-node) against 0.  Cost: every c-node page read once (rich 5K: ~1 ms)."""
    load, space = tree.txn.load_uncached, tree.space
    out = 0
    stack = [(tree.root, False, False)]  # (page, below the root, below a ranged attribute)
    while stack:
        page, below, ranged = stack.pop()
        node = load(space, page, CNode)
        ranged = ranged or kinds.get(node.attr or "") in ("int", "float")
        out += 0 if ranged else node.size
        if node.left and below:
            stack.append((node.right, True, ranged))
            stack.append((node.left, True, ranged))
        stack.extend((top, True, ranged) for _, top, _ in node.pdir)
    return out


def clause_atoms(
    tree: BETree, pause: Callable[[], None] | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """Every clause of ``tree`` in a view's order (its c-nodes in preorder): the external
    ids, the subscription numbers (None unless one has several clauses), and each
    clause's atom ids end to end (atom 0 left out, uint32) with its clause number (int32).
    Only l-node chains are kept; ``pause`` as :func:`betree.packed.flat.build`'s."""
    load, space = tree.txn.load_uncached, tree.space
    exts: list[np.ndarray] = []
    cids: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    atoms: list[np.ndarray] = []
    stack = [(tree.root, False)]  # (page, whether below the root: a c-directory halves it)
    visits = 0
    while stack:
        page, below = stack.pop()
        visits += 1
        if pause is not None and visits % PAUSE_EVERY == 0:
            pause()
        node = load(space, page, CNode)
        for c, e, n, a in lnode_chain(tree, node.lnode):
            cids.append(c)
            exts.append(e)
            lens.append(n)
            atoms.append(a.astype(np.uint32, copy=False))
        if node.left and below:
            stack.append((node.right, True))
            stack.append((node.left, True))
        for _, top, _ in reversed(node.pdir):
            stack.append((top, True))
    ext = np.concatenate(exts) if exts else id_array([])
    cid = np.concatenate(cids) if cids else np.empty(0, dtype=np.uint64)
    sids = cid >> np.uint64(16) if (cid & np.uint64(0xFFFF)).any() else None
    del cid, cids
    per = np.concatenate(lens) if lens else np.empty(0, dtype=np.intp)
    aid = np.concatenate(atoms) if atoms else np.empty(0, dtype=np.uint32)
    del atoms
    keep = aid != 0
    clause = np.repeat(np.arange(len(per), dtype=np.int32), per)[keep]
    return ext, sids, aid[keep], clause


def lean_view(
    tree: BETree,
    pbtrees: Mapping[str, dict[str, Any]],
    direct: Mapping[str, DirectAtoms],
    atoms: int,
    kinds: Mapping[str, str],
    pause: Callable[[], None] | None = None,
) -> FlatTree:
    """The view of ``tree`` stripped to its interval matcher (as
    :meth:`betree.packed.flat.FlatTree.strip` leaves one), built from the pages:
    ``pbtrees`` the PB+tree records by attribute, ``direct`` the direct atoms, ``atoms``
    the atom ids the snapshot numbers, ``kinds`` each attribute's grid kind."""
    exts, sids, aid, clause = clause_atoms(tree, pause)
    part = Part(exts, sids, aid, clause, PageSearches(tree, pbtrees), direct, 0, atoms)
    del aid, clause
    built = Intervals([part], kinds)
    del part
    arrays: dict[str, np.ndarray] = {
        "node_attr": np.zeros(1, dtype=np.int32),  # the root alone: never walked
        "node_lo": np.zeros(1, dtype=np.uint64),
        "node_hi": np.zeros(1, dtype=np.uint64),
        "node_end": np.ones(1, dtype=np.int64),
        "clause_at": np.zeros(2, dtype=np.int64),
        "row_at": np.zeros(1, dtype=np.int32),
        "rows": np.zeros((0, WIDTH), dtype=np.uint16),
        "exts": exts,
    }
    if sids is not None:
        arrays["sids"] = sids
    view = FlatTree({}, {}, arrays)
    view.searches = dict(built.kept[0][0])
    view.strip(built, built.searched)
    return view


def lean_base(store: Store, records: Records, kinds: Mapping[str, str]) -> tuple[int, Based]:
    """:func:`betree.packed.flat.fresh_base` built lean (the fold of a lean view, in the
    background: no whole view built there either), and its generation."""
    with store.read() as txn:
        rec = catalog.root_record(txn)
        trees, grouped = records.read(txn)
        tree, atoms = BETree(txn, rec), rec["next_atom"]
        view = lean_view(tree, trees, grouped, atoms, kinds, pause=lambda: time.sleep(0))
        return txn.gen, Based(view, grouped, atoms, Delta.empty(rec))
