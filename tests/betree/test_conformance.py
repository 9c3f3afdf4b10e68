"""The cases translated from the C BE-Tree library's test suite, through the whole index.

``betree_c.jsonl`` holds the library's core cases; ``tests/data/betree_c_special.jsonl`` those
on its integer enums, segments, frequency caps and ``geo_within_radius`` (SPEC section 10),
in the same format.  For each case: an empty store with the case's schema, one subscription,
one event (SPEC section 3's conformance README): ``invalid`` must be refused at subscribe time and
leave the store empty; ``match``/``nomatch`` must give exactly that outcome.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from storage.errors import InvalidInput

CASES = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "betree_c.jsonl"
LOCAL = Path(__file__).resolve().parents[1] / "data" / "betree_c.jsonl"
SPECIAL = Path(__file__).resolve().parents[1] / "data" / "betree_c_special.jsonl"
REAL = Path(__file__).resolve().parents[1] / "data" / "real_events.jsonl"


def load_cases() -> list[dict[str, Any]]:
    path = CASES if CASES.exists() else LOCAL
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_all_cases_give_their_expected_outcome() -> None:
    cases = load_cases()
    assert len(cases) > 200
    failures = run_cases(cases)
    assert not failures, "\n".join(failures)


def test_special_cases_give_their_expected_outcome() -> None:
    cases = [json.loads(line) for line in SPECIAL.read_text().splitlines() if line.strip()]
    assert len(cases) >= 91
    assert {c["expected"] for c in cases} == {"match", "nomatch", "invalid"}
    failures = run_cases(cases)
    assert not failures, "\n".join(failures)


def test_real_event_cases_give_their_expected_outcome() -> None:
    """SPEC section 11's forms (float_list, named geo attributes, any), hand-checked."""
    cases = [json.loads(line) for line in REAL.read_text().splitlines() if line.strip()]
    assert len(cases) >= 40
    assert {c["expected"] for c in cases} == {"match", "nomatch", "invalid"}
    failures = run_cases(cases)
    assert not failures, "\n".join(failures)


def run_cases(cases: list[dict[str, Any]]) -> list[str]:
    """The cases whose outcome differs from the expected one, each described."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, case in enumerate(cases):
            with Index.open(f"{tmp}/{n}", schema=case["schema"]) as idx:
                try:
                    idx.subscribe(1, case["expr"])
                except InvalidInput as exc:
                    outcome = "invalid"
                    assert len(idx) == 0
                    assert exc.message
                else:
                    outcome = "match" if idx.match(case["event"]) == [1] else "nomatch"
                    if outcome == "nomatch":
                        assert idx.match(case["event"]) == []
                    idx.check()
            if outcome != case["expected"]:
                failures.append(f"{case['source']}: {case['expr']!r} on {case['event']}: {outcome}")
    return failures


@pytest.mark.parametrize("expected", ["match", "nomatch", "invalid"])
def test_every_outcome_is_represented(expected: str) -> None:
    assert any(case["expected"] == expected for case in load_cases())
