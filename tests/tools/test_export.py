"""``bexdb export``: every subscription back as JSON Lines, ids and texts as given, from a
plain or a sharded store; export -> load -> export is byte-identical after sorting."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from betree.index import Index
from tests.support.cli import run
from tests.support.workload import SCHEMA, build_sharded, expression


def _subs() -> list[tuple[int | str, str]]:
    rng = random.Random(13)
    subs: list[tuple[int | str, str]] = [(i, expression(rng)) for i in range(150)]
    subs += [("5", "i = 5"), ("é\U0001f600\U0010ffff", 's = "\U00020000"'), (-(2**63), "b")]
    subs += [(2**63 - 1, "i   =   1   and   j>2"), ('quote"back\\slash\n', "not b")]
    return subs


def _sorted_lines(text: str) -> list[str]:
    return sorted(text.splitlines())


def test_export_load_export_is_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = _subs()
    with Index.open(tmp_path / "a", schema=SCHEMA) as idx:
        idx.subscribe_many(subs[:100])
        idx.subscribe_many(subs[100:])
        idx.unsubscribe_many([3, 4])
        idx.subscribe(7, "i = 7")  # a replacement is exported as it now reads
    code, first, err = run(capsys, "export", str(tmp_path / "a"))
    assert code == 0 and err == f"exported {len(subs) - 2} subscriptions\n"
    header, *records = [json.loads(line) for line in first.splitlines()]
    assert header == {"schema": SCHEMA}  # the schema header first (loaders.header)
    expected = {ident: expr for ident, expr in subs if ident not in (3, 4)} | {7: "i = 7"}
    assert {(type(r["id"]), r["id"]): r["expr"] for r in records} == {
        (type(k), k): v for k, v in expected.items()
    }
    out = tmp_path / "subs.jsonl"
    assert run(capsys, "export", str(tmp_path / "a"), str(out))[0] == 0
    assert out.read_text(encoding="utf-8") == first and not list(tmp_path.glob(".subs*"))
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    load = ["load", str(tmp_path / "b"), str(out), "--engine", "python", "--schema", str(schema)]
    assert run(capsys, *load)[0] == 0
    code, second, _ = run(capsys, "export", str(tmp_path / "b"))
    assert code == 0 and _sorted_lines(second) == _sorted_lines(first)


def test_export_of_a_sharded_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(5)
    subs = {i: expression(rng) for i in range(60)}
    root = build_sharded(tmp_path / "sh", subs)
    code, out, _ = run(capsys, "export", root)
    assert code == 0
    header, *lines = out.splitlines()
    assert "schema" in json.loads(header)
    got = {json.loads(line)["id"]: json.loads(line)["expr"] for line in lines}
    assert got == subs and len(lines) == 60


def test_export_of_a_missing_store_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "export", str(tmp_path / "none"), str(tmp_path / "out.jsonl"))
    assert code == 1 and "no store at" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
