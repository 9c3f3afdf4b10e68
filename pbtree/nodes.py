"""The three page kinds of a PB+tree and their on-disk layouts.

Page ids are u64; 0 is the null pointer.  Keys are all numbers (ints and floats, compared
exactly by value) or all strings; they are stored as a msgpack list so ints stay ints.
Id sets are sorted, duplicate-free u32 runs packed end to end ("CSR" layout): item ``i``
owns ``ids[offs[i*p] : offs[(i+1)*p]]`` where ``p`` is the number of id parts per item.

``pbtree.internal`` (kind 1, version 1)::

    [keys: list, children: bytes u64 x (len(keys) + 1)]

    child i holds the keys k with keys[i-1] <= k < keys[i].

``pbtree.leaf`` (kind 2, version 1) — the extended leaf of the paper's Fig. 4::

    [prev, next, keys: list, offs: bytes u32 x (2n + 1), ids: bytes u32,
     gtp: bytes u64 x n, ltp: bytes u64 x n, nep: bytes u64 x n]

    part 0 of item i: ids of `= key` predicates;
    part 1 of item i: ids of `>= key` and `<= key` predicates.
    Parts 0 and 1 together are the paper's SidSet: every id that holds when the event
    value equals the key.  Part 1 duplicates the non-strict parts of the list items with
    this key; keeping `=` apart lets delete know exactly what remains.
    gtp / nep: the GreaterThan / Inequality list node holding the item with the biggest
    key <= key (the list's head sentinel if there is none);
    ltp: the LessThan list node holding the item with the smallest key >= key (its tail
    sentinel if there is none).

``pbtree.list`` (kind 3, version 1) — GreaterThan, LessThan and Inequality list nodes
(Figs. 2-3)::

    [list_kind (0 GT, 1 LT, 2 NE), sentinel (-1 head, +1 tail, 0 real), prev, next,
     keys: list, offs: bytes u32 x (p*n + 1), ids: bytes u32]

    GT and LT items have p = 2 parts: part 0 the non-strict operator (>=, <=), part 1 the
    strict one (>, <).  NE items have one part (!=).  Items ascend by key within a node
    and along the list; head and tail sentinels hold no items and stand for the minimum
    and maximum keys.  Lists are doubly linked (the paper links GT only backwards and LT
    only forwards; delete and node merging need both directions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from pbtree.operators import NE
from storage.codec import pack_u32, pack_u64, unpack_u32, unpack_u64

LIST_NAMES = ("GreaterThan", "LessThan", "Inequality")
HEAD, REAL, TAIL = -1, 0, 1
_EMPTY = np.zeros(0, dtype=np.uint32)


def _pack_parts(parts: list[list[int]]) -> tuple[bytes, bytes]:
    """``(offs, ids)`` bytes of a sequence of sorted id runs."""
    offs = [0]
    flat: list[int] = []
    for run in parts:
        flat.extend(run)
        offs.append(len(flat))
    return pack_u32(offs), pack_u32(flat)


def _unpack_parts(offs: np.ndarray, ids: np.ndarray) -> list[list[int]]:
    bounds = offs.tolist()
    flat = ids.tolist()
    return [flat[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]


class InternalNode:
    """An internal B+tree node: separator keys and child page ids."""

    KIND: ClassVar[int] = 1
    __slots__ = ("children", "keys", "page")

    def __init__(self, page: int, keys: list[Any], children: list[int]) -> None:
        self.page = page
        self.keys = keys
        self.children = children

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> InternalNode:
        keys, children = fields
        return cls(page, list(keys), unpack_u64(children).tolist())  # (a private list)

    def to_fields(self) -> list[Any]:
        return [self.keys, pack_u64(self.children)]


class LeafNode:
    """An extended leaf: per item the key, ``eq`` and ``bound`` id runs, three pointers."""

    KIND: ClassVar[int] = 2
    __slots__ = ("bound", "eq", "gtp", "keys", "ltp", "nep", "next", "page", "prev")

    def __init__(
        self,
        page: int,
        prev: int = 0,
        next: int = 0,
        keys: list[Any] | None = None,
        eq: list[list[int]] | None = None,
        bound: list[list[int]] | None = None,
        gtp: list[int] | None = None,
        ltp: list[int] | None = None,
        nep: list[int] | None = None,
    ) -> None:
        self.page = page
        self.prev = prev
        self.next = next
        self.keys: list[Any] = keys if keys is not None else []
        self.eq: list[list[int]] = eq if eq is not None else []
        self.bound: list[list[int]] = bound if bound is not None else []
        self.gtp: list[int] = gtp if gtp is not None else []
        self.ltp: list[int] = ltp if ltp is not None else []
        self.nep: list[int] = nep if nep is not None else []

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> LeafNode:
        prev, nxt, keys, offs, ids, gtp, ltp, nep = fields
        parts = _unpack_parts(unpack_u32(offs), unpack_u32(ids))
        return cls(
            page,
            prev,
            nxt,
            list(keys),
            parts[0::2],
            parts[1::2],
            unpack_u64(gtp).tolist(),
            unpack_u64(ltp).tolist(),
            unpack_u64(nep).tolist(),
        )

    def to_fields(self) -> list[Any]:
        parts: list[list[int]] = []
        for eq, bound in zip(self.eq, self.bound, strict=True):
            parts.append(eq)
            parts.append(bound)
        offs, ids = _pack_parts(parts)
        return [
            self.prev,
            self.next,
            self.keys,
            offs,
            ids,
            pack_u64(self.gtp),
            pack_u64(self.ltp),
            pack_u64(self.nep),
        ]

    def insert_item(self, i: int, key: Any, gtp: int, ltp: int, nep: int) -> None:
        """A new item with empty id runs at position ``i``."""
        self.keys.insert(i, key)
        self.eq.insert(i, [])
        self.bound.insert(i, [])
        self.gtp.insert(i, gtp)
        self.ltp.insert(i, ltp)
        self.nep.insert(i, nep)

    def delete_item(self, i: int) -> None:
        for column in self._columns():
            del column[i]

    def cut(self, i: int) -> tuple[list[Any], ...]:
        """Remove and return items ``i:`` column by column (for splits and merges)."""
        columns = self._columns()
        out = tuple(column[i:] for column in columns)
        for column in columns:
            del column[i:]
        return out

    def _columns(self) -> tuple[list[Any], ...]:
        return (self.keys, self.eq, self.bound, self.gtp, self.ltp, self.nep)

    def extend(self, columns: tuple[list[Any], ...]) -> None:
        for mine, theirs in zip(self._columns(), columns, strict=True):
            mine.extend(theirs)

    def prepend(self, columns: tuple[list[Any], ...]) -> None:
        for mine, theirs in zip(self._columns(), columns, strict=True):
            mine[:0] = theirs

    def sidset(self, i: int) -> np.ndarray:
        """Ids that hold when the event value equals key ``i`` (eq and bound runs)."""
        return np.array(self.eq[i] + self.bound[i], dtype=np.uint32)


class LeafArrays:
    """A leaf page as :mod:`pbtree.check` reads it: its columns kept as the arrays over the
    page's bytes, no per-item lists (a 100K dense store's ~59K leaves: ~1 s less than
    :class:`LeafNode`).  ``from_fields`` fails on exactly the fields ``LeafNode``'s fails on,
    so a damaged page is reported alike; :meth:`node` is the ``LeafNode``, for the item by
    item walk that names a fault."""

    KIND: ClassVar[int] = LeafNode.KIND
    __slots__ = ("fields", "gtp", "ids", "keys", "ltp", "nep", "next", "offs", "page", "prev")

    def __init__(
        self, page: int, fields: Sequence[Any], keys: list[Any], arrays: list[np.ndarray]
    ) -> None:
        self.page, self.fields, self.keys = page, fields, keys
        self.prev, self.next = fields[0], fields[1]
        self.offs, self.ids, self.gtp, self.ltp, self.nep = arrays

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> LeafArrays:
        _, _, keys, offs, ids, gtp, ltp, nep = fields  # (failing as LeafNode.from_fields does)
        runs = [unpack_u32(offs), unpack_u32(ids)]
        keys = list(keys)
        return cls(page, fields, keys, [*runs, unpack_u64(gtp), unpack_u64(ltp), unpack_u64(nep)])

    def node(self) -> LeafNode:
        return LeafNode.from_fields(self.page, self.fields)

    def to_fields(self) -> list[Any]:
        return list(self.fields)


class LeafRuns:
    """A leaf page read for its runs only, no per-item lists (readers that keep no node:
    :class:`pbtree.view.SearchView` reads every leaf once): the keys, item i's eq run then
    bound run end to end as ``ids[offs[2 * i]:offs[2 * i + 2]]``, the next leaf."""

    KIND: ClassVar[int] = LeafNode.KIND
    __slots__ = ("fields", "ids", "keys", "next", "offs")

    def __init__(self, fields: Sequence[Any], offs: np.ndarray, ids: np.ndarray) -> None:
        self.fields = fields  # (as read: :meth:`to_fields`)
        self.keys, self.next, self.offs, self.ids = fields[2], fields[1], offs, ids

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> LeafRuns:
        offs, ids = unpack_u32(fields[3]), unpack_u32(fields[4])
        if len(offs) != 2 * len(fields[2]) + 1 or int(offs[-1]) != len(ids):
            raise ValueError(f"leaf {page}: {len(offs)} run bounds for {len(fields[2])} keys")
        return cls(fields, offs, ids)

    def to_fields(self) -> list[Any]:
        return list(self.fields)


class ListNode:
    """A GreaterThan, LessThan or Inequality list node (or a head/tail sentinel).

    Readers use the packed arrays (:meth:`flat`): collecting a run of items is one numpy
    slice.  Writers mutate per-item runs (:meth:`runs`); the arrays are rebuilt lazily.
    """

    KIND: ClassVar[int] = 3
    __slots__ = ("_flat", "_runs", "keys", "list_kind", "next", "page", "prev", "sentinel")

    def __init__(
        self,
        page: int,
        list_kind: int,
        sentinel: int = REAL,
        prev: int = 0,
        next: int = 0,
        keys: list[Any] | None = None,
        runs: list[list[int]] | None = None,
    ) -> None:
        self.page = page
        self.list_kind = list_kind
        self.sentinel = sentinel
        self.prev = prev
        self.next = next
        self.keys: list[Any] = keys if keys is not None else []
        self._runs: list[list[int]] | None = runs if runs is not None else []
        self._flat: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def nparts(self) -> int:
        return 1 if self.list_kind == NE else 2

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> ListNode:
        list_kind, sentinel, prev, nxt, keys, offs, ids = fields
        node = cls(page, list_kind, sentinel, prev, nxt, list(keys))
        node._runs = None
        node._flat = (unpack_u32(offs).astype(np.int64), unpack_u32(ids))
        return node

    def to_fields(self) -> list[Any]:
        offs, ids = self.flat()
        return [
            self.list_kind,
            self.sentinel,
            self.prev,
            self.next,
            self.keys,
            pack_u32(offs),
            ids.tobytes(),
        ]

    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        """``(offs, ids)``: item i's runs are ``ids[offs[i*p] : offs[(i+1)*p]]``."""
        if self._flat is None:
            runs = self._runs or []
            offs = np.zeros(len(runs) + 1, dtype=np.int64)
            np.cumsum([len(run) for run in runs], out=offs[1:])
            flat = [i for run in runs for i in run]
            ids = np.array(flat, dtype=np.uint32) if flat else _EMPTY
            self._flat = (offs, ids)
        return self._flat

    def runs(self) -> list[list[int]]:
        """Per-item id runs (``nparts`` per item), for mutation; invalidates :meth:`flat`."""
        if self._runs is None:
            offs, ids = self.flat()
            self._runs = _unpack_parts(offs, ids)
        self._flat = None
        return self._runs

    def run(self, i: int, part: int) -> list[int]:
        """Read-only view of item ``i``'s ``part`` run."""
        if self._runs is not None:
            return self._runs[i * self.nparts + part]
        offs, ids = self.flat()
        k = i * self.nparts + part
        return ids[offs[k] : offs[k + 1]].tolist()  # type: ignore[no-any-return]

    def item_empty(self, i: int) -> bool:
        p = self.nparts
        return all(not self.run(i, part) for part in range(p))

    def insert_item(self, i: int, key: Any) -> None:
        runs = self.runs()
        self.keys.insert(i, key)
        p = self.nparts
        runs[i * p : i * p] = [[] for _ in range(p)]

    def delete_item(self, i: int) -> None:
        runs = self.runs()
        p = self.nparts
        del self.keys[i]
        del runs[i * p : (i + 1) * p]

    def cut(self, i: int) -> tuple[list[Any], list[list[int]]]:
        """Remove and return items ``i:`` (keys, runs)."""
        runs = self.runs()
        p = self.nparts
        out = (self.keys[i:], runs[i * p :])
        del self.keys[i:]
        del runs[i * p :]
        return out

    def extend(self, keys: list[Any], runs: list[list[int]]) -> None:
        self.runs().extend(runs)
        self.keys.extend(keys)
