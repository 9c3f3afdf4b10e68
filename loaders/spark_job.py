"""``bexdb load`` on Spark: extract -> pure transforms -> load, in two Spark jobs.

The path for large subscription sets (the single-process engine is
:mod:`loaders.python_load`; both build the same stores: same rejects, same answers).

**Extract** (:func:`extract`): each input is JSON Lines (``spark.read.text``), Parquet or CSV
(columns ``id``, ``expr``; a row becomes the JSON object ``to_json(struct(id, expr))``, so
every format goes through the one record parser of :mod:`loaders.records`).  A JSON Lines
line reaches the executors as its bytes, cut at ``"\\n"`` only, and is decoded there with
the record, so that a line that is not UTF-8 is one reject, as in the single-process
engine (Spark itself never checks that text is UTF-8).  Every row
carries its file and the start of its file split (Spark's ``_metadata``), which is how
rejects get their line numbers without a second pass: a task numbers the rows of each split
it reads and reports how many rows each split had; the driver turns (split start, position)
into a line by adding the row counts of the file's earlier splits.  For Parquet and CSV the
"line" is the 1-based data row.

**Transform**, in the executors, Arrow batches in and out (``mapInArrow``; never Rows):

* :func:`compile_partition` parses each record and compiles it with the compiler of online
  ``subscribe`` (:meth:`Index.compile`, on a compile-only index the Python worker keeps
  across its tasks), and writes the record's extract or compile error, or its clauses in
  transport form (one msgpack per record: per clause the canonical atom keys,
  ``codec.encode_value(atom.as_tuple())``, the key the store interns atoms by, and the
  clause's places, :meth:`Index.places`: the BE-Tree's per-attribute grid spans) to the
  *run file* of the record's shard: one Arrow stream per (shard, task attempt) in the
  staging directory.  Records are routed by :func:`shard_of`, ``crc32`` of the id key of
  :func:`storage.codec.encode_id`, so all occurrences of an id land in one shard, where
  duplicate ids are found (every occurrence rejected, as
  :func:`loaders.records.mark_duplicates`).  The task returns only the names of the files
  it wrote and its split counts.
* Without a schema, :func:`evidence_partition` first emits each record's typing evidence
  (the rules of :meth:`Schema.infer`); Spark drops duplicated ids and reduces the evidence
  to the distinct (attribute, kind) pairs, and the driver settles the types.  Only that
  small set crosses to the driver.  If some attribute cannot be typed, the driver runs
  :meth:`Schema.infer` itself over the records in input order, so that the error (message
  and offending ids) is exactly the single-process engine's: a rare, slower path.

**Load** (:func:`build_partition`, a second job of one task per shard over
``spark.range(K)``): reads the shard's run files (those of the compile tasks that
succeeded: a failed attempt's file is never named), interns the shard's atoms to dense
ids, builds the index in one batch (:func:`betree.bulk.build_from_parts`: BE-B and
bottom-up PB+trees) in a scratch store inside the publishing staging directory, runs
``check()``, and writes the compacting copy as the shard's store.  Without ``--shards`` the
single shard *is* the store.  The driver collects only rejects, split counts and shard
figures, writes the rejects file, applies ``--max-rejects``, writes the manifest of a
sharded store (:mod:`loaders.shards`) and publishes the whole directory with one rename
(:func:`loaders.records.publishing`): complete or not at all.  On any failure the job is
cancelled, the driver waits for running tasks to stop, and the staging directory goes.

Decisions: compiled records go from the compile tasks to the shard tasks through run
files rather than a Spark shuffle: the shuffle made the JVM convert every compiled row
from Arrow and back, sort, compress and spill it (a 1M load took 131 CPU seconds with
it, 109 without).  So run files and shard stores are written straight into the staging directory,
and on a cluster the target must be on a file system the executors share.  The shard
build runs in a Spark task rather than on the driver so that K shards build in parallel
and one code path serves both cases; ``--max-rejects`` is applied after the build
(rejects are known only once duplicates are), which costs a wasted build on failure but
saves keeping the compiled set.

Cost, measured on 1M BEGen subscriptions on this 2-core machine (``bexdb bench load``):
Spark start ~5 s; the compile job ~28 s: the compile transform takes ~40 µs of CPU per
record once the worker's compiler is warm (:func:`compile_partition`), the JVM ~15 CPU
seconds in all; then the build job, each shard single-threaded in its task: reading its
run files and triage ~4 µs, interning ~2.5 µs, the BE-B build ~10 µs, ``check()`` ~10 µs
and the compacting copy ~4 µs per subscription.  One store of 1M: 69 s end to end;
``--shards 2``: 54 s (95 CPU seconds); ``--shards K`` divides the build job by up to
min(K, cores), and the compile job is then the limit.  Memory: the Python workers
together peaked at 3.6 GB for 1M in two shards (a shard task holds its records as Arrow
columns, then the build's write transaction); the JVM stays near its heap
(``DRIVER_MEMORY``): nothing is shuffled through it; run files take ~380 bytes per
subscription on disk (1.4x the JSON input) while the load runs; the driver holds
results only.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial, reduce
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from betree.bulk import PackedSubs, PlaceTable, build_from_parts
from betree.index import Index, gc_paused
from betree.lang.atoms import Atom, atom_from_tuple
from betree.lang.expr import ExpressionError
from betree.lang.parser import parse

# The evidence and resolution rules of Schema.infer, applied here per record and per
# attribute so that only the distinct (attribute, kind) pairs cross to the driver.
from betree.lang.schema import AttrSpec, Schema, settled_type, type_evidence
from loaders import shards as sharding
from loaders.records import (
    Record,
    check_rejects,
    mark_duplicates,
    parse_line,
    publishing,
    shown_id,
    write_rejects,
)
from storage import codec
from storage.errors import BexdbError, InvalidInput

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

DRIVER_MEMORY = "2g"
#: The local JVM (driver and executors in one) compiles with C1 only: a load is short, and
#: C2's compiler threads cost more CPU than they save (1M BEGen on 2 cores: the JVM's CPU
#: 15 s instead of 22-28, Spark's start 5 s instead of 7).
LOCAL_JIT = "-XX:TieredStopAtLevel=1"
#: Bound on the atoms whose store key a compile task remembers.
_KEYS_MAX = 1 << 16
#: Input split size bounds; within them, about 8 splits per core (progress, balance).
MIN_SPLIT, MAX_SPLIT = 2 << 20, 128 << 20
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate")

# record kinds of the extracted rows
JSONL, PARQUET, CSV = 0, 1, 2
# row kinds of the transform's and the load's output (RESULT)
REJECT = 0
BLOCK = 1  # a file split: its row count
SHARD = 2  # a built shard: its figures
RUNS = 3  # a run file written by a compile task: its shard and rows

#: A run file's rows: one shard's compiled records from one compile task.
RUN = pa.schema(
    [
        ("arg", pa.int32()),  # which input argument
        ("fid", pa.int64()),  # the file (hash of its path)
        ("block", pa.int64()),  # start of the file split
        ("pos", pa.int64()),  # row within the split
        ("key", pa.binary()),  # codec.encode_id(id); null if the record is unusable
        ("id", pa.string()),  # the record's id as JSON (for rejects and the store)
        ("expr", pa.string()),
        ("error", pa.string()),  # extract error: malformed JSON, bad id, missing column
        ("cerror", pa.string()),  # compile error: syntax, types
        # the clauses (empty lists for a record with an error):
        ("atoms", pa.list_(pa.int32())),  # atom ids of every clause, concatenated (see ATOMS)
        ("lens", pa.list_(pa.int32())),  # per clause: its atoms
        ("rows", pa.list_(pa.int32())),  # per clause: its places' rows
        ("pattr", pa.list_(pa.int32())),  # per place row: the attribute (schema order)
        ("plo", pa.list_(pa.uint64())),  # ... and its grid span
        ("phi", pa.list_(pa.uint64())),
    ]
)
_LISTS = ("atoms", "lens", "rows", "pattr", "plo", "phi")
_RUN_SCALARS = pa.schema(list(RUN)[: -len(_LISTS)])  # the columns before them
#: A compile task's atoms: the store key of atom id i + 1 is row i (0 is the true atom).
ATOMS = pa.schema([("key", pa.binary())])
RESULT = pa.schema(
    [
        ("kind", pa.int8()),  # REJECT, BLOCK, SHARD or RUNS
        ("arg", pa.int32()),
        ("fid", pa.int64()),
        ("block", pa.int64()),
        ("pos", pa.int64()),
        ("path", pa.string()),
        ("id", pa.string()),
        ("error", pa.string()),  # REJECT: why; SHARD: the shard's figures as JSON
    ]
)
RESULT_DDL = (
    "kind tinyint, arg int, fid bigint, block bigint, pos bigint, path string, id string, "
    "error string"
)
EVIDENCE = pa.schema([("key", pa.binary()), ("pairs", pa.list_(pa.string()))])
EVIDENCE_DDL = "key binary, pairs array<string>"
GOOD = pa.schema(
    [
        ("arg", pa.int32()),
        ("path", pa.string()),
        ("block", pa.int64()),
        ("pos", pa.int64()),
        ("key", pa.binary()),
        ("id", pa.string()),
        ("expr", pa.string()),
    ]
)
GOOD_DDL = "arg int, path string, block bigint, pos bigint, key binary, id string, expr string"

# Errors only.  "org" gets its own entry at the root's level: at start-up Spark compares the
# level configured for its own classes (WARN when none is) with the root's, and prints a
# notice when they differ.
_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.org.name = org
logger.org.level = error
logger.io.name = io
logger.io.level = error
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = fatal
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = fatal
"""


# -- the session -----------------------------------------------------------------------------


def spark_session(
    master: str | None = None,
    *,
    verbose: bool = False,
    driver_memory: str | None = None,
    app_name: str = "bexdb load",
    log_dir: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """A SparkSession for loads: ``local[*]`` unless ``master`` names a cluster.

    Under ``spark-submit`` (``bexdb load`` run as its application, see the README) the
    master and resources are spark-submit's, and the executors use the Python it names.

    Local workers run this interpreter (``PYSPARK_PYTHON``: else they would use the
    system ``python3``, which lacks the project's dependencies) with the project on their
    ``PYTHONPATH``, and the local JVM compiles with C1 only (:data:`LOCAL_JIT`); Spark's
    log is quiet (errors only, through a log4j2 file written into ``log_dir`` or a
    temporary directory) and its console progress bar is off unless
    ``verbose``.  Cost: 5-7 s on this machine, most of it the JVM.
    """
    from pyspark.sql import SparkSession

    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ  # under spark-submit
    local = not submitted and (master is None or master.startswith("local"))
    root = str(Path(__file__).resolve().parents[1])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    builder = SparkSession.builder
    if not submitted:  # spark-submit's --master (and its other options) stand
        builder = builder.master(master or "local[*]")
    builder = (
        builder.appName(app_name)
        .config("spark.driver.memory", driver_memory or DRIVER_MEMORY)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "true" if verbose else "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(paths))
    )
    java: list[str] = []
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = builder.config("spark.pyspark.python", sys.executable)
        builder = builder.config("spark.pyspark.driver.python", sys.executable)
        java.append(LOCAL_JIT)
    if not verbose:
        where = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="bexdb-"))
        where.mkdir(parents=True, exist_ok=True)
        config = where / "log4j2-quiet.properties"
        config.write_text(_QUIET_LOG4J)
        java.append(f"-Dlog4j2.configurationFile=file:{config}")
    if java:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java))
    try:
        with _quiet_pandas_check():
            spark = builder.getOrCreate()
    finally:
        if not verbose and log_dir is None:
            shutil.rmtree(where, ignore_errors=True)  # read once, at the JVM's start
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _quiet_pandas_check() -> Iterator[None]:
    """pyspark 4.3 warns that it does not fully support pandas 3; only its version check
    (made by mapInArrow) touches pandas here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        yield


def _map(df: DataFrame, fn: Any, ddl: str) -> DataFrame:
    """``df.mapInArrow(fn, ddl)``: Arrow batches in and out of the Python workers."""
    with _quiet_pandas_check():
        return df.mapInArrow(fn, ddl)


# -- extract --------------------------------------------------------------------------------


def source_format(path: str) -> str:
    """``jsonl``, ``parquet`` or ``csv``: by the name's extension; a directory by its files."""
    name = path.rstrip("/").lower()
    for ext in _COMPRESSED:
        name = name.removesuffix(ext)
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith(".csv"):
        return "csv"
    if "://" not in path and os.path.isdir(path):
        names = [n.lower() for n in os.listdir(path) if not n.startswith((".", "_"))]
        if any(n.endswith(".parquet") for n in names):
            return "parquet"
        if any(n.endswith(".csv") for n in names):
            return "csv"
    return "jsonl"


def check_inputs(inputs: Sequence[str]) -> int:
    """Raise FileNotFoundError for a missing local input; return the local inputs' bytes."""
    total = 0
    for path in inputs:
        if "://" in path:
            continue
        found = glob.glob(path) if glob.has_magic(path) else [path]
        if not found or not all(os.path.exists(p) for p in found):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", path)
        for p in found:
            if os.path.isdir(p):
                total += sum(
                    os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs
                )
            else:
                total += os.path.getsize(p)
    return total


def extract(spark: SparkSession, inputs: Sequence[str]) -> DataFrame:
    """One DataFrame ``(arg, path, block, kind, text)`` over every input, in input order.

    ``text`` is the JSON Lines line as bytes (Spark does not check that a line is UTF-8:
    :func:`parse_record` decodes it, a bad line being one reject), or for Parquet and CSV
    the row as a JSON object (a null field left out, so the record parser reports the
    missing column).  Parquet ``id`` must be an integer or string column, ``expr`` a string
    column; a column that is absent makes every row a reject.
    """
    from pyspark.sql import functions as F

    frames = []
    for arg, path in enumerate(inputs):
        fmt = source_format(path)
        if fmt == "jsonl":
            # lines end at "\n" only, as loaders.records.input_lines (a "\r" is JSON white
            # space); Hadoop's line reader drops a BOM at the start of a file, as it does
            df = spark.read.text(path, lineSep="\n")
            kind, text = JSONL, F.col("value")
        else:
            if fmt == "parquet":
                df = spark.read.parquet(path)
                kind = PARQUET
            else:
                df = spark.read.options(header=True, inferSchema=False, escape='"').csv(path)
                kind = CSV
            text = _row_json(df, path)
        frames.append(
            df.select(
                F.lit(arg).cast("int").alias("arg"),
                F.col("_metadata.file_path").alias("path"),
                F.col("_metadata.file_block_start").alias("block"),
                F.lit(kind).cast("tinyint").alias("kind"),
                text.cast("binary").alias("text"),  # the line's bytes, decoded per record
            )
        )
    return reduce(lambda a, b: a.unionByName(b), frames)


_ID_TYPES = ("byte", "short", "integer", "long", "string")


def _row_json(df: DataFrame, path: str) -> Any:
    from pyspark.sql import functions as F

    fields = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for name, allowed in (("id", _ID_TYPES), ("expr", ("string",))):
        field = fields.get(name)
        if field is None:
            columns.append(F.lit(None).cast("string").alias(name))
            continue
        if field.dataType.typeName() not in allowed:
            raise InvalidInput(
                f'{path}: column "{name}" has type {field.dataType.simpleString()}',
                hint="id must be an integer or string column, expr a string column",
            )
        columns.append(F.col(f"`{field.name}`").alias(name))
    return F.to_json(F.struct(*columns))


def csv_id(text: str) -> int | str:
    """A CSV id field: a JSON integer in signed 64-bit range or a JSON string, else the text.

    As ``bexdb unsubscribe`` reads ids: ``5`` is the integer id, ``"5"`` (quoted inside the
    field) the string.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, a huge integer, nested too deeply
        return text
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63:
        return value
    return text


_RECORD_SHAPE = 'a record must be an object with "id" and "expr"'


def parse_record(kind: int, text: bytes | None) -> Record | None:
    """The record of one extracted row (its ``line`` is set later), or None if blank."""
    if text is None:
        return None
    record = parse_line(text)
    if record is None or kind == JSONL:
        return record
    if record.error == _RECORD_SHAPE:
        column = "id" if record.id is None else "expr"
        record.error = f'the row has no value in column "{column}"'
    if kind == CSV and isinstance(record.id, str):
        record.id, problem = shown_id(csv_id(record.id))  # '"\\ud800"' is a lone surrogate
        if problem is not None and record.error is None:
            record.expr, record.error = None, problem
    return record


def _file_id(path: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(path.encode(), digest_size=8).digest(), "big", signed=True
    )


def _rows(batch: pa.RecordBatch, *names: str) -> Iterator[tuple[Any, ...]]:
    return zip(*(batch.column(name).to_pylist() for name in names), strict=True)


# -- transforms (executors) ----------------------------------------------------------------


def compile_partition(
    batches: Iterable[pa.RecordBatch],
    schema_doc: dict[str, Any],
    settings: dict[str, int] | None = None,
    counter: Any = None,
    *,
    runs: str,
    shards: int = 1,
) -> Iterator[pa.RecordBatch]:
    """Extracted rows -> compiled records in run files; emits the files and the splits.

    Each record goes to the run file of its shard (:func:`shard_of`) in ``runs``: one
    Arrow stream per (shard, task attempt), ``runs/shard-XXXX/<attempt>.arrow``, rows
    :data:`RUN`: the record, its error (malformed JSON, bad id, missing column; syntax and
    type errors of its expression: data, not exceptions), or its clauses as atom ids
    local to the task and its places (:meth:`Index.places`) as rows.  The task's atoms go
    to ``runs/atoms/<attempt>.arrow`` (:data:`ATOMS`: each one's store key, made once per
    atom in the worker).  What this yields (:data:`RESULT`) is small: one ``RUNS`` row
    per record file (its shard in ``pos``, its rows in ``block``) and one ``BLOCK`` row per
    file split read.  ``counter`` (an accumulator) counts records.

    Cost: ~35 µs of CPU per record of BEGen's workload (8 atoms) once the worker's
    compiler is warm (:func:`_compiler`): reading the record ~6, :meth:`Index.compile`
    ~12 (remembered conjuncts), places ~8, atom ids and columns ~8.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.taskAttemptId() if context is not None else os.getpid()
    splits: dict[tuple[int, str, int], int] = {}
    fids: dict[str, int] = {}
    keys = _KEYS  # atom -> its store key, kept by the worker (atoms repeat: _order_atom)
    local: dict[Atom, int] = {}  # atom -> its id in this task
    local_keys: list[bytes] = []
    numbers = {name: i for i, name in enumerate(sorted(schema_doc["attributes"]))}
    encode = codec.encode_value
    writers: dict[int, tuple[str, pa.RecordBatchStreamWriter]] = {}
    written = [0] * shards
    seen = 0
    try:
        with gc_paused():
            compile_places = _compiler(schema_doc, settings).compile_places
            for batch in batches:
                parts = [_RunPart() for _ in range(shards)]
                for arg, path, block, kind, text in _rows(
                    batch, "arg", "path", "block", "kind", "text"
                ):
                    where = (arg, path, block)
                    pos = splits.get(where, 0)
                    splits[where] = pos + 1
                    record = parse_record(kind, text)
                    if record is None:
                        continue
                    seen += 1
                    fid = fids.get(path)
                    if fid is None:
                        fid = fids[path] = _file_id(path)
                    ident = record.id
                    key = expr = cerror = None
                    clauses: list[Any] = []
                    spans_of: list[Any] = []
                    if record.error is None:
                        key = codec.encode_id(ident)
                        expr = record.expr
                        try:
                            clauses, spans_of = compile_places(ident, expr)
                        except InvalidInput as exc:
                            # as python_load: the reason without "subscription ID: "
                            cerror = exc.message.split(": ", 1)[-1]
                    shown = str(ident) if type(ident) is int else json.dumps(ident)
                    part = parts[shard_of(key, shards)]
                    part.rows.append((arg, fid, block, pos, key, shown, expr, record.error, cerror))
                    for clause, spans in zip(clauses, spans_of, strict=True):
                        ids = []
                        for atom in clause:
                            aid = local.get(atom)
                            if aid is None:
                                k = keys.get(atom)
                                if k is None:
                                    if len(keys) >= _KEYS_MAX:
                                        keys.clear()
                                    k = keys[atom] = encode(atom.as_tuple())
                                local_keys.append(k)
                                aid = local[atom] = len(local_keys)
                            ids.append(aid)
                        part.atoms.extend(ids or (0,))
                        part.lens.append(len(ids) or 1)
                        part.nrows.append(len(spans))
                        part.pattr.extend(map(numbers.__getitem__, spans))
                        flat = list(chain.from_iterable(spans.values()))
                        part.plo.extend(flat[0::2])
                        part.phi.extend(flat[1::2])
                    part.close_record()
                for shard, part in enumerate(parts):
                    if not part.rows:
                        continue
                    entry = writers.get(shard)
                    if entry is None:
                        name = str(Path(runs) / sharding.shard_name(shard) / f"{attempt}.arrow")
                        entry = writers[shard] = (name, pa.ipc.new_stream(name, RUN))
                    entry[1].write_batch(part.batch())
                    written[shard] += len(part.rows)
    finally:
        for _, writer in writers.values():
            writer.close()
        if counter is not None:
            counter.add(seen)
    if writers:
        with pa.ipc.new_stream(_atoms_file(next(iter(writers.values()))[0]), ATOMS) as out:
            out.write_batch(pa.record_batch([pa.array(local_keys, pa.binary())], schema=ATOMS))
    done: dict[str, list[Any]] = {name: [] for name in RESULT.names}
    for (arg, path, block), count in splits.items():
        _append(done, kind=BLOCK, arg=arg, fid=_file_id(path), block=block, pos=count, path=path)
    for shard, (name, _) in sorted(writers.items()):
        _append(done, kind=RUNS, pos=shard, block=written[shard], path=name)
    yield pa.RecordBatch.from_pydict(done, schema=RESULT)


class _RunPart:
    """One shard's records of one input batch, as :data:`RUN` columns: the scalar ones
    as row tuples, the list ones flat with their offsets (no list object per record)."""

    __slots__ = (
        "atom_end",
        "atoms",
        "clause_end",
        "lens",
        "nrows",
        "pattr",
        "phi",
        "place_end",
        "plo",
        "rows",
    )

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.atoms, self.lens, self.nrows, self.pattr = (array("i") for _ in range(4))
        self.plo, self.phi = array("Q"), array("Q")
        self.atom_end, self.clause_end, self.place_end = (
            array("i", [0]),
            array("i", [0]),
            array("i", [0]),
        )

    def close_record(self) -> None:
        self.atom_end.append(len(self.atoms))
        self.clause_end.append(len(self.lens))
        self.place_end.append(len(self.pattr))

    def batch(self) -> pa.RecordBatch:
        scalars = _batch(self.rows, _RUN_SCALARS)
        lists = []
        for values, ends, field in (
            (self.atoms, self.atom_end, "atoms"),
            (self.lens, self.clause_end, "lens"),
            (self.nrows, self.clause_end, "rows"),
            (self.pattr, self.place_end, "pattr"),
            (self.plo, self.place_end, "plo"),
            (self.phi, self.place_end, "phi"),
        ):
            typ = RUN.field(field).type
            lists.append(
                pa.ListArray.from_arrays(
                    pa.array(np.frombuffer(ends, dtype=np.int32)),
                    pa.array(np.frombuffer(values, dtype=typ.value_type.to_pandas_dtype())),
                    type=typ,
                )
            )
        return pa.RecordBatch.from_arrays([*scalars.columns, *lists], schema=RUN)


def _atoms_file(run_file: str) -> str:
    """The atoms file of the task that wrote ``run_file``: ``runs/atoms/<attempt>.arrow``."""
    path = Path(run_file)
    return str(path.parent.parent / "atoms" / path.name)


def shard_of(key: bytes | None, shards: int) -> int:
    """The shard of a record by its id key: ``crc32(key) mod shards`` (0 for no key).

    Stable across processes and runs (unlike Python's ``hash``), so every occurrence of
    an id meets in one shard task, where duplicates are found.
    """
    return zlib.crc32(key) % shards if key is not None and shards > 1 else 0


def read_runs(paths: Iterable[str]) -> tuple[pa.Table, list[bytes]]:
    """The rows of run files (:data:`RUN`) in the order given, their atom ids made global:
    the store key of atom id i + 1 is the i-th of the keys returned (0: the true atom).

    Cost: one dict lookup per atom of each task, then numpy (no work per record).
    """
    ids: dict[bytes, int] = {}
    tables = []
    for path in paths:
        with pa.ipc.open_stream(_atoms_file(path)) as reader:
            keys = reader.read_all()["key"].to_pylist()
        glob_ids = np.zeros(len(keys) + 1, dtype=np.int32)
        glob_ids[1:] = [ids.setdefault(k, len(ids) + 1) for k in keys]
        with pa.ipc.open_stream(path) as reader:
            table = reader.read_all().combine_chunks()
        atoms = table["atoms"].chunk(0) if table.num_rows else pa.array([], RUN.field("atoms").type)
        local = np.asarray(atoms.values)
        renamed = pa.ListArray.from_arrays(atoms.offsets, pa.array(glob_ids[local]))
        tables.append(table.set_column(table.schema.get_field_index("atoms"), "atoms", renamed))
    table = pa.concat_tables(tables) if tables else RUN.empty_table()
    return table, list(ids)


#: Per Python worker, kept across its tasks (Spark reuses workers): the compiling index of
#: the last (schema, settings), whose caches (remembered conjuncts, grid spans) then start
#: warm, and the store keys of recent atoms.
_COMPILER: dict[str, Index] = {}
_KEYS: dict[Atom, bytes] = {}


def _compiler(schema_doc: dict[str, Any], settings: dict[str, int] | None) -> Index:
    """An index that only compiles (:meth:`Index.compile`, :meth:`Index.places`).

    Its store is an empty scratch directory, removed as soon as the store is open: the
    index keeps reading its settings through the open environment, and nothing is left
    behind however the worker ends.
    """
    key = json.dumps([schema_doc, settings], sort_keys=True)
    idx = _COMPILER.get(key)
    if idx is None:
        for old in _COMPILER.values():
            old.close()
        _COMPILER.clear()
        _KEYS.clear()
        scratch = tempfile.mkdtemp(prefix="bexdb-compile-")
        try:
            idx = Index.open(scratch, schema=schema_doc, settings=settings, sync=False)
            idx.settings()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        _COMPILER[key] = idx
    return idx


def _batch(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows (tuples in ``schema``'s column order) as one Arrow batch."""
    columns = list(zip(*rows, strict=True)) or [()] * len(schema)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )


def _append(out: dict[str, list[Any]], **values: Any) -> None:
    for name, column in out.items():
        column.append(values.get(name))


def evidence_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Extracted rows -> ``(key, pairs)`` per usable record: its "attribute\\0kind" evidence."""
    for batch in batches:
        keys: list[bytes] = []
        pairs: list[list[str]] = []
        for kind, text in _rows(batch, "kind", "text"):
            record = parse_record(kind, text)
            if record is None or record.error is not None:
                continue
            keys.append(codec.encode_id(record.id))
            try:
                node = parse(record.expr)
            except ExpressionError:
                pairs.append([])  # Schema.infer skips what does not parse
                continue
            pairs.append(sorted({f"{attr}\0{k}" for attr, k in type_evidence(node)}))
        yield pa.RecordBatch.from_pydict({"key": keys, "pairs": pairs}, schema=EVIDENCE)


def good_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Extracted rows -> usable records with their place (for the exact inference error)."""
    splits: dict[tuple[int, str, int], int] = {}
    for batch in batches:
        out: dict[str, list[Any]] = {name: [] for name in GOOD.names}
        for arg, path, block, kind, text in _rows(batch, "arg", "path", "block", "kind", "text"):
            where = (arg, path, block)
            pos = splits.get(where, 0)
            splits[where] = pos + 1
            record = parse_record(kind, text)
            if record is None or record.error is not None:
                continue
            _append(
                out,
                arg=arg,
                path=path,
                block=block,
                pos=pos,
                key=codec.encode_id(record.id),
                id=json.dumps(record.id),
                expr=record.expr,
            )
        yield pa.RecordBatch.from_pydict(out, schema=GOOD)


# -- load (executors: one task per shard) ----------------------------------------------------


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
    for batch in batches:
        for shard in batch.column("id").to_pylist():
            table, atom_keys = read_runs(runs.get(shard, ()))
            good, rejects = triage(table)
            del table  # the shard's records now live in ``good`` only
            out: dict[str, list[Any]] = {name: [] for name in RESULT.names}
            for arg, fid, block, pos, ident, error in rejects:
                _append(
                    out, kind=REJECT, arg=arg, fid=fid, block=block, pos=pos, id=ident, error=error
                )
            dest = _shard_dest(root, shards, shard)
            raw = root / f"raw-{shard:04d}"
            figures = build_store(good, atom_keys, schema_doc, settings, raw, dest, fail_at=fail_at)
            figures["shard"] = shard
            _append(out, kind=SHARD, pos=shard, error=json.dumps(figures))
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
    atom_keys: list[bytes],
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
            flat = {name: np.asarray(pc.list_flatten(good[name])) for name in _LISTS}
            atoms = flat["atoms"].astype(np.int64)
            used, first = np.unique(atoms[atoms > 0], return_index=True)
            used = used[np.argsort(first)]  # global ids in order of first use
            dense = np.zeros(len(atom_keys) + 1, dtype=np.int64)
            dense[used] = np.arange(1, len(used) + 1)
            subs = PackedSubs(
                idents=_idents(good["id"]),
                exprs=good["expr"].to_pylist(),
                per_sub=np.asarray(pc.list_value_length(good["lens"])),
                lens=flat["lens"],
                atoms=dense[atoms],
            )
            places = PlaceTable.from_arrays(
                sorted(schema_doc["attributes"]),
                flat["rows"],
                flat["pattr"],
                flat["plo"],
                flat["phi"],
            )
            catalog = {
                aid: atom_from_tuple(codec.decode_value(atom_keys[g - 1]))
                for aid, g in enumerate(used.tolist(), 1)
            }
            del flat, atoms, dense
            t1 = time.perf_counter()
            counts = build_from_parts(idx, subs, places, catalog)
            del subs, places, catalog  # the store has them now; check() reads them back
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


# -- the driver -------------------------------------------------------------------------------


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
    driver = _Driver(_Progress(progress))
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    own = spark is None
    with driver.interruptible():
        if spark is None:
            driver.report.say(f"starting Spark ({master or 'local[*]'})")
            t0 = time.monotonic()
            spark = spark_session(master, verbose=verbose, driver_memory=driver_memory)
            driver.stages["session"] = round(time.monotonic() - t0, 3)
            driver.listen()  # the new SparkContext set its own SIGINT handler
        try:
            driver.check()
            _tune_splits(spark, size, split_bytes)
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
        finally:
            if own and spark is not None:
                spark.stop()
    summary["seconds"] = round(time.monotonic() - started, 3)
    summary["stages"] = driver.stages
    driver.report.say(
        f"done: {summary['loaded']:,} loaded, {summary['rejected']:,} rejected "
        f"in {summary['seconds']:,.1f} s"
    )
    return summary


def _tune_splits(spark: SparkSession, size: int, split: int | None) -> None:
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
    driver: _Driver,
    fail_at: str | None,
) -> dict[str, Any]:
    sc = spark.sparkContext
    k = shards or 1
    schema_doc = schema.to_json()
    counter = sc.accumulator(0)
    runs = staging / "runs"
    for name in ("atoms", *map(sharding.shard_name, range(k))):
        (runs / name).mkdir(parents=True)
    compiled = _map(
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
    built = _map(
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
                "hash": "crc32(storage.codec.encode_id(id)) mod shards",
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


def infer_schema(spark: SparkSession, source: DataFrame, driver: _Driver) -> Schema:
    """The schema :meth:`Schema.infer` would give over the usable, non-duplicated records.

    Distributed: the executors extract each record's typing evidence, Spark drops
    duplicated ids and keeps the distinct (attribute, kind) pairs, the driver settles
    each attribute's type with Schema.infer's own rule.  If an attribute cannot be typed,
    the driver re-runs Schema.infer over the records in input order for the exact error.
    """
    from pyspark.sql import functions as F

    evidence = _map(source, evidence_partition, EVIDENCE_DDL)
    pairs = (
        evidence.groupBy("key")
        .agg(F.count(F.lit(1)).alias("n"), F.first("pairs").alias("pairs"))
        .filter("n = 1")
        .select(F.explode("pairs").alias("pair"))
        .distinct()
    )
    table = driver.run(spark.sparkContext, pairs, ("infer",))
    kinds: dict[str, dict[str, dict[Any, None]]] = {}
    for pair in table["pair"].to_pylist():
        attr, kind = pair.split("\0")
        kinds.setdefault(attr, {})[kind] = {}
    specs = []
    for attr in sorted(kinds):
        typ = settled_type(kinds[attr])
        if typ is None:
            return _infer_exactly(spark, source, driver)
        specs.append(AttrSpec(attr, typ))
    return Schema(specs)


def _infer_exactly(spark: SparkSession, source: DataFrame, driver: _Driver) -> Schema:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    driver.report.say("infer: an attribute has no single type; collecting records for the error")
    good = _map(source, good_partition, GOOD_DDL)
    unique = good.withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("key"))).filter("n = 1")
    table = driver.run(spark.sparkContext, unique, ("infer",))
    table = table.take(
        pc.sort_indices(
            table, sort_keys=[(c, "ascending") for c in ("arg", "path", "block", "pos")]
        )
    )
    ids = [json.loads(i) for i in table["id"].to_pylist()]
    return Schema.infer(zip(ids, table["expr"].to_pylist(), strict=True))  # raises


# -- running a job: progress, cancellation ---------------------------------------------------


class _Driver:
    """The driver's side of one load: progress, stage timings, and interrupts.

    SIGINT and SIGTERM during a load are noted, cancel the running Spark job, and stop the
    load at the next step (:meth:`check`) with KeyboardInterrupt; nothing is published.
    The handler never raises: the main thread is then usually blocked in a call into the
    JVM, and an exception there (what pyspark's own SIGINT handler does) can leave the
    job running to its end, since pyspark's collect waits for its job even when
    interrupted.  Nor can the handler call the JVM on that thread's connection (the call
    would wait for the blocked one); it cancels the job from a new thread instead.
    """

    def __init__(self, report: _Progress) -> None:
        self.report = report
        self.stages: dict[str, float] = {}
        self.fired: list[int] = []
        self.job: tuple[SparkContext, str] | None = None

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Handle SIGINT and SIGTERM meanwhile (main thread only: else nothing changes)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        self.listen()
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def listen(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, self._signal)

    def _signal(self, signum: int, frame: Any) -> None:
        self.fired.append(signum)
        job = self.job
        if job is not None:
            threading.Thread(target=job[0].cancelJobGroup, args=(job[1],), daemon=True).start()

    def check(self) -> None:
        """Stop here (KeyboardInterrupt) if a signal came."""
        if self.fired:
            self.report.say(f"interrupted by signal {self.fired[0]}: nothing is published")
            raise KeyboardInterrupt(f"signal {self.fired[0]}")

    def run(
        self, sc: SparkContext, df: DataFrame, labels: Sequence[str], counter: Any = None
    ) -> pa.Table:
        """Collect ``df`` (small: results only) as Arrow, with progress; cancel on failure.

        On any failure the job is cancelled and this waits until no task of it runs any
        more, so that the caller's clean-up cannot race a task writing into the staging
        directory.
        """
        self.check()
        group = f"bexdb-{os.getpid()}-{time.monotonic_ns()}"
        sc.setJobGroup(group, "bexdb load", interruptOnCancel=True)
        self.job = (sc, group)
        try:
            with self.report.watch(sc, group, labels, counter, self.stages):
                table = df.toArrow()
        except BaseException as exc:
            sc.cancelJobGroup(group)
            _wait_idle(sc, group)
            self.check()
            if isinstance(exc, Exception) and not isinstance(exc, BexdbError):
                raise BexdbError(f"the Spark job failed: {_short(exc)}") from exc
            raise
        finally:
            self.job = None
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        self.check()
        return table


def _short(exc: BaseException) -> str:
    """The useful last line of a Spark error (a Python worker's traceback ends with it)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    tail = [line for line in lines if not line.startswith(("at ", "File ", "JVM stacktrace"))]
    return (tail[-1] if tail else type(exc).__name__)[:500]


def _wait_idle(sc: SparkContext, group: str, timeout: float = 60.0) -> None:
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                st = tracker.getStageInfo(stage)
                busy = busy or (st is not None and st.numActiveTasks > 0)
        if not busy:
            return
        time.sleep(0.2)


class _Progress:
    """Progress on stderr: one line per stage, rewritten in place about once a second."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out

    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()

    @contextmanager
    def watch(
        self,
        sc: SparkContext,
        group: str,
        labels: Sequence[str],
        counter: Any,
        stages: dict[str, float],
    ) -> Iterator[None]:
        """Poll Spark's status tracker while the job of ``group`` runs.

        Stage i of the job is ``labels[i]`` (the last label for later ones); ``counter``
        (an accumulator, updated as tasks finish) gives the records for rate and ETA.
        Each label's seconds go into ``stages``.
        """
        stop = threading.Event()
        seen: dict[str, list[float]] = {}
        started = time.monotonic()

        out = self.out
        tty = out is not None and out.isatty()
        shown: list[str] = []  # the line on screen (a terminal), or the last label printed

        finish: dict[tuple[str, int], float] = {}  # (label, tasks done) -> projected end

        def poll() -> None:
            tracker = sc.statusTracker()
            printed = 0.0
            while not stop.wait(0.5):
                now = time.monotonic()
                line = label = ""
                for job in tracker.getJobIdsForGroup(group):
                    info = tracker.getJobInfo(job)
                    for i, stage in enumerate(sorted(info.stageIds) if info else ()):
                        st = tracker.getStageInfo(stage)
                        if st is None or st.numActiveTasks == 0:
                            continue
                        label = labels[min(i, len(labels) - 1)]
                        span = seen.setdefault(label, [now, now])
                        span[1] = now
                        records = int(counter.value) if counter is not None else 0
                        line = self._line(label, st, now - span[0], now - started, records, finish)
                if not line or out is None:
                    continue
                if tty:
                    out.write("\r" + line.ljust(len(shown[0]) if shown else 0))
                    shown[:] = [line]
                elif not shown or shown[0] != label or now - printed >= 10:
                    out.write(line + "\n")
                    shown[:] = [label]
                    printed = now
                out.flush()

        thread = threading.Thread(target=poll, name="bexdb-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if tty and shown and out is not None:
                out.write("\n")
                out.flush()
            total = time.monotonic() - started
            for label, (first, last) in seen.items():
                stages[label] = round(stages.get(label, 0.0) + last - first, 1)
            stages["job: " + "+".join(labels)] = round(total, 3)

    @staticmethod
    def _line(
        label: str,
        st: Any,
        elapsed: float,
        job: float,
        records: int,
        finish: dict[tuple[str, int], float],
    ) -> str:
        """One progress line: ``elapsed`` seconds in this label, ``job`` in the job, whose
        ``records`` so far (tasks report them as they finish) give the rate over the job's
        time, once a second has passed (over the label's first moments it was absurd).  The
        time left counts down from the end projected when the last task finished, instead of
        moving only when one finishes."""
        done, total = st.numCompletedTasks, st.numTasks
        if label == "build":  # K long tasks: no fraction to speak of
            text = f"build: {done}/{total} shard stores"
            if records:
                text += f" of {records:,} records"
            return text + f", {elapsed:,.0f} s"
        text = f"{label}: {done}/{total} tasks"
        if records and job >= 1.0:
            text += f", {records:,} records, {records / job:,.0f}/s"
        if done:
            end = finish.setdefault((label, done), elapsed * total / done)
            return text + f", ~{max(end - elapsed, 0.0):,.0f} s left"
        return text + f", {elapsed:,.0f} s"
