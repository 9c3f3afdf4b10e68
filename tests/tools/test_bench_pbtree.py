"""Smoke test of ``bexdb bench pbtree``: the tool runs and writes its results.

A check that the benchmark works end to end on a tiny size — never a timing assertion.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pbtree.tree import DEFAULT_CAPS
from tools import cli
from tools.bench import pbtree as bench_pbtree


def test_bench_pbtree_runs_and_agrees(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    code = cli.main(["bench", "pbtree", "--sizes", "300", "--searches", "50", "--out", str(out)])
    assert code == cli.EXIT_OK

    results = json.loads((out / "results.json").read_text())
    assert {"benchmark", "machine", "settings", "rows", "agreement", "notes"} <= results.keys()
    assert {"platform", "python", "cpu_count"} <= results["machine"].keys()
    assert results["settings"]["caps"] == DEFAULT_CAPS
    assert results["agreement"] == {"passed": True, "values_checked": 50}

    (row,) = results["rows"]
    assert row["n"] == 300
    assert row["searches"] == 50
    assert row["agreement_passed"] is True
    for key in ("warm_us", "cold_us", "gf_us"):
        assert {"mean", "median", "p99"} <= row[key].keys()
    for key in (
        "inserts_per_s",
        "bytes_per_predicate",
        "ratio_warm_gf",
        "pages_mean",
        "model_pages_mean",
        "result_ids_mean",
    ):
        assert row[key] > 0, key
    # the PB+tree and the baseline return the same ids, so the same mean result size
    assert row["result_ids_mean"] == row["gf_result_ids_mean"]
    assert row["warm_cache_misses"] == 0
    assert (out / "search_us.png").stat().st_size > 0
    assert (out / "pages.png").stat().st_size > 0


def test_bench_pbtree_fails_loudly_on_disagreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = bench_pbtree.GroupedFilter.chunks

    def lossy(self: bench_pbtree.GroupedFilter, value: int | float) -> list:
        return real(self, value)[:-1]  # drop one run of satisfied ids

    monkeypatch.setattr(bench_pbtree.GroupedFilter, "chunks", lossy)
    out = tmp_path / "bench"
    code = cli.main(["bench", "pbtree", "--sizes", "300", "--searches", "5", "--out", str(out)])
    assert code == cli.EXIT_FAILURE
    assert "the Grouped Filter returned" in capsys.readouterr().err
    assert not (out / "results.json").exists()
