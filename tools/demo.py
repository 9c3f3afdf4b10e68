"""``bexdb demo``: the main job end to end on the embedded default.

Generates a BEGen workload, bulk-loads it with local Spark (``--engine python``: in this
process) into a store in a directory (``--shards K``: a sharded store), matches every
event, verifies the store, and prints a summary — the README's first command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from betree.stores.sharded import open_index, verify
from tools.bench import gen


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tools.args import positive

    p.add_argument("--dir", default="work/demo", help="where the workload and store go")
    p.add_argument("--subs", type=positive, default=20000, help="BEGen subscriptions (20000)")
    p.add_argument("--events", type=positive, default=1000, help="events (1000)")
    p.add_argument(
        "--engine", choices=("spark", "python"), default="spark", help="the bulk load's engine"
    )
    p.add_argument("--shards", type=positive, help="build a sharded store (spark only)")


def _load(args: argparse.Namespace, data: Path, store: Path) -> dict[str, object]:
    schema = json.loads((data / "schema.json").read_text())
    if args.engine == "python":
        from loaders import python_load
        from loaders.records import read_jsonl

        records = read_jsonl(data / "subs.jsonl")
        return python_load.load(store, records, schema, replace=True, progress=sys.stderr)
    from loaders.spark.driver import load as spark_load

    inputs = [str(data / "subs.jsonl")]
    return spark_load(store, inputs, schema, shards=args.shards, replace=True, progress=sys.stderr)


def main(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    data = root / "workload"
    store = root / "store"
    t0 = time.monotonic()
    summary = gen.generate(str(data), subs=args.subs, events=args.events, seed=1)
    print(f"generated {args.subs} subscriptions and {args.events} events in {data}")
    loaded = _load(args, data, store)
    print(f"loaded {loaded['loaded']} subscriptions ({args.engine}) in {loaded['seconds']} s")
    events = [json.loads(line) for line in (data / "events.jsonl").read_text().splitlines()]
    times, matched = [], 0
    with open_index(store) as reader:
        for event in events:
            start = time.perf_counter()
            matched += len(reader.match(event))
            times.append(time.perf_counter() - start)
        subs = len(reader)
    checked = verify(store)
    size = sum(f.stat().st_size for f in store.rglob("*.mdb"))
    times.sort()
    print(
        json.dumps(
            {
                "engine": args.engine,
                "shards": checked["shards"],
                "subscriptions": subs,
                "events": len(events),
                "matches_per_event": round(matched / max(len(events), 1), 2),
                "mean_match_ms": round(1000 * statistics.fmean(times), 3),
                "p99_match_ms": round(1000 * times[int(0.99 * (len(times) - 1))], 3),
                "store_bytes_per_subscription": round(size / max(subs, 1), 1),
                "verify": "ok",
                "generator_match_rate": summary.get("brute_rate"),
                "seconds": round(time.monotonic() - t0, 1),
                "store": os.fspath(store),
            },
            indent=2,
        )
    )
    return 0
