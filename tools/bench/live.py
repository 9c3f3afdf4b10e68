"""``bexdb bench live``: matching while subscriptions change (issue 27).

On one BEGen store of ``--subs`` subscriptions (bulk-built once in ``--out``/store; every
run below works on a fresh copy of it, ``--shards`` > 1: one store a shard, as the Spark
load writes them), the same events throughout:

* **frozen**: ``match`` of ``--events`` events after a warm-up that builds the packed view:
  the p50 the targets are ratios of (measured in every run, beside the writes).
* **paced** (before each 1 write : R run's writes): 200 matches each after ``--pause``
  seconds idle (default 10 ms, about a durable write's latency): on a shared machine an
  idle process's CPU caches go to the others, and a match after any pause is slower; this
  p50 tells that from the work a write leaves for the next match ("x paced").
* **1 write : R matches** for each ``--ratios`` R: ``subscribe`` of one subscription (7 in
  10 new, 2 replacing an earlier one, 1 in 10 an ``unsubscribe``), then R timed matches,
  ``--writes`` times.  Then **after**: 100 matches once the writes stop.
* **subscribe_many** batches of each ``--batches`` size (new subscriptions), each followed
  by 10 timed matches; subscriptions/s of the batches.
* **serve** (``--serve``, ``--serve-only``): ``bexdb serve --workers 2`` on its own copy,
  warmed by ``--serve-warmup`` matches (its workers take ~1,000 to match on views, the
  same before this work); a client thread
  matching (``POST /match``, one event a request, kept-alive) and one writer thread
  sending ``PUT /subscriptions/ID`` at each ``--serve-rates`` rate (writes/s) for
  ``--serve-seconds``; frozen first, with no writer.

``--store S --workload W`` instead works on an existing store, such as a 10M one that
``bexdb load`` built with Spark from ``bexdb gen W`` (this module's own build is one process),
in place and uncopied: the writes stay in it.  The events are W's; the writes' expressions
are W's first subscriptions under new ids (:data:`SPARE_IDS` + the store's size + i).

Reported: match p50/p99 (ms), write p50/p99 (ms), writes/s (writes over the seconds spent
writing; for batches also per CPU-second of this process, which the machine's load
does not stretch), and the ratios to the frozen p50 of the same run.  In process, each
match is also timed on its thread's CPU clock (``*_cpu_ms``, :class:`tools.bench.harness.Laps`),
with the ratio to the frozen CPU p50: the machine's load does not stretch it, nor does a
background fold holding the GIL (that work is another thread's; see ``process_cpu_s``).
The serve rows have no CPU figures: their matching runs in the server's processes.  The
answers are not checked here (tests/betree/test_live.py checks them against the brute force
under interleavings).  The writes are durable commits (LMDB fsync): their latency is mostly
the disk's.

    bexdb bench live --subs 100000 --out docs/bench/live
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tools.args import positive, sizes
from tools.bench.harness import Laps, logger, machine, markdown_table, stats

_log = logger("bench live")


def build(
    out: Path, subs: int, shards: int, spare: int, events: int, profile: str = "begen"
) -> dict[str, Any]:
    """The store (reused when its stamp matches), the spare subscriptions the writes use
    and the events."""
    from betree.disk.bulk import build_index
    from betree.index import Index
    from betree.stores.sharded import HASH, shard_name, shard_of, write_manifest
    from storage.codec import encode_id
    from tools.bench.gen import make_workload

    stamp = out / "workload.json"
    wanted: dict[str, Any] = {"subs": subs, "shards": shards, "spare": spare, "events": events}
    if profile != "begen":  # (a BEGen store's stamp stays as it was)
        wanted["profile"] = profile
    work = out / "workload-data.json"
    if stamp.exists() and json.loads(stamp.read_text()) == wanted and work.exists():
        return dict(json.loads(work.read_text()))
    _log(f"generating {subs:,} {profile} subscriptions and building the store")
    w = make_workload(subs=subs + spare, events=events, check=False, profile=profile)
    store = out / "store"
    shutil.rmtree(store, ignore_errors=True)
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, expr in w.subs[:subs]:
        parts[shard_of(encode_id(ident), shards) if shards > 1 else 0].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(store / shard_name(k) if shards > 1 else store, schema=w.schema) as idx:
            build_index(idx, [(i, e, idx.engine.compiler().compile(i, e)) for i, e in part])
    if shards > 1:
        entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
        write_manifest(store, entries, {"by": "id", "hash": HASH, "shards": shards})
    data = {"spare": w.subs[subs:], "events": w.events, "schema": w.schema}
    work.write_text(json.dumps(data))
    stamp.write_text(json.dumps(wanted))
    return data


#: where the ids of the writes into an existing store (``--store``) begin
SPARE_IDS = 1 << 40


def existing(store: Path, workload: Path, spare: int, events: int) -> dict[str, Any]:
    """:func:`build`'s data for a store built elsewhere from the ``bexdb gen`` directory
    ``workload``: its events, and its first ``spare`` expressions under new ids."""
    from betree.stores.sharded import open_index

    with open_index(store) as idx:
        first = SPARE_IDS + len(idx)
    exprs: list[str] = []
    with (workload / "subs.jsonl").open() as f:
        for line in f:
            if len(exprs) == spare:
                break
            exprs.append(json.loads(line)["expr"])
    with (workload / "events.jsonl").open() as f:
        evs = [json.loads(line) for _, line in zip(range(events), f, strict=False)]
    spare_subs = [(first + i, expr) for i, expr in enumerate(exprs)]
    return {"spare": spare_subs[::-1], "events": evs, "store": str(store)}


def _ms(seconds: list[float]) -> dict[str, float]:
    return stats([s * 1000 for s in seconds])


def _both(laps: Laps, key: str) -> dict[str, dict[str, float]]:
    """``KEY_ms`` and ``KEY_cpu_ms``: the figures of the wall and of the thread's CPU times."""
    return {f"{key}_ms": stats(laps.wall_ms), f"{key}_cpu_ms": stats(laps.cpu_ms)}


class Run:
    """One fresh copy of the store (or an existing store itself: ``data["store"]``),
    opened writable, and the clock."""

    def __init__(self, out: Path, name: str, data: dict[str, Any]) -> None:
        from betree.stores.sharded import open_index

        self.copied = "store" not in data
        self.path = out / f"run-{name}" if self.copied else Path(data["store"])
        if self.copied:
            shutil.rmtree(self.path, ignore_errors=True)
            shutil.copytree(out / "store", self.path)
        self.store = open_index(self.path, readonly=False)
        self.events = data["events"]
        self.spare = [tuple(x) for x in data["spare"]]
        self.at = 0  # next event
        self.used: list[Any] = []  # ids written so far

    def match(self, n: int, laps: Laps | None = None) -> Laps:
        """``n`` matches, each timed into ``laps`` (a new one if None)."""
        laps = Laps() if laps is None else laps
        for _ in range(n):
            ev = self.events[self.at % len(self.events)]
            self.at += 1
            with laps:
                self.store.match(ev)
        return laps

    def write(self, k: int) -> float:
        """The k-th write: new, a replacement or an unsubscribe (see the module docstring)."""
        t = time.perf_counter()
        if k % 10 == 9 and self.used:
            self.store.unsubscribe(self.used.pop(0))
        elif k % 10 in (3, 6) and self.used:
            ident = self.used[k % len(self.used)]
            self.store.subscribe(ident, self.spare[k % len(self.spare)][1])
        else:
            ident, expr = self.spare.pop()
            self.store.subscribe(ident, expr)
            self.used.append(ident)
        return time.perf_counter() - t

    def close(self) -> None:
        self.store.close()
        if self.copied:
            shutil.rmtree(self.path, ignore_errors=True)


def frozen(run: Run, n: int) -> dict[str, dict[str, float]]:
    run.match(200)  # builds the views (betree.packed.flat: after 64 walked events)
    return _both(run.match(n), "frozen")


def paced(run: Run, n: int, pause: float) -> dict[str, dict[str, float]]:
    """The frozen p50 of matches each after ``pause`` seconds idle, as a match after a
    write is (on a shared machine an idle process's caches go to the others: this
    separates that from the work a write leaves for the match)."""
    out = Laps()
    for _ in range(n):
        time.sleep(pause)
        run.match(1, out)
    return _both(out, "paced")


def interleaved(
    out: Path, data: dict[str, Any], ratio: int, writes: int, n: int, pause: float
) -> dict[str, Any]:
    run = Run(out, f"1-{ratio}", data)
    try:
        base = frozen(run, n)
        idle = paced(run, min(n, 200), pause)
        matches = Laps()
        wrote: list[float] = []
        cpu = time.process_time()
        for k in range(writes):
            wrote.append(run.write(k))
            run.match(ratio, matches)
        cpu = time.process_time() - cpu
        after = run.match(100)
        return {
            "mode": f"1 write : {ratio}",
            **base,
            **idle,
            "process_cpu_s": cpu,
            **_both(matches, "match"),
            "write_ms": _ms(wrote),
            "writes_per_s": len(wrote) / sum(wrote),
            **_both(after, "after"),
        }
    finally:
        run.close()


def batches(out: Path, data: dict[str, Any], size: int, count: int, n: int) -> dict[str, Any]:
    run = Run(out, f"batch-{size}", data)
    try:
        base = frozen(run, n)
        matches = Laps()
        wrote: list[float] = []
        cpu: list[float] = []
        for _ in range(count):
            batch = [run.spare.pop() for _ in range(size)]
            t, c = time.perf_counter(), time.process_time()
            run.store.subscribe_many(batch)
            wrote.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            run.match(10, matches)
        after = run.match(100)
        return {
            "mode": f"subscribe_many {size}",
            **base,
            **_both(matches, "match"),
            "write_ms": _ms(wrote),
            "writes_per_s": size * len(wrote) / sum(wrote),
            "writes_per_cpu_s": size * len(cpu) / sum(cpu),
            **_both(after, "after"),
        }
    finally:
        run.close()


def _post(conn: http.client.HTTPConnection, method: str, path: str, body: Any) -> float:
    t = time.perf_counter()
    conn.request(method, path, json.dumps(body), {"Content-Type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    if answer.status >= 300:
        raise RuntimeError(f"{method} {path}: {answer.status}")
    return time.perf_counter() - t


def served(
    out: Path,
    data: dict[str, Any],
    rates: list[int],
    seconds: float,
    warmup: int,
    cache_mb: int | None = None,
) -> list[Any]:
    """``bexdb serve --workers 2`` (``--cache-mb cache_mb``, if given): a matching client,
    and a writer at each rate."""
    from tools.serve import spawn

    run = Run(out, "serve", data)
    run.store.close()
    options = ["--workers", "2"] + ([] if cache_mb is None else ["--cache-mb", str(cache_mb)])
    proc, url = spawn(run.path, *options)
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    rows: list[dict[str, Any]] = []
    try:
        conn = http.client.HTTPConnection(host, parts.port, timeout=60)
        for k in range(warmup):  # both workers build their views (slower than in-process)
            _post(conn, "POST", "/match", run.events[k % len(run.events)])
        for rate in [0, *rates]:
            stop = threading.Event()
            wrote: list[float] = []

            def writer(
                rate: int = rate, wrote: list[float] = wrote, stop: threading.Event = stop
            ) -> None:
                wconn = http.client.HTTPConnection(host, parts.port, timeout=60)
                while not stop.is_set():
                    began = time.perf_counter()
                    ident, expr = run.spare.pop()
                    wrote.append(_post(wconn, "PUT", f"/subscriptions/{ident}", {"expr": expr}))
                    stop.wait(max(0.0, 1 / rate - (time.perf_counter() - began)))

            thread = threading.Thread(target=writer) if rate else None
            if thread is not None:
                thread.start()
            matches = []
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                ev = run.events[run.at % len(run.events)]
                run.at += 1
                matches.append(_post(conn, "POST", "/match", ev))
            stop.set()
            if thread is not None:
                thread.join()
            rows.append(
                {
                    "mode": f"serve, writer {rate}/s" if rate else "serve, frozen",
                    "match_ms": _ms(matches),
                    "write_ms": _ms(wrote),
                    "writes": len(wrote),
                    "writes_per_s": len(wrote) / seconds,
                }
            )
            _log(f"serve {rate}/s: match p50 {rows[-1]['match_ms']['p50']:.2f} ms")
    finally:
        proc.terminate()
        proc.wait()
        if run.copied:
            shutil.rmtree(run.path, ignore_errors=True)
    frozen_p50 = rows[0]["match_ms"]["p50"]
    for row in rows:
        row["frozen_ms"] = {"p50": frozen_p50}
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--subs", type=positive, default=100_000, help="store size (100000)")
    parser.add_argument(
        "--profile", choices=("begen", "rich"), default="begen", help="workload (bexdb gen)"
    )
    parser.add_argument("--shards", type=positive, default=1, help="shards of the store (1)")
    parser.add_argument("--events", type=positive, default=500, help="frozen events timed (500)")
    parser.add_argument("--writes", type=positive, default=300, help="writes a ratio (300)")
    parser.add_argument("--ratios", type=sizes, default=[1, 10, 100], help="matches a write")
    parser.add_argument("--batches", type=sizes, default=[100, 1000], help="subscribe_many sizes")
    parser.add_argument("--batch-count", type=positive, default=5, help="batches a size (5)")
    parser.add_argument("--serve", action="store_true", help="also through bexdb serve")
    parser.add_argument("--serve-rates", type=sizes, default=[10, 100], help="writes/s")
    parser.add_argument("--serve-seconds", type=float, default=20.0, help="seconds a rate (20)")
    parser.add_argument(
        "--serve-warmup", type=positive, default=1500, help="matches before timing (1500)"
    )
    parser.add_argument("--serve-only", action="store_true", help="only the serve rows")
    parser.add_argument(
        "--serve-cache-mb", type=positive, help="bexdb serve --cache-mb (serve's default)"
    )
    parser.add_argument(
        "--store",
        help="an existing store to work on in place, not copied (the writes stay in it); "
        "with --workload; --subs, --shards and --profile are then unused",
    )
    parser.add_argument("--workload", help="with --store: the bexdb gen directory it came from")
    parser.add_argument(
        "--pause", type=float, default=0.01, help="idle seconds before a paced match (0.01)"
    )
    parser.add_argument("--out", default="bench-results/live", help="results directory")


def main(args: argparse.Namespace) -> int:
    """Run it; the table on stdout, ``results.json`` in ``--out``."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spare = args.writes + sum(args.batches) * args.batch_count + 20_000
    if (args.store is None) != (args.workload is None):
        raise SystemExit("bench live: --store and --workload go together")
    if args.store is not None:
        data = existing(Path(args.store), Path(args.workload), spare, max(args.events, 2000))
    else:
        data = build(out, args.subs, args.shards, spare, max(args.events, 2000), args.profile)
    rows = []
    for ratio in [] if args.serve_only else args.ratios:
        writes = max(20, args.writes // max(1, ratio // 10))  # 1:100 -> a tenth of the writes
        rows.append(interleaved(out, data, ratio, writes, args.events, args.pause))
        _log(f"1:{ratio}: match p50 {rows[-1]['match_ms']['p50']:.3f} ms")
    for size in [] if args.serve_only else args.batches:
        rows.append(batches(out, data, size, args.batch_count, args.events))
        _log(f"batch {size}: {rows[-1]['writes_per_s']:.0f} subscriptions/s")
    if args.serve or args.serve_only:
        rows += served(
            out, data, args.serve_rates, args.serve_seconds, args.serve_warmup, args.serve_cache_mb
        )
    doc = {"benchmark": "bexdb bench live", "machine": machine(), "args": vars(args), "rows": rows}
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    heads = ["run", "frozen p50", "match p50 / p99", "x frozen p50 / p99", "CPU frozen p50"]
    heads += ["CPU match p50 / p99", "CPU x frozen p50", "write p50 / p99"]
    heads += ["writes/s", "writes/CPU-s", "after: p50", "paced p50", "x paced p50"]
    cells = []
    for row in rows:
        f50 = row["frozen_ms"]["p50"]
        m, w = row["match_ms"], row["write_ms"]
        after = row.get("after_ms", {}).get("p50")
        idle = row.get("paced_ms", {}).get("p50")
        per_cpu = row.get("writes_per_cpu_s")
        f_cpu, m_cpu = row.get("frozen_cpu_ms"), row.get("match_cpu_ms")  # (not served)
        cells.append(
            [
                row["mode"],
                f"{f50:.3f}",
                f"{m['p50']:.3f} / {m['p99']:.3f}",
                f"{m['p50'] / f50:.2f} / {m['p99'] / f50:.2f}",
                "-" if f_cpu is None else f"{f_cpu['p50']:.3f}",
                "-" if m_cpu is None else f"{m_cpu['p50']:.3f} / {m_cpu['p99']:.3f}",
                "-" if m_cpu is None or f_cpu is None else f"{m_cpu['p50'] / f_cpu['p50']:.2f}",
                f"{w['p50']:.1f} / {w['p99']:.1f}",
                f"{row['writes_per_s']:,.0f}",
                "-" if per_cpu is None else f"{per_cpu:,.0f}",
                "-" if after is None else f"{after:.3f}",
                "-" if idle is None else f"{idle:.3f}",
                "-" if idle is None else f"{m['p50'] / idle:.2f}",
            ]
        )
    name = f"--subs {args.subs} --shards {args.shards} --profile {args.profile}"
    if args.store is not None:
        name = f"--store {args.store} --workload {args.workload}"
    print(f"`bexdb bench live {name}` (times in ms)\n")
    print(markdown_table(heads, cells))
    return 0


if __name__ == "__main__":
    from tools.bench.harness import script

    script("bexdb bench live", __doc__, add_arguments, main)
