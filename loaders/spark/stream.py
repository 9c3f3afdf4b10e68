"""``bexdb stream``: match an endless stream of events on Spark Structured Streaming.

One query, extract -> pure transform -> sink:

1. **extract** (:func:`events_frame`): a file source watching a directory, each file read as
   ``bexdb load`` and ``bexdb match --engine spark`` read theirs
   (:func:`loaders.spark.extract.read_input`: JSON Lines, Parquet or CSV, nested events
   included); or a Kafka topic (``kafka://HOST:PORT/TOPIC``), one event a record value.
2. **transform** (:func:`match_partition`, ``mapInArrow``): each task matches its events
   with ``match_many`` on the store held open in its Python worker
   (:func:`loaders.spark.match.warm_index`: every shard of a sharded store), and gives one
   JSON line per event, ``{"file", "line", "matches"}`` or ``{"file", "line", "error"}``
   (:func:`betree.streams.stream.match_lines`: the texts of ``bexdb match``).
3. **sink**: Spark's file sink (text parts ``part-*.txt`` of JSON Lines under ``OUT``), or
   a Kafka topic.

Exactly once: the file source logs which files each batch takes and the sink logs which
parts each batch committed (``OUT/_spark_metadata``, read by :mod:`.streamlog`), both in
the checkpoint's order, so a query killed at any moment and started again from the same
checkpoint runs the interrupted batch again on the same files and commits its parts once.
Parts of an interrupted attempt stay on disk but outside the log: read ``OUT`` through
the log (:func:`loaders.spark.streamlog.committed_results`, or Spark itself).  A Kafka sink
is at least once (Spark's), not exactly once.

Lines without a second pass: each file is read whole by one task (:data:`WHOLE_FILES`:
Spark neither splits nor packs files into one split), so a row's line is its position among
its file's rows in the task.  A micro-batch's files are then packed, whole, into as many
tasks as Spark's default parallelism (the cores; a ``coalesce``: no shuffle), since Spark's
cost is per task more than per event: a backlog of 24 files of 500 events as 24 tasks ran at
0.79-1.18x the rate of ``bexdb match --jobs 2``, as 2 tasks at 2.06-2.25x (``bexdb bench
stream``, 20K subscriptions, alternated runs on a loaded machine; docs/bench/README.md).
A file must be complete when it appears in the source: write it elsewhere, or under a name
starting with ``.`` or ``_`` (which the source ignores), and rename it in.  (Spreading a
file's events over the cores with a ``repartition`` was tried: a one-file micro-batch of
1,000 events at 100K took 1.7 s against 1.35 s without, the shuffle's stage costing more
than the second core gave.)

Snapshots: a micro-batch is answered as of one state of the store, its **pin**.  The first
task of micro-batch N to start records the store's state then (its identity, and every
shard's change log position, schema version and generation:
:func:`betree.streams.rewind.take_pin`) in ``CHECKPOINT/bexdb-pins/N`` (written aside and
linked into place, so that one task's pin wins and the others read it); every task matches
in its own latest snapshots (LMDB gives a reader nothing older) and rewinds its answers to
the pin through the change log (:class:`betree.streams.rewind.Rewinder`): the ids of
subscriptions written since are dropped, and those removed or replaced since are evaluated
again from their expressions in the log.  A write committed before the pin is seen by
every event of the micro-batch, one committed after it by none (from the next micro-batch
on); a micro-batch run again after a crash reads the same pin, so it gives the same
answers.  On a cluster the checkpoint directory must be shared with the executors.

The pin cannot be reached when the store was replaced (``load --replace``, ``compact``:
another data file or manifest), its schema changed, or more than
:data:`betree.disk.changelog.KEEP` commits (or commits of a version whose log kept no
expressions) lie between the pin and a task's snapshot: that task's answers are then those
of the snapshots it matched in, and the micro-batch's progress says so
(``unpinned_tasks``, and ``snapshots``: the states its answers come from, the pin's among
them; 1 when every task answered as of the pin, whose generations are ``generations``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam

from betree.formats.jsonl import dump_result
from betree.stores.sharded import open_index
from betree.streams.rewind import Pin, Rewinder, agree, take_pin
from betree.streams.stream import BATCH, match_lines
from loaders.spark.extract import CSV, JSONL, SplitRows, batch_rows, read_input
from loaders.spark.jobs import short_error
from loaders.spark.match import WARM, csv_event, event_json, warm_index
from loaders.spark.session import map_arrow, spark_session
from loaders.spark.streamlog import local, taken_files
from storage.errors import BexdbError, InvalidInput

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

#: Each file one split, read whole by one task (line numbers without a count; the splits of
#: a micro-batch are then coalesced into as many tasks as cores).
WHOLE_FILES = {
    "spark.sql.files.maxPartitionBytes": str(1 << 40),
    "spark.sql.files.openCostInBytes": str(1 << 40),
}
FORMATS = {"json": "jsonl", "parquet": "parquet", "csv": "csv"}
KAFKA = "kafka://"
#: The local property Spark gives a streaming query's jobs: their micro-batch's id.
BATCH_ID = "streaming.sql.batchId"
#: The pins' directory under the checkpoint (a file per micro-batch id), and how many of
#: the last completed micro-batches' pins are kept
PINS = "bexdb-pins"
PINS_KEPT = 10

State = tuple[Any, tuple[int, ...]]  # a store's identity and every shard's generation


class Counters(NamedTuple):
    """The tasks' accumulators, read by the driver (:class:`Watch`) per micro-batch."""

    events: Any  # events matched (int)
    rejected: Any  # of them, bad (int)
    peak_mb: Any  # the Python workers' largest peak memory (:class:`Largest`)
    python_s: Any  # seconds the tasks spent in Python (float)
    states: Any  # micro-batch id -> the store states its tasks matched in (:class:`States`)
    unpinned: Any  # micro-batch id -> its tasks that could not reach its pin (:class:`States`)


@dataclass(frozen=True)
class Endpoint:
    """A source or sink: a directory, or a Kafka topic (``servers`` ``HOST:PORT[,…]``)."""

    path: str | None = None
    servers: str | None = None
    topic: str | None = None

    @property
    def kafka(self) -> bool:
        return self.topic is not None

    def __str__(self) -> str:
        return f"{KAFKA}{self.servers}/{self.topic}" if self.kafka else str(self.path)


def endpoint(text: str, what: str) -> Endpoint:
    """``--source``/``--sink`` text: a directory, or ``kafka://HOST:PORT[,HOST:PORT]/TOPIC``."""
    if not text.startswith(KAFKA):
        return Endpoint(path=str(Path(text).absolute()))
    servers, _, topic = text.removeprefix(KAFKA).partition("/")
    hosts = servers.split(",")
    if not topic or "/" in topic or not all(_host_port(h) for h in hosts):
        raise InvalidInput(
            f"{what} {text!r}: not kafka://HOST:PORT/TOPIC",
            hint="e.g. kafka://127.0.0.1:9092/events (several brokers: h1:9092,h2:9092)",
        )
    return Endpoint(servers=servers, topic=topic)


def _host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def stream(
    store: str | os.PathLike[str],
    source: Endpoint,
    out: Endpoint,
    checkpoint: str | os.PathLike[str],
    *,
    fmt: str = "json",
    trigger: float = 1.0,
    max_files: int | None = None,
    available_now: bool = False,
    master: str | None = None,
    spark: SparkSession | None = None,
    progress: TextIO | None = None,
    progress_json: TextIO | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Run the query until ``stop`` is set (then after the micro-batch in hand), it fails,
    or with ``available_now`` the source's files present at the start are done.

    ``spark``: the session to use (its file-split settings are changed: :data:`WHOLE_FILES`),
    else a new one, stopped at the end.  Progress: a line per micro-batch on ``progress``,
    a JSON object per micro-batch on ``progress_json``.  Returns the run's counts.
    """
    started = time.monotonic()
    store_path = Path(store).absolute()
    with open_index(store_path):  # a missing or unreadable store fails before Spark starts
        pass
    if fmt not in FORMATS:
        raise InvalidInput(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    if not trigger >= 0:  # (NaN too)
        raise InvalidInput(f"--trigger {trigger}: seconds between micro-batches, 0 or more")
    if source.kafka and max_files is not None:
        raise InvalidInput("--max-files-per-trigger is for a directory source, not Kafka")
    if source.path is not None and not os.path.isdir(source.path):
        raise BexdbError(f"--source {source.path}: no such directory", "create it first")
    own = spark is None
    if spark is None:
        _say(progress, f"starting Spark ({master or 'local[*]'})")
        spark = spark_session(master, app_name="bexdb stream", driver_memory="1g")
    before = {key: spark.conf.get(key, None) for key in WHOLE_FILES}
    try:
        for key, value in WHOLE_FILES.items():
            spark.conf.set(key, value)
        sc = spark.sparkContext
        counters = Counters(
            sc.accumulator(0),
            sc.accumulator(0),
            sc.accumulator(0.0, Largest()),
            sc.accumulator(0.0),
            sc.accumulator({}, States()),
            sc.accumulator({}, States()),
        )
        frame = events_frame(spark, source, FORMATS[fmt], max_files)
        frame = frame.coalesce(sc.defaultParallelism)  # (module docstring: Lines)
        pins = Path(checkpoint).absolute() / PINS
        results = map_arrow(
            frame,
            partial(match_partition, store=str(store_path), counters=counters, pins=str(pins)),
            "value binary",
        ).selectExpr("CAST(value AS STRING) AS value")
        query = _start(results, out, str(Path(checkpoint).absolute()), trigger, available_now)
        watch = Watch(source, Path(checkpoint), counters, progress, progress_json)
        batches = watch.run(query, stop or threading.Event())
    finally:
        if own:
            spark.stop()
        else:  # the caller's session as it was
            for key, was in before.items():
                if was is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, was)
    summary = {
        "batches": batches,
        "events": watch.events,
        "rejected": watch.rejected,
        "worker_peak_mb": round(float(counters.peak_mb.value), 1),
        "seconds": round(time.monotonic() - started, 3),
        "out": str(out),
    }
    _say(progress, f"stopped: {batches:,} micro-batches, {watch.events:,} events")
    return summary


def events_frame(
    spark: SparkSession, source: Endpoint, fmt: str, max_files: int | None
) -> DataFrame:
    """The streaming DataFrame ``(path, block, kind, text, offset)``: ``offset`` is a Kafka
    record's, null for a file's row (whose line is its position in the file)."""
    from pyspark.sql import functions as F

    if source.kafka:
        reader = spark.readStream.format("kafka")
        reader = reader.option("kafka.bootstrap.servers", source.servers)
        reader = reader.option("subscribe", source.topic).option("startingOffsets", "earliest")
        df = _load(reader.load, "source")
        return df.select(
            F.concat(F.lit(f"{KAFKA}{source.servers}/"), "topic", F.lit("/"), "partition").alias(
                "path"
            ),
            F.lit(0).cast("long").alias("block"),
            F.lit(JSONL).cast("tinyint").alias("kind"),
            F.col("value").alias("text"),
            F.col("offset"),
        )
    path = str(source.path)
    reader = spark.readStream
    if max_files is not None:
        reader = reader.option("maxFilesPerTrigger", max_files)
    if fmt != "jsonl":
        reader = reader.schema(_columns(spark, path, fmt))
    df = read_input(reader, path, 0, event_json, fmt)
    return df.select("path", "block", "kind", "text", F.lit(None).cast("long").alias("offset"))


def _columns(spark: SparkSession, path: str, fmt: str) -> Any:
    """The columns of a Parquet or CSV source, from the files it holds now (a stream's
    schema is fixed when it starts)."""
    suffix = ".parquet" if fmt == "parquet" else ".csv"
    if not any(n.lower().endswith(suffix) and n[0] not in "._" for n in os.listdir(path)):
        raise InvalidInput(
            f"--format {'parquet' if fmt == 'parquet' else 'csv'}: {path} holds no {suffix} "
            "file to take the columns from",
            hint="put one file in first (later files must have its columns)",
        )
    reader = spark.read.option("pathGlobFilter", f"*{suffix}")
    if fmt == "parquet":
        return reader.parquet(path).schema
    return reader.options(header=True, inferSchema=False, escape='"').csv(path).schema


def _start(
    results: DataFrame, out: Endpoint, checkpoint: str, trigger: float, available_now: bool
) -> StreamingQuery:
    writer = results.writeStream.option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(trigger * 1000)} milliseconds")
    if out.kafka:
        writer = writer.format("kafka").option("kafka.bootstrap.servers", out.servers)
        return _load(writer.option("topic", out.topic).start, "sink")
    return writer.format("text").outputMode("append").option("path", out.path).start()


def _load(start: Any, what: str) -> Any:
    """Build the Kafka side of the query; without the connector a clear error."""
    try:
        return start()
    except Exception as exc:
        if "kafka" in str(exc).lower() and "find data source" in str(exc).lower():
            raise InvalidInput(
                f"a Kafka {what} needs Spark's Kafka connector, which is not on its classpath",
                hint="spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:"
                "SPARK_VERSION tools/cli.py stream …  (README: Streaming)",
            ) from None
        raise


def match_partition(
    batches: Iterable[pa.RecordBatch],
    *,
    store: str,
    counters: Counters | None = None,
    pins: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Event rows -> one result line per event (``value``); blank lines get none.

    ``pins``: the directory of the micro-batches' pins; each batch of events is answered
    as of its micro-batch's pin (module docstring: Snapshots), where it can be reached.
    Cost: per input batch, the events' decoding, validation and match in snapshots of
    :data:`betree.streams.stream.BATCH` events (:func:`match_lines`), each rewound to the
    pin (:class:`betree.streams.rewind.Rewinder`: nothing per event unless subscriptions
    were written since it); memory: one input batch.  Per task, a read of every shard's
    generation before and after (``generations``), and of the pin file (the first task
    of a micro-batch writes it).
    """
    from pyspark import TaskContext

    started = time.perf_counter()
    index = warm_index(store)  # the latest commit of every shard (reopened if replaced)
    live = WARM[store]
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID) if context is not None else None
    pin: Pin | None = None
    if pins is not None and batch_id is not None:
        pin = agree(Path(pins) / batch_id, lambda: take_pin(index, live.ident))
    rewinder = Rewinder(pin) if pin is not None else None
    reached = rewinder is not None
    states = {(live.ident, index.generations())}
    splits = SplitRows()
    heads: dict[str, bytes] = {}  # a file's path -> '{"file": NAME, ' (JSON)
    events = rejected = 0
    for batch in batches:
        where: list[tuple[bytes, int]] = []
        lines: list[bytes] = []
        for path, block, kind, text, offset in batch_rows(
            batch, "path", "block", "kind", "text", "offset"
        ):
            if offset is None:
                if block:  # WHOLE_FILES keeps every file in one split: a defect if not
                    raise RuntimeError(f"{path} was split at byte {block}: lines unknown")
                line = splits.position(0, path, 0) + 1
            else:
                line = offset
            if text is None or not text.strip():
                continue
            head = heads.get(path)
            if head is None:
                head = heads[path] = b'{"file": ' + json.dumps(local(path)).encode() + b", "
            where.append((head, line))
            lines.append(csv_event(text, index.schema) if kind == CSV else text)
        answers: list[dict[str, Any]] = []
        for k, chunk in enumerate(match_lines(index, lines)):
            if rewinder is not None:
                changes = rewinder.changes(index, live.ident)  # (read after the match)
                if changes is None:
                    reached = False
                else:
                    chunk = rewinder.rewind(changes, lines[k * BATCH : (k + 1) * BATCH], chunk)
            answers.extend(chunk)
        out = []
        for (head, line), found in zip(where, answers, strict=True):
            rejected += "error" in found
            # json.dumps({"file", "line", **found})'s bytes: '{"matches": ...}' less its "{"
            out.append(b'%s"line": %d, %s' % (head, line, dump_result(found)[1:-1]))
        events += len(out)
        yield pa.record_batch([pa.array(out, pa.binary())], names=["value"])
    states.add((live.ident, index.generations()))
    if pin is not None:  # every answer as of the pin: its state alone; else it beside them
        pinned = (tuple(pin.ident[0]), pin.generations)
        states = {pinned} if reached else states | {pinned}
    if counters is not None:
        key = int(batch_id or -1)
        counters.events.add(events)
        counters.rejected.add(rejected)
        counters.peak_mb.add(_peak_rss_mb())
        counters.python_s.add(time.perf_counter() - started)
        counters.states.add({key: states})
        task = context.partitionId() if context is not None else -1
        counters.unpinned.add({key: set() if reached else {task}})


def _peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``), in MB; 0 where /proc has none."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Largest(AccumulatorParam):  # type: ignore[type-arg]
    """An accumulator keeping the largest value added (the Python workers' peak memory)."""

    def zero(self, value: float) -> float:
        return 0.0

    def addInPlace(self, value1: float, value2: float) -> float:
        return max(value1, value2)


class States(AccumulatorParam):  # type: ignore[type-arg]
    """An accumulator of sets per micro-batch: the store states its tasks matched in
    ``{batch id: {(store identity, every shard's generation), ...}}`` (a task that
    answered as of the micro-batch's pin adds the pin's state alone), or its tasks that
    could not reach the pin (``{batch id: {partition, ...}}``)."""

    def zero(self, value: dict[int, set[State]]) -> dict[int, set[State]]:
        return {}

    def addInPlace(
        self, value1: dict[int, set[State]], value2: dict[int, set[State]]
    ) -> dict[int, set[State]]:
        for batch, states in value2.items():
            value1.setdefault(batch, set()).update(states)
        return value1


class Watch:
    """The driver's side of a running query: progress per micro-batch and the stop.

    Progress comes from the query's own reports (``lastProgress``, polled: its phases'
    milliseconds, ``durationMs``), events, rejects, Python seconds and store states from
    the tasks' counters, the lag from the source's log: the files in the source directory
    no batch has taken yet, and the age of the oldest of them.
    """

    def __init__(
        self,
        source: Endpoint,
        checkpoint: Path,
        counters: Counters,
        progress: TextIO | None,
        progress_json: TextIO | None,
    ) -> None:
        self.source = source
        self.checkpoint = checkpoint
        self.counters = counters
        self.progress = progress
        self.progress_json = progress_json
        self.events = self.rejected = 0
        self.python_s = 0.0
        self.last = -1
        self.stamp: str | None = None

    def run(self, query: StreamingQuery, stop: threading.Event) -> int:
        """Report each micro-batch until the query ends; on ``stop``, end it once no
        micro-batch is in hand.  Returns the micro-batches this run completed."""
        from pyspark.errors import StreamingQueryException

        done = 0
        try:
            while not query.awaitTermination(0.2):  # type: ignore[arg-type]  # (seconds)
                done += self._report(query)
                if stop.is_set() and not query.status["isTriggerActive"]:
                    query.stop()
            done += self._report(query)
        except StreamingQueryException as exc:
            raise BexdbError(f"the streaming query failed: {short_error(exc)}") from exc
        finally:
            if query.isActive:
                query.stop()
        return done

    def _report(self, query: StreamingQuery) -> int:
        last = query.lastProgress  # one report a poll; all recent ones once it changes
        if last is None or last["timestamp"] == self.stamp:
            return 0
        self.stamp = last["timestamp"]
        # an idle trigger reports the next batch's id with no batch run (no "addBatch")
        fresh = [
            p
            for p in query.recentProgress
            if p["batchId"] > self.last and "addBatch" in p["durationMs"]
        ]
        for p in fresh:
            self.last = p["batchId"]
            events, rejected = int(self.counters.events.value), int(self.counters.rejected.value)
            python_s = float(self.counters.python_s.value)
            batch_events = events - self.events
            batch_python_s = python_s - self.python_s
            self.events, self.rejected, self.python_s = events, rejected, python_s
            seconds = p["durationMs"].get("triggerExecution", 0) / 1000
            states = self.counters.states.value.pop(p["batchId"], set())
            unpinned = len(self.counters.unpinned.value.pop(p["batchId"], set()))
            waiting, lag = self._lag()
            doc = {
                "batch": p["batchId"],
                "events": batch_events,
                "rows": p["numInputRows"],
                "seconds": round(seconds, 3),
                "events_per_s": round(batch_events / seconds, 1) if seconds else 0.0,
                "waiting_files": waiting,
                "lag_s": lag,
                "total_events": events,
                "total_rejected": rejected,
                "snapshots": len(states),
                "generations": max(gens for _, gens in states) if states else None,
                "unpinned_tasks": unpinned,
                "python_s": round(batch_python_s, 3),
                "durations_ms": p["durationMs"],
            }
            if self.progress_json is not None:
                self.progress_json.write(json.dumps(doc) + "\n")
                self.progress_json.flush()
            _say(
                self.progress,
                f"batch {doc['batch']}: {batch_events:,} events in {seconds:,.2f} s "
                f"({doc['events_per_s']:,.0f}/s), {events:,} in all, "
                + (f"{waiting} files waiting, lag {lag:,.1f} s" if waiting is not None else "")
                + (
                    f", {unpinned} tasks could not answer as of the micro-batch's pin (the "
                    "store replaced, its schema changed, or the change log outrun)"
                    if unpinned
                    else ""
                )
                + (f", matched in {len(states)} states of the store" if len(states) > 1 else ""),
            )
        if fresh:
            self._drop_pins()
        return len(fresh)

    def _drop_pins(self) -> None:
        """Remove the pins of micro-batches completed :data:`PINS_KEPT` batches ago (only an
        interrupted micro-batch is run again, and it is the last one)."""
        with suppress(OSError), os.scandir(self.checkpoint / PINS) as it:
            for entry in it:
                if entry.name.isdigit() and int(entry.name) <= self.last - PINS_KEPT:
                    with suppress(OSError):
                        os.unlink(entry.path)

    def _lag(self) -> tuple[int | None, float | None]:
        """Files in the source no batch has taken, and the oldest one's age in seconds."""
        if self.source.path is None:
            return None, None
        taken = taken_files(self.checkpoint)
        ages = []
        now = time.time()
        with os.scandir(self.source.path) as it:
            for entry in it:
                if entry.name[0] in "._" or entry.path in taken or not entry.is_file():
                    continue
                ages.append(now - entry.stat().st_mtime)
        return len(ages), round(max(ages), 3) if ages else 0.0


def _say(out: TextIO | None, text: str) -> None:
    if out is not None:
        out.write(text + "\n")
        out.flush()
