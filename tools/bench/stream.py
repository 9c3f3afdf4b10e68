"""``bexdb bench stream STORE EVENTS``: ``bexdb stream`` fed files at a fixed rate, beside
``bexdb match --jobs 2`` on the same store and events in the same run.

The events are cut into files of ``--file-events`` each (cycling through ``EVENTS``), and
dropped into the source of one ``bexdb stream`` process (its own local Spark, ``--trigger``
seconds) as a user's producer would: written under a hidden name, renamed in.  A poller
reads the sink's log (:mod:`loaders.spark.streamlog`) every 50 ms and notes when each
file's results are first committed.

1. **warm-up**: ``--warm-files`` files at once (one per core), until their results are
   committed: Spark's start, and the store opened and its packed views built in each Python
   worker (the first task of a worker took 7 s at 100K on a loaded machine, later ones
   under 1 s); timed apart, not counted in the rates.
2. **backlog** (sustained rate): ``--backlog`` files dropped at once; events per second
   from the drop to the commit of the last (the rate the query keeps up with, micro-batch
   overheads included).
3. **paced** (latency): files dropped at ``--load`` times the backlog's rate for
   ``--seconds``; per file, the seconds from its arrival (the rename) to the commit of its
   results: p50 and p99 (a commit is seen up to one poll late); and the timeline of its
   micro-batches, the median of each phase Spark reports (``durationMs``: ``latestOffset``,
   ``walCommit``, ``addBatch``...) and of the seconds the tasks spent in Python.

First, ``bexdb match --jobs N`` over ``EVENTS`` as one file (its own process, timed end to
end); its output is kept, and every result the stream commits must be its
answer to the same event (else the benchmark fails).  At the end the stream is stopped with
SIGTERM (it must exit 0) and every event must have been committed exactly once.  Output: a
table on stdout and ``results.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from itertools import cycle, islice
from pathlib import Path
from typing import Any

from betree.formats.jsonl import input_lines
from loaders.spark.streamlog import committed_parts
from tools.args import positive
from tools.bench.harness import logger, machine, markdown_table, stats

_log = logger("bench stream")


class Commits:
    """When each source file's results were first seen committed, polled from the sink's
    log in a thread; counts every file's result lines, and those that differ from
    ``bexdb match``'s answer (``expected(file, line)``: its output line)."""

    def __init__(self, out: Path, expected: Callable[[str, int], bytes]) -> None:
        self.out = out
        self.expected = expected
        self.wrong = 0
        self.seen: dict[str, float] = {}
        self.lines: dict[str, int] = {}
        self.read: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="bench-commits", daemon=True)

    def __enter__(self) -> Commits:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _poll(self) -> None:
        while not self.stop.wait(0.05):
            self.scan()

    def scan(self) -> None:
        now = time.monotonic()
        for part in committed_parts(self.out):
            if part in self.read:
                continue
            self.read.add(part)
            with open(part, "rb") as fh:
                for line in fh:
                    doc = json.loads(line)
                    name = doc["file"]
                    self.seen.setdefault(name, now)
                    self.lines[name] = self.lines.get(name, 0) + 1
                    self.wrong += not same(doc, json.loads(self.expected(name, doc["line"])))

    def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(n in self.seen for n in names):
            if time.monotonic() > deadline:
                missing = sum(n not in self.seen for n in names)
                raise SystemExit(f"bench stream: {missing} files not committed in {timeout} s")
            time.sleep(0.02)


def same(found: dict[str, Any], expected: dict[str, Any]) -> bool:
    """The same answer: the same error, or the same ids (whose order within an event
    depends on the batch an event was matched in, here and in ``bexdb match``)."""
    if "error" in expected or "error" in found:
        return found.get("error") == expected.get("error")
    ids, want = found["matches"], expected["matches"]
    return len(ids) == len(want) and set(ids) == set(want)


class Producer:
    """Files of ``size`` events, cycling through the events file, dropped into ``source``."""

    def __init__(self, events: Path, source: Path, size: int) -> None:
        with open(events, "rb") as fh:
            lines = [line for line in input_lines(fh) if line.strip()]
        if not lines:
            raise SystemExit(f"bench stream: no events in {events}")
        self.total = len(lines)
        self.lines = cycle(lines)
        self.source = source
        self.size = size
        self.count = 0
        self.arrived: dict[str, float] = {}
        self.first: dict[str, int] = {}  # a file's first event, an index into the events

    def event(self, name: str, line: int) -> int:
        """The index in the events file of the event at ``line`` of file ``name``."""
        return self.first[name] + line - 1

    def drop(self) -> str:
        name = f"e{self.count:06d}.jsonl"
        self.count += 1
        hidden = self.source / f".{name}"
        hidden.write_bytes(b"".join(line + b"\n" for line in islice(self.lines, self.size)))
        path = self.source / name
        os.rename(hidden, path)
        self.first[str(path)] = self.count * self.size - self.size
        self.arrived[str(path)] = time.monotonic()
        return str(path)


def match_baseline(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, Any], list[bytes]]:
    """``bexdb match STORE EVENTS --jobs N``, end to end: its rate, and its output lines."""
    argv = [sys.executable, "-m", "tools.cli", "match", args.store, args.events]
    out = tmp / "match.jsonl"
    os.sync()  # earlier writes back on disk before, not during
    t = time.perf_counter()
    with open(out, "wb") as fh:
        subprocess.run([*argv, "--jobs", str(args.jobs)], stdout=fh, check=False)
    seconds = time.perf_counter() - t
    lines = out.read_bytes().splitlines()
    out.unlink()
    row = {"jobs": args.jobs, "events": len(lines), "seconds": round(seconds, 2)}
    return {**row, "events_per_s": round(len(lines) / seconds, 1)}, lines


def run_stream(args: argparse.Namespace, tmp: Path, answers: list[bytes]) -> dict[str, Any]:
    source, out = tmp / "source", tmp / "out"
    source.mkdir()
    argv = [sys.executable, "-m", "tools.cli", "stream", args.store, "--source", str(source)]
    argv += ["--out", str(out), "--checkpoint", str(tmp / "ck"), "--trigger", str(args.trigger)]
    argv += ["--progress-json"]
    producer = Producer(Path(args.events), source, args.file_events)
    if producer.total != len(answers):
        raise SystemExit(f"bench stream: {producer.total} events but {len(answers)} answers")

    def expected(name: str, line: int) -> bytes:
        return answers[producer.event(name, line) % len(answers)]

    with open(tmp / "progress.jsonl", "wb") as progress:
        proc = subprocess.Popen(argv, stdout=progress, stderr=subprocess.DEVNULL)
    try:
        with Commits(out, expected) as commits:
            _log(f"warm-up: Spark's start and {args.warm_files} files")
            t0 = time.monotonic()
            commits.wait([producer.drop() for _ in range(args.warm_files)], args.timeout)
            warm_s = time.monotonic() - t0
            _log(f"backlog: {args.backlog} files of {args.file_events:,} events at once")
            t0 = time.monotonic()
            backlog = [producer.drop() for _ in range(args.backlog)]
            commits.wait(backlog, args.timeout)
            sustained = args.backlog * args.file_events / (max(commits.seen.values()) - t0)
            rate = sustained * args.load
            gap = args.file_events / rate
            _log(
                f"sustained {sustained:,.0f} events/s; paced at {rate:,.0f}/s for {args.seconds} s"
            )
            paced = []
            time.sleep(0.5)  # the backlog's progress line written (polled every 0.2 s)
            before = _lines(tmp / "progress.jsonl")
            start = time.monotonic()
            while (now := time.monotonic()) - start < args.seconds:
                paced.append(producer.drop())
                time.sleep(max(0.0, start + len(paced) * gap - time.monotonic()))
            commits.wait(paced, args.timeout)
            latency = [commits.seen[n] - producer.arrived[n] for n in paced]
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    commits.scan()
    twice = [n for n, k in commits.lines.items() if k != args.file_events]
    if code != 0 or twice or commits.wrong:
        raise SystemExit(
            f"bench stream: exit {code}; files not answered once: {twice[:5]}; "
            f"{commits.wrong} answers unlike bexdb match's"
        )
    *batches, last = (tmp / "progress.jsonl").read_text().splitlines()
    return {
        "paced_timeline": timeline([json.loads(b) for b in batches[before:]]),
        "file_events": args.file_events,
        "trigger_s": args.trigger,
        "warm_files": args.warm_files,
        "warm_s": round(warm_s, 2),
        "backlog_files": args.backlog,
        "sustained_events_per_s": round(sustained, 1),
        "paced_events_per_s": round(rate, 1),
        "paced_files": len(paced),
        "paced_offered_events_per_s": round(len(paced) * args.file_events / (now - start), 1),
        "latency_s": stats(latency),
        "micro_batches": len(batches),
        "events_committed": sum(commits.lines.values()),
        "worker_peak_mb": json.loads(last)["worker_peak_mb"],
    }


def _lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def timeline(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Micro-batches' medians: events, seconds in Python, and each phase's milliseconds."""
    if not batches:
        return {"micro_batches": 0}
    phases = sorted({k for b in batches for k in b["durations_ms"]})
    return {
        "micro_batches": len(batches),
        "events": statistics.median(b["events"] for b in batches),
        "python_s": round(statistics.median(b["python_s"] for b in batches), 3),
        "ms": {k: statistics.median(b["durations_ms"].get(k, 0) for b in batches) for k in phases},
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help="a store (plain or sharded)")
    parser.add_argument("events", help="events, JSON Lines (bexdb gen's events.jsonl)")
    parser.add_argument("--file-events", type=positive, default=1000, help="events a file (1000)")
    parser.add_argument(
        "--warm-files",
        type=positive,
        default=os.cpu_count() or 1,
        help="warm-up files dropped at once: one per core warms every Python worker (cores)",
    )
    parser.add_argument("--backlog", type=positive, default=20, help="files dropped at once (20)")
    parser.add_argument(
        "--load", type=float, default=0.5, help="paced rate, a share of the sustained one (0.5)"
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="paced phase (30)")
    parser.add_argument("--trigger", type=float, default=1.0, help="bexdb stream --trigger (1)")
    parser.add_argument("--jobs", type=positive, default=2, help="bexdb match --jobs baseline (2)")
    parser.add_argument("--timeout", type=float, default=900.0, help="for any commit (900 s)")
    parser.add_argument("--out", default="bench-results/stream", help="results directory")


def main(args: argparse.Namespace) -> int:
    """Run it; the table on stdout, ``results.json`` in ``--out``."""
    with tempfile.TemporaryDirectory(prefix="bexdb-bench-stream-") as tmp:
        _log(f"bexdb match --jobs {args.jobs}")
        match, answers = match_baseline(args, Path(tmp))
        row = run_stream(args, Path(tmp), answers)
    ratio = row["sustained_events_per_s"] / match["events_per_s"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "bexdb bench stream",
        "machine": machine(),
        "store": args.store,
        "stream": row,
        "bexdb_match": match,
        "sustained_over_match": round(ratio, 3),
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    lat = row["latency_s"]
    print(
        markdown_table(
            ["", "events/s", "p50 latency s", "p99 latency s"],
            [
                [f"bexdb match --jobs {args.jobs}", f"{match['events_per_s']:,.0f}", "", ""],
                [
                    f"bexdb stream, backlog ({ratio:.0%} of match)",
                    f"{row['sustained_events_per_s']:,.0f}",
                    "",
                    "",
                ],
                [
                    f"bexdb stream, paced at {args.load:g}x",
                    f"{row['paced_offered_events_per_s']:,.0f}",
                    f"{lat['p50']:.2f}",
                    f"{lat['p99']:.2f}",
                ],
            ],
        )
    )
    return 0


if __name__ == "__main__":
    from tools.bench.harness import script

    script("bexdb bench stream", __doc__, add_arguments, main)
