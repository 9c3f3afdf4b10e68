"""``bexdb load --engine python``: a single-process bulk load, extract -> transform -> load.

For sets that fit one machine comfortably; the Spark job is the path for large ones.
Every record is compiled before anything is written (rejects go to the rejects file with
their line, id and reason), then the accepted ones are built into an index in one batch
(:mod:`betree.disk.bulk`: BE-B, bottom-up PB+trees) in a store in the staging directory,
checked there and published atomically (:mod:`loaders.records`).  No compacting copy: the
build writes every run of records and pages in key order, appended (``storage/txn.py``),
so its store is about its compacted copy's size (100K: dense 420 MB against 398, BEGen 39
against 35), and the copy cost a pass over the store and the load's peak
(docs/bench/dense-load, denseload41; ``bexdb compact`` still makes one).

Cost: one parse + normalization per record (a plain conjunction of int or float comparisons
read straight into the batch's columns: :meth:`betree.disk.bulk.Batch.add_text`), then the
batch build and the check, in one process.  Memory: the records and the
batch (a few hundred bytes a subscription; rich rules' ~1.2 KB, their atoms' store keys;
the records themselves are let go once compiled and their rejects written: the caller hands
them over, ``tools/cli.py`` as an iterator; a record's text as soon as it is compiled),
plus what ``memory_budget`` bounds: the batch's texts (held up to a sixteenth of the
budget, then spilled to the staging directory: :class:`betree.disk.batchtexts.Texts`), the
compiler's caches (let go every :func:`compile_chunk` records) and the build's write
transactions (committed in pieces of :func:`betree.disk.pieces.piece_limit` bytes); the
batch is dropped before the check reads the store back.  ``check()`` is not bounded by the
budget: its arrays follow the store (docs/loading.md).  Measured:
docs/bench/load/README.md, docs/bench/dense-load/README.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from betree.disk.batchtexts import Texts
from betree.disk.bulk import Batch, release_freed_heap
from betree.disk.pieces import piece_limit
from betree.disk.writer import gc_paused
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores import sharded
from loaders.records import Record, check_rejects, mark_duplicates, publishing, write_rejects
from storage import codec
from storage.errors import InvalidInput

#: ``bexdb load --memory-budget``'s default, MB
DEFAULT_BUDGET_MB = 1024
#: the batch's texts are held up to this fraction of the budget, then spilled
TEXT_SHARE = 16
#: the compiler's caches a record compiled, at most about (see :func:`compile_chunk`)
_CACHE_BYTES = 8192


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
    memory_budget: int | None = DEFAULT_BUDGET_MB,
) -> dict[str, Any]:
    """Build the store at ``target`` (with ``shards``, a sharded store of that many shards,
    each id in the shard :data:`betree.stores.sharded.HASH` names, as the Spark load does);
    returns counts.  Nothing is published on failure.

    Every shard's records are compiled before any is built, so ``max_rejects`` is applied
    before the builds; the shards are built one after another in this process.
    ``memory_budget`` (MB; None: unbounded, one commit a build): see the module's "Memory";
    the summary's ``commits`` and ``compile_chunks`` say how it was cut.
    """
    if memory_budget is not None and memory_budget < 1:
        raise InvalidInput(f"--memory-budget must be at least 1 MB, not {memory_budget}")
    budget = None if memory_budget is None else memory_budget << 20
    chunk = compile_chunk(budget)
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
        out = staging / "store"
        if shards is not None:
            out.mkdir()
        dests = [out / sharded.shard_name(i) if shards is not None else out for i in range(k)]
        indexes = [
            opened.enter_context(Index.open(dest, schema=resolved, settings=settings, sync=False))
            for dest in dests
        ]
        # (each batch's texts held up to a share of the budget, then spilled to the staging
        # directory, which goes with the load: :class:`Texts`)
        limit = None if budget is None else max(budget // TEXT_SHARE, 1)
        batches = [
            Batch(idx, Texts(limit, staging / f"texts-{i}")) for i, idx in enumerate(indexes)
        ]
        done, total, chunks = 0, sum(map(len, parts)), 1
        for idx, batch, part in zip(indexes, batches, parts, strict=True):
            for record in part:
                if chunk is not None and done and done % chunk == 0:
                    idx.engine.drop_compile_caches()  # (memos that would grow with every record)
                    chunks += 1
                try:
                    batch.add_text(record.id, record.expr, record.meta)
                except InvalidInput as exc:
                    record.error = exc.message.split(": ", 1)[-1]
                record.expr = None  # (the batch has it now; the rejects need no text)
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
        del items  # (the records' texts, held by the batches to their builds, then let go)
        loaded = sum(map(len, batches))
        if progress is not None:
            progress.write(f"build: {loaded:,} subscriptions, batch (BE-B)\n")
        figures: list[dict[str, Any]] = []
        commits = 0
        for i, (idx, dest) in enumerate(zip(indexes, dests, strict=True)):
            batch = batches.pop(0)
            count = len(batch)
            commits += batch.build(piece_limit(budget))["commits"]
            del batch  # the store has it now; check() reads it back
            idx.store.sync()
            idx.close()  # (its write transaction's pages, held by LMDB until then: freed)
            release_freed_heap()
            with Index.open(dest, sync=False) as built:
                built.check()
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
        "commits": commits,
        "compile_chunks": chunks,
    }
    if shards is not None:
        summary["shards"] = shards
    return summary


def compile_chunk(budget: int | None) -> int | None:
    """Records compiled between two drops of the compiler's caches under ``budget`` bytes
    (None: never dropped before the build): a quarter of the budget over what the caches
    keep a record when nothing repeats (dense 100K: ~6.6 KB a record)."""
    if budget is None:
        return None
    return max(budget // (4 * _CACHE_BYTES), 64)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
