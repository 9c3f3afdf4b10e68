"""``bexdb bench load`` end to end on tiny sizes: rows, extrapolation, agreement, files.

The first case needs no Spark (online insertion and the python engine only); the second
runs one local Spark load in its own process, as a user would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import cli


def run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out"
    argv = ["bench", "load", "--check-events", "5", "--work", str(tmp_path / "w")]
    code = cli.main([*argv, "--out", str(out), *args])
    assert code == 0
    assert (out / "load.png").stat().st_size > 0
    return json.loads((out / "results.json").read_text())


def test_bench_load_without_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run(
        tmp_path,
        *("--sizes", "200,300", "--shards", "", "--python-max", "300", "--online-max", "200"),
        *("--workloads", "begen,wide"),
        "--profile",  # the Spark engine's compile transform and shard build, in-process
        *("--repeat", "2"),  # each load twice: the row is the median run (the lower middle)
    )
    assert doc["parameters"]["repeat"] == 2
    assert "compile transform" in doc["profile"] and "shard build" in doc["profile"]
    rows = {(r["workload"], r["engine"], r["n"]): r for r in doc["rows"]}
    assert set(doc["workloads"]) == {"begen", "wide"}
    assert doc["workloads"]["wide"]["params"]["card"] == 480
    for w in ("begen", "wide"):
        assert {key for key in rows if key[0] == w} == {
            (w, e, n) for e in ("online", "python") for n in (200, 300)
        }
        guess = rows[(w, "online", 300)]
        assert not guess["measured"] and guess["extrapolated_from"] == 200
        for key in ((w, "online", 200), (w, "python", 200), (w, "python", 300)):
            row = rows[key]
            assert row["measured"] and row["agreement_events"] == 5
            assert row["store_bytes"] > 0 and row["driver_mb"] > 0
            walls = row["wall_runs"]  # the median of an even count is the lower middle run
            assert len(walls) == 2 and row["wall_s"] == sorted(walls)[0]
    table = capsys.readouterr().out
    assert "~" in table and "EXTRAPOLATED" in table  # the guess is labelled
    assert " wide |" in table and " begen |" in table
    assert re.search(r"\|\s*runs\s*\|", table) and " (2) |" in table  # the runs' spread


@pytest.mark.spark
def test_bench_load_spark(tmp_path: Path) -> None:
    doc = run(
        tmp_path,
        *("--sizes", "300", "--shards", "2", "--python-max", "0", "--online-max", "300"),
        *("--match-events", "20", "--target-rate", "0.05"),
    )
    assert doc["parameters"]["target_rate"] == doc["workloads"]["begen"]["target_rate"] == 0.05
    # sharded only: the match runs on the sharded store (it was skipped when no one-store
    # variant ran)
    spark = next(r for r in doc["rows"] if r["engine"] == "spark x2")
    assert spark["measured"] and spark["agreement_events"] == 5  # same answers as online
    assert spark["jvm_mb"] > 0 and spark["summary"]["loaded"] == 300
    assert spark["summary"]["shard_figures"][0]["seconds"]["check"] >= 0
    matched = {r["engine"]: r for r in doc["match_rows"]}  # Spark beside the single process
    assert set(matched) == {"match spark", "match python"}
    assert matched["match spark"]["summary"]["events"] == 20
    assert all(r["events"] == 20 and r["events_per_s"] > 0 for r in matched.values())
