"""``load``, ``match --engine spark`` and ``stream`` on a real Spark standalone cluster.

A master and two workers (one core, 768 MB each) are started on loopback from pyspark's
own distribution (``spark-class org.apache.spark.deploy.master.Master`` / ``…worker.Worker``,
free ports), each command runs with ``--master spark://127.0.0.1:PORT`` (executors in the
workers' JVMs, their Python workers started from ``PYSPARK_PYTHON``), once under
``spark-submit``, and the answers are compared with the local ones; the cluster is stopped at
the end.  The seconds each command took are printed (``pytest -s``: docs/scale.md).
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from betree.lang.schema import Schema
from loaders.spark.streamlog import committed_results
from tests.support.brute import brute
from tests.support.spark import output, single_process, subscriptions
from tests.support.workload import SCHEMA, event
from tools import cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
HOME = os.path.dirname(pyspark.__file__)
#: What each executor may use: the workers offer 768 MB, an executor takes 512 MB.
SUBMIT = "--conf spark.executor.memory=512m --conf spark.driver.memory=1g"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": HOME,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "PYSPARK_PYTHON": sys.executable,  # the executors' Python
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with two live workers (stopped afterwards)."""
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
    try:
        daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
               "--port", str(port), "--webui-port", str(ui))  # fmt: skip
        for k in range(2):
            work = tmp / f"work{k}"
            work.mkdir()
            daemon(f"worker{k}", "org.apache.spark.deploy.worker.Worker", master,
                   "--host", "127.0.0.1", "--port", str(free_port()),
                   "--webui-port", str(free_port()), "--cores", "1", "--memory", "768m",
                   "--work-dir", str(work))  # fmt: skip
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 2:
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                logs = {p.name: p.read_text()[-2000:] for p in tmp.glob("*.log")}
                raise AssertionError(f"the cluster did not start: {logs}")
            time.sleep(0.5)
        yield master
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


def bexdb(tmp: Path, *argv: str, submit: str | None = None) -> tuple[dict[str, Any], float]:
    """Run ``bexdb ARGV`` as its own process (a Spark driver): its summary and seconds.
    ``submit``: under ``spark-submit --master SUBMIT`` instead."""
    env = environment(tmp)
    if submit is None:
        env["PYSPARK_SUBMIT_ARGS"] = f"{SUBMIT} pyspark-shell"
        command = [sys.executable, "-m", "tools.cli", *argv]
    else:
        command = [os.path.join(HOME, "bin", "spark-submit"), "--master", submit,
                   *SUBMIT.split(), str(ROOT / "tools" / "cli.py"), *argv]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - t0
    assert done.returncode in (0, 3), done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), seconds


def test_load_match_stream_on_a_cluster(
    cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(61)
    subs = subscriptions(61, 400)
    (tmp_path / "subs.jsonl").write_text(
        "".join(json.dumps({"id": k, "expr": e}) + "\n" for k, e in subs.items())
    )
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    store = str(tmp_path / "store")
    figures: dict[str, float] = {}
    summary, figures["load"] = bexdb(
        tmp_path, "load", store, str(tmp_path / "subs.jsonl"), "--schema",
        str(tmp_path / "schema.json"), "--shards", "2", "--master", cluster,
    )  # fmt: skip
    assert summary["loaded"] == 400 and summary["rejected"] == 0
    assert cli.main(["verify", store]) == 0

    events = [event(rng) for _ in range(300)]
    lines = [json.dumps(e) for e in events]
    lines.insert(17, '{"i": "seven"}')
    given = tmp_path / "events.jsonl"
    given.write_text("\n".join(lines) + "\n")
    _, expected = single_process(store, given, capsys)  # the local answers
    schema = Schema.from_json(SCHEMA)
    for n, ev in enumerate(events, 1):  # and the brute-force evaluator's
        assert set(expected[n + (n > 17)]["matches"]) == brute(subs, schema, ev)

    out = tmp_path / "out"
    summary, figures["match"] = bexdb(
        tmp_path, "match", store, str(given), "--engine", "spark", "--out", str(out),
        "--master", cluster,
    )  # fmt: skip
    assert summary["rejected"] == 1
    assert {d.pop("line"): d for d in output(out)} == expected

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jsonl").write_text("\n".join(lines[:150]) + "\n")
    (src / "b.jsonl").write_text("\n".join(lines[150:]) + "\n")
    for how, submit in (("stream", None), ("stream (spark-submit)", cluster)):
        sink, ck = tmp_path / f"sink-{submit is None}", tmp_path / f"ck-{submit is None}"
        argv = ["stream", store, "--source", str(src), "--out", str(sink), "--checkpoint", str(ck)]
        argv += ["--available-now"] + (["--master", cluster] if submit is None else [])
        summary, figures[how] = bexdb(tmp_path, *argv, submit=submit)
        assert summary["events"] == 301 and summary["rejected"] == 1
        figures[f"{how}: Python worker peak MB"] = summary["worker_peak_mb"]
        found = {}
        for doc in committed_results(sink):
            base = 0 if doc.pop("file").endswith("a.jsonl") else 150
            found[base + doc.pop("line")] = doc
        assert found == expected, how
    print("\ncluster seconds:", json.dumps({k: round(v, 1) for k, v in figures.items()}))
