"""PB+tree: the per-attribute predicate index of Wang, Zhang & Kitsuregawa
(docs/REFERENCES.md: PB+tree).

A B+tree over predicate constants whose extended leaf items point into three ordered
lists of pages — GreaterThan (``>``, ``>=``), LessThan (``<``, ``<=``) and Inequality
(``!=``) — so that one descent plus walks along the lists finds every predicate an event
value satisfies.  Page layouts are in :mod:`pbtree.nodes`; invariants in
:mod:`pbtree.check`.

Costs (pages): search O(log n + L/c) where L is the number of satisfied list items and c
the list node capacity — the descent, at most one neighbouring leaf, then whole list nodes
collected as one numpy slice each.  Insert and delete O(log n + u), u the leaf items whose
list pointers must be re-pointed (the paper's Number_update; small for uniform data).

The root record (``records`` namespace ``pbtree``, key = tree name) holds the space id,
root page and height, the ends of the leaf chain, the sentinels of the three lists, the
node capacities, the key domain (``num`` or ``str``) and the number of stored predicates.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from itertools import chain
from typing import Any, TypeVar

import numpy as np
from pyroaring import BitMap

from pbtree.keys import check_id, check_op, key_domain
from pbtree.nodes import HEAD, REAL, TAIL, InternalNode, LeafNode, ListNode
from pbtree.operators import GT, LIST_CODES, LT, NE, SLOT
from storage.errors import InvalidInput, StoreError
from storage.txn import ReadTxn, WriteTxn

_PTR = ("gtp", "ltp", "nep")  # leaf pointer column of each list kind
NS = b"pbtree"
#: Node capacities (items) of new trees; each tree's record keeps its own.  List nodes are
#: large because a search takes whole list nodes as one numpy slice each: at 1M predicates
#: 2,048 items a node made warm search 100x faster than 64 (``bexdb bench pbtree``), and
#: inserts faster too (fewer splits); a node is then up to some 30 KB for one id an item,
#: which LMDB keeps in contiguous overflow pages, read without a copy.
DEFAULT_CAPS = {"leaf_cap": 32, "internal_cap": 64, "list_cap": 2048}
_EMPTY = np.zeros(0, dtype=np.uint32)

T = TypeVar("T", InternalNode, LeafNode, ListNode)


def list_tree_names(txn: ReadTxn) -> list[str]:
    """Names of every PB+tree in the store."""
    return [key.decode() for key, _ in txn.scan(NS)]


class PBTree:
    """One attribute's predicate index, bound to a transaction.

    >>> with open_store(path) as store, store.write() as txn:  # doctest: +SKIP
    ...     tree = PBTree(txn, "price")
    ...     tree.insert(">=", 10, 7)
    ...     sorted(tree.search(12))
    [7]

    In a write transaction a missing tree is created (capacities from ``caps``, else the
    store's settings, else :data:`DEFAULT_CAPS`); in a read transaction it reads as empty.
    ``record`` passes a root record the caller already holds for this snapshot (readers
    matching many events skip one record read per tree).
    """

    def __init__(
        self,
        txn: ReadTxn,
        name: str,
        *,
        record: dict[str, Any] | None = None,
        leaf_cap: int | None = None,
        internal_cap: int | None = None,
        list_cap: int | None = None,
    ) -> None:
        self.txn = txn
        self.name = name
        self._key = name.encode()
        self.pages_read = 0
        rec = record if record is not None else txn.get_obj(NS, self._key)
        if rec is None and isinstance(txn, WriteTxn):
            caps = {"leaf_cap": leaf_cap, "internal_cap": internal_cap, "list_cap": list_cap}
            rec = self._create(txn, {k: v for k, v in caps.items() if v is not None})
        self._rec: dict[str, Any] | None = rec
        self._dirty = False

    # -- creation and the root record ---------------------------------------------------

    def _create(self, txn: WriteTxn, caps: dict[str, int]) -> dict[str, Any]:
        settings = {**DEFAULT_CAPS, **txn.store.settings.get("pbtree", {}), **caps}
        if min(settings.values()) < 3:
            raise InvalidInput("PB+tree node capacities must be at least 3")
        space = txn.new_space()
        lists = []
        for kind in (GT, LT, NE):
            head, tail = txn.alloc(), txn.alloc()
            txn.put_new(space, head, ListNode(head, kind, HEAD, 0, tail))
            txn.put_new(space, tail, ListNode(tail, kind, TAIL, head, 0))
            lists.append([head, tail])
        root = txn.alloc()
        txn.put_new(space, root, LeafNode(root))
        rec = {
            "space": space,
            "root": root,
            "height": 1,
            "first": root,
            "last": root,
            "lists": lists,
            "domain": None,
            "count": 0,
            **{k: settings[k] for k in DEFAULT_CAPS},
        }
        txn.put_obj(NS, self._key, rec)
        return rec

    @property
    def exists(self) -> bool:
        return self._rec is not None

    @property
    def record(self) -> dict[str, Any]:
        """The root record (read-only use)."""
        if self._rec is None:
            raise StoreError(f"there is no PB+tree named {self.name!r}")
        return self._rec

    def __len__(self) -> int:
        """Number of stored (operator, constant, id) predicates."""
        return 0 if self._rec is None else int(self._rec["count"])

    def _save(self) -> None:
        if self._dirty:
            assert isinstance(self.txn, WriteTxn)
            self.txn.put_obj(NS, self._key, self._rec)
            self._dirty = False

    def _set(self, field: str, value: Any) -> None:
        self.record[field] = value
        self._dirty = True

    def drop(self) -> None:
        """Remove the tree and free all its pages."""
        txn = self._writer()
        txn.drop_space(self.record["space"])
        txn.delete(NS, self._key)
        self._rec = None

    # -- page access ---------------------------------------------------------------------

    def _load(self, page: int, cls: type[T]) -> T:
        self.pages_read += 1
        return self.txn.load(self._rec["space"], page, cls)  # type: ignore[index]

    def _mut(self, page: int, cls: type[T]) -> T:
        return self.txn.load_mut(self._rec["space"], page, cls)  # type: ignore[attr-defined,index,no-any-return]

    def _writer(self) -> WriteTxn:
        if not isinstance(self.txn, WriteTxn):
            raise StoreError("PB+tree changes need a write transaction (store.write())")
        return self.txn

    def _descend(self, key: Any) -> tuple[list[tuple[int, int]], LeafNode]:
        """Path of ``(internal page, child index)`` from the root, and the leaf for ``key``."""
        rec = self.record
        page = rec["root"]
        path = []
        for _ in range(rec["height"] - 1):
            node = self._load(page, InternalNode)
            i = bisect_right(node.keys, key)
            path.append((page, i))
            page = node.children[i]
        return path, self._load(page, LeafNode)

    def _find(self, key: Any) -> tuple[LeafNode, int] | None:
        """The leaf and position holding ``key``, or None."""
        leaf = self._descend(key)[1]
        i = bisect_left(leaf.keys, key)
        if i < len(leaf.keys) and leaf.keys[i] == key:
            return leaf, i
        return None

    def _check_key(self, key: Any) -> None:
        domain = key_domain(key)
        rec = self.record
        if rec["domain"] is None:
            self._set("domain", domain)
        elif rec["domain"] != domain:
            kind = "numbers" if rec["domain"] == "num" else "strings"
            raise InvalidInput(f"PB+tree {self.name!r} holds {kind}; got {key!r}")

    # -- search (Figs. 8-9) ----------------------------------------------------------------

    def search(self, value: Any) -> BitMap:
        """Ids of every stored predicate that holds for ``value``."""
        ids = self.search_array(value)
        return BitMap(array("I", ids.tobytes())) if len(ids) else BitMap()

    def search_array(self, value: Any) -> np.ndarray:
        """Like :meth:`search` as a uint32 array (ids may repeat; no set is built)."""
        chunks = self.collect(value)
        if not chunks:
            return _EMPTY
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)

    def collect(self, value: Any) -> list[np.ndarray]:
        """The id runs that hold for ``value``: one descent, then the four collections."""
        rec = self._rec
        if rec is None or rec["domain"] is None:
            return []
        if key_domain(value) != rec["domain"]:
            raise InvalidInput(f"PB+tree {self.name!r} cannot compare {value!r} to its keys")
        leaf = self._descend(value)[1]
        chunks: list[np.ndarray] = []
        i = bisect_right(leaf.keys, value)  # items [0, i) have key <= value
        if i and leaf.keys[i - 1] == value:
            chunks.append(leaf.sidset(i - 1))
        if i:
            ptrs = leaf.gtp[i - 1], leaf.ltp[i - 1], leaf.nep[i - 1]
        elif leaf.prev:
            before = self._load(leaf.prev, LeafNode)
            ptrs = before.gtp[-1], before.ltp[-1], before.nep[-1]
        else:  # value is below every key: start from the heads
            lists = rec["lists"]
            ptrs = lists[GT][0], lists[LT][0], lists[NE][0]
        self._collect_gt(value, ptrs[0], chunks)
        self._collect_lt(value, ptrs[1], chunks)
        self._collect_ne(value, ptrs[2], chunks)
        return chunks

    def _collect_gt(self, value: Any, page: int, chunks: list[np.ndarray]) -> None:
        """Items with key < value, from the start node back to the head (Fig. 9)."""
        node = self._load(page, ListNode)
        if node.sentinel == HEAD:
            return
        offs, ids = node.flat()
        j = bisect_left(node.keys, value)
        if j:
            chunks.append(ids[: offs[2 * j]])
        page = node.prev
        while True:
            node = self._load(page, ListNode)
            if node.sentinel == HEAD:
                return
            chunks.append(node.flat()[1])
            page = node.prev

    def _collect_lt(self, value: Any, page: int, chunks: list[np.ndarray]) -> None:
        """Items with key > value, from the start node on to the tail."""
        node = self._load(page, ListNode)
        if node.sentinel == HEAD:
            node = self._load(node.next, ListNode)
        if node.sentinel == TAIL:
            return
        offs, ids = node.flat()
        j = bisect_right(node.keys, value)
        chunks.append(ids[offs[2 * j] :])
        page = node.next
        while True:
            node = self._load(page, ListNode)
            if node.sentinel == TAIL:
                return
            chunks.append(node.flat()[1])
            page = node.next

    def _collect_ne(self, value: Any, page: int, chunks: list[np.ndarray]) -> None:
        """Every item but the one equal to value: back to the head, on to the tail."""
        start = self._load(page, ListNode)
        if start.sentinel == REAL:
            offs, ids = start.flat()
            j = bisect_left(start.keys, value)
            if j < len(start.keys) and start.keys[j] == value:
                chunks.append(ids[: offs[j]])
                chunks.append(ids[offs[j + 1] :])
            else:
                chunks.append(ids)
        for direction in ("prev", "next"):
            page = getattr(start, direction)
            while page:
                node = self._load(page, ListNode)
                if node.sentinel != REAL:
                    break
                chunks.append(node.flat()[1])
                page = getattr(node, direction)

    # -- insert (Figs. 6-7) ------------------------------------------------------------------

    def insert(self, op: str, key: Any, ident: int) -> bool:
        """Store predicate ``value op key`` under ``ident``; False if it was already there."""
        self._writer()
        place = check_op(op)
        check_id(ident)
        self._check_key(key)
        leaf, i = self._ensure_item(key)
        kind, part = place
        if kind is None:
            added = self._leaf_run_add(leaf, i, 0, ident)
        else:
            added = self._list_add(kind, part, key, ident, leaf, i)
            if added and part == 0 and kind != NE:
                self._leaf_run_add(leaf, i, 1, ident)
        if added:
            self._set("count", self.record["count"] + 1)
        self._save()
        return added

    def _ensure_item(self, key: Any) -> tuple[LeafNode, int]:
        """Insert ``key`` into the leaf list if new, its pointers copied from neighbours;
        the leaf and position of its item (the leaf as read: :meth:`_mut` it to change)."""
        path, leaf = self._descend(key)
        i = bisect_left(leaf.keys, key)
        if i < len(leaf.keys) and leaf.keys[i] == key:
            return leaf, i
        if i:
            gtp, nep = leaf.gtp[i - 1], leaf.nep[i - 1]
        elif leaf.prev:
            before = self._load(leaf.prev, LeafNode)
            gtp, nep = before.gtp[-1], before.nep[-1]
        else:
            gtp, nep = self.record["lists"][GT][0], self.record["lists"][NE][0]
        if i < len(leaf.keys):
            ltp = leaf.ltp[i]
        elif leaf.next:
            ltp = self._load(leaf.next, LeafNode).ltp[0]
        else:
            ltp = self.record["lists"][LT][1]
        leaf = self._mut(leaf.page, LeafNode)
        leaf.insert_item(i, key, gtp, ltp, nep)
        if len(leaf.keys) > self.record["leaf_cap"]:
            right = self._split_leaf(path, leaf)
            if i >= len(leaf.keys):
                return right, i - len(leaf.keys)
        return leaf, i

    def _split_leaf(self, path: list[tuple[int, int]], leaf: LeafNode) -> LeafNode:
        txn = self._writer()
        page = txn.alloc()
        right = leaf.split(len(leaf.keys) // 2, page)
        txn.put_new(self.record["space"], page, right)
        if leaf.next:
            self._mut(leaf.next, LeafNode).prev = page
        else:
            self._set("last", page)
        leaf.next = page
        self._insert_in_parent(path, leaf.page, right.keys[0], page)
        return right

    def _insert_in_parent(
        self, path: list[tuple[int, int]], left: int, sep: Any, right: int
    ) -> None:
        txn = self._writer()
        if not path:
            root = txn.alloc()
            txn.put_new(self.record["space"], root, InternalNode(root, [sep], [left, right]))
            self._set("root", root)
            self._set("height", self.record["height"] + 1)
            return
        page, i = path[-1]
        parent = self._mut(page, InternalNode)
        parent.keys.insert(i, sep)
        parent.children.insert(i + 1, right)
        if len(parent.children) > self.record["internal_cap"]:
            mid = len(parent.keys) // 2
            up = parent.keys[mid]
            new = txn.alloc()
            txn.put_new(
                self.record["space"],
                new,
                InternalNode(new, parent.keys[mid + 1 :], parent.children[mid + 1 :]),
            )
            del parent.keys[mid:]
            del parent.children[mid + 1 :]
            self._insert_in_parent(path[:-1], page, up, new)

    def _leaf_run_add(self, leaf: LeafNode, i: int, part: int, ident: int) -> bool:
        """Add ``ident`` to the ``=`` (part 0) or bound (1) run of item ``i`` of ``leaf``."""
        if ident in leaf.run(i, part):
            return False
        return self._mut(leaf.page, LeafNode).add_id(i, part, ident)

    def _list_add(self, kind: int, part: int, key: Any, ident: int, leaf: LeafNode, i: int) -> bool:
        """InsertToList (Fig. 7): add ``ident`` to the item ``key`` (item ``i`` of ``leaf``)
        of list ``kind``."""
        pointed = getattr(leaf, _PTR[kind])[i]
        node = self._load(pointed, ListNode)
        if node.sentinel == REAL:
            j = bisect_left(node.keys, key)
            if j < len(node.keys) and node.keys[j] == key:
                if ident in node.run(j, part):
                    return False
                return self._mut(node.page, ListNode).add_id(j, part, ident)
        # a new item: the pointed node is where the order puts it
        if kind == LT:
            if node.sentinel == TAIL:
                target, pos = self._mut(node.prev, ListNode), None
            else:
                target, pos = self._mut(node.page, ListNode), bisect_left(node.keys, key)
        elif node.sentinel == HEAD:
            target, pos = self._mut(node.next, ListNode), 0
        else:
            target, pos = self._mut(node.page, ListNode), bisect_right(node.keys, key)
        if target.sentinel != REAL:  # the list is empty: a first real node
            target, pos = self._new_list_node(kind, target), 0
        if pos is None:
            pos = len(target.keys)
        target.insert_item(pos, key)
        target.add_id(pos, part, ident)
        # The leaf items the new list item now covers (from ``key`` to the next list key;
        # for LT, from the previous one) all pointed where ``key``'s item points: to the
        # node of their common floor (ceiling).  When that is ``target``, none changes and
        # the walk is skipped: walking it cost O(n) per insert, O(n²) for `not in` lists
        # inserted in order beside n other keys (10 KB `not in` over 166K keys: 160 s).
        if target.page == pointed:
            pass
        elif kind == LT:
            self._repoint(kind, target.page, self._key_before(target, pos), key)
        else:
            self._repoint(kind, target.page, key, self._key_after(target, pos))
        if len(target.keys) > self.record["list_cap"]:
            self._split_list(kind, target)
        return True

    def _new_list_node(self, kind: int, head: ListNode) -> ListNode:
        """A real node right after the head sentinel ``head`` of an empty list."""
        txn = self._writer()
        if head.sentinel == TAIL:
            head = self._mut(head.prev, ListNode)
        page = txn.alloc()
        node = ListNode(page, kind, REAL, head.page, head.next)
        txn.put_new(self.record["space"], page, node)
        self._mut(head.next, ListNode).prev = page
        head.next = page
        return node

    def _split_list(self, kind: int, node: ListNode) -> None:
        """Split an over-full list node and re-point the leaf items of its upper half."""
        txn = self._writer()
        page = txn.alloc()
        right = ListNode(page, kind, REAL, node.page, node.next)
        right.extend(*node.cut(len(node.keys) // 2))
        txn.put_new(self.record["space"], page, right)
        self._mut(node.next, ListNode).prev = page
        node.next = page
        if kind == LT:
            self._repoint(kind, page, node.keys[-1], right.keys[-1])
        else:
            self._repoint(kind, page, right.keys[0], self._key_after(right, len(right.keys) - 1))

    def _key_after(self, node: ListNode, pos: int) -> Any:
        """Key of the list item after ``node.keys[pos]``; None past the last."""
        if pos + 1 < len(node.keys):
            return node.keys[pos + 1]
        nxt = self._load(node.next, ListNode)
        return nxt.keys[0] if nxt.sentinel == REAL else None

    def _key_before(self, node: ListNode, pos: int) -> Any:
        """Key of the list item before ``node.keys[pos]``; None before the first."""
        if pos > 0:
            return node.keys[pos - 1]
        prev = self._load(node.prev, ListNode)
        return prev.keys[-1] if prev.sentinel == REAL else None

    def _repoint(self, kind: int, page: int, lo: Any, hi: Any) -> None:
        """Point the leaf items of a key range at list node ``page``.

        GT and NE (floor pointers): keys in ``[lo, hi)``, hi None meaning no bound.
        LT (ceiling pointers): keys in ``(lo, hi]``, lo None meaning no bound.
        """
        column = _PTR[kind]
        if kind == LT:
            leaf = self._descend(hi)[1]
            i = bisect_right(leaf.keys, hi) - 1
            while True:
                while i >= 0:
                    if lo is not None and leaf.keys[i] <= lo:
                        return
                    if getattr(leaf, column)[i] != page:
                        leaf = self._mut(leaf.page, LeafNode)
                        getattr(leaf, column)[i] = page
                    i -= 1
                if not leaf.prev:
                    return
                leaf = self._load(leaf.prev, LeafNode)
                i = len(leaf.keys) - 1
        leaf = self._descend(lo)[1]
        i = bisect_left(leaf.keys, lo)
        while True:
            while i < len(leaf.keys):
                if hi is not None and leaf.keys[i] >= hi:
                    return
                if getattr(leaf, column)[i] != page:
                    leaf = self._mut(leaf.page, LeafNode)
                    getattr(leaf, column)[i] = page
                i += 1
            if not leaf.next:
                return
            leaf = self._load(leaf.next, LeafNode)
            i = 0

    # -- delete (the reverse of insert) -----------------------------------------------------

    def delete(self, op: str, key: Any, ident: int) -> bool:
        """Remove predicate ``value op key`` of ``ident``; False if it was not stored."""
        self._writer()
        kind, part = check_op(op)
        check_id(ident)
        if self._rec is None or self.record["domain"] != key_domain(key):
            return False
        found = self._find(key)
        if found is None:
            return False
        # (one descent: the list changes below re-point leaf items of ``kind`` and merge
        # list nodes, but move no leaf item, so the item stays at ``page``, ``i``; its leaf
        # is loaded again by page, the dirty copy once there is one)
        page, i = found[0].page, found[1]
        if kind is None:
            removed = self._leaf_run_remove(page, i, 0, ident)
        else:
            removed = self._list_remove(kind, part, key, ident, page, i)
            if removed and part == 0 and kind != NE:
                other = LT if kind == GT else GT
                item = self._list_item(other, key, self._load(page, LeafNode), i)
                if item is None or ident not in item[0].run(item[1], 0):
                    self._leaf_run_remove(page, i, 1, ident)
        if removed:
            self._set("count", self.record["count"] - 1)
            self._drop_item_if_unused(key, page, i)
        self._save()
        return removed

    def _leaf_run_remove(self, page: int, i: int, part: int, ident: int) -> bool:
        if ident not in self._load(page, LeafNode).run(i, part):
            return False
        return self._mut(page, LeafNode).remove_id(i, part, ident)

    def _list_item(
        self, kind: int, key: Any, leaf: LeafNode, i: int
    ) -> tuple[ListNode, int] | None:
        """The node and position of ``key`` (item ``i`` of ``leaf``) in list ``kind``, via
        the leaf item's pointer."""
        node = self._load(getattr(leaf, _PTR[kind])[i], ListNode)
        if node.sentinel != REAL:
            return None
        j = bisect_left(node.keys, key)
        if j < len(node.keys) and node.keys[j] == key:
            return node, j
        return None

    def _list_remove(self, kind: int, part: int, key: Any, ident: int, page: int, i: int) -> bool:
        item = self._list_item(kind, key, self._load(page, LeafNode), i)
        if item is None or ident not in item[0].run(item[1], part):
            return False
        node, j = self._mut(item[0].page, ListNode), item[1]
        node.remove_id(j, part, ident)
        if node.item_empty(j):
            self._remove_list_item(kind, node, j)
        return True

    def _remove_list_item(self, kind: int, node: ListNode, j: int) -> None:
        """Drop an emptied list item; re-point, then free or merge an under-full node."""
        key = node.keys[j]
        if kind == LT:
            lo = self._key_before(node, j)
            node.delete_item(j)
            target = node.page if j < len(node.keys) else node.next
            self._repoint(kind, target, lo, key)
        else:
            hi = self._key_after(node, j)
            node.delete_item(j)
            target = node.page if j > 0 else node.prev
            self._repoint(kind, target, key, hi)
        if not node.keys:
            self._unlink(node)
        elif len(node.keys) < self.record["list_cap"] // 2:
            prev = self._load(node.prev, ListNode)
            nxt = self._load(node.next, ListNode)
            cap = self.record["list_cap"]
            if prev.sentinel == REAL and len(prev.keys) + len(node.keys) <= cap:
                self._merge_lists(kind, self._mut(prev.page, ListNode), node)
            elif nxt.sentinel == REAL and len(nxt.keys) + len(node.keys) <= cap:
                self._merge_lists(kind, node, self._mut(nxt.page, ListNode))

    def _merge_lists(self, kind: int, left: ListNode, right: ListNode) -> None:
        """Move every item of ``right`` to the end of ``left`` and free ``right``."""
        if kind == LT:
            lo, hi = left.keys[-1], right.keys[-1]
        else:
            lo, hi = right.keys[0], self._key_after(right, len(right.keys) - 1)
        left.extend(*right.cut(0))
        self._repoint(kind, left.page, lo, hi)
        self._unlink(right)

    def _unlink(self, node: ListNode) -> None:
        self._mut(node.prev, ListNode).next = node.next
        self._mut(node.next, ListNode).prev = node.prev
        self._writer().free(self.record["space"], node.page)

    def _drop_item_if_unused(self, key: Any, page: int, i: int) -> None:
        """Remove the leaf item of ``key`` (item ``i`` of leaf ``page``) once no predicate
        and no list item uses it."""
        leaf = self._load(page, LeafNode)
        if not leaf.item_empty(i):
            return
        if any(self._list_item(kind, key, leaf, i) is not None for kind in (GT, LT, NE)):
            return
        path, leaf = self._descend(key)
        leaf = self._mut(leaf.page, LeafNode)
        leaf.delete_item(bisect_left(leaf.keys, key))
        self._rebalance_leaf(path, leaf)
        if self.record["count"] == 0:
            self._set("domain", None)

    def _rebalance_leaf(self, path: list[tuple[int, int]], leaf: LeafNode) -> None:
        low = self.record["leaf_cap"] // 2
        if not path or len(leaf.keys) >= low:
            return
        page, ci = path[-1]
        parent = self._mut(page, InternalNode)
        if ci > 0:
            left = self._load(parent.children[ci - 1], LeafNode)
            if len(left.keys) > low:
                left = self._mut(left.page, LeafNode)
                leaf.prepend(left.cut(len(left.keys) - 1))
                parent.keys[ci - 1] = leaf.keys[0]
                return
        if ci + 1 < len(parent.children):
            right = self._load(parent.children[ci + 1], LeafNode)
            if len(right.keys) > low:
                right = self._mut(right.page, LeafNode)
                moved = right.cut(0)
                right.extend(tuple(column[1:] for column in moved))
                leaf.extend(tuple(column[:1] for column in moved))
                parent.keys[ci] = right.keys[0]
                return
        if ci > 0:
            left, right, sep = self._mut(parent.children[ci - 1], LeafNode), leaf, ci - 1
        else:
            left, right, sep = leaf, self._mut(parent.children[ci + 1], LeafNode), ci
        left.extend(right.cut(0))
        left.next = right.next
        if right.next:
            self._mut(right.next, LeafNode).prev = left.page
        else:
            self._set("last", left.page)
        self._writer().free(self.record["space"], right.page)
        del parent.keys[sep]
        del parent.children[sep + 1]
        self._rebalance_internal(path[:-1], parent)

    def _rebalance_internal(self, path: list[tuple[int, int]], node: InternalNode) -> None:
        txn = self._writer()
        if not path:
            if len(node.children) == 1:  # the root lost its last separator: collapse
                self._set("root", node.children[0])
                self._set("height", self.record["height"] - 1)
                txn.free(self.record["space"], node.page)
            return
        low = (self.record["internal_cap"] + 1) // 2
        if len(node.children) >= low:
            return
        page, ci = path[-1]
        parent = self._mut(page, InternalNode)
        if ci > 0:
            left = self._load(parent.children[ci - 1], InternalNode)
            if len(left.children) > low:
                left = self._mut(left.page, InternalNode)
                node.keys.insert(0, parent.keys[ci - 1])
                node.children.insert(0, left.children.pop())
                parent.keys[ci - 1] = left.keys.pop()
                return
        if ci + 1 < len(parent.children):
            right = self._load(parent.children[ci + 1], InternalNode)
            if len(right.children) > low:
                right = self._mut(right.page, InternalNode)
                node.keys.append(parent.keys[ci])
                node.children.append(right.children.pop(0))
                parent.keys[ci] = right.keys.pop(0)
                return
        if ci > 0:
            left, right, sep = self._mut(parent.children[ci - 1], InternalNode), node, ci - 1
        else:
            left, right, sep = node, self._mut(parent.children[ci + 1], InternalNode), ci
        left.keys.append(parent.keys[sep])
        left.keys.extend(right.keys)
        left.children.extend(right.children)
        txn.free(self.record["space"], right.page)
        del parent.keys[sep]
        del parent.children[sep + 1]
        self._rebalance_internal(path[:-1], parent)

    # -- listing -------------------------------------------------------------------------------

    def predicate_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every stored ``(operator, constant, id)`` as three columns: operator codes
        (:data:`pbtree.operators.SLOT`), constants (an object array) and ids; the leaves'
        ``=`` runs, then each list (for checks and rebuilds).

        Cost: reads every leaf and list page once, past the page cache (a check's pass
        would fill it with pages no match asked for: ~100 MB of a 20K dense store's
        check()); numpy per page, none per id.
        """
        keys: list[Any] = []
        codes: list[int] = []
        counts: list[Any] = [np.zeros(0, dtype=np.int64)]
        ids: list[Any] = [np.zeros(0, dtype=np.int64)]
        if self._rec is None:
            return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=object), ids[0]
        page = self.record["first"]
        while page:
            leaf = self._read(page, LeafNode)
            keys.extend(leaf.keys)
            codes.extend([SLOT["="]] * len(leaf.keys))
            counts.append(np.fromiter(map(len, leaf.eq), dtype=np.int64, count=len(leaf.eq)))
            ids.append(np.fromiter(chain.from_iterable(leaf.eq), dtype=np.int64))
            page = leaf.next
        for kind, ops in LIST_CODES.items():
            page = self._read(self.record["lists"][kind][0], ListNode).next
            while page:
                node = self._read(page, ListNode)
                if node.sentinel != REAL:
                    break
                offs, run = node.flat()
                keys.extend([key for key in node.keys for _ in ops])
                codes.extend(ops * len(node.keys))
                counts.append(np.diff(offs))
                ids.append(run.astype(np.int64))
                page = node.next
        consts = np.empty(len(keys), dtype=object)
        consts[:] = keys
        per = np.concatenate(counts)
        op_codes = np.repeat(np.array(codes, dtype=np.int8), per)
        return op_codes, np.repeat(consts, per), np.concatenate(ids)

    def _read(self, page: int, cls: type[T]) -> T:
        """A page decoded from the snapshot, not through the page cache."""
        return self.txn.load_uncached(self.record["space"], page, cls)

    def stats(self) -> dict[str, Any]:
        """Shape figures for ``bexdb inspect``: height, leaf and list nodes and their fill."""
        if self._rec is None:
            return {"predicates": 0}
        rec = self.record
        leaves = items = 0
        page = rec["first"]
        while page:
            leaf = self._load(page, LeafNode)
            leaves += 1
            items += len(leaf.keys)
            page = leaf.next
        lists = {}
        for kind, name in ((GT, "greater_than"), (LT, "less_than"), (NE, "inequality")):
            nodes = list_items = 0
            page = self._load(rec["lists"][kind][0], ListNode).next
            while page:
                node = self._load(page, ListNode)
                if node.sentinel != REAL:
                    break
                nodes += 1
                list_items += len(node.keys)
                page = node.next
            fill = list_items / (nodes * rec["list_cap"]) if nodes else 0.0
            lists[name] = {"nodes": nodes, "items": list_items, "fill": round(fill, 3)}
        return {
            "predicates": rec["count"],
            "height": rec["height"],
            "leaves": leaves,
            "keys": items,
            "leaf_fill": round(items / (leaves * rec["leaf_cap"]), 3) if leaves else 0.0,
            "lists": lists,
        }

    # -- checking ------------------------------------------------------------------------------

    def check(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validate every invariant; raise :class:`~storage.errors.CheckFailed` listing all.
        Returns the predicates as :meth:`predicate_columns` lists them (but in another order,
        and the constants as int64 when every key is one), from the pages the check read."""
        from pbtree.check import check_tree

        return check_tree(self)
