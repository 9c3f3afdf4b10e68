"""Spark's classes archived once per venv (AppCDS): each JVM of a test run starts on less CPU.

A Spark JVM spends most of its start loading and verifying the classes of Spark's jars
(measured: a local session running one small job, 9.3-10.6 s of CPU without the archive,
5.2-5.3 s with it). ``make test`` writes the archive before pytest starts, once per venv
(``python -m tests.support.jvm_cds dump``: a ``spark-submit`` of a small job whose JVM
dumps the classes it loaded when it exits, ~30 s of CPU), beside the venv's Python, named
by the JDK and pyspark it was made with. A run without it (it failed, or pytest was started
another way) runs every JVM without it; a JVM that finds it does not match its jars
ignores it, silently (its ``cds`` log is off), so the archive never changes what a test
sees. ``BEXDB_TESTS_NO_CDS=1`` turns it off (to measure without it).

The flags reach every Spark JVM the tests start through ``SPARK_SUBMIT_OPTS`` (the local
sessions, ``bexdb … --engine spark``, ``spark-submit``); the standalone cluster's daemons
and executors take :data:`FLAGS` in their own options (tests/loaders/test_spark_cluster.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a mismatch would print on the JVM's stdout


def archive() -> Path:
    """Where this JDK's and pyspark's archive is (or will be): beside the environment's
    Python (``.venv`` under ``make``)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    java = os.path.realpath(java)
    stamp = f"{java}:{os.stat(java).st_mtime_ns if os.path.exists(java) else 0}"
    key = hashlib.sha1(f"{stamp}:{metadata.version('pyspark')}".encode()).hexdigest()[:12]
    return Path(sys.prefix) / f"bexdb-spark-{key}.jsa"


OFF = os.environ.get("BEXDB_TESTS_NO_CDS") == "1" or not archive().exists()
FLAGS = "" if OFF else f"-XX:SharedArchiveFile={archive()} {_QUIET}"


def use() -> None:
    """Every Spark JVM this process starts from now on uses the archive (if there is one)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if FLAGS and FLAGS not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {FLAGS}".strip()


def _dump() -> None:
    """``spark-submit`` this module's job with the archive written at its JVM's exit,
    unless it exists; a failure is reported and the tests run without it."""
    import pyspark

    path = archive()
    if path.exists() or os.environ.get("BEXDB_TESTS_NO_CDS") == "1":
        return
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    home = os.path.dirname(pyspark.__file__)
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable}
    env["SPARK_SUBMIT_OPTS"] = f"-XX:ArchiveClassesAtExit={tmp} {_QUIET}"
    try:
        subprocess.run(
            [os.path.join(home, "bin", "spark-submit"), "--master", "local[2]", __file__, "job"],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if tmp.exists() and tmp.stat().st_size > 0:
            os.replace(tmp, path)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"Spark's class archive not written ({exc}): the tests run without it")
    finally:
        tmp.unlink(missing_ok=True)


def _job() -> None:
    """What most tests' JVMs load: SQL, a shuffle, Arrow batches through a Python worker."""
    sys.path.insert(0, str(ROOT))
    from loaders.spark.session import spark_session

    spark = spark_session()
    df = spark.range(0, 10_000, numPartitions=2).selectExpr("id", "cast(id % 7 as string) k")
    df = df.mapInArrow(lambda batches: batches, df.schema)
    df.groupBy("k").count().collect()
    spark.stop()


if __name__ == "__main__":
    {"dump": _dump, "job": _job}[sys.argv[1]]()
