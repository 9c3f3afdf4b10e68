"""``bexdb bench compare``: bexdb against the published baselines, one workload axis at a time.

The axes of the BE-Tree / OpIndex / PS-Tree evaluations, each swept alone around the BEGen
default (:mod:`tools.bench.gen`: 400 int attributes of 48 values, subscriptions of 5-9
predicates derived from 25 base events, events of 15 attributes, 30% ``=``, uniform
attributes, ~1% match rate):

========  =====================================  ==========================================
axis      what changes                           how
========  =====================================  ==========================================
subs      number of subscriptions                ``subs``
dims      dimensions (attributes)                ``dims``
card      values per dimension                   ``card``
size      mean predicates per subscription       BEGen draws k in [s-2, s+2] from events of
                                                 max(15, s+10) attributes (see below)
rate      matching probability                   ``target_rate`` with ``bases`` ~ 0.25/rate
                                                 (the reachable band scales with 1/bases)
zipf      Zipf skew of attribute popularity      ``zipf``
eq        share of ``=`` predicates              ``eq_share``
========  =====================================  ==========================================

For each point: one workload (``--events`` timed events plus ``--sample`` events that the
baselines may learn from -- OpIndex's pivot frequencies, PS-Tree's event counters -- and
that are never timed), the subscriptions compiled once (shared by all baselines, not in their
build times), then for every index

* **build**: seconds from the compiled clauses (bexdb: batch build with :class:`betree.disk.bulk.
  Batch` in a fresh store plus the compacting copy ``bexdb load`` publishes);
* **memory**: for the in-memory baselines, the bytes a second, traced build leaves allocated
  (``tracemalloc``; the shared compiled clauses excluded); for bexdb, the store's size on
  disk and the matcher process's peak RSS growth;
* **match**: mean / p50 / p99 ms per event.  bexdb runs in its own process (spawn) on the
  store opened read-only, and the warm (second) pass is reported, as in ``bench match``.
  Each in-memory index is timed on the events until ``--match-seconds`` are spent (SCAN:
  ``--scan-seconds``), at least the first ``CHECKED_EVENTS``.

Before anything is reported, every index must return the same ids as SCAN on the first
``CHECKED_EVENTS`` events (:class:`~tools.bench.harness.AgreementError` otherwise).  A
PS-Tree variant that would exceed ``--max-entries`` (range predicates over many spaces: the
papers' O(N_p^2) per dimension) is skipped at that point and marked so; a point whose
workload or build fails is recorded with the error and the sweep goes on (a disagreement
never is: it stops the run).

The ``size`` axis changes BEGen's per-subscription and per-event attribute counts, which
:class:`tools.bench.gen.Params` does not expose: the module's constants are set for the one
``make_workload`` call and restored (:func:`_begen_shape`).

Output: one markdown table per axis and metric on stdout, ``results.json`` (rewritten after
every point) and ``<axis>.png`` (match ms, build s and memory against the axis value, log
scales where the papers use them) in ``--out``.  ``--quick`` takes three points per axis
around 20,000 subscriptions and fewer events (measured on a shared 2-core machine: 2-5
minutes per axis, ~25 minutes for all seven; the 100,000-subscription point alone 3-5
minutes).  The full default (100,000 subscriptions off the subs axis, 5-6 points per axis, up
to 1M) takes hours: per point, compiling (~40 µs a subscription), two builds of each baseline
(the second traced for memory; ``--no-memory`` skips it) and SCAN's time box dominate.

    python -m tools.bench.compare --quick --axes subs,card --out docs/bench/compare
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from betree.disk.bulk import Batch
from betree.disk.writer import gc_paused
from betree.index import Index
from betree.lang.schema import Schema
from storage.errors import BexdbError
from storage.store import DEFAULT_CACHE_BYTES
from tools.args import positive
from tools.bench import gen
from tools.bench.baselines import Baseline
from tools.bench.baselines.counting import Counting
from tools.bench.baselines.opindex import OpIndex
from tools.bench.baselines.pstree import MAX_ENTRIES, PSTBloom, PSTHash, TooBig
from tools.bench.baselines.scan import Compiled, Scan
from tools.bench.gen import make_workload
from tools.bench.harness import (
    AgreementError,
    changed_sources,
    check_agreement,
    figure,
    git_head,
    logger,
    machine,
    markdown_table,
    pyplot,
    script,
    source_digests,
    stats,
)
from tools.bench.match import CHECKED_EVENTS, MatcherJob, match_in_subprocess

INDEXES = ("SCAN", "counting", "OpIndex", "PSTBloom", "PSTHash", "bexdb")
DEFAULT_SIZE = 7  # BEGen's 5..9 predicates


@dataclass(frozen=True)
class Axis:
    label: str
    full: tuple[float, ...]
    quick: tuple[float, ...]
    log: bool
    default: float


_SUBS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
_CARD = (48, 300, 1_000, 10_000, 100_000)
AXES: dict[str, Axis] = {
    "subs": Axis("subscriptions", _SUBS, _SUBS[:3], True, 100_000),
    "dims": Axis("dimensions", (50, 100, 200, 400, 800, 1400), (50, 400, 1400), True, 400),
    "card": Axis("dimension cardinality", _CARD, _CARD[::2], True, 48),
    "size": Axis("predicates per subscription", (5, 10, 15, 20, 30), (5, 15, 30), False, 7),
    "rate": Axis(
        "matching probability", (0.001, 0.003, 0.01, 0.03, 0.1), (0.001, 0.01, 0.1), True, 0.01
    ),
    "zipf": Axis("Zipf skew of attributes", (0, 0.5, 1, 1.5, 2), (0, 1, 2), False, 0),
    "eq": Axis("share of = predicates", (0, 0.2, 0.4, 0.6, 0.8, 1.0), (0, 0.3, 1.0), False, 0.3),
}


_log = logger("bench compare")


@contextmanager
def _begen_shape(size: int) -> Iterator[int]:
    """BEGen with subscriptions of ``size - 2 .. size + 2`` predicates; yields the event size.

    ``size`` = :data:`DEFAULT_SIZE` leaves BEGen as it is (5..9, events of 15 attributes).
    """
    saved = (gen.MIN_PREDS, gen.MAX_PREDS, gen.EVENT_ATTRS)
    if size == DEFAULT_SIZE:
        yield gen.EVENT_ATTRS
        return
    gen.MIN_PREDS, gen.MAX_PREDS = max(1, size - 2), size + 2
    gen.EVENT_ATTRS = max(saved[2], size + 10)
    try:
        yield gen.EVENT_ATTRS
    finally:
        gen.MIN_PREDS, gen.MAX_PREDS, gen.EVENT_ATTRS = saved


def point_params(axis: str, value: float, base_subs: int) -> dict[str, Any]:
    """The workload parameters of one point: the BEGen default with ``axis`` set."""
    p: dict[str, Any] = {
        "subs": base_subs,
        "dims": 400,
        "card": 48,
        "size": DEFAULT_SIZE,
        "zipf": 0.0,
        "eq_share": 0.3,
        "bases": 25,
        "target_rate": 0.01,
    }
    if axis == "subs":
        p["subs"] = int(value)
    elif axis == "dims":
        p["dims"] = int(value)
    elif axis == "card":
        p["card"] = int(value)
    elif axis == "size":
        p["size"] = int(value)
    elif axis == "rate":
        p["target_rate"] = float(value)
        p["bases"] = max(2, round(0.25 / value))
    elif axis == "zipf":
        p["zipf"] = float(value)
    elif axis == "eq":
        p["eq_share"] = float(value)
    else:
        raise ValueError(f"unknown axis {axis!r}")
    return p


# -- one point ----------------------------------------------------------------------------------


def _build_bexdb(
    root: Path, w: gen.Workload, compiled: Compiled, settings: dict[str, int]
) -> dict[str, Any]:
    """Batch-build the store (BE-B) and write the compacting copy that ``load`` publishes."""
    raw, final = root / "raw", root / "store"
    t0 = time.perf_counter()
    with gc_paused(), Index.open(raw, schema=w.schema, settings=settings, sync=False) as idx:
        batch = Batch(idx)
        for (ident, expr), clauses in zip(w.subs, compiled.clauses, strict=True):
            batch.add(ident, expr, clauses)
        batch.build()
        idx.store.copy_compact(final)
    seconds = time.perf_counter() - t0
    with Index.open(final, readonly=True) as idx:
        size = idx.store.size_on_disk()
        built = len(idx)
    return {"path": str(final), "build_s": seconds, "disk_mb": size / 2**20, "n": built}


def _traced_mb(make: Callable[[], object]) -> float:
    """MB that ``make()`` leaves allocated (its result kept alive until measured)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        obj = make()
        after = tracemalloc.get_traced_memory()[0]
        del obj
    finally:
        tracemalloc.stop()
    return (after - before) / 2**20


def _time_matches(
    index: Baseline, values: list[dict[str, Any]], keep: int, budget_s: float
) -> tuple[np.ndarray, list[list[Any]], np.ndarray]:
    """ms per event on the first events until ``budget_s`` is spent (at least ``keep``)."""
    ms: list[float] = []
    found: list[int] = []
    kept: list[list[Any]] = []
    spent = 0.0
    clock = time.perf_counter_ns
    gc.collect()
    for i, v in enumerate(values):
        if i >= keep and spent > budget_s:
            break
        t0 = clock()
        ids = index.match(v)
        dt = (clock() - t0) / 1e6
        ms.append(dt)
        found.append(len(ids))
        spent += dt / 1000
        if i < keep:
            kept.append(ids)
    return np.array(ms), kept, np.array(found)


def _baselines(
    compiled: Compiled, sample: list[dict[str, Any]], max_entries: int
) -> dict[str, Callable[[], Baseline]]:
    return {
        "SCAN": lambda: Scan(compiled),
        "counting": lambda: Counting(compiled),
        "OpIndex": lambda: OpIndex(compiled, sample=sample),
        "PSTBloom": lambda: PSTBloom(compiled, sample=sample, max_entries=max_entries),
        "PSTHash": lambda: PSTHash(compiled, sample=sample, max_entries=max_entries),
    }


def run_point(axis: str, value: float, args: argparse.Namespace) -> dict[str, Any]:
    """Generate, build every index, check agreement, time; one row of results."""
    p = point_params(axis, value, args.base_subs)
    label = f"{axis}={value:g}"
    _log(f"{label}: generating {p['subs']:,} subscriptions")
    with _begen_shape(p["size"]) as event_attrs:
        w = make_workload(
            subs=p["subs"],
            events=args.sample + args.events,
            seed=args.seed,
            dims=p["dims"],
            card=p["card"],
            zipf=p["zipf"],
            eq_share=p["eq_share"],
            bases=p["bases"],
            target_rate=p["target_rate"],
            check=False,  # agreement with SCAN below checks every index instead
        )
    s = w.summary
    schema = Schema.from_json(w.schema)
    values = [schema.validate_event(e) for e in w.events]
    sample, timed = values[: args.sample], values[args.sample :]
    events = w.events[args.sample :]
    keep = min(CHECKED_EVENTS, len(timed))
    row: dict[str, Any] = {
        "axis": axis,
        "value": value,
        "params": {**p, "event_attrs": event_attrs, "scale": s["scale"]},
        "calibration_rate": s.get("calibration_rate"),
        "events": len(timed),
        "indexes": {},
    }
    t0 = time.perf_counter()
    compiled = Compiled(schema)
    compiled.extend(w.subs)
    row["compile_s"] = time.perf_counter() - t0
    got: dict[str, list[list[Any]]] = {}
    found: dict[str, np.ndarray] = {}
    res: dict[str, dict[str, Any]] = row["indexes"]

    for name, make in _baselines(compiled, sample, args.max_entries).items():
        if name not in args.indexes:
            continue
        _log(f"{label}: {name}")
        gc.collect()
        t0 = time.perf_counter()
        try:
            index = make()
        except TooBig as exc:
            res[name] = {"skipped": str(exc)}
            _log(f"{label}: {name} skipped: {exc}")
            continue
        build_s = time.perf_counter() - t0
        budget = args.scan_seconds if name == "SCAN" else args.match_seconds
        ms, kept, nfound = _time_matches(index, timed, keep, budget)
        entries = getattr(index, "entries", None)
        del index
        mem = _traced_mb(make) if args.memory and name != "SCAN" else None
        res[name] = {
            "build_s": build_s if name != "SCAN" else 0.0,
            "memory_mb": mem,
            "ms": stats(ms),
            "events_timed": len(ms),
            "entries": entries,
        }
        got[name] = kept
        found[name] = nfound

    if "bexdb" in args.indexes:
        with tempfile.TemporaryDirectory(prefix="bexdb-compare-", dir=args.store_dir) as tmp:
            _log(f"{label}: bexdb batch build")
            built = _build_bexdb(Path(tmp), w, compiled, {})
            _log(f"{label}: bexdb matching {len(events)} events x2 in a read-only process")
            out = match_in_subprocess(
                MatcherJob(built["path"], events, keep, args.cache_bytes, False)
            )
        warm = out["passes"][1]
        row["sources_changed"] = changed_sources(args.source_digests, out["source_digests"])
        if row["sources_changed"]:
            _log(f"{label}: WARNING: sources changed since the start: {row['sources_changed']}")
        res["bexdb"] = {
            "build_s": built["build_s"],
            "disk_mb": built["disk_mb"],
            "memory_mb": (out["maxrss_kb"] - out["rss_after_imports_kb"]) / 1024,
            "ms": stats(np.array(warm["ms"])),
            "first_pass_ms": stats(np.array(out["passes"][0]["ms"])),
            "events_timed": len(warm["ms"]),
            "candidates_mean": float(np.mean(warm["candidates"])),
            "pages_mean": float(np.mean(warm["pages"])),
        }
        got["bexdb"] = warm["kept"]
        found["bexdb"] = np.array(warm["matches"])

    order = [n for n in INDEXES if n in got]
    where = f"n={p['subs']}"
    row["agreement_checked"] = check_agreement(where, events, {n: got[n] for n in order})
    counts = [found[n] for n in order]
    if counts:
        k = min(len(c) for c in counts)
        row["match_rate"] = float(counts[-1][:k].mean()) / p["subs"] if k else None
    return row


# -- reporting ------------------------------------------------------------------------------------


def _cell(entry: dict[str, Any] | None, metric: str) -> str:
    if entry is None:
        return "-"
    if "skipped" in entry:
        return "skipped"
    if metric in ("ms", "p50"):
        return f"{entry['ms']['mean' if metric == 'ms' else 'p50']:.3g}"
    v = entry.get(metric)
    return "-" if v is None else f"{v:.3g}"


def format_tables(axis: str, rows: list[dict[str, Any]], names: list[str]) -> str:
    """Markdown: match ms, build s and memory MB of every index against the axis value."""
    out = []
    failed = [r for r in rows if "failed" in r]
    rows = [r for r in rows if "failed" not in r]
    for metric, title in (
        ("ms", "mean match ms per event"),
        ("p50", "median match ms per event"),
        ("build_s", "build s"),
        ("memory_mb", "memory MB (bexdb: matcher RSS growth; disk in results.json)"),
    ):
        heads = [AXES[axis].label, "match rate", *names]
        cells = [
            [
                f"{r['value']:g}",
                f"{r['match_rate']:.2%}" if r.get("match_rate") is not None else "-",
                *(_cell(r["indexes"].get(n), metric) for n in names),
            ]
            for r in rows
        ]
        out.append(f"**{axis}: {title}**\n\n" + markdown_table(heads, cells))
    out += [f"{axis}={r['value']:g}: FAILED: {r['failed']}" for r in failed]
    return "\n\n".join(out)


def _plot(out: Path, axis: str, rows: list[dict[str, Any]], names: list[str]) -> None:
    spec = AXES[axis]
    rows = [r for r in rows if "failed" not in r]
    xs = [r["value"] for r in rows]
    with figure(out / f"{axis}.png", 1, 3, dpi=110, figsize=(15, 4.2)) as (fig, axes):
        _panels(fig, axes, spec, xs, rows, names)


def _panels(
    fig: Any, axes: Any, spec: Axis, xs: list[float], rows: list[dict[str, Any]], names: list[str]
) -> None:
    """Match ms, build s and memory of every index against the axis value, one panel each."""
    for ax, (metric, ylabel) in zip(
        axes,
        (("ms", "mean ms per event"), ("build_s", "build s"), ("memory_mb", "memory MB")),
        strict=True,
    ):
        for name in names:
            pts = []
            for x, r in zip(xs, rows, strict=True):
                e = r["indexes"].get(name)
                if not e or "skipped" in e:
                    continue
                y = e["ms"]["mean"] if metric == "ms" else e.get(metric)
                if y is not None and y > 0 and not math.isnan(y):
                    pts.append((x, y))
            if pts:
                color = f"C{INDEXES.index(name)}"  # one colour per index in every panel
                ax.plot(*zip(*pts, strict=True), "o-", color=color, label=name)
        if spec.log:
            ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(spec.label)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"bexdb vs baselines: {spec.label} (BEGen; bexdb warm, from disk)")


# -- command line ---------------------------------------------------------------------------------


def _points(text: str) -> tuple[str, list[float]]:
    axis, sep, vals = text.partition("=")
    if not sep or axis not in AXES:
        raise argparse.ArgumentTypeError(f"expected AXIS=v1,v2,... with AXIS in {list(AXES)}")
    try:
        return axis, [float(v) for v in vals.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad values in {text!r}") from None


def _choice_list(what: str, allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """An argument type: comma-separated names, each one of ``allowed``."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {what} {bad}; choose from {list(allowed)}")
        return names

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``bexdb bench compare``."""
    parser.add_argument(
        "--axes",
        type=_choice_list("axis", list(AXES)),
        default=None,
        help=f"comma-separated, of {','.join(AXES)} (default: those of --points, else all)",
    )
    parser.add_argument(
        "--points",
        type=_points,
        action="append",
        default=[],
        metavar="AXIS=V1,V2",
        help="the values of one axis (repeatable); default: the axis's full or --quick set",
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 points per axis, 20,000 subscriptions, 100 events"
    )
    parser.add_argument(
        "--base-subs", type=positive, default=None, help="subscriptions off the subs axis (100000)"
    )
    parser.add_argument("--events", type=positive, default=None, help="timed events (300)")
    parser.add_argument(
        "--sample", type=positive, default=200, help="events the baselines learn from (200)"
    )
    parser.add_argument("--seed", type=int, default=1, help="workload seed (1)")
    parser.add_argument(
        "--indexes", type=_choice_list("index", INDEXES), default=list(INDEXES), help="which to run"
    )
    parser.add_argument(
        "--scan-seconds", type=float, default=10.0, help="SCAN time box per point (10)"
    )
    parser.add_argument(
        "--match-seconds", type=float, default=30.0, help="time box of each other index (30)"
    )
    parser.add_argument(
        "--max-entries",
        type=positive,
        default=MAX_ENTRIES,
        help=f"skip a PS-Tree variant past this many entries ({MAX_ENTRIES})",
    )
    parser.add_argument(
        "--no-memory", dest="memory", action="store_false", help="skip the traced builds"
    )
    parser.add_argument(
        "--cache-bytes", type=positive, default=DEFAULT_CACHE_BYTES, help="bexdb's page cache"
    )
    parser.add_argument("--store-dir", default=None, help="where the temporary stores go")
    parser.add_argument("--out", default="bench-results/compare", help="results directory")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other axes of an earlier results.json in --out (noted in earlier_runs)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the sweep; returns 0, or raises :class:`~tools.bench.harness.AgreementError`."""
    pyplot()  # fail now, not after the run, if matplotlib is missing
    if args.base_subs is None:
        args.base_subs = 20_000 if args.quick else AXES["subs"].default
    if args.events is None:
        args.events = 100 if args.quick else 300
    chosen = dict(args.points)
    args.source_digests = source_digests()
    if args.axes is None:
        args.axes = list(chosen) or list(AXES)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in INDEXES if n in args.indexes]
    results: dict[str, Any] = {
        "benchmark": "compare",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "code": {"git_head": git_head(), "source_digests": args.source_digests},
        "settings": {
            k: v
            for k, v in vars(args).items()
            if k not in ("func", "bench_main", "points", "source_digests")
        },
        "notes": [
            "in-memory baselines timed in this process; bexdb in its own process, store "
            "read-only, warm (second) pass",
            "memory: tracemalloc of a second build (shared compiled clauses excluded); bexdb: "
            "matcher peak RSS growth after imports (disk_mb: the store on disk)",
            "baselines learn from the first `sample` events (never timed); bexdb does not",
            "every index agreed with SCAN on the first events of every point",
        ],
        "axes": {},
    }
    old = out / "results.json"
    if args.merge and old.exists():  # keep the axes this run does not redo, with their runs
        prev = json.loads(old.read_text())
        kept = {a: rows for a, rows in prev["axes"].items() if a not in args.axes}
        results["axes"].update(kept)
        results["earlier_runs"] = [
            *prev.get("earlier_runs", []),
            {k: prev[k] for k in ("started", "code", "settings") if k in prev}
            | {"axes_kept": sorted(kept)},
        ]
    tables = []
    for axis in args.axes:
        spec = AXES[axis]
        values = chosen.get(axis) or list(spec.quick if args.quick else spec.full)
        rows: list[dict[str, Any]] = []
        results["axes"][axis] = rows
        for value in values:
            t0 = time.perf_counter()
            try:
                rows.append(run_point(axis, value, args))
            except AgreementError:
                raise
            except (BexdbError, MemoryError) as exc:  # one point failing ends nothing else
                _log(f"{axis}={value:g}: FAILED: {exc}")
                rows.append({"axis": axis, "value": value, "failed": str(exc)})
            rows[-1]["seconds"] = time.perf_counter() - t0
            (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
            _log(f"{axis}={value:g}: done in {rows[-1]['seconds']:.0f}s")
        _plot(out, axis, rows, names)
        tables.append(format_tables(axis, rows, names))
        print(tables[-1] + "\n", flush=True)
    print(
        "bexdb: batch-built store, warm pass in a read-only matcher process; baselines in "
        f"memory.  Results and plots in {out}/"
    )
    return 0


if __name__ == "__main__":
    script("bexdb bench compare", __doc__, add_arguments, main)
