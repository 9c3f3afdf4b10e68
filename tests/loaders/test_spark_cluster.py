"""``load``, ``match --engine spark`` and ``stream`` on a real Spark standalone cluster.

A master and a worker (two cores, 1 GB) are started on loopback from pyspark's own
distribution (``spark-class org.apache.spark.deploy.master.Master`` / ``…worker.Worker``,
free ports); each application has two executors of one core (``spark.executor.cores=1``),
separate JVMs the worker starts, their Python workers started from ``PYSPARK_PYTHON``.
``load``, ``match --engine spark`` and ``stream --available-now`` run in sequence with
``--master spark://127.0.0.1:PORT`` in one application (tests/support/one_application.py:
one driver and two executors, not three of each; ``spark-submit``'s own path is
tests/loaders/test_spark_submit.py's), and the answers are compared with the local ones;
the cluster is stopped at the end. The seconds each command took (without Spark's start)
are printed (``pytest -s``: docs/scale.md).

The ``stream`` runs across a ``kill -9`` of an executor: the executor process (a JVM the
worker started, found by its working directory under the worker's directory) is killed
while it runs a task of a micro-batch; the master starts another, the lost task runs
again, and every event's result is committed exactly once, equal to ``bexdb match``'s.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest

from betree.lang.schema import Schema
from loaders.spark.session import LOCAL_JIT
from tests.support import jvm_cds
from tests.support.brute import brute
from tests.support.one_application import MARK
from tests.support.spark import (
    drop,
    output,
    per_file,
    single_process,
    subscriptions,
)
from tests.support.workload import SCHEMA, event
from tools import cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HOME = os.path.dirname(pyspark.__file__)
#: The JVMs' JIT: C1 only, as the product's local JVM (short runs, where C2's compiler
#: threads cost more CPU than they save).
C1 = LOCAL_JIT
#: The daemons' and executors' JVMs: C1, and Spark's classes from the test run's archive
#: (the drivers take it from ``SPARK_SUBMIT_OPTS``: tests/support/jvm_cds.py).
JAVA = f"{C1} {jvm_cds.FLAGS}"
#: What each executor may use: the worker offers two cores and 1 GB, an executor takes one
#: core and 512 MB (two executors an application).
SUBMIT = (
    f"--conf spark.executor.memory=512m --conf spark.executor.cores=1"
    f" --conf spark.driver.memory=1g"
    f" --conf 'spark.executor.extraJavaOptions={JAVA}'"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": HOME,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": JAVA,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "PYSPARK_PYTHON": sys.executable,  # the executors' Python
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
    }


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    work: Path  # the worker's --work-dir: APP/EXECUTOR/ below it per executor


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master with a live worker of two cores (stopped afterwards)."""
    tmp = tmp_path_factory.mktemp("cluster")
    env = environment(tmp)
    port, ui = free_port(), free_port()
    spark_class = os.path.join(HOME, "bin", "spark-class")
    daemons: list[subprocess.Popen[bytes]] = []

    def daemon(name: str, *argv: str) -> None:
        log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115 (kept open while it runs)
        daemons.append(
            subprocess.Popen(
                [spark_class, *argv], env=env, stdout=log, stderr=log, start_new_session=True
            )
        )

    master = f"spark://127.0.0.1:{port}"
    work = tmp / "work"
    work.mkdir()
    try:
        daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
               "--port", str(port), "--webui-port", str(ui))  # fmt: skip
        daemon("worker", "org.apache.spark.deploy.worker.Worker", master,
               "--host", "127.0.0.1", "--port", str(free_port()),
               "--webui-port", str(free_port()), "--cores", "2", "--memory", "1024m",
               "--work-dir", str(work))  # fmt: skip
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 1:
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                logs = {p.name: p.read_text()[-2000:] for p in tmp.glob("*.log")}
                raise AssertionError(f"the cluster did not start: {logs}")
            time.sleep(0.5)
        yield Cluster(master, work)
    finally:
        for d in reversed(daemons):
            with _suppress_gone():
                os.killpg(d.pid, signal.SIGTERM)
        for d in daemons:
            try:
                d.wait(30)
            except subprocess.TimeoutExpired:
                with _suppress_gone():
                    os.killpg(d.pid, signal.SIGKILL)
                d.wait(30)


class _suppress_gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *rest: Any) -> bool:
        return kind is ProcessLookupError


def _alive_workers(ui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


def submit(tmp: Path, master: str, *commands: list[str]) -> subprocess.Popen[str]:
    """``bexdb`` COMMANDS in sequence in one application on the cluster, its driver this
    Python (``--master URL``, the options in ``PYSPARK_SUBMIT_ARGS``), started
    (:func:`answers` reads what they said)."""
    env = environment(tmp)
    env["PYSPARK_SUBMIT_ARGS"] = f"{SUBMIT} pyspark-shell"
    env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} {C1}"  # the driver's JIT
    script = str(ROOT / "tests" / "support" / "one_application.py")
    with open(tmp / "driver.log", "w") as log:  # (a pipe left unread could fill up)
        return subprocess.Popen(
            [sys.executable, script, "--master", master, *(json.dumps(a) for a in commands)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
            start_new_session=True,
        )  # fmt: skip


def answers(proc: subprocess.Popen[str], tmp: Path, n: int) -> list[tuple[dict[str, Any], float]]:
    """Each of the application's ``n`` commands' summary (its last line) and seconds."""
    stdout, _ = proc.communicate(timeout=600)
    stderr = (tmp / "driver.log").read_text()
    assert proc.returncode == 0, stderr[-3000:]
    found: list[tuple[dict[str, Any], float]] = []
    lines: list[str] = []
    for line in stdout.splitlines():
        if line.startswith(MARK):
            _, code, seconds = line.split()
            assert code in ("0", "3"), stderr[-3000:]
            found.append((json.loads(lines[-1]), float(seconds)))
            lines = []
        else:
            lines.append(line)
    assert len(found) == n, stdout[-3000:]
    return found


_TASK = re.compile(rb"(Running|Finished) task \S+ in stage \S+ \(TID (\d+)\)")


def executors(work: Path) -> dict[int, Path]:
    """The executor processes the cluster's worker started: pid -> working directory."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry.name}/cwd"))
            command = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if b"CoarseGrainedExecutorBackend" in command and work in cwd.parents:
            found[int(entry.name)] = cwd
    return found


def busy(directory: Path) -> bool:
    """Whether the executor logging into ``directory`` runs a task (its log says so)."""
    try:
        log = (directory / "stderr").read_bytes()
    except FileNotFoundError:
        return False
    running: set[bytes] = set()
    for what, tid in _TASK.findall(log):
        (running.add if what == b"Running" else running.discard)(tid)
    return bool(running)


def test_load_match_and_stream_across_an_executor_kill_on_a_cluster(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One application: ``load``, ``match --engine spark``, then ``stream --available-now``
    over ten files, two a micro-batch, one executor killed while it runs a stream task."""
    master = cluster.url
    rng = random.Random(61)
    subs = subscriptions(61, 400)
    (tmp_path / "subs.jsonl").write_text(
        "".join(json.dumps({"id": k, "expr": e}) + "\n" for k, e in subs.items())
    )
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    store = str(tmp_path / "store")
    events = [event(rng) for _ in range(300)]
    lines = [json.dumps(e) for e in events]
    lines.insert(17, '{"i": "seven"}')
    given = tmp_path / "events.jsonl"
    given.write_text("\n".join(lines) + "\n")
    src, out, sink, ck = tmp_path / "src", tmp_path / "out", tmp_path / "sink", tmp_path / "ck"
    src.mkdir()
    drop(src, "a.jsonl", ("\n".join(lines[:150]) + "\n").encode())  # the first micro-batch
    drop(src, "b.jsonl", ("\n".join(lines[150:]) + "\n").encode())
    big = []  # then four of two files each, long enough to catch an executor in a task
    for f in range(8):
        rows = [json.dumps(event(rng)) for _ in range(5000)]
        rows.insert(f * 7, "not json")
        big.append(drop(src, f"e{f}.jsonl", ("\n".join(rows) + "\n").encode()))
    apps = set(cluster.work.iterdir())
    proc = submit(
        tmp_path, master,
        ["load", store, str(tmp_path / "subs.jsonl"), "--schema", str(tmp_path / "schema.json"),
         "--shards", "2", "--master", master],
        ["match", store, str(given), "--engine", "spark", "--out", str(out), "--master", master],
        ["stream", store, "--source", str(src), "--out", str(sink), "--checkpoint", str(ck),
         "--master", master, "--max-files-per-trigger", "2", "--available-now",
         "--progress-json"],
    )  # fmt: skip
    try:
        _until(lambda: len(per_file(sink)) >= 2, "the first micro-batch committed", proc)
        before = executors(cluster.work)
        assert len(before) == 2, before  # the application's two, which ran load and match
        victim: list[int] = []

        def running() -> bool:
            victim.extend(pid for pid, cwd in before.items() if busy(cwd))
            return bool(victim)

        _until(running, "an executor running a stream task", proc, step=0.01)
        os.kill(victim[0], signal.SIGKILL)
        ran = answers(proc, tmp_path, 3)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    (loaded, load_s), (matched, match_s), (streamed, stream_s) = ran
    figures = {"load": load_s, "match": match_s, "stream": stream_s}
    (app,) = set(cluster.work.iterdir()) - apps  # one application: its two executors, and
    started = {p.name for p in app.iterdir()}  # the one the master started for the victim
    assert len(started) == 3 and before[victim[0]].name in started, started
    assert loaded["loaded"] == 400 and loaded["rejected"] == 0
    assert cli.main(["verify", store]) == 0

    _, expected = single_process(store, given, capsys)  # the local answers
    schema = Schema.from_json(SCHEMA)
    for n, ev in enumerate(events, 1):  # and the brute-force evaluator's
        assert set(expected[n + (n > 17)]["matches"]) == brute(subs, schema, ev)

    assert matched["rejected"] == 1
    assert {d.pop("line"): d for d in output(out)} == expected

    # every event's result once (no task counted twice, none answered twice), as locally
    assert streamed["events"] == 301 + 8 * 5001 and streamed["rejected"] == 1 + 8
    figures["stream: Python worker peak MB"] = streamed["worker_peak_mb"]
    found = per_file(sink)  # (fails on an event answered twice)
    assert sorted(found) == sorted(map(str, [src / "a.jsonl", src / "b.jsonl", *big]))
    second = {150 + n: doc for n, doc in found.pop(str(src / "b.jsonl")).items()}
    assert {**found.pop(str(src / "a.jsonl")), **second} == expected
    for path in big:
        assert found[str(path)] == single_process(store, path, capsys)[1], path
    print("\ncluster seconds:", json.dumps({k: round(v, 1) for k, v in figures.items()}))


def _until(ok: Any, what: str, proc: subprocess.Popen[str], step: float = 0.2) -> None:
    """Wait for ``ok()``; fail if the application ends first (its log: driver.log)."""
    deadline = time.monotonic() + 300
    while not ok():
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {what}: see driver.log")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)
