"""``bexdb bench compare`` end to end at a toy size: every index agrees, or the run stops.

A check that the sweep works, never a timing assertion.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tools.bench import compare as bench_compare
from tools.bench import match as bench_match
from tools.bench.baselines.opindex import OpIndex
from tools.cli import main as cli_main


def _compare_args(out: Path) -> list[str]:
    return [
        "bench",
        "compare",
        "--points",
        "eq=1",
        "--base-subs",
        "400",
        "--events",
        "12",
        "--sample",
        "20",
        "--out",
        str(out),
    ]


def test_bench_compare_runs_and_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "compare"
    assert cli_main(_compare_args(out)) == 0
    results = json.loads((out / "results.json").read_text())
    rows = results["axes"]["eq"]
    assert [r["value"] for r in rows] == [1.0]
    for r in rows:
        assert set(r["indexes"]) == set(bench_compare.INDEXES)
        assert r["agreement_checked"] == 12
        for name, entry in r["indexes"].items():
            assert entry["ms"]["mean"] > 0, name
    assert (out / "eq.png").stat().st_size > 0
    assert "| share of = predicates |" in capsys.readouterr().out


def test_bench_compare_fails_loudly_on_disagreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = OpIndex.match

    def lossy(self: OpIndex, values: Any) -> list[Any]:
        return real(self, values)[1:]

    monkeypatch.setattr(OpIndex, "match", lossy)
    args = [*_compare_args(tmp_path / "c"), "--indexes", "SCAN,OpIndex", "--points", "eq=0"]
    with pytest.raises(bench_match.AgreementError, match="OpIndex returned"):
        parser = argparse.ArgumentParser()
        bench_compare.add_arguments(parser)
        bench_compare.main(parser.parse_args(args[2:]))
