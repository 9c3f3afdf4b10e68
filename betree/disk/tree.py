"""The BE-Tree (Sadoghi & Jacobsen, SIGMOD 2011) over clauses, with its nodes on disk pages.

A clause (one conjunction of a subscription's DNF) is stored once, in the l-node of the
c-node that the insertion algorithm (Alg. 3-4) routes it to.  Overflowing l-nodes trigger
the two-phase space cutting: space partitioning (Alg. 5: a new p-node on the most
popular unused attribute with at least ``min_size`` clauses, else an extended l-node) and
space clustering (Alg. 6: grid halving of the bucket; the forced split rule splits a
non-atomic leaf bucket before its c-node is partitioned).  Deletion removes the clause,
merges underflowing leaf buckets into an open parent (the merge rule), and removes empty
buckets and p-nodes upwards.

A clause's *places* say where it may be clustered: for each attribute on which the
clause is false whenever the attribute is undefined, the grid interval (betree.disk.grid) its
atoms on that attribute allow.  Only those attributes may carry it under a p-node.

Self-adjustment (:mod:`betree.disk.adjust`, the paper's sec. 5) reaches in at a few points, all
inert unless asked for: ``match`` fills an in-memory collector when given one; routing
and partitioning weigh each attribute's popularity by ``1 - feedback[attr]`` (the
fraction of its clauses an event checks, measured while matching; absent: 0, the
paper's optimistic start); :meth:`BETree.evict` / :meth:`BETree.evict_pnode` empty a
node for re-insertion and :meth:`BETree.cut` cuts a hot l-node that does not overflow;
and with ``dissolve`` a p-node whose clauses fall below ``min_size`` by deletion is
emptied and its clauses re-inserted (l-node underflow).  No page layout changes: the
statistics live in records (see :mod:`betree.disk.adjust`).

Costs: matching visits the c-nodes on the paths an event's values select (the p-nodes of
attributes the event defines, the buckets enclosing each value), and checks each visited
l-node page with one vectorised numpy pass.  Insertion follows one path; a split or
partition rewrites the affected l-nodes once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from betree.disk.catalog import ADJ, clause_id
from betree.disk.grid import halves
from betree.disk.nodes import CNode, Entry, LNodePage, PageArrays
from storage import codec
from storage.errors import CorruptPage
from storage.txn import ReadTxn, WriteTxn

if TYPE_CHECKING:
    from betree.disk.adjust import Collector

Places = dict[str, tuple[int, int]]
DEFAULTS = {"max_cap": 64, "min_size": 4}


class BETree:
    """The tree of one store, bound to a transaction.

    ``rec`` is the index's root record (space, root page, ``max_cap``, ``min_size``);
    ``places`` returns a stored clause's places; ``hint`` an attribute's hint range;
    ``moved`` records a clause's new home c-node; ``prefetch`` is told the clauses
    whose places a split is about to ask for (to read them in one go); ``feedback``
    maps an attribute to the fraction of its clauses an event checks (self-adjustment;
    missing means 0); ``dissolve`` re-inserts the clauses of a p-node that deletion shrinks below
    ``min_size``.
    """

    def __init__(
        self,
        txn: ReadTxn,
        rec: dict[str, Any],
        places: Callable[[Entry], Places] | None = None,
        hint: Callable[[str], tuple[int, int]] | None = None,
        moved: Callable[[int, int], None] | None = None,
        prefetch: Callable[[list[Entry]], None] | None = None,
        feedback: Mapping[str, float] | None = None,
        dissolve: bool = False,
    ) -> None:
        self.txn = txn
        self.space: int = rec["space"]
        self.root: int = rec["root"]
        self.max_cap: int = rec["max_cap"]
        self.min_size: int = rec["min_size"]
        #: the first clause id of the pending area (betree.disk.pending), None: no area
        start = rec.get("pending_from")
        self.pending: int | None = None if start is None else clause_id(int(start), 0)
        self._places = places
        self._hint = hint
        self._moved = moved
        self._prefetch = prefetch
        self._feedback = feedback or {}
        self._dissolve = dissolve
        self.freed: set[int] = set()  # c-nodes freed by this object's writes
        # a cut stops at half an l-node: below that, the pages a deeper directory adds
        # cost an event more than the candidates it saves (bench adapt)
        self.cut_floor = max(self.min_size, self.max_cap // 2)
        self.pages_read = 0

    def detach(self) -> None:
        """Let go of the callbacks given (a writer's bound methods: the writer holds this
        tree, so they make a reference cycle, :meth:`betree.disk.writer.Writer.close`)."""
        self._places = self._moved = self._prefetch = None

    @staticmethod
    def create(txn: WriteTxn, settings: dict[str, int]) -> dict[str, Any]:
        """A new empty tree: a root c-node with an empty l-node.  Returns the record part."""
        space = txn.new_space()
        root = txn.alloc()
        cap = settings["max_cap"]
        txn.put_new(space, root, CNode(root, None, False, 0, 0, 0, cap))
        return {"space": space, "root": root, **{k: settings[k] for k in DEFAULTS}}

    # -- pages ---------------------------------------------------------------------------

    def node(self, page: int) -> CNode:
        self.pages_read += 1
        return self.txn.load(self.space, page, CNode)

    def _mut(self, page: int) -> CNode:
        return self.txn.load_mut(self.space, page, CNode)  # type: ignore[attr-defined,no-any-return]

    def _lpage(self, page: int) -> LNodePage:
        self.pages_read += 1
        return self.txn.load(self.space, page, LNodePage)

    def _writer(self) -> WriteTxn:
        assert isinstance(self.txn, WriteTxn)
        return self.txn

    def lnode_pages(self, node: CNode) -> Iterator[LNodePage]:
        """The pages of a c-node's l-node, in chain order."""
        page = node.lnode
        while page:
            lpage = self._lpage(page)
            yield lpage
            page = lpage.next

    def entries(self, node: CNode) -> list[Entry]:
        """Every clause in a c-node's l-node."""
        out: list[Entry] = []
        for lpage in self.lnode_pages(node):
            out.extend(lpage.clauses())
        return out

    # -- matching (Alg. 1-2) -------------------------------------------------------------

    def match(
        self,
        coords: dict[str, int],
        sat: np.ndarray,
        out: dict[int, Any],
        stats: Collector | None = None,
    ) -> int:
        """Add ``sid -> external id`` of every clause satisfied under ``sat`` to ``out``.

        ``coords`` maps each attribute the event defines to its grid coordinate; ``sat``
        is indexed by atom id.  Returns the number of candidate clauses checked.  With
        ``stats``, the candidates, false candidates and discarded predicate evaluations
        of every visited l-node are added to it (in memory; nothing is written).
        """
        pages: list[PageArrays] = []
        owners: list[int] | None = None if stats is None else []
        stack = [self.node(self.root)]
        while stack:
            node = stack.pop()
            page = node.lnode
            while page:
                lpage = self._lpage(page)
                pages.append(lpage.arrays())
                if owners is not None:
                    owners.append(node.page)
                page = lpage.next
            if not node.pdir:
                continue
            pmap = node.pmap
            if len(pmap) < len(coords):
                pairs = [(attr, top) for attr, top in pmap.items() if attr in coords]
            else:
                pairs = [(attr, pmap[attr]) for attr in coords if attr in pmap]
            for attr, top in pairs:
                x = coords[attr]
                bucket = self.node(top)
                while True:  # SearchCDir: this bucket, then the child enclosing x
                    stack.append(bucket)
                    if not bucket.left:
                        break
                    child = self.node(bucket.left)
                    if not child.lo <= x <= child.hi:
                        child = self.node(bucket.right)
                        if not child.lo <= x <= child.hi:
                            break
                    bucket = child
        return _check_pages(pages, sat, out, stats, owners)

    # -- insertion (Alg. 3-6) ------------------------------------------------------------

    def insert(self, entry: Entry, places: Places) -> None:
        """Store a clause; its home (and every later move) is reported to ``moved``."""
        page, used = self._route(self.root, places, set(), +1)
        self._append(page, [entry])
        self._record_move([entry], page)
        self._split_if_over(page, used)

    def insert_many(self, items: list[tuple[Entry, Places]]) -> None:
        """Store many clauses: each routed to the c-node :meth:`insert` would route it to,
        taking them in order (the scores each leaves on its path seen by the next), then
        each l-node's share appended at once and each overflowing node cut once, however
        many of them it took.

        The tree differs from one :meth:`insert` per clause only in where the splits fall
        (a node overflowing by several clauses is cut once, with all of them); splits
        free no c-node, so every routed page stays.  Routing goes node by node
        (:meth:`_route_together`), not clause by clause; the appends and cuts in the
        order the l-nodes were first reached.
        """
        routed = self._route_together([places for _, places in items])
        routed.sort(key=lambda group: group[1][0])  # (first reached first: as one by one)
        for page, at, _ in routed:
            entries = [items[k][0] for k in at]
            self._append(page, entries)
            self._record_move(entries, page)
        for page, _, used in routed:
            self._split_if_over(page, used)

    def _route_together(self, places: list[Places]) -> list[tuple[int, list[int], set[str]]]:
        """Where :meth:`_route` from the root takes each of many clauses, one after
        another (each adding to the scores of its path): ``(c-node page, the clauses'
        positions in order, the attributes used on its path)`` per c-node reached.

        Node by node: the clauses through a c-node are routed there together, in their
        order, each choosing its p-node by the scores the earlier ones left (those of
        one c-node change only by the clauses through it, so each chooses as one by one),
        the node copied and its scores written once, and each c-directory descended once
        per p-node and span (the directories do not change while routing).  Cost: per
        clause and c-node a few dict lookups, not a descent's calls; per c-node met one
        copy.  1M BEGen: ~6 nodes a clause (a p-node's directory ~3 buckets deep)."""
        feedback = self._feedback
        out: list[tuple[int, list[int], set[str]]] = []
        if not places:
            return out
        nodes: dict[int, CNode] = {}
        work: list[tuple[int, list[int], set[str]]] = [(self.root, list(range(len(places))), set())]
        while work:
            page, at, used = work.pop()
            node = self._met(page, nodes)
            pdir = node.pdir
            allowed = {attr: k for attr, k in node.slots().items() if attr not in used}
            if not allowed:
                out.append((page, at, used))
                continue
            raw = [entry[2] for entry in pdir]  # the scores as the clauses so far left them
            weight = [1.0 - feedback.get(entry[0], 0.0) for entry in pdir] if feedback else None
            staying: list[int] = []
            onward: dict[tuple[int, tuple[int, int]], list[int]] = {}
            few = list(allowed.items())  # (in slot order: the p-directory's)
            for k in at:
                clause = places[k]
                best, top_score = -1, 0.0
                # the candidates in slot order, the first best kept: from the node's few
                # attributes where it has fewer than the clause (below the root: no sort)
                if len(few) < len(clause):
                    slots = [slot for attr, slot in few if attr in clause]
                else:
                    slots = sorted(allowed[attr] for attr in clause if attr in allowed)
                for slot in slots:
                    score = raw[slot] if weight is None else raw[slot] * weight[slot]
                    if best < 0 or score > top_score:
                        best, top_score = slot, score
                if best < 0:
                    staying.append(k)
                    continue
                raw[best] += 1
                key = (best, clause[pdir[best][0]])
                group = onward.get(key)
                if group is None:
                    onward[key] = [k]
                else:
                    group.append(k)
            if staying:
                out.append((page, staying, used))
            if not onward:
                continue
            owner = nodes[page] = self._mut(page)
            for slot, entry in enumerate(pdir):
                if raw[slot] != entry[2]:
                    owner.add_score(entry[0], raw[slot] - entry[2])
            below: dict[int, tuple[list[int], set[str]]] = {}
            for (slot, span), group in onward.items():
                attr, top, _ = pdir[slot]
                to = self._descend_cdir(top, span, nodes)
                if to in below:
                    below[to][0].extend(group)
                else:
                    below[to] = (group, used | {attr})
            for to, (group, path) in below.items():
                group.sort()  # (spans of one p-node meet in a bucket: back in order)
                work.append((to, group, path))
        return out

    def defer(self, entries: list[Entry]) -> None:
        """Store clauses in the root's l-node unrouted, however far past its capacity: the
        pending area of :mod:`betree.disk.pending` (every match checks the root's l-node).
        Cost: the root's head page and the fresh pages put in front of it."""
        self._append(self.root, entries)
        self._record_move(entries, self.root)

    def take_pending(self, first: int) -> list[Entry]:
        """Take the clauses with ids from ``first`` on out of the root's l-node (the
        pending area) and return them; the rest stay, packed, in a fitting capacity."""
        entries = self.entries(self.node(self.root))
        taken = [e for e in entries if e[0] >= first]
        if taken:
            self._rewrite(self.root, [e for e in entries if e[0] < first])
            self._update_cap(self.root)
        return taken

    def _split_if_over(self, page: int, used: set[str]) -> None:
        """Cut an l-node past its capacity: space partitioning where its node has no
        attribute yet, space clustering otherwise (the paper's Alg. 4-5)."""
        node = self.node(page)
        if node.size > node.cap:
            if node.attr is None:
                self._partition(page, used)
            else:
                self._cluster(page, used)

    def _route(self, page: int, places: Places, used: set[str], delta: int) -> tuple[int, set[str]]:
        """Follow Alg. 3-4 from ``page`` to the c-node whose l-node takes a clause."""
        feedback = self._feedback
        while True:
            node = self.node(page)
            pdir = node.pdir
            if len(places) < len(pdir):  # the clause's few attributes, looked up
                slots = node.slots()
                found = sorted(slots[a] for a in places if a in slots and a not in used)
                candidates = [pdir[k] for k in found]  # (in p-directory order, as below)
            else:
                candidates = [e for e in pdir if e[0] in places and e[0] not in used]
            best = None
            for attr, top, score in candidates:
                if feedback:  # popularity less the expected false candidates (sec. 5)
                    score = score * (1.0 - feedback.get(attr, 0.0))
                if best is None or score > best[2]:
                    best = (attr, top, score)
            if best is None:
                return page, used
            attr, top, _ = best
            self._mut(page).add_score(attr, delta)
            used = used | {attr}
            page = self._descend_cdir(top, places[attr])

    def _met(self, page: int, nodes: dict[int, CNode] | None) -> CNode:
        if nodes is None:
            return self.node(page)
        node = nodes.get(page)
        if node is None:
            node = nodes[page] = self.node(page)
        return node

    def _descend_cdir(
        self, top: int, span: tuple[int, int], nodes: dict[int, CNode] | None = None
    ) -> int:
        """InsertCDir (Alg. 4): the smallest existing bucket enclosing ``span``.

        A bucket's children are its :func:`~betree.disk.grid.halves` (``check()`` holds
        every tree to it), so only the child descended into is read."""
        page = top
        lo, hi = span
        while True:
            bucket = self._met(page, nodes)
            if not bucket.left:
                return page
            (llo, lhi), (rlo, rhi) = halves(bucket.lo, bucket.hi)
            if llo <= lo and hi <= lhi:
                page = bucket.left
            elif rlo <= lo and hi <= rhi:
                page = bucket.right
            else:
                return page

    def _append(self, page: int, entries: list[Entry]) -> None:
        """Add clauses to a c-node's l-node, filling its first page, then putting fresh
        pages in front: one page touched however long the chain (no walk to its end)."""
        if not entries:
            return
        txn = self._writer()
        node = self._mut(page)
        head = txn.load_mut(self.space, node.lnode, LNodePage) if node.lnode else None
        for entry in entries:
            if head is None or not head.has_room(entry):
                new = txn.alloc()
                head = LNodePage(new, node.lnode)
                txn.put_new(self.space, new, head)
                node.lnode = new
            head.add(entry)
        node.size += len(entries)

    def _rewrite(self, page: int, entries: list[Entry]) -> None:
        """Replace a c-node's l-node by tightly packed pages holding ``entries``."""
        txn = self._writer()
        node = self._mut(page)
        cur = node.lnode
        while cur:
            nxt = self.txn.load(self.space, cur, LNodePage).next
            txn.free(self.space, cur)
            cur = nxt
        node.lnode = 0
        node.size = 0
        self._append(page, entries)

    def _places_of(self, entry: Entry, cache: dict[int, Places]) -> Places:
        cid = entry[0]
        if cid not in cache:
            assert self._places is not None
            cache[cid] = self._places(entry)
        return cache[cid]

    def _record_move(self, entries: list[Entry], page: int) -> None:
        if self._moved is not None:
            for cid, _, _ in entries:
                self._moved(cid, page)

    def _partition(self, page: int, used: set[str], force: bool = False) -> None:
        """SpacePartitioning (Alg. 5) of an overflowing c-node (``force``: once anyway)."""
        txn = self._writer()
        cache: dict[int, Places] = {}
        node = self.node(page)
        while node.size > node.cap or force:
            cutting, force = force, False
            entries = self.entries(node)
            if self._prefetch is not None:
                self._prefetch(entries)
            taken = used | set(node.pmap)
            places = [self._places_of(entry, cache) for entry in entries]
            counts = Counter(chain.from_iterable(places))  # (a places dict: its attributes)
            for attr in taken.intersection(counts):
                del counts[attr]
            # Rank(l_i) = Gain - Loss: the clauses that would move, less the false
            # candidates matching feedback expects of them (0 until measured: popularity)
            feedback = self._feedback
            eligible = [
                (n * (1.0 - feedback.get(attr, 0.0)), n, attr)
                for attr, n in counts.items()
                if n >= self.min_size
            ]
            if not eligible:
                if not cutting:
                    self._mut(page).cap += self.max_cap  # an extended l-node
                break
            attr = max(eligible)[2]
            assert self._hint is not None
            lo, hi = self._hint(attr)
            top = txn.alloc()
            txn.put_new(self.space, top, CNode(top, attr, True, lo, hi, page, self.max_cap))
            moving = [e for e, p in zip(entries, places, strict=True) if attr in p]
            staying = [e for e, p in zip(entries, places, strict=True) if attr not in p]
            node = self._mut(page)
            node.add_pnode(attr, top)
            node.add_score(attr, len(moving))
            self._rewrite(page, staying)
            self._append(top, moving)
            self._record_move(moving, top)
            self._cluster(top, used | {attr}, cache, cutting)
            node = self.node(page)
        self._update_cap(page)

    def _cluster(
        self,
        page: int,
        used: set[str],
        cache: dict[int, Places] | None = None,
        force: bool = False,
    ) -> None:
        """SpaceClustering (Alg. 6): split a leaf bucket in halves, else partition.

        ``force`` cuts a bucket that does not overflow but holds ``cut_floor`` clauses (a
        hot l-node, see :meth:`cut`), and the buckets that cut fills, as long as a split
        moves any clause.
        """
        cache = {} if cache is None else cache
        bucket = self.node(page)
        if bucket.size <= bucket.cap and not (force and bucket.size >= self.cut_floor):
            return
        if bucket.left or bucket.atomic:
            self._partition(page, used, force)
            return
        txn = self._writer()
        attr = bucket.attr
        assert attr is not None
        (llo, lhi), (rlo, rhi) = halves(bucket.lo, bucket.hi)
        staying: list[Entry] = []
        to_left: list[Entry] = []
        to_right: list[Entry] = []
        entries = self.entries(bucket)
        if self._prefetch is not None:
            self._prefetch(entries)
        for entry in entries:
            lo, hi = self._places_of(entry, cache)[attr]
            if llo <= lo and hi <= lhi:
                to_left.append(entry)
            elif rlo <= lo and hi <= rhi:
                to_right.append(entry)
            else:
                staying.append(entry)
        if bucket.size <= bucket.cap and not (to_left or to_right):
            return  # a cut that would move nothing
        left, right = txn.alloc(), txn.alloc()
        txn.put_new(self.space, left, CNode(left, attr, False, llo, lhi, page, self.max_cap))
        txn.put_new(self.space, right, CNode(right, attr, False, rlo, rhi, page, self.max_cap))
        bucket = self._mut(page)
        bucket.left, bucket.right = left, right
        self._rewrite(page, staying)
        self._append(left, to_left)
        self._append(right, to_right)
        self._record_move(to_left, left)
        self._record_move(to_right, right)
        self._partition(page, used)
        self._cluster(left, used, cache, force)
        self._cluster(right, used, cache, force)
        self._update_cap(page)

    def _update_cap(self, page: int) -> None:
        node = self.node(page)
        cap = -(-node.size // self.max_cap) * self.max_cap if node.size else self.max_cap
        if cap != node.cap:
            self._mut(page).cap = cap

    # -- deletion ------------------------------------------------------------------------

    def remove(self, cid: int, home: int) -> bool:
        """Remove a clause from its home c-node; then merge and prune upwards."""
        txn = self._writer()
        node = self._mut(home)
        cur, prev = node.lnode, None
        while cur:
            lpage = txn.load(self.space, cur, LNodePage)
            if lpage.holds(cid):
                lpage = txn.load_mut(self.space, cur, LNodePage)
                lpage.remove(cid)
                if not len(lpage):
                    if prev is None:
                        node.lnode = lpage.next
                    else:
                        txn.load_mut(self.space, prev, LNodePage).next = lpage.next
                    txn.free(self.space, cur)
                node.size -= 1
                self._after_remove(home)
                return True
            prev, cur = cur, lpage.next
        return False

    def _after_remove(self, page: int) -> None:
        """Fix scores on the path, then merge or drop what the removal emptied.

        With ``dissolve``, the outermost p-node left with fewer than ``min_size`` clauses
        (an underflowing l-node of the paper's sec. 5) is emptied and its clauses re-inserted
        from the root, where more popular p-nodes or the owner's l-node take them.
        """
        low = self._unscore(page, 1)
        self._prune(page)
        if low is not None and low not in self.freed:
            self.reinsert(self.evict_pnode(low))

    def _unscore(self, page: int, n: int) -> int | None:
        """Take ``n`` clauses off the score of every p-node above ``page``.

        Returns the outermost top bucket whose p-node now scores below ``min_size`` (only
        with ``dissolve``), else None.
        """
        low = None
        node = self.node(page)
        while node.attr is not None:  # walk up to the owner of each c-directory
            parent = self.node(node.parent)
            if node.top:
                owner = self._mut(parent.page)
                owner.add_score(node.attr, -n)
                if self._dissolve and _score(owner, node.attr) < self.min_size:
                    low = node.page
            node = parent
        return low

    def _free_node(self, page: int) -> None:
        """Free a c-node page and drop its adjustment window record."""
        txn = self._writer()
        txn.free(self.space, page)
        txn.delete(ADJ, codec.encode_u64(page))  # freeing a c-node drops its window
        self.freed.add(page)

    # -- recycling (self-adjustment) ---------------------------------------------------------

    def evict(self, page: int) -> list[Entry]:
        """Empty a c-node's l-node (scores, capacity and merges fixed); return its clauses.

        The caller re-inserts them (:meth:`reinsert`); until then the tree is consistent
        without them.  The capacity returns to ``max_cap``, so an extended l-node gets a
        fresh chance to be partitioned on the attributes that rank best now.
        """
        entries = self.entries(self.node(page))
        if not entries:
            return []
        self._rewrite(page, [])
        self._update_cap(page)
        self._unscore(page, len(entries))
        self._prune(page)
        return entries

    def evict_pnode(self, top: int) -> list[Entry]:
        """Remove the p-node whose top bucket is ``top`` with its whole subtree.

        Returns every clause that was below it; c-nodes and l-node pages are freed.
        """
        txn = self._writer()
        first = self.node(top)
        owner, attr = first.parent, first.attr
        if attr is None or not first.top:  # the page (from the walk or a window record)
            raise CorruptPage(top, f"not a p-node's top bucket (attribute {attr!r})")
        entries: list[Entry] = []
        stack = [top]
        while stack:
            page = stack.pop()
            node = self.node(page)
            entries.extend(self.entries(node))
            cur = node.lnode
            while cur:
                nxt = self.txn.load(self.space, cur, LNodePage).next
                txn.free(self.space, cur)
                cur = nxt
            if node.left:
                stack += [node.left, node.right]
            stack += [ptop for _, ptop, _ in node.pdir]
            self._free_node(page)
        self._mut(owner).drop_pnode(attr)
        self._unscore(owner, len(entries))
        self._prune(owner)
        return entries

    def cut(self, page: int) -> None:
        """Cut a c-node's l-node once although it does not overflow: the two-phase space
        cutting, triggered by a rank below theta instead of by size.

        The root and c-nodes of non-leaf or atomic buckets get a p-node on the
        best-ranked attribute that ``min_size`` of their clauses share (none: unchanged);
        a non-atomic leaf bucket is split in halves if that moves a clause.  The buckets
        filled so are cut the same way while they hold ``cut_floor`` clauses (half an
        l-node): as if the hot node's capacity were that, while capacities stay
        multiples of ``max_cap``.  A node below ``cut_floor`` is left alone.
        """
        node = self.node(page)
        if node.size < self.cut_floor:
            return
        used: set[str] = set()
        up = node
        while up.attr is not None:
            used.add(up.attr)
            up = self.node(up.parent)
        if node.attr is None:
            self._partition(page, used, force=True)
        else:
            self._cluster(page, used, force=True)

    def reinsert(self, entries: list[Entry]) -> None:
        """Insert evicted clauses again, from the root, by the current ranking."""
        cache: dict[int, Places] = {}
        for entry in entries:
            self.insert(entry, self._places_of(entry, cache))

    def _prune(self, page: int) -> None:
        """Merge rule and removal of empty nodes, from ``page`` up to the root.

        A pair of open leaf buckets merges into its open parent once all three fit in half
        the parent's capacity (the half keeps a split and a merge from alternating); an
        empty open top bucket takes its p-node with it.
        """
        while True:
            node = self.node(page)
            if node.left and not node.pdir:
                left, right = self.node(node.left), self.node(node.right)
                if (
                    not (left.left or right.left or left.pdir or right.pdir)
                    and node.size + left.size + right.size <= node.cap // 2
                ):
                    moving = self.entries(left) + self.entries(right)
                    for child in (left, right):
                        self._rewrite(child.page, [])
                        self._free_node(child.page)
                    bucket = self._mut(page)
                    bucket.left = bucket.right = 0
                    self._append(page, moving)
                    self._record_move(moving, page)
                    self._update_cap(page)
                    node = self.node(page)
            if node.attr is None:
                return
            if node.top and not (node.size or node.pdir or node.left):
                owner = self._mut(node.parent)
                owner.drop_pnode(node.attr)
                self._free_node(page)
            page = node.parent

    # -- walking (checks and inspection) ---------------------------------------------------

    def walk(self) -> Iterator[tuple[CNode, frozenset[str], int]]:
        """Every c-node with the attributes partitioned above it and its depth."""
        stack: list[tuple[int, frozenset[str], int]] = [(self.root, frozenset(), 0)]
        while stack:
            page, used, depth = stack.pop()
            node = self.node(page)
            yield node, used, depth
            if node.left:
                stack.append((node.right, used, depth + 1))
                stack.append((node.left, used, depth + 1))
            for attr, top, _ in node.pdir:
                stack.append((top, used | {attr}, depth + 1))


def _score(node: CNode, attr: str) -> int:
    return next(int(score) for a, _, score in node.pdir if a == attr)


def _check_pages(
    pages: list[PageArrays],
    sat: np.ndarray,
    out: dict[int, Any],
    stats: Collector | None = None,
    owners: list[int] | None = None,
) -> int:
    """Check every clause of the visited l-node pages in one vectorised pass.

    One concatenation per column and one ``logical_and.reduceat`` over all atom ids,
    instead of a dozen numpy calls per page (profiled: the per-page calls cost more than
    the checking).  Returns the number of candidate clauses.  ``stats`` (with the c-node
    of each page in ``owners``) receives the per-clause outcome.
    """
    if stats is not None and owners is not None:
        owners = [o for p, o in zip(pages, owners, strict=True) if len(p[1])]
    pages = [p for p in pages if len(p[1])]
    if not pages:
        return 0
    lens = np.concatenate([p[2] for p in pages])
    atoms = np.concatenate([p[3] for p in pages])
    starts = np.zeros(len(lens), dtype=np.intp)
    np.cumsum(lens[:-1], out=starts[1:])
    ok = np.logical_and.reduceat(sat[atoms], starts)
    if stats is not None and owners is not None:
        stats.add(owners, [len(p[1]) for p in pages], lens, ok)
    hits = np.flatnonzero(ok)
    if len(hits):
        cids = np.concatenate([p[0] for p in pages])[hits]
        exts = np.concatenate([p[1] for p in pages])[hits].tolist()
        sids = (cids >> np.uint64(16)).tolist()
        out.update(zip(sids, exts, strict=True))
    return len(lens)
