"""``bexdb load`` on Spark, the driver: :func:`load` runs the stages in two Spark jobs.

The stages (the package's modules): the session (:mod:`loaders.spark.session`); extract
(:mod:`loaders.spark.extract`); without a schema, inference (:mod:`loaders.spark.infer`);
the compile job, records -> run files (:mod:`loaders.spark.compile`,
:mod:`loaders.spark.runfiles`); the build job, one task per shard, run files -> stores
(:mod:`loaders.spark.build`).  The driver collects only rejects, split counts and shard
figures (:mod:`loaders.spark.results`; jobs run through :mod:`loaders.spark.jobs`), writes
the rejects file, applies ``--max-rejects``, writes the manifest of a sharded store
(:mod:`betree.stores.sharded`) and publishes the whole directory with one rename
(:func:`loaders.records.publishing`): complete or not at all.  On any failure the job is
cancelled, the driver waits for running tasks to stop, and the staging directory goes.

``--max-rejects`` is applied after the build (rejects are known only once duplicates
are), which costs a wasted build on failure but saves keeping the compiled set.  The
driver holds results only; the run files and shard stores are written by the executors
straight into the staging directory, so on a cluster the target must be on a file system
the executors share.  What a load costs, stage by stage, and how ``--shards`` divides the
build job: docs/bench/load/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from betree.lang.schema import Schema
from betree.stores import sharded as sharding
from loaders.records import Record, check_rejects, publishing, write_rejects
from loaders.spark.build import build_partition
from loaders.spark.compile import compile_partition
from loaders.spark.extract import check_inputs, extract
from loaders.spark.infer import infer_schema
from loaders.spark.jobs import Driver, Progress, session
from loaders.spark.results import BLOCK, REJECT, RESULT_DDL, RUNS, SHARD
from loaders.spark.session import map_arrow
from storage.errors import BexdbError, InvalidInput

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Input split size bounds; within them, about 8 splits per core (progress, balance).
MIN_SPLIT, MAX_SPLIT = 2 << 20, 128 << 20


def load(
    target: str | os.PathLike[str],
    inputs: Sequence[str],
    schema: dict[str, Any] | None,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    shards: int | None = None,
    replace: bool = False,
    rejects: TextIO | None = None,
    max_rejects: int | None = None,
    settings: dict[str, int] | None = None,
    progress: TextIO | None = None,
    verbose: bool = False,
    driver_memory: str | None = None,
    split_bytes: int | None = None,
    fail_at: str | None = None,
) -> dict[str, Any]:
    """Build the store (or, with ``shards``, the sharded store) at ``target``; returns counts.

    ``spark``: the session to use; else the process's active session, else a new one
    (started here and stopped at the end).  Nothing is published on failure.
    ``split_bytes`` overrides the input split size (about 8 splits per core by default).
    ``fail_at`` injects a failure for tests: ``"build"`` in every shard task after its
    index is built, ``"publish"`` on the driver just before publishing.
    """
    started = time.monotonic()
    if not inputs:
        raise InvalidInput("no input to load")
    if shards is not None and shards < 1:
        raise InvalidInput(f"--shards must be at least 1, not {shards}")
    path = Path(target).absolute()
    if path.exists() and not replace:
        raise BexdbError(f"{path} already exists", "pass --replace to replace it")
    size = check_inputs(inputs)
    given = Schema.from_json(schema) if schema is not None else None
    driver = Driver(Progress(progress))
    with (
        driver.interruptible(),
        session(driver, spark, master, verbose=verbose, driver_memory=driver_memory) as spark,
    ):
        driver.check()
        tune_splits(spark, size, split_bytes)
        source = extract(spark, inputs)
        if given is None:
            t0 = time.monotonic()
            given = infer_schema(spark, source, driver)
            driver.stages["infer"] = round(time.monotonic() - t0, 3)
        with publishing(path, replace) as staging:
            summary = _load_job(
                spark,
                source,
                given,
                staging,
                shards=shards,
                settings=settings,
                rejects=rejects,
                max_rejects=max_rejects,
                driver=driver,
                fail_at=fail_at,
            )
            driver.check()  # the last moment a signal stops the load
    driver.finish(summary, started, "loaded", "loaded")
    return summary


def tune_splits(spark: SparkSession, size: int, split: int | None) -> None:
    """About 8 input splits per core (bounded): balanced tasks and a live progress line."""
    if split is None:
        cores = max(1, spark.sparkContext.defaultParallelism)
        split = min(MAX_SPLIT, max(MIN_SPLIT, size // (8 * cores))) if size > 0 else MAX_SPLIT
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split))


def _load_job(
    spark: SparkSession,
    source: DataFrame,
    schema: Schema,
    staging: Path,
    *,
    shards: int | None,
    settings: dict[str, int] | None,
    rejects: TextIO | None,
    max_rejects: int | None,
    driver: Driver,
    fail_at: str | None,
) -> dict[str, Any]:
    sc = spark.sparkContext
    k = shards or 1
    schema_doc = schema.to_json()
    counter = sc.accumulator(0)
    runs = staging / "runs"
    for name in ("atoms", *map(sharding.shard_name, range(k))):
        (runs / name).mkdir(parents=True)
    compiled = map_arrow(
        source,
        partial(
            compile_partition,
            schema_doc=schema_doc,
            settings=settings,
            counter=counter,
            runs=str(runs),
            shards=k,
        ),
        RESULT_DDL,
    )
    first = driver.run(sc, compiled, ("compile",), counter)
    files: dict[int, list[str]] = {i: [] for i in range(k)}
    written = first.filter(pc.equal(first["kind"], RUNS))
    for shard, path in zip(written["pos"].to_pylist(), written["path"].to_pylist(), strict=True):
        files[shard].append(path)
    if shards is not None:
        (staging / "store").mkdir()
    built = map_arrow(
        spark.range(k, numPartitions=k),
        partial(
            build_partition,
            schema_doc=schema_doc,
            settings=settings,
            staging=str(staging),
            shards=shards,
            runs=files,
            fail_at=fail_at,
        ),
        RESULT_DDL,
    )
    second = driver.run(sc, built, ("build",), counter)
    shutil.rmtree(runs)
    result = pa.concat_tables([first, second])
    figures = {}
    for row in result.filter(pc.equal(result["kind"], SHARD))["error"].to_pylist():
        doc = json.loads(row)
        figures[doc["shard"]] = doc
    rejected = _rejects(result)
    if rejects is not None:
        write_rejects(rejects, rejected)
    check_rejects(len(rejected), max_rejects)
    if shards is not None:
        sharding.write_manifest(
            staging / "store",
            [
                {
                    "path": sharding.shard_name(i),
                    "subscriptions": figures[i]["subscriptions"],
                    "bytes": figures[i]["bytes"],
                }
                for i in range(k)
            ],
            {
                "by": "id",
                "hash": sharding.HASH,
                "shards": k,
            },
        )
    if fail_at == "publish":
        raise RuntimeError("injected failure before publishing (fail_at='publish')")
    loaded = sum(f["subscriptions"] for f in figures.values())
    return {
        "engine": "spark",
        "loaded": loaded,
        "rejected": len(rejected),
        "shards": shards,
        "store_bytes": sum(f["bytes"] for f in figures.values()),
        "shard_figures": [figures[i] for i in range(k)],
    }


def _rejects(result: pa.Table) -> list[Record]:
    """Rejected records in input order, with their line (or data row) numbers."""
    splits = result.filter(pc.equal(result["kind"], BLOCK))
    starts: dict[tuple[int, int], list[tuple[int, int]]] = {}
    paths: dict[tuple[int, int], str] = {}
    for arg, fid, block, count, path in zip(
        *(splits[c].to_pylist() for c in ("arg", "fid", "block", "pos", "path")), strict=True
    ):
        starts.setdefault((arg, fid), []).append((block, count))
        paths[(arg, fid)] = path
    before: dict[tuple[int, int, int], int] = {}
    for (arg, fid), blocks in starts.items():
        lines = 0
        for block, count in sorted(blocks):
            before[(arg, fid, block)] = lines
            lines += count
    rows = result.filter(pc.equal(result["kind"], REJECT))
    found = []
    for arg, fid, block, pos, ident, error in zip(
        *(rows[c].to_pylist() for c in ("arg", "fid", "block", "pos", "id", "error")), strict=True
    ):
        line = before[(arg, fid, block)] + pos + 1
        found.append(((arg, paths[(arg, fid)], line), Record(line, json.loads(ident), None, error)))
    found.sort(key=lambda item: item[0])
    return [record for _, record in found]
