"""``bexdb load --engine python``: a single-process bulk load, extract -> transform -> load.

For sets that fit one machine comfortably; the Spark job is the path for large ones.
Every record is compiled before anything is written (rejects go to the rejects file with
their line, id and reason), then the accepted ones are built into an index in one batch
(:mod:`betree.bulk`: BE-B, bottom-up PB+trees) in a store beside the target, rewritten
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
from typing import Any, TextIO

from betree.bulk import Batch
from betree.index import Index
from betree.lang.schema import Schema
from betree.writer import gc_paused
from loaders.records import Record, check_rejects, mark_duplicates, publishing, write_rejects
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
) -> dict[str, Any]:
    """Build the store at ``target``; returns counts.  Nothing is published on failure."""
    started = time.monotonic()
    items = list(records)
    mark_duplicates(items)
    good = [r for r in items if r.error is None]
    resolved = (
        Schema.from_json(schema)
        if schema is not None
        else Schema.infer((r.id, r.expr) for r in good)
    )
    with (
        gc_paused(),
        publishing(target, replace) as staging,
        Index.open(staging / "raw", schema=resolved, settings=settings, sync=False) as idx,
    ):
        batch = Batch(idx)
        for n, record in enumerate(good, 1):
            try:
                batch.add(record.id, record.expr, idx.compile(record.id, record.expr))
            except InvalidInput as exc:
                record.error = exc.message.split(": ", 1)[-1]
            if progress is not None and (n % 20000 == 0 or n == len(good)):
                rate = n / max(time.monotonic() - started, 1e-9)
                progress.write(
                    f"\rcompile: {n:,}/{len(good):,} records, {rate:,.0f}/s, "
                    f"{(len(good) - n) / max(rate, 1e-9):,.0f} s left   "
                )
        if progress is not None and good:
            progress.write("\n")
        rejected = sum(1 for r in items if r.error is not None)
        if rejects is not None:
            write_rejects(rejects, items)
        check_rejects(rejected, max_rejects)
        loaded = len(batch)
        if progress is not None:
            progress.write(f"build: {loaded:,} subscriptions, batch (BE-B)\n")
        del good
        batch.build()
        del batch  # the store has it now; check() reads it back
        idx.check()
        idx.store.copy_compact(staging / "store")
    return {
        "loaded": loaded,
        "rejected": rejected,
        "seconds": round(time.monotonic() - started, 3),
    }
