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


def _put(values: np.ndarray, at: int, new: np.ndarray) -> np.ndarray:
    """``values`` with ``new`` put before position ``at`` (a new array; ``np.insert`` costs
    ~10x more in its argument handling)."""
    return np.concatenate((values[:at], new, values[at:]))


def _cut(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``values`` without ``values[lo:hi]`` (a new array)."""
    return np.concatenate((values[:lo], values[hi:]))


def _flatten(parts: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(offs, ids)`` arrays (int64, uint32) of a sequence of sorted id runs."""
    offs = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(run) for run in parts], out=offs[1:])
    flat = [i for run in parts for i in run]
    return offs, (np.array(flat, dtype=np.uint32) if flat else _EMPTY)


def _with_id(offs: np.ndarray, ids: np.ndarray, k: int, ident: int) -> np.ndarray | None:
    """``ids`` with ``ident`` put into its sorted run ``k`` (``offs`` moved in place); None,
    and nothing changed, if the run holds it."""
    lo, hi = int(offs[k]), int(offs[k + 1])
    j = lo + int(np.searchsorted(ids[lo:hi], ident))
    if j < hi and int(ids[j]) == ident:
        return None
    offs[k + 1 :] += 1
    return _put(ids, j, np.array((ident,), dtype=np.uint32))


def _without_id(offs: np.ndarray, ids: np.ndarray, k: int, ident: int) -> np.ndarray | None:
    """``ids`` without ``ident`` in run ``k`` (``offs`` moved in place); None, and nothing
    changed, if the run lacks it."""
    lo, hi = int(offs[k]), int(offs[k + 1])
    j = lo + int(np.searchsorted(ids[lo:hi], ident))
    if j == hi or int(ids[j]) != ident:
        return None
    offs[k + 1 :] -= 1
    return _cut(ids, j, j + 1)


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
    """An extended leaf: per item the key, ``eq`` and ``bound`` id runs, three pointers.

    A leaf read from its page keeps its runs as the page's two arrays (``offs``, ``ids``:
    the layout above) and a writer changes them there (:meth:`insert_item`,
    :meth:`add_id`, :meth:`remove_id`, :meth:`delete_item`, :meth:`split`): a few numpy
    calls a change and none an item, and the page is written back from the arrays.  The
    per-item lists :attr:`eq` and :attr:`bound` are made only when asked for (checks, the
    delete path's rebalancing); from then on the node holds them, and is packed from them.
    Why: an online insert into a dense store changes ~2.5 leaves an entry; decoding each
    to 64 lists and packing it back took ~2.8 s of 11.6 in a profile of 500 dense
    subscriptions (docs/bench/live/README.md, "dwrite49").
    """

    KIND: ClassVar[int] = 2
    __slots__ = (
        "_bound",
        "_eq",
        "_ids",
        "_offs",
        "gtp",
        "keys",
        "ltp",
        "nep",
        "next",
        "page",
        "prev",
    )

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
        self._eq: list[list[int]] | None = eq if eq is not None else []
        self._bound: list[list[int]] | None = bound if bound is not None else []
        self._offs: np.ndarray | None = None  # (int64, 2n + 1) while the lists are None
        self._ids: np.ndarray = _EMPTY
        self.gtp: list[int] = gtp if gtp is not None else []
        self.ltp: list[int] = ltp if ltp is not None else []
        self.nep: list[int] = nep if nep is not None else []

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> LeafNode:
        prev, nxt, keys, offs, ids, gtp, ltp, nep = fields
        bounds, flat = unpack_u32(offs), unpack_u32(ids)
        node = cls(
            page,
            prev,
            nxt,
            list(keys),
            None,
            None,
            unpack_u64(gtp).tolist(),
            unpack_u64(ltp).tolist(),
            unpack_u64(nep).tolist(),
        )
        node._eq = node._bound = None
        node._offs, node._ids = bounds.astype(np.int64), flat
        return node

    @classmethod
    def from_runs(
        cls,
        page: int,
        prev: int,
        nxt: int,
        columns: tuple[list[Any], ...],
        offs: np.ndarray,
        ids: np.ndarray,
    ) -> LeafNode:
        """A leaf of ``columns`` (keys, gtp, ltp, nep) and runs ``offs`` (int64), ``ids``."""
        keys, gtp, ltp, nep = columns
        node = cls(page, prev, nxt, keys, None, None, gtp, ltp, nep)
        node._eq = node._bound = None
        node._offs, node._ids = offs, ids
        return node

    def copy(self) -> LeafNode:
        """A writable copy (:meth:`storage.txn.WriteTxn.load_mut` takes the cached node so,
        not decoded again): the columns copied, the ids array shared (changes replace it)."""
        node = LeafNode(
            self.page,
            self.prev,
            self.next,
            self.keys.copy(),
            None,
            None,
            self.gtp.copy(),
            self.ltp.copy(),
            self.nep.copy(),
        )
        if self._offs is None:
            eq, bound = self._lists()
            node._eq, node._bound = [r.copy() for r in eq], [r.copy() for r in bound]
        else:
            node._eq = node._bound = None
            node._offs, node._ids = self._offs.copy(), self._ids
        return node

    @property
    def eq(self) -> list[list[int]]:
        """Per item its ``=`` run (the node keeps the lists from now on)."""
        return self._lists()[0]

    @property
    def bound(self) -> list[list[int]]:
        """Per item its ``>=``/``<=`` run (the node keeps the lists from now on)."""
        return self._lists()[1]

    def _lists(self) -> tuple[list[list[int]], list[list[int]]]:
        if self._eq is None or self._bound is None:
            assert self._offs is not None
            parts = _unpack_parts(self._offs, self._ids)
            self._eq, self._bound = parts[0::2], parts[1::2]
            self._offs, self._ids = None, _EMPTY
        return self._eq, self._bound

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(offs, ids)`` of the runs; lists made before are packed and let go."""
        if self._offs is None:
            eq, bound = self._eq or [], self._bound or []
            parts: list[list[int]] = []
            for pair in zip(eq, bound, strict=True):
                parts.extend(pair)
            self._offs, self._ids = _flatten(parts)
            self._eq = self._bound = None
        return self._offs, self._ids

    def to_fields(self) -> list[Any]:
        if self._offs is None:
            parts: list[list[int]] = []
            for eq, bound in zip(self.eq, self.bound, strict=True):
                parts.append(eq)
                parts.append(bound)
            offs, ids = _pack_parts(parts)
        else:
            offs, ids = pack_u32(self._offs), self._ids.tobytes()
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

    def run(self, i: int, part: int) -> np.ndarray | list[int]:
        """Item ``i``'s ``=`` (part 0) or bound (part 1) run, read-only."""
        if self._offs is None:
            return self._lists()[part][i]
        k = 2 * i + part
        return self._ids[self._offs[k] : self._offs[k + 1]]

    def item_empty(self, i: int) -> bool:
        if self._offs is None:
            return not (self.eq[i] or self.bound[i])
        return bool(self._offs[2 * i] == self._offs[2 * i + 2])

    def add_id(self, i: int, part: int, ident: int) -> bool:
        """Put ``ident`` into item ``i``'s run ``part`` (0 ``=``, 1 bound); False if there."""
        offs, ids = self._arrays()
        changed = _with_id(offs, ids, 2 * i + part, ident)
        if changed is None:
            return False
        self._ids = changed
        return True

    def remove_id(self, i: int, part: int, ident: int) -> bool:
        """Take ``ident`` out of item ``i``'s run ``part``; False if it was not there."""
        offs, ids = self._arrays()
        changed = _without_id(offs, ids, 2 * i + part, ident)
        if changed is None:
            return False
        self._ids = changed
        return True

    def insert_item(self, i: int, key: Any, gtp: int, ltp: int, nep: int) -> None:
        """A new item with empty id runs at position ``i``."""
        self.keys.insert(i, key)
        if self._offs is None:
            self.eq.insert(i, [])
            self.bound.insert(i, [])
        else:
            at = self._offs[2 * i]
            self._offs = _put(self._offs, 2 * i, np.array((at, at), dtype=np.int64))
        self.gtp.insert(i, gtp)
        self.ltp.insert(i, ltp)
        self.nep.insert(i, nep)

    def delete_item(self, i: int) -> None:
        if self._offs is None:
            for column in self._columns():
                del column[i]
            return
        for column in (self.keys, self.gtp, self.ltp, self.nep):
            del column[i]
        offs = self._offs
        lo, hi = int(offs[2 * i]), int(offs[2 * i + 2])
        self._ids = _cut(self._ids, lo, hi)
        self._offs = np.concatenate([offs[: 2 * i + 1], offs[2 * i + 3 :] - (hi - lo)])

    def split(self, i: int, page: int) -> LeafNode:
        """Move items ``i:`` to a new leaf ``page`` linked after this one (its ``next``
        pointer the caller sets); runs moved as array slices when held so."""
        if self._offs is None:
            right = LeafNode(page, self.page, self.next)
            right.extend(self.cut(i))
            return right
        columns = (self.keys, self.gtp, self.ltp, self.nep)
        moved = tuple(column[i:] for column in columns)
        for column in columns:
            del column[i:]
        offs, ids = self._offs, self._ids
        at = int(offs[2 * i])
        right = LeafNode.from_runs(page, self.page, self.next, moved, offs[2 * i :] - at, ids[at:])
        self._offs, self._ids = offs[: 2 * i + 1].copy(), ids[:at]
        return right

    def cut(self, i: int) -> tuple[list[Any], ...]:
        """Remove and return items ``i:`` column by column (for splits and merges)."""
        columns = self._columns()
        out = tuple(column[i:] for column in columns)
        for column in columns:
            del column[i:]
        return out

    def _columns(self) -> tuple[list[Any], ...]:
        eq, bound = self._lists()
        return (self.keys, eq, bound, self.gtp, self.ltp, self.nep)

    def extend(self, columns: tuple[list[Any], ...]) -> None:
        for mine, theirs in zip(self._columns(), columns, strict=True):
            mine.extend(theirs)

    def prepend(self, columns: tuple[list[Any], ...]) -> None:
        for mine, theirs in zip(self._columns(), columns, strict=True):
            mine[:0] = theirs

    def sidset(self, i: int) -> np.ndarray:
        """Ids that hold when the event value equals key ``i`` (eq and bound runs)."""
        if self._offs is None:
            return np.array(self.eq[i] + self.bound[i], dtype=np.uint32)
        return self._ids[self._offs[2 * i] : self._offs[2 * i + 2]]


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
    slice.  Writers change the arrays too (:meth:`insert_item`, :meth:`add_id`,
    :meth:`remove_id`, :meth:`delete_item`, :meth:`cut`, :meth:`extend`: a few numpy calls
    over the node's ~4,000 offsets, no list a run; unpacking nodes to lists and packing them
    back took 2.8 s of 11.6 in a profile of 500 dense subscriptions, docs/bench/live).
    :meth:`runs` (per-item lists, for tests that damage a node) invalidates the arrays,
    which are packed again when next needed.
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

    def copy(self) -> ListNode:
        """A writable copy (as :meth:`LeafNode.copy`): keys and offsets copied, ids shared."""
        node = ListNode(
            self.page, self.list_kind, self.sentinel, self.prev, self.next, self.keys.copy()
        )
        if self._runs is not None:
            node._runs = [run.copy() for run in self._runs]
        else:
            node._runs = None
            offs, ids = self.flat()
            node._flat = (offs.copy(), ids)
        return node

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
            self._flat = _flatten(self._runs or [])
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
        if self._runs is not None:
            return all(not self._runs[i * p + part] for part in range(p))
        offs = self.flat()[0]
        return bool(offs[i * p] == offs[(i + 1) * p])

    def _owned(self) -> tuple[np.ndarray, np.ndarray]:
        """``(offs, ids)`` for a change in place: per-item lists made before are packed."""
        flat = self.flat()
        self._runs = None
        return flat

    def add_id(self, i: int, part: int, ident: int) -> bool:
        """Put ``ident`` into item ``i``'s run ``part``; False if it was there."""
        offs, ids = self._owned()
        changed = _with_id(offs, ids, i * self.nparts + part, ident)
        if changed is None:
            return False
        self._flat = (offs, changed)
        return True

    def remove_id(self, i: int, part: int, ident: int) -> bool:
        """Take ``ident`` out of item ``i``'s run ``part``; False if it was not there."""
        offs, ids = self._owned()
        changed = _without_id(offs, ids, i * self.nparts + part, ident)
        if changed is None:
            return False
        self._flat = (offs, changed)
        return True

    def insert_item(self, i: int, key: Any) -> None:
        """A new item with empty runs at position ``i``."""
        offs, ids = self._owned()
        self.keys.insert(i, key)
        p = self.nparts
        self._flat = (_put(offs, i * p, np.full(p, offs[i * p], dtype=np.int64)), ids)

    def delete_item(self, i: int) -> None:
        offs, ids = self._owned()
        p = self.nparts
        del self.keys[i]
        lo, hi = int(offs[i * p]), int(offs[(i + 1) * p])
        rest = offs[(i + 1) * p + 1 :] - (hi - lo)
        self._flat = (np.concatenate([offs[: i * p + 1], rest]), _cut(ids, lo, hi))

    def cut(self, i: int) -> tuple[list[Any], tuple[np.ndarray, np.ndarray]]:
        """Remove and return items ``i:`` (keys, and their runs as ``(offs, ids)`` from 0)."""
        offs, ids = self._owned()
        p = self.nparts
        at = int(offs[i * p])
        out = (self.keys[i:], (offs[i * p :] - at, ids[at:]))
        del self.keys[i:]
        self._flat = (offs[: i * p + 1].copy(), ids[:at])
        return out

    def extend(self, keys: list[Any], runs: tuple[np.ndarray, np.ndarray]) -> None:
        """Append items ``keys`` with their runs (``(offs, ids)`` from 0, as :meth:`cut`)."""
        offs, ids = self._owned()
        more, more_ids = runs
        self._flat = (
            np.concatenate([offs, more[1:] + offs[-1]]),
            np.concatenate([ids, more_ids]).astype(np.uint32, copy=False),
        )
        self.keys.extend(keys)
