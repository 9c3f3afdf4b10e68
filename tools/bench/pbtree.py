"""``bexdb bench pbtree``: the PB+tree's build and search costs against the Grouped Filter.

What it measures, for each size n (default 1K, 10K, 100K, 1M predicates):

* **Build**: n distinct predicates ``(op, constant, id)`` — operators uniform over the six of
  :data:`pbtree.OPS`, integer constants uniform over ``[0, n)`` (so constants repeat a
  little), ids ``0..n-1`` in random constant order — inserted one by one into a PB+tree in a
  fresh store in a temporary directory, ``--batch`` inserts per write transaction, the store
  opened with ``sync=False`` and synced once at the end.  Reported: inserts per second
  (commits and the final sync included) and bytes of the LMDB file per predicate.
* **Search**, the same ``--searches`` event values (half existing constants, half
  ``constant + 0.5``, i.e. strictly between constants) against

  (a) the PB+tree **warm**: one read transaction over a page cache at least as large as the
      tree, after one untimed warm-up pass (the timed pass must see no cache miss);
  (b) the PB+tree **cold-ish**: the page cache cleared before each search, so every page
      visit is an LMDB get plus a decode.  The OS page cache still holds the file: this
      measures decoding, not the disk;
  (c) the **Grouped Filter** of the seed paper's section 5 (its reference [16]), in memory,
      built in the same run: for each of ``> >= < <=`` a ``sortedcontainers.SortedList``
      of ``(constant, id)``, a dict constant -> ids for ``=`` and one for ``!=``.  After the
      build it is frozen into per-structure parallel arrays (sorted constants as a list for
      ``bisect``, ids as a uint32 array), so a satisfied prefix or suffix is one numpy
      slice.  That read-optimised snapshot is the strongest fair comparator we could write
      in Python; the PB+tree, like it, returns a flat uint32 array
      (:meth:`pbtree.PBTree.search_array`).

  Per search: mean / median / p99 microseconds of each, the ratio PB+tree / Grouped Filter
  of the means, the mean pages visited (``PBTree.pages_read``) next to the model
  ``height + L / list_cap`` (L = satisfied ``< <= > >= !=`` predicates, counted by the
  baseline), and the mean result size.  Before timing, the first 50 values of every size
  are checked three ways — PB+tree, Grouped Filter and a numpy brute force over all n
  predicates must return the same id set — and the run stops with an error if not.

Output: a markdown table on stdout (one row per n), ``results.json`` (every figure, the
machine, the settings) and ``search_us.png`` / ``pages.png`` in ``--out``, rewritten after
each size so an interrupted run keeps what it measured.  ``--profile`` runs the warm
searches of n = 100000 (else the largest size) once more under cProfile and prints the top
15 functions by own time (also saved as ``profile.txt``).  Progress goes to stderr.

Cost: the default run took about 13 minutes on a shared 2-core machine, most of it at
n = 1M: the build (6.5 min; the per-transaction rate falls from ~40K to ~2K inserts/s as
the tree grows) and the cold-ish pass (~3.5 min: with this workload L grows like n/2, so
every search decodes ~10K list pages).  ``--cold-searches`` trims that pass.

    python -m tools.bench.pbtree --sizes 1000,10000 --searches 200 --out /tmp/bench
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import pstats
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pbtree import OPS, PBTree
from pbtree.tree import DEFAULT_CAPS
from storage import BexdbError, open_store
from tools.args import positive, sizes
from tools.bench.baselines.grouped import GroupedFilter
from tools.bench.harness import (
    AgreementError,
    column_table,
    figure,
    logger,
    machine,
    plot_means,
    pyplot,
    script,
    stats,
)

TREE = "bench"
CHECKED_VALUES = 50
PROFILE_SIZE = 100_000
LABELS = ("predicates n", "µs per search (mean; dotted: p99)", "PB+tree search vs Grouped Filter")
PLOTTED = (  # the lines of search_us.png: key of the row, label, style
    ("warm_us", "PB+tree warm (page cache holds the tree)", "o-"),
    ("cold_us", "PB+tree cold-ish (page cache cleared; OS cache warm)", "s-"),
    ("gf_us", "Grouped Filter (in memory)", "^-"),
)
# operator -> numpy comparison of (event value, constant), for the brute-force check
_NP_CMP: dict[str, Callable[..., np.ndarray]] = {
    "<": np.less,
    "<=": np.less_equal,
    "=": np.equal,
    "!=": np.not_equal,
    ">=": np.greater_equal,
    ">": np.greater,
}


_log = logger("bench pbtree")


# -- workload ---------------------------------------------------------------------------------


@dataclass
class Workload:
    """n predicates as parallel arrays (id = position) and the event values to search."""

    n: int
    ops: np.ndarray  # int8 index into OPS
    keys: np.ndarray  # int64 constants in [0, n)
    values: list[int | float]

    @classmethod
    def make(cls, n: int, searches: int, seed: int) -> Workload:
        rng = np.random.default_rng([seed, n])
        ops = rng.integers(0, len(OPS), n, dtype=np.int8)
        keys = rng.integers(0, n, n, dtype=np.int64)
        picks = rng.choice(keys, searches).tolist()
        between = rng.permutation(np.arange(searches) % 2 == 1).tolist()
        values: list[int | float] = [
            k + 0.5 if mid else k for k, mid in zip(picks, between, strict=True)
        ]
        return cls(n, ops, keys, values)

    def brute(self, value: int | float) -> np.ndarray:
        """Sorted ids of every predicate that holds for ``value`` (O(n), for the check)."""
        mask = np.zeros(self.n, dtype=bool)
        for code, op in enumerate(OPS):
            mask |= (self.ops == code) & _NP_CMP[op](value, self.keys)
        return np.flatnonzero(mask).astype(np.uint32)


# -- measuring -----------------------------------------------------------------------------------


def _time_each(fn: Callable[[Any], np.ndarray], values: Sequence[Any]) -> np.ndarray:
    """Microseconds of ``fn(value)`` for each value."""
    out = np.empty(len(values))
    clock = time.perf_counter_ns
    for i, value in enumerate(values):
        t0 = clock()
        fn(value)
        out[i] = clock() - t0
    return out / 1000.0


def _build(path: str, w: Workload, caps: dict[str, int], batch: int) -> dict[str, Any]:
    """Insert every predicate of ``w``; returns build figures and the tree's shape."""
    ops = [OPS[code] for code in w.ops.tolist()]
    keys = w.keys.tolist()
    # A cache of n pages holds the whole tree at every size (a page holds many predicates).
    store = open_store(path, sync=False, cache_pages=max(w.n, 4096))
    try:
        t0 = time.perf_counter()
        batch_rates: list[float] = []
        for start in range(0, w.n, batch):
            t_batch = time.perf_counter()
            with store.write() as txn:
                tree = PBTree(
                    txn,
                    TREE,
                    leaf_cap=caps["leaf_cap"],
                    internal_cap=caps["internal_cap"],
                    list_cap=caps["list_cap"],
                )
                for i in range(start, min(w.n, start + batch)):
                    tree.insert(ops[i], keys[i], i)
            done = min(w.n, start + batch)
            batch_rates.append((done - start) / (time.perf_counter() - t_batch))
            if w.n >= 100_000:
                _log(
                    f"n={w.n}: built {done:,}/{w.n:,} (this batch {batch_rates[-1]:,.0f}/s, "
                    f"~{(w.n - done) / batch_rates[-1]:.0f}s left at that rate)"
                )
        store.sync()
        seconds = time.perf_counter() - t0
        with store.read() as rtxn:
            tree = PBTree(rtxn, TREE)
            rec = tree.record
            pages = sum(1 for _ in rtxn.space_pages(rec["space"]))
            if len(tree) != w.n:
                raise AgreementError(f"n={w.n}: the PB+tree holds {len(tree)} predicates")
        return {
            "build_s": seconds,
            "inserts_per_s": w.n / seconds,
            "first_batch_inserts_per_s": batch_rates[0],
            "last_batch_inserts_per_s": batch_rates[-1],
            "bytes_on_disk": store.size_on_disk(),
            "bytes_per_predicate": store.size_on_disk() / w.n,
            "height": int(rec["height"]),
            "tree_pages": pages,
        }
    finally:
        store.close()


def _check_agreement(tree: PBTree, gf: GroupedFilter, w: Workload) -> int:
    """PB+tree, Grouped Filter and brute force agree on the first values; raise if not."""
    checked = w.values[:CHECKED_VALUES]
    for value in checked:
        truth = w.brute(value)
        got_pb = np.unique(tree.search_array(value))
        got_gf_raw = gf.search(value)
        got_gf = np.unique(got_gf_raw)
        if len(got_gf) != len(got_gf_raw):
            raise AgreementError(f"n={w.n}, value {value!r}: the Grouped Filter repeats ids")
        for name, got in (("Grouped Filter", got_gf), ("PB+tree", got_pb)):
            if not np.array_equal(got, truth):
                missing = np.setdiff1d(truth, got)[:10].tolist()
                extra = np.setdiff1d(got, truth)[:10].tolist()
                raise AgreementError(
                    f"n={w.n}, value {value!r}: the {name} returned {len(got)} ids, the brute "
                    f"force {len(truth)}; missing {missing}, extra {extra} (first 10)",
                    "run the PB+tree stress tests: python -m tests.pbtree.test_pbtree_stress",
                )
    return len(checked)


def _profile(tree: PBTree, values: Sequence[Any]) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for value in values:
        tree.search_array(value)
    profiler.disable()
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(15)
    return buf.getvalue()


def run_size(
    n: int, args: argparse.Namespace, caps: dict[str, int], profile: bool
) -> tuple[dict[str, Any], dict[str, list[float]], str | None]:
    """Every measurement for one size: the summary row, per-search series, a profile."""
    w = Workload.make(n, args.searches, args.seed)
    row: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(prefix="bexdb-bench-pbtree-") as path:
        _log(f"n={n}: building the PB+tree")
        row.update(_build(path, w, caps, args.batch))

        _log(f"n={n}: building the Grouped Filter")
        gf = GroupedFilter()
        t0 = time.perf_counter()
        for i, (code, key) in enumerate(zip(w.ops.tolist(), w.keys.tolist(), strict=True)):
            gf.insert(OPS[code], key, i)
        row["gf_build_s"] = time.perf_counter() - t0
        row["gf_inserts_per_s"] = n / row["gf_build_s"]
        t0 = time.perf_counter()
        gf.freeze()
        row["gf_freeze_s"] = time.perf_counter() - t0

        values = w.values
        store = open_store(path, cache_pages=row["tree_pages"] + 64)
        try:
            with store.read() as txn:
                tree = PBTree(txn, TREE)
                row["agreement_checked"] = _check_agreement(tree, gf, w)
                row["agreement_passed"] = True

                _log(f"n={n}: warm searches ({len(values)} after a warm-up pass)")
                for value in values:
                    tree.search_array(value)
                pages = np.empty(len(values))
                sizes_pb = np.empty(len(values))
                warm = np.empty(len(values))
                misses = store.cache.misses
                gc.collect()
                clock = time.perf_counter_ns
                for i, value in enumerate(values):
                    before = tree.pages_read
                    t0_ns = clock()
                    ids = tree.search_array(value)
                    warm[i] = clock() - t0_ns
                    pages[i] = tree.pages_read - before
                    sizes_pb[i] = len(ids)
                warm /= 1000.0
                row["warm_cache_misses"] = store.cache.misses - misses
                if row["warm_cache_misses"]:
                    _log(f"n={n}: WARNING: {row['warm_cache_misses']} cache misses when warm")

                _log(f"n={n}: Grouped Filter searches")
                gc.collect()
                base = _time_each(gf.search, values)
                sizes_gf = np.array([len(gf.search(v)) for v in values], dtype=float)
                lsat = np.array([gf.satisfied_list_items(v) for v in values], dtype=float)

                cold_values = values[: args.cold_searches]
                _log(f"n={n}: cold-ish searches ({len(cold_values)}, cache cleared each time)")

                cold = np.empty(len(cold_values))
                gc.collect()
                for i, value in enumerate(cold_values):
                    store.cache.clear()
                    t0_ns = clock()
                    tree.search_array(value)
                    cold[i] = clock() - t0_ns
                cold /= 1000.0

                report = None
                if profile:
                    store.cache.clear()
                    for value in values:  # warm again: cold pass left a partial cache
                        tree.search_array(value)
                    _log(f"n={n}: profiling the warm searches")
                    report = _profile(tree, values)
        finally:
            store.close()

    model = row["height"] + lsat / caps["list_cap"]
    row.update(
        {
            "searches": len(values),
            "cold_searches": len(cold_values),
            "warm_us": stats(warm, median="median"),
            "cold_us": stats(cold, median="median"),
            "gf_us": stats(base, median="median"),
            "ratio_warm_gf": float(warm.mean() / base.mean()),
            "ratio_cold_gf": float(cold.mean() / base.mean()),
            "ratio_warm_gf_median": float(np.median(warm) / np.median(base)),
            "pages_mean": float(pages.mean()),
            "pages_max": int(pages.max()),
            "satisfied_list_items_mean": float(lsat.mean()),
            "model_pages_mean": float(model.mean()),
            "pages_over_model": float(pages.mean() / model.mean()),
            "result_ids_mean": float(sizes_pb.mean()),
            "gf_result_ids_mean": float(sizes_gf.mean()),
        }
    )
    series = {"pages": pages.tolist(), "model_pages": model.tolist()}
    return row, series, report


# -- reporting -----------------------------------------------------------------------------------

_COLUMNS = (
    ("n", "{:,}", lambda r: r["n"]),
    ("build s", "{:.2f}", lambda r: r["build_s"]),
    ("inserts/s", "{:,.0f}", lambda r: r["inserts_per_s"]),
    ("B/pred", "{:.0f}", lambda r: r["bytes_per_predicate"]),
    ("height", "{}", lambda r: r["height"]),
    ("warm µs mean", "{:,.1f}", lambda r: r["warm_us"]["mean"]),
    ("warm p99", "{:,.1f}", lambda r: r["warm_us"]["p99"]),
    ("cold µs mean", "{:,.1f}", lambda r: r["cold_us"]["mean"]),
    ("cold p99", "{:,.1f}", lambda r: r["cold_us"]["p99"]),
    ("GF µs mean", "{:,.1f}", lambda r: r["gf_us"]["mean"]),
    ("GF p99", "{:,.1f}", lambda r: r["gf_us"]["p99"]),
    ("warm/GF", "{:.1f}x", lambda r: r["ratio_warm_gf"]),
    ("pages", "{:,.1f}", lambda r: r["pages_mean"]),
    ("h+L/c", "{:,.1f}", lambda r: r["model_pages_mean"]),
    ("result ids", "{:,.0f}", lambda r: r["result_ids_mean"]),
)


def format_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one row per size."""
    return column_table(_COLUMNS, rows)


def _plot(out: Path, rows: list[dict[str, Any]], series: dict[int, dict[str, list[float]]]) -> None:
    xs = [r["n"] for r in rows]
    with figure(out / "search_us.png", figsize=(7, 4.5)) as (_, ax):
        plot_means(ax, xs, rows, PLOTTED, LABELS)

    with figure(out / "pages.png", figsize=(6, 5)) as (_, ax):
        lo, hi = math.inf, 0.0
        for n, s in sorted(series.items()):
            ax.scatter(s["model_pages"], s["pages"], s=6, alpha=0.5, label=f"n = {n:,}")
            lo = min(lo, *s["model_pages"], *s["pages"])
            hi = max(hi, *s["model_pages"], *s["pages"])
        if hi > 0:
            ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="pages = height + L/c")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("height + L / list_cap  (L = satisfied < <= > >= != predicates)")
        ax.set_ylabel("pages visited per search")
        ax.set_title("PB+tree pages visited vs the O(log n + L/c) model")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)


# -- command line --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``bexdb bench pbtree``."""
    parser.add_argument(
        "--sizes",
        type=sizes,
        default=[1000, 10_000, 100_000, 1_000_000],
        help="comma-separated predicate counts (default 1000,10000,100000,1000000)",
    )
    parser.add_argument("--searches", type=positive, default=1000, help="event values per size")
    parser.add_argument(
        "--cold-searches",
        type=positive,
        default=None,
        help="time only the first N values cold (default: all of --searches)",
    )
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument(
        "--out", default="bench-results/pbtree", help="directory for results.json and plots"
    )
    parser.add_argument(
        "--batch", type=positive, default=20_000, help="inserts per write transaction"
    )
    for cap, default in DEFAULT_CAPS.items():
        parser.add_argument(
            "--" + cap.replace("_", "-"), type=positive, default=default, help=f"PB+tree {cap}"
        )
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"cProfile the warm searches of n={PROFILE_SIZE} (else the largest size)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; returns an exit code (0, or raises :class:`AgreementError`)."""
    pyplot()  # fail now, not after the run, if matplotlib is missing
    caps = {cap: getattr(args, cap) for cap in DEFAULT_CAPS}
    if min(caps.values()) < 3:
        raise BexdbError("PB+tree node capacities must be at least 3")
    if args.cold_searches is None or args.cold_searches > args.searches:
        args.cold_searches = args.searches
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes: list[int] = args.sizes
    profile_size = PROFILE_SIZE if PROFILE_SIZE in sizes else max(sizes)
    results: dict[str, Any] = {
        "benchmark": "pbtree",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),
        "settings": {
            "sizes": sizes,
            "searches": args.searches,
            "cold_searches": args.cold_searches,
            "seed": args.seed,
            "batch": args.batch,
            "caps": caps,
            "constants": "uniform integers over [0, n)",
            "operators": "uniform over " + " ".join(OPS),
            "values": "half existing constants, half constant + 0.5",
            "checked_values": CHECKED_VALUES,
        },
        "notes": [
            "warm: one read transaction, page cache >= tree pages, after an untimed warm-up",
            "cold: page cache cleared before each search; the OS page cache is still warm, so "
            "this measures LMDB gets and page decoding, not disk reads",
            "Grouped Filter: in memory, frozen into parallel arrays after a dynamic build",
            "no figure is extrapolated: every row was measured in this run",
        ],
        "rows": [],
        "agreement": {"passed": None, "values_checked": 0},
    }
    rows: list[dict[str, Any]] = results["rows"]
    series: dict[int, dict[str, list[float]]] = {}
    for n in sizes:
        row, series[n], report = run_size(n, args, caps, args.profile and n == profile_size)
        rows.append(row)
        results["agreement"] = {
            "passed": all(r["agreement_passed"] for r in rows),
            "values_checked": sum(r["agreement_checked"] for r in rows),
        }
        if report is not None:
            results["profile"] = {"n": n, "top15_by_tottime": report}
            (out / "profile.txt").write_text(report)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        _plot(out, rows, series)
        _log(f"n={n}: done; warm/GF {row['ratio_warm_gf']:.1f}x")
        if report is not None:
            print(f"cProfile of the warm searches, n={n} (top 15 by own time):")
            print(report)
    print(format_table(rows))
    print(
        f"\nwarm: page cache holds the tree; cold: page cache cleared per search (OS cache "
        f"warm); GF: in-memory Grouped Filter.  Caps {caps}.  Results and plots in {out}/"
    )
    return 0


if __name__ == "__main__":
    script("bexdb bench pbtree", __doc__, add_arguments, main)
