"""The LMDB underneath: bexdb writes LMDB 0.9's data format whatever py-lmdb would pick,
and keeps one environment of a path open at a time (py-lmdb 3 refuses two)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from betree.index import Index
from betree.stores.live import LiveIndex
from storage.store import ENGINE
from tools.cli import main

SCHEMA = {"attributes": {"a": {"type": "int"}}}


def _data_version(store: Path) -> int:
    head = (store / "data.mdb").read_bytes()[:64]
    at = head.index((0xBEEFC0DE).to_bytes(4, "little"))
    return int.from_bytes(head[at + 4 : at + 8], "little")


@pytest.mark.skipif(not ENGINE, reason="this py-lmdb bundles LMDB 0.9 only")
def test_new_stores_are_lmdb_0_9_even_when_py_lmdb_defaults_to_1_0(tmp_path: Path) -> None:
    subs = tmp_path / "subs.jsonl"
    subs.write_text(json.dumps({"id": 1, "expr": "a = 1"}) + "\n")
    env = {**os.environ, "LMDB_DEFAULT_LIB_VERSION": "1"}
    for argv in (["subscribe", str(tmp_path / "s"), str(subs)], ["compact", str(tmp_path / "s")]):
        proc = subprocess.run(
            [sys.executable, "-m", "tools.cli", *argv], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        assert _data_version(tmp_path / "s") == 1
    with Index.open(tmp_path / "s") as idx:
        assert idx.match({"a": 1}) == [1]


@pytest.mark.skipif(not ENGINE, reason="this py-lmdb bundles LMDB 0.9 only")
def test_a_store_in_lmdb_1_0_format_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    lmdb.open(str(store), lib_version=1).close()
    assert _data_version(store) == 3
    assert main(["verify", str(store)]) == 4
    assert "LMDB data format 3" in capsys.readouterr().err
    (tmp_path / "e.jsonl").write_text('{"a": 1}\n')
    assert main(["match", str(store), str(tmp_path / "e.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "LMDB data format 3" in err and "Traceback" not in err


def test_a_reopen_closes_the_open_environment_first(tmp_path: Path) -> None:
    """A store found retired is reopened even when the path still names its own files."""
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe(1, "a = 1")
    with LiveIndex(tmp_path / "s") as live:
        first = live.current()
        again = live.current(reopen=True)
        assert again is not first
        assert again.match({"a": 1}) == [1]
        again.subscribe(2, "a = 1")
        assert sorted(live.current().match({"a": 1})) == [1, 2]
