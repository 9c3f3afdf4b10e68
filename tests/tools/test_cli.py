"""The command line: subscribe, unsubscribe, match, load --engine python, verify.

Runs ``tools.cli.main`` in-process on real stores; exit codes as SPEC section 6.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run, write_lines
from tests.support.schemas import BOOKS as SCHEMA


def test_subscribe_match_unsubscribe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    subs = write_lines(
        tmp_path / "subs.jsonl",
        [
            {"id": "s1", "expr": 'price between 20 and 40 and genre = "classics"'},
            {"id": 5, "expr": "price > 30"},
            {"id": "5", "expr": "not (price > 30)"},
        ],
    )
    assert run(capsys, "subscribe", store, subs, "--schema", str(schema))[0] == 0
    events = write_lines(
        tmp_path / "events.jsonl",
        [
            {"price": 26, "genre": "classics"},
            "{not json",
            {"price": "cheap"},
            {"price": 35},
            {},
        ],
    )
    code, out, _ = run(capsys, "match", store, events)
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 3
    assert sorted(lines[0]["matches"], key=str) == ["5", "s1"]
    assert "malformed JSON" in lines[1]["error"]
    assert "price" in lines[2]["error"]
    assert lines[3]["matches"] == [5]
    assert lines[4]["matches"] == ["5"]
    assert len(lines) == 5
    bad = tmp_path / "bad.jsonl"  # a line that is not UTF-8, one nested past the parser
    bad.write_bytes(b'{"price": 35}\n\xff\xfe{"price": 35}\n' + b"[" * 100_000 + b"\n{}\n")
    code, out, _ = run(capsys, "match", store, str(bad))
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 3 and len(lines) == 4
    assert lines[0] == {"matches": [5]} and lines[3] == {"matches": ["5"]}
    assert "not UTF-8" in lines[1]["error"] and "nested too deeply" in lines[2]["error"]
    code, _, err = run(capsys, "unsubscribe", store, "5", "nope")  # all or nothing
    assert code == 3 and "'nope'" in err and "nothing was deleted" in err
    events = write_lines(tmp_path / "e2.jsonl", [{"price": 35}])
    assert json.loads(run(capsys, "match", store, events)[1]) == {"matches": [5]}
    code, out, _ = run(capsys, "unsubscribe", store, "5")
    assert code == 0 and out == "unsubscribed 1\n"
    code, out, _ = run(capsys, "match", store, events)
    assert code == 0 and json.loads(out) == {"matches": []}
    assert run(capsys, "verify", store)[0] == 0


def test_bad_subscription_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s")
    good = write_lines(tmp_path / "good.jsonl", [{"id": 1, "expr": "price > 1"}])
    assert run(capsys, "subscribe", store, good)[0] == 0  # schema inferred
    bad = write_lines(
        tmp_path / "bad.jsonl",
        [{"id": 2, "expr": "price > 2"}, {"id": 3, "expr": "price > )"}],
    )
    code, _, err = run(capsys, "subscribe", store, bad)
    assert code == 3 and "subscription 3" in err and "column" in err
    code, out, _ = run(capsys, "match", store, write_lines(tmp_path / "e.jsonl", [{"price": 9}]))
    assert json.loads(out) == {"matches": [1]}


def test_load_python_rejects_and_publishes_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    subs = write_lines(
        tmp_path / "subs.jsonl",
        [
            {"id": 1, "expr": "price > 10"},
            {"id": 2, "expr": "price >"},
            {"id": 3, "expr": 'genre = "x"'},
            {"id": 3, "expr": 'genre = "y"'},
            "{broken",
            {"id": 4, "expr": "pricee > 1"},
        ],
    )
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    rejects = tmp_path / "rejects.jsonl"
    argv = ["load", str(store), subs, "--engine", "python", "--schema", str(schema)]
    code, _, _ = run(capsys, *argv, "--rejects", str(rejects), "--max-rejects", "1")
    assert code == 1 and not store.exists()  # nothing published: 1 (SPEC section 11)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".s.")]
    code, out, _ = run(capsys, *argv, "--rejects", str(rejects))
    assert code == 3 and json.loads(out)["loaded"] == 1
    rows = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["line"], r["id"]) for r in rows] == [(2, 2), (3, 3), (4, 3), (5, None), (6, 4)]
    assert "unknown attribute" in rows[-1]["error"]
    assert "duplicate id 3" in rows[1]["error"]
    code, _, err = run(capsys, *argv)
    assert code == 1 and "--replace" in err
    assert run(capsys, *argv, "--replace")[0] == 1  # rejects: the store is kept
    assert run(capsys, *argv, "--replace", "--allow-rejects")[0] == 3
    assert run(capsys, "verify", str(store))[0] == 0


def test_verify_reports_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from betree.index import Index

    store = str(tmp_path / "s")
    with Index.open(store, schema=SCHEMA) as idx:
        idx.subscribe_many([(i, f"price > {i}") for i in range(50)])
        with idx.store.write() as txn:
            txn.delete(b"home", (0).to_bytes(8, "big"))
    code, _, err = run(capsys, "verify", store)
    assert code == 4 and "home record" in err
