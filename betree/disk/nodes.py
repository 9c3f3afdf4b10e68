"""The BE-Tree's two page kinds: c-nodes (with their bucket and p-directory) and l-node pages.

``betree.cnode`` (kind 6, version 1) — one page per c-node.  Every c-node but the root is
the c-node of one c-directory bucket (BE-Tree paper, Fig. 2)::

    [attr, top, lo, hi, parent, left, right, lnode, size, cap, pdir]

    attr     the attribute of the c-directory holding this bucket (None for the root)
    top      1 for the top bucket of a c-directory (encloses the whole domain; its
             children halve the hint range [lo, hi]), else 0
    lo, hi   the bucket's grid interval (see betree.disk.grid)
    parent   the parent bucket, or for a top bucket the c-node owning the p-node
    left, right  child buckets (both 0 for a leaf bucket)
    lnode    first page of the l-node chain (0 when empty)
    size     clauses in the l-node;  cap  its capacity max_cap^j
    pdir     the p-directory: [[attribute, top bucket page, score], ...]; score is the
             number of clauses below that p-node (its popularity).  Held as tuples: a
             c-node read (or committed) is shared by the page cache and left untracked by
             the garbage collector; a writer's copy (:meth:`CNode.copy`) holds a list of
             them, whose entries it replaces

``betree.lnode`` (kind 4, version 2: clause lengths, not offsets) — one page of an
l-node; an l-node larger than one page spills into a chain of them, read on demand::

    [next, cids: bytes u64 x n, exts: list, lens: bytes u32 x n, atoms: bytes u32]

    clause i has internal id cids[i] = subscription id << 16 | clause number, external
    subscription id exts[i], and the lens[i] predicate (atom) ids that follow those of
    clause i-1 in atoms — never empty (the always-true atom 0 stands for an empty
    conjunction).  Lengths rather than offsets, so that the pages an event visits can be
    concatenated and checked in one vectorised pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from storage.codec import int_ids, pack_u32, unpack_u32, unpack_u64

#: Target bytes of one l-node page: LMDB moves values above ~2 KB to overflow pages.
PAGE_BUDGET = 1900

#: A p-directory entry ``(attribute, top bucket page, score)`` and the p-directory: a
#: tuple in a shared c-node, a list in a writer's copy.
PEntry = tuple[Any, ...]
PDir = list[PEntry] | tuple[PEntry, ...]


class CNode:
    """A c-node: bucket geometry, l-node head and p-directory."""

    KIND: ClassVar[int] = 6
    __slots__ = (
        "_slots",
        "attr",
        "cap",
        "hi",
        "left",
        "lnode",
        "lo",
        "page",
        "parent",
        "pdir",
        "pmap",
        "right",
        "size",
        "top",
    )

    def __init__(
        self,
        page: int,
        attr: str | None,
        top: bool,
        lo: int,
        hi: int,
        parent: int,
        cap: int,
        left: int = 0,
        right: int = 0,
        lnode: int = 0,
        size: int = 0,
        pdir: PDir | None = None,
    ) -> None:
        self.page = page
        self.attr = attr
        self.top = top
        self.lo = lo
        self.hi = hi
        self.parent = parent
        self.left = left
        self.right = right
        self.lnode = lnode
        self.size = size
        self.cap = cap
        self.pdir: PDir = pdir if pdir is not None else []
        self.pmap: dict[str, int] = {entry[0]: entry[1] for entry in self.pdir}
        self._slots: dict[str, int] | None = None

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> CNode:
        attr, top, lo, hi, parent, left, right, lnode, size, cap, pdir = fields
        pdir = tuple(map(tuple, pdir))  # (no copy when decoded: tuples already)
        return cls(page, attr, bool(top), lo, hi, parent, cap, left, right, lnode, size, pdir)

    def to_fields(self) -> list[Any]:
        """The page's fields (at commit); the p-directory becomes a tuple, as a read
        decodes it, since the node then goes to the page cache."""
        self.pdir = tuple(self.pdir)
        return [
            self.attr,
            int(self.top),
            self.lo,
            self.hi,
            self.parent,
            self.left,
            self.right,
            self.lnode,
            self.size,
            self.cap,
            self.pdir,
        ]

    def copy(self) -> CNode:
        """A private copy to mutate (:meth:`storage.txn.WriteTxn.load_mut`): its
        p-directory a list of the shared entry tuples, which :meth:`add_score` replaces."""
        return CNode(
            self.page,
            self.attr,
            self.top,
            self.lo,
            self.hi,
            self.parent,
            self.cap,
            self.left,
            self.right,
            self.lnode,
            self.size,
            list(self.pdir),
        )

    @property
    def is_leaf(self) -> bool:
        return not self.left

    @property
    def atomic(self) -> bool:
        return self.lo >= self.hi

    def encloses(self, lo: int, hi: int) -> bool:
        return self.top or (self.lo <= lo and hi <= self.hi)

    def slots(self) -> dict[str, int]:
        """Each p-directory attribute's position in :attr:`pdir` (made on first use: a
        clause routed through a root of ~100 p-nodes looks up its few attributes)."""
        if self._slots is None:
            self._slots = {entry[0]: k for k, entry in enumerate(self.pdir)}
        return self._slots

    def _pdir_list(self) -> list[PEntry]:
        if not isinstance(self.pdir, list):  # a shared page: the cache's, or a snapshot's
            raise TypeError(f"c-node {self.page} is shared: copy it to change it")
        return self.pdir

    def add_pnode(self, attr: str, top: int) -> None:
        self._pdir_list().append((attr, top, 0))
        self.pmap[attr] = top
        self._slots = None

    def drop_pnode(self, attr: str) -> None:
        self.pdir = [entry for entry in self.pdir if entry[0] != attr]
        del self.pmap[attr]
        self._slots = None

    def add_score(self, attr: str, delta: int) -> None:
        pdir = self._pdir_list()
        k = self.slots().get(attr)
        if k is not None:
            entry = pdir[k]
            pdir[k] = (attr, entry[1], entry[2] + delta)


Entry = tuple[int, Any, list[int]]  # (cid, external id, atom ids)


#: An l-node page for matching: clause ids (u64), external ids (:func:`id_array`), atoms
#: per clause, atom ids (u32) of every clause end to end.
PageArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def id_array(ids: Sequence[Any]) -> np.ndarray:
    """External ids as one numpy array: ``int64`` when every id is an int that
    :func:`storage.codec.encode_id` takes (the common case: a batch's hits are then
    gathered, sorted and written as JSON without a Python object per id), else an object
    array of the ids as they are.

    Cost: about 3 µs for a page's 60 ids (:func:`storage.codec.int_ids`).
    """
    if not ids:
        return np.empty(0, dtype=np.int64)
    ints = int_ids(ids)
    if ints is not None:
        return ints
    out = np.empty(len(ids), dtype=object)
    out[:] = ids
    return out


def listed(found: list[np.ndarray], lists: bool) -> list[Any]:
    """Each of ``found``'s id arrays as a list, if ``lists``."""
    return [ids.tolist() for ids in found] if lists else found


class LNodePage:
    """One page of an l-node.  Readers use :meth:`arrays`; writers the entry list.

    A page held as arrays (read, or copied from the cache) takes appended clauses into a
    tail list, joined to the arrays when they are next asked for (:meth:`arrays`, at
    commit): an append, what an insertion does, costs no conversion of the page's clauses
    to an entry list and back.  Removal converts (:meth:`entries`)."""

    KIND: ClassVar[int] = 4
    __slots__ = ("_arrays", "_entries", "_tail", "nbytes", "next", "page")

    def __init__(self, page: int, next: int = 0, entries: list[Entry] | None = None) -> None:
        self.page = page
        self.next = next
        self._entries: list[Entry] | None = entries if entries is not None else []
        self._arrays: PageArrays | None = None
        # (only beside arrays, never beside an entry list; a tuple, not tracked by the
        # garbage collector, in a page as the cache holds it)
        self._tail: list[Entry] | tuple[Entry, ...] = ()
        self.nbytes = sum(entry_bytes(e) for e in self._entries)

    @classmethod
    def from_fields(cls, page: int, fields: Sequence[Any]) -> LNodePage:
        nxt, cids, exts, lens, atoms = fields
        node = cls.__new__(cls)  # not __init__: its entry list is not wanted (decode cost)
        node.page = page
        node.next = nxt
        node._entries = None
        node._tail = ()
        node._arrays = (
            unpack_u64(cids),
            id_array(exts),
            unpack_u32(lens).astype(np.intp),
            unpack_u32(atoms),
        )
        node.nbytes = len(cids) + len(lens) + len(atoms) + 10 * len(exts)
        return node

    def copy(self) -> LNodePage:
        """A private copy to mutate (:meth:`storage.txn.WriteTxn.load_mut`): the entry
        list copied, the read-only arrays shared (mutation drops them)."""
        node = LNodePage.__new__(LNodePage)
        node.page = self.page
        node.next = self.next
        node._entries = None if self._entries is None else list(self._entries)
        node._arrays = self._arrays
        node._tail = self._tail if not self._tail else list(self._tail)
        node.nbytes = self.nbytes
        return node

    def to_fields(self) -> list[Any]:
        """The page's fields (at commit); the entry list goes, the arrays stay: the page
        cache then holds the page as a read decodes it, a few arrays, not two objects a
        clause for the garbage collector to walk (~100K a batch of 1,000 at 1M)."""
        cids, exts, lens, atoms = self.arrays()
        self._entries = None
        self._tail = ()
        return [self.next, cids.tobytes(), exts.tolist(), pack_u32(lens), atoms.tobytes()]

    def arrays(self) -> PageArrays:
        """``(cids u64, exts, lens, atoms u32)`` for vectorised matching (``exts`` as
        :func:`id_array` gives them: a batch gathers the ids of its hits with numpy)."""
        if self._arrays is None:
            self._arrays = _as_arrays(self._entries or [], None)
        elif self._tail:
            self._arrays, self._tail = _as_arrays(list(self._tail), self._arrays), ()
        return self._arrays

    def clauses(self) -> list[Entry]:
        """The clauses of the page as ``(cid, ext, atom ids)``, without changing it."""
        if self._entries is not None:
            return list(self._entries)
        cids, exts, lens, atoms = self.arrays()
        flat = atoms.tolist()
        out: list[Entry] = []
        at = 0
        for cid, ext, n in zip(cids.tolist(), exts.tolist(), lens.tolist(), strict=True):
            out.append((cid, ext, flat[at : at + n]))
            at += n
        return out

    def entries(self) -> list[Entry]:
        """The clauses of the page, for mutation (invalidates :meth:`arrays`)."""
        if self._entries is None:
            self._entries = self.clauses()
        self._arrays = None
        return self._entries

    def __len__(self) -> int:
        if self._entries is not None:
            return len(self._entries)
        assert self._arrays is not None
        return len(self._arrays[1]) + len(self._tail)

    def add(self, entry: Entry) -> None:
        if self._entries is None:
            tail = self._tail
            if isinstance(tail, tuple):
                tail = self._tail = list(tail)
            tail.append(entry)
        else:
            self._entries.append(entry)
            self._arrays = None
        self.nbytes += entry_bytes(entry)

    def remove(self, cid: int) -> bool:
        entries = self.entries()
        for i, entry in enumerate(entries):
            if entry[0] == cid:
                del entries[i]
                self.nbytes -= entry_bytes(entry)
                return True
        return False

    def holds(self, cid: int) -> bool:
        if self._entries is not None:
            return any(entry[0] == cid for entry in self._entries)
        return bool((self.arrays()[0] == np.uint64(cid)).any())

    def has_room(self, entry: Entry) -> bool:
        return not len(self) or self.nbytes + entry_bytes(entry) <= PAGE_BUDGET


def _as_arrays(entries: list[Entry], before: PageArrays | None) -> PageArrays:
    """The arrays of ``entries``, after those of ``before`` if given (the same arrays as
    of all the entries at once: ids through :func:`id_array` of the whole list)."""
    cids = np.array([e[0] for e in entries], dtype=np.uint64)
    ids = [e[1] for e in entries]
    lens = np.array([len(e[2]) for e in entries], dtype=np.intp)
    atoms = np.array([a for e in entries for a in e[2]], dtype=np.uint32)
    if before is None:
        return cids, id_array(ids), lens, atoms
    bc, be, bl, ba = before
    exts = id_array(be.tolist() + ids)
    return np.concatenate([bc, cids]), exts, np.concatenate([bl, lens]), np.concatenate([ba, atoms])


def entry_bytes(entry: Entry) -> int:
    """Approximate bytes a clause takes on a page (u64 id, u32 start, atoms, ext)."""
    return 12 + 4 * len(entry[2]) + 10
