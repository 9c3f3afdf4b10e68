"""``bexdb match --jobs N`` (betree.streams.parallel): the same bytes as one process, on plain and
sharded stores, with bad and blank lines across batches; small and empty streams; stdin;
a worker killed mid-stream ends the run with an error, not a hang."""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.streams.stream import BATCH
from tests.support.brute import brute
from tests.support.cli import run
from tests.support.workload import SCHEMA, build_hashed, event, expression


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[Any, str]]:
    rng = random.Random(21)
    subs: dict[Any, str] = {(i if i % 2 else f"s{i}"): expression(rng) for i in range(200)}
    root = tmp_path_factory.mktemp("par")
    with Index.open(root / "plain", schema=SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
    return root / "plain", Path(build_hashed(root / "sharded", subs, 3)), subs


def events_file(path: Path, n: int, seed: int) -> tuple[Path, list[Any]]:
    """``n`` events with bad and blank lines spread over the batches."""
    rng = random.Random(seed)
    lines: list[Any] = [json.dumps(event(rng)) for _ in range(n)]
    for k in range(0, n, 97):
        lines.insert(k, random.Random(k).choice(["", "not json", '{"i": "x"}', "[]", "  "]))
    path.write_text("".join(line + "\n" for line in lines))
    return path, lines


@pytest.fixture(scope="module")
def answers() -> dict[str, set[Any]]:
    """The brute force's answer by event line, shared by the plain and the sharded case
    (the same events and subscriptions: computed once)."""
    return {}


@pytest.mark.parametrize("kind", ["plain", "sharded"])
def test_jobs_give_the_bytes_of_one_process(
    stores: tuple[Path, Path, dict[Any, str]],
    answers: dict[str, set[Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    plain, sharded, subs = stores
    store = str(plain if kind == "plain" else sharded)
    for n in (0, 5, BATCH, BATCH + 1, 5 * BATCH + 17):
        events, lines = events_file(tmp_path / f"e{n}.jsonl", n, n)
        one = run(capsys, "match", store, str(events), "--jobs", "1")
        assert run(capsys, "match", store, str(events), "--jobs", "2") == one
        if n > BATCH:  # 3 workers for fewer batches (2) and for more (6)
            assert run(capsys, "match", store, str(events), "--jobs", "3") == one
        if n > 3 * BATCH:  # a page cache of 1 MB (a sharded store's shards share it):
            tiny = ("--cache-mb", "1")  # slower, the same bytes
            assert run(capsys, "match", store, str(events), "--jobs", "2", *tiny) == one
        code, out, _ = one
        results = [json.loads(line) for line in out.splitlines()]
        given = [line for line in lines if line.strip()]
        assert len(results) == len(given)
        assert code == (3 if any("error" in r for r in results) else 0)
        schema = Index.open(plain, readonly=True)
        try:
            for line, found in zip(given, results, strict=True):
                if "matches" in found:
                    if line not in answers:
                        answers[line] = brute(subs, schema.schema, json.loads(line))
                    assert set(found["matches"]) == answers[line]
        finally:
            schema.close()


def test_default_jobs_and_stdin(stores: tuple[Path, Path, dict[Any, str]], tmp_path: Path) -> None:
    _, sharded, _ = stores
    events, _ = events_file(tmp_path / "e.jsonl", 3 * BATCH, 4)
    argv = [sys.executable, "-m", "tools.cli", "match", str(sharded)]
    one = subprocess.run([*argv, str(events), "--jobs", "1"], capture_output=True)
    piped = subprocess.run(argv, stdin=events.open("rb"), capture_output=True)  # default jobs
    assert piped.returncode == one.returncode == 3
    assert piped.stdout == one.stdout and piped.stdout.count(b"\n") > 3 * BATCH - 10


def test_jobs_is_not_for_spark(
    stores: tuple[Path, Path, dict[Any, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, _, _ = stores
    args = ["match", str(plain), "e", "--engine", "spark", "--out", str(tmp_path / "o")]
    code, _, err = run(capsys, *args, "--jobs", "2")
    assert code == 2 and "--jobs" in err
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "match", str(plain), "--jobs", "0")
    assert exit_.value.code == 2 and "--jobs" in capsys.readouterr().err


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def test_a_killed_worker_ends_the_run_with_an_error(
    stores: tuple[Path, Path, dict[Any, str]],
) -> None:
    plain, _, _ = stores
    rng = random.Random(5)
    batch = b"".join(json.dumps(event(rng)).encode() + b"\n" for _ in range(BATCH))
    argv = [sys.executable, "-m", "tools.cli", "match", str(plain), "--jobs", "2"]
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(batch * 3)
    proc.stdin.flush()
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while len(workers) < 2:  # the forkserver's children: the pool's workers
        assert time.monotonic() < deadline, "no workers started"
        workers = [w for server in _children(proc.pid) for w in _children(server)]
        time.sleep(0.05)
    os.kill(workers[0], signal.SIGKILL)
    # its answers read meanwhile: a run blocked writing them would not read what follows
    drained = threading.Thread(target=proc.stdout.read, daemon=True)
    drained.start()
    try:
        for _ in range(20):
            proc.stdin.write(batch)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    drained.join(60)
    assert not drained.is_alive(), "the run did not end"
    err = proc.stderr.read()
    assert proc.wait(60) == 1, err
    assert b"a matching process died" in err and b"Traceback" not in err


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_live_pipe_gets_results_as_its_events_come(
    stores: tuple[Path, Path, dict[Any, str]], jobs: str
) -> None:
    """Events written to a pipe that stays open are answered without waiting for a full
    batch or the end of the input (betree.streams.stream.ready_batches); then a bulk burst goes
    through the workers, and the answers stay in order."""
    plain, sharded, subs = stores
    argv = [sys.executable, "-m", "tools.cli", "match", str(sharded), "--jobs", jobs]
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    rng = random.Random(5)
    schema = Index.open(plain, readonly=True)
    try:
        for n in (3, 1, 2, BATCH + 5, 1):
            sent = [event(rng) for _ in range(n)]
            proc.stdin.write(b"".join(json.dumps(e).encode() + b"\n" for e in sent))
            proc.stdin.flush()
            for ev in sent:  # answered while the pipe is still open
                found = json.loads(lines.get(timeout=120))
                assert set(found["matches"]) == brute(subs, schema.schema, ev)
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
        assert lines.empty()
    finally:
        schema.close()
        if proc.poll() is None:
            proc.kill()
