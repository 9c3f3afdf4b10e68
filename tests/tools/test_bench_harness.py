"""The benchmarks' room: registered lazily, matplotlib optional, the shared harness.

The import checks run in fresh interpreters (this one has imported everything already).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench.harness import AgreementError, Laps, check_agreement, markdown_table, stats
from tools.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
HEAVY = "[m for m in sys.modules if m.split('.')[0] == 'matplotlib' or m.startswith('tools.bench')]"


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


def test_a_product_command_imports_no_benchmark(tmp_path: Path) -> None:
    subs, events = tmp_path / "subs.jsonl", tmp_path / "events.jsonl"
    subs.write_text('{"id": 1, "expr": "a > 2"}\n{"id": 2, "expr": "a < 2"}\n')
    events.write_text('{"a": 3}\n')
    code = f"""
import json, sys
from tools.cli import main
codes = [main(["subscribe", sys.argv[1], sys.argv[2]]), main(["match", sys.argv[1], sys.argv[3]])]
print(json.dumps({{"codes": codes, "heavy": {HEAVY}}}))
"""
    done = python(code, str(tmp_path / "store"), str(subs), str(events))
    assert done.returncode == 0, done.stderr
    *output, last = done.stdout.splitlines()
    assert output[-1] == '{"matches": [1]}'
    assert json.loads(last) == {"codes": [0, 0], "heavy": []}


def test_a_benchmark_imports_only_its_own_module() -> None:
    code = f"""
import json, sys
from tools.cli import build_parser
args = build_parser().parse_args(["bench", "match", "--sizes", "10"])
print(json.dumps({{"sizes": args.sizes, "heavy": sorted({HEAVY})}}))
"""
    done = python(code)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["sizes"] == [10]
    # the benchmark and what it measures with, but neither matplotlib nor the other benchmarks
    assert "tools.bench.match" in found["heavy"]
    assert not [m for m in found["heavy"] if m.startswith("matplotlib")]
    assert not {"tools.bench.load", "tools.bench.serve", "tools.bench.pbtree"} & set(found["heavy"])


def test_help_lists_every_command_and_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["bench", "--help"], ["bench", "compare", "--help"]):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(argv)
        assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ("match", "gen", "demo", "bench", "pbtree", "adapt", "serve", "load"):
        assert f"    {name} " in out, name
    assert "--max-entries" in out  # the chosen benchmark's own options were added


def test_without_matplotlib_a_benchmark_stops_before_measuring(tmp_path: Path) -> None:
    """Both ways of running a benchmark say what to install, and measure nothing first."""
    block = "import runpy, sys; sys.modules['matplotlib'] = None; "
    argv = ["--sizes", "50", "--searches", "5", "--out", str(tmp_path / "out")]
    for code in (
        block + "from tools.cli import main; sys.exit(main(['bench', 'pbtree', *sys.argv[1:]]))",
        block + "runpy.run_module('tools.bench.pbtree', run_name='__main__')",
    ):
        done = python(code, *argv)
        assert done.returncode == 1, done.stderr
        assert "pip install 'bexdb[bench]'" in done.stderr
        assert "Traceback" not in done.stderr
        assert "building" not in done.stderr  # it stopped before the first build
        assert not (tmp_path / "out" / "results.json").exists()


def test_a_benchmark_runs_as_a_module(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = "import runpy; runpy.run_module('tools.bench.pbtree', run_name='__main__')"
    done = python(code, "--sizes", "60", "--searches", "10", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "results.json").read_text())["agreement"]["passed"] is True
    assert "| warm/GF |" in done.stdout.replace("  ", "")


def test_markdown_table_lines_columns_up() -> None:
    table = markdown_table(["n", "ms"], [["10", "1.5"], ["1,000", "12.25"]])
    assert table.splitlines() == [
        "|     n |    ms |",
        "|------:|------:|",
        "|    10 |   1.5 |",
        "| 1,000 | 12.25 |",
    ]


def test_stats_names_and_empty_series() -> None:
    assert stats([1, 2, 3, 4]) == {"mean": 2.5, "p50": 2.5, "p99": pytest.approx(3.97)}
    assert list(stats([5.0], (50, 95), median="median")) == ["mean", "median", "p95"]
    assert all(math.isnan(v) for v in stats([]).values())


def test_laps_keep_a_wall_and_a_cpu_figure_per_block_even_one_that_raises() -> None:
    laps = Laps()
    with laps as entered:
        sum(range(1000))
    assert entered is laps
    with pytest.raises(ValueError, match="inside"), laps:
        raise ValueError("inside")
    assert len(laps.wall_ms) == len(laps.cpu_ms) == 2
    assert all(isinstance(x, float) and x >= 0 for x in laps.wall_ms + laps.cpu_ms)


def test_check_agreement_names_the_method_and_the_event() -> None:
    events = [{"a": 1}, {"a": 2}]
    assert check_agreement("n=9", events, {"x": [[1, 2], [3]], "y": [[2, 1], [3]]}) == 2
    with pytest.raises(AgreementError, match=r'n=9, event 1 \{"a": 2\}: y returned 0 ids'):
        check_agreement("n=9", events, {"x": [[1], [3]], "y": [[1], []]})
    with pytest.raises(AgreementError, match="y returned 2 ids"):
        check_agreement("n=9", events, {"x": [[1]], "y": [[1, 1]]})  # a repeated id
    with pytest.raises(AgreementError, match="x repeats an id"):
        check_agreement("n=9", events, {"x": [[1, 1]], "y": [[1]]})
