"""``bexdb bench match`` end to end at a toy size: the results, and a loud stop when the
methods disagree.  No timing is asserted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tools.bench import match as bench_match


def _bench_args(out: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_match.add_arguments(parser)
    return parser.parse_args(
        ["--sizes", "300", "--events", "20", "--out", str(out), "--store-dir", str(out.parent)]
    )


def _cpu_beside_wall(row: dict[str, Any]) -> None:
    """The thread-CPU figures sit beside the wall ones, and the CPU rates and ratios are
    the ones the figures in the JSON give (no timing is asserted)."""
    for key in ("bexdb", "bexdb_first_pass", "counting", "scan"):
        assert row[f"{key}_ms"].keys() == row[f"{key}_cpu_ms"].keys() == {"mean", "p50", "p99"}
        assert all(isinstance(v, float) and v >= 0 for v in row[f"{key}_cpu_ms"].values()), key
    cpu = row["bexdb_cpu_ms"]["mean"]
    assert row["events"] == row["counting_events"]  # so counting's ratio is to bexdb's mean
    assert row["per_event_per_cpu_s"] == pytest.approx(1000 / cpu)
    assert row["ratio_counting_cpu"] == pytest.approx(row["counting_cpu_ms"]["mean"] / cpu)
    scan_ratio = row["scan_cpu_ms"]["mean"] / row["bexdb_cpu_ms_scan_events"]["mean"]
    assert row["ratio_scan_cpu"] == pytest.approx(scan_ratio)
    for b in row["batched"]:
        assert b["cpu_seconds"] > 0 and b["per_event_per_cpu_s"] > 0
        assert b["events_per_cpu_s"] == pytest.approx(row["events"] / b["cpu_seconds"])
        assert b["speedup_cpu"] == pytest.approx(b["events_per_cpu_s"] / b["per_event_per_cpu_s"])


def test_bench_match_runs_and_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    assert bench_match.main(_bench_args(out)) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["agreement"] == {"passed": True, "events_checked": 20}
    (row,) = results["rows"]
    assert row["n"] == row["n_built"] == 300 and row["build_complete"] is True
    assert row["build_s_extrapolated"] is None
    assert row["scan_events"] == 20
    for key in ("bexdb_ms", "counting_ms", "scan_ms"):
        assert {"mean", "p50", "p99"} <= row[key].keys()
    for key in ("subs_per_s", "bytes_per_sub", "candidates_mean", "pages_mean", "matches_mean"):
        assert row[key] > 0, key
    assert row["matcher_peak_rss_mb"] > 0
    # match_many in batches of 256 and 1024, checked against Index.match on every event
    assert [b["batch"] for b in row["batched"]] == [256, 1024]
    assert all(b["agrees"] and b["events_per_s"] > 0 and b["speedup"] > 0 for b in row["batched"])
    assert isinstance(row["sources_changed"], list)
    assert (out / "match_ms.png").stat().st_size > 0
    _cpu_beside_wall(row)
    table = capsys.readouterr().out
    assert all(f" {h} |" in table for h in ("bexdb ms", "CPU ms", "ev/CPU-s", "cnt/bexdb CPU"))


def test_bench_match_fails_loudly_on_disagreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = bench_match.Counting.match

    def lossy(self: bench_match.Counting, values: Any) -> list[Any]:
        return real(self, values)[1:]  # drop one matching id

    monkeypatch.setattr(bench_match.Counting, "match", lossy)
    out = tmp_path / "bench"
    with pytest.raises(bench_match.AgreementError, match="counting returned"):
        bench_match.main(_bench_args(out))
    assert not (out / "results.json").exists()


def test_bench_match_rich_workload_counts_the_direct_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench"
    parser = argparse.ArgumentParser()
    bench_match.add_arguments(parser)
    where = ["--out", str(out), "--store-dir", str(out.parent)]
    args = parser.parse_args(
        ["--sizes", "300", "--events", "20", "--workloads", "rich", "--scan-seconds", "1", *where]
    )
    assert bench_match.main(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["agreement"]["passed"] is True
    (row,) = results["rows"]
    assert row["workload"] == "rich"
    # the rich rules reach the indexed kinds; each kind's exact tests and hits are counted
    assert {"list", "geo", "segment", "suffix"} <= row["direct"].keys()
    assert all(c["tests"] >= 0 and c["held"] >= 0 for c in row["direct"].values())
    _cpu_beside_wall(row)
    assert "tests/held" in capsys.readouterr().out
