"""Several ``bexdb`` commands in one Spark application, run in sequence.

``spark-submit this-file '["load", ...]' '["match", ...]' ...``: the session started here
(spark-submit's master and options) is the one each command finds active and uses, so the
commands share one driver and its executors where each alone would start its own (each
JVM start costs seconds of CPU: tests/loaders/test_spark_cluster.py).  After each command
a line ``MARK CODE SECONDS`` follows its output.

``spark-submit this-file --own '["load", ...]' ...``: no session started here, each command
starts its own as under ``spark-submit`` alone (and stops it at its end), in the one driver
JVM: the commands' own path under spark-submit, one JVM start for all of them.
"""

from __future__ import annotations

import json
import sys
import time

from loaders.spark.session import spark_session
from tools import cli

MARK = "--bexdb-command-done--"


def main(commands: list[list[str]], own: bool = False) -> None:
    if not own:
        spark_session()
    for argv in commands:
        t0 = time.monotonic()
        code = cli.main(argv)
        sys.stdout.flush()
        print(MARK, code, round(time.monotonic() - t0, 3), flush=True)


if __name__ == "__main__":
    own = sys.argv[1:2] == ["--own"]
    main([json.loads(arg) for arg in sys.argv[1 + own :]], own=own)
