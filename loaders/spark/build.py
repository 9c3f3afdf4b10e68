"""The build job, in the executors: one task per shard, its run files -> its store.

:func:`build_partition` runs over ``spark.range(K)``: each task reads its shard's run files
(those of the compile tasks that succeeded: a failed attempt's file is never named,
:mod:`loaders.spark.runfiles`), sorts the records into input order and rejects extract
errors, duplicate ids and compile errors (:func:`triage`), interns the shard's atoms to
dense ids, builds the index in one batch (:func:`betree.disk.bulk.build_from_parts`: BE-B and
bottom-up PB+trees) in a scratch store inside the publishing staging directory, runs
``check()``, and writes the compacting copy as the shard's store (:func:`build_store`).
Without ``--shards`` the single shard *is* the store.  It returns only the shard's
rejects and figures; the driver publishes (:mod:`loaders.spark.driver`).

The build runs in a Spark task rather than on the driver so that K shards build in
parallel and one code path serves both cases.  Each shard builds single-threaded, holding
its records as Arrow columns, then the build's write transaction: where the time and the
memory go is in docs/bench/load/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from betree.disk.atomkeys import AtomKeys
from betree.disk.bulk import PackedSubs, build_from_parts, release_freed_heap
from betree.disk.writer import gc_paused
from betree.index import Index
from betree.stores import sharded as sharding
from loaders.records import Record, mark_duplicates
from loaders.spark.compile import drop_caches
from loaders.spark.results import REJECT, RESULT, SHARD, append_row
from loaders.spark.runfiles import LISTS, read_runs
from storage.errors import BexdbError


def build_partition(
    batches: Iterable[pa.RecordBatch],
    schema_doc: dict[str, Any],
    settings: dict[str, int] | None,
    staging: str,
    shards: int | None,
    runs: dict[int, list[str]],
    fail_at: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Shard numbers (``id`` of ``spark.range``) -> their stores, from their run files;
    emits each shard's rejects and figures."""
    root = Path(staging)
    drop_caches()  # (what the compile stage left in this worker)
    for batch in batches:
        for shard in batch.column("id").to_pylist():
            table, atom_keys = read_runs(runs.get(shard, ()))
            good, rejects = triage(table)
            del table  # the shard's records now live in ``good`` only
            out: dict[str, list[Any]] = {name: [] for name in RESULT.names}
            for arg, fid, block, pos, ident, error in rejects:
                append_row(
                    out, kind=REJECT, arg=arg, fid=fid, block=block, pos=pos, id=ident, error=error
                )
            dest = _shard_dest(root, shards, shard)
            raw = root / f"raw-{shard:04d}"
            figures = build_store(good, atom_keys, schema_doc, settings, raw, dest, fail_at=fail_at)
            figures["shard"] = shard
            append_row(out, kind=SHARD, pos=shard, error=json.dumps(figures))
            yield pa.RecordBatch.from_pydict(out, schema=RESULT)


def _shard_dest(staging: Path, shards: int | None, shard: int) -> Path:
    """Where shard ``shard`` goes: the store itself, or its directory in a sharded store."""
    return staging / "store" if shards is None else staging / "store" / sharding.shard_name(shard)


def triage(records: pa.Table) -> tuple[pa.Table, list[tuple[int, int, int, int, str, str]]]:
    """Split one shard's records into the loadable ones (a table) and rejects.

    In input order.  Precedence as the single-process engine: an extract error, else a
    duplicate id (counted among records without an extract error, every occurrence
    rejected), else a compile error.
    """
    order = pc.sort_indices(
        records, sort_keys=[(c, "ascending") for c in ("arg", "fid", "block", "pos")]
    )
    records = records.take(order)
    usable = records.filter(pc.is_null(records["error"]))
    counts = pc.value_counts(usable["key"])
    repeated = pc.greater(counts.field("counts"), 1)
    dup_keys = set(counts.field("values").filter(repeated).to_pylist())
    reasons = pc.coalesce(records["error"], records["cerror"]).to_pylist()
    if dup_keys:
        columns = [records[c].to_pylist() for c in ("key", "id", "expr", "error")]
        dups = [
            (i, Record(i, json.loads(ident), expr))
            for i, (key, ident, expr, error) in enumerate(zip(*columns, strict=True))
            if key in dup_keys and error is None
        ]
        mark_duplicates([r for _, r in dups])
        for i, r in dups:
            if r.error is not None:
                reasons[i] = r.error
    rejected = [i for i, reason in enumerate(reasons) if reason is not None]
    rejects = []
    if rejected:
        rows = records.take(rejected)
        columns = [rows[c].to_pylist() for c in ("arg", "fid", "block", "pos", "id")]
        for i, (arg, fid, block, pos, ident) in zip(
            rejected, zip(*columns, strict=True), strict=True
        ):
            rejects.append((arg, fid, block, pos, ident, reasons[i]))
    good = records.filter(pa.array([reason is None for reason in reasons], pa.bool_()))
    return good, rejects


def _idents(shown: pa.ChunkedArray) -> list[Any]:
    """External ids from their JSON text: integers parsed by Arrow, strings by ``json``."""
    quoted = pc.starts_with(shown, '"')
    ids = pc.cast(pc.if_else(quoted, "0", shown), pa.int64()).to_pylist()
    if pc.any(quoted).as_py():
        for i in np.flatnonzero(np.asarray(quoted)).tolist():
            ids[i] = json.loads(shown[i].as_py())
    return ids


def build_store(
    good: pa.Table,
    atom_keys: pa.Array,
    schema_doc: dict[str, Any],
    settings: dict[str, int] | None,
    raw: Path,
    dest: Path,
    *,
    fail_at: str | None = None,
) -> dict[str, Any]:
    """Batch-build, check and compact one store from compiled records (:data:`RUN` rows
    without errors, their atom ids global: the key of id i + 1 is ``atom_keys[i]``).

    Atom ids are renumbered densely in order of first use (as the single-process engine
    numbers them).  ``raw`` (a scratch store) must not exist and its parent must: a task
    that outlives a cancelled load finds the staging directory gone and stops instead of
    re-creating it.  Returns the store's figures and the seconds of each step.
    """
    t0 = time.perf_counter()
    os.mkdir(raw)
    try:
        with (
            gc_paused(),
            Index.open(raw, schema=schema_doc, settings=settings, sync=False) as idx,
        ):
            flat = {name: np.asarray(pc.list_flatten(good[name])) for name in LISTS}
            atoms = flat["atoms"].astype(np.int64)
            used, first = np.unique(atoms[atoms > 0], return_index=True)
            used = used[np.argsort(first)]  # global ids in order of first use
            dense = np.zeros(len(atom_keys) + 1, dtype=np.int64)
            dense[used] = np.arange(1, len(used) + 1)
            idents = _idents(good["id"])
            metas: list[tuple[Any, str]] = []
            if good["meta"].null_count < len(good):  # (the subscriptions that have metadata)
                pairs = zip(idents, good["meta"].to_pylist(), strict=True)
                metas = [(ident, text) for ident, text in pairs if text is not None]
            subs = PackedSubs(
                idents=idents,
                exprs=good["expr"].to_pylist(),
                per_sub=np.asarray(pc.list_value_length(good["lens"])),
                lens=flat["lens"],
                atoms=dense[atoms],
            )
            catalog = AtomKeys(atom_keys.take(pa.array(used - 1)).to_pylist())  # (its own only)
            del flat, atoms, dense
            t1 = time.perf_counter()
            counts = build_from_parts(idx, subs, None, catalog, metas=metas)  # (places: atoms)
            del subs, catalog, metas  # the store has them now; check() reads them back
        # closed: its write transaction's pages, which LMDB holds until then, are freed
        release_freed_heap()
        with gc_paused(), Index.open(raw, sync=False) as idx:
            t2 = time.perf_counter()
            if fail_at == "build":
                raise RuntimeError("injected failure in the load stage (fail_at='build')")
            idx.check()
            t3 = time.perf_counter()
            if not raw.parent.exists():
                raise BexdbError(f"{raw.parent} was removed: the load was cancelled")
            size = idx.store.copy_compact(dest)
            t4 = time.perf_counter()
    finally:
        shutil.rmtree(raw, ignore_errors=True)
    return {
        "subscriptions": counts["subscriptions"],
        "clauses": counts["clauses"],
        "atoms": counts["atoms"],
        "bytes": size,
        "seconds": {
            "intern": round(t1 - t0, 3),
            "build": round(t2 - t1, 3),
            "check": round(t3 - t2, 3),
            "compact": round(t4 - t3, 3),
        },
    }
