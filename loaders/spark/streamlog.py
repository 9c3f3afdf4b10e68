"""The metadata logs of Spark's file source and file sink, read without Spark.

Why: a file sink's directory holds every part any attempt wrote, also those of a batch
that a ``kill -9`` interrupted and that was written again after the restart; only the parts
named in the sink's log ``OUT/_spark_metadata`` are committed (how exactly-once is kept),
and a reader must go through it, as Spark's own readers do.  The source's log
(``CHECKPOINT/sources/0``) names the files each batch took (``bexdb stream``'s lag).

Layout (Spark's ``CompactibleFileStreamLog``, the same for both logs): a directory of
files named by batch id, ``N``, written whole (a temporary file renamed); every tenth batch
(``spark.sql.streaming.*.log.compactInterval``) as ``N.compact``, which holds the entries of
batches ``0..N``, after which older files may be deleted.  Each file is the line ``v1``
then one JSON object a line: a sink entry ``{"path", "size", "isDir", "modificationTime",
"blockReplication", "blockSize", "action": "add"|"delete"}``, a source entry ``{"path",
"timestamp", "batchId"}``; paths are URIs (``file:///…``).  Hidden files (``.N.crc``,
temporary files) are not part of the log.

Cost: a listing of the log directory and a read of the latest compact file and those after.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from storage.errors import BexdbError

VERSION = "v1"
SINK_LOG = "_spark_metadata"
_NAME = re.compile(r"(\d+)(\.compact)?")


def batches(log: str | os.PathLike[str]) -> list[int]:
    """The batch ids the log holds a file for (a compact file's included), ascending."""
    try:
        names = os.listdir(log)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _NAME.fullmatch(n)))


def entries(log: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every entry of every batch in the log, oldest first (none for a missing log)."""
    ids = batches(log)
    root = Path(log)
    compacts = [i for i in ids if (root / f"{i}.compact").exists()]
    start = compacts[-1] if compacts else 0
    out: list[dict[str, Any]] = []
    for i in (i for i in ids if i >= start):
        name = f"{i}.compact" if i == start and compacts else str(i)
        out.extend(_read(root / name))
    return out


def _read(path: Path) -> Iterator[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != VERSION:
        raise BexdbError(
            f"{path}: not a Spark metadata log file of version {VERSION}",
            "is it a directory written by Spark's file sink or source?",
        )
    return (json.loads(line) for line in lines[1:] if line.strip())


def local(uri: str) -> str:
    """A log's path as a local path where it is one (``file:///a/b`` -> ``/a/b``)."""
    url = urlparse(uri)
    return unquote(url.path) if url.scheme == "file" else uri


def committed_parts(out: str | os.PathLike[str]) -> list[str]:
    """The parts of a file sink's output that its log says are committed, in log order."""
    kept: dict[str, None] = {}
    for entry in entries(Path(out) / SINK_LOG):
        path = local(entry["path"])
        if entry.get("action") == "delete":
            kept.pop(path, None)
        elif not entry.get("isDir"):
            kept[path] = None
    return list(kept)


def committed_lines(out: str | os.PathLike[str]) -> Iterator[bytes]:
    """Every line of every committed part (JSON Lines for ``bexdb stream``), without its
    ``\\n``; parts a failed attempt left behind are not read."""
    for part in committed_parts(out):
        with open(part, "rb") as fh:
            for line in fh:
                yield line.rstrip(b"\n")


def committed_results(out: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``bexdb stream``'s committed results, one dict per event, decoded."""
    return [json.loads(line) for line in committed_lines(out)]


def taken_files(checkpoint: str | os.PathLike[str]) -> set[str]:
    """The files a streaming query's file source has given to a batch (its log in the
    checkpoint), as local paths."""
    return {local(e["path"]) for e in entries(Path(checkpoint) / "sources" / "0")}
