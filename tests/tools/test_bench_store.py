"""``bexdb bench store`` at toy size, on a plain and a sharded store: the batched answers
are checked against the per-event ones, ``bexdb match`` runs with 1 and 2 jobs give the same
bytes, and the results file is written.  Never a timing assertion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.cli import main


@pytest.mark.parametrize("shards", [None, 2])
def test_bench_store_runs_and_agrees(
    tmp_path: Path, shards: int | None, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert main(["gen", "--subs", "600", "--events", "1500", str(data)]) == 0
    store = tmp_path / "store"
    load = ["load", str(store), str(data / "subs.jsonl"), "--schema", str(data / "schema.json")]
    load += ["--engine", "python"] if shards is None else ["--shards", str(shards)]
    assert main(load) == 0
    out = tmp_path / "out"
    argv = ["bench", "store", str(store), str(data / "events.jsonl"), "--count", "200"]
    assert main([*argv, "--batch", "64", "--jobs", "1,2", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    row = doc["in_process"]
    assert row["events"] == 200 and row["matches_per_event"] > 0 and row["private_mb"] > 0
    assert [r["jobs"] for r in doc["bexdb_match"]] == [1, 2]
    assert all(r["events"] == 1500 and r["identical"] for r in doc["bexdb_match"])
    assert "output identical" in capsys.readouterr().out
