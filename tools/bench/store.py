"""``bexdb bench store STORE EVENTS``: matching on a store that already exists (a 10M
sharded store takes minutes to load, so it is built once by ``bexdb load`` and measured
here as often as needed).

In this process, the store opened read-only as users open it (plain or sharded:
:func:`betree.stores.sharded.open_index`, page cache ``--cache-mb``):

* **first pass**: each event matched alone, timed, in a process that has read nothing
  of the store yet (the OS page cache is whatever it is: say so when reporting);
* **warm pass**: the same events again, each timed (mean, p50, p99);
* **batched**: ``match_many`` over batches of ``--batch`` events, events per second, and
  every event's answer checked against the warm pass's;
* **memory**: the process's private memory (``RssAnon``: decoded pages, Python objects;
  LMDB's mapped pages are shared and not counted) and its peak RSS, after the passes (the
  answers are kept only as digests, so the figure is the matcher's).

Then, for each ``--jobs`` value, ``bexdb match STORE EVENTS --jobs N`` end to end in its
own process (start, reading, matching, writing the JSON to a file), events per second,
and every run's output checked byte-identical to the first's (by SHA-256).  Dirty pages
are synced before each run, so that one run's output is not written back during the next.

Output: a table on stdout and ``results.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Any

from betree.formats.jsonl import input_lines, loads_line
from betree.stores.sharded import open_index
from tools.args import positive, sizes
from tools.bench.harness import logger, machine, markdown_table, proc_status_kb, stats

_log = logger("bench store")


def _events(path: Path, limit: int) -> list[Any]:
    with open(path, "rb") as fh:
        return [loads_line(line) for line in islice(input_lines(fh), limit)]


def _digest(ids: Any) -> tuple[int, int]:
    """An event's answer as (count, hash of the set): results are not kept, so that the
    memory measured is the matcher's, not the benchmark's (at 10M an event matches 100K)."""
    return len(ids), hash(frozenset(ids))


def _timed_pass(store: Any, events: list[Any]) -> tuple[list[tuple[int, int]], list[float]]:
    found, ms = [], []
    for event in events:
        t = time.perf_counter()
        ids = store.match(event)
        ms.append((time.perf_counter() - t) * 1e3)
        found.append(_digest(ids))
    return found, ms


def in_process(args: argparse.Namespace) -> dict[str, Any]:
    """First pass, warm pass, batches and memory in this process."""
    events = _events(Path(args.events), args.count)
    opened = time.perf_counter()
    with open_index(args.store, cache_bytes=args.cache_mb << 20) as store:
        open_s = time.perf_counter() - opened
        _log(f"opened in {open_s:.2f} s; first pass over {len(events):,} events")
        _, first = _timed_pass(store, events)
        _log("warm pass")
        found, warm = _timed_pass(store, events)
        _log(f"batches of {args.batch:,}")
        batched: list[tuple[int, int]] = []
        batch_s = 0.0
        for at in range(0, len(events), args.batch):
            t = time.perf_counter()
            answers = store.match_many(events[at : at + args.batch])
            batch_s += time.perf_counter() - t
            batched.extend(map(_digest, answers))
            del answers
        status = proc_status_kb()
    agree = sum(a == b for a, b in zip(found, batched, strict=True))
    if agree != len(events):
        raise SystemExit(f"bench store: batched answers differ on {len(events) - agree} events")
    return {
        "events": len(events),
        "open_s": round(open_s, 3),
        "first_ms": stats(first),
        "warm_ms": stats(warm),
        "batched_events_per_s": round(len(events) / batch_s, 1),
        "matches_per_event": round(sum(n for n, _ in found) / max(1, len(found)), 1),
        "cache_mb": args.cache_mb,
        "private_mb": round(status.get("RssAnon", 0) / 1024, 1),
        "peak_rss_mb": round(status.get("VmHWM", 0) / 1024, 1),
    }


def _file_digest(path: Path) -> tuple[str, int]:
    """The SHA-256 of a file and its lines, read in blocks (outputs run to gigabytes)."""
    digest, lines = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            digest.update(block)
            lines += block.count(b"\n")
    return digest.hexdigest(), lines


def end_to_end(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``bexdb match --jobs N`` per ``--jobs`` value, outputs compared byte for byte."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bexdb-bench-store-") as tmp:
        first: str | None = None
        for jobs in args.jobs:
            out = Path(tmp) / f"out-{jobs}.jsonl"
            argv = [sys.executable, "-m", "tools.cli", "match", args.store, args.events]
            _log(f"bexdb match --jobs {jobs}")
            # the last run's output (660 MB for 8,000 events at 1M) written back to disk
            # before this one starts, not during it
            os.sync()
            t = time.perf_counter()
            with open(out, "wb") as fh:
                cache = ["--cache-mb", str(args.cache_mb)]
                subprocess.run([*argv, "--jobs", str(jobs), *cache], stdout=fh, check=False)
            seconds = time.perf_counter() - t
            digest, lines = _file_digest(out)
            out.unlink()
            first = digest if first is None else first
            rows.append(
                {
                    "jobs": jobs,
                    "events": lines,
                    "seconds": round(seconds, 2),
                    "events_per_s": round(lines / seconds, 1),
                    "identical": digest == first,
                }
            )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help="a store (plain or sharded)")
    parser.add_argument("events", help="events, JSON Lines")
    parser.add_argument("--count", type=positive, default=1000, help="events timed (1000)")
    parser.add_argument("--batch", type=positive, default=1024, help="match_many batch (1024)")
    parser.add_argument(
        "--cache-mb", type=positive, default=256, help="page cache of each matching process (256)"
    )
    parser.add_argument(
        "--jobs", type=sizes, default=[1, 2], help="bexdb match --jobs values, all events (1,2)"
    )
    parser.add_argument("--out", default="bench-results/store", help="results directory")


def main(args: argparse.Namespace) -> int:
    """Run it; the table on stdout, ``results.json`` in ``--out``."""
    row = in_process(args)
    runs = end_to_end(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "bexdb bench store",
        "machine": machine(),
        "store": args.store,
        "in_process": row,
        "bexdb_match": runs,
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(
        markdown_table(
            [
                "events",
                "first ms mean / p50",
                "warm ms mean / p50 / p99",
                "batched ev/s",
                "matches/event",
                "private MB",
                "peak RSS MB",
            ],
            [
                [
                    f"{row['events']:,}",
                    f"{row['first_ms']['mean']:.2f} / {row['first_ms']['p50']:.2f}",
                    f"{row['warm_ms']['mean']:.2f} / {row['warm_ms']['p50']:.2f} / "
                    f"{row['warm_ms']['p99']:.2f}",
                    f"{row['batched_events_per_s']:,.0f}",
                    f"{row['matches_per_event']:,.0f}",
                    f"{row['private_mb']:,.0f}",
                    f"{row['peak_rss_mb']:,.0f}",
                ]
            ],
        )
    )
    print()
    print(
        markdown_table(
            ["bexdb match --jobs", "events", "seconds", "events/s", "output identical"],
            [
                [
                    str(r["jobs"]),
                    f"{r['events']:,}",
                    f"{r['seconds']:.1f}",
                    f"{r['events_per_s']:,.0f}",
                    "yes" if r["identical"] else "NO",
                ]
                for r in runs
            ],
        )
    )
    return 0 if all(r["identical"] for r in runs) else 1


if __name__ == "__main__":
    from tools.bench.harness import script

    script("bexdb bench store", __doc__, add_arguments, main)
