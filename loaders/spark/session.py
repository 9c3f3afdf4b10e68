"""The SparkSession of a load, and the one way its transforms run (``mapInArrow``).

Starting Spark is the fixed cost of a Spark load (a few seconds, most of it the JVM's start;
measured in docs/bench/load/README.md): for small inputs ``--engine python`` is faster.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DRIVER_MEMORY = "2g"
#: The local JVM (driver and executors in one) compiles with C1 only: a load is short, and
#: C2's compiler threads cost more CPU than they save (the JVM's CPU and Spark's start, both
#: ways: docs/bench/load/README.md).
LOCAL_JIT = "-XX:TieredStopAtLevel=1"

# Errors only.  "org" gets its own entry at the root's level: at start-up Spark compares the
# level configured for its own classes (WARN when none is) with the root's, and prints a
# notice when they differ.
_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.org.name = org
logger.org.level = error
logger.io.name = io
logger.io.level = error
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = fatal
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = fatal
"""


def spark_session(
    master: str | None = None,
    *,
    verbose: bool = False,
    driver_memory: str | None = None,
    app_name: str = "bexdb load",
    log_dir: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """A SparkSession for loads: ``local[*]`` unless ``master`` names a cluster.

    Under ``spark-submit`` (``bexdb load`` run as its application, see the README) the
    master and resources are spark-submit's, and the executors use the Python it names.

    Local workers run this interpreter (``PYSPARK_PYTHON``: else they would use the
    system ``python3``, which lacks the project's dependencies) with the project on their
    ``PYTHONPATH``, and the local JVM compiles with C1 only (:data:`LOCAL_JIT`); Spark's
    log is quiet (errors only, through a log4j2 file written into ``log_dir`` or a
    temporary directory) and its console progress bar is off unless
    ``verbose``.  Cost: seconds, most of them the JVM's start.
    """
    from pyspark.sql import SparkSession

    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ  # under spark-submit
    local = not submitted and (master is None or master.startswith("local"))
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    builder = SparkSession.builder
    if not submitted:  # spark-submit's --master (and its other options) stand
        builder = builder.master(master or "local[*]")
    builder = (
        builder.appName(app_name)
        .config("spark.driver.memory", driver_memory or DRIVER_MEMORY)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "true" if verbose else "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(paths))
    )
    java: list[str] = []
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = builder.config("spark.pyspark.python", sys.executable)
        builder = builder.config("spark.pyspark.driver.python", sys.executable)
        java.append(LOCAL_JIT)
    if not verbose:
        where = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="bexdb-"))
        where.mkdir(parents=True, exist_ok=True)
        config = where / "log4j2-quiet.properties"
        config.write_text(_QUIET_LOG4J)
        java.append(f"-Dlog4j2.configurationFile=file:{config}")
    if java:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java))
    try:
        with _quiet_pandas_check():
            spark = builder.getOrCreate()
    finally:
        if not verbose and log_dir is None:
            shutil.rmtree(where, ignore_errors=True)  # read once, at the JVM's start
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def _quiet_pandas_check() -> Iterator[None]:
    """pyspark 4.3 warns that it does not fully support pandas 3; only its version check
    (made by mapInArrow) touches pandas here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        yield


def map_arrow(df: DataFrame, fn: Any, ddl: str) -> DataFrame:
    """``df.mapInArrow(fn, ddl)``: Arrow batches in and out of the Python workers."""
    with _quiet_pandas_check():
        return df.mapInArrow(fn, ddl)
