"""Schema inference for a load given no schema: the types from the records' evidence.

:func:`evidence_partition` (executors) emits each usable record's typing evidence (the
rules of :meth:`Schema.infer`); Spark drops duplicated ids and reduces the evidence to the
distinct (attribute, kind) pairs, and the driver settles the types.  Only that small set
crosses to the driver.  If some attribute cannot be typed, the driver runs
:meth:`Schema.infer` itself over the records in input order (:func:`good_partition`), so
that the error (message and offending ids) is exactly the single-process engine's: a rare,
slower path.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from betree.lang.expr import ExpressionError
from betree.lang.parser import parse

# The evidence and resolution rules of Schema.infer, applied here per record and per
# attribute so that only the distinct (attribute, kind) pairs cross to the driver.
from betree.lang.schema import AttrSpec, Schema, settled_type, type_evidence
from loaders.spark.extract import SplitRows, batch_rows, parse_record
from loaders.spark.results import append_row
from loaders.spark.session import map_arrow
from storage import codec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from loaders.spark.jobs import Driver

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


def evidence_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Extracted rows -> ``(key, pairs)`` per usable record: its "attribute\\0kind" evidence."""
    for batch in batches:
        keys: list[bytes] = []
        pairs: list[list[str]] = []
        for kind, text in batch_rows(batch, "kind", "text"):
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
    splits = SplitRows()
    for batch in batches:
        out: dict[str, list[Any]] = {name: [] for name in GOOD.names}
        for arg, path, block, kind, text in batch_rows(
            batch, "arg", "path", "block", "kind", "text"
        ):
            pos = splits.position(arg, path, block)
            record = parse_record(kind, text)
            if record is None or record.error is not None:
                continue
            append_row(
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


def infer_schema(spark: SparkSession, source: DataFrame, driver: Driver) -> Schema:
    """The schema :meth:`Schema.infer` would give over the usable, non-duplicated records.

    Distributed: the executors extract each record's typing evidence, Spark drops
    duplicated ids and keeps the distinct (attribute, kind) pairs, the driver settles
    each attribute's type with Schema.infer's own rule.  If an attribute cannot be typed,
    the driver re-runs Schema.infer over the records in input order for the exact error.
    """
    from pyspark.sql import functions as F

    evidence = map_arrow(source, evidence_partition, EVIDENCE_DDL)
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


def _infer_exactly(spark: SparkSession, source: DataFrame, driver: Driver) -> Schema:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    driver.report.say("infer: an attribute has no single type; collecting records for the error")
    good = map_arrow(source, good_partition, GOOD_DDL)
    unique = good.withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("key"))).filter("n = 1")
    table = driver.run(spark.sparkContext, unique, ("infer",))
    table = table.take(
        pc.sort_indices(
            table, sort_keys=[(c, "ascending") for c in ("arg", "path", "block", "pos")]
        )
    )
    ids = [json.loads(i) for i in table["id"].to_pylist()]
    return Schema.infer(zip(ids, table["expr"].to_pylist(), strict=True))  # raises
