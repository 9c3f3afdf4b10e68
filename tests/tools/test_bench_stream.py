"""``bexdb bench stream`` at toy size: a ``bexdb stream`` process fed files, every committed
answer checked against ``bexdb match``'s (the benchmark fails otherwise), the results file
written.  Never a timing assertion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.cli import main

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_bench_stream_runs_and_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert main(["gen", "--subs", "500", "--events", "70", str(data)]) == 0
    store = tmp_path / "store"
    load = ["load", str(store), str(data / "subs.jsonl"), "--schema", str(data / "schema.json")]
    assert main([*load, "--engine", "python"]) == 0
    out = tmp_path / "out"
    argv = ["bench", "stream", str(store), str(data / "events.jsonl"), "--file-events", "30"]
    argv += ["--backlog", "3", "--seconds", "2", "--trigger", "0.5", "--warm-files", "2"]
    argv += ["--out", str(out)]
    assert main(argv) == 0
    doc = json.loads((out / "results.json").read_text())
    row = doc["stream"]
    # the warm-up files, the backlog and the paced files, 30 events each, each once
    assert row["events_committed"] == 30 * (2 + 3 + row["paced_files"])
    assert row["paced_files"] >= 1 and row["latency_s"]["p50"] > 0
    assert doc["bexdb_match"]["events"] == 70 and doc["sustained_over_match"] > 0
    assert "bexdb stream, paced" in capsys.readouterr().out
