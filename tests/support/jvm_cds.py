"""Spark's classes archived once per machine (AppCDS), so each JVM of a test run starts on less CPU.

A Spark JVM spends most of its start loading and verifying the classes of Spark's jars
(measured: a local session running one small job, 9.9 s of CPU without the archive, 5.1 s
with it). The first run that needs Spark writes the archive in the background (a
``spark-submit`` whose JVM dumps the classes it loaded when it exits: ~30 s of CPU, once);
JVMs started before it is there run without it. It is kept in the user's cache, named by
the JDK and pyspark it was made with; a JVM that finds it does not match its jars ignores
it, silently (its ``cds`` log is off), so an archive never changes what a test sees.
``BEXDB_TESTS_NO_CDS=1`` turns it off (to measure without it).

The flags reach every Spark JVM the tests start through ``SPARK_SUBMIT_OPTS`` (the local
sessions, ``bexdb … --engine spark``, ``spark-submit``); the standalone cluster's daemons
and executors take :data:`FLAGS` in their own options (tests/loaders/test_spark_cluster.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a mismatch would print on the JVM's stdout


def archive() -> Path:
    """Where this JDK's and pyspark's archive is (or will be)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    java = os.path.realpath(java)
    stamp = f"{java}:{os.stat(java).st_mtime_ns if os.path.exists(java) else 0}"
    key = hashlib.sha1(f"{stamp}:{metadata.version('pyspark')}".encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "bexdb-tests" / f"spark-{key}.jsa"


OFF = os.environ.get("BEXDB_TESTS_NO_CDS") == "1"
FLAGS = "" if OFF else f"-XX:SharedArchiveFile={archive()} {_QUIET}"


def use() -> None:
    """Every Spark JVM this process starts from now on uses the archive (once it exists)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if FLAGS and FLAGS not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {FLAGS}".strip()


def start_dump() -> subprocess.Popen[bytes] | None:
    """Write the archive in the background unless it exists or another process writes it
    (a lock file younger than ten minutes): the dumping process, to stop at the run's end."""
    path = archive()
    if OFF or path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_suffix(".lock")
    with contextlib.suppress(FileNotFoundError):
        if time.time() - lock.stat().st_mtime > 600:
            lock.unlink()
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.jvm_cds", "dump"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_dump(proc: subprocess.Popen[bytes] | None) -> None:
    """Stop an unfinished dump (its partial file and lock removed)."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)
    proc.wait()
    path = archive()
    for p in (path.with_suffix(f".{proc.pid}.tmp"), path.with_suffix(".lock")):
        p.unlink(missing_ok=True)


def _dump() -> None:
    """``spark-submit`` this module's job with the archive written at its JVM's exit."""
    import pyspark

    path = archive()
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
        )
        if tmp.exists() and tmp.stat().st_size > 0:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        path.with_suffix(".lock").unlink(missing_ok=True)


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
