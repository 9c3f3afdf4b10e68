"""``bexdb bench forms`` at toy size: the rewritten store answers every event as the BEGen
store does (the benchmark checks it before reporting), and the results file is written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from tools.bench.forms import forms_schema, mirror, rewrite
from tools.cli import main


def test_bench_forms_runs_and_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["bench", "forms", "--sizes", "400", "--events", "40", "--out", str(out)]
    assert main(argv) == 0
    row = json.loads((out / "results.json").read_text())["rows"][0]
    assert row["agreement_events"] == 40 and row["in_new_forms"] > 0
    assert 0.1 < row["share_in_new_forms"] < 0.3
    assert "events agreeing" in capsys.readouterr().out


def test_every_mirror_form_compiles() -> None:
    schema = Schema.from_json(
        forms_schema({"attributes": {f"a{k}": {"type": "int"} for k in range(5)}})
    )
    for k in range(5):
        for op, values in (("=", [3]), ("in", [3, 7])):
            assert compile_expr(mirror(k, op, values), schema)
    text = "a1 = 3 and a2 in (4, 5) and a3 <= 9 and a4 between 1 and 2"
    assert rewrite(text, random.Random(1), 1.0).count("a3 <= 9 and a4 between 1 and 2") == 1
