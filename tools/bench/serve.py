"""``bexdb bench serve``: the matcher service under load, beside the single-process matcher.

What it does, on one BEGen workload (``--subs`` subscriptions, bulk-loaded with the python
engine into a store in ``--out``/store, reused when it is there; ``--events`` events):

* **in-process**: ``Index.match`` on every event in this process, a first pass to warm the
  cache, then a timed pass: the ceiling one Python process reaches without HTTP.
* **serve, for each ``--workers`` count**: ``bexdb serve`` started as a child; a load
  generator in its own process (one asyncio loop, a ``SCHED_BATCH`` task unless
  ``--client-sched normal``: see :func:`drive`) sends ``--requests`` ``POST /match``
  requests (one event each, cycling through the events) over ``--concurrency`` kept-alive
  connections on loopback, each sending its next request when the last is answered.  It
  records every request's latency and any error (a non-200 answer, a failed connection,
  no answer within 60 s), and the wall time.  Before that, every event goes once through
  every worker (see :func:`warm`), and those answers are checked against the in-process
  matches, worker by worker and event for event.
* **CPU**: the CPU seconds (``/proc/PID/stat``) the workers, the gunicorn master and the
  client use during the timed run, per request; what the rest of the machine used meanwhile
  (``others'``: large means someone else shared the cores and the figures are noisy); and
  requests answered per second of server CPU, the throughput with a core per worker.
* **memory**: each worker's RSS after the warm-up and at the end (bounded: the page cache
  is capped, nothing grows per request).

The client runs on the same 2 cores as the workers, so two workers share the cores with
it: with ``S`` ms of server CPU and ``C`` of client CPU per request, two workers reach at
most ``2S / (S + C)`` times one worker's throughput (one worker has a core to itself); the
run prints that bound beside the measured ratio.  On this machine ``S`` is about 1.8 ms at
100,000 subscriptions (1.25 of it the match) and ``C`` about 0.1 ms on a kept-alive
connection (0.3 ms with the ``http.client`` threads opening one per request that this
replaced, as the ``sync`` workers the service used then closed every connection), so the
bound is about 1.9x.  ``S`` also grows by 5-10% when both cores are busy (the two workers'
caches compete), which the bound, taken per row, includes.

Output: a markdown table, ``results.json`` and ``serve.png`` in ``--out``.

    bexdb bench serve --subs 100000 --requests 20000 --concurrency 32 --workers 1,2
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from tools.args import positive
from tools.args import sizes as args_sizes
from tools.bench.harness import (
    TICK,
    figure,
    logger,
    proc_cpu_s,
    proc_status_kb,
    pyplot,
    script,
    stats,
)

_log = logger("bench serve")


def _percentiles(seconds: list[float]) -> dict[str, float]:
    return stats(np.asarray(seconds) * 1000, (50, 95, 99))


# -- the load generator (its own process) -----------------------------------------------------


def warm(url: str, bodies: list[bytes], workers: int) -> dict[int, list[Any]]:
    """Every event once through every worker; the answers (sorted ids) by worker pid.

    Requests on one kept-alive connection all go to the worker that accepted it, so one
    connection is found per worker (``GET /healthz`` names its pid) and each event is sent
    on all of them in turn: every worker's page cache is warm before the timed run, as
    the in-process matcher's is.  Without this, a worker would meet the events the other
    one was sent in the warm-up for the first time in the timed run.
    """
    where = urlsplit(url)
    conns: dict[int, http.client.HTTPConnection] = {}
    try:
        for _ in range(50 * workers):  # which worker accepts a connection is up to them
            if len(conns) == workers:
                break
            conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=60)
            conn.request("GET", "/healthz")
            pid = json.loads(conn.getresponse().read())["pid"]
            if pid in conns:
                conn.close()
            else:
                conns[pid] = conn
        answers: dict[int, list[Any]] = {pid: [] for pid in conns}
        for body in bodies:
            for pid, conn in conns.items():
                conn.request("POST", "/match", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                ok = resp.status == 200
                answers[pid].append(sorted(map(str, json.loads(data)["matches"])) if ok else None)
    finally:
        for conn in conns.values():
            conn.close()
    return answers


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection of the load generator: a request at a time, kept alive.

    It parses just what it needs (the status, ``Content-Length``, ``Connection: close``)
    and leaves the body unread: cheap, so the client takes little CPU from the workers.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bool]] | None = None
        self.buffer = bytearray()
        self.body_at = -1  # where the body starts, once the head is in
        self.length = 0
        self.status = 0
        self.close = False
        self.sent_at = 0.0
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, data: bytes, waiter: asyncio.Future[tuple[int, bool]]) -> None:
        assert self.transport is not None
        self.waiter, self.body_at = waiter, -1
        self.buffer.clear()
        self.sent_at = time.monotonic()
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if self.body_at < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end]).lower()
            self.status = int(head[9:12])
            at = head.find(b"\r\ncontent-length:")
            if at < 0:
                self.fail(ConnectionError(f"no Content-Length in {head[:200]!r}"))
                return
            line_end = head.find(b"\r\n", at + 2)
            self.length = int(head[at + 17 : line_end if line_end > 0 else len(head)])
            self.close = b"\r\nconnection: close" in head
            self.body_at = end + 4
        if len(buffer) >= self.body_at + self.length and self.waiter is not None:
            waiter, self.waiter = self.waiter, None
            if not waiter.done():
                waiter.set_result((self.status, self.close))

    def body(self) -> bytes:
        return bytes(self.buffer[self.body_at : self.body_at + self.length])

    def fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.fail(exc or ConnectionError("the server closed the connection"))


async def _drive(
    url: str, bodies: list[bytes], requests: int, concurrency: int, timeout: float
) -> dict[str, Any]:
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    wire = [
        b"POST /match HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (where.netloc.encode(), len(body), body)
        for body in bodies
    ]
    loop = asyncio.get_running_loop()
    counter = iter(range(requests))
    latencies: list[float] = []
    errors: list[str] = []
    open_: set[_Connection] = set()
    clock = time.perf_counter

    async def client() -> None:
        conn: _Connection | None = None
        for i in counter:
            start = clock()
            try:
                if conn is None or conn.lost:
                    _, conn = await loop.create_connection(_Connection, host, port)
                    open_.add(conn)
                waiter: asyncio.Future[tuple[int, bool]] = loop.create_future()
                conn.send(wire[i % len(wire)], waiter)
                status, close = await waiter
                if status != 200:
                    raise RuntimeError(f"HTTP {status}: {conn.body()[:200]!r}")
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                if conn is not None:
                    conn.fail(exc)
                conn = None
                continue
            latencies.append(clock() - start)
            if close:  # the server will not take another request on it
                conn.fail(ConnectionError("closed"))
                conn = None
        if conn is not None and conn.transport is not None:
            conn.transport.close()

    async def watchdog() -> None:  # one timer for every connection, not one per request
        while True:
            await asyncio.sleep(1)
            now = time.monotonic()
            for conn in list(open_):
                if conn.lost:
                    open_.discard(conn)
                elif conn.waiter is not None and now - conn.sent_at > timeout:
                    conn.fail(TimeoutError(f"no answer in {timeout:.0f} s"))

    guard = asyncio.ensure_future(watchdog())
    began = clock()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = clock() - began
    guard.cancel()
    return {"latencies": latencies, "errors": errors, "wall_s": wall}


def drive(
    url: str,
    bodies: list[bytes],
    requests: int,
    concurrency: int,
    timeout: float = 60,
    sched_batch: bool = True,
) -> dict[str, Any]:
    """Send ``requests`` requests over ``concurrency`` connections; latencies, errors, CPU.

    One asyncio loop in one thread: each connection sends its next request as soon as the
    previous one is answered, and is kept alive unless the server says ``Connection: close``
    (then the next request opens a new one).  A request counts as an error if it is not
    answered 200 within ``timeout`` seconds or its connection fails.  Cost: about 0.1 ms of
    CPU per request on a kept-alive connection (0.3 ms opening one per request, as the
    ``http.client`` threads this replaced did), measured on the 2-core machine.

    With ``sched_batch`` this process is a ``SCHED_BATCH`` task: Linux does not let it
    preempt a running worker each time an answer wakes it, so it runs when a core is free
    or its turn comes, and then reads many answers at once.  It still gets its fair share
    of the cores, and its CPU is counted.  With both cores busy (two workers) a normal
    client preempted a worker about once per request, and each worker then spent more CPU
    per request than with a core to itself.
    """
    if sched_batch and hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    cpu = _own_cpu_s()
    load = asyncio.run(_drive(url, bodies, requests, concurrency, timeout))
    load["cpu_s"] = _own_cpu_s() - cpu
    return load


def _own_cpu_s() -> float:
    """CPU seconds (user + system) this process has used, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_s(pid: int) -> float:
    """CPU seconds (utime + stime, ``/proc/PID/stat``) process ``pid`` has used."""
    return proc_cpu_s(pid) or 0.0


def _busy_s() -> float:
    """CPU seconds every core of the machine has been busy (``/proc/stat``), for others' load."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK  # all but idle and iowait (and guest)


def _rss_mb(pid: int) -> float:
    return proc_status_kb(pid).get("VmRSS", float("nan")) / 1024


def _workers(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


# -- the runs ---------------------------------------------------------------------------------


def build_store(out: Path, subs: int, events: int, seed: int) -> tuple[Path, list[dict[str, Any]]]:
    """The BEGen workload and its bulk-loaded store in ``out`` (reused if already there)."""
    from loaders import python_load
    from loaders.records import read_jsonl
    from tools.bench import gen

    data, store = out / "workload", out / "store"
    stamp = out / "workload.json"
    wanted = {"subs": subs, "events": events, "seed": seed}
    if not stamp.exists() or json.loads(stamp.read_text()) != wanted or not store.exists():
        _log(f"generating {subs:,} BEGen subscriptions and bulk-loading them")
        gen.generate(data, subs=subs, events=events, seed=seed, check=False)
        schema = json.loads((data / "schema.json").read_text())
        records = read_jsonl(data / "subs.jsonl")
        python_load.load(store, records, schema, replace=True, progress=sys.stderr)
        stamp.write_text(json.dumps(wanted))
    lines = (data / "events.jsonl").read_text().splitlines()
    return store, [json.loads(line) for line in lines]


def in_process(store: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    from betree.index import Index

    with Index.open(store, readonly=True) as idx:
        answers = [sorted(map(str, idx.match(e))) for e in events]  # warm-up pass
        seconds = []
        cpu = _own_cpu_s()
        began = time.perf_counter()
        for e in events:
            start = time.perf_counter()
            idx.match(e)
            seconds.append(time.perf_counter() - start)
        wall = time.perf_counter() - began
        cpu = _own_cpu_s() - cpu
    return {
        "mode": "in-process",
        "workers": 1,
        "requests": len(events),
        "errors": 0,
        "per_s": len(events) / wall,
        "wall_s": wall,
        "latency_ms": _percentiles(seconds),
        "cpu": {"server_ms": cpu * 1000 / len(events), "per_server_cpu_s": len(events) / cpu},
        "answers": answers,
    }


def served(
    store: Path, events: list[dict[str, Any]], workers: int, args: argparse.Namespace
) -> dict[str, Any]:
    from tools.serve import spawn

    bodies = [json.dumps(e).encode() for e in events]
    proc, url = spawn(store, "--workers", str(workers), "--cache-mb", str(args.cache_mb))
    try:
        answers = warm(url, bodies, workers)
        if len(answers) < workers:
            _log(f"warning: only {len(answers)} of {workers} workers took a warm-up connection")
        pids = _workers(proc.pid)
        rss_warm = {pid: _rss_mb(pid) for pid in pids}
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            pool.apply(_own_cpu_s)  # the client process started and this module imported
            before = {pid: _cpu_s(pid) for pid in [proc.pid, *pids]}, _busy_s()
            batch = args.client_sched == "batch"
            load = pool.apply(drive, (url, bodies, args.requests, args.concurrency, 60, batch))
            after = {pid: _cpu_s(pid) for pid in [proc.pid, *pids]}, _busy_s()
        rss_end = {pid: _rss_mb(pid) for pid in _workers(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(60)
    answered = len(load["latencies"])
    cpu = _cpu_figures(proc.pid, pids, before, after, load, max(answered, 1))
    _log(
        f"{workers} workers: {answered:,} answered, {len(load['errors'])} errors,"
        f" {answered / load['wall_s']:,.0f} requests/s; CPU ms per request: server"
        f" {cpu['server_ms']:.2f}, client {cpu['client_ms']:.2f}, others {cpu['other_ms']:.2f}"
    )
    return {
        "mode": "serve",
        "workers": workers,
        "requests": args.requests,
        "concurrency": args.concurrency,
        "errors": len(load["errors"]),
        "error_samples": load["errors"][:5],
        "per_s": answered / load["wall_s"],
        "wall_s": load["wall_s"],
        "latency_ms": _percentiles(load["latencies"] or [float("nan")]),
        "cpu": cpu,
        "worker_rss_mb_warm": sorted(rss_warm.values()),
        "worker_rss_mb_end": sorted(rss_end.values()),
        "workers_replaced": sorted(rss_warm) != sorted(rss_end),
        "workers_warmed": len(answers),
        "answers": list(answers.values()),
    }


def _cpu_figures(
    master: int,
    workers: list[int],
    before: tuple[dict[int, float], float],
    after: tuple[dict[int, float], float],
    load: dict[str, Any],
    answered: int,
) -> dict[str, Any]:
    """CPU used during the timed run, per request: the service's, the client's, the rest.

    ``other_ms`` is what the machine was busy with besides the service and the client
    (anyone else's work, and the kernel's outside them): large means a noisy measurement.
    ``per_server_cpu_s`` is what the workers answer per second of their own CPU, the
    throughput they would reach with a core each and nothing else running.
    """
    worker_s = {pid: after[0][pid] - before[0][pid] for pid in workers}
    master_s = after[0][master] - before[0][master]
    server_s = sum(worker_s.values()) + master_s
    busy_s = after[1] - before[1]
    wall = load["wall_s"]
    return {
        "server_ms": server_s * 1000 / answered,
        "worker_ms": sum(worker_s.values()) * 1000 / answered,
        "master_ms": master_s * 1000 / answered,
        "client_ms": load["cpu_s"] * 1000 / answered,
        "other_ms": max(busy_s - server_s - load["cpu_s"], 0.0) * 1000 / answered,
        "worker_busy": [round(s / wall, 3) for s in worker_s.values()],
        "machine_busy": busy_s / wall / (os.cpu_count() or 1),
        "per_server_cpu_s": answered / server_s if server_s else float("nan"),
    }


def _ceiling(workers: int, cpu: dict[str, Any]) -> float:
    """Requests per second the cores allow: each worker uses at most one core, and the
    workers and the client together at most all of them (nothing else running)."""
    server, client = cpu["server_ms"] / 1000, cpu["client_ms"] / 1000
    return min(workers / server, (os.cpu_count() or 1) / (server + client))


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| mode | workers | requests | errors | per s | mean ms | p50 | p95 | p99 "
        "| server CPU ms/req | client CPU ms/req | others' CPU ms/req | per server CPU s "
        "| RSS MB/worker |"
    )
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        lat, cpu = r["latency_ms"], r["cpu"]
        rss = r.get("worker_rss_mb_end")
        client = f"{cpu['client_ms']:.2f}" if "client_ms" in cpu else "-"
        other = f"{cpu['other_ms']:.2f}" if "other_ms" in cpu else "-"
        lines.append(
            f"| {r['mode']} | {r['workers']} | {r['requests']:,} | {r['errors']} | "
            f"{r['per_s']:,.0f} | {lat['mean']:.2f} | {lat['p50']:.2f} | {lat['p95']:.2f} | "
            f"{lat['p99']:.2f} | {cpu['server_ms']:.2f} | {client} | {other} | "
            f"{cpu['per_server_cpu_s']:,.0f} | "
            f"{', '.join(f'{m:.0f}' for m in rss) if rss else '-'} |"
        )
    return "\n".join(lines)


def _plot(out: Path, rows: list[dict[str, Any]]) -> None:
    labels = [f"{r['mode']}\n{r['workers']} w" for r in rows]
    with figure(out / "serve.png", 1, 2, figsize=(10, 4)) as (fig, (a, b)):
        a.bar(labels, [r["per_s"] for r in rows])
        a.set_ylabel("events matched per second")
        for key in ("p50", "p95", "p99"):
            b.plot(labels, [r["latency_ms"][key] for r in rows], marker="o", label=key)
        b.set_ylabel("latency, ms")
        b.legend()
        fig.suptitle("bexdb serve under load (POST /match, one event per request)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subs", type=positive, default=100_000, help="BEGen subscriptions (100000)")
    p.add_argument("--events", type=positive, default=1_000, help="distinct events (1000)")
    p.add_argument("--requests", type=positive, default=20_000, help="requests per run (20000)")
    p.add_argument("--concurrency", type=positive, default=32, help="client connections (32)")
    p.add_argument(
        "--client-sched",
        choices=["batch", "normal"],
        default="batch",
        help="the client's scheduling policy: SCHED_BATCH (default) or the usual one",
    )
    p.add_argument("--workers", type=args_sizes, default=[1, 2], help="worker counts (1,2)")
    p.add_argument("--cache-mb", type=positive, default=256, help="page cache per worker")
    p.add_argument("--seed", type=int, default=1, help="workload seed (1)")
    p.add_argument("--out", default="bench-results/serve", help="results directory")


def main(args: argparse.Namespace) -> int:
    pyplot()  # fail now, not after the run, if matplotlib is missing
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store, events = build_store(out, args.subs, args.events, args.seed)
    rows = [in_process(store, events)]
    _log(f"in-process: {rows[0]['per_s']:,.0f} events/s")
    for workers in args.workers:
        rows.append(served(store, events, workers, args))
    agree = all(
        r["answers"] and all(a == rows[0]["answers"] for a in r["answers"]) for r in rows[1:]
    )
    served_rows = {r["workers"]: r for r in rows if r["mode"] == "serve"}
    base = {w: r["per_s"] for w, r in served_rows.items()}
    scaling = {f"{w}_vs_1": base[w] / base[1] for w in base if 1 in base and w != 1}
    ceiling = {w: _ceiling(w, r["cpu"]) for w, r in served_rows.items()}
    allowed = {f"{w}_vs_1": ceiling[w] / ceiling[1] for w in ceiling if 1 in ceiling and w != 1}
    results = {
        "benchmark": "serve",
        "params": {k: v for k, v in vars(args).items() if not callable(v)},
        "answers_agree": agree,
        "scaling": scaling,
        "scaling_the_cores_allow": allowed,
        "rows": [{k: v for k, v in r.items() if k != "answers"} for r in rows],
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(out, rows)
    print(format_table(rows))
    print(f"\nanswers over HTTP equal the in-process matches: {agree}")
    for key, ratio in scaling.items():
        w = int(key.split("_")[0])
        print(
            f"throughput {key.replace('_', ' ')} worker: {ratio:.2f}x (the cores allow"
            f" {allowed[key]:.2f}x at the server and client CPU per request measured;"
            f" others used {served_rows[w]['cpu']['other_ms']:.2f} ms per request meanwhile)"
        )
    return 0 if agree and not any(r["errors"] for r in rows) else 1


if __name__ == "__main__":
    script("bexdb bench serve", __doc__, add_arguments, main)
