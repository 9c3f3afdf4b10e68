"""Several ``bexdb`` commands in one Spark application, run in sequence.

``python this-file --master URL '["load", ...]' '["match", ...]' ...``: the session started
here (as a command's ``--master URL`` starts its own, with ``PYSPARK_SUBMIT_ARGS``' options)
is the one each command finds active and uses, so the commands share one driver and its
executors where each alone would start its own (each JVM start costs seconds of CPU:
tests/loaders/test_spark_cluster.py; ``stream`` stops the session at its end: put it last).
Under ``spark-submit`` without ``--master``: spark-submit's master and options.  After each
command a line ``MARK CODE SECONDS`` follows its output.

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


def main(commands: list[list[str]], own: bool = False, master: str | None = None) -> None:
    if not own:
        spark_session(master)
    for argv in commands:
        t0 = time.monotonic()
        code = cli.main(argv)
        sys.stdout.flush()
        print(MARK, code, round(time.monotonic() - t0, 3), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    own = args[:1] == ["--own"]
    master = args[1] if args[:1] == ["--master"] else None
    main([json.loads(arg) for arg in args[own + 2 * (master is not None) :]], own, master)
