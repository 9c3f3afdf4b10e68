"""``bexdb gen``: the command line of the workload generator (:mod:`tools.bench.gen`):
its options, and its summary as text."""

from __future__ import annotations

import argparse
from typing import Any

from tools.args import at_least, non_negative
from tools.bench import gen, gen_dense
from tools.bench.harness import script


def format_summary(s: dict[str, Any]) -> str:
    if s["profile"] in gen_dense.PROFILES:
        return gen_dense.format_summary(s)
    lines = [
        f"profile {s['profile']}: {s['subs']:,} subscriptions, {s['events']:,} events over "
        f"{s['attributes']} int attributes (domain [0, {s['params']['card'] - 1}]), "
        f"{s['params']['bases']} base events, seed {s['params']['seed']}",
        f"range scale {s['scale']:.4f}: calibration-sample rate {s['calibration_rate']:.3%} "
        f"(target {s['target_rate']:.2%}; reachable {s['calibration_bounds'][0]:.3%}"
        f"..{s['calibration_bounds'][1]:.3%})",
    ]
    if "sample_rate" in s:
        a, b = s["sample"]
        lines.append(f"measured match rate: {s['sample_rate']:.3%} ({a:,} subs x {b:,} events)")
        a, b = s["brute_sample"]
        lines.append(
            f"  by the reference evaluator: {s['brute_rate']:.3%} ({a:,} x {b:,}; agrees pair "
            "for pair)"
        )
    lo, hi = s["calibration_bounds"]
    if not lo <= s["target_rate"] <= hi:
        lines.append(
            f"WARNING: the target rate {s['target_rate']:.2%} is outside what range widths can "
            f"reach with {s['params']['bases']} base events; change --bases "
            "(the rate is about P(match | same base) / bases)"
        )
    secs = s.get("seconds", {})
    lines.append("time: " + ", ".join(f"{k} {v:.1f}s" for k, v in secs.items()))
    if "files" in s:
        lines.append("wrote " + ", ".join(s["files"].values()))
    return "\n".join(lines)


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a rate between 0 and 1, got {text!r}")
    return value


def _skew(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``bexdb gen``."""
    parser.add_argument("out_dir", metavar="OUT_DIR", help="directory for the three files")
    parser.add_argument(
        "--profile",
        choices=tuple(gen.PROFILES),
        default="begen",
        help="workload profile: begen, wide (BEGen over 480 values: few repeated predicates), "
        "or dense (every event defines every attribute, subscriptions of between ranges)",
    )
    parser.add_argument("--subs", type=non_negative, default=100_000, help="subscriptions (100000)")
    parser.add_argument("--events", type=non_negative, default=1_000, help="events (1000)")
    parser.add_argument(
        "--dims", type=at_least(gen.EVENT_ATTRS), default=400, help="attributes a0..a{D-1} (400)"
    )
    parser.add_argument(
        "--card", type=at_least(2), help="values per attribute (the profile's: 48, wide 480)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument(
        "--zipf", type=_skew, default=0.0, help="Zipf skew of attribute choice (0 = uniform)"
    )
    parser.add_argument("--eq-share", type=_share, default=0.3, help="share of = predicates (0.3)")
    parser.add_argument("--bases", type=at_least(1), default=25, help="base events (25)")
    parser.add_argument(
        "--target-rate", type=_rate, default=0.01, help="match rate to calibrate to (0.01)"
    )
    gen_dense.add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    """Run ``bexdb gen``; prints the summary, returns 0."""
    if args.profile in gen_dense.PROFILES:
        dense = gen_dense.generate(args.out_dir, args.subs, args.events, **gen_dense.knobs(args))
        print(gen_dense.format_summary(dense))
        return 0
    summary = gen.generate(
        args.out_dir,
        subs=args.subs,
        events=args.events,
        dims=args.dims,
        card=args.card,
        seed=args.seed,
        zipf=args.zipf,
        eq_share=args.eq_share,
        bases=args.bases,
        target_rate=args.target_rate,
        profile=args.profile,
    )
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    script("bexdb gen", gen.__doc__, add_arguments, main)
