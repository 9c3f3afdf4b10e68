"""Helpers of the Spark matching and streaming tests: their subscriptions and stores, the
single-process ``bexdb match`` to compare with, and the readers of their outputs."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.stores.sharded import HASH, shard_name, shard_of, write_manifest
from loaders.spark.streamlog import committed_results
from storage.codec import encode_id
from tests.support.workload import SCHEMA, expression
from tools import cli

BAD = [
    "not json",
    '{"i": "seven"}',  # a wrong type
    '{"il": [1, null]}',
    "[1, 2]",  # not an object
    '{"i": 1',  # truncated
    "",  # blank lines get no result
    "   ",
]


def subscriptions(seed: int, n: int) -> dict[Any, str]:
    rng = random.Random(seed)
    return {(i if i % 3 else f"s{i}"): expression(rng) for i in range(n)}


def plain_store(path: Path, subs: dict[Any, str]) -> str:
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
    return str(path)


def sharded_store(root: Path, subs: dict[Any, str], k: int = 2) -> str:
    """The load's layout and routing, written by hand."""
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(k)]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), k)].append((ident, expr))
    for i, part in enumerate(parts):
        with Index.open(root / shard_name(i), schema=SCHEMA) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(i), "subscriptions": len(p)} for i, p in enumerate(parts)]
    write_manifest(root, entries, {"by": "id", "hash": HASH, "shards": k})
    return str(root)


def single_process(
    store: str, events: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[int, dict[str, Any]]]:
    """``bexdb match STORE EVENTS --jobs 1``: its exit code and results keyed by 1-based
    line (in this process: a pool of matching processes is tests/betree/test_parallel.py's
    subject, and would start two interpreters for an input of a batch or more)."""
    capsys.readouterr()
    code = cli.main(["match", store, str(events), "--jobs", "1"])
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    lines = events.read_bytes().removeprefix(b"\xef\xbb\xbf").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    numbers = [n for n, line in enumerate(lines, 1) if line.strip()]
    assert len(numbers) == len(results)
    return code, dict(zip(numbers, results, strict=True))


def output(out: Path) -> list[dict[str, Any]]:
    """Every object of the parts; checks the directory holds parts and ``_SUCCESS`` only."""
    names = sorted(os.listdir(out))
    assert names[0] == "_SUCCESS" and (out / "_SUCCESS").stat().st_size == 0
    assert names[1:] and all(n.startswith("part-") for n in names[1:])
    return [json.loads(line) for n in names[1:] for line in (out / n).read_text().splitlines()]


def by_line(docs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    found = {d.pop("line"): d for d in docs}
    assert len(found) == len(docs), "a line answered twice"
    return found


def leftovers(target: Path) -> list[str]:
    """The target, and any staging directory left beside it."""
    return [
        p for p in os.listdir(target.parent) if p == target.name or p.startswith(f".{target.name}.")
    ]


@pytest.mark.spark
def drop(source: Path, name: str, data: bytes) -> Path:
    """A file put into the source whole: written under a hidden name, renamed in."""
    hidden = source / f".{name}.tmp"
    hidden.write_bytes(data)
    os.rename(hidden, source / name)
    return source / name


def per_file(out: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Committed results by file and line; an event answered twice fails."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for doc in committed_results(out):
        lines = found.setdefault(doc.pop("file"), {})
        line = doc.pop("line")
        assert line not in lines, f"{line} answered twice"
        lines[line] = doc
    return found
