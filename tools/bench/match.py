"""``bexdb bench match``: event matching on the BEGen workload against SCAN and counting.

What it measures, for each size n (default 10K, 100K, 1M subscriptions), on one BEGen
workload (:mod:`tools.bench.gen`, defaults: 400 int attributes of 48 values, 25 base events,
range widths calibrated to a ~1% match rate) and the same ``--events`` events at every size
(subscription i is the same at every size: the sizes are prefixes of one workload):

* **Build**: a fresh store in a temporary directory; the first n subscriptions inserted
  online with ``Index.subscribe_many``, ``--batch`` per call (one durable transaction each).
  Reported: seconds, subscriptions/s, store size on disk and bytes per subscription.  A
  build that passes ``--build-minutes`` stops there: the row is then measured on the
  subscriptions built so far (``n built``) and the time for all n is *extrapolated* at the
  rate of the last ten batches (the rate falls as the tree grows, so it is a lower bound)
  and labelled so everywhere it appears.
* **bexdb matching**, in a separate process (``multiprocessing`` spawn) that opens the store
  read-only and calls ``Index.match`` on every event twice: a first pass on an empty page
  cache (the OS page cache is warm: the store was just written), then the timed *warm* pass
  the table reports (mean / p50 / p99 ms per event, wall and CPU: see below), with
  candidates (clauses checked) and pages read per event from ``idx.engine.last_stats``.
  Its memory: ``ru_maxrss`` at the end minus the RSS after imports, i.e. the growth of the
  matcher (decoded-page cache, snapshot, LMDB pages mapped in — those are file-backed and
  shared; ``rss_file_mb`` / ``rss_anon_mb`` split the final RSS).  The peak is Linux's
  ``VmHWM``: ``ru_maxrss`` of a spawned child starts at its parent's peak (see
  :func:`_maxrss_kb`).
* **Batched matching** (``match_many``), in the same matcher process after the warm pass, on
  the same events: batches of each ``--match-batches`` size (default 256 and 1024,
  ``bexdb match``'s batch), one warm-up batch first, each right after a per-event pass over the same
  events (``Index.match``, validation included in both; adjacent, so that both see the
  same machine load).  Reported: events/s of both and the speedup, and
  where a batch's time goes (``index.engine.last_timings``: phase 1, the BE-Tree walk, checking
  the reached l-node pages, building the per-event results).  Every event's ids must equal
  the per-event pass's (as sets), else :class:`AgreementError`.
* **SCAN**: every subscription's compiled clauses (``to_clauses(compile_expr(...))``) in
  memory, ``clauses_hold`` on each per event.  Run on the first events until
  ``--scan-seconds`` is spent (at least 20); its ratio is taken against bexdb's mean on the
  same events.
* **counting**: the two-phase counting algorithm of the paper's baselines (PB+tree-counting,
  in memory).  Phase 1 finds the satisfied atoms with a per-attribute Grouped-Filter style
  index: for each operator the sorted constants of every order-atom entry, one
  ``searchsorted`` per operator and event attribute, the satisfied ids being a slice; test
  atoms (none in BEGen) are evaluated one by one.  Phase 2: an inverted index atom -> the
  clause ids using it (CSR arrays), ``np.bincount`` of the clause ids of the satisfied atoms,
  and the clauses whose count equals their size match.  Run on the first events until
  ``--scan-seconds`` is spent (at least 20), as SCAN: on the rich workload its test atoms
  one by one take seconds an event.
* **CPU time**: every timed loop above is also timed on its thread's CPU clock
  (:class:`tools.bench.harness.Laps`); rates and ratios are given on both (``*_cpu*``).
* **Agreement**: on the first 20 events bexdb (both passes), SCAN and counting must return
  the same id sets, else :class:`AgreementError` and no results are written for that size.

Output: a markdown table on stdout, ``results.json`` and ``match_ms.png`` (mean ms per event
vs subscriptions, log-log) in ``--out``, rewritten after every size.  ``--profile`` runs the
warm pass of n = 100000 (else the largest size) once more under cProfile in the matcher
process and prints the top functions (``profile.txt``).  Progress goes to stderr.

Cost: the online build dominates (measured on a loaded 2-core machine: ~1,800
subscriptions/s at 10K, ~1,400/s at 100K, ~780/s averaged over 936K), then compiling the
subscriptions for the baselines (~150-180 µs each) and SCAN (``--scan-seconds``).  The
default sizes take about 35 minutes, 1M at the 20-minute build budget.

    python -m tools.bench.match --sizes 10000,100000 --events 1000 --out bench-results/match
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import multiprocessing
import os
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from betree.disk.tree import DEFAULTS
from betree.index import Index
from betree.lang.schema import Schema
from betree.matching.direct import counting as direct_counts
from loaders import python_load
from loaders.records import Record
from storage.errors import InvalidInput
from storage.store import DEFAULT_CACHE_BYTES
from tools.args import positive, sizes
from tools.bench.baselines.counting import Counting
from tools.bench.baselines.scan import Compiled, scan
from tools.bench.gen import PROFILES, Workload, make_workload
from tools.bench.harness import (
    AgreementError,
    Laps,
    changed_sources,
    check_agreement,
    column_table,
    figure,
    git_head,
    logger,
    machine,
    markdown_table,
    plot_means,
    proc_status_kb,
    pyplot,
    script,
    source_digests,
    stats,
)

CHECKED_EVENTS = 20
PROFILE_SIZE = 100_000
MIN_SCAN_EVENTS = CHECKED_EVENTS
RATE_WINDOW = 10  # batches behind the extrapolated build rate
LABELS = (  # of match_ms.png: the x axis, the y axis, the title
    "subscriptions",
    "ms per event (mean; dotted: p99)",
    "Matching BEGen events (~1% match rate)",
)
PLOTTED = (  # the lines of match_ms.png: key of the row, label, style
    ("bexdb_ms", "bexdb (warm page cache, own process)", "o-"),
    ("counting_ms", "counting (in memory, numpy)", "s-"),
    ("scan_ms", "SCAN (in memory, first events)", "^-"),
)

Event = Mapping[str, object]
_log = logger("bench match")


# -- the matcher process ----------------------------------------------------------------------


def _maxrss_kb() -> int:
    """The peak RSS of this process in KiB.

    ``ru_maxrss`` survives fork and exec: a spawned child starts with its parent's peak
    (measured: 322 MB in a fresh child of a 320 MB parent).  Linux's ``VmHWM`` belongs to
    the process image, so it is used where it exists.
    """
    hwm = proc_status_kb().get("VmHWM")
    if hwm is not None:
        return hwm
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS


@dataclass
class MatcherJob:
    path: str
    events: list[dict[str, Any]]
    keep: int
    cache_bytes: int
    profile: bool
    batches: tuple[int, ...] = (256,)


def run_matcher(job: MatcherJob) -> dict[str, Any]:
    """In a fresh process: open the store read-only, match every event twice, measure."""
    rss0 = proc_status_kb()
    peak0 = _maxrss_kb()
    digests = source_digests()
    idx = Index.open(job.path, readonly=True, cache_bytes=job.cache_bytes)
    try:
        passes: list[dict[str, Any]] = []
        for _ in range(2):
            n = len(job.events)
            laps = Laps()
            cand = np.empty(n)
            pages = np.empty(n)
            found = np.empty(n)
            kept: list[list[Any]] = []
            hits, misses = idx.store.cache.hits, idx.store.cache.misses
            gc.collect()
            for i, event in enumerate(job.events):
                with laps:
                    ids = idx.match(event)
                cand[i] = idx.engine.last_stats["candidates"]
                pages[i] = idx.engine.last_stats["pages"]
                found[i] = len(ids)
                if i < job.keep:
                    kept.append(ids)
            passes.append(
                {
                    "ms": laps.wall_ms,
                    "cpu_ms": laps.cpu_ms,
                    "candidates": cand.tolist(),
                    "pages": pages.tolist(),
                    "matches": found.tolist(),
                    "kept": kept,
                    "cache_hits": idx.store.cache.hits - hits,
                    "cache_misses": idx.store.cache.misses - misses,
                }
            )
        batched = []
        for size in job.batches:  # each beside a per-event pass of its own: same conditions
            with Laps() as lap:
                answers = [idx.match(event) for event in job.events]
            per_event = [sorted(map(repr, ids)) for ids in answers]  # (compared, not timed)
            result = _batched_pass(idx, job.events, size)
            result["agrees"] = result.pop("found") == per_event
            result["per_event_per_s"] = len(job.events) / lap.wall_ms[0] * 1e3
            result["per_event_per_cpu_s"] = len(job.events) / lap.cpu_ms[0] * 1e3
            batched.append(result)
        with direct_counts() as direct:  # (untimed) the direct atoms' tests and hits
            for event in job.events:
                idx.match(event)
        peak = _maxrss_kb()
        rss_end = proc_status_kb()
        report = None
        if job.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for event in job.events:
                idx.match(event)
            profiler.disable()
            buf = io.StringIO()
            st = pstats.Stats(profiler, stream=buf)
            st.sort_stats("tottime").print_stats(20)
            st.sort_stats("cumulative").print_stats(25)
            report = buf.getvalue()
        cache_len = len(idx.store.cache)
    finally:
        idx.close()
    return {
        "passes": passes,
        "batched": batched,
        "rss_after_imports_kb": rss0.get("VmRSS", peak0),
        "ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "maxrss_after_imports_kb": peak0,
        "maxrss_kb": peak,
        "rss_end": rss_end,
        "cache_pages_used": cache_len,
        "profile": report,
        "source_digests": digests,
        "direct": direct,
    }


def _batched_pass(idx: Index, events: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """``match_many`` over ``events`` in batches of ``size``: rate and time per phase."""
    idx.match_many(events[:size])  # warm-up: the walk's pages as the per-event passes left them
    timings: dict[str, float] = {}
    found: list[Any] = []
    gc.collect()
    with Laps() as lap:
        for k in range(0, len(events), size):
            found.extend(idx.match_many(events[k : k + size]))
            for key, seconds in idx.engine.last_timings.items():
                timings[key] = timings.get(key, 0.0) + seconds
    seconds, cpu_s = lap.wall_ms[0] / 1e3, lap.cpu_ms[0] / 1e3
    return {
        "batch": size,
        "seconds": seconds,
        "cpu_seconds": cpu_s,
        "events_per_s": len(events) / seconds,
        "events_per_cpu_s": len(events) / cpu_s,
        "timings_s": timings,
        "found": [sorted(map(repr, ids)) for ids in found],
    }


def match_in_subprocess(job: MatcherJob) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(run_matcher, (job,))


# -- one size ----------------------------------------------------------------------------------


def _build(
    path: str, w: Workload, n: int, args: argparse.Namespace, settings: dict[str, int]
) -> dict[str, Any]:
    """Insert the first n subscriptions online, within the time budget."""
    budget = args.build_minutes * 60.0
    idx = Index.open(path, schema=w.schema, settings=settings)
    t0 = time.perf_counter()
    done = 0
    marks: list[tuple[float, int]] = [(0.0, 0)]
    last_log = 0.0
    stopped = False
    try:
        while done < n:
            batch = w.subs[done : min(n, done + args.batch)]
            idx.subscribe_many(batch)
            done += len(batch)
            now = time.perf_counter() - t0
            marks.append((now, done))
            if now - last_log > 10 or done == n:
                last_log = now
                rate = done / now
                _log(f"n={n:,}: built {done:,}/{n:,} in {now:.0f}s ({rate:,.0f}/s)")
            if now > budget and done < n:
                stopped = True
                break
        seconds = time.perf_counter() - t0
        size = idx.store.size_on_disk()
        built = len(idx)
    finally:
        idx.close()
    if built != done:
        raise AgreementError(f"n={n}: the store holds {built} subscriptions, {done} were inserted")
    row: dict[str, Any] = {
        "n_built": done,
        "build_complete": not stopped,
        "build_s": seconds,
        "subs_per_s": done / seconds,
        "bytes_on_disk": size,
        "bytes_per_sub": size / done,
        "build_s_extrapolated": None,
    }
    if stopped:
        t_a, n_a = marks[max(0, len(marks) - 1 - RATE_WINDOW)]
        t_b, n_b = marks[-1]
        recent = (n_b - n_a) / (t_b - t_a)
        row["recent_subs_per_s"] = recent
        row["build_s_extrapolated"] = seconds + (n - done) / recent
        _log(
            f"n={n:,}: build budget of {args.build_minutes} min spent at {done:,} subscriptions; "
            f"EXTRAPOLATED time for all {n:,}: {row['build_s_extrapolated'] / 60:.0f} min "
            f"(at the last {RATE_WINDOW} batches' {recent:,.0f}/s)"
        )
    return row


def _load(path: str, w: Workload, n: int, settings: dict[str, int]) -> dict[str, Any]:
    """Bulk-load the first n subscriptions with the python engine (``--build load``)."""
    t0 = time.perf_counter()
    records = (Record(k + 1, ident, expr) for k, (ident, expr) in enumerate(w.subs[:n]))
    python_load.load(path, records, w.schema, replace=True, settings=settings)
    seconds = time.perf_counter() - t0
    with Index.open(path, readonly=True) as idx:
        size, built = idx.store.size_on_disk(), len(idx)
    if built != n:
        raise AgreementError(f"n={n}: the store holds {built} subscriptions, {n} were loaded")
    return {
        "n_built": n,
        "build_complete": True,
        "build_s": seconds,
        "subs_per_s": n / seconds,
        "bytes_on_disk": size,
        "bytes_per_sub": size / n,
        "build_s_extrapolated": None,
    }


def run_size(
    n: int,
    w: Workload,
    compiled: Compiled,
    args: argparse.Namespace,
    settings: dict[str, int],
    profile: bool,
) -> tuple[dict[str, Any], str | None]:
    """Every measurement of one size: the result row and the profile text (if asked)."""
    row: dict[str, Any] = {"n": n, "workload": w.summary.get("profile", "begen")}
    schema = compiled.schema
    events = w.events
    values = [schema.validate_event(e) for e in events]
    keep = min(CHECKED_EVENTS, len(events))
    if args.store_dir is not None:
        os.makedirs(args.store_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bexdb-bench-match-", dir=args.store_dir) as path:
        if args.build == "load":
            _log(f"n={n:,}: bulk-loading the store (python engine)")
            row.update(_load(os.path.join(path, "store"), w, n, settings))
            path = os.path.join(path, "store")
        else:
            _log(f"n={n:,}: building the store online ({args.batch} per subscribe_many)")
            row.update(_build(path, w, n, args, settings))
        nb = row["n_built"]

        _log(f"n={n:,}: matching {len(events)} events x2 in a read-only matcher process")
        job = MatcherJob(path, events, keep, args.cache_bytes, profile, tuple(args.match_batches))
        res = match_in_subprocess(job)
    row["sources_changed"] = changed_sources(args.source_digests, res["source_digests"])
    if row["sources_changed"]:
        _log(
            f"n={n:,}: WARNING: sources changed since the benchmark started: "
            + ", ".join(row["sources_changed"])
        )

    first, warm = res["passes"]
    ms, cpu = np.array(warm["ms"]), np.array(warm["cpu_ms"])
    row["per_event_per_s"] = len(events) / (ms.sum() / 1000)
    row["per_event_per_cpu_s"] = len(events) / (cpu.sum() / 1000)
    row["batched"] = []
    for result in res["batched"]:
        if not result["agrees"]:
            raise AgreementError(
                f"n={n}: match_many in batches of {result['batch']} and Index.match differ"
            )
        speedup = result["events_per_s"] / result["per_event_per_s"]
        speedup_cpu = result["events_per_cpu_s"] / result["per_event_per_cpu_s"]
        row["batched"].append({**result, "speedup": speedup, "speedup_cpu": speedup_cpu})
    row["direct"] = {
        kind: {"tests": tests / len(events), "held": held / len(events)}
        for kind, (_, tests, held) in sorted(res["direct"].items())
    }
    row.update(
        {
            "events": len(events),
            "bexdb_ms": stats(ms),
            "bexdb_cpu_ms": stats(cpu),
            "bexdb_first_pass_ms": stats(np.array(first["ms"])),
            "bexdb_first_pass_cpu_ms": stats(np.array(first["cpu_ms"])),
            "candidates_mean": float(np.mean(warm["candidates"])),
            "pages_mean": float(np.mean(warm["pages"])),
            "matches_mean": float(np.mean(warm["matches"])),
            "match_rate": float(np.mean(warm["matches"])) / nb,
            "warm_cache_hits": warm["cache_hits"],
            "warm_cache_misses": warm["cache_misses"],
            "first_pass_cache_misses": first["cache_misses"],
            "cache_bytes": args.cache_bytes,
            "cache_pages_used": res["cache_pages_used"],
            "matcher_rss_after_imports_mb": res["rss_after_imports_kb"] / 1024,
            "matcher_peak_rss_mb": res["maxrss_kb"] / 1024,
            "matcher_peak_growth_mb": (res["maxrss_kb"] - res["rss_after_imports_kb"]) / 1024,
            "matcher_ru_maxrss_mb": res["ru_maxrss_kb"] / 1024,
            "matcher_rss_end_anon_mb": res["rss_end"].get("RssAnon", 0) / 1024,
            "matcher_rss_end_file_mb": res["rss_end"].get("RssFile", 0) / 1024,
        }
    )

    if len(compiled.ids) < nb:
        _log(f"n={n:,}: compiling subscriptions {len(compiled.ids):,}..{nb:,} for the baselines")
        t0 = time.perf_counter()
        compiled.extend(w.subs[len(compiled.ids) : nb])
        row["compile_s"] = time.perf_counter() - t0

    _log(f"n={n:,}: counting baseline (build, then up to {args.scan_seconds:.0f}s of events)")
    t0 = time.perf_counter()
    counting = Counting(compiled, nb)
    row["counting_build_s"] = time.perf_counter() - t0
    row["counting_atoms"] = counting.n_atoms
    row["counting_clauses"] = len(counting.sizes)
    c_laps = Laps()
    c_kept: list[list[Any]] = []
    c_found: list[int] = []
    gc.collect()
    for i, v in enumerate(values):  # (its direct atoms one by one: bounded as SCAN is)
        if i >= keep and sum(c_laps.wall_ms) > args.scan_seconds * 1000:
            break
        with c_laps:
            ids = counting.match(v)
        c_found.append(len(ids))
        if i < keep:
            c_kept.append(ids)
    c_ms, c_cpu = np.array(c_laps.wall_ms), np.array(c_laps.cpu_ms)

    _log(f"n={n:,}: SCAN baseline (up to {args.scan_seconds:.0f}s, at least {keep} events)")
    s_laps = Laps()
    s_kept: list[list[Any]] = []
    gc.collect()
    for i, v in enumerate(values):
        if i >= keep and sum(s_laps.wall_ms) > args.scan_seconds * 1000:
            break
        with s_laps:
            ids = scan(compiled, nb, v)
        if i < keep:
            s_kept.append(ids)
    scan_ms, scan_cpu = np.array(s_laps.wall_ms), np.array(s_laps.cpu_ms)
    k = len(scan_ms)

    got = {
        "bexdb": warm["kept"],
        "bexdb (first pass)": first["kept"],
        "counting": c_kept,
        "SCAN": s_kept,
    }
    row["agreement_checked"] = check_agreement(f"n={n}", events, got)
    row["agreement_passed"] = True
    if not np.array_equal(c_found, np.array(warm["matches"])[: len(c_found)]):
        raise AgreementError(f"n={n}: counting and bexdb differ in match counts on some event")

    row.update(
        {
            "counting_ms": stats(c_ms),
            "counting_cpu_ms": stats(c_cpu),
            "counting_events": len(c_ms),
            "scan_events": k,
            "scan_ms": stats(scan_ms),
            "scan_cpu_ms": stats(scan_cpu),
            "bexdb_ms_scan_events": stats(ms[:k]),
            "bexdb_cpu_ms_scan_events": stats(cpu[:k]),
            "ratio_counting": float(c_ms.mean() / ms[: len(c_ms)].mean()),
            "ratio_counting_cpu": float(c_cpu.mean() / cpu[: len(c_cpu)].mean()),
            "ratio_scan": float(scan_ms.mean() / ms[:k].mean()) if k else float("nan"),
            "ratio_scan_cpu": float(scan_cpu.mean() / cpu[:k].mean()) if k else float("nan"),
        }
    )
    return row, res["profile"]


# -- reporting -----------------------------------------------------------------------------------


def _workload(name: str, subs: int, args: argparse.Namespace) -> Workload:
    """The workload of profile ``name`` (``bexdb gen``): BEGen's knobs for begen and wide."""
    _log(f"generating the {name} workload ({subs:,} subscriptions, {args.events} events)")
    if name not in PROFILES:
        raise InvalidInput(f"unknown workload {name!r}", hint=f"one of {', '.join(PROFILES)}")
    knobs: dict[str, Any] = {"seed": args.seed, "profile": name}
    if name in ("begen", "wide"):
        knobs.update(dims=args.dims, bases=args.bases, zipf=args.zipf, eq_share=args.eq_share)
        knobs.update(card=args.card if name == "begen" else None)
        knobs = {k: v for k, v in knobs.items() if v is not None}
    w = make_workload(subs=subs, events=args.events, **knobs)
    rate = w.summary.get("sample_rate", w.summary.get("rate", float("nan")))
    _log(f"{name} workload: match rate {rate:.3%}")
    return w


def _n_cell(r: dict[str, Any]) -> str:
    return f"{r['n']:,}" if r["build_complete"] else f"{r['n_built']:,} of {r['n']:,}*"


def _build_cell(r: dict[str, Any]) -> str:
    if r["build_complete"]:
        return f"{r['build_s']:,.1f}"
    return f"{r['build_s']:,.0f} (~{r['build_s_extrapolated']:,.0f} EXTRAPOLATED)"


_COLUMNS = (
    ("workload", "{}", lambda r: r.get("workload", "begen")),
    ("subs", "{}", _n_cell),
    ("build s", "{}", _build_cell),
    ("subs/s", "{:,.0f}", lambda r: r["subs_per_s"]),
    ("B/sub", "{:,.0f}", lambda r: r["bytes_per_sub"]),
    ("bexdb ms", "{:.2f}", lambda r: r["bexdb_ms"]["mean"]),
    ("p50", "{:.2f}", lambda r: r["bexdb_ms"]["p50"]),
    ("p99", "{:.2f}", lambda r: r["bexdb_ms"]["p99"]),
    ("CPU ms", "{:.2f}", lambda r: r["bexdb_cpu_ms"]["mean"]),
    ("CPU p50", "{:.2f}", lambda r: r["bexdb_cpu_ms"]["p50"]),
    ("1st pass", "{:.2f}", lambda r: r["bexdb_first_pass_ms"]["mean"]),
    ("cands", "{:,.0f}", lambda r: r["candidates_mean"]),
    ("pages", "{:,.0f}", lambda r: r["pages_mean"]),
    ("matches", "{:,.0f}", lambda r: r["matches_mean"]),
    ("rate", "{:.2%}", lambda r: r["match_rate"]),
    ("RSS+ MB", "{:,.0f}", lambda r: r["matcher_peak_growth_mb"]),
    ("ev/s", "{:,.0f}", lambda r: r["per_event_per_s"]),
    ("ev/CPU-s", "{:,.0f}", lambda r: r["per_event_per_cpu_s"]),
    ("batched ev/s", "{}", lambda r: _batched_cell(r, "events_per_s", "speedup")),
    ("batched ev/CPU-s", "{}", lambda r: _batched_cell(r, "events_per_cpu_s", "speedup_cpu")),
    ("counting ms", "{:.2f}", lambda r: r["counting_ms"]["mean"]),
    ("cnt/bexdb", "{:.2f}x", lambda r: r["ratio_counting"]),
    ("cnt/bexdb CPU", "{:.2f}x", lambda r: r["ratio_counting_cpu"]),
    ("SCAN ms", "{:,.1f}", lambda r: r["scan_ms"]["mean"]),
    ("SCAN ev", "{}", lambda r: r["scan_events"]),
    ("SCAN/bexdb", "{:.1f}x", lambda r: r["ratio_scan"]),
    ("SCAN/bexdb CPU", "{:.1f}x", lambda r: r["ratio_scan_cpu"]),
)


def direct_table(rows: list[dict[str, Any]]) -> str:
    """Per workload, size and kind of direct atom: exact tests an event, atoms that held
    an event, and their ratio (:func:`betree.matching.direct.counting`)."""
    cells = []
    for r in rows:
        for kind, c in r["direct"].items():
            ratio = f"{c['tests'] / c['held']:.2f}" if c["held"] else "-"
            n = f"{r['n_built']:,}"
            cells.append(
                [
                    r.get("workload", "begen"),
                    n,
                    kind,
                    f"{c['tests']:,.1f}",
                    f"{c['held']:,.1f}",
                    ratio,
                ]
            )
    if not cells:
        return "(no direct atoms)"
    return markdown_table(["workload", "subs", "kind", "tests/ev", "held/ev", "tests/held"], cells)


def _batched_cell(r: dict[str, Any], rate: str, speedup: str) -> str:
    """``match_many`` events/s (or per CPU-s) and speedup per batch: ``256: 2,900 (2.6x)``."""
    return "; ".join(f"{b['batch']}: {b[rate]:,.0f} ({b[speedup]:.1f}x)" for b in r["batched"])


def batched_breakdown(rows: list[dict[str, Any]]) -> str:
    """Where ``match_many``'s time goes, per size and batch: share of each phase."""
    lines = []
    for r in rows:
        for b in r["batched"]:
            total = b["seconds"]
            parts = ", ".join(
                f"{key} {seconds / total:.0%}" for key, seconds in b["timings_s"].items()
            )
            rest = 1 - sum(b["timings_s"].values()) / total
            lines.append(
                f"n={r['n_built']:,}, batches of {b['batch']}: {b['events_per_s']:,.0f} events/s "
                f"({b['speedup']:.1f}x per-event {b['per_event_per_s']:,.0f}/s; per CPU-second "
                f"{b['events_per_cpu_s']:,.0f}, {b['speedup_cpu']:.1f}x); {parts}, "
                f"validation and the rest {rest:.0%}"
            )
    return "\n".join(lines)


def format_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one row per size."""
    return column_table(_COLUMNS, rows)


def _plot(out: Path, rows: list[dict[str, Any]]) -> None:
    xs = [r["n_built"] for r in rows]
    with figure(out / "match_ms.png", figsize=(7, 4.5)) as (_, ax):
        plot_means(ax, xs, rows, PLOTTED, LABELS)


# -- command line --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``bexdb bench match``."""
    parser.add_argument(
        "--sizes",
        type=sizes,
        default=[10_000, 100_000, 1_000_000],
        help="comma-separated subscription counts (default 10000,100000,1000000)",
    )
    parser.add_argument("--events", type=positive, default=1000, help="events (default 1000)")
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument("--dims", type=int, default=400, help="BEGen attributes (400)")
    parser.add_argument("--card", type=int, default=48, help="BEGen values per attribute (48)")
    parser.add_argument("--bases", type=int, default=25, help="BEGen base events (25)")
    parser.add_argument("--zipf", type=float, default=0.0, help="BEGen Zipf skew (0)")
    parser.add_argument("--eq-share", type=float, default=0.3, help="BEGen = share (0.3)")
    parser.add_argument("--out", default="bench-results/match", help="results directory")
    parser.add_argument(
        "--batch", type=positive, default=2000, help="subscriptions per subscribe_many"
    )
    parser.add_argument(
        "--max-cap",
        type=positive,
        default=DEFAULTS["max_cap"],
        help="clauses an l-node holds before it is split (BE-Tree)",
    )
    parser.add_argument(
        "--min-size",
        type=positive,
        default=DEFAULTS["min_size"],
        help="fewest clauses an attribute needs to be split on (BE-Tree)",
    )
    parser.add_argument(
        "--cache-bytes",
        type=positive,
        default=DEFAULT_CACHE_BYTES,
        help=f"matcher page cache bound (default {DEFAULT_CACHE_BYTES}, the store default)",
    )
    parser.add_argument(
        "--build-minutes",
        type=float,
        default=20.0,
        help="stop an online build after this long and extrapolate (default 20)",
    )
    parser.add_argument(
        "--scan-seconds",
        type=float,
        default=60.0,
        help=f"time SCAN on the first events for this long (at least {MIN_SCAN_EVENTS})",
    )
    parser.add_argument(
        "--match-batches",
        type=sizes,
        default=[256, 1024],
        help="batch sizes of the match_many passes (default 256,1024)",
    )
    parser.add_argument("--store-dir", default=None, help="where the temporary stores go")
    parser.add_argument(
        "--workloads",
        type=lambda text: text.split(","),
        default=["begen"],
        help=f"comma-separated profiles of bexdb gen, each measured at every size (one of "
        f"{', '.join(PROFILES)}; default begen; the BEGen knobs apply to begen and wide)",
    )
    parser.add_argument(
        "--build",
        choices=("online", "load"),
        default="online",
        help="online: subscribe_many batches (default); load: the python bulk load",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"cProfile bexdb matching at n={PROFILE_SIZE} (else the largest size)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; returns 0, or raises :class:`AgreementError`."""
    pyplot()  # fail now, not after the run, if matplotlib is missing
    args.source_digests = source_digests()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes: list[int] = sorted(args.sizes)
    settings = {"max_cap": args.max_cap, "min_size": args.min_size}
    profile_size = PROFILE_SIZE if PROFILE_SIZE in sizes else max(sizes)
    loads = {name: _workload(name, max(sizes), args) for name in args.workloads}
    w = next(iter(loads.values()))
    s = w.summary
    results: dict[str, Any] = {
        "benchmark": "match",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "code": {"git_head": git_head(), "source_digests": args.source_digests},
        "settings": {
            "sizes": sizes,
            "events": args.events,
            "batch": args.batch,
            "index_settings": settings,
            "cache_bytes": args.cache_bytes,
            "build_minutes": args.build_minutes,
            "scan_seconds": args.scan_seconds,
            "checked_events": CHECKED_EVENTS,
        },
        "workload": {k: v for k, v in s.items() if k != "seconds"},
        "workloads": {
            name: {k: v for k, v in wl.summary.items() if k != "seconds"}
            for name, wl in loads.items()
        },
        "build": args.build,
        "notes": [
            "bexdb: own process (spawn), store opened read-only, Index.match per event incl. "
            "validation; figures from the second (warm) pass; first pass: empty page cache, "
            "OS page cache warm",
            "matcher memory: peak RSS (VmHWM; ru_maxrss is inherited from the parent across "
            "fork+exec) minus RSS after imports; includes LMDB file pages mapped in (shared, "
            "file-backed: see matcher_rss_end_file_mb)",
            "SCAN: first events until scan_seconds spent; its ratio uses bexdb's mean on the "
            "same events",
            "counting: in memory, per-attribute sorted constants + searchsorted (phase 1), "
            "CSR inverted index + bincount (phase 2)",
            "a row with build_complete false was measured on n_built subscriptions; "
            "build_s_extrapolated is an EXTRAPOLATION, not a measurement",
            "*_cpu_ms, *_per_cpu_s, *_cpu: the timing thread's CPU time (time.thread_time_ns) "
            "beside the wall time; wall minus CPU is mostly other processes' load",
        ],
        "rows": [],
        "agreement": {"passed": None, "events_checked": 0},
    }
    rows: list[dict[str, Any]] = results["rows"]
    compiled = {name: Compiled(Schema.from_json(wl.schema)) for name, wl in loads.items()}
    for n, name in [(n, name) for n in sizes for name in loads]:
        wl, profiled = loads[name], args.profile and n == profile_size and name == args.workloads[0]
        row, report = run_size(n, wl, compiled[name], args, settings, profiled)
        row["workload"] = name
        rows.append(row)
        results["agreement"] = {
            "passed": all(r["agreement_passed"] for r in rows),
            "events_checked": sum(r["agreement_checked"] for r in rows),
        }
        if report is not None:
            results["profile"] = {"n": row["n_built"], "report": report}
            (out / "profile.txt").write_text(report)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        _plot(out, rows)
        _log(
            f"n={n:,}: done; bexdb {row['bexdb_ms']['mean']:.2f} ms/event, counting "
            f"{row['ratio_counting']:.2f}x, SCAN {row['ratio_scan']:.1f}x"
        )
        if report is not None:
            print(f"cProfile of bexdb matching, n={row['n_built']:,} (warm, {args.events} events):")
            print(report)
    print(format_table(rows))
    print("\nmatch_many (same matcher process, same events):\n" + batched_breakdown(rows))
    print("\ndirect atoms an event (exact tests run, atoms that held):\n" + direct_table(rows))
    print(
        f"\nBEGen: {args.dims} attributes x {args.card} values, {args.bases} base events; "
        f"{args.events} events; workloads {', '.join(loads)}, built by {args.build}.  "
        f"bexdb: warm pass in a read-only matcher process (1st pass: empty page cache); "
        f"RSS+ = matcher peak RSS growth after imports.  Ratios are baseline / bexdb mean; "
        f"CPU: the timing thread's CPU time, which other processes' load does not stretch.  "
        f"Results and plot in {out}/"
    )
    changed = sorted({f for r in rows for f in r["sources_changed"]})
    if changed:
        print(
            "WARNING: these sources changed between the start of the run and a matcher process "
            f"(the figures may mix code versions): {', '.join(changed)}"
        )
    if any(not r["build_complete"] for r in rows):
        print(
            f"* build stopped after {args.build_minutes:g} min; the row was measured on the "
            "subscriptions built, and the build time for all n is EXTRAPOLATED (not measured)"
        )
    return 0


if __name__ == "__main__":
    script("bexdb bench match", __doc__, add_arguments, main)
