"""Running a load's Spark jobs from the driver: progress, stage timings, cancellation.

A job's result is collected as Arrow and is small (results only, :mod:`loaders.spark.results`).
Progress goes to stderr, one line per stage; SIGINT and SIGTERM cancel the running job and
stop the load with nothing published (:class:`Driver`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow as pa

from loaders.spark.session import spark_session
from storage.errors import BexdbError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession


class Driver:
    """The driver's side of one load: progress, stage timings, and interrupts.

    SIGINT and SIGTERM during a load are noted, cancel the running Spark job, and stop the
    load at the next step (:meth:`check`) with KeyboardInterrupt; nothing is published.
    The handler never raises: the main thread is then usually blocked in a call into the
    JVM, and an exception there (what pyspark's own SIGINT handler does) can leave the
    job running to its end, since pyspark's collect waits for its job even when
    interrupted.  Nor can the handler call the JVM on that thread's connection (the call
    would wait for the blocked one); it cancels the job from a new thread instead.
    """

    def __init__(self, report: Progress) -> None:
        self.report = report
        self.stages: dict[str, float] = {}
        self.fired: list[int] = []
        self.job: tuple[SparkContext, str] | None = None

    def finish(self, summary: dict[str, Any], started: float, key: str, label: str) -> None:
        """Add the run's seconds (since ``started``, a ``time.monotonic``) and stage
        timings to ``summary`` and report it done: ``summary[key]`` ``label``, the rejects."""
        summary["seconds"] = round(time.monotonic() - started, 3)
        summary["stages"] = self.stages
        self.report.say(
            f"done: {summary[key]:,} {label}, {summary['rejected']:,} rejected "
            f"in {summary['seconds']:,.1f} s"
        )

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Handle SIGINT and SIGTERM meanwhile (main thread only: else nothing changes)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        self.listen()
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def listen(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, self._signal)

    def _signal(self, signum: int, frame: Any) -> None:
        self.fired.append(signum)
        job = self.job
        if job is not None:
            threading.Thread(target=job[0].cancelJobGroup, args=(job[1],), daemon=True).start()

    def check(self) -> None:
        """Stop here (KeyboardInterrupt) if a signal came."""
        if self.fired:
            self.report.say(f"interrupted by signal {self.fired[0]}: nothing is published")
            raise KeyboardInterrupt(f"signal {self.fired[0]}")

    def run(
        self, sc: SparkContext, df: DataFrame, labels: Sequence[str], counter: Any = None
    ) -> pa.Table:
        """Collect ``df`` (small: results only) as Arrow, with progress; cancel on failure.

        On any failure the job is cancelled and this waits until no task of it runs any
        more, so that the caller's clean-up cannot race a task writing into the staging
        directory.
        """
        self.check()
        group = f"bexdb-{os.getpid()}-{time.monotonic_ns()}"
        sc.setJobGroup(group, "bexdb load", interruptOnCancel=True)
        self.job = (sc, group)
        try:
            with self.report.watch(sc, group, labels, counter, self.stages):
                table = df.toArrow()
        except BaseException as exc:
            sc.cancelJobGroup(group)
            _wait_idle(sc, group)
            self.check()
            if isinstance(exc, Exception) and not isinstance(exc, BexdbError):
                raise BexdbError(f"the Spark job failed: {short_error(exc)}") from exc
            raise
        finally:
            self.job = None
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        self.check()
        return table


@contextmanager
def session(
    driver: Driver, spark: SparkSession | None, master: str | None, **options: Any
) -> Iterator[SparkSession]:
    """``spark``, else the process's active session, else a new one (``options`` go to
    :func:`~loaders.spark.session.spark_session`) stopped when the block ends.

    Inside :meth:`Driver.interruptible`: a new SparkContext sets its own SIGINT handler,
    so the driver's is set again after the start (timed as the ``session`` stage).
    """
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    own = spark is None
    if spark is None:
        driver.report.say(f"starting Spark ({master or 'local[*]'})")
        t0 = time.monotonic()
        spark = spark_session(master, **options)
        driver.stages["session"] = round(time.monotonic() - t0, 3)
        driver.listen()
    try:
        yield spark
    finally:
        if own:
            spark.stop()


def short_error(exc: BaseException) -> str:
    """The useful last line of a Spark error (a Python worker's traceback ends with it)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    tail = [line for line in lines if not line.startswith(("at ", "File ", "JVM stacktrace"))]
    return (tail[-1] if tail else type(exc).__name__)[:500]


def _wait_idle(sc: SparkContext, group: str, timeout: float = 60.0) -> None:
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = False
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                st = tracker.getStageInfo(stage)
                busy = busy or (st is not None and st.numActiveTasks > 0)
        if not busy:
            return
        time.sleep(0.2)


class Progress:
    """Progress on stderr: one line per stage, rewritten in place about once a second."""

    def __init__(self, out: TextIO | None) -> None:
        self.out = out

    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()

    @contextmanager
    def watch(
        self,
        sc: SparkContext,
        group: str,
        labels: Sequence[str],
        counter: Any,
        stages: dict[str, float],
    ) -> Iterator[None]:
        """Poll Spark's status tracker while the job of ``group`` runs.

        Stage i of the job is ``labels[i]`` (the last label for later ones); ``counter``
        (an accumulator, updated as tasks finish) gives the records for rate and ETA.
        Each label's seconds go into ``stages``.
        """
        stop = threading.Event()
        seen: dict[str, list[float]] = {}
        started = time.monotonic()

        out = self.out
        tty = out is not None and out.isatty()
        shown: list[str] = []  # the line on screen (a terminal), or the last label printed

        finish: dict[tuple[str, int], float] = {}  # (label, tasks done) -> projected end

        def poll() -> None:
            tracker = sc.statusTracker()
            printed = 0.0
            while not stop.wait(0.5):
                now = time.monotonic()
                line = label = ""
                for job in tracker.getJobIdsForGroup(group):
                    info = tracker.getJobInfo(job)
                    for i, stage in enumerate(sorted(info.stageIds) if info else ()):
                        st = tracker.getStageInfo(stage)
                        if st is None or st.numActiveTasks == 0:
                            continue
                        label = labels[min(i, len(labels) - 1)]
                        span = seen.setdefault(label, [now, now])
                        span[1] = now
                        records = int(counter.value) if counter is not None else 0
                        line = self._line(label, st, now - span[0], now - started, records, finish)
                if not line or out is None:
                    continue
                if tty:
                    out.write("\r" + line.ljust(len(shown[0]) if shown else 0))
                    shown[:] = [line]
                elif not shown or shown[0] != label or now - printed >= 10:
                    out.write(line + "\n")
                    shown[:] = [label]
                    printed = now
                out.flush()

        thread = threading.Thread(target=poll, name="bexdb-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if tty and shown and out is not None:
                out.write("\n")
                out.flush()
            total = time.monotonic() - started
            for label, (first, last) in seen.items():
                stages[label] = round(stages.get(label, 0.0) + last - first, 1)
            stages["job: " + "+".join(labels)] = round(total, 3)

    @staticmethod
    def _line(
        label: str,
        st: Any,
        elapsed: float,
        job: float,
        records: int,
        finish: dict[tuple[str, int], float],
    ) -> str:
        """One progress line: ``elapsed`` seconds in this label, ``job`` in the job, whose
        ``records`` so far (tasks report them as they finish) give the rate over the job's
        time, once a second has passed (over the label's first moments it was absurd).  The
        time left counts down from the end projected when the last task finished, instead of
        moving only when one finishes."""
        done, total = st.numCompletedTasks, st.numTasks
        if label == "build":  # K long tasks: no fraction to speak of
            text = f"build: {done}/{total} shard stores"
            if records:
                text += f" of {records:,} records"
            return text + f", {elapsed:,.0f} s"
        text = f"{label}: {done}/{total} tasks"
        if records and job >= 1.0:
            text += f", {records:,} records, {records / job:,.0f}/s"
        if done:
            end = finish.setdefault((label, done), elapsed * total / done)
            return text + f", ~{max(end - elapsed, 0.0):,.0f} s left"
        return text + f", {elapsed:,.0f} s"
