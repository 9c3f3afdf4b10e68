"""Store maintenance, of a plain store or of each shard of a sharded one: compaction
(``bexdb compact``), the self-adjustment settings (``bexdb adjust``) and the staging
directories a load or compaction leaves (``bexdb inspect`` and ``verify`` list them).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from betree.disk import catalog
from betree.disk.bulk import Batch
from betree.disk.writer import gc_paused
from betree.index import Index
from betree.stores.sharded import is_sharded, read_manifest, recover, store_paths
from betree.stores.shardwrite import WRITE_LOCK, has_journal, locked
from storage.errors import BexdbError, CheckFailed, StoreDamaged, StoreError
from storage.lmdbfile import damage as file_damage
from storage.lmdbfile import data_file
from storage.staging import found as staging_found
from storage.staging import staging
from storage.store import ReadTxn, store_exists
from storage.swap import swap_in


def compact(
    path: str | os.PathLike[str], rebuild: bool = False
) -> Iterator[tuple[str | None, Path, int, int]]:
    """Compact a plain store, or each shard of a sharded one in turn (each swap atomic):
    ``(shard name or None, store path, bytes before, bytes after)`` as each is done.

    Safe beside live writers (see :func:`compact_store`): they wait while a store is
    copied, and one that had the old store open reopens it (:mod:`betree.stores.live`).
    """
    if not is_sharded(path):
        before, after = compact_store(Path(path).absolute(), rebuild)
        yield None, Path(path).absolute(), before, after
        return
    root = Path(path)
    manifest = read_manifest(root)
    with locked(root, WRITE_LOCK, fcntl.LOCK_EX):  # no sharded batch meanwhile
        recover(root, manifest, held=True)
        for shard, store in store_paths(path):
            before, after = compact_store(store.absolute(), rebuild)
            yield shard, store.absolute(), before, after


def compact_store(target: Path, rebuild: bool = False) -> tuple[int, int]:
    """A compacting copy (optionally rebuilt) beside the store, then an atomic swap;
    returns the data file's bytes before and after.

    Everything from reading the store to the swap runs under the store's writer lock
    (:meth:`storage.store.Store.replacing`): a write committed before it is in the copy,
    and none can be committed after it into the old store, which is left marked retired.
    A writer blocked on the lock meanwhile, or holding the old store open, gets
    ``StoreReplaced`` at its next write, having written nothing, and reopens the path
    (:func:`betree.stores.live.write_reopening`).  The cost: writers wait for the copy, its
    check and (with ``rebuild``) the batch build, instead of losing what they commit
    meanwhile.
    """
    if not store_exists(target):  # opened writable below, which would create it
        raise StoreError(
            f"no store at {target}", "create it with `bexdb load` or `bexdb subscribe`"
        )
    damage = file_damage(target, walk=True)  # also a large file, before LMDB reads it
    if damage is not None:
        raise StoreDamaged(f"{data_file(target)}: {damage}")
    with Index.open(target) as idx:
        found = idx.store.damage()
        if found:  # copied, it would fail later with a less telling error, or be kept
            more = f" (and {len(found) - 1} more: run `bexdb verify`)" if len(found) > 1 else ""
            raise StoreDamaged(f"{target}: {found[0]}{more}")
        before = idx.store.size_on_disk()
        old: Path | None = None
        try:  # a compaction killed here leaves its staging; the next one removes it
            with (
                staging(target, "compact") as scratch,
                idx.store.replacing("compacted") as view,
            ):
                if rebuild:
                    _rebuild(idx, view, scratch / "raw")
                    with Index.open(scratch / "raw") as fresh:
                        fresh.store.copy_compact(scratch / "store")
                else:
                    idx.store.copy_compact(scratch / "store", txn=view)
                with Index.open(scratch / "store", readonly=True) as fresh:
                    try:
                        fresh.check()
                    except CheckFailed as exc:  # what was read is not what was written
                        raise StoreDamaged(
                            f"{target}: its compacted copy fails the index check "
                            f"({exc.violations[0]}; {len(exc.violations)} in all): "
                            "run `bexdb verify` on it"
                        ) from exc
                old = swap_in(scratch / "store", target, keep_old=True)
        finally:  # the old store is removed once marked retired (the blocks above ended)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    return before, os.path.getsize(data_file(target))


@contextmanager
def retiring(target: Path, reason: str) -> Iterator[None]:
    """Hold off the writers of the store at ``target`` while the block puts another store
    there (``bexdb load --replace``); on exit the old one takes no more writes.

    A plain store is held as a compaction holds it (:meth:`storage.store.Store.replacing`:
    its writer lock, then the mark ``retired``); a sharded one by its root's writer lock,
    after which its writers see the manifest replaced (:meth:`ShardedIndex.subscribe_many`).
    Either way a writer that had the old store open gets ``StoreReplaced`` (nothing
    written) and redoes its write in the new one, instead of committing where nobody will
    read it again.  A store that cannot be opened (damaged, another format: the reasons to
    replace it) takes no writes either, and is replaced as it is.  Cost: one open and a
    commit, or one ``flock``.
    """
    if is_sharded(target):
        with locked(target, WRITE_LOCK, fcntl.LOCK_EX):
            yield
        return
    if not store_exists(target):
        yield
        return
    try:
        idx = Index.open(target)
    except BexdbError:
        yield
        return
    with idx, idx.store.replacing(reason):
        yield


def _rebuild(idx: Index, view: ReadTxn, path: Path) -> None:
    """A fresh batch-built index (BE-B) from the subscriptions of ``view``, with their
    metadata."""
    with gc_paused():
        subs = list(catalog.subscription_records(view))
        with Index.open(path, schema=idx.schema, settings=idx.adjustment.settings(view)) as fresh:
            batch = Batch(fresh)
            for ident, expr, meta in subs:
                batch.add(ident, expr, fresh.engine.compiler().compile(ident, expr), meta)
            batch.build()


def adjust_store(
    path: str | os.PathLike[str],
    enabled: bool | None = None,
    window: int | None = None,
    theta: int | None = None,
    now: bool = False,
) -> list[dict[str, Any]]:
    """Change the self-adjustment settings of a store (of each shard; None keeps one),
    with ``now`` rank and recycle the nodes whose window has ended, and return each
    store's summary (``"shard"`` named when sharded; ``"ran"``: what ``now`` did)."""
    found = []
    for shard, store in store_paths(path):
        with Index.open(store) as idx:
            idx.adjustment.set(enabled, window, theta)
            done = idx.adjustment.flush() if now else None
            if done is not None:
                done["seconds"] = round(done["seconds"], 3)
            summary = idx.adjustment.summary()
        if done is not None:
            summary["ran"] = done
        found.append(summary if shard is None else {"shard": shard, **summary})
    return found


def staging_notes(store: str | os.PathLike[str]) -> list[str]:
    """Staging directories beside ``store`` (and beside each shard): a load or compaction
    in progress, or stale ones that a killed one left (removed by the next load or
    compaction of the same store: :mod:`storage.staging`)."""
    root = Path(store)
    try:
        paths = [root] + [path for shard, path in store_paths(root) if shard is not None]
    except StoreError:  # a damaged manifest: verify reports it, the notes make do without
        paths = [root]
    notes = []
    if has_journal(root):
        notes.append(
            "a write journal (journal.json) of a killed write is left; the next open or "
            "write of the store completes its batch"
        )
    for path in paths:
        for found in staging_found(path):
            what = f"staging directory {found.describe()}"
            if not found.live:
                what += f"; the next `bexdb load` or `bexdb compact` of {path.name} removes it"
            notes.append(what)
    return notes
