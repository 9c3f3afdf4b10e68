"""``bexdb match --engine spark``: match event sets that outgrow one process, on Spark.

The events are read as ``bexdb load`` reads subscription records (:mod:`.extract`: JSON
Lines, Parquet or CSV files or directories, each row with its file and split), in two
Spark jobs:

1. **count** (JVM only): the rows of each file split, from which every event gets its
   1-based line (or data row) in its file without a pass through Python, as the load's
   rejects get theirs (:class:`~loaders.spark.extract.SplitRows`).
2. **match** (``mapInArrow``): each task takes the store read-only from its path (a plain
   store or every shard of a sharded one), kept open in its Python worker for the next
   task (:data:`WARM`: Spark reuses its Python workers, so the pages an earlier task read
   stay decoded, and the store is opened once per worker, not per task), matches
   its events through :func:`betree.streams.stream.match_lines` (the one definition of a bad
   event and its error text, that of ``bexdb match``) and writes one JSON Lines part,
   ``{"line": N, ["file": F,] "matches": [...]}`` or ``... "error": "..."}`` per event;
   blank JSON Lines lines get nothing, as in ``bexdb match``.

Output is built in a staging directory beside ``OUT_DIR`` (:func:`loaders.records.publishing`,
kind ``matching``): each task attempt writes its own file there, the driver keeps those of
the attempts that succeeded as ``part-NNNNN``, writes ``_SUCCESS`` and renames the whole
directory into place, so a failed or interrupted job leaves no ``OUT_DIR`` at all.  On a
cluster the store and ``OUT_DIR``'s parent must be on a file system the executors share.

CSV fields are text: a field of a ``string`` attribute is taken as it is, any other field
as JSON (``26``, ``true``, ``[1, 2]``), else as its text (then refused by the schema as
any wrong value is); an empty field is an undefined attribute.  Parquet columns keep their
types (``to_json`` of the row); a null is an undefined attribute.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow as pa

from betree.formats.jsonl import dump_result, loads_line
from betree.lang.schema import Schema
from betree.packed.heap import keep_freed_memory
from betree.stores.live import LiveIndex
from betree.stores.sharded import AnyIndex, open_index
from betree.streams.stream import match_lines
from loaders.records import publishing
from loaders.spark.driver import tune_splits
from loaders.spark.extract import CSV, SplitRows, batch_rows, check_inputs, extract
from loaders.spark.jobs import Driver, Progress, session
from loaders.spark.session import map_arrow
from loaders.spark.streamlog import local
from storage.errors import BexdbError, InvalidInput
from storage.swap import fsync_dir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: What a match task returns: the file its attempt wrote, for the part of its partition.
RESULT = pa.schema(
    [
        ("part", pa.int32()),
        ("path", pa.string()),
        ("events", pa.int64()),
        ("rejected", pa.int64()),
    ]
)
RESULT_DDL = "part int, path string, events bigint, rejected bigint"
SUCCESS = "_SUCCESS"

Place = tuple[int, str, int]  # (input argument, file path as Spark names it, split start)

#: The stores this Python worker has open, by path, kept across its tasks; reopened if the
#: path names another store now (:class:`betree.stores.live.LiveIndex`: one ``stat`` per task).
WARM: dict[str, LiveIndex] = {}


def match_events(
    store: str | os.PathLike[str],
    inputs: Sequence[str],
    out: str | os.PathLike[str],
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    progress: TextIO | None = None,
    verbose: bool = False,
    split_bytes: int | None = None,
    fail_at: str | None = None,
) -> dict[str, Any]:
    """Match the events of ``inputs`` against ``store``; the results go to ``out``.

    ``spark``: the session to use; else the process's active session, else a new one
    (started here, stopped at the end).  The store is opened once on the driver first, so
    that a missing or damaged store fails before Spark starts.  ``fail_at="match"`` makes
    every match task fail after writing its part (tests: nothing may be published).
    Returns counts; ``rejected`` events are in the output with their error.
    """
    started = time.monotonic()
    if not inputs:
        raise InvalidInput("no events to match")
    target = Path(out).absolute()
    if target.exists():
        raise BexdbError(f"{target} already exists", "name a new --out directory")
    store_path = Path(store).absolute()
    with open_index(store_path):  # a missing or unreadable store fails before Spark starts
        pass
    size = check_inputs(inputs)
    driver = Driver(Progress(progress))
    with (
        driver.interruptible(),
        session(driver, spark, master, verbose=verbose, app_name="bexdb match") as spark,
    ):
        driver.check()
        tune_splits(spark, size, split_bytes)
        source = extract(spark, inputs, row_json=event_json)
        sc = spark.sparkContext
        counts = driver.run(sc, source.groupBy("arg", "path", "block").count(), ("count",))
        offsets, names = _places(counts, inputs)
        with publishing(target, False, "matching") as staging:
            (staging / "attempts").mkdir()
            (staging / "store").mkdir()
            counter = sc.accumulator(0)
            matched = map_arrow(
                source,
                partial(
                    match_partition,
                    store=str(store_path),
                    attempts=str(staging / "attempts"),
                    offsets=offsets,
                    names=names,
                    counter=counter,
                    fail_at=fail_at,
                ),
                RESULT_DDL,
            )
            result = driver.run(sc, matched, ("match",), counter)
            summary = _publish(result, staging / "store")
            driver.check()  # the last moment a signal stops the run
    summary["out"] = str(target)
    driver.finish(summary, started, "events", "events")
    return summary


def event_json(df: DataFrame, path: str) -> Any:
    """A Parquet or CSV row as a JSON object of all its columns (nulls left out)."""
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*(F.col(f"`{name}`") for name in df.columns)))


def _places(
    counts: pa.Table, inputs: Sequence[str]
) -> tuple[dict[Place, int], dict[tuple[int, str], str] | None]:
    """Lines before each split of each file; and, for several files, how each is named.

    A file given by name is shown as given; a file found in a directory (or a glob) by
    its path (a local path for ``file:`` URIs).
    """
    splits: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for arg, path, block, rows in zip(
        *(counts[c].to_pylist() for c in ("arg", "path", "block", "count")), strict=True
    ):
        splits.setdefault((arg, path), []).append((block, rows))
    offsets: dict[Place, int] = {}
    for (arg, path), blocks in splits.items():
        before = 0
        for block, rows in sorted(blocks):
            offsets[(arg, path, block)] = before
            before += rows
    if len(splits) < 2:
        return offsets, None
    per_arg: dict[int, int] = {}
    for arg, _ in splits:
        per_arg[arg] = per_arg.get(arg, 0) + 1
    names = {}
    for arg, path in splits:
        given = inputs[arg]
        single = per_arg[arg] == 1 and os.path.isfile(given)
        names[(arg, path)] = given if single else local(path)
    return offsets, names


def warm_index(store: str) -> AnyIndex:
    """The store at ``store``, open read-only in this Python worker (:data:`WARM`),
    reopened if it was replaced; each match on it takes a new snapshot, so commits made
    since the last task are seen.  Cost: one ``stat`` while the store stays the same."""
    live = WARM.get(store)
    if live is None:
        keep_freed_memory()
        live = WARM[store] = LiveIndex(store, readonly=True)
    return live.current()


def _publish(result: pa.Table, out: Path) -> dict[str, Any]:
    """Keep the parts of the attempts that succeeded, in partition order; ``_SUCCESS``."""
    events = rejected = parts = 0
    for part, path, n, bad in sorted(
        zip(*(result[c].to_pylist() for c in ("part", "path", "events", "rejected")), strict=True)
    ):
        events += n
        rejected += bad
        if n:
            os.rename(path, out / f"part-{part:05d}")
            parts += 1
    (out / SUCCESS).touch()
    fsync_dir(out)
    return {"engine": "spark", "events": events, "rejected": rejected, "parts": parts}


def match_partition(
    batches: Iterable[pa.RecordBatch],
    *,
    store: str,
    attempts: str,
    offsets: dict[Place, int],
    names: dict[tuple[int, str], str] | None,
    counter: Any = None,
    fail_at: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Extracted event rows -> one JSON Lines file for this task attempt; yields one
    :data:`RESULT` row naming it.

    Cost: a store open per Python worker (:data:`WARM`), then per event its decoding,
    validation and match (:func:`match_lines`, per input batch); memory: one input
    batch's events and results, and the worker's page cache.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    attempt = context.taskAttemptId() if context is not None else os.getpid()
    path = Path(attempts) / f"part-{part:05d}.{attempt}"
    splits = SplitRows()
    events = rejected = 0
    index = warm_index(store)
    with open(path, "wb") as fh:
        for batch in batches:
            where: list[tuple[int, str | None]] = []
            lines: list[bytes] = []
            for arg, fpath, block, kind, text in batch_rows(
                batch, "arg", "path", "block", "kind", "text"
            ):
                pos = splits.position(arg, fpath, block)
                if text is None or not text.strip():  # a blank line: no result, as bexdb match
                    continue
                name = names[(arg, fpath)] if names is not None else None
                where.append((offsets[(arg, fpath, block)] + pos + 1, name))
                lines.append(csv_event(text, index.schema) if kind == CSV else text)
            results = [r for chunk in match_lines(index, lines) for r in chunk]
            for (line, shown), found in zip(where, results, strict=True):
                doc: dict[str, Any] = {"line": line}
                if shown is not None:
                    doc["file"] = shown
                doc.update(found)
                fh.write(dump_result(doc))
                rejected += "error" in found
            events += len(lines)
        fh.flush()
        os.fsync(fh.fileno())
    if fail_at == "match":
        raise RuntimeError("injected failure after matching (fail_at='match')")
    if counter is not None:
        counter.add(events)
    yield pa.record_batch([[part], [str(path)], [events], [rejected]], schema=RESULT)


def csv_event(text: bytes, schema: Schema) -> bytes:
    """A CSV row (a JSON object of text fields) as an event line: a ``string``
    attribute's field as it is, any other field as JSON when it is JSON, else its text."""
    row = json.loads(text)
    event = {}
    for name, value in row.items():
        spec = schema.attributes.get(name)
        if spec is not None and spec.type != "string":
            with suppress(InvalidInput):  # not JSON: the schema refuses the text, naming it
                value = loads_line(value)
        event[name] = value
    return json.dumps(event).encode()
