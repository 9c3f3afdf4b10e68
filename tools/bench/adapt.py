"""``bexdb bench adapt``: matching while the workload changes, with and without
self-adjustment — after the dynamic-workload experiment of the BE-Tree paper (Fig. 13).

Two stores built the same way, one with the ``adjust`` setting off, one with it on
(:mod:`betree.disk.adjust`).  On both, in lockstep:

1. insert a uniform BEGen workload of ``--subs`` subscriptions (ids ``u0..``), one
   ``subscribe_many`` of ``--batch`` at a time (each inserted by the dynamic algorithm);
2. replace it subscription by subscription with a Zipf workload of the same size (ids
   ``z0..``, ``--zipf`` skew): delete ``u_i``, insert ``z_i``, in ``--checkpoints`` equal
   steps;
3. and back: delete ``z_i``, insert ``u_i``.

At every checkpoint both stores match the same fixed event set — half uniform events,
half Zipf events (each workload's own BEGen events) — ``--repeat`` times, taking turns,
timing every ``Index.match`` call (validation included) in CPU time of the process and
keeping each event's fastest (the machine this was written on is shared: wall-clock
times of one configuration varied by 2x), and reading candidates and pages per event
from ``idx.engine.last_stats``.  The adjusting store collects statistics in memory while it matches
(automatic flushing off); then ``index.adjustment.flush()`` runs once, timed apart (``adjust s``),
with a window of one checkpoint's passes, so each checkpoint ranks and recycles what its
passes measured.  Both stores must return the same ids for every event (else
:class:`AgreementError`); at the first, middle and last checkpoints the first
``CHECKED_EVENTS`` events are also compared with the brute-force evaluator.

Collection overhead: at the first checkpoint (identical trees) the store without
adjustment matches the events ``OVERHEAD_ROUNDS`` times with collecting off and on in
turn; the lowest per-round means give the overhead of collecting.

Output: a markdown table on stdout, ``results.json`` and ``adapt_ms.png`` (ms per event
and candidates per event along the transition) in ``--out``.  Progress goes to stderr.

Cost: the churn dominates (2 x 2 x ``--subs`` insertions and deletions, ~1,500/s), then
``(2 x checkpoints + 1) x 2 x events`` matches.  The defaults (5,000 subscriptions, 400
events, 8 checkpoints per transition) take about three minutes.

    python -m tools.bench.adapt --subs 5000 --events 400 --out docs/bench/adapt
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from betree.disk.tree import DEFAULTS
from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from tools.args import positive
from tools.bench import harness
from tools.bench.gen import make_workload
from tools.bench.harness import AgreementError

CHECKED_EVENTS = 10
OVERHEAD_ROUNDS = 15
MODES = ("off", "on")


_log = harness.logger("bench adapt")


def _timed_passes(
    idx: dict[str, Index], events: Sequence[dict[str, Any]], repeat: int
) -> dict[str, Any]:
    """Every store matches every event ``repeat`` times, the stores taking turns; an
    event's time is its fastest, in CPU time of this process (the machine is shared:
    both filter out the other processes), with candidates, pages and answers from the
    last pass."""
    clock = time.process_time_ns
    ms = {m: np.full(len(events), np.inf) for m in idx}
    out: dict[str, Any] = {}
    for _ in range(repeat):
        for m, index in idx.items():
            gc.collect()  # no collection of the churn's garbage inside the timed pass
            cands = np.empty(len(events))
            pages = np.empty(len(events))
            answers = []
            for i, event in enumerate(events):
                t0 = clock()
                ids = index.match(event)
                ms[m][i] = min(ms[m][i], (clock() - t0) / 1e6)
                cands[i] = index.engine.last_stats["candidates"]
                pages[i] = index.engine.last_stats["pages"]
                answers.append(sorted(map(str, ids)))
            out[m] = {
                "ms_mean": float(ms[m].mean()),
                "ms_p50": float(np.median(ms[m])),
                "candidates": float(cands.mean()),
                "pages": float(pages.mean()),
                "matches": float(np.mean([len(a) for a in answers])),
                "answers": answers,
            }
    return out


def _brute(
    schema: Schema, live: dict[str, str], events: Sequence[dict[str, Any]]
) -> list[list[str]]:
    nodes = {ident: compile_expr(text, schema) for ident, text in live.items()}
    out = []
    for event in events:
        values = schema.validate_event(event)
        out.append(sorted(ident for ident, node in nodes.items() if evaluate(node, values)))
    return out


def _overhead(idx: Index, events: Sequence[dict[str, Any]], repeat: int) -> dict[str, float]:
    """Mean ms per event with statistics collection off and on, on the same tree: the
    lowest over ``OVERHEAD_ROUNDS`` rounds (off and on in turn) of the mean of each
    event's fastest of ``repeat`` passes."""
    ms: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(OVERHEAD_ROUNDS):
        for collecting in (False, True):
            idx.engine.collecting = collecting
            ms[collecting].append(_timed_passes({"x": idx}, events, repeat)["x"]["ms_mean"])
    idx.engine.collecting = False
    idx.adjustment.discard()  # a measurement, not feedback
    off, on = min(ms[False]), min(ms[True])
    return {"off_ms": off, "on_ms": on, "overhead": on / off - 1.0, "rounds": OVERHEAD_ROUNDS}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole experiment; returns the results document."""
    n, per = args.subs, max(1, args.events // 2)
    common = {"dims": args.dims, "card": args.card, "seed": args.seed, "check": False}
    _log(f"generating uniform and Zipf ({args.zipf}) workloads of {n:,} subscriptions")
    uni = make_workload(subs=n, events=per, zipf=0.0, **common)
    zipf = make_workload(subs=n, events=per, zipf=args.zipf, **{**common, "seed": args.seed + 1})
    events = [e for pair in zip(uni.events, zipf.events, strict=True) for e in pair]
    u_subs = [(f"u{i}", text) for i, text in uni.subs]
    z_subs = [(f"z{i}", text) for i, text in zipf.subs]
    schema = Schema.from_json(uni.schema)
    base = {"max_cap": args.max_cap, "min_size": args.min_size}
    settings = {
        "off": {**base, "adjust": 0},
        "on": {
            **base,
            "adjust": 1,
            "adjust_window": len(events) * args.repeat,
            "theta": args.theta,
        },
    }
    live = dict(u_subs)
    rows: list[dict[str, Any]] = []
    churn_s = dict.fromkeys(MODES, 0.0)
    plan: list[tuple[list[str], list[tuple[str, str]]]] = [([], [])]  # (delete, insert)
    step = -(-n // args.checkpoints)
    for src, dst in ((u_subs, z_subs), (z_subs, u_subs)):
        for k in range(0, n, step):
            plan.append(([i for i, _ in src[k : k + step]], dst[k : k + step]))
    with tempfile.TemporaryDirectory(prefix="bexdb-bench-adapt-", dir=args.store_dir) as tmp:
        idx = {m: Index.open(Path(tmp, m), schema=uni.schema, settings=settings[m]) for m in MODES}
        idx["on"].engine.auto_adjust = False
        try:
            for m in MODES:
                t0 = time.perf_counter()
                for k in range(0, n, args.batch):
                    idx[m].subscribe_many(u_subs[k : k + args.batch])
                churn_s[m] += time.perf_counter() - t0
            _log(f"inserted {n:,} uniform subscriptions")
            overhead = _overhead(idx["off"], events, args.repeat)
            _log(f"collection overhead {overhead['overhead']:+.1%}")
            for c, (gone, new) in enumerate(plan):
                for ident in gone:
                    del live[ident]
                live.update(new)
                for m in MODES:
                    t0 = time.perf_counter()
                    for k in range(0, len(new), args.batch):
                        idx[m].unsubscribe_many(gone[k : k + args.batch])
                        idx[m].subscribe_many(new[k : k + args.batch])
                    churn_s[m] += time.perf_counter() - t0
                rows.append(_checkpoint(c, len(plan), idx, events, live, schema, args.repeat))
                r = rows[-1]
                _log(
                    f"checkpoint {c}: zipf {r['zipf_share']:.0%}, off {r['off']['ms_mean']:.2f} "
                    f"ms, on {r['on']['ms_mean']:.2f} ms, recycled {r['adjust']['reinserted']}"
                )
            for m in MODES:
                idx[m].check()
        finally:
            for m in MODES:
                idx[m].close()
    return {
        "benchmark": "adapt",
        "started": args.started,
        "machine": harness.machine(),
        "code": {"git_head": harness.git_head(), "source_digests": harness.source_digests()},
        "settings": {
            "subs": n,
            "events": len(events),
            "checkpoints_per_transition": args.checkpoints,
            "batch": args.batch,
            "repeat": args.repeat,
            "zipf": args.zipf,
            "index_settings": settings,
        },
        "workloads": {"uniform": uni.summary, "zipf": zipf.summary},
        "collection_overhead": overhead,
        "churn_s": churn_s,
        "rows": rows,
        "notes": [
            "ms per event: CPU time of Index.match in this process (fastest of `repeat` "
            "passes), warm page cache, validation included",
            "on: statistics collected while matching, index.adjustment.flush() once after each "
            "checkpoint (window = its repeat x events), timed apart as adjust_s",
            "both stores answered every event alike; checked against the brute-force "
            "evaluator at the first, middle and last checkpoints",
        ],
    }


def _checkpoint(
    c: int,
    count: int,
    idx: dict[str, Index],
    events: Sequence[dict[str, Any]],
    live: dict[str, str],
    schema: Schema,
    repeat: int,
) -> dict[str, Any]:
    """Both stores match the events; the adjusting one then adjusts."""
    zipf_share = sum(1 for ident in live if ident[0] == "z") / len(live)
    row: dict[str, Any] = {"checkpoint": c, "zipf_share": zipf_share}
    row.update(_timed_passes(idx, events, repeat))
    off, on = row["off"]["answers"], row["on"]["answers"]
    if off != on:
        bad = next(i for i in range(len(off)) if off[i] != on[i])
        raise AgreementError(f"checkpoint {c}: the stores disagree on event {bad}: {events[bad]}")
    if c in (0, count // 2, count - 1):
        want = _brute(schema, live, events[:CHECKED_EVENTS])
        if want != row["off"]["answers"][:CHECKED_EVENTS]:
            raise AgreementError(f"checkpoint {c}: the stores disagree with the evaluator")
    for m in MODES:
        del row[m]["answers"]
    row["adjust"] = idx["on"].adjustment.flush()
    return row


# -- reporting -----------------------------------------------------------------------------------


def format_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one row per checkpoint."""
    heads = (
        "ckpt", "zipf", "off ms", "on ms", "on/off", "off cands", "on cands",
        "off pages", "on pages", "adjust s", "recycled p/l", "moved",
    )  # fmt: skip
    lines = []
    for r in rows:
        off, on, adj = r["off"], r["on"], r["adjust"]
        lines.append(
            (
                str(r["checkpoint"]),
                f"{r['zipf_share']:.0%}",
                f"{off['ms_mean']:.2f}",
                f"{on['ms_mean']:.2f}",
                f"{on['ms_mean'] / off['ms_mean']:.2f}",
                f"{off['candidates']:,.0f}",
                f"{on['candidates']:,.0f}",
                f"{off['pages']:,.0f}",
                f"{on['pages']:,.0f}",
                f"{adj['seconds']:.2f}",
                f"{adj['recycled_pnodes']}/{adj['recycled_lnodes']}",
                f"{adj['reinserted']:,}",
            )
        )
    return harness.markdown_table(heads, lines)


def _plot(out: Path, rows: list[dict[str, Any]]) -> None:
    xs = [r["checkpoint"] for r in rows]
    grid = harness.figure(out / "adapt_ms.png", 2, 1, figsize=(7.5, 6), sharex=True)
    with grid as (_, (top, bottom)):
        for m, label, style in (("off", "self-adjustment off", "o-"), ("on", "on", "s-")):
            top.plot(xs, [r[m]["ms_mean"] for r in rows], style, label=label)
            bottom.plot(xs, [r[m]["candidates"] for r in rows], style, label=label)
        top.set_ylabel("CPU ms per event (mean)")
        bottom.set_ylabel("candidates per event")
        bottom.set_xticks(xs, [f"{r['zipf_share']:.0%}" for r in rows], fontsize=7)
        bottom.set_xlabel("share of Zipf subscriptions (uniform -> Zipf -> uniform)")
        top.set_title("Adapting to a changing workload (after the BE-Tree paper, Fig. 13)")
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)


# -- command line --------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``bexdb bench adapt``."""
    for flag, kind, default, text in (
        ("--subs", positive, 5000, "subscriptions of each workload"),
        ("--events", positive, 400, "events, half from each workload"),
        ("--checkpoints", positive, 8, "checkpoints per transition"),
        ("--repeat", positive, 2, "timed passes per checkpoint, fastest kept"),
        ("--zipf", float, 1.0, "Zipf skew of the second workload"),
        ("--seed", int, 1, "workload seed"),
        ("--dims", int, 400, "BEGen attributes"),
        ("--card", int, 48, "BEGen values per attribute"),
        ("--theta", int, 0, "recycling threshold"),
        ("--batch", positive, 50, "changes per transaction"),
        ("--max-cap", positive, DEFAULTS["max_cap"], "l-node capacity"),
        ("--min-size", positive, DEFAULTS["min_size"], "minimum partition size"),
    ):
        parser.add_argument(flag, type=kind, default=default, help=f"{text} ({default})")
    parser.add_argument("--out", default="bench-results/adapt", help="results directory")
    parser.add_argument("--store-dir", default=None, help="where the temporary stores go")


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; returns 0, or raises :class:`AgreementError`."""
    harness.pyplot()  # fail now, not after the run, if matplotlib is missing
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results = run(args)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(out, results["rows"])
    o = results["collection_overhead"]
    print(format_table(results["rows"]))
    print(
        f"\n{args.subs:,} subscriptions, {results['settings']['events']} events (half uniform, "
        f"half Zipf {args.zipf}); CPU ms per event, fastest of {args.repeat} passes, mean over "
        f"events, warm.  Collecting statistics while "
        f"matching: {o['on_ms']:.3f} vs {o['off_ms']:.3f} ms ({o['overhead']:+.1%}).  Churn "
        f"(inserts + deletes): off {results['churn_s']['off']:.1f} s, on "
        f"{results['churn_s']['on']:.1f} s.  Results and plot in {out}/"
    )
    return 0


if __name__ == "__main__":
    harness.script("bexdb bench adapt", __doc__, add_arguments, main)
