"""The README's cluster form: ``bexdb load`` as a ``spark-submit`` application.

Run here with ``--master local[2]`` (no cluster in CI): the load must take spark-submit's
master and Python rather than starting its own local session, and publish a store that
verifies and answers like the python engine's.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from betree.index import Index
from loaders.spark.session import LOCAL_JIT
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression
from tools import cli

pytestmark = pytest.mark.spark
#: The driver's JIT: C1 only, as the product's own local JVM (``LOCAL_JIT``: a short run).
C1 = ["--driver-java-options", LOCAL_JIT]


def test_load_under_spark_submit(tmp_path: Path) -> None:
    rng = random.Random(12)
    subs = {f"s{i}": expression(rng) for i in range(300)}
    (tmp_path / "subs.jsonl").write_text(
        "".join(json.dumps({"id": k, "expr": e}) + "\n" for k, e in subs.items())
    )
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    argv = [os.path.join(home, "bin", "spark-submit"), "--master", "local[2]", *C1, cli.__file__]
    argv += ["load", str(tmp_path / "store"), str(tmp_path / "subs.jsonl")]
    argv += ["--schema", str(tmp_path / "schema.json")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["loaded"] == 300 and summary["rejected"] == 0
    assert cli.main(["verify", str(tmp_path / "store")]) == 0
    with Index.open(tmp_path / "store", readonly=True) as idx:
        for _ in range(30):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, idx.schema, ev)


def test_match_under_spark_submit(tmp_path: Path) -> None:
    rng = random.Random(13)
    subs = {f"s{i}": expression(rng) for i in range(100)}
    with Index.open(tmp_path / "store", schema=SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
    events = [event(rng) for _ in range(50)]
    lines = [json.dumps(ev) for ev in events] + ['{"i": "x"}']
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    argv = [os.path.join(home, "bin", "spark-submit"), "--master", "local[2]", *C1, cli.__file__]
    argv += ["match", str(tmp_path / "store"), str(tmp_path / "events.jsonl")]
    argv += ["--engine", "spark", "--out", str(tmp_path / "out")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stderr[-3000:]  # the last event is rejected
    assert json.loads(done.stdout.strip().splitlines()[-1])["rejected"] == 1
    assert (tmp_path / "out" / "_SUCCESS").exists()
    found = {}
    for part in sorted((tmp_path / "out").glob("part-*")):
        for text in part.read_text().splitlines():
            doc = json.loads(text)
            found[doc.pop("line")] = doc
    with Index.open(tmp_path / "store", readonly=True) as idx:
        for n, ev in enumerate(events, 1):
            assert sorted(found[n]["matches"]) == sorted(idx.match(ev))  # in no set order
    assert "error" in found[len(lines)]
