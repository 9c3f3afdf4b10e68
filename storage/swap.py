"""Putting a finished store directory in place of another in one atomic step.

A bulk load or a compaction writes a complete store beside its target, then swaps it in.
Two renames (old away, new in) leave a moment with no store at the target, and a crash
there loses it; Linux's ``renameat2(RENAME_EXCHANGE)`` swaps two directory entries in one
step, so the target always names a complete store, the old one or the new one.  glibc has
no Python binding for it (``os.rename`` is ``renameat``), hence ctypes.  Where the call is
missing (not Linux, or a file system without the flag) the two renames are used, and that
window is the documented cost.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.lmdbfile import data_file
from storage.staging import staging
from storage.store import SHARD_MANIFEST

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths atomically; False where the system cannot."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def fsync_dir(path: Path) -> None:
    """Make the directory entries of ``path`` durable (a rename is not, until then)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_in(new: Path, target: Path, *, keep_old: bool = False) -> Path | None:
    """Put directory ``new`` at ``target`` (same file system), replacing what is there.

    The replaced directory is removed afterwards; a process that still has it open keeps
    reading it (Linux frees the files when the last one closes them).  With ``keep_old``
    it is left for the caller to remove, and the directory to remove is returned (None
    when nothing was replaced): ``bexdb compact`` marks the old store retired first, so
    that only a directory fsync, not a removal, stands between the swap and the mark.
    """
    if not target.exists():
        os.rename(new, target)
        fsync_dir(target.parent)
        return None
    if _exchange(new, target):
        fsync_dir(target.parent)
        old = new  # now the old store
    else:
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rename(target, old / "store")
        os.rename(new, target)
        fsync_dir(target.parent)
    if keep_old:
        return old
    shutil.rmtree(old, ignore_errors=True)
    return None


@contextmanager
def creating(target: Path) -> Iterator[Path]:
    """Yield a directory in which to build a new store for ``target``; publish it on success.

    For writes that may create their store (``bexdb subscribe`` of a new one): a write that
    fails leaves nothing behind, not even an empty environment that would later read as a
    store without an index.  On success the store is renamed to ``target`` when ``target``
    does not exist, or its ``data.mdb`` linked into ``target`` (a directory holding no store)
    when it does; a store that appeared there meanwhile is never overwritten (the link
    fails, and :class:`FileExistsError` says so).  Cost: one rename or link and a directory
    fsync.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with staging(target, "creating") as scratch:
        built = scratch / "store"
        yield built
        if not target.exists():
            os.rename(built, target)
            fsync_dir(target.parent)
        else:
            os.link(data_file(built), data_file(target))
            fsync_dir(target)


def identity_probes(path: str | os.PathLike[str]) -> list[str]:
    """The files whose inode names the store at ``path`` (plain or sharded), for
    :func:`identity`: a replacement (:func:`swap_in`) puts new ones in place."""
    return [str(data_file(path)), str(Path(path) / SHARD_MANIFEST)]


def identity(probes: list[str]) -> tuple[int, int] | None:
    """What names the store now: device and inode of the first of ``probes`` that exists.

    The probe that named the store last is moved first, so that a plain store costs one
    ``stat`` (about 2 µs), not a failed one first.  None: neither exists (a replacement
    half-way, or no store).
    """
    for i, probe in enumerate(probes):
        try:
            st = os.stat(probe)
        except FileNotFoundError:
            continue
        if i:
            probes.insert(0, probes.pop(i))
        return st.st_dev, st.st_ino
    return None
