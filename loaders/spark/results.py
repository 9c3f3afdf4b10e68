"""What the tasks of a load return to the driver: small rows only (:data:`RESULT`).

The compiled records themselves never cross to the driver (they go through run files,
:mod:`loaders.spark.runfiles`); a task returns its rejects, the row counts of the file
splits it read, the run files it wrote and the figures of the shard stores it built.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

# row kinds of the transform's and the load's output (RESULT)
REJECT = 0
BLOCK = 1  # a file split: its row count
SHARD = 2  # a built shard: its figures
RUNS = 3  # a run file written by a compile task: its shard and rows

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


def append_row(out: dict[str, list[Any]], **values: Any) -> None:
    """Append one row to the columns ``out`` (a column not in ``values`` gets None)."""
    for name, column in out.items():
        column.append(values.get(name))
