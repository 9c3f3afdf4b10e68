"""``bexdb stream`` exactly once across a ``kill -9``, with real processes.

The command runs as a subprocess (its own Spark, ``local[2]``) while files are dropped into
its source; its driver is killed with SIGKILL while a micro-batch is in hand (planned in the
checkpoint's offset log, not yet in its commit log); a second run from the same checkpoint
carries on and is stopped with SIGTERM after a micro-batch (exit 0, a JSON progress line
per micro-batch); a third drains what is left (``--available-now``), in the test's own
process on the run's shared local session (a kill or a signal needs a process of its own,
a drain does not: one JVM fewer).  Read through the sink's log, every event's result is
there exactly once and equals ``bexdb match``'s.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loaders.spark import streamlog
from loaders.spark.stream import endpoint, stream
from tests.support.spark import drop, per_file, plain_store, single_process, subscriptions
from tests.support.workload import event

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def start(argv: list[str], *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tools.cli", *argv, *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its JVM and Python workers in its process group
    )


def gone(group: int, timeout: float = 90) -> None:
    """Wait until no process of ``group`` (one this test started) is left; kill the rest."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(group, signal.SIGKILL)


def batch_ids(log: Path) -> set[int]:
    return set(streamlog.batches(log))


def wait(until: Any, what: str, proc: subprocess.Popen[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {what}: {proc.stderr.read()}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_kill_restart_exactly_once(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = plain_store(tmp_path / "store", subscriptions(51, 150))
    rng = random.Random(52)
    src, out, ck = tmp_path / "src", tmp_path / "out", tmp_path / "ck"
    src.mkdir()
    files: list[bytes] = []
    for f in range(12):
        lines = [json.dumps(event(rng)) for _ in range(30)]
        lines.insert(f, "not json")
        files.append(("\n".join(lines) + "\n").encode())
    argv = ["stream", store, "--source", str(src), "--out", str(out), "--checkpoint", str(ck)]
    argv += ["--master", "local[2]", "--max-files-per-trigger", "1"]

    first = start(argv, "--trigger", "0.2")
    for f in range(6):
        drop(src, f"e{f:02d}.jsonl", files[f])

    def in_hand() -> bool:  # a batch planned, its predecessor committed, itself not yet
        planned, done = batch_ids(ck / "offsets"), batch_ids(ck / "commits")
        return bool(done) and bool(planned - done)

    wait(in_hand, "a committed micro-batch and one in hand", first)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(30)
    gone(first.pid)
    pending = batch_ids(ck / "offsets") - batch_ids(ck / "commits")
    assert pending, "the kill came between micro-batches"
    assert not batch_ids(out / streamlog.SINK_LOG) & pending  # nothing of it committed

    second = start(argv, "--trigger", "0.2", "--progress-json")
    for f in range(6, 10):
        drop(src, f"e{f:02d}.jsonl", files[f])
    names = [str(src / f"e{f:02d}.jsonl") for f in range(12)]
    wait(lambda: set(names[:10]) <= set(per_file(out)), "files 0-9 committed", second)
    second.send_signal(signal.SIGTERM)
    stdout, stderr = second.communicate(timeout=120)
    gone(second.pid)
    assert second.returncode == 0, stderr[-3000:]
    assert "stopping after the micro-batch in hand" in stderr
    reports = [json.loads(line) for line in stdout.splitlines()]
    summary = reports.pop()
    assert reports and all(r["batch"] >= min(pending) for r in reports)
    assert sum(r["events"] for r in reports) == summary["events"] > 0
    assert {"events_per_s", "waiting_files", "lag_s"} <= set(reports[-1])

    for f in range(10, 12):
        drop(src, f"e{f:02d}.jsonl", files[f])
    # in this process, on the shared session (``bexdb stream`` would stop it at its end)
    third = stream(store, endpoint(str(src), "--source"), endpoint(str(out), "--out"), str(ck),
                   spark=spark, max_files=1, available_now=True)  # fmt: skip
    assert third["events"] >= 2 * 30

    found = per_file(out)  # (fails on an event answered twice)
    assert sorted(found) == names
    for name in names:
        _, expected = single_process(store, Path(name), capsys)
        assert found[name] == expected, name
    on_disk = {str(p) for p in out.glob("part-*")}
    assert set(streamlog.committed_parts(out)) <= on_disk
