"""Extract: the inputs of a load as one DataFrame of raw records, each with its place.

Each input is JSON Lines (``spark.read.text``), Parquet or CSV (columns ``id``, ``expr``,
optionally ``meta``: a subscription's metadata as JSON text, :mod:`betree.disk.metadata`; a row
becomes the JSON object ``to_json(struct(id, expr))``, so every format goes through
the one record parser of :mod:`loaders.records`).  A JSON Lines line reaches the executors
as its bytes, cut at ``"\\n"`` only, and is decoded there with the record, so that a line
that is not UTF-8 is one reject, as in the single-process engine (Spark itself never
checks that text is UTF-8).  Every row carries its file and the start of its file split
(Spark's ``_metadata``), which is how rejects get their line numbers without a second
pass: a task numbers the rows of each split it reads (:class:`SplitRows`) and reports how
many rows each split had; the driver turns (split start, position) into a line by adding
the row counts of the file's earlier splits.  For Parquet and CSV the "line" is the
1-based data row.

The DataFrame is built on the driver; :func:`parse_record` runs in the executors, inside
the transforms that read it (:mod:`loaders.spark.compile`, :mod:`loaders.spark.infer`).
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from loaders.records import Record, parse_line, shown_id
from storage.errors import InvalidInput

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".snappy", ".deflate")

# record kinds of the extracted rows
JSONL, PARQUET, CSV = 0, 1, 2


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


def extract(
    spark: SparkSession,
    inputs: Sequence[str],
    row_json: Callable[[DataFrame, str], Any] | None = None,
) -> DataFrame:
    """One DataFrame ``(arg, path, block, kind, text)`` over every input, in input order.

    ``text`` is the JSON Lines line as bytes (Spark does not check that a line is UTF-8:
    :func:`parse_record` decodes it, a bad line being one reject), or for Parquet and CSV
    the row as a JSON object (a null field left out, so the record parser reports the
    missing column).  Parquet ``id`` must be an integer or string column, ``expr`` a string
    column; a column that is absent makes every row a reject.  ``row_json`` (a Parquet or
    CSV frame and its path -> the JSON text column) replaces that for rows that are not
    subscription records (``bexdb match --engine spark`` reads events this way).
    """
    frames = [read_input(spark.read, path, arg, row_json) for arg, path in enumerate(inputs)]
    return reduce(lambda a, b: a.unionByName(b), frames)


def read_input(
    reader: Any,
    path: str,
    arg: int = 0,
    row_json: Callable[[DataFrame, str], Any] | None = None,
    fmt: str | None = None,
) -> DataFrame:
    """One input as :func:`extract`'s columns, read by ``reader``: ``spark.read``, or a
    configured ``spark.readStream`` (``bexdb stream``: the same reading of every format).

    ``fmt`` (``jsonl``, ``parquet``, ``csv``) overrides :func:`source_format`.
    """
    from pyspark.sql import functions as F

    fmt = fmt or source_format(path)
    if fmt == "jsonl":
        # lines end at "\n" only, as betree.formats.jsonl.input_lines (a "\r" is JSON white
        # space); Hadoop's line reader drops a BOM at the start of a file, as it does
        df = reader.text(path, lineSep="\n")
        kind, text = JSONL, F.col("value")
    else:
        if fmt == "parquet":
            df = reader.parquet(path)
            kind = PARQUET
        else:
            df = reader.options(header=True, inferSchema=False, escape='"').csv(path)
            kind = CSV
        text = (row_json or _row_json)(df, path)
    return df.select(
        F.lit(arg).cast("int").alias("arg"),
        F.col("_metadata.file_path").alias("path"),
        F.col("_metadata.file_block_start").alias("block"),
        F.lit(kind).cast("tinyint").alias("kind"),
        text.cast("binary").alias("text"),  # the line's bytes, decoded per record
    )


_ID_TYPES = ("byte", "short", "integer", "long", "string")


def _row_json(df: DataFrame, path: str) -> Any:
    from pyspark.sql import functions as F

    fields = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for name, allowed in (("id", _ID_TYPES), ("expr", ("string",)), ("meta", ("string",))):
        field = fields.get(name)
        if field is None:
            if name != "meta":  # (optional: a subscription's metadata as JSON text)
                columns.append(F.lit(None).cast("string").alias(name))
            continue
        if field.dataType.typeName() not in allowed:
            raise InvalidInput(
                f'{path}: column "{name}" has type {field.dataType.simpleString()}',
                hint="id must be an integer or string column, expr and meta string columns",
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
    record = parse_line(text, meta_column=kind != JSONL)
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


def file_id(path: str) -> int:
    """A file's id in run files and results: 64 bits of the BLAKE2b hash of its path."""
    return int.from_bytes(
        hashlib.blake2b(path.encode(), digest_size=8).digest(), "big", signed=True
    )


def batch_rows(batch: pa.RecordBatch, *names: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``batch`` as tuples of the columns ``names``."""
    return zip(*(batch.column(name).to_pylist() for name in names), strict=True)


class SplitRows:
    """Rows read so far per file split (``(arg, path, block)``): each row's position in its
    split, and at the end each split's row count (how the driver numbers reject lines)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, str, int], int] = {}

    def position(self, arg: int, path: str, block: int) -> int:
        """The 0-based position of the next row of this split."""
        where = (arg, path, block)
        pos = self.counts.get(where, 0)
        self.counts[where] = pos + 1
        return pos
