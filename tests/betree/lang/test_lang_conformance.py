"""The C BE-Tree library's cases (/work/shared/conformance/betree_c.jsonl), on the language layer.

Each case: compile the expression against its schema (``invalid`` means it must be rejected),
else validate the event and check the reference evaluator gives the expected outcome, and that
the normalized clauses agree with the evaluator.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from betree.lang.dnf import clauses_hold, to_clauses
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput

CASES_FILE = Path(os.environ.get("BEXDB_CONFORMANCE", "/work/shared/conformance/betree_c.jsonl"))


def _load() -> list[dict[str, Any]]:
    if not CASES_FILE.exists():
        return []
    with CASES_FILE.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


CASES = _load()


@pytest.mark.skipif(not CASES, reason=f"{CASES_FILE} not found")
def test_file_is_complete() -> None:
    assert len(CASES) >= 240
    assert {c["expected"] for c in CASES} == {"match", "nomatch", "invalid"}


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{i}:{c['source'].rsplit('/', 1)[-1]}" for i, c in enumerate(CASES)]
)
def test_case(case: dict[str, Any]) -> None:
    schema = Schema.from_json(case["schema"])
    if case["expected"] == "invalid":
        with pytest.raises(InvalidInput):
            compile_expr(case["expr"], schema)
        return
    node = compile_expr(case["expr"], schema)
    event = schema.validate_event(case["event"])
    got = evaluate(node, event)
    assert got == (case["expected"] == "match")
    required = [n for n, a in schema.attributes.items() if not a.allow_undefined]
    assert clauses_hold(to_clauses(node), event) == got
    assert clauses_hold(to_clauses(node, always_defined=required), event) == got
