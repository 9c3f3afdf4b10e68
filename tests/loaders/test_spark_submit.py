"""The README's cluster form: ``bexdb load`` and ``bexdb match --engine spark`` as a
``spark-submit`` application.

Run here with ``--master local[2]`` (no cluster in CI): each command must take
spark-submit's master and Python rather than starting its own local JVM.  The load must
publish a store that verifies and answers like the brute force; the match must answer like
the store, the bad event rejected.  Both run in one application, one after the other, each
starting its own session in spark-submit's driver and stopping it at its end as it does
alone (tests/support/one_application.py ``--own``: one JVM start, not two).
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
from tests.support.one_application import MARK
from tests.support.workload import SCHEMA, event, expression
from tools import cli

pytestmark = pytest.mark.spark
#: The driver's JIT: C1 only, as the product's own local JVM (``LOCAL_JIT``: a short run).
C1 = ["--driver-java-options", LOCAL_JIT]
ROOT = Path(__file__).resolve().parents[2]


def submit(*commands: list[str]) -> list[tuple[int, dict]]:
    """COMMANDS in one ``spark-submit --master local[2]`` application: each one's exit
    code and summary (its last line of output)."""
    home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = str(ROOT)
    argv = [os.path.join(home, "bin", "spark-submit"), "--master", "local[2]", *C1]
    argv += [str(ROOT / "tests" / "support" / "one_application.py"), "--own"]
    argv += [json.dumps(command) for command in commands]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    answers, last = [], ""
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            answers.append((int(line.split()[1]), json.loads(last)))
        else:
            last = line
    assert len(answers) == len(commands), done.stdout[-3000:] + done.stderr[-3000:]
    return answers


def test_load_and_match_under_spark_submit(tmp_path: Path) -> None:
    rng = random.Random(12)
    subs = {f"s{i}": expression(rng) for i in range(300)}
    (tmp_path / "subs.jsonl").write_text(
        "".join(json.dumps({"id": k, "expr": e}) + "\n" for k, e in subs.items())
    )
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    rng = random.Random(13)  # the match: its own store, written online
    matched = {f"s{i}": expression(rng) for i in range(100)}
    with Index.open(tmp_path / "m", schema=SCHEMA) as idx:
        idx.subscribe_many(list(matched.items()))
    events = [event(rng) for _ in range(50)]
    lines = [json.dumps(ev) for ev in events] + ['{"i": "x"}']
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    load = ["load", str(tmp_path / "store"), str(tmp_path / "subs.jsonl")]
    load += ["--schema", str(tmp_path / "schema.json")]
    match = ["match", str(tmp_path / "m"), str(tmp_path / "events.jsonl")]
    match += ["--engine", "spark", "--out", str(tmp_path / "out")]
    (load_code, loaded), (match_code, summary) = submit(load, match)

    assert load_code == 0 and loaded["loaded"] == 300 and loaded["rejected"] == 0
    assert cli.main(["verify", str(tmp_path / "store")]) == 0
    with Index.open(tmp_path / "store", readonly=True) as idx:
        for _ in range(30):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, idx.schema, ev)

    assert match_code == 3 and summary["rejected"] == 1  # the last event is rejected
    assert (tmp_path / "out" / "_SUCCESS").exists()
    found = {}
    for part in sorted((tmp_path / "out").glob("part-*")):
        for text in part.read_text().splitlines():
            doc = json.loads(text)
            found[doc.pop("line")] = doc
    with Index.open(tmp_path / "m", readonly=True) as idx:
        for n, ev in enumerate(events, 1):
            assert sorted(found[n]["matches"]) == sorted(idx.match(ev))  # in no set order
    assert "error" in found[len(lines)]
