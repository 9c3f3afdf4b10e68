"""``bexdb load --engine python``: a single-process bulk load, extract -> transform -> load.

For sets that fit one machine comfortably; the Spark job is the path for large ones.
Every record is compiled before anything is written (rejects go to the rejects file with
their line, id and reason), then the accepted ones are inserted in large transactions
into a store built beside the target, rewritten by a compacting copy (full B-tree pages,
no free pages: about 40% smaller), and published atomically (:mod:`loaders.records`).

Cost: one parse + normalization per record, then online insertion in batches of
``batch`` subscriptions per transaction with ``sync=False`` and one sync at the end.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from betree.index import Index
from betree.schema import Schema
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
    batch: int = 5000,
    progress: TextIO | None = sys.stderr,
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
        publishing(target, replace) as staging,
        Index.open(staging / "raw", schema=resolved, settings=settings, sync=False) as idx,
    ):
        accepted: list[tuple[Any, str]] = []
        for record in good:
            try:
                idx.compile(record.id, record.expr)
            except InvalidInput as exc:
                record.error = exc.message.split(": ", 1)[-1]
            else:
                accepted.append((record.id, record.expr))
        rejected = sum(1 for r in items if r.error is not None)
        if rejects is not None:
            write_rejects(rejects, items)
        check_rejects(rejected, max_rejects)
        for start in range(0, len(accepted), batch):
            idx.subscribe_many(accepted[start : start + batch])
            if progress is not None:
                done = min(start + batch, len(accepted))
                rate = done / max(time.monotonic() - started, 1e-9)
                left = (len(accepted) - done) / max(rate, 1e-9)
                progress.write(
                    f"\rload: {done}/{len(accepted)} subscriptions, {rate:,.0f}/s, "
                    f"{left:,.0f} s left   "
                )
        if progress is not None and accepted:
            progress.write("\n")
        idx.check()
        idx.store.copy_compact(staging / "store")
    return {
        "loaded": len(accepted),
        "rejected": rejected,
        "seconds": round(time.monotonic() - started, 3),
    }
