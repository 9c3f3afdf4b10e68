"""Staging directories of killed loads and compactions: reported, then removed by the next
run, never while a live process owns them.

Real ``bexdb`` subprocesses are killed with SIGKILL as soon as their staging directory
(with its locked ``owner`` file) appears: nothing in the product waits for the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.staging import found
from tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"attributes": {"x": {"type": "int"}, "y": {"type": "int"}}}


def write_input(path: Path, n: int) -> str:
    path.write_text(
        "".join(
            json.dumps({"id": i, "expr": f"x > {i % 97} and y between {i % 13} and {i % 31}"})
            + "\n"
            for i in range(n)
        )
    )
    return str(path)


def kill_once_staging(argv: list[str], where: Path, kind: str) -> Path:
    """Run ``bexdb ARGV``; SIGKILL it once its staging directory of ``kind`` is owned."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            owned = list(where.glob(f".*.{kind}-*/owner"))
            if owned:
                os.kill(proc.pid, signal.SIGKILL)
                break
            assert proc.poll() is None, "the command ended before its staging was seen"
            time.sleep(0.001)
        else:
            pytest.fail("no staging directory appeared")
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return owned[0].parent


def load(capsys: pytest.CaptureFixture[str], store: Path, path: str, schema: Path) -> int:
    return cli(capsys, "load", str(store), path, "--schema", str(schema), "--engine", "python")[0]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_killed_load_leaves_staging_the_next_load_removes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    big = write_input(tmp_path / "big.jsonl", 8000)
    store = tmp_path / "store"
    argv = ["load", str(store), big, "--schema", str(schema), "--engine", "python"]
    left = kill_once_staging(argv, tmp_path, "building")
    assert left.is_dir() and not store.exists()
    (stale,) = found(store)
    assert not stale.live and stale.owner["pid"]

    code, out, _ = cli(capsys, "verify", str(store))  # no store yet, but the note is there
    assert code == 1 and f"{left.name} (bexdb load; stale, left by pid" in out

    small = write_input(tmp_path / "small.jsonl", 50)
    assert load(capsys, store, small, schema) == 0
    assert not left.exists() and found(store) == []
    code, out, _ = cli(capsys, "inspect", str(store))
    assert code == 0 and "staging" not in out


def test_live_staging_is_kept_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    small = write_input(tmp_path / "small.jsonl", 50)
    store = tmp_path / "store"
    assert load(capsys, store, small, schema) == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from storage.staging import staging\n"
            "with staging(Path(sys.argv[1]), 'building') as p:\n"
            "    print(p, flush=True); time.sleep(120)",
            str(store),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        live = Path(holder.stdout.readline().strip())
        argv = ["load", str(store), small, "--schema", str(schema), "--engine", "python"]
        assert cli(capsys, *argv, "--replace")[0] == 0
        assert live.is_dir()  # another process's load in progress: not touched
        code, out, _ = cli(capsys, "inspect", str(store))
        assert code == 0 and f"{live.name} (bexdb load; in use by pid {holder.pid}" in out
        code, out, _ = cli(capsys, "inspect", str(store), "--json")
        assert any(live.name in note for note in json.loads(out)["staging"])
    finally:
        holder.kill()
        holder.wait()
    (stale,) = found(store)
    assert stale.path == live and not stale.live
    assert cli(capsys, "compact", str(store))[0] == 0
    assert not live.exists()


def test_killed_compact_rebuild_leaves_staging_the_next_compact_removes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    big = write_input(tmp_path / "big.jsonl", 6000)
    store = tmp_path / "store"
    assert load(capsys, store, big, schema) == 0
    left = kill_once_staging(["compact", str(store), "--rebuild"], tmp_path, "compact")
    assert left.is_dir()

    code, out, _ = cli(capsys, "verify", str(store))  # the store is intact: exit 0
    assert code == 0 and out.endswith("ok\n")
    assert f"{left.name} (bexdb compact; stale, left by pid" in out
    assert "the next `bexdb load` or `bexdb compact` of store removes it" in out

    code, out, _ = cli(capsys, "compact", str(store))
    assert code == 0 and not left.exists() and found(store) == []
    code, out, _ = cli(capsys, "match", str(store), write_input(tmp_path / "ev.jsonl", 0))
    assert code == 0
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"x": 200, "y": 5}) + "\n")
    code, out, _ = cli(capsys, "match", str(store), str(events))
    assert code == 0 and len(json.loads(out)["matches"]) > 0


@pytest.mark.spark
def test_killed_spark_load_leaves_staging_the_next_load_removes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    big = write_input(tmp_path / "big.jsonl", 20000)
    store = tmp_path / "store"
    argv = ["load", str(store), big, "--schema", str(schema), "--engine", "spark", "--shards", "2"]
    left = kill_once_staging(argv, tmp_path, "building")
    assert left.is_dir() and not store.exists()
    (stale,) = found(store)
    assert not stale.live
    assert load(capsys, store, write_input(tmp_path / "small.jsonl", 50), schema) == 0
    assert not left.exists() and found(store) == []
