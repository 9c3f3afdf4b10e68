"""``bexdb bench load``: bulk loads of the BEGen workload, Spark beside the python engine.

What it measures, for each workload (``--workloads``: :mod:`tools.bench.gen` profiles,
default ``begen``; ``wide`` repeats few predicates) and each size n (default 100K and 1M
subscriptions; the sizes are prefixes of the largest, so subscription i is the same at every
size):

* each engine variant runs as the user runs it, ``bexdb load STORE subs.jsonl --schema ...``
  in its own process: ``spark`` (one store, local Spark on every core), ``spark x K``
  (``--shards K``), and ``python`` (``--engine python``), up to ``--python-max``
  subscriptions; beside them ``online``: online insertion of the same set
  (``bexdb subscribe STORE subs.jsonl --schema ...``: Alg. 3-6 clause by clause, one
  transaction), up to ``--online-max``.  Beyond its limit an engine's time is
  *extrapolated* linearly from its largest measured size (the cost per subscription of
  both is flat or rising with n, so this is a lower bound) and labelled so everywhere it
  appears.
* **wall** seconds (Spark's start included: it is part of what a user waits for),
  throughput, the published store's size on disk, and memory: peak RSS of the driver
  (the ``bexdb`` process), of the JVM, and of the Python workers together, sampled from
  ``/proc`` every 0.2 s over the whole process tree (``VmHWM`` of the driver and the JVM;
  the workers' sum at the sample where it was highest).  **cpu** seconds: user + system
  time of the whole tree (the last sample of each process), which, unlike wall time, does
  not grow when other work shares the machine.  The load average before each run is
  recorded: this machine is shared, and a busy one stretches wall times.
* the load's own stage figures (``stages``: Spark start, compile stage, build stage; per
  shard: intern, BE-B build, ``check()``, compacting copy).
* **agreement**: the first ``--check-events`` events matched on every variant's store must
  give the same ids as on the python store (or, above ``--python-max``, as on the first
  variant's), else the run stops with an error.

``--match-events N`` also matches the first N BEGen events against the Spark store of each
size, ``bexdb match STORE EVENTS --engine spark --out DIR`` beside the single-process
``bexdb match STORE EVENTS``, each in its own process (wall seconds with Spark's start,
events/s, cpu seconds): a second table, ``match_rows`` in ``results.json``.

``--profile`` also profiles the two Python hot spots in-process on the first 20,000
subscriptions (the executors' compile transform and one shard's build) and writes
``profile.txt``.  Output: a markdown table on stdout, ``results.json`` (written after every
size) and ``load.png`` (drawn at the end: wall seconds vs subscriptions; the stage split of
the largest size) in ``--out``.

    python -m tools.bench.load --sizes 100000,1000000 --out bench-results/load
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from storage.errors import BexdbError
from tools.args import positive
from tools.args import sizes as args_sizes
from tools.bench import gen
from tools.bench.gen_cli import format_summary
from tools.bench.harness import (
    AgreementError,
    Column,
    column_table,
    figure,
    logger,
    machine,
    proc_cpu_s,
    proc_status_kb,
    pyplot,
    script,
)

CHECK_EVENTS = 50
ONLINE = "online"
PROFILE_SUBS = 20_000
_log = logger("bench load")


# -- memory and CPU of a process tree ---------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat")
        if stat:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(name))
    return kids


@dataclass
class TreeSampler:
    """Peaks of a process tree: the root (the driver), the JVM, the Python workers."""

    root: int
    driver_kb: int = 0
    jvm_kb: int = 0
    workers_kb: int = 0
    total_kb: int = 0
    cpu: dict[int, float] = field(default_factory=dict)

    def sample(self) -> None:
        kids = _children()
        todo, tree = [self.root], []
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(kids.get(pid, ()))
        workers = total = 0
        for pid in tree:
            status = proc_status_kb(pid)
            if not status:
                continue
            rss, hwm = status.get("VmRSS", 0), status.get("VmHWM", 0)
            total += rss
            cmd = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
            if pid == self.root:
                self.driver_kb = max(self.driver_kb, hwm)
            elif "java" in cmd.split(" ", 1)[0]:
                self.jvm_kb = max(self.jvm_kb, hwm)
            elif "pyspark" in cmd:
                workers += rss
            cpu = proc_cpu_s(pid)
            if cpu is not None:
                self.cpu[pid] = cpu
        self.workers_kb = max(self.workers_kb, workers)
        self.total_kb = max(self.total_kb, total)


def run_measured(
    argv: list[str], env: dict[str, str] | None = None, stdout: Path | None = None
) -> dict[str, Any]:
    """Run ``argv``; wall time, exit code, stdout (or, with ``stdout``, that written to
    this file, as a user's redirect would), and the tree's peaks and CPU seconds."""
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with ExitStack() as stack:
        sink = subprocess.PIPE if stdout is None else stack.enter_context(open(stdout, "wb"))
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, text=True, env=env)
        sampler = TreeSampler(proc.pid)
        done = threading.Event()

        def poll() -> None:
            while not done.is_set():
                sampler.sample()
                done.wait(0.2)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        out, err = proc.communicate()
    wall = time.monotonic() - started
    done.set()
    thread.join()
    return {
        "code": proc.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(sampler.cpu.values()), 1),
        "driver_mb": round(sampler.driver_kb / 1024),
        "jvm_mb": round(sampler.jvm_kb / 1024),
        "workers_mb": round(sampler.workers_kb / 1024),
        "tree_mb": round(sampler.total_kb / 1024),
        "load_average_before": round(load_before, 2),
        "stdout": out or "",
        "stderr_tail": err[-2000:],
    }


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- one size -------------------------------------------------------------------------------------


def _variants(shards: list[int]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for k in shards:
        if k == 1:
            out.append(("spark", ["--engine", "spark"]))
        else:
            out.append((f"spark x{k}", ["--engine", "spark", "--shards", str(k)]))
    return out


def run_variant(
    name: str,
    flags: list[str],
    n: int,
    data: Path,
    work: Path,
    master: str | None,
    repeat: int = 1,
) -> dict[str, Any]:
    """One measured ``bexdb load`` (or, for ``online``, ``bexdb subscribe``) of n subs;
    with ``repeat``, that many back to back, the row being the run of median wall time
    (the lower of the two middle ones for an even count) with every run's wall time in
    ``wall_runs``: this machine's loads vary by several percent from run to run."""
    store = work / f"store-{data.name}-{name.replace(' ', '')}-{n}"
    subs, schema = str(data / f"subs-{n}.jsonl"), str(data / "schema.json")
    if name == ONLINE:
        argv = [sys.executable, "-m", "tools.cli", "subscribe", str(store), subs]
        argv += ["--schema", schema]
    else:
        argv = [sys.executable, "-m", "tools.cli", "load", str(store), subs]
        argv += ["--schema", schema, "--replace", *flags]
    if master and "spark" in flags:
        argv += ["--master", master]
    runs = []
    for i in range(repeat):
        _log(f"n={n:,}: {name} ..." + (f" (run {i + 1} of {repeat})" if repeat > 1 else ""))
        if name == ONLINE:
            shutil.rmtree(store, ignore_errors=True)
        res = run_measured(argv)
        if res["code"] != 0:
            raise BexdbError(
                f"{name} load of {n} failed (exit {res['code']}): {res['stderr_tail']}"
            )
        runs.append(res)
    res = sorted(runs, key=itemgetter("wall_s"))[(len(runs) - 1) // 2]
    last = res.pop("stdout").strip().splitlines()[-1]
    summary = json.loads(last) if name != ONLINE else {"engine": ONLINE, "output": last}
    row = {
        "workload": data.name,
        "engine": name,
        "n": n,
        "measured": True,
        **res,
        "subs_per_s": round(n / res["wall_s"]),
        "store_bytes": _dir_bytes(store),
        "bytes_per_sub": round(_dir_bytes(store) / n),
        "summary": summary,
        "store": str(store),
        "wall_runs": [r["wall_s"] for r in runs],
    }
    _log(
        f"n={n:,}: {name}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.0f} s cpu, "
        f"{row['subs_per_s']:,}/s, {row['store_bytes'] / 1e6:,.0f} MB"
    )
    return row


def run_match(
    engine: str, store: str, n: int, events: Path, count: int, work: Path, master: str | None
) -> dict[str, Any]:
    """One measured ``bexdb match`` of ``count`` events (``--engine spark`` or not)."""
    argv = [sys.executable, "-m", "tools.cli", "match", store, str(events)]
    out = work / f"match-out-{n}"
    lines = None  # the single-process matcher's output, written to a file as users would
    if engine == "spark":
        shutil.rmtree(out, ignore_errors=True)
        argv += ["--engine", "spark", "--out", str(out)]
        if master:
            argv += ["--master", master]
    else:
        lines = out.with_suffix(".jsonl")
    _log(f"n={n:,}: match {engine}, {count:,} events ...")
    os.sync()  # an earlier run's output (gigabytes) written back before this one, not during
    res = run_measured(argv, stdout=lines)
    shutil.rmtree(out, ignore_errors=True)
    if lines is not None:
        lines.unlink(missing_ok=True)
    stdout = res.pop("stdout")
    if res["code"] not in (0, 3):  # 3: some events rejected, still a full run
        raise BexdbError(f"match {engine} at {n} failed (exit {res['code']}): {res['stderr_tail']}")
    row = {
        "engine": f"match {engine}",
        "n": n,
        "events": count,
        **res,
        "events_per_s": round(count / res["wall_s"], 2),
        "summary": json.loads(stdout.strip().splitlines()[-1]) if engine == "spark" else None,
    }
    _log(f"n={n:,}: match {engine}: {row['wall_s']:.1f} s wall, {row['events_per_s']:,.1f}/s")
    return row


def check_agreement(rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> int:
    """The same ids from every measured store of one size, on ``events``."""
    from betree.stores.sharded import open_index

    stores = [r for r in rows if r.get("store")]
    answers = []
    for row in stores:
        with open_index(row["store"]) as reader:
            answers.append([sorted(map(json.dumps, reader.match(ev))) for ev in events])
    for row, got in zip(stores[1:], answers[1:], strict=True):
        if got != answers[0]:
            raise AgreementError(
                f"n={row['n']}: {row['engine']} answers differently from {stores[0]['engine']}"
            )
    return len(events)


def _extrapolate(rows: list[dict[str, Any]], n: int, engine: str) -> dict[str, Any] | None:
    done = [r for r in rows if r["engine"] == engine and r["measured"]]
    if not done:
        return None
    base = max(done, key=lambda r: r["n"])
    wall = base["wall_s"] * n / base["n"]
    return {
        "engine": engine,
        "n": n,
        "measured": False,
        "wall_s": round(wall, 1),
        "subs_per_s": round(n / wall),
        "extrapolated_from": base["n"],
    }


# -- profile ---------------------------------------------------------------------------------------


def profile_hot_spots(data: Path, n: int) -> str:
    """cProfile of the compile transform and of one shard's build on the first ``n`` subs."""
    import pyarrow as pa

    from betree.stores.sharded import shard_name
    from loaders.spark.build import build_store, triage
    from loaders.spark.compile import compile_partition
    from loaders.spark.extract import JSONL
    from loaders.spark.results import RUNS
    from loaders.spark.runfiles import read_runs

    schema = json.loads((data / "schema.json").read_text())
    with open(data / "subs-all.jsonl", encoding="utf-8") as fh:
        lines = [next(fh) for _ in range(n)]
    batch = pa.RecordBatch.from_pydict(
        {
            "arg": pa.array([0] * n, pa.int32()),
            "path": ["subs.jsonl"] * n,
            "block": pa.array([0] * n, pa.int64()),
            "kind": pa.array([JSONL] * n, pa.int8()),
            "text": [line.rstrip("\n") for line in lines],
        }
    )
    parts = []
    with tempfile.TemporaryDirectory() as runs:
        for name in ("atoms", shard_name(0)):
            (Path(runs) / name).mkdir()
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        out = prof.runcall(lambda: list(compile_partition([batch], schema, runs=runs)))
        parts.append(_top(prof, f"compile transform (executors), {n:,} subscriptions", t0))
        result = pa.Table.from_batches(out)
        files = result.filter(pa.compute.equal(result["kind"], RUNS))
        table, atom_keys = read_runs(files["path"].to_pylist())
        good, _ = triage(table)
    with tempfile.TemporaryDirectory() as tmp:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.runcall(
            build_store,
            good,
            atom_keys,
            schema,
            None,
            Path(tmp) / "raw",
            Path(tmp) / "store",
        )
        parts.append(_top(prof, f"shard build (intern, BE-B, check, copy), {n:,} subs", t0))
    return "\n".join(parts)


def _top(prof: cProfile.Profile, title: str, t0: float) -> str:
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.sort_stats("cumulative").print_stats(18)
    head = f"== {title}: {time.perf_counter() - t0:.1f} s under the profiler"
    return head + "\n" + "\n".join(text.getvalue().splitlines()[6:]) + "\n"


# -- reporting ---------------------------------------------------------------------------------


def _stage(r: dict[str, Any], key: str) -> str:
    stages = r.get("summary", {}).get("stages", {})
    return f"{stages[key]:.0f}" if key in stages else ""


def _runs(r: dict[str, Any]) -> str:
    """The spread of repeated runs (``--repeat``), "" for one."""
    walls = r.get("wall_runs") or []
    return f"{min(walls):,.1f}-{max(walls):,.1f} ({len(walls)})" if len(walls) > 1 else ""


def _shard_max(r: dict[str, Any], key: str) -> str:
    figures = r.get("summary", {}).get("shard_figures") or []
    values = [f["seconds"][key] for f in figures]
    return f"{max(values):.0f}" if values else ""


_COLUMNS: tuple[Column, ...] = (  # the cells are strings already, "" where not measured
    ("workload", "{}", lambda r: r.get("workload", "begen")),
    ("subs", "{:,}", lambda r: r["n"]),
    ("engine", "{}", lambda r: r["engine"]),
    ("wall s", "{}", lambda r: f"{r['wall_s']:,.1f}" if r["measured"] else f"~{r['wall_s']:,.0f}*"),
    ("runs", "{}", lambda r: _runs(r)),
    ("subs/s", "{:,}", lambda r: r["subs_per_s"]),
    ("cpu s", "{}", lambda r: f"{r['cpu_s']:,.0f}" if r["measured"] else ""),
    ("store MB", "{}", lambda r: f"{r['store_bytes'] / 1e6:,.1f}" if r["measured"] else ""),
    ("B/sub", "{}", lambda r: f"{r['bytes_per_sub']:,}" if r["measured"] else ""),
    ("driver MB", "{}", lambda r: f"{r['driver_mb']:,}" if r["measured"] else ""),
    ("JVM MB", "{}", lambda r: f"{r['jvm_mb']:,}" if r["measured"] and r["jvm_mb"] else ""),
    ("workers MB", "{}", lambda r: f"{r['workers_mb']:,}" if r["measured"] and r["jvm_mb"] else ""),
    ("start s", "{}", lambda r: _stage(r, "session")),
    ("compile s", "{}", lambda r: _stage(r, "compile")),
    ("build s", "{}", lambda r: _stage(r, "build")),
    ("BE-B s", "{}", lambda r: _shard_max(r, "build")),
    ("check s", "{}", lambda r: _shard_max(r, "check")),
    ("load avg", "{}", lambda r: f"{r['load_average_before']:.1f}" if r["measured"] else ""),
)


_MATCH_COLUMNS: tuple[Column, ...] = (
    ("subs", "{:,}", lambda r: r["n"]),
    ("matcher", "{}", lambda r: r["engine"]),
    ("events", "{:,}", lambda r: r["events"]),
    ("wall s", "{:,.1f}", lambda r: r["wall_s"]),
    ("events/s", "{:,.1f}", lambda r: r["events_per_s"]),
    ("cpu s", "{:,.0f}", lambda r: r["cpu_s"]),
    ("start s", "{}", lambda r: _stage(r, "session") if r["summary"] else ""),
    ("match job s", "{}", lambda r: _stage(r, "job: match") if r["summary"] else ""),
    ("load avg", "{:.1f}", lambda r: r["load_average_before"]),
)


def format_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one row per size and engine."""
    return column_table(_COLUMNS, rows)


def _plot(out: Path, rows: list[dict[str, Any]]) -> None:
    with figure(out / "load.png", 1, 2, figsize=(11, 4.2)) as (_, (left, right)):
        _plot_walls(left, rows)
        _plot_stages(right, rows)


def _plot_walls(left: Any, rows: list[dict[str, Any]]) -> None:
    """Wall seconds against subscriptions, an engine a line (dashed: extrapolated)."""
    lines = dict.fromkeys((r.get("workload", "begen"), r["engine"]) for r in rows)
    for workload, engine in lines:
        mine = [r for r in rows if (r.get("workload", "begen"), r["engine"]) == (workload, engine)]
        left.plot(
            [r["n"] for r in mine],
            [r["wall_s"] for r in mine],
            marker="o",
            linestyle="-" if all(r["measured"] for r in mine) else "--",
            label=engine if len({w for w, _ in lines}) == 1 else f"{workload}: {engine}",
        )
    left.axhline(60, color="grey", linewidth=0.8, linestyle=":", label="60 s")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("subscriptions")
    left.set_ylabel("wall seconds (dashed: extrapolated)")
    left.set_title("bulk load, BEGen")
    left.legend()


def _plot_stages(right: Any, rows: list[dict[str, Any]]) -> None:
    """Where a Spark load's time goes at the largest size: a stacked bar a variant."""
    largest = max(r["n"] for r in rows)
    spark = [r for r in rows if r["n"] == largest and r["measured"] and "summary" in r]
    spark = [r for r in spark if r["summary"].get("engine") == "spark"]
    # "other": reading run files, triage, worker start and the driver's share of the wall time
    parts = ("session", "compile", "intern", "build", "check", "compact")
    bottoms = [0.0] * len(spark)
    for part in parts:
        heights = []
        for r in spark:
            s = r["summary"]
            if part in ("session", "compile"):
                heights.append(float(s["stages"].get(part, 0.0)))
            else:
                heights.append(max(f["seconds"][part] for f in s["shard_figures"]))
        right.bar([r["engine"] for r in spark], heights, bottom=bottoms, label=part)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    rest = [max(0.0, r["wall_s"] - b) for r, b in zip(spark, bottoms, strict=True)]
    right.bar([r["engine"] for r in spark], rest, bottom=bottoms, label="other", color="0.8")
    right.set_ylabel("seconds (per-shard steps: the slowest shard)")
    right.set_title(f"where the time goes, {largest:,} subscriptions")
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


# -- command line -----------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    return sorted(set(args_sizes(text)))


def _workloads(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in gen.PROFILES]
    if not names or unknown:
        known = tuple(gen.PROFILES)
        raise argparse.ArgumentTypeError(f"expected profiles of {known}, got {text!r}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``bexdb bench load``."""
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=_sizes("100000,1000000"),
        help="comma-separated subscription counts",
    )
    parser.add_argument(
        "--workloads",
        type=_workloads,
        default=["begen"],
        help="gen profiles, each loaded at every size: begen, wide, rich (default begen)",
    )
    parser.add_argument(
        "--shards",
        default="1,2",
        help="Spark variants: 1 = one store, K > 1 = --shards K (default 1,2)",
    )
    parser.add_argument(
        "--python-max",
        type=int,
        default=1_000_000,
        help="largest size the python engine runs; above it, extrapolated (0: never run)",
    )
    parser.add_argument(
        "--online-max",
        type=int,
        default=100_000,
        help="largest size inserted online (bexdb subscribe); above it, extrapolated (0: never)",
    )
    parser.add_argument(
        "--repeat",
        type=positive,
        default=1,
        help="runs of each load, back to back; the row is the median run (default 1)",
    )
    parser.add_argument("--master", help="Spark master (default local[*])")
    parser.add_argument("--seed", type=int, default=1, help="workload seed")
    parser.add_argument(
        "--check-events",
        type=int,
        default=CHECK_EVENTS,
        help="events matched on every variant's store, which must agree",
    )
    parser.add_argument(
        "--match-events",
        type=int,
        default=0,
        help="also match N events on the Spark store, Spark against single-process (0: not)",
    )
    parser.add_argument(
        "--target-rate",
        type=float,
        default=0.01,
        help="the workloads' calibrated match rate (default 0.01; lower shrinks what "
        "--match-events writes: ~8 bytes a match)",
    )
    parser.add_argument("--profile", action="store_true", help="profile the hot spots too")
    parser.add_argument("--work", default="work/bench-load", help="workloads and stores")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    parser.add_argument("--out", default="bench-results/load", help="results directory")


def prepare(
    data: Path,
    profile: str,
    sizes: list[int],
    count: int,
    seed: int,
    *,
    target_rate: float = 0.01,
    parsed: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate ``profile``'s workload into ``data``: ``subs-N.jsonl`` per size (prefixes of
    the largest), the schema, ``events-match.jsonl`` (the first ``count`` events); returns
    the generator's summary and the first ``parsed`` events (all: None)."""
    _log(f"generating {profile}, {sizes[-1]:,} subscriptions into {data}")
    summary = gen.generate(
        data, subs=sizes[-1], events=count, seed=seed, profile=profile, target_rate=target_rate
    )
    for line in format_summary(summary).splitlines():
        if line.startswith(("measured match rate", "WARNING")):
            _log(line)  # (what the rate came to, and a target out of reach)
    os.replace(data / "subs.jsonl", data / "subs-all.jsonl")
    with open(data / "subs-all.jsonl", encoding="utf-8") as src:
        lines = src.readlines()
    for n in sizes:
        (data / f"subs-{n}.jsonl").write_text("".join(lines[:n]))
    del lines
    event_lines = (data / "events.jsonl").read_text().splitlines()
    (data / "events-match.jsonl").write_text("".join(x + "\n" for x in event_lines[:count]))
    return summary, [json.loads(line) for line in event_lines[:parsed]]


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; returns 0, or raises :class:`AgreementError`."""
    pyplot()  # fail now, not after the run, if matplotlib is missing
    sizes: list[int] = args.sizes
    shards = [int(k) for k in str(args.shards).split(",") if k.strip()]
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    count = max(args.check_events, args.match_events, 1)
    results: dict[str, Any] = {
        "benchmark": "bexdb bench load",
        "machine": machine(),
        "parameters": {
            "sizes": sizes,
            "shards": shards,
            "workloads": args.workloads,
            "python_max": args.python_max,
            "online_max": args.online_max,
            "master": args.master or "local[*]",
            "match_events": args.match_events,
            "target_rate": args.target_rate,
            "repeat": args.repeat,
        },
        "workloads": {},
        "notes": [
            "each load is `bexdb load` in its own process: wall time includes Spark's start",
            "memory: peak RSS (VmHWM) of the driver and of the JVM; the Python workers' RSS "
            "summed at the sample where the sum was highest (0.2 s sampling)",
            "cpu: user+system seconds of the whole process tree",
            "a python or online row with measured false is an EXTRAPOLATION (linear in n "
            "from the largest measured size of that engine), not a measurement",
            "online: `bexdb subscribe` of the whole file (online insertion, one transaction)",
            "the machine is shared: load_average_before says how busy it was",
            "with --repeat K, each load ran K times back to back: a row is its median run, "
            "wall_runs holds every run's wall time",
        ],
        "rows": [],
        "match_rows": [],
    }
    rows: list[dict[str, Any]] = results["rows"]
    match_rows: list[dict[str, Any]] = results["match_rows"]
    for profile in args.workloads:
        data = work / profile
        summary, events = prepare(
            data,
            profile,
            sizes,
            count,
            args.seed,
            target_rate=args.target_rate,
            parsed=args.check_events,
        )
        results["workloads"][profile] = {
            k: v for k, v in summary.items() if k not in ("seconds", "files")
        }
        done: list[dict[str, Any]] = []
        for n in sizes:
            mine = []
            if 0 < n <= args.online_max:
                mine.append(run_variant(ONLINE, [], n, data, work, None, args.repeat))
            if 0 < n <= args.python_max:
                mine.append(
                    run_variant("python", ["--engine", "python"], n, data, work, None, args.repeat)
                )
            for name, flags in _variants(shards):
                mine.append(run_variant(name, flags, n, data, work, args.master, args.repeat))
            checked = check_agreement(mine, events[: args.check_events])
            for row in mine:
                row["agreement_events"] = checked
            for engine, limit in ((ONLINE, args.online_max), ("python", args.python_max)):
                guess = _extrapolate(done, n, engine) if n > limit else None
                if guess is not None:
                    guess["workload"] = profile
                    mine.insert(0, guess)
            done.extend(mine)
            rows.extend(mine)
            spark_store = next((r["store"] for r in mine if r["engine"].startswith("spark")), None)
            if args.match_events and spark_store is not None:
                for engine in ("spark", "python"):
                    match_rows.append(
                        run_match(
                            engine,
                            spark_store,
                            n,
                            data / "events-match.jsonl",
                            args.match_events,
                            work,
                            args.master,
                        )
                    )
            if not args.keep:
                for row in mine:
                    if row.get("store"):
                        shutil.rmtree(row["store"], ignore_errors=True)
            (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(out, rows)  # once, at the end (results.json is written after every size)
    if args.profile:
        data = work / args.workloads[0]
        _log(f"profiling the hot spots on {PROFILE_SUBS:,} subscriptions")
        report = profile_hot_spots(data, min(PROFILE_SUBS, sizes[-1]))
        (out / "profile.txt").write_text(report)
        results["profile"] = report
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        print(report)
    print(format_table(rows))
    if match_rows:
        print("\n" + column_table(_MATCH_COLUMNS, match_rows))
    print(
        "\nBEGen 400 attributes (wide: 480 values each); wall = `bexdb load` end to end "
        "(Spark's start included); stage columns from the load's own figures (BE-B/check: "
        f"the slowest shard); * = EXTRAPOLATED.  Results and plot in {out}/"
    )
    return 0


if __name__ == "__main__":
    script("bexdb bench load", __doc__, add_arguments, main)
