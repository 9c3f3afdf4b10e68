"""LMDB's data file read by hand, before LMDB maps it: is every page it can reach sound?

LMDB maps ``data.mdb`` and follows the offsets and sizes written in its pages without
checking them against the page or the file.  A file cut short, or one flipped byte in a
page's node offsets, a node's key or data size, a child page number, makes LMDB (or the
code reading a value it returned) touch memory past the end of the file: SIGBUS, the
process dies (exit 135) instead of reporting an error.  This module reads the file with
``pread`` / a bounds-checked memory map and refuses it, as
:class:`~storage.errors.StoreDamaged` in :func:`storage.store.open_store`, unless every
read LMDB can make stays inside it.

Layout (lmdb.h / mdb.c, LMDB 0.9, 64-bit builds; all little-endian):

* page header, 16 bytes: ``mp_pgno`` u64, ``mp_pad`` u16, ``mp_flags`` u16 (``P_BRANCH``
  1, ``P_LEAF`` 2, ``P_OVERFLOW`` 4, ``P_META`` 8), then ``mp_lower``, ``mp_upper`` u16
  (an overflow page has ``mp_pages`` u32 there); then ``mp_ptrs``: one u16 offset per
  node, ``(mp_lower - 16) / 2`` of them, each pointing at a node in ``[mp_upper, psize)``;
* node, 8 bytes and its key and data: ``mn_lo``, ``mn_hi`` u16 (the data size, or in a
  branch page with ``mn_flags`` the child page number), ``mn_flags`` u16 (``F_BIGDATA``
  1: the data is the u64 number of an overflow page; ``F_SUBDATA`` 2: a named table's
  ``MDB_db``), ``mn_ksize`` u16, then the key, then the data;
* meta pages 0 and 1: the page header, then ``MDB_meta``: ``mm_magic`` u32 0xBEEFC0DE,
  ``mm_version`` u32 (1), ``mm_address``, ``mm_mapsize``, two ``MDB_db`` of 48 bytes (the
  free-page table's and the main table's: ``md_pad`` u32 — in the first, the page size —
  ``md_flags``, ``md_depth`` u16, four u64 counts, ``md_root`` u64), ``mm_last_pg``,
  ``mm_txnid`` u64.  LMDB uses the meta page of the later ``mm_txnid``.

Cost: the walk reads the header, offsets and node headers of every page reachable from
the roots (numpy, one level of every tree at a time; nothing is decoded): 62 ms for a
36 MB store of 100,000 BEGen subscriptions (8,600 pages, 390,000 entries), 39 ms for
19 MB, about 2 ms per MB; the meta checks alone are two small reads.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

_META = struct.Struct("<QHHHH II QQ IHHQQQQQ IHHQQQQQ QQ")
_MAGIC = 0xBEEFC0DE
_DATA_VERSION = 1
_HEADER = 16
_NODE = 8
_DB = 48  # sizeof(MDB_db)
_DB_ROOT = 40  # offset of md_root in MDB_db
_MAX_KEY = 511
P_BRANCH, P_LEAF, P_OVERFLOW, P_META = 1, 2, 4, 8
F_BIGDATA, F_SUBDATA = 1, 2
P_INVALID = (1 << 64) - 1


#: The file of an LMDB environment inside its directory: the one name the rest of bexdb
#: asks this module for (:func:`data_file`) rather than spelling out.
DATA_FILE = "data.mdb"


def data_file(path: str | os.PathLike[str]) -> Path:
    """The data file of the environment in directory ``path`` (which may not exist)."""
    return Path(path) / DATA_FILE


#: Data files up to this size are walked at every open (about 0.13 s at the limit); larger
#: ones only when asked (``bexdb verify``, ``bexdb compact``): see :func:`damage`.
WALK_LIMIT = 64 << 20


def damage(path: str | os.PathLike[str], walk: bool | None = None) -> str | None:
    """Why LMDB cannot map ``path/data.mdb`` safely, or None.

    Checks the meta pages (magic, version, page size, roots within the file): two
    small reads.  Then, with
    ``walk`` (None: when the file is at most :data:`WALK_LIMIT`), walks every table's
    B-tree from its root (:func:`_walk`), which costs about 2 ms per MB: at every open
    of a large store that would be a second or more, so theirs is walked by ``bexdb
    verify`` and ``bexdb compact`` only, and a damaged page header in one can still end
    another command with SIGBUS until verify finds it.

    The walk holds no LMDB reader slot, so a writer in another process may reuse the
    pages of the snapshot it walks once a newer commit frees them: a walk during which
    the last transaction id changed is done again (up to 5 times; then the file is left
    to LMDB's own checks rather than refused for what may be a commit in progress).

    A file shorter than its last page number says is not damaged by that alone: LMDB
    counts pages a transaction took and freed again without writing them, so a sound
    file can end before that page.  Such a file is walked whatever its size, and is
    damaged only when a page reachable from a root lies past its end (a truncation).
    """
    file = data_file(path)
    for _ in range(5):
        found, txnid, short = _meta_damage(file)
        if found is not None or txnid is None:
            return found
        if not (short or (walk if walk is not None else file.stat().st_size <= WALK_LIMIT)):
            return None
        found = _walk_file(file)
        if _meta_damage(file)[1] == txnid:
            return f"{found} ({short}: truncated?)" if found is not None and short else found
    return None


def _foreign_version(head: bytes) -> int | None:
    """The data format of a meta page laid out by another LMDB (py-lmdb 3 bundles LMDB
    1.0, whose page header is longer): the u32 after the magic, found by scanning."""
    for off in range(0, min(len(head), 64) - 7, 4):
        magic, version = struct.unpack_from("<II", head, off)
        if magic == _MAGIC and version != _DATA_VERSION:
            return int(version)
    return None


def _meta_damage(file: Path) -> tuple[str | None, int | None, str]:
    """What is wrong with the meta pages, the current transaction id (None when the
    meta pages are unusable), and, when the file ends before the last page the meta
    page records, by how much ("" otherwise: see :func:`damage`)."""
    with open(file, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 2 * _META.size:
            return f"{size} bytes, too short for LMDB's two meta pages", None, ""
        head = fh.read(_META.size)
        first = _META.unpack(head)
        psize = first[9]
        if first[5] != _MAGIC and (version := _foreign_version(head)) is not None:
            return (
                f"written in LMDB data format {version} (by LMDB 1.x), not format "
                f"{_DATA_VERSION} (LMDB 0.9), in which bexdb writes its stores",
                None,
                "",
            )
        if psize not in {1 << k for k in range(9, 17)}:
            return f"meta page 0 gives page size {psize}", None, ""
        if size < 2 * psize:
            return f"{size} bytes, too short for two {psize}-byte meta pages", None, ""
        fh.seek(psize)
        metas = [first, _META.unpack(fh.read(_META.size))]
    for n, meta in enumerate(metas):
        if not meta[2] & P_META or meta[5] != _MAGIC:
            return f"meta page {n} is not an LMDB meta page", None, ""
        if meta[6] != _DATA_VERSION:
            return f"meta page {n} has LMDB data version {meta[6]}", None, ""
        if meta[9] != psize:
            return f"meta page {n} gives page size {meta[9]}, meta page 0 {psize}", None, ""
    newer = max(metas, key=lambda meta: meta[26])
    last = newer[25]
    if last < 1:
        return f"last page number {last} is impossible (the meta pages are pages 0 and 1)", None, ""
    need = (last + 1) * psize
    short = f"{size} bytes, shorter than the {need} its meta page records" if size < need else ""
    end = min(last, size // psize - 1)
    roots = [root for root in (newer[16], newer[24]) if root != P_INVALID]
    if any(not 2 <= root <= end for root in roots):
        where = f"a table root page {roots} lies outside pages 2..{end}"
        return (f"{where} ({short}: truncated?)" if short else where), None, ""
    return None, int(newer[26]), short


def _walk_file(file: Path) -> str | None:
    """:func:`_walk` over the snapshot of the current meta page (which
    :func:`_meta_damage` found sound)."""
    with open(file, "rb") as fh:
        metas = [_META.unpack(fh.read(_META.size))]
        fh.seek(metas[0][9])
        metas.append(_META.unpack(fh.read(_META.size)))
    newer = max(metas, key=lambda meta: meta[26])
    last, psize, main = newer[25], newer[9], newer[24]
    roots = [root for root in (newer[16], main) if root != P_INVALID]
    count = min(last + 1, os.path.getsize(file) // psize)  # pages past the end: never read
    pages = np.memmap(file, dtype=np.uint8, mode="r", shape=(count, psize)).view(np.ndarray)
    try:
        return _walk(pages, roots, main if main != P_INVALID else None)
    finally:
        del pages


def _gather(pages: np.ndarray, rows: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes at ``offsets`` of the pages ``rows``, one row each (one numpy
    gather; an offset past the page raises IndexError, checked by the callers first)."""
    return pages[rows[:, None], offsets[:, None] + np.arange(width)]


def _u64(pages: np.ndarray, rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return _gather(pages, rows, offsets, 8).view("<u8").reshape(len(rows))


def _walk(pages: np.ndarray, roots: list[int], main_root: int | None) -> str | None:
    """Every page reachable from ``roots`` (the named tables' roots found on the way):
    its number, kind and bounds, each node inside its page, children and overflow pages
    inside the file, no page reached twice.  The first problem found, or None."""
    last, psize = pages.shape[0] - 1, pages.shape[1]
    words = pages.reshape(-1).view("<u2")  # LMDB keeps offsets and nodes 2-byte aligned
    seen = np.zeros(last + 1, dtype=bool)
    level = np.asarray(roots, dtype=np.int64)
    mains = np.zeros(len(level), dtype=bool)  # pages of the main table (holding MDB_db)
    if main_root is not None:
        mains[roots.index(main_root)] = True
    depth = 0
    while len(level):
        depth += 1
        if depth > 64:
            return "a B-tree deeper than 64 levels (a cycle?)"
        if seen[level].any() or len(np.unique(level)) != len(level):
            return "a page is reached twice (the B-trees are not trees)"
        seen[level] = True
        head = pages[level, :_HEADER]
        pgno = head[:, :8].copy().view("<u8").ravel()
        flags = head[:, 10].astype(np.int64) | head[:, 11].astype(np.int64) << 8
        lower = head[:, 12].astype(np.int64) | head[:, 13].astype(np.int64) << 8
        upper = head[:, 14].astype(np.int64) | head[:, 15].astype(np.int64) << 8
        kind = flags & ~0x10  # P_DIRTY may be left set on disk
        bad = np.flatnonzero(
            (pgno != level.astype(np.uint64))
            | ((kind != P_BRANCH) & (kind != P_LEAF))
            | (lower < _HEADER)
            | (lower % 2 != 0)
            | (lower > upper)
            | (upper > psize)
        )
        if len(bad):
            p = int(level[bad[0]])
            return f"page {p} has a broken header (number, kind or bounds)"
        count = (lower - _HEADER) // 2
        rows = np.repeat(np.arange(len(level)), count)
        starts = np.cumsum(count) - count
        slot = np.arange(len(rows)) - np.repeat(starts, count)
        page_rows = level[rows]
        base = page_rows * (psize // 2)  # in u16 words: every offset read here is even
        ptr = words[base + _HEADER // 2 + slot].astype(np.int64)
        outside = (ptr < upper[rows]) | (ptr + _NODE > psize) | (ptr % 2 != 0)
        if outside.any():
            p = int(page_rows[np.flatnonzero(outside)[0]])
            return f"page {p}: a node offset outside the page"
        node = base + ptr // 2
        lo, hi, nflags, ksize = (words[node + k].astype(np.int64) for k in range(4))
        branch = kind[rows] == P_BRANCH
        dsize = lo | hi << 16
        big = ~branch & (nflags & F_BIGDATA != 0)
        sub = ~branch & (nflags & F_SUBDATA != 0)
        stored = np.where(branch, 0, np.where(big, 8, np.where(sub, _DB, dsize)))
        end = ptr + _NODE + ksize + stored
        wrong = (
            (end > psize)
            | (ksize > _MAX_KEY)
            | (~branch & (ksize == 0))
            | (~branch & (nflags & ~(F_BIGDATA | F_SUBDATA) != 0))
            | (big & sub)
            | (sub & ~mains[rows])  # only the main table holds tables (no dupsort here)
        )
        if wrong.any():
            p = int(page_rows[np.flatnonzero(wrong)[0]])
            return f"page {p}: a node's key or data runs outside the page"
        data_at = ptr + _NODE + ksize
        children = (lo | hi << 16 | nflags << 32)[branch]
        over = _u64(pages, page_rows[big], data_at[big]).astype(np.int64)
        if ((children < 2) | (children > last)).any():
            return "a branch page points at a page outside the file"
        error = _overflow(pages, over, dsize[big], seen)
        if error is not None:
            return error
        in_main = mains[rows] & sub
        subroots = _u64(pages, page_rows[in_main], data_at[in_main] + _DB_ROOT)
        subroots = subroots[subroots != np.uint64(P_INVALID)].astype(np.int64)
        if ((subroots < 2) | (subroots > last)).any():
            return "a table's root page lies outside the file"
        child_main = mains[rows][branch]
        level = np.concatenate([children, subroots])
        mains = np.concatenate([child_main, np.zeros(len(subroots), dtype=bool)])
    return None


def _overflow(
    pages: np.ndarray, heads: np.ndarray, sizes: np.ndarray, seen: np.ndarray
) -> str | None:
    """Overflow runs (values larger than a page) inside the file, each of its size."""
    last, psize = pages.shape[0] - 1, pages.shape[1]
    if not len(heads):
        return None
    if ((heads < 2) | (heads > last)).any():
        return "a value's overflow page lies outside the file"
    head = pages[heads, :_HEADER]
    pgno = head[:, :8].copy().view("<u8").ravel()
    flags = head[:, 10].astype(np.int64) | head[:, 11].astype(np.int64) << 8
    count = head[:, 12:16].copy().view("<u4").ravel().astype(np.int64)
    bad = (
        (pgno != heads.astype(np.uint64))
        | (flags & ~0x10 != P_OVERFLOW)
        | (count < 1)
        | (heads + count - 1 > last)
        | (sizes > count * psize - _HEADER)
    )
    if bad.any():
        return f"overflow page {int(heads[np.flatnonzero(bad)[0]])} is broken or runs past the file"
    seen[heads] = True
    return None
