"""``bexdb gen --profile dense``: the workload of the range-matching literature (REIN, TAMA,
HEM, OEM), in numpy.

Every event defines every attribute ``a0 .. a{D-1}`` (``attributes``, default 20) with a value
drawn uniformly from the domain; every subscription is a conjunction of ``preds`` (default 10)
``a between lo and hi`` ranges on distinct attributes chosen uniformly, each ``width`` (default
0.4) of the domain wide.  The domain is ``int`` (``[0, card - 1]``, ranges of
``round(width * card)`` values) or ``float`` (``[0, card)``, ranges ``width * card`` long);
``card`` defaults to 1,000,000, so two subscriptions almost never share an end: ~2 distinct
atoms a ``between``, the shape that leaves a shared-atom index nothing to share.

``placement`` says where a range lies: ``uniform`` (its low end uniform over the positions that
keep it inside the domain, as in HEM's generator) or ``normal`` (its centre normal around the
domain's middle, standard deviation a sixth of the domain, clipped so the range fits: ranges
crowd the middle, events stay uniform).

**Match rate.**  Not calibrated but set by the knobs: with uniform placement a range holds a
uniform value with probability ``width`` (averaged over the positions), the attributes are
independent, so the rate is ``width ** preds``: 0.4 ** 10 = 1.05e-4 (0.0105%, ~10 matches an
event at 100K) with the defaults, HEM's own workload.  ``0.5`` gives 0.1%, ``0.63`` 1%.  The
summary reports the rate measured on the workload (vectorised on a sample, and pair for pair
with the reference evaluator on a smaller one, as :mod:`tools.bench.gen` does).

**Determinism.**  Output depends only on the parameters; subscriptions come in chunks of
65,536 from per-chunk streams, so the first n subscriptions of a larger workload are the
n-subscription workload of the same seed.

Cost: 1M subscriptions (10M ranges) in ~15 s on one core, most of it string building.

>>> w = make_workload(subs=1000, events=50, seed=7)  # doctest: +SKIP
>>> generate("work/dense", subs=100_000)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from storage.errors import InvalidInput
from tools.args import at_least, positive
from tools.bench.harness import logger
from tools.bench.reference import agree

#: The profile this module generates, and its knobs' defaults.
PROFILES = ("dense",)
DOMAINS = ("int", "float")
PLACEMENTS = ("uniform", "normal")
CHUNK = 65_536
CHECK_SUBS, CHECK_EVENTS = 10_000, 500  # vectorised rate on the workload
BRUTE_SUBS, BRUTE_EVENTS = 1_000, 100  # reference evaluator on the workload
_S_SUBS, _S_EVENTS = 101, 102  # random streams (apart from gen's)

_log = logger("bexdb gen")


@dataclass(frozen=True)
class DenseParams:
    """Everything a dense workload depends on (recorded in the summary)."""

    subs: int = 100_000
    events: int = 1_000
    attributes: int = 20
    preds: int = 10
    width: float = 0.4
    domain: str = "int"
    card: int = 1_000_000
    placement: str = "uniform"
    seed: int = 1
    profile: str = "dense"

    def validate(self) -> None:
        if self.subs < 0 or self.events < 0:
            raise InvalidInput("--subs and --events must not be negative")
        if self.attributes < 1:
            raise InvalidInput("--attributes must be at least 1")
        if not 1 <= self.preds <= self.attributes:
            raise InvalidInput(
                f"--preds must be from 1 to --attributes ({self.attributes}), got {self.preds}"
            )
        if not 0.0 < self.width <= 1.0:
            raise InvalidInput(f"--width must be in (0, 1], got {self.width}")
        if self.domain not in DOMAINS:
            raise InvalidInput(f"unknown --domain {self.domain!r}", hint=f"one of {DOMAINS}")
        if self.placement not in PLACEMENTS:
            raise InvalidInput(
                f"unknown --placement {self.placement!r}", hint=f"one of {PLACEMENTS}"
            )
        if self.card < 2:
            raise InvalidInput("--card must be at least 2")

    @property
    def span(self) -> float:
        """A range's extent: values an int range holds less one, or a float range's length."""
        if self.domain == "int":
            return float(max(1, round(self.width * self.card)) - 1)
        return self.width * self.card

    def schema(self) -> dict[str, Any]:
        if self.domain == "int":
            spec: dict[str, Any] = {"type": "int", "min": 0, "max": self.card - 1}
        else:
            spec = {"type": "float", "min": 0.0, "max": float(self.card)}
        return {"attributes": {f"a{d}": dict(spec) for d in range(self.attributes)}}


def _rng(p: DenseParams, stream: int, *more: int) -> np.random.Generator:
    return np.random.default_rng([p.seed & 0xFFFFFFFF, stream, *more])


@dataclass
class Ranges:
    """n subscriptions as arrays: ``attr (n, k)`` ascending, ``lo``/``hi (n, k)`` inclusive."""

    attr: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def draw(cls, p: DenseParams, n: int, rng: np.random.Generator) -> Ranges:
        attr = np.sort(np.argsort(rng.random((n, p.attributes)), axis=1)[:, : p.preds], axis=1)
        room = p.card - (p.span + 1 if p.domain == "int" else p.span)  # where lo may go
        if p.placement == "uniform":
            u = rng.random((n, p.preds))
        else:  # centres normal around the middle, clipped so the range fits
            u = np.clip(rng.normal(0.5, 1 / 6, (n, p.preds)), 0.0, 1.0)
        lo: np.ndarray
        if p.domain == "int":
            lo = np.minimum(np.floor(u * (room + 1)), room).astype(np.int64)
            hi = lo + int(p.span)
        else:
            lo = u * room
            hi = lo + p.span
        return cls(attr.astype(np.int64), lo, hi)

    def texts(self) -> list[str]:
        """The expressions, ranges in attribute order: ~1 µs a range."""
        n, k = self.attr.shape
        fmt = str if self.lo.dtype.kind == "i" else repr
        los = [fmt(x) for x in self.lo.ravel().tolist()]
        his = [fmt(x) for x in self.hi.ravel().tolist()]
        names = [f"a{i}" for i in range(int(self.attr.max(initial=0)) + 1)]
        items = [
            f"{names[a]} between {lo} and {hi}"
            for a, lo, hi in zip(self.attr.ravel().tolist(), los, his, strict=True)
        ]
        return [" and ".join(items[i * k : (i + 1) * k]) for i in range(n)]

    def head(self, n: int) -> Ranges:
        return Ranges(self.attr[:n], self.lo[:n], self.hi[:n])


def match_matrix(r: Ranges, events: np.ndarray) -> np.ndarray:
    """``(events, subs)`` bool: does event i (a row of all attributes) match subscription j.

    Cost: events x subs x preds comparisons, in slices of ~4M values.
    """
    n, k = r.attr.shape
    out = np.zeros((len(events), n), dtype=bool)
    step = max(1, 4_000_000 // max(1, n * k))
    for start in range(0, len(events), step):
        vals = events[start : start + step][:, r.attr]  # (e, n, k)
        out[start : start + step] = ((vals >= r.lo) & (vals <= r.hi)).all(axis=-1)
    return out


class Dense:
    """The ``dense`` profile for one :class:`DenseParams`."""

    def __init__(self, params: DenseParams) -> None:
        params.validate()
        self.p = params

    def chunks(self, n: int) -> Iterator[Ranges]:
        """Subscriptions ``0..n-1`` in chunks of :data:`CHUNK` (each drawn whole, so that
        subscription i does not depend on n)."""
        for i, start in enumerate(range(0, n, CHUNK)):
            yield Ranges.draw(self.p, CHUNK, _rng(self.p, _S_SUBS, i)).head(min(CHUNK, n - start))

    def subscriptions(self, n: int) -> Iterator[tuple[int, str]]:
        ident = 0
        for r in self.chunks(n):
            for text in r.texts():
                yield ident, text
                ident += 1

    def events(self, n: int) -> np.ndarray:
        """(n, attributes) values, drawn uniformly over the domain."""
        rng = _rng(self.p, _S_EVENTS)
        if self.p.domain == "int":
            return rng.integers(0, self.p.card, (n, self.p.attributes), dtype=np.int64)
        return rng.random((n, self.p.attributes)) * self.p.card

    def check(self, subs: list[tuple[int, str]], events: np.ndarray) -> dict[str, Any]:
        """Match rates on the workload: vectorised on a sample, and by the reference evaluator
        on a smaller one, which must agree pair for pair."""
        n_s, n_e = min(len(subs), CHECK_SUBS), min(len(events), CHECK_EVENTS)
        if not n_s or not n_e:
            return {}
        mm = match_matrix(next(self.chunks(n_s)), events[:n_e])
        out: dict[str, Any] = {"sample_rate": float(mm.mean()), "sample": [n_s, n_e]}
        b_s, b_e = min(n_s, BRUTE_SUBS), min(n_e, BRUTE_EVENTS)
        out.update(agree(self.p.schema(), subs[:b_s], event_dicts(events[:b_e]), mm))
        return out

    def summary(self, subs: int, events: int) -> dict[str, Any]:
        p = self.p
        return {
            "profile": p.profile,
            "params": asdict(p),
            "subs": subs,
            "events": events,
            "attributes": p.attributes,
            "expected_rate": p.width**p.preds if p.placement == "uniform" else None,
        }


def event_dicts(events: np.ndarray) -> list[dict[str, Any]]:
    names = [f"a{d}" for d in range(events.shape[1])]
    return [dict(zip(names, row, strict=True)) for row in events.tolist()]


def _params(subs: int, events: int, knobs: dict[str, Any]) -> DenseParams:
    known = {k: v for k, v in knobs.items() if v is not None}
    unknown = set(known) - set(DenseParams.__dataclass_fields__)
    if unknown:
        raise InvalidInput(f"the dense profile has no knob {sorted(unknown)}")
    return DenseParams(subs=subs, events=events, **known)


def make_workload(
    subs: int = 100_000, events: int = 1_000, *, check: bool = True, **knobs: Any
) -> tuple[DenseParams, dict[str, Any], list[tuple[int, str]], list[Any], dict[str, Any]]:
    """The workload in memory: ``(params, schema, subscriptions, events, summary)``;
    ``knobs`` are :class:`DenseParams` fields (None: the default)."""
    gen = Dense(_params(subs, events, knobs))
    t0 = time.perf_counter()
    sub_list = list(gen.subscriptions(subs))
    t_subs = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev = gen.events(events)
    ev_list = event_dicts(ev)
    summary = gen.summary(subs, events)
    summary["seconds"] = {"subs": t_subs, "events": time.perf_counter() - t0}
    if check:
        t0 = time.perf_counter()
        summary.update(gen.check(sub_list, ev))
        summary["seconds"]["check"] = time.perf_counter() - t0
    return gen.p, gen.p.schema(), sub_list, ev_list, summary


def generate(
    out_dir: str | os.PathLike[str],
    subs: int = 100_000,
    events: int = 1_000,
    *,
    check: bool = True,
    **knobs: Any,
) -> dict[str, Any]:
    """Write ``schema.json``, ``subs.jsonl`` and ``events.jsonl`` to ``out_dir`` (streamed
    chunk by chunk); returns the summary.  ``knobs``: :class:`DenseParams` fields."""
    gen = Dense(_params(subs, events, knobs))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schema.json").write_text(json.dumps(gen.p.schema(), indent=1) + "\n")
    t0 = time.perf_counter()
    head: list[tuple[int, str]] = []
    with open(out / "subs.jsonl", "w", encoding="utf-8") as f:
        ident = 0
        for r in gen.chunks(subs):
            if ident and ident % (8 * CHUNK) == 0:
                _log(f"{ident:,}/{subs:,} subscriptions written")
            texts = r.texts()
            # names, digits, '.', 'e', '-', '+' and spaces: nothing to escape
            f.write("".join(f'{{"id": {ident + i}, "expr": "{t}"}}\n' for i, t in enumerate(texts)))
            if len(head) < CHECK_SUBS:
                head.extend((ident + i, t) for i, t in enumerate(texts[: CHECK_SUBS - len(head)]))
            ident += len(texts)
    t_subs = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev = gen.events(events)
    with open(out / "events.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(e) + "\n" for e in event_dicts(ev))
    summary = gen.summary(subs, events)
    summary["seconds"] = {"subs": t_subs, "events": time.perf_counter() - t0}
    if check:
        t0 = time.perf_counter()
        summary.update(gen.check(head, ev))
        summary["seconds"]["check"] = time.perf_counter() - t0
    summary["files"] = {
        "schema": str(out / "schema.json"),
        "subs": str(out / "subs.jsonl"),
        "events": str(out / "events.jsonl"),
    }
    return summary


# -- command line (``bexdb gen``'s options of this profile) ---------------------------------------


def _width(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share of the domain in (0, 1], got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The dense profile's options (``--card`` and ``--seed`` are ``bexdb gen``'s)."""
    g = parser.add_argument_group("dense profile")
    g.add_argument("--attributes", type=positive, help="attributes, all in every event (20)")
    g.add_argument("--preds", type=at_least(1), help="between ranges a subscription (10)")
    g.add_argument("--width", type=_width, help="range width, a share of the domain (0.4)")
    g.add_argument("--domain", choices=DOMAINS, help="int or float values (int)")
    g.add_argument("--placement", choices=PLACEMENTS, help="where ranges lie (uniform)")


def knobs(args: argparse.Namespace) -> dict[str, Any]:
    """The dense knobs given on the command line (None: the default)."""
    names = ("attributes", "preds", "width", "domain", "placement", "card", "seed")
    return {k: getattr(args, k, None) for k in names}


def format_summary(s: dict[str, Any]) -> str:
    p = s["params"]
    dom = f"[0, {p['card'] - 1}]" if p["domain"] == "int" else f"[0, {p['card']})"
    lines = [
        f"profile dense: {s['subs']:,} subscriptions, {s['events']:,} events over "
        f"{p['attributes']} {p['domain']} attributes (domain {dom}, all in every event), "
        f"{p['preds']} ranges of {p['width']:.0%} a subscription ({p['placement']}), "
        f"seed {p['seed']}",
    ]
    if s.get("expected_rate") is not None:
        lines.append(f"expected match rate width ** preds: {s['expected_rate']:.4%}")
    if "sample_rate" in s:
        a, b = s["sample"]
        lines.append(f"measured match rate: {s['sample_rate']:.4%} ({a:,} subs x {b:,} events)")
        a, b = s["brute_sample"]
        lines.append(
            f"  by the reference evaluator: {s['brute_rate']:.4%} ({a:,} x {b:,}; agrees pair "
            "for pair)"
        )
    secs = s.get("seconds", {})
    lines.append("time: " + ", ".join(f"{k} {v:.1f}s" for k, v in secs.items()))
    if "files" in s:
        lines.append("wrote " + ", ".join(s["files"].values()))
    return "\n".join(lines)
