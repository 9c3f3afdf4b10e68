"""Literals and values at the ends of every domain, through every path that builds or checks
an index (issue 13, item 2).

Empty grid intervals at both ends of each domain (``x > 9223372036854775807``,
``x < -9223372036854775808``, ``x > 9.3e18``) once crashed the batch build and ``verify``
while online ``subscribe`` took them.  Here every edge atom of :mod:`tests.support.edges` goes
through online ``subscribe``, ``bexdb load --engine python`` (a real subprocess),
``verify``/``check()`` and matching, compared with the brute-force evaluator
(``betree.lang.expr.evaluate``) on events at the ends of each domain; hypothesis draws mixed
expressions and events around the ends.  The Spark engine: ``tests/loaders/test_spark_load.py``.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from betree.index import Index
from betree.lang.expr import Node, evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from loaders import python_load
from loaders.records import parse_lines
from storage.errors import InvalidInput
from tests.support.edges import (
    EDGE_SCHEMA,
    EVENTS,
    INVALID_EXPRESSIONS,
    edge_atoms,
    events,
    expressions,
)

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"max_cap": 3, "min_size": 2}  # tiny l-nodes: clauses spread over many buckets
SCHEMA = Schema.from_json(EDGE_SCHEMA)


@functools.lru_cache(maxsize=4096)
def _compiled(expr: str) -> Node:
    return compile_expr(expr, SCHEMA)


def brute(subs: dict[Any, str], ev: dict[str, Any]) -> set[Any]:
    values = SCHEMA.validate_event(ev)
    return {i for i, expr in subs.items() if evaluate(_compiled(expr), values)}


def assert_matches(idx: Index, subs: dict[Any, str], evs: list[dict[str, Any]]) -> None:
    for ev in evs:
        got = idx.match(ev)
        assert len(got) == len(set(got)), ev
        want = brute(subs, ev)
        assert set(got) == want, (ev, sorted(subs[i] for i in set(got) ^ want)[:5])


def cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


@pytest.fixture(scope="module")
def edge_subs() -> dict[Any, str]:
    """Every edge atom, by id (all are valid expressions)."""
    return dict(enumerate(edge_atoms()))


def test_online_subscribe_checks_and_matches(tmp_path: Path, edge_subs: dict[Any, str]) -> None:
    with Index.open(tmp_path / "s", schema=EDGE_SCHEMA, settings=SETTINGS) as idx:
        idx.subscribe_many(list(edge_subs.items()))
        idx.check()
        assert_matches(idx, edge_subs, EVENTS)
        # taking them out again leaves a valid index too
        for ident in list(edge_subs)[::2]:
            assert idx.unsubscribe(ident)
        idx.check()
        assert_matches(idx, {i: e for i, e in edge_subs.items() if i % 2}, EVENTS)


def test_cli_load_verify_match(tmp_path: Path, edge_subs: dict[Any, str]) -> None:
    """``bexdb load --engine python``, ``verify`` and ``match`` as a user runs them, and a
    store built by online ``subscribe`` of the same records verifies too."""
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(EDGE_SCHEMA))
    subs = tmp_path / "subs.jsonl"
    subs.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in edge_subs.items()))
    events = "".join(json.dumps(ev) + "\n" for ev in EVENTS)
    for store, argv in [
        ("loaded", ["load", "--engine", "python"]),
        ("online", ["subscribe"]),
    ]:
        path = str(tmp_path / store)
        done = cli(*argv, path, str(subs), "--schema", str(schema))
        assert done.returncode == 0, done.stderr
        done = cli("verify", path)
        assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr
        done = cli("match", path, "-", stdin=events)
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(lines) == len(EVENTS)
        for ev, line in zip(EVENTS, lines, strict=True):
            assert set(line["matches"]) == brute(edge_subs, ev), ev


def test_invalid_edge_literals_rejected_everywhere(tmp_path: Path) -> None:
    """Literals past the ends (an int beyond 64 bits, a float that overflows a double) are
    errors online and per record in a bulk load."""
    with Index.open(tmp_path / "s", schema=EDGE_SCHEMA) as idx:
        for expr in INVALID_EXPRESSIONS:
            with pytest.raises(InvalidInput):
                idx.subscribe(1, expr)
    lines = [json.dumps({"id": i, "expr": e}) for i, e in enumerate(INVALID_EXPRESSIONS)]
    lines.append(json.dumps({"id": "ok", "expr": "x > 9223372036854775807"}))
    summary = python_load.load(tmp_path / "b", parse_lines(lines), EDGE_SCHEMA)
    assert (summary["loaded"], summary["rejected"]) == (1, len(INVALID_EXPRESSIONS))
    with Index.open(tmp_path / "b", readonly=True) as idx:
        idx.check()
        assert idx.match({"x": 2**63 - 1}) == []


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    exprs=st.lists(expressions(), min_size=1, max_size=25),
    evs=st.lists(events(), min_size=1, max_size=10),
)
def test_mixed_edges_online_and_bulk_agree_with_brute_force(
    exprs: list[str], evs: list[dict[str, Any]]
) -> None:
    subs = {i: e for i, e in enumerate(exprs)}
    lines = [json.dumps({"id": i, "expr": e}) for i, e in subs.items()]
    with tempfile.TemporaryDirectory() as tmp:
        with Index.open(Path(tmp) / "online", schema=EDGE_SCHEMA, settings=SETTINGS) as idx:
            idx.subscribe_many(list(subs.items()))
            idx.check()
            assert_matches(idx, subs, evs + EVENTS[::7])
        python_load.load(Path(tmp) / "bulk", parse_lines(lines), EDGE_SCHEMA, settings=SETTINGS)
        with Index.open(Path(tmp) / "bulk", readonly=True) as idx:
            idx.check()
            assert_matches(idx, subs, evs + EVENTS[::7])
