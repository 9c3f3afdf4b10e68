"""``bexdb demo``: the main job end to end on the embedded default.

Generates a BEGen workload, bulk-loads it into a store in a directory, matches the
events, verifies the store, and prints a summary — the README's first command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from betree.index import Index
from loaders import gen, python_load
from loaders.records import read_jsonl


def main(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    data = root / "workload"
    store = root / "store"
    t0 = time.monotonic()
    summary = gen.generate(str(data), subs=args.subs, events=args.events, seed=1)
    print(f"generated {args.subs} subscriptions and {args.events} events in {data}")
    schema = json.loads((data / "schema.json").read_text())
    loaded = python_load.load(
        store, read_jsonl(data / "subs.jsonl"), schema, replace=True, progress=sys.stderr
    )
    print(f"loaded {loaded['loaded']} subscriptions in {loaded['seconds']} s into {store}")
    events = [json.loads(line) for line in (data / "events.jsonl").read_text().splitlines()]
    times, matched = [], 0
    with Index.open(store, readonly=True) as idx:
        for event in events:
            start = time.perf_counter()
            matched += len(idx.match(event))
            times.append(time.perf_counter() - start)
        idx.check()
        size = idx.store.size_on_disk()
    times.sort()
    print(
        json.dumps(
            {
                "subscriptions": loaded["loaded"],
                "events": len(events),
                "matches_per_event": round(matched / max(len(events), 1), 2),
                "mean_match_ms": round(1000 * statistics.fmean(times), 3),
                "p99_match_ms": round(1000 * times[int(0.99 * (len(times) - 1))], 3),
                "store_bytes_per_subscription": round(size / max(loaded["loaded"], 1), 1),
                "verify": "ok",
                "generator_match_rate": summary.get("brute_rate"),
                "seconds": round(time.monotonic() - t0, 1),
                "store": os.fspath(store),
            },
            indent=2,
        )
    )
    return 0
