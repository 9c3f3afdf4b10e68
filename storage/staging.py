"""Staging directories beside a store, owned by the process that builds in them.

``bexdb load`` builds a new store in ``.NAME.building-XXXX``, ``bexdb compact`` in
``.NAME.compact-XXXX``, ``bexdb subscribe`` of a new store in ``.NAME.creating-XXXX`` and
``bexdb match --engine spark`` its output directory in ``.NAME.matching-XXXX``, all beside
the target ``NAME``, and puts the result in place (:mod:`storage.swap`); ``bexdb serve``
keeps its workers' metrics in ``.bexdb-serve.metrics-XXXX`` in the temporary directory.  A
process killed meanwhile (``kill -9``, a crash, the machine going down) cannot remove its
staging directory, and it can hold as much as the store.

So each staging directory holds a file ``owner``: the owner's pid, start time and command
as JSON, and an exclusive ``flock`` that the owner holds for as long as it lives.  The
kernel drops the lock when the process dies, however it dies, so "is the owner alive" is
one non-blocking ``flock`` attempt, with no pid reuse to fool it.  The next load or
compaction of the same target removes the directories no live process owns
(:func:`remove_stale`); ``bexdb inspect`` and ``bexdb verify`` list them (:func:`found`).
A directory without an ``owner`` file (a process killed between creating the directory
and naming its locked ``owner`` file, microseconds apart) counts as stale once it is a
minute old.  A fork of the owner (a service's worker) holds the lock too, and leaving
the block it removes nothing: only the process that made the directory removes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

#: The kinds of staging directory, by the command that makes them.
KINDS = {
    "building": "bexdb load",
    "compact": "bexdb compact",
    "creating": "bexdb subscribe",
    "matching": "bexdb match",
    "metrics": "bexdb serve",
}
OWNER = "owner"
_UNOWNED_GRACE = 60.0  # seconds a directory without an owner file is presumed in creation


@dataclass
class Staging:
    """A staging directory found beside a store."""

    path: Path
    kind: str  # a key of KINDS
    live: bool  # its owner still runs
    owner: dict[str, object]  # pid, started, command (empty when unknown)

    def describe(self) -> str:
        pid = self.owner.get("pid", "?")
        state = f"in use by pid {pid}" if self.live else f"stale, left by pid {pid}"
        return f"{self.path.name} ({KINDS[self.kind]}; {state}; {_size(self.path):,} bytes)"


@contextmanager
def staging(target: Path, kind: str) -> Iterator[Path]:
    """A new staging directory for ``target``, owned (locked) by this process until the
    block ends, then removed.  Stale ones of the same target are removed first."""
    remove_stale(target)
    path = Path(tempfile.mkdtemp(prefix=f".{target.name}.{kind}-", dir=target.parent))
    fd = os.open(path / ".owner", os.O_RDWR | os.O_CREAT, 0o644)
    maker = os.getpid()
    try:  # locked and written before it is named ``owner``: never seen unlocked alive
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        doc = {"pid": os.getpid(), "started": _start_time(os.getpid()), "command": sys.argv}
        os.write(fd, json.dumps(doc).encode())
        os.rename(path / ".owner", path / OWNER)
        yield path
    finally:
        if os.getpid() == maker:
            shutil.rmtree(path, ignore_errors=True)
        os.close(fd)  # the lock goes with it (a fork's copy: when the last copy closes)


def found(target: str | os.PathLike[str]) -> list[Staging]:
    """The staging directories of ``target`` (of any kind), live or stale."""
    where = Path(target).absolute()
    out = []
    for kind in KINDS:
        for path in sorted(where.parent.glob(f".{where.name}.{kind}-*")):
            if path.is_dir():
                live, owner = _owner(path)
                out.append(Staging(path, kind, live, owner))
    return out


def remove_stale(target: str | os.PathLike[str]) -> list[Staging]:
    """Remove the staging directories of ``target`` that no live process owns."""
    stale = [s for s in found(target) if not s.live]
    for s in stale:
        shutil.rmtree(s.path, ignore_errors=True)
    return stale


def _owner(path: Path) -> tuple[bool, dict[str, object]]:
    """Whether a live process holds the directory's lock, and what its file says."""
    try:
        fd = os.open(path / OWNER, os.O_RDONLY)
    except FileNotFoundError:
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:  # removed meanwhile by its owner
            return True, {}
        return age < _UNOWNED_GRACE, {}
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            live = True
        else:
            live = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            doc = json.loads(os.read(fd, 1 << 16) or b"{}")
        except ValueError:
            doc = {}
        return live, doc if isinstance(doc, dict) else {}
    finally:
        os.close(fd)


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc``; None elsewhere):
    with the pid, it names the process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with suppress(OSError):  # removed meanwhile
                total += os.lstat(os.path.join(root, name)).st_size
    return total
