"""A PB+tree of one snapshot as sorted arrays: a search in three bisections.

:meth:`pbtree.tree.PBTree.collect` descends the tree and walks the three lists page by
page (~7 page visits, ~20 µs an attribute).  A matcher that keeps a snapshot for many
events (:mod:`betree.flat`) reads each list end to end once instead: its keys ascending
(one Python list, for exact comparison of ints past 2**53 and of strings), its ids end to
end and where each key's ids start.  Then the ids that hold for a value are

* GreaterThan items with a key below it: a prefix of the GT ids;
* LessThan items with a key above it: a suffix of the LT ids;
* Inequality items with another key: the NE ids less one key's run;
* the leaf item equal to it: its ``eq`` and ``bound`` ids (a dict by key);

the same id runs :meth:`~pbtree.tree.PBTree.collect` returns (tests compare them).
Memory: the ids (4 bytes each) and keys; building reads every page once.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

import numpy as np

from pbtree.keys import key_domain
from pbtree.nodes import GT, LT, NE, TAIL, LeafNode, ListNode
from storage.errors import InvalidInput
from storage.txn import ReadTxn


class _List:
    """One list end to end: ``keys`` ascending, item i's ids ``ids[at[i]:at[i + 1]]``."""

    __slots__ = ("at", "ids", "keys")

    def __init__(self, txn: ReadTxn, space: int, head: int) -> None:
        keys: list[Any] = []
        starts: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        base = 0
        page = txn.load_uncached(space, head, ListNode).next
        while page:
            node = txn.load_uncached(space, page, ListNode)
            if node.sentinel == TAIL:
                break
            offs, run = node.flat()
            keys.extend(node.keys)
            starts.append(offs[: -1 : node.nparts] + base)
            ids.append(run)
            base += len(run)
            page = node.next
        self.keys = keys
        self.at = np.append(np.concatenate(starts) if starts else [], base).astype(np.int64)
        self.ids = np.concatenate(ids) if ids else np.empty(0, dtype=np.uint32)


class SearchView:
    """The search side of one PB+tree in one snapshot (see the module docstring)."""

    __slots__ = ("domain", "eq", "gt", "lt", "name", "ne")

    def __init__(self, txn: ReadTxn, name: str, record: dict[str, Any]) -> None:
        self.name = name
        self.domain = record["domain"]
        space, lists = record["space"], record["lists"]
        self.gt, self.lt, self.ne = (_List(txn, space, lists[k][0]) for k in (GT, LT, NE))
        self.eq: dict[Any, np.ndarray] = {}
        if self.domain is None:
            return
        page = record["first"]
        while page:
            leaf = txn.load_uncached(space, page, LeafNode)
            for i, key in enumerate(leaf.keys):
                self.eq[key] = leaf.sidset(i)
            page = leaf.next

    @property
    def nbytes(self) -> int:
        """Memory of the id arrays (keys not counted: Python objects, ~30 bytes each)."""
        runs = (self.gt, self.lt, self.ne)
        return sum(int(r.ids.nbytes + r.at.nbytes) for r in runs) + sum(
            int(a.nbytes) for a in self.eq.values()
        )

    def collect(self, value: Any) -> list[np.ndarray]:
        """The id runs that hold for ``value`` (as :meth:`PBTree.collect`)."""
        if self.domain is None:
            return []
        if key_domain(value) != self.domain:
            raise InvalidInput(f"PB+tree {self.name!r} cannot compare {value!r} to its keys")
        chunks: list[np.ndarray] = []
        eq = self.eq.get(value)
        if eq is not None:
            chunks.append(eq)
        gt, lt, ne = self.gt, self.lt, self.ne
        chunks.append(gt.ids[: gt.at[bisect_left(gt.keys, value)]])
        chunks.append(lt.ids[lt.at[bisect_right(lt.keys, value)] :])
        j = bisect_left(ne.keys, value)
        if j < len(ne.keys) and ne.keys[j] == value:
            chunks.append(ne.ids[: ne.at[j]])
            chunks.append(ne.ids[ne.at[j + 1] :])
        else:
            chunks.append(ne.ids)
        return chunks
