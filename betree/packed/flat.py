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
later ones with a delta (:mod:`betree.packed.delta`); :class:`betree.packed.held.FlatSlot`
decides when one is worth building and holds it within the page-cache budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from betree.disk import catalog, pending
from betree.disk.nodes import CNode, LNodePage, id_array
from betree.disk.tree import BETree
from betree.matching.direct import DirectAtoms
from betree.matching.snapshot import Records
from betree.packed import keys
from betree.packed.delta import Based, Delta
from betree.packed.numbering import Numbered
from betree.packed.reach import reach, tiers
from betree.packed.slots import ALL, Slots
from pbtree.view import SearchView, ranges
from storage.store import Store

#: atoms per row: a row's truths, 8 bools, read as one uint64
WIDTH = 8
_GRID_MAX = (1 << 64) - 1
#: the fewest bytes a view takes a clause (an 8-byte id, a 4-byte row start, one row of
#: 2-byte atom ids): a store whose clauses cannot fit is not read for nothing
LEAST_BYTES = 8 + 4 + 2 * WIDTH
#: c-nodes a build visits between calls of its ``pause`` (:func:`build`)
PAUSE_EVERY = 32
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
        truths = sat.take(atoms).view(np.uint64).ravel() == ALL
        if self.row_clause is not None:  # a clause holds when each of its rows does
            truths = np.logical_and.reduceat(truths, starts)
        return self._distinct(clauses[truths])

    def _distinct(self, hits: np.ndarray, unsorted: bool = False) -> np.ndarray:
        """The external ids of the clauses ``hits`` (ascending unless ``unsorted``), each
        subscription once (by sid: its clauses share its id, so any one of them serves),
        in clause order or, where a subscription has several clauses here, in sid order."""
        if self.sids is not None and len(hits) > 1:  # (np.unique's first of each, unwrapped)
            sid = self.sids.take(hits)
            by = np.argsort(sid)  # (not stable: rich 100K, ~900 ids, 90 -> 15 µs)
            sid = sid.take(by)
            first = np.ones(len(sid), dtype=bool)
            np.not_equal(sid[1:], sid[:-1], out=first[1:])
            hits = hits.take(by[first])
        elif unsorted and len(hits) > 1:
            hits = np.sort(hits)
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
            slots = Slots(self.searches, atoms, by_key, grouped, self.rows, self.row_at, other)
            self.slots = slots
        return slots

    def match_slotted(self, sat: np.ndarray, slots: Slots) -> tuple[np.ndarray, int]:
        """:meth:`match` by the keys (:meth:`Slots.held`), ``sat`` the event's truths by slot."""
        hits, candidates = slots.held(sat)
        return self._distinct(hits, True), candidates

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
        ok = truths.ravel() == ALL
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
    tree: BETree,
    pbtrees: Mapping[str, dict[str, Any]],
    pause: Callable[[], None] | None = None,
    types: Mapping[str, str] | None = None,
    memo: pending.Chosen | None = None,
) -> FlatTree:
    """The view of ``tree`` and of the PB+trees whose records ``pbtrees`` holds by
    attribute: every page read once (the tree's in preorder), past the page cache (which
    the view replaces).  ``pause``: called every :data:`PAUSE_EVERY` c-nodes (a build in
    a thread of its own lets matching threads have the interpreter there).  With
    ``types`` (each attribute's grid kind), the root's pending clauses (the area of
    :mod:`betree.disk.pending`) are grouped by a place each under nodes of their own
    below the root (:func:`betree.disk.pending.groups`, ``memo`` what it read before): an
    event checks only the groups it reaches, not every clause of the area."""
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
        chain = list(lnode_chain(tree, node.lnode))
        made: list[tuple[str, int, int, int]] = []
        if i == 0 and types is not None and tree.pending is not None and chain:  # the area
            chain, made = _grouped(tree, chain, types, pending.Chosen() if memo is None else memo)
        for k, (c, e, n, a) in enumerate(chain):
            cids.append(c)
            exts.append(e)
            lens.append(n)
            atoms.append(a)
            clauses += len(e)
            if made:  # the root's own (placed, placeless), then each group's: a node each
                clause_at.append(clauses)
                if k:
                    gattr, lo, hi, _ = made[k - 1]
                    node_attr.append(attrs.setdefault(gattr, len(attrs)))
                    node_lo.append(lo)
                    node_hi.append(hi)
                    node_end.append(len(node_attr))
        if not made:
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


def _grouped(
    tree: BETree,
    chain: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    types: Mapping[str, str],
    memo: pending.Chosen,
) -> tuple[
    list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], list[tuple[str, int, int, int]]
]:
    """The root's l-node ``chain`` (:func:`lnode_chain`) as :func:`betree.disk.pending.groups`
    orders it: the clauses staying in the root, then each group's, one chunk each (the
    first may be empty), and the groups."""
    cid = np.concatenate([c for c, _, _, _ in chain])
    ext = np.concatenate([e for _, e, _, _ in chain])
    n = np.concatenate([x for _, _, x, _ in chain])
    a = np.concatenate([x for _, _, _, x in chain])
    assert tree.pending is not None
    order, made = pending.groups(tree.txn, tree.pending, cid, n, a, types, memo)
    starts = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=starts[1:])
    cuts = np.cumsum([len(order) - sum(g[3] for g in made)] + [g[3] for g in made])
    chunks = []
    at = 0
    for cut in cuts.tolist():
        part = order[at:cut]
        rows = ranges(starts[part], starts[part + 1])
        chunks.append((cid.take(part), ext.take(part), n.take(part), a.take(rows)))
        at = cut
    return chunks, made


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


def fresh_base(
    store: Store,
    records: Records,
    types: Mapping[str, str] | None = None,
    memo: pending.Chosen | None = None,
) -> tuple[int, Based]:
    """A base view of ``store`` in a snapshot of its own, and its generation (a fold in the
    background: :class:`betree.packed.held.FlatSlot`); its per-attribute records read with
    ``records``, the engine's (kept from read to read: what did not change is not decoded
    again); ``types`` and ``memo`` as :func:`build`'s."""
    with store.read() as txn:
        rec = catalog.root_record(txn)
        trees, grouped = records.read(txn)
        for atoms in grouped.values():  # (what their first match would make: made here)
            atoms.prepare()
        view = build(BETree(txn, rec), trees, lambda: time.sleep(0), types, memo)
        return txn.gen, Based(view, grouped, rec["next_atom"], Delta.empty(rec))
