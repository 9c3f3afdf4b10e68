"""Writes to a sharded store: routing, the all-or-nothing batch across shards, and recovery.

Only stores whose manifest names :data:`betree.stores.sharded.HASH` as their partitioning take
writes: each id goes to shard ``shard_of(encode_id(id), K)``, so it lives in exactly one
shard, and replacing it never leaves a copy elsewhere.  A store split some other way
cannot route an id and is refused (:class:`~storage.errors.ShardedStore`).

**The batch (a write-ahead journal).**  One call's batch may touch several shards, each
its own LMDB environment with its own transactions.  A writer:

1. takes the root's writer lock (``flock`` on :data:`WRITE_LOCK` in the store root: it
   serialises sharded writers across processes, and ``bexdb compact`` of the store);
2. finishes any batch a killed writer left (step 6), then compiles and type-checks every
   expression against the schema and, for a strict delete, finds every id: a batch that
   would fail is refused here, before anything is written, so a redo cannot fail on input;
3. writes the batch (its id, and per shard the ordered puts and deletes) to
   :data:`JOURNAL` through a temporary file, fsync, rename and a directory fsync: the
   journal is there whole or not at all;
4. applies each shard's part in one LMDB transaction of that shard, which also records the
   batch id (record ``shardwrite/batch``, same transaction), committed with fsync;
5. removes the journal (and fsyncs the directory), then answers: acknowledged is durable.
6. Recovery: any open of the store (read or write) and any write that finds a journal
   takes the writer lock (a live writer holds it until its journal is gone; a killed one
   released it when it died) and redoes the part of every shard whose batch record is not
   the journal's batch id, then removes the journal.  Redoing is idempotent (a put
   replaces, a delete of an absent id does nothing), so a crash during recovery is
   recovered the same way.  A journal is never partly written, so a batch killed before
   step 3 ended left no shard touched and is simply gone.

So after ``kill -9`` at any moment, the next open has every batch wholly present (journal
written) or wholly absent (not), and every acknowledged batch present.

**Readers** never see a batch half-applied while its writer lives: step 4 of a batch of
several shards runs under an exclusive ``flock`` on :data:`READ_LOCK`, and a sharded
snapshot (and an open, which reads every shard's schema) begins its shards' read
transactions under a shared one (open, flock and close: a few µs per snapshot).  A batch
of one shard takes no such lock: its one transaction is seen whole or not at all, and
readers do not wait out its commit's fsync.  If the writer
is killed during step 4, a store already open for reading sees the shards as they are
(some with the batch) until a write or a new open completes it (any later write, from
any process, completes it first).

Compaction (``bexdb compact``) holds the writer lock for its whole run, so no batch
straddles it; a writer or reader that had a compacted shard open reopens it (one ``stat``
per shard per snapshot or write).  ``bexdb load --replace`` holds the old root's writer
lock while it swaps the new store in (:func:`betree.stores.maintain.retiring`), and a writer
checks under the lock that the root's manifest is still the one it opened: a writer of the
old store gets ``StoreReplaced``, nothing written, and redoes its batch in the new one.

A batch whose ids all fall in one shard skips steps 3 and 5: that shard's one transaction
is all or nothing by itself.

After step 5, still under the writer lock but not the read lock, each shard written
places its pending clauses if they passed their bound (:mod:`betree.disk.pending`): a
transaction of that shard's own, changing no subscription, so no journal and no reader
waits for it; killed, it leaves the pending area as it was.

Costs: a journal file write, two fsyncs of it and its directory, one fsync'd commit per
shard touched, and the removal's directory fsync; a one-shard batch (a single id) only its
commit (measured figures: docs/bench/README.md, "Writes to sharded stores").

The manifest is not rewritten by writes (a new manifest would make every open copy reopen
the store): its per-shard counts stay those of the load, and ``bexdb verify`` checks such
a store by routing (every id in the shard its hash names), not by those counts.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

from betree.disk import schemaedit
from betree.disk.catalog import SubId
from betree.index import Index, gc_paused
from betree.lang.schema import Schema
from storage.errors import InvalidInput, StoreDamaged, StoreError, StoreReplaced
from storage.swap import fsync_dir

#: The journal of the batch being applied (absent between batches).
JOURNAL = "journal.json"
#: Held exclusively by the one sharded writer (and by compaction) of a store.
WRITE_LOCK = ".write.lock"
#: Held exclusively while a batch is applied to the shards, shared while a snapshot begins.
READ_LOCK = ".read.lock"
#: The record each shard's write transaction stores: the id of the batch it applied.
BATCH_NS = b"shardwrite"
BATCH_KEY = b"batch"

#: One operation of a batch: ``["put", id, expression]``, ``["put", id, expression, meta]``
#: (the metadata's JSON text, :mod:`betree.disk.metadata`; journals from before it have none)
#: or ``["delete", id]``; or, alone in its batch, ``["schema", document]``
#: (:func:`change_schema`).
Op = list[Any]


def journal_path(root: Path) -> Path:
    return root / JOURNAL


def has_journal(root: Path) -> bool:
    return journal_path(root).exists()


@contextmanager
def locked(root: Path, name: str, mode: int) -> Iterator[None]:
    """``flock(mode)`` on the file ``name`` in ``root`` (created if missing), held for the
    block.  Lock files hold nothing; a killed holder's lock is released by the kernel."""
    try:
        fd = os.open(root / name, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(
            f"{root}: cannot open its lock file {name} ({exc.strerror})",
            "a sharded store is written (and a killed write completed) only where its "
            "directory is writable",
        ) from exc
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def reading(root: Path) -> Iterator[None]:
    """Shared :data:`READ_LOCK` while a snapshot begins (none where it can be neither
    created nor opened: a read-only directory, where no writer can be either)."""
    try:
        fd = os.open(root / READ_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        try:
            fd = os.open(root / READ_LOCK, os.O_RDONLY)
        except OSError:
            yield
            return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def write_journal(root: Path, batch: str, parts: dict[int, list[Op]]) -> None:
    """Step 3: the batch, durable and whole, in :data:`JOURNAL`."""
    doc = {"batch": batch, "shards": {str(i): ops for i, ops in parts.items()}}
    tmp = root / (JOURNAL + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc))  # (json.dump encodes in Python, dumps in C: same text)
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, journal_path(root))
    fsync_dir(root)


def read_journal(root: Path) -> tuple[str, dict[int, list[Op]]] | None:
    """The batch in the journal, or None if there is none."""
    try:
        text = journal_path(root).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
        parts = {int(i): ops for i, ops in doc["shards"].items()}
        batch = doc["batch"]
        if not isinstance(batch, str) or not all(isinstance(ops, list) for ops in parts.values()):
            raise ValueError("unexpected shape")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreDamaged(
            f"{journal_path(root)}: the write journal is unreadable ({exc})",
            "it was written whole or not at all, so the file was damaged since",
        ) from exc
    return batch, parts


def remove_journal(root: Path) -> None:
    """Step 5: the batch is in every shard; the journal goes."""
    journal_path(root).unlink(missing_ok=True)
    fsync_dir(root)


def applied_batch(index: Index) -> str | None:
    """The id of the last batch this shard applied (step 4's record), or None."""
    with index.store.read() as txn:
        raw = txn.get(BATCH_NS, BATCH_KEY)
    return None if raw is None else bytes(raw).decode()


def apply_part(
    index: Index, batch: str, ops: Sequence[Op], clauses: Sequence[Any] | None = None
) -> list[bool]:
    """Step 4 for one shard: its operations and the batch record in one transaction
    (committed with fsync); per operation, whether the id was new (put) or found (delete).
    ``clauses``: each put's compiled clauses, when step 2 has them (else compiled here)."""
    if ops and ops[0][0] == "schema":  # a batch of its own: ["schema", document]
        with index.store.write() as txn:
            schemaedit.write(txn, Schema.from_json(ops[0][1]))
            txn.put(BATCH_NS, BATCH_KEY, batch.encode())
        index.engine.refresh_schema()
        return [True]
    with gc_paused():
        if clauses is None:
            clauses = [
                index.engine.compiler().compile(op[1], op[2]) if op[0] == "put" else None
                for op in ops
            ]
        compiled = list(zip(ops, clauses, strict=True))
        out: list[bool] = []
        with index.store.write() as txn, index.engine.writer(txn) as w:
            puts: list[tuple[Any, str, Any, str | None]] = []  # a run of puts: one insert_many
            for op, found in compiled:
                if found is not None:
                    puts.append((op[1], op[2], found, _meta(op)))
                    continue
                out += w.insert_many(puts)
                puts = []
                out.append(w.delete(op[1]))
            out += w.insert_many(puts)
            txn.put(BATCH_NS, BATCH_KEY, batch.encode())
    w.committed()
    index.engine.caught_up(len(out), w.logged)
    return out


def _meta(op: Op) -> str | None:
    """A put's metadata text (none in a put without it, as journals before it wrote)."""
    meta = op[3] if len(op) > 3 else None
    if meta is not None and not isinstance(meta, str):
        raise StoreDamaged(f"the write journal's put of {op[1]!r} holds metadata not as text")
    return meta


def redo(root: Path, shards: Callable[[int, bool], Index]) -> bool:
    """Step 6 (the caller holds the writer lock): complete the journal's batch in every
    shard that lacks it, then remove the journal.  ``shards``: as for :func:`write_batch`.
    True if there was a journal."""
    (root / (JOURNAL + ".tmp")).unlink(missing_ok=True)  # a batch killed before step 3
    found = read_journal(root)
    if found is None:
        return False
    batch, parts = found
    with locked(root, READ_LOCK, fcntl.LOCK_EX):
        for i, ops in sorted(parts.items()):
            if applied_batch(shards(i, False)) != batch:
                _apply(shards, i, batch, ops)
    remove_journal(root)
    return True


def new_batch() -> str:
    return uuid.uuid4().hex


def write_batch(
    root: Path,
    shards: Callable[[int, bool], Index],
    route: Callable[[SubId], int],
    ops: list[Op],
    clauses: Sequence[Any] | None = None,
    routes: Sequence[int] | None = None,
) -> list[bool]:
    """Steps 3-5 for ``ops`` (in order), the caller holding the writer lock and having
    validated them (step 2; ``clauses``: what it compiled, per operation, None for a
    delete; ``routes``: each operation's shard, if it has them); per operation, whether
    the id was new (put) or found (delete).

    ``shards(i, reopen)``: shard ``i`` open for writing; with ``reopen``, opened afresh (it
    was compacted since: :class:`StoreReplaced`, nothing written, so it is redone there).
    """
    parts: dict[int, list[Op]] = {}
    compiled: dict[int, list[Any]] = {}
    where: list[tuple[int, int]] = []
    for n, op in enumerate(ops):
        i = route(op[1]) if routes is None else routes[n]
        part = parts.setdefault(i, [])
        where.append((i, len(part)))
        part.append(op)
        compiled.setdefault(i, []).append(None if clauses is None else clauses[n])
    batch = new_batch()
    journal = len(parts) > 1  # one shard's transaction is all or nothing by itself
    if journal:
        write_journal(root, batch, parts)
    results: dict[int, list[bool]] = {}
    with locked(root, READ_LOCK, fcntl.LOCK_EX) if journal else nullcontext():
        for i, part in sorted(parts.items()):
            results[i] = _apply(shards, i, batch, part, None if clauses is None else compiled[i])
    if journal:
        remove_journal(root)
    for i in sorted(parts):  # outside the read lock: readers do not wait for a placement
        with suppress(StoreReplaced):  # (compacted meanwhile: the next batch places)
            shards(i, False).engine.place(due_only=True)
    return [results[i][k] for i, k in where]


def _apply(
    shards: Callable[[int, bool], Index],
    i: int,
    batch: str,
    ops: list[Op],
    clauses: list[Any] | None = None,
) -> list[bool]:
    try:
        return apply_part(shards(i, False), batch, ops, clauses)
    except StoreReplaced:  # compacted since it was opened; nothing was written
        return apply_part(shards(i, True), batch, ops, clauses)


def change_schema(
    root: Path, shards: Callable[[int, bool], Index], count: int, doc: Any
) -> dict[str, list[str]]:
    """A schema change (:mod:`betree.disk.schemaedit`) in all ``count`` shards or none: steps
    3-5 with the batch ``["schema", new document]`` in every shard's part.  The caller
    holds the writer lock and has completed any killed writer's batch (step 2)."""
    current = [shards(i, False).engine.refresh_schema() for i in range(count)]
    if any(schema != current[0] for schema in current):
        raise StoreDamaged(f"{root}: the shards' schemas differ", "run `bexdb verify`")
    new, summary = schemaedit.merged(current[0], doc)
    if not (summary["added"] or summary["hints"]):
        return summary
    batch = new_batch()
    parts = {i: [["schema", new.to_json()]] for i in range(count)}
    write_journal(root, batch, parts)
    with locked(root, READ_LOCK, fcntl.LOCK_EX):
        for i, ops in sorted(parts.items()):
            _apply(shards, i, batch, ops)
    remove_journal(root)
    return summary


def missing(ids: Sequence[SubId], holder: Callable[[SubId], str | None]) -> None:
    """Step 2 for a strict delete: :class:`InvalidInput` naming every absent id."""
    absent = [ident for ident in ids if holder(ident) is None]
    if absent:
        raise InvalidInput(
            "no subscription " + ", ".join(map(repr, absent)) + ": nothing was deleted"
        )
