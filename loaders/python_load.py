"""``bexdb load --engine python``: a single-process bulk load, extract -> transform -> load.

For sets that fit one machine comfortably; the Spark job is the path for large ones.
Every record is compiled before anything is written (rejects go to the rejects file with
their line, id and reason), then the accepted ones are built into an index in one batch
(:mod:`betree.disk.bulk`: BE-B, bottom-up PB+trees) in a store beside the target, rewritten
by a compacting copy (full B-tree pages, no free pages: about 40% smaller), and published
atomically (:mod:`loaders.records`).

Cost: one parse + normalization per record, then the batch build, the check and a
compacting copy, in one process.  Memory: the records and the batch, at the peak (the
build's write transaction) a few GB per million subscriptions; the batch is dropped before
the check reads the store back.  Measured: docs/bench/load/README.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from betree.disk.bulk import Batch, release_freed_heap
from betree.disk.writer import gc_paused
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores import sharded
from loaders.records import Record, check_rejects, mark_duplicates, publishing, write_rejects
from storage import codec
from storage.errors import InvalidInput


def load(
    target: str | os.PathLike[str],
    records: Iterable[Record],
    schema: dict[str, Any] | None,
    *,
    replace: bool = False,
    rejects: TextIO | None = None,
    max_rejects: int | None = None,
    settings: dict[str, int] | None = None,
    progress: TextIO | None = None,
    shards: int | None = None,
) -> dict[str, Any]:
    """Build the store at ``target`` (with ``shards``, a sharded store of that many shards,
    each id in the shard :data:`betree.stores.sharded.HASH` names, as the Spark load does);
    returns counts.  Nothing is published on failure.

    Every shard's records are compiled before any is built, so ``max_rejects`` is applied
    before the builds; the shards are built one after another in this process.
    """
    if shards is not None and shards < 1:
        raise InvalidInput(f"--shards must be at least 1, not {shards}")
    started = time.monotonic()
    items = list(records)
    mark_duplicates(items)
    good = [r for r in items if r.error is None]
    resolved = (
        Schema.from_json(schema)
        if schema is not None
        else Schema.infer((r.id, r.expr) for r in good)
    )
    k = shards or 1
    parts: list[list[Record]] = [[] for _ in range(k)]
    for record in good:
        parts[sharded.shard_of(codec.encode_id(record.id), k) if k > 1 else 0].append(record)
    del good
    with gc_paused(), publishing(target, replace) as staging, ExitStack() as opened:
        indexes = [
            opened.enter_context(
                Index.open(staging / f"raw-{i}", schema=resolved, settings=settings, sync=False)
            )
            for i in range(k)
        ]
        batches = [Batch(idx) for idx in indexes]
        done, total = 0, sum(map(len, parts))
        for idx, batch, part in zip(indexes, batches, parts, strict=True):
            for record in part:
                try:
                    clauses = idx.engine.compiler().compile(record.id, record.expr)
                    batch.add(record.id, record.expr, clauses, record.meta)
                except InvalidInput as exc:
                    record.error = exc.message.split(": ", 1)[-1]
                done += 1
                if progress is not None and (done % 20000 == 0 or done == total):
                    rate = done / max(time.monotonic() - started, 1e-9)
                    progress.write(
                        f"\rcompile: {done:,}/{total:,} records, {rate:,.0f}/s, "
                        f"{(total - done) / max(rate, 1e-9):,.0f} s left   "
                    )
        if progress is not None and total:
            progress.write("\n")
        del parts
        for idx in indexes:
            idx.engine.drop_compile_caches()
        rejected = sum(1 for r in items if r.error is not None)
        if rejects is not None:
            write_rejects(rejects, items)
        check_rejects(rejected, max_rejects)
        loaded = sum(map(len, batches))
        if progress is not None:
            progress.write(f"build: {loaded:,} subscriptions, batch (BE-B)\n")
        out = staging / "store"
        figures: list[dict[str, Any]] = []
        if shards is not None:
            out.mkdir()
        for i, idx in enumerate(indexes):
            batch = batches.pop(0)
            count = len(batch)
            batch.build()
            del batch  # the store has it now; check() reads it back
            idx.close()  # (its write transaction's pages, held by LMDB until then: freed)
            release_freed_heap()
            idx = opened.enter_context(Index.open(staging / f"raw-{i}", sync=False))
            idx.check()
            dest = out / sharded.shard_name(i) if shards is not None else out
            idx.store.copy_compact(dest)
            figures.append({"path": sharded.shard_name(i), "subscriptions": count})
        if shards is not None:
            for i, figure in enumerate(figures):
                figure["bytes"] = _size(out / sharded.shard_name(i))
            partitioning = {"by": "id", "hash": sharded.HASH, "shards": k}
            sharded.write_manifest(out, figures, partitioning)
    summary: dict[str, Any] = {
        "loaded": loaded,
        "rejected": rejected,
        "seconds": round(time.monotonic() - started, 3),
    }
    if shards is not None:
        summary["shards"] = shards
    return summary


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
