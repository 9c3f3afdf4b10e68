"""``bexdb stream`` (``loaders.spark.stream``) against ``bexdb match`` and the brute-force
evaluator, on the shared local session.

JSON Lines (bad events, a BOM, a line that is not UTF-8), CSV and Parquet sources against a
sharded store, each file's results read through the sink's log and compared with the
single-process ``bexdb match`` of the same file; a running query that sees subscriptions
written while it runs from the next micro-batch on (every shard); the Kafka arguments.
The exactly-once test with real processes and ``kill -9`` is in test_spark_stream_kill.py;
writes during a micro-batch (its pin) in test_spark_stream_pin.py.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from betree.lang.schema import Schema
from betree.stores.live import delete_subscriptions, write_subscriptions
from betree.stores.sharded import open_index
from loaders.spark.stream import Endpoint, endpoint, events_frame, stream
from loaders.spark.streamlog import committed_parts
from storage.errors import InvalidInput
from tests.support.brute import brute
from tests.support.spark import BAD, drop, per_file, single_process, subscriptions
from tests.support.workload import SCHEMA, build_hashed, event
from tools import cli

pytestmark = pytest.mark.spark


def test_jsonl_csv_parquet_against_bexdb_match(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = build_hashed(tmp_path / "store", subscriptions(21, 200), shards=3)
    rng = random.Random(22)
    src = tmp_path / "json"
    src.mkdir()
    files = []
    for f in range(3):
        lines = [json.dumps(event(rng)).encode() for _ in range(40)]
        for k, bad in enumerate(BAD):
            lines.insert(5 * k + f, bad.encode())
        lines.insert(9, b'{"s": "\xff\xfe"}')  # not UTF-8
        data = b"\n".join(lines) + b"\n"
        files.append(drop(src, f"e{f}.jsonl", b"\xef\xbb\xbf" + data if f == 1 else data))
    out = tmp_path / "out-json"
    summary = stream(
        store, Endpoint(path=str(src)), Endpoint(path=str(out)), tmp_path / "ck-json",
        spark=spark, available_now=True, max_files=2,
    )  # fmt: skip
    found = per_file(out)
    assert sorted(found) == sorted(map(str, files))
    rejected = 0
    for path in files:
        code, expected = single_process(store, path, capsys)
        assert code == 3
        assert found[str(path)] == expected, path.name
        rejected += sum("error" in r for r in expected.values())
    assert summary["batches"] == 2 and summary["rejected"] == rejected == 3 * 6
    assert summary["events"] == sum(len(v) for v in found.values())

    # the same events as CSV rows and Parquet rows, each format its own source
    docs = [event(rng) for _ in range(60)]
    same = tmp_path / "same.jsonl"
    columns = ["i", "j", "f", "s", "b", "il", "sl"]
    table = [{k: v for k, v in d.items() if v != "" and v is not None} for d in docs]
    table[3] = {"i": "abc", "s": "word"}  # a field that is not an integer
    same.write_text("".join(json.dumps(d) + "\n" for d in table))
    csv_src, pq_src = tmp_path / "csv", tmp_path / "pq"
    csv_src.mkdir()
    pq_src.mkdir()
    for half in range(2):
        rows = table[30 * half : 30 * half + 30]
        with open(tmp_path / f".c{half}", "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(columns)
            for d in rows:
                writer.writerow([_field(d.get(c), c) for c in columns])
        os.rename(tmp_path / f".c{half}", csv_src / f"c{half}.csv")
    pq_docs = [{k: v for k, v in d.items() if v is not None} for d in docs]
    pq_docs[3] = {"s": "word"}  # (its i a null: undefined)
    pq_same = tmp_path / "same-pq.jsonl"
    pq_same.write_text("".join(json.dumps(d) + "\n" for d in pq_docs))
    pq_rows = [{**d, "f": float(d["f"])} if "f" in d else d for d in pq_docs]
    pq.write_table(pa.Table.from_pylist(pq_rows, schema=_ARROW), pq_src / "p.parquet")
    for name, source, given in (("csv", csv_src, same), ("parquet", pq_src, pq_same)):
        out = tmp_path / f"out-{name}"
        stream(
            store, Endpoint(path=str(source)), Endpoint(path=str(out)), tmp_path / f"ck-{name}",
            fmt=name, spark=spark, available_now=True,
        )  # fmt: skip
        found = per_file(out)
        _, expected = single_process(store, given, capsys)
        if name == "parquet":
            mine = found[str(pq_src / "p.parquet")]
        else:
            assert "error" in expected[4]
            mine = {**found[str(csv_src / "c0.csv")]}
            mine.update({n + 30: r for n, r in found[str(csv_src / "c1.csv")].items()})
        assert mine == expected, name


_ARROW = pa.schema(
    [
        ("i", pa.int64()),
        ("j", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("il", pa.list_(pa.int64())),
        ("sl", pa.list_(pa.string())),
    ]
)


def _field(value: Any, column: str) -> str:
    if value is None:
        return ""
    return str(value) if column == "s" else json.dumps(value)


def test_writes_seen_from_the_next_micro_batch(spark: Any, tmp_path: Path) -> None:
    """Subscriptions written (to every shard) while the query runs: a file dropped after
    the write commits is matched with them, one dropped before without; after a compaction
    (new data files) the executors reopen the shards and see the next write.  Each
    micro-batch's progress says its tasks matched in one state of the store (every write
    here lands between micro-batches), the last one the store's state now."""
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = dict(subscriptions(31, 120))
    store = build_hashed(tmp_path / "store", subs, shards=2)
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    stop = threading.Event()
    failed: list[BaseException] = []
    reports = io.StringIO()

    def run() -> None:
        try:
            stream(
                store, Endpoint(path=str(src)), Endpoint(path=str(out)), tmp_path / "ck",
                spark=spark, trigger=0.3, stop=stop, progress_json=reports,
            )  # fmt: skip
        except BaseException as exc:  # shown by the main thread
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    rng = random.Random(32)
    added = {f"new{k}": "i >= -1000000 or not (i >= -1000000)" for k in range(6)}
    added.update({k: 's = "a" or i > 2' for k in ("n1", 2001, "é")})
    late = "i < 3 or not (i < 3)"  # every event
    try:
        steps = [
            ("before", lambda: None),
            ("subscribed", lambda: write_subscriptions(store, list(added.items()))),
            ("deleted", lambda: delete_subscriptions(store, ["new1", 2001, 5, 7])),
            ("compacted", lambda: cli.main(["compact", store])),  # new data files
            ("after", lambda: write_subscriptions(store, [("late", late)])),
        ]
        for k, (name, write) in enumerate(steps):
            write()
            if name == "subscribed":
                subs.update(added)
            elif name == "deleted":
                for ident in ("new1", 2001, 5, 7):
                    del subs[ident]
            elif name == "after":
                subs["late"] = late
            events = [event(rng) for _ in range(25)]
            path = drop(
                src, f"{k}-{name}.jsonl", "".join(json.dumps(e) + "\n" for e in events).encode()
            )
            found = _wait_for(out, str(path), len(events), failed)
            for n, ev in enumerate(events, 1):
                assert set(found[n]["matches"]) == brute(subs, schema, ev), (name, n)
        assert len(committed_parts(out)) >= 3
    finally:
        stop.set()
        thread.join(120)
    assert not failed and not thread.is_alive()
    batches = [json.loads(line) for line in reports.getvalue().splitlines()]
    assert len(batches) == len(steps) and all(b["snapshots"] == 1 for b in batches), batches
    gens = [b["generations"] for b in batches]  # every shard's, one micro-batch a step
    assert all(a < b for a, b in zip(gens[0], gens[1], strict=True))  # written to both shards
    assert gens[2] != gens[1] and all(a <= b for a, b in zip(gens[1], gens[2], strict=True))
    with open_index(store) as now:
        assert gens[-1] == list(now.generations())


def _wait_for(
    out: Path, path: str, count: int, failed: list[BaseException]
) -> dict[int, dict[str, Any]]:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not failed:
        found = per_file(out).get(path, {})
        if len(found) == count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{path}: no results committed ({failed})")


def test_kafka_arguments(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kafka = endpoint("kafka://127.0.0.1:9092,b2:19092/events", "--source")
    assert kafka.kafka and kafka.servers == "127.0.0.1:9092,b2:19092"
    assert kafka.topic == "events" and str(kafka) == "kafka://127.0.0.1:9092,b2:19092/events"
    assert endpoint("rel/dir", "--out").path == str(Path("rel/dir").absolute())
    for bad in (
        "kafka://host/t",
        "kafka://h:0/t",
        "kafka://h:9092",
        "kafka://h:9092/a/b",
        "kafka://:1/t",
    ):
        with pytest.raises(InvalidInput, match="not kafka://HOST:PORT/TOPIC"):
            endpoint(bad, "--source")
    store = build_hashed(tmp_path / "store", subscriptions(41, 10), shards=2)
    argv = ["stream", store, "--out", str(tmp_path / "o"), "--checkpoint", str(tmp_path / "c")]
    assert cli.main([*argv, "--source", "kafka://nohost/t"]) == 2
    assert "not kafka://HOST:PORT/TOPIC" in capsys.readouterr().err
    code = cli.main([*argv, "--source", "kafka://127.0.0.1:9/t", "--max-files-per-trigger", "2"])
    assert code == 3 and "not Kafka" in capsys.readouterr().err
    code = cli.main([*argv, "--source", str(tmp_path), "--trigger", "-1"])
    assert code == 3 and "--trigger -1.0: seconds" in capsys.readouterr().err
    code = cli.main([*argv, "--source", str(tmp_path / "none")])
    assert code == 1 and "no such directory" in capsys.readouterr().err
    # this Spark has no Kafka connector: the plan cannot be built, and the error says why
    with pytest.raises(InvalidInput, match="Kafka connector") as info:
        events_frame(spark, kafka, "jsonl", None)
    assert "--packages org.apache.spark:spark-sql-kafka" in str(info.value)
    assert not (tmp_path / "o").exists()
