"""``bexdb match --engine spark`` (``loaders.spark.match``) against the single-process
``bexdb match`` on the same store and events.

JSON Lines with bad events across many input splits; Parquet, CSV and JSON Lines inputs
at once (the ``"file"`` key) against a sharded store, through the command line; failures
that leave no output directory; the usage errors.  Three match runs of two small Spark
jobs each, on the shared session.
"""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from betree.index import Index
from loaders.spark.match import match_events
from storage.errors import BexdbError
from tests.support.spark import (
    BAD,
    by_line,
    leftovers,
    output,
    plain_store,
    sharded_store,
    single_process,
    subscriptions,
)
from tests.support.workload import event
from tools import cli


def test_jsonl_with_bad_events_across_splits(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = plain_store(tmp_path / "store", subscriptions(1, 200))
    rng = random.Random(2)
    lines = [json.dumps(event(rng)).encode() for _ in range(600)]
    for k, bad in enumerate(BAD):
        lines.insert(37 * k + 5, bad.encode())
    lines.insert(100, b'{"s": "\xff\xfe"}')  # not UTF-8
    lines.insert(0, b"")
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")  # a BOM: dropped by both
    code, expected = single_process(store, events, capsys)
    assert code == 3
    out = tmp_path / "out"
    summary = match_events(store, [str(events)], out, spark=spark, split_bytes=4096)
    docs = output(out)
    assert len(os.listdir(out)) > 3  # several splits, one part each
    assert all("file" not in d for d in docs)  # one input: lines say where
    assert by_line(docs) == by_line([{"line": n, **r} for n, r in expected.items()])
    errors = sum("error" in r for r in expected.values())
    assert errors == 6 and summary["rejected"] == errors
    assert summary["events"] == len(expected)
    assert leftovers(out) == ["out"]


@pytest.mark.spark
def test_parquet_csv_and_jsonl_against_a_sharded_store(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = sharded_store(tmp_path / "store", subscriptions(3, 150))
    rng = random.Random(4)
    docs = [event(rng) for _ in range(90)]
    jsonl, parquet = docs[:30], docs[30:60]
    table = [{k: v for k, v in d.items() if v != ""} for d in docs[60:]]  # "" is null in CSV
    table[7] = {"i": "abc", "s": "word"}  # a CSV field that is not an integer
    inputs = {}
    for name, part in (("a.jsonl", jsonl), ("p", parquet), ("c", table)):
        same = tmp_path / f"{name}.same.jsonl"  # the same events as JSON Lines
        same.write_text("".join(json.dumps(d) + "\n" for d in part))
        inputs[name] = same
    jsonl_path = tmp_path / "a.jsonl"
    jsonl_path.write_text(inputs["a.jsonl"].read_text())
    columns = ["i", "j", "f", "s", "b", "il", "sl"]
    floats = [{**d, "f": None if d.get("f") is None else float(d["f"])} for d in parquet]
    pq.write_table(
        pa.Table.from_pylist(
            floats,
            schema=pa.schema(
                [
                    ("i", pa.int64()),
                    ("j", pa.int64()),
                    ("f", pa.float64()),
                    ("s", pa.string()),
                    ("b", pa.bool_()),
                    ("il", pa.list_(pa.int64())),
                    ("sl", pa.list_(pa.string())),
                ]
            ),
        ),
        tmp_path / "p.parquet",
    )
    with open(tmp_path / "c.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for d in table:
            writer.writerow([_csv_field(d.get(c), c) for c in columns])
    paths = [str(jsonl_path), str(tmp_path / "p.parquet"), str(tmp_path / "c.csv")]
    out = tmp_path / "out"
    capsys.readouterr()
    code = cli.main(["match", store, *paths, "--engine", "spark", "--out", str(out)])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 3 and summary["rejected"] == 1 and summary["events"] == 90
    found: dict[str, list[dict[str, Any]]] = {}
    for doc in output(out):
        found.setdefault(doc.pop("file"), []).append(doc)
    assert sorted(found) == sorted(paths)  # each file named as given
    for path, name in zip(paths, ("a.jsonl", "p", "c"), strict=True):
        mine = found[path]
        _, expected = single_process(store, inputs[name], capsys)
        assert by_line(mine) == by_line([{"line": n, **r} for n, r in expected.items()]), name
    assert leftovers(out) == ["out"]


def _csv_field(value: Any, column: str) -> str:
    if value is None:
        return ""
    if column == "s":
        return str(value)
    return json.dumps(value)


@pytest.mark.spark
def test_failed_job_leaves_no_out_dir(spark: Any, tmp_path: Path) -> None:
    store = plain_store(tmp_path / "store", subscriptions(5, 20))
    events = tmp_path / "e.jsonl"
    events.write_text('{"i": 1}\n{"i": 2}\n')
    out = tmp_path / "out"
    with pytest.raises(BexdbError, match="injected failure"):
        match_events(store, [str(events)], out, spark=spark, fail_at="match")
    assert leftovers(out) == []


def test_no_out_dir_without_a_store_or_over_one(tmp_path: Path) -> None:
    """Failures found before Spark starts: exit 1, nothing written."""
    events = tmp_path / "e.jsonl"
    events.write_text('{"i": 1}\n')
    out = tmp_path / "out"
    argv = ["--engine", "spark", "--out", str(out)]
    assert cli.main(["match", str(tmp_path / "missing"), str(events), *argv]) == 1
    assert leftovers(out) == []
    store = plain_store(tmp_path / "store", subscriptions(6, 5))
    out.mkdir()
    (out / "mine").write_text("kept")
    assert cli.main(["match", store, str(events), *argv]) == 1
    assert os.listdir(out) == ["mine"]
    assert (
        cli.main(
            [
                "match",
                store,
                str(tmp_path / "absent.jsonl"),
                "--engine",
                "spark",
                "--out",
                str(tmp_path / "o2"),
            ]
        )
        == 1
    )
    assert leftovers(tmp_path / "o2") == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--engine", "spark"],  # no --out
        ["--out", "o"],  # --out without spark
        ["--master", "local[1]"],
        ["EVENTS2"],  # several inputs need spark
    ],
)
def test_usage_errors(tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    store = plain_store(tmp_path / "store", subscriptions(7, 3))
    events = tmp_path / "e.jsonl"
    events.write_text('{"i": 1}\n')
    argv = [str(events) if a == "EVENTS2" else a for a in argv]
    assert cli.main(["match", store, str(events), *argv]) == 2
    assert "bexdb: " in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_truncated_line_is_refused_at_its_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The single-process reader drops each line's newline, as Spark's does: the error
    names the line's own column, not a "line 2" after its end (both engines agree)."""
    store = plain_store(tmp_path / "store", subscriptions(8, 3))
    events = tmp_path / "e.jsonl"
    events.write_text('{"i": 1\n{"i": 2}\r\n')
    code, found = single_process(store, events, capsys)
    assert code == 3
    assert found[1] == {"error": "malformed JSON: Expecting ',' delimiter at column 8"}
    assert "matches" in found[2]


@pytest.mark.spark
def test_a_store_replaced_between_runs_is_reopened_by_the_warm_workers(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python workers keep the store open across tasks and runs (``WARM``); a run after
    the store was replaced at its path (and written) answers from the new one."""
    rng = random.Random(8)
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(event(rng)) + "\n" for _ in range(120)))
    store = plain_store(tmp_path / "store", subscriptions(5, 120))
    for run, subs in enumerate((subscriptions(6, 120), subscriptions(7, 90))):
        out = tmp_path / f"out{run}"
        match_events(store, [str(events)], out, spark=spark, split_bytes=2048)
        _, expected = single_process(store, events, capsys)
        assert by_line(output(out)) == by_line([{"line": n, **r} for n, r in expected.items()])
        plain_store(tmp_path / "next", subs)  # then put in place of the store
        os.rename(tmp_path / "store", tmp_path / f"old{run}")
        os.rename(tmp_path / "next", tmp_path / "store")
    out = tmp_path / "last"
    match_events(store, [str(events)], out, spark=spark, split_bytes=2048)
    _, expected = single_process(store, events, capsys)
    assert by_line(output(out)) == by_line([{"line": n, **r} for n, r in expected.items()])


@pytest.mark.spark
def test_nested_json_and_parquet_structs(spark: Any, tmp_path: Path) -> None:
    """Events that nest (JSON objects, Parquet structs and lists of structs) are matched
    on Spark as the single process matches them: as dotted paths."""
    schema = {"attributes": {"user.age": {"type": "int"}, "items.sku": {"type": "string_list"}}}
    with Index.open(tmp_path / "store", schema=schema) as idx:
        idx.subscribe_many([(1, "user.age > 18"), (2, "items.sku one of ('a')")])
    docs = [
        {"user": {"age": 30}, "items": [{"sku": "a"}, {"sku": "b"}]},
        {"user": {"age": 10}, "items": [{"sku": "c"}]},
        {"user": {"age": 20}, "items": [{"sku": "a"}]},
    ]
    jsonl = tmp_path / "e.jsonl"
    jsonl.write_text("".join(json.dumps(d) + "\n" for d in docs))
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "e.parquet")
    expected = [[1, 2], [], [1, 2]]
    for name in ("e.jsonl", "e.parquet"):
        out = tmp_path / f"out-{name}"
        match_events(str(tmp_path / "store"), [str(tmp_path / name)], out, spark=spark)
        found = by_line(output(out))
        assert [sorted(found[n]["matches"]) for n in (1, 2, 3)] == expected, name
