"""The BE-Tree of one snapshot as packed arrays: a match in a few dozen numpy calls.

The page walk (:meth:`betree.disk.tree.BETree.match`) costs about a microsecond of Python per
visited page, and at 10M subscriptions an event visits ~27,000 pages of 16 shards.  This
view holds the same tree as arrays: c-nodes in preorder (a node's subtree is the range
``[i, end[i])``), the clauses of each l-node contiguous in node order, and each clause's
atom ids in rows of 8 (padded with atom 0, which always holds)::

    node_attr  int32   the attribute that decides whether the node is reached (its
                       bucket's c-directory; the root: an always-defined pseudo-attribute)
    node_lo, node_hi   uint64  the bucket's grid interval (a top bucket: the whole grid)
    node_end   int64   the end of the node's subtree in preorder
    clause_at  int64   first clause of each node's l-node (``nodes + 1`` entries)
    node_row           first row of each node's l-node (``nodes + 1`` entries)
    row_at     int32   first row of each clause (``clauses + 1`` entries)
    rows       uint16  ``rows x 8`` atom ids (uint32 when an atom id needs it)
    row_clause, row_first  each row's clause and whether it is the clause's first
                       (only when some clause has more than 8 atoms)
    exts       the clauses' external ids (:func:`betree.disk.nodes.id_array`)
    sids       uint64  the clauses' subscription numbers, kept only when a subscription
                       has two clauses here (to report it once)
    searches   the snapshot's PB+trees as sorted arrays (:mod:`pbtree.view`)

A node is reached when the event defines its attribute at a coordinate inside its bucket
and its parent is reached: exactly the nodes the page walk visits, since the two children
of a bucket halve it (``check()`` verifies it).  A match tests the nodes under the root's
p-nodes of the attributes the event defines (the rest cannot be reached), cuts out the
subtrees of failing nodes with a difference array (no loop over the depth), expands the
reached nodes' row ranges, takes a row's 8 atom truths as one ``uint64``, and carries a
failing row along the rows of a longer clause.  Where the tree prunes little (ad
targeting), each clause's *key* atom, held least often over the first :data:`LEARN`
events, is tested first; kept if under :data:`KEYED_PASS` of the reached clauses' keys
held over the next :data:`LEARN` (not BEGen's), the keys and *second* keys alone find
the candidates, the reach skipped (rich 100K: 1,080 -> 500 µs an event).

Cost (a 625K-clause BEGen shard of a 10M store, an event reaching ~22,000 clauses):
~1 ms an event with phase 1, ~4 ms walking pages; building it reads every page once
(~1.2 s).  Memory: ~44 bytes a clause (26 MB there).  A view of one snapshot serves
later ones with a delta (:mod:`betree.packed.delta`); :class:`FlatSlot` decides when one
is worth building and holds it within the page-cache budget.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from betree.disk import catalog
from betree.disk.nodes import CNode, LNodePage, id_array
from betree.disk.tree import BETree
from betree.matching.direct import DirectAtoms
from betree.matching.snapshot import Records
from betree.packed import delta as delta_bounds
from betree.packed import keys
from betree.packed.delta import Based, Delta
from betree.packed.heap import return_freed_memory
from betree.packed.numbering import Numbered
from betree.packed.reach import reach, tiers
from betree.packed.slots import Slots
from pbtree.view import SearchView, ranges
from storage.cache import PageCache
from storage.store import Store

#: atoms per row: a row's truths, 8 bools, read as one uint64
WIDTH = 8
_ALL = np.uint64(0x0101010101010101)
_GRID_MAX = (1 << 64) - 1
#: events matched by walking pages in one generation before a view of it is built: a
#: view costs about as much as this many walks, and pays off only if the generation lasts
#: (the ski-rental rule: a store written to between every few events never builds one)
FLAT_AFTER = 64
#: seconds of walks in one generation after which a view is built however few the events
#: were: a walk that slow reads most of the store's pages, as a build does once (dense 1M,
#: 2 shards, 256 MB cache: 6.2 s a walk, 64 of them 400 s; 100K: 1 s, the build ~20 s)
WALK_SECONDS = 10.0
#: the fewest bytes a view takes a clause (an 8-byte id, a 4-byte row start, one row of
#: 2-byte atom ids): a store whose clauses cannot fit is not read for nothing
LEAST_BYTES = 8 + 4 + 2 * WIDTH
#: c-nodes a build visits between calls of its ``pause`` (:func:`build`)
PAUSE_EVERY = 32
#: a delta due for folding is matched while a fold runs in the background
#: (:attr:`FlatSlot.background`), until it is this many times past its bound
BEHIND = 4
#: a view too big for the page cache's share is held stripped to its interval matcher
#: (:attr:`FlatSlot.lean`) within this many times the page cache's budget, charged apart
#: from it (dense 1M, 2 shards, 256 MB: ~200 MB a shard, walks 6.2 s an event), or whole
#: when its intervals are no cheaper than walks (rich 1M: walks ~170 ms an event)
LEAN_TIMES = 4
#: events whose atom truths choose each row's key atom (:meth:`FlatTree.check`)
LEARN = 16
#: the keys are kept when they held for less than this share of the clauses reached over
#: their first events (measured: at 51%, BEGen 20K, the keyed check was 30% slower; at
#: 1.7%, rich 20K, 25% faster)
KEYED_PASS = 0.25


class FlatTree:
    """One snapshot's tree as arrays (see the module docstring); made by :func:`build`."""

    __slots__ = (
        "always",
        "attrs",
        "blocks",
        "by_attr",
        "by_key",
        "clause_at",
        "counts",
        "exts",
        "key",
        "learning",
        "learnt",
        "levels",
        "max_rows",
        "node_attr",
        "node_end",
        "node_hi",
        "node_lo",
        "node_row",
        "numbering",
        "ranged",
        "row_at",
        "row_clause",
        "row_first",
        "rows",
        "searches",
        "second",
        "sids",
        "slots",
        "trial",
    )

    def __init__(
        self,
        attrs: dict[str, int],
        blocks: Mapping[int, list[tuple[int, int]]],
        arrays: Mapping[str, np.ndarray],
    ) -> None:
        #: attribute -> its index in ``node_attr``
        self.attrs = attrs
        #: attribute index -> the preorder ranges of the root's top buckets on it
        self.blocks = {attr: np.array(spans, dtype=np.int64).T for attr, spans in blocks.items()}
        #: the root, where every reachable node starts
        self.always = (np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64))
        self.node_attr: np.ndarray = arrays["node_attr"]
        self.node_lo: np.ndarray = arrays["node_lo"]
        self.node_hi: np.ndarray = arrays["node_hi"]
        self.node_end: np.ndarray = arrays["node_end"]
        self.levels, self.by_attr = tiers(self.node_attr, self.node_end, len(attrs) + 1)
        self.clause_at: np.ndarray = arrays["clause_at"]
        self.row_at: np.ndarray = arrays["row_at"]
        self.rows: np.ndarray = arrays["rows"]
        #: each node's first row (``nodes + 1`` entries)
        self.node_row: np.ndarray = self.row_at[self.clause_at]
        #: each row's clause and whether it is its clause's first (None and empty when
        #: every clause has one row: row i is clause i), and the most rows of a clause
        self.row_clause: np.ndarray | None = None
        self.row_first = np.zeros(0, dtype=bool)
        per = np.diff(self.row_at)
        self.max_rows = int(per.max()) if len(per) else 1
        if self.max_rows > 1:
            self.row_clause = np.repeat(np.arange(len(per), dtype=np.int32), per)
            self.row_first = np.zeros(len(self.rows), dtype=bool)
            self.row_first[self.row_at[:-1]] = True
        self.exts: np.ndarray = arrays["exts"]
        self.sids: np.ndarray | None = arrays.get("sids")
        #: the snapshot's PB+trees as sorted arrays, by attribute (filled by :func:`build`)
        self.searches: dict[str, SearchView] = {}
        #: each clause's atom seen holding least often (tested first), once learnt and
        #: while selective; before, the events counted and how many each atom held for;
        #: while on trial, [events, clauses reached, clauses whose key held]
        self.key: np.ndarray | None = None
        #: each clause's atom seen holding least often after its key (:meth:`_match_by_key`)
        self.second: np.ndarray | None = None
        self.learning: tuple[int, np.ndarray] | None = None
        self.learnt = False
        #: once learnt: per atom id, the events of :data:`LEARN` it held for (a fold's
        #: view chooses its keys from them at once: :mod:`betree.packed.carry`)
        self.counts: np.ndarray | None = None
        self.trial: list[int] | None = None
        #: once the keys passed their trial: the distinct keys ascending, where each one's
        #: clauses start in ``by_key[2]`` (one more entry), the clauses by key and their
        #: second keys in that order (:meth:`_match_by_key`)
        self.by_key: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        #: once stripped (:meth:`strip`): the interval matcher that answers for it
        self.ranged: Sized | None = None
        #: once keyed, the atoms numbered list by list (:meth:`match_slotted`)
        self.slots: Slots | None = None
        #: once a batch matched, the atoms and rows numbered list by list
        #: (:func:`betree.packed.views.numbered`)
        self.numbering: Numbered | None = None

    def strip(self, ranged: Sized, keep: Collection[str]) -> None:
        """Keep only what ``ranged``, the interval matcher built from this view
        (:mod:`betree.packed.intervals`), still reads: the ids, and the searches of the
        attributes in ``keep`` (whose atoms are not intervals); the rows and the other
        searches go (a dense store's view: ~90% of it).  The tree cannot match after."""
        self.ranged = ranged
        self.rows = np.zeros((0, WIDTH), dtype=self.rows.dtype)
        self.row_at = np.zeros(1, dtype=self.row_at.dtype)
        self.row_clause, self.row_first = None, np.zeros(0, dtype=bool)
        self.key, self.second, self.by_key, self.learning, self.counts = (None,) * 5
        self.slots = self.numbering = None
        self.searches = {a: s for a, s in self.searches.items() if a in keep}

    def _check_keyed(
        self, nodes: np.ndarray, sat: np.ndarray, key: np.ndarray
    ) -> tuple[np.ndarray, int]:
        """:meth:`check` through the clauses' keys: the reached clauses whose key holds,
        then their rows."""
        clauses = ranges(self.clause_at[nodes], self.clause_at[nodes + 1])
        candidates = len(clauses)
        clauses = clauses[sat.take(key.take(clauses))]
        trial = self.trial
        if trial is not None:  # the keys kept only if few hold
            trial[0] += 1
            trial[1] += candidates
            trial[2] += len(clauses)
            if trial[0] >= LEARN:
                self.trial = None
                if trial[2] >= KEYED_PASS * trial[1]:
                    self.key = self.second = None
        return self._clauses_held(clauses, sat), candidates

    def _clauses_held(
        self, clauses: np.ndarray, sat: np.ndarray, by_slot: np.ndarray | None = None
    ) -> np.ndarray:
        """The external ids of the subscriptions of ``clauses`` (ascending) that hold
        (``sat`` by atom id, or by slot with ``by_slot`` the rows by slot)."""
        row_at = self.row_at
        lo = row_at.take(clauses)
        lens = row_at.take(clauses + 1) - lo
        if self.row_clause is not None and not (some := lens > 0).all():
            clauses, lo, lens = clauses[some], lo[some], lens[some]  # (no row: never holds)
        # the rows end to end (:func:`ranges`, its cumsum kept for the clauses' starts)
        ends = np.cumsum(lens)
        if not len(ends) or not ends[-1]:
            return self.exts[:0]
        starts = ends - lens
        rows = np.repeat(lo - starts, lens)
        rows += np.arange(int(ends[-1]))
        atoms = (self.rows if by_slot is None else by_slot).take(rows, axis=0)
        truths = sat.take(atoms).view(np.uint64).ravel() == _ALL
        if self.row_clause is not None:  # a clause holds when each of its rows does
            truths = np.logical_and.reduceat(truths, starts)
        hits = clauses[truths]
        if self.sids is not None and len(hits) > 1:  # each subscription once, by sid
            sid = self.sids.take(hits)  # (np.unique's first of each, without its wrapper)
            by = np.argsort(sid, kind="stable")
            sid = sid.take(by)
            first = np.ones(len(sid), dtype=bool)
            np.not_equal(sid[1:], sid[:-1], out=first[1:])
            hits = hits.take(by[first])
        return self.exts.take(hits)

    def _match_by_key(
        self,
        sat: np.ndarray,
        by_key: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        by_slot: np.ndarray | None = None,
    ) -> tuple[np.ndarray, int]:
        """:meth:`match` from the keys alone, the tree's reach skipped: the clauses whose
        key and second key hold, then their rows (rich 100K: 2,270 clauses' keys hold an
        event, 420 of them their second too, 180 whole).  Exact because a clause whose
        atoms all hold is one the event reaches (the BE-Tree prunes only clauses that
        cannot hold), so the reach adds nothing to a check of every atom; ``sat`` must be
        the event's true atom truths (not so for :meth:`check`, which tests only the
        reached clauses), by atom id or, with ``by_slot`` (the rows by slot), by slot
        (``by_key`` too)."""
        keys, at, order, second = by_key
        held = np.flatnonzero(sat.take(keys))
        at_key = ranges(at.take(held), at.take(held + 1))  # (positions in ``order``)
        at_key = at_key[sat.take(second.take(at_key))]
        clauses = np.sort(order.take(at_key))
        return self._clauses_held(clauses, sat, by_slot), len(clauses)

    def slotted(self, atoms: int, grouped: Mapping[str, DirectAtoms]) -> Slots | None:
        """Once the keys passed their trial (settled here for a sharded store's shards), the
        view's ``atoms`` numbered list by list, its direct atoms ``grouped``
        (:mod:`betree.packed.slots`; made at the first call), else None."""
        by_key, slots = self.by_key, self.slots
        if by_key is None:
            if self.key is None or self.second is None or self.trial is not None:
                return None
            by_key = self._keys_settled(self.key, self.second)
        if slots is None or len(slots.slot) != atoms:
            had = self.numbering  # (its rows by slot shared where the same permutation)
            other = None if had is None else (had.slot, had.rows)
            slots = self.slots = Slots(self.searches, atoms, by_key, grouped, self.rows, other)
        return slots

    def match_slotted(self, sat: np.ndarray, slots: Slots) -> tuple[np.ndarray, int]:
        """:meth:`match` by the keys (:meth:`Slots.clauses`), ``sat`` the event's truths by slot."""
        clauses = slots.clauses(sat)
        return self._clauses_held(clauses, sat, slots.rows), len(clauses)

    def _keys_settled(
        self, key: np.ndarray, second: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:attr:`by_key` for ``key`` and ``second`` (once the keys passed their trial).
        Cost: a sort of the clauses; ~12 bytes a clause."""
        order = np.argsort(key, kind="stable")
        keys, at = np.unique(key.take(order), return_index=True)
        starts = np.append(at, len(key)).astype(np.int64)
        dtype = np.int32 if len(key) < 1 << 31 else np.int64
        self.by_key = (keys.astype(np.intp), starts, order.astype(dtype), second.take(order))
        return self.by_key

    def settle(self, key: np.ndarray, second: np.ndarray) -> None:
        """Keys chosen elsewhere (:mod:`betree.packed.carry`) kept at once, no trial, and
        sorted (:attr:`by_key`), before this view's first event."""
        self.key, self.second, self.trial = key, second, None
        self._keys_settled(key, second)

    def learn(self, sat: np.ndarray) -> None:
        """Count one event's atom truths; after :data:`LEARN` events, choose each clause's
        key: its atom that held for the fewest (padding, always true, last), on trial
        for as many events; and its second key, the next such atom (padding if none).
        Any key is one of the clause's atoms, so a race between threads costs speed,
        never answers."""
        learning = self.learning
        if learning is None or len(learning[1]) != len(sat):
            learning = (0, np.zeros(len(sat), dtype=np.int32))
        events, held = learning
        held += sat
        self.learning = (events + 1, held)
        if events + 1 < LEARN:
            return
        self.learning, self.learnt, self.counts = None, True, held
        held[0] = LEARN + 1  # atom 0 (padding) holds always
        key, self.second = keys.choose(self.rows, self.row_at, self.row_clause, held)
        self.trial = [0, 0, 0]
        self.key = key

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays (object ids counted at their pointers)."""
        arrays = [self.node_attr, self.node_lo, self.node_hi, self.node_end, self.clause_at]
        arrays += [self.node_row, self.row_at, self.rows, self.row_first, self.exts]
        more = (self.row_clause, self.sids, self.key, self.second, self.counts)
        arrays += [a for a in more if a is not None]
        arrays += list(self.by_key) if self.by_key is not None else []
        ranged = self.ranged.nbytes if self.ranged is not None else 0
        ranged += self.slots.nbytes if self.slots is not None else 0
        ranged += self.numbering.nbytes if self.numbering is not None else 0
        searches = sum(s.nbytes for s in self.searches.values())
        return sum(int(a.nbytes) for a in arrays) + searches + ranged

    def reached(self, coords: Mapping[str, int]) -> np.ndarray:
        """Preorder indices of the nodes an event with these grid coordinates reaches."""
        return reach(self, coords)

    def match(self, coords: Mapping[str, int], sat: np.ndarray) -> tuple[np.ndarray, int]:
        """The external ids of the subscriptions satisfied (``sat``: the event's atom
        truths by atom id), each once, and the number of candidate clauses checked: once
        the keys passed their trial, from the keys alone (:meth:`_match_by_key`), else
        the reached nodes' clauses (:meth:`check`)."""
        key, second = self.key, self.second
        if key is not None and second is not None and self.trial is None:
            by_key = self.by_key if self.by_key is not None else self._keys_settled(key, second)
            return self._match_by_key(sat, by_key)
        return self.check(self.reached(coords), sat)

    def check(self, nodes: np.ndarray, sat: np.ndarray) -> tuple[np.ndarray, int]:
        """:meth:`match` of the reached ``nodes``."""
        key = self.key
        if key is not None:
            return self._check_keyed(nodes, sat, key)
        rows = ranges(self.node_row[nodes], self.node_row[nodes + 1])
        if not len(rows):
            return self.exts[:0], 0
        if not self.learnt:
            self.learn(sat)
        truths = sat.take(self.rows.take(rows, axis=0)).view(np.uint64)
        if truths.shape[1] > 1:
            truths = np.bitwise_and.reduce(truths, axis=1)
        ok = truths.ravel() == _ALL
        if self.row_clause is None:  # one row a clause: rows are clauses
            hits, candidates = rows[ok], len(rows)
        else:  # a clause's last row holds when all of its rows hold
            first = self.row_first.take(rows)[1:]  # the next row starts a clause
            for _ in range(self.max_rows - 1):
                ok[1:] &= ok[:-1] | first
            ok[:-1] &= first
            hits = self.row_clause.take(rows[ok])
            candidates = int(np.count_nonzero(first)) + 1
        if self.sids is not None and len(hits):
            _, first = np.unique(self.sids[hits], return_index=True)
            hits = hits[first]
        return self.exts[hits], candidates


class Lean(Protocol):
    """What holds a view too big for the page cache's share as its interval matcher
    (:class:`betree.packed.ranging.Ranging`)."""

    def worth(self, clauses: int) -> bool:
        """Whether a view of ``clauses`` clauses may be worth building to try."""
        ...

    def lean(self, based: Based, limit: int) -> Based | None:
        """``based`` stripped to its interval matcher within ``limit`` bytes, or None."""
        ...


class Sized(Protocol):
    """What a stripped view charges for the matcher that answers for it."""

    @property
    def nbytes(self) -> int: ...


def lnode_chain(
    tree: BETree, at: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The arrays (:meth:`LNodePage.arrays`) of each non-empty l-node page of the chain
    from page ``at`` of ``tree``, read past the page cache."""
    load, space = tree.txn.load_uncached, tree.space
    while at:
        lpage = load(space, at, LNodePage)
        arrays = lpage.arrays()
        if len(arrays[1]):
            yield arrays
        at = lpage.next


def build(
    tree: BETree, pbtrees: Mapping[str, dict[str, Any]], pause: Callable[[], None] | None = None
) -> FlatTree:
    """The view of ``tree`` and of the PB+trees whose records ``pbtrees`` holds by
    attribute: every page read once (the tree's in preorder), past the page cache (which
    the view replaces).  ``pause``: called every :data:`PAUSE_EVERY` c-nodes (a build in
    a thread of its own lets matching threads have the interpreter there)."""
    load, space = tree.txn.load_uncached, tree.space
    visits = 0
    attrs: dict[str, int] = {}
    node_attr: list[int] = []
    node_lo: list[int] = []
    node_hi: list[int] = []
    node_end: list[int] = []
    clause_at: list[int] = [0]
    blocks: dict[int, list[tuple[int, int]]] = {}
    cids: list[np.ndarray] = []
    exts: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    atoms: list[np.ndarray] = []
    clauses = 0
    # (page, its bucket's attribute or None for the root, whether a top bucket)
    stack: list[tuple[int, str | None, bool]] = [(tree.root, None, False)]
    entered: list[tuple[int, int]] = []  # (preorder index, stack length on entering)
    while stack:
        page, attr, top = stack.pop()
        visits += 1
        if pause is not None and visits % PAUSE_EVERY == 0:
            pause()
        while entered and entered[-1][1] > len(stack):
            node_end[entered.pop()[0]] = len(node_attr)
        node = load(space, page, CNode)
        i = len(node_attr)
        whole = attr is None or top
        node_attr.append(-1 if attr is None else attrs.setdefault(attr, len(attrs)))
        node_lo.append(0 if whole else node.lo)
        node_hi.append(_GRID_MAX if whole else node.hi)
        node_end.append(0)
        for c, e, n, a in lnode_chain(tree, node.lnode):
            cids.append(c)
            exts.append(e)
            lens.append(n)
            atoms.append(a)
            clauses += len(e)
        clause_at.append(clauses)
        entered.append((i, len(stack)))
        if node.left and attr is not None:  # (the root has no c-directory to halve)
            stack.append((node.right, node.attr, False))
            stack.append((node.left, node.attr, False))
        for pattr, ptop, _ in reversed(node.pdir):
            stack.append((ptop, pattr, True))
    while entered:
        node_end[entered.pop()[0]] = len(node_attr)
    root = len(attrs)
    code = np.array([root if a < 0 else a for a in node_attr], dtype=np.int32)
    end = np.array(node_end, dtype=np.int64)
    # the root's children are top buckets (the root has no c-directory of its own)
    child = 1
    while child < len(code):
        blocks.setdefault(int(code[child]), []).append((child, int(end[child])))
        child = int(end[child])
    cid = np.concatenate(cids) if cids else np.empty(0, dtype=np.uint64)
    sid = cid >> np.uint64(16)
    arrays: dict[str, np.ndarray] = {
        "node_attr": code,
        "node_lo": np.array(node_lo, dtype=np.uint64),
        "node_hi": np.array(node_hi, dtype=np.uint64),
        "node_end": end,
        "clause_at": np.array(clause_at, dtype=np.int64),
        "exts": np.concatenate(exts) if exts else id_array([]),
        **pack_rows(
            np.concatenate(lens) if lens else np.empty(0, dtype=np.intp),
            np.concatenate(atoms) if atoms else np.empty(0, dtype=np.uint32),
        ),
    }
    if (cid & np.uint64(0xFFFF)).any():  # some subscription has several clauses here
        arrays["sids"] = sid
    view = FlatTree(attrs, blocks, arrays)
    view.searches = {name: SearchView(tree.txn, name, rec) for name, rec in pbtrees.items()}
    return view


def pack_rows(lens: np.ndarray, atoms: np.ndarray) -> dict[str, np.ndarray]:
    """Clauses given as lengths and atom ids end to end, as rows of :data:`WIDTH`."""
    per = (lens + WIDTH - 1) // WIDTH
    row_at = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(per, out=row_at[1:])
    row_at = row_at.astype(np.int32) if row_at[-1] < 1 << 31 else row_at
    small = not len(atoms) or int(atoms.max()) <= 0xFFFF  # 2-byte ids: half the memory
    rows = np.zeros((int(row_at[-1]), WIDTH), dtype=np.uint16 if small else np.uint32)
    if len(atoms):
        clause = np.repeat(np.arange(len(lens)), lens)
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        k = np.arange(len(atoms), dtype=np.int64) - starts[clause]
        rows[row_at[clause] + k // WIDTH, k % WIDTH] = atoms
    return {"row_at": row_at, "rows": rows}


def fresh_base(store: Store, records: Records) -> tuple[int, Based]:
    """A base view of ``store`` in a snapshot of its own, and its generation (a fold in the
    background: :class:`FlatSlot`); its per-attribute records read with ``records``, the
    engine's (kept from read to read: what did not change is not decoded again)."""
    with store.read() as txn:
        rec = catalog.root_record(txn)
        trees, grouped = records.read(txn)
        for atoms in grouped.values():  # (what their first match would make: made here)
            atoms.prepare()
        view = build(BETree(txn, rec), trees, pause=lambda: time.sleep(0))
        return txn.gen, Based(view, grouped, rec["next_atom"], Delta.empty(rec))


class FlatSlot:
    """The view one store's matches use, if any: built once :attr:`after` events were
    matched by walking pages, and only if it fits in three quarters of the store's
    page-cache budget, then taken (:meth:`PageCache.reserve`; pages serve writes alone).

    A view survives writes (:mod:`betree.packed.delta`): a later generation gets the same base
    view with the delta caught up from the change log, until the delta is due for folding
    (then rebuilt) or the log cannot say, or a delta left over once writes stop has cost
    the events since as much as the last build (:meth:`_lingers`).  A reader of a
    generation older than the held one walks pages (the view cannot go back).

    With :attr:`background` set (builds a base view in a snapshot of its own), a fold runs
    in a thread (:meth:`_fold`, letting the interpreter lock go every :data:`PAUSE_EVERY`
    c-nodes) while matches go on with the held view and its growing delta (exact, slower);
    a delta :data:`BEHIND` times past its bound, or a log that cannot say, folds at once.

    A view too big for that share is not given up when :attr:`lean` is set (by the engine:
    :meth:`betree.packed.ranging.Ranging.lean`): stripped to its interval matcher, or built
    so from the pages (``make``: :mod:`betree.packed.leanbuild`), when cheaper an event than
    the walks were, and held if within :data:`LEAN_TIMES` the page cache's budget, charged
    apart (the pages keep their whole budget: matching reads none); else whole (``whole``)
    within as much, the share taken."""

    def __init__(self, cache: PageCache, after: int = FLAT_AFTER) -> None:
        self.cache = cache
        self.after = after
        self._lock = threading.Lock()
        self._held: tuple[int, Based] | None = None  # (generation, its view and delta)
        self._walks = 0  # events walked since the last view
        self._walk_s = 0.0  # and the seconds they took (:meth:`walked`)
        #: the seconds of walks after which a view is built, however few the events
        self.walk_seconds = WALK_SECONDS
        #: the bytes a whole view may take from the page cache (tests shrink it)
        self.share = cache.budget - cache.budget // 4
        self._too_big = False  # a view of this store did not fit: not built again
        #: views built (for tests and diagnostics: a fold counts one)
        self.builds = 0
        self._build_s = 0.0  # what the last view took to build
        self._quiet = 0.0  # estimated seconds the held delta has cost since the last write
        #: builds a base view in a snapshot of its own: (its generation, it); None: fold inline
        self.background: Callable[[], tuple[int, Based]] | None = None
        self._folding: threading.Thread | None = None
        self._base_gen = -1  # the generation of the held view's base
        #: strips a view too big for the share to its interval matcher (None: cannot)
        self.lean: Lean | None = None
        #: called with the view replaced and its replacement (:mod:`betree.packed.carry`)
        self.rebuilt: Callable[[FlatTree, Based], None] = lambda old, based: None

    def _lingers(self, based: Based, events: int) -> bool:
        """Whether the held view's delta, left over once writes stopped, has cost the
        events since the last write as much as a new view (the ski-rental rule again:
        then it is folded; estimated at 1 µs an event per added clause and newer atom)."""
        delta = based.delta
        if not delta.clauses and not delta.removed:
            return False
        self._quiet += events * 1e-6 * (delta.clauses + len(delta.new_atoms) + 1)
        return self._quiet > self._build_s

    def held(self, gen: int) -> Based | None:
        """The view of generation ``gen`` if one is held (none is built for the asking)."""
        held = self._held
        return held[1] if held is not None and held[0] == gen else None

    def get(
        self,
        gen: int,
        make: Callable[[], Based],
        clauses: int,
        events: int = 1,
        catch_up: Callable[[Based], Based | None] | None = None,
        predicates: Callable[[], int] | None = None,
        whole: Callable[[], Based | None] | None = None,
    ) -> Based | None:
        """The view of generation ``gen`` for ``events`` more events, or None: walk the
        pages.  ``make`` builds one when it is due and its ``clauses`` and its PB+trees'
        ``predicates()`` (asked only then) may fit: an id of 4 bytes each at least, so that
        a dense store (an atom a range end: ~850 bytes a clause) is not read whole for a
        view then dropped; ``catch_up`` brings the held one to ``gen`` (None: it cannot,
        rebuild); ``whole`` builds a whole view where ``make``'s lean one was not worth
        holding (None: estimated too big)."""
        based = self.held(gen)
        if based is not None and not self._lingers(based, events):
            return based
        with self._lock:
            held = self._held
            old = held[1].view if held is not None else None  # (its rebuild takes over)
            if held is not None:
                if gen < held[0]:
                    return None
                if gen > held[0]:
                    newer = catch_up(held[1]) if catch_up is not None else None
                    if newer is not None and (not newer.delta.due() or self._behind(newer)):
                        self._held, self._quiet = (gen, newer), 0.0
                        return newer
                elif not self._lingers(held[1], 0) or self._behind(held[1]):
                    return held[1]
                self.drop()  # folded: rebuilt now
                self._walks = self.after
            self._walks += events
            slow = self._walk_s >= self.walk_seconds
            if (self._walks <= self.after and not slow) or self._too_big:
                return None
            least = clauses * LEAST_BYTES  # (a dense store: an id of 4 bytes an atom too)
            fits = least <= self.share and (
                predicates is None or least + 4 * predicates() <= self.share
            )
            lean = self.lean is not None and self.lean.worth(clauses)
            if not fits and not lean:
                return None
            reserved = fits and self.cache.reserve(self.share)
            if not reserved and not lean:
                self._too_big = True
                return None
            # no page read while the view lasts: all go, memory back before the build
            self.cache.clear()
            return_freed_memory(cycles=True)
            began = time.perf_counter()
            made = make()
            lean_made = made.view.ranged is not None  # (built lean from the pages)
            based = self._fit(made, reserved)
            del made  # (not held through the whole build)
            if based is None and lean_made and whole is not None:  # (the whole, then?)
                full = whole()  # (held whole as in _fit: its intervals not tried again)
                if full is not None and full.view.nbytes <= LEAN_TIMES * self.cache.budget:
                    based = full if self.cache.reserve(self.share) else None
            self._build_s = time.perf_counter() - began
            self.builds += 1
            return_freed_memory()
            if based is None:
                self._too_big = True
                return None
            if old is not None:
                self.rebuilt(old, based)
            self._held, self._base_gen = (gen, based), gen
            return based

    def _fit(self, based: Based, reserved: bool, nbytes: int | None = None) -> Based | None:
        """``based`` if its whole view fits the page cache's share (``reserved``: taken),
        else, with :attr:`lean`, stripped to the interval matcher (or built so from the
        pages) if kept within :data:`LEAN_TIMES` the cache's budget; else None.
        ``nbytes``: the view's, counted already (by a fold, in its thread)."""
        if not reserved or based.view.ranged is not None:
            fits = False
        else:  # (counting costs: rich 50K, ~50 ms for the PB+trees' arrays)
            fits = (based.view.nbytes if nbytes is None else nbytes) <= self.share
        if fits:
            return based
        if reserved:
            self.cache.release(self.share)
        slim = self.lean.lean(based, LEAN_TIMES * self.cache.budget) if self.lean else None
        if slim is None and self.lean and reserved and based.view.ranged is None:
            # (its intervals no cheaper than walks: held whole, the share taken)
            nbytes = based.view.nbytes if nbytes is None else nbytes
            if nbytes <= LEAN_TIMES * self.cache.budget and self.cache.reserve(self.share):
                return based
        return_freed_memory()
        return slim

    def walked(self, seconds: float) -> None:
        """Count the seconds an event (or batch) took walking pages."""
        self._walk_s += seconds

    def _behind(self, based: Based) -> bool:
        """Whether ``based`` may be matched while a fold runs in the background (one is
        started if none runs)."""
        if self.background is None or based.delta.clauses > BEHIND * delta_bounds.FOLD_CLAUSES:
            return False
        if len(based.delta.new_atoms) > BEHIND * delta_bounds.FOLD_ATOMS:
            return False
        if self._folding is None:
            self._folding = threading.Thread(target=self._fold, name="bexdb-fold", daemon=True)
            self._folding.start()
        return True

    def _fold(self) -> None:
        """The background fold (a thread), which takes its view in itself (the keys are
        chosen in ``background``, the bytes counted here), so that the matching thread
        does none of it, nor lets the replaced view go (rich 50K, the first match after a
        fold: 44-56 ms of that thread's CPU before, 2.6-4.3 ms after)."""
        assert self.background is not None
        began = time.perf_counter()
        try:
            gen, based = self.background()
            nbytes = based.view.nbytes
        except Exception:  # (a store closed or replaced meanwhile): fold inline from now on
            self.background = None
            with self._lock:
                self._folding = None
            return
        with self._lock:
            old = self._held  # (the replaced view let go below: in this thread, unlocked)
            self._take_in(gen, based, nbytes)
            self._folding = None
            self._build_s = time.perf_counter() - began
        del old

    def _take_in(self, gen: int, based: Based, nbytes: int) -> None:
        """A view folded in the background, of ``nbytes``, becomes the held one (the caller
        holds the lock), if one is held, older than it, and it fits."""
        if self._held is None or gen <= self._base_gen:
            return
        lean = self._held[1].view.ranged is not None  # (its share not reserved: intervals)
        fitted = self._fit(based, not lean, nbytes)
        if fitted is None:
            self.background = None
            if not lean:  # (_fit gave the held view's share back)
                self.cache.reserve(self.share)
            return
        self.rebuilt(self._held[1].view, fitted)
        self._held, self._base_gen, self._quiet = (gen, fitted), gen, 0.0
        self.builds += 1

    def wait(self) -> None:
        """Until no fold runs in the background (before the store closes; tests)."""
        folding = self._folding
        if folding is not None:
            folding.join()

    def held_gen(self) -> int:
        """The generation of the view held (-1: none)."""
        held = self._held
        return held[0] if held is not None else -1

    def advance(self, gen: int, catch_up: Callable[[Based], Based | None]) -> None:
        """The held view caught up to ``gen`` by ``catch_up`` (as :meth:`get` would: a delta
        due for folding is held while a fold runs in the background, started now), unless
        the log cannot say or the delta is too far past its bound: then :meth:`get` does
        it (and folds) at the next match.  Never builds a view."""
        with self._lock:
            held = self._held
            if held is None or gen <= held[0]:
                return
            newer = catch_up(held[1])
            if newer is not None and (not newer.delta.due() or self._behind(newer)):
                self._held, self._quiet = (gen, newer), 0.0

    def drop(self) -> None:
        """Forget the view, giving its share back to the page cache (a lean one took none)."""
        if self._held is not None:
            if self._held[1].view.ranged is None:
                self.cache.release(self.share)
            self._held = None
        self._walks, self._walk_s = 0, 0.0

    def describe(self) -> dict[str, Any]:
        """Whether a view is held, its generation, bytes, and its delta's added clauses
        and removed ids (for tests and diagnostics)."""
        held = self._held
        if held is None:
            return {"held": False, "gen": -1, "bytes": 0, "added": 0, "removed": 0}
        gen, based = held
        delta = based.delta
        return {
            "held": True,
            "gen": gen,
            "bytes": based.view.nbytes,
            "added": delta.clauses,
            "removed": len(delta.removed),
        }
