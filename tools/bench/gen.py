"""``bexdb gen``: synthetic workloads — BEGen (BE-Tree paper, sec. 7.1) in numpy, no Spark.

The ``begen`` profile follows the BE-Tree paper's generator.  Its problem is the one the paper
names: in a space of hundreds of dimensions, independently drawn subscriptions and events
almost never match, so the matching probability must be built in.  The paper does it by
deriving subscriptions from *base expressions* (equality-only events): every predicate of a
derived subscription is implied by the base's predicate on the same attribute, and the number
of base expressions sets the matching probability.

What is generated (all attributes ``int``, named ``a0 .. a{D-1}``, domain ``[0, C-1]``, the
schema carries ``min``/``max`` hints):

* **Base events** (``bases`` of them): 15 distinct attributes, chosen uniformly or with a
  Zipf skew (weight of ``a{d}`` is ``1 / (d + 1) ** zipf``; ``a0`` is the most popular),
  each with a uniform value.
* **Subscriptions**: pick a base event uniformly, pick k in 5..9 of its 15 attributes (with
  the same Zipf weights among them) and make each predicate true for the base's value v:
  ``=`` with probability ``eq_share`` (default 0.3), else uniformly one of
  ``< <= > >= between in``.  The range operators get a random *slack* beyond v
  (``a <= v + s``, ``a between v - s1 and v + s2``; an ``in`` list holds v and 1..5 values
  at random distances from it — up to 6 values, as in the paper); every slack is
  ``floor(scale * u * C)`` (half that for each side of ``between`` and for ``in`` offsets)
  with ``u`` uniform in [0, 1).  Constants are clipped to the domain as far as that keeps the
  predicate true for v (``a < 48`` can appear when C = 48: always true on a defined value).
* **Events** (the ones written out for matching) come from the same source as the base
  events: pick a base event uniformly, keep its 15 attributes and each value with probability
  ``1 - mutate``; otherwise move the value by ``±(1 + floor(u * J))`` (``J = max(1, C // 8)``,
  clipped to the domain).  A pure copy of a base event would match all its derived
  subscriptions and nothing else, so the range widths would not matter and events would
  repeat; the mutation makes the widths (and ``=``) decide.  Events are distinct: a repeat is
  redrawn.

**Calibration.**  The match rate — the mean fraction of subscriptions an event matches — is
about ``P(same base) * P(match | same base) = P(match | same base) / bases`` (matches across
bases need an event to define all k attributes of a foreign subscription: negligible when
D >> 15).  ``scale`` is found by bisection so that the rate measured by a vectorised
brute-force check (:func:`match_matrix`) on a fixed calibration sample (4,000
subscriptions x 400 events from their own random streams) is ``target_rate`` (default 1%).
Every random draw is made once, so the rate grows with ``scale`` (almost monotonically: an
``in`` value moving outwards can step over an event value).  With the defaults (25 bases,
mutate 0.3) the rate can be tuned between ~0.68% (scale 0) and ~1.5% (scale 1), reached at
scale ~0.14; 10 bases give 1.7%..3.8%.  A target outside the reachable band is reported
(summary and a warning), not hidden: change ``bases``.

The summary then reports the rate on the generated workload itself: vectorised on a sample,
and with the reference evaluator (:func:`betree.lang.expr.evaluate` on ``compile_expr`` output)
on a smaller one.  The two must agree pair for pair (:func:`tools.bench.reference.agree`).

**Determinism.**  Output depends only on the parameters.  Subscriptions are drawn in chunks
of 65,536 from per-chunk streams and events sequentially from one stream, and the scale
does not depend on ``subs`` or ``events``: the first 10,000 subscriptions of a 1M workload
are the 10,000-subscription workload of the same seed.

**Profiles.**  ``begen`` is the above with C = 48.  ``wide`` is the same generator with
C = 480 (unless ``--card`` says otherwise): range slacks and ``in`` distances scale with C,
so constants spread over ten times as many values at the same calibrated match rate.  Its
predicate texts rarely repeat: the first 200K subscriptions hold 243K distinct predicate
texts against 52K for ``begen`` (4.7x; 356K against 56K as the conjunct memo cuts them,
1.05M against 75K in 1M), and four times as many atoms: a load that cannot lean on
repetition (the conjunct memo, atoms shared across subscriptions), for ``bexdb bench load
--workloads``.

Cost: 1M subscriptions in ~15 s on one core (string building ~2/3, numpy draws ~1/3);
calibration ~1 s; the checks ~1 s.

>>> w = make_workload(subs=1000, events=50, seed=7)  # doctest: +SKIP
>>> w.subs[0][1][:72]  # doctest: +SKIP
'a44 = 35 and a164 = 20 and a244 = 0 and a250 = 45 and a32 between 14 an'
>>> generate("work/begen", subs=100_000)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from storage.errors import InvalidInput
from tools.bench import gen_dense, gen_rich
from tools.bench.harness import logger
from tools.bench.reference import agree

#: Workload profiles and what each sets unless given: ``wide`` is BEGen over a domain ten
#: times wider (module docstring, "Profiles").
PROFILES: dict[str, dict[str, Any]] = {"begen": {}, "wide": {"card": 480}, "rich": {}}
PROFILES.update({name: {"card": 1_000_000} for name in gen_dense.PROFILES})  # gen_dense.py
DEFAULT_CARD = 48
#: Operator codes; ``=`` has probability ``eq_share``, the other six share the rest.
OPS = ("=", "<", "<=", ">", ">=", "between", "in")
EQ, LT, LE, GT, GE, BETWEEN, IN = range(len(OPS))
EVENT_ATTRS = 15
MIN_PREDS, MAX_PREDS = 5, 9
MAX_IN = 6  # values of an ``in`` list (v and up to 5 others)
CHUNK = 65_536
CALIB_SUBS, CALIB_EVENTS = 4_000, 400
CALIB_STEPS = 16
CHECK_SUBS, CHECK_EVENTS = 10_000, 500  # vectorised rate on the workload
BRUTE_SUBS, BRUTE_EVENTS = 1_000, 100  # reference evaluator on the workload
_NONE = -1  # "undefined" in a dense event matrix
_PAD = -100  # padding of an ``in`` value set (never equal to an event value)
# random streams: one SeedSequence entropy list per purpose
_S_BASES, _S_SUBS, _S_EVENTS, _S_CAL_SUBS, _S_CAL_EVENTS = range(5)

Event = dict[str, int]


_log = logger("bexdb gen")


# -- parameters --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    """Everything the workload depends on (recorded in the summary)."""

    subs: int = 100_000
    events: int = 1_000
    dims: int = 400
    card: int = 48
    seed: int = 1
    zipf: float = 0.0
    eq_share: float = 0.3
    bases: int = 25
    target_rate: float = 0.01
    mutate: float = 0.3
    profile: str = "begen"

    def validate(self) -> None:
        if self.profile not in PROFILES:
            raise InvalidInput(
                f"unknown profile {self.profile!r}", hint=f"one of {tuple(PROFILES)}"
            )
        if self.subs < 0 or self.events < 0:
            raise InvalidInput("--subs and --events must not be negative")
        if self.dims < EVENT_ATTRS:
            raise InvalidInput(f"--dims must be at least {EVENT_ATTRS} (attributes per event)")
        if self.card < 2:
            raise InvalidInput("--card must be at least 2")
        if self.bases < 1:
            raise InvalidInput("--bases must be at least 1")
        if self.zipf < 0:
            raise InvalidInput("--zipf must not be negative")
        if not 0.0 <= self.eq_share <= 1.0:
            raise InvalidInput("--eq-share must be in [0, 1]")
        if not 0.0 <= self.mutate <= 1.0:
            raise InvalidInput("mutate must be in [0, 1]")
        if not 0.0 < self.target_rate < 1.0:
            raise InvalidInput("--target-rate must be in (0, 1)")

    @property
    def jitter(self) -> int:
        return max(1, self.card // 8)

    def schema(self) -> dict[str, Any]:
        return {
            "attributes": {
                f"a{d}": {"type": "int", "min": 0, "max": self.card - 1} for d in range(self.dims)
            }
        }


def profile_card(profile: str) -> int:
    """The values per attribute of ``profile`` when ``--card`` is not given."""
    return int(PROFILES[profile].get("card", DEFAULT_CARD))


def _rng(p: Params, stream: int, *more: int) -> np.random.Generator:
    return np.random.default_rng([p.seed & 0xFFFFFFFF, stream, *more])


def _weights(p: Params) -> np.ndarray:
    return 1.0 / np.arange(1, p.dims + 1, dtype=float) ** p.zipf


def _top_k(rng: np.random.Generator, logw: np.ndarray, k: int) -> np.ndarray:
    """Per row, k column indices sampled without replacement with weights exp(logw).

    The Gumbel-top-k trick: the k largest of ``log w + Gumbel noise`` are a weighted
    sample without replacement (uniform when all weights are equal).
    """
    keys = logw - np.log(-np.log(rng.random(logw.shape)))
    return np.argsort(-keys, axis=-1, kind="stable")[..., :k]


# -- base events and subscriptions as arrays ----------------------------------------------------


@dataclass
class Bases:
    attrs: np.ndarray  # (B, 15) attribute numbers, each row distinct
    values: np.ndarray  # (B, 15) values in [0, C)

    @classmethod
    def make(cls, p: Params) -> Bases:
        rng = _rng(p, _S_BASES)
        logw = np.broadcast_to(np.log(_weights(p)), (p.bases, p.dims))
        attrs = np.sort(_top_k(rng, logw, EVENT_ATTRS), axis=1)
        values = rng.integers(0, p.card, (p.bases, EVENT_ATTRS))
        return cls(attrs.astype(np.int64), values.astype(np.int64))


@dataclass
class SubDraws:
    """The random draws of n subscriptions, independent of ``scale`` (common random numbers).

    Slot j < k[i] of row i is a predicate on ``attr[i, j]`` true for the base value
    ``value[i, j]``; slots j >= k[i] are unused.
    """

    base: np.ndarray  # (n,)
    k: np.ndarray  # (n,) predicates, 5..9
    attr: np.ndarray  # (n, 9)
    value: np.ndarray  # (n, 9) the base event's value
    op: np.ndarray  # (n, 9) operator code
    u: np.ndarray  # (n, 9, 2) slack variates (both sides of ``between``)
    in_m: np.ndarray  # (n, 9) size of the ``in`` list, 2..6 (before deduplication)
    in_u: np.ndarray  # (n, 9, 5) distances of the other ``in`` values
    in_sign: np.ndarray  # (n, 9, 5) their sides (+1 / -1)

    @classmethod
    def draw(cls, p: Params, bases: Bases, n: int, rng: np.random.Generator) -> SubDraws:
        base = rng.integers(0, p.bases, n)
        k = rng.integers(MIN_PREDS, MAX_PREDS + 1, n)
        logw = np.log(_weights(p))[bases.attrs[base]]  # (n, 15)
        cols = _top_k(rng, logw, MAX_PREDS)  # (n, 9): the first k are used
        attr = np.take_along_axis(bases.attrs[base], cols, axis=1)
        value = np.take_along_axis(bases.values[base], cols, axis=1)
        other = rng.integers(1, len(OPS), (n, MAX_PREDS))
        op = np.where(rng.random((n, MAX_PREDS)) < p.eq_share, EQ, other)
        u = rng.random((n, MAX_PREDS, 2))
        in_m = rng.integers(2, MAX_IN + 1, (n, MAX_PREDS))
        in_u = rng.random((n, MAX_PREDS, MAX_IN - 1))
        in_sign = np.where(rng.random((n, MAX_PREDS, MAX_IN - 1)) < 0.5, -1, 1)
        return cls(base, k, attr, value, op, u, in_m, in_u, in_sign)

    def __len__(self) -> int:
        return len(self.base)

    def head(self, n: int) -> SubDraws:
        """The first n subscriptions (a view)."""
        return SubDraws(*(getattr(self, f)[:n] for f in self.__dataclass_fields__))

    def valid(self) -> np.ndarray:
        """(n, 9) True for the slots in use."""
        return np.arange(MAX_PREDS)[None, :] < self.k[:, None]


@dataclass
class Preds:
    """Subscriptions at one ``scale``: constants, intervals and ``in`` sets per slot."""

    c1: np.ndarray  # (n, 9) the constant (``between``: the low end)
    c2: np.ndarray  # (n, 9) ``between``: the high end
    lo: np.ndarray  # (n, 9) inclusive interval of accepted values (range operators)
    hi: np.ndarray
    in_set: np.ndarray  # (n, 9, 6) values of an ``in`` list, _PAD where unused

    @classmethod
    def at(cls, p: Params, d: SubDraws, scale: float) -> Preds:
        card = p.card
        v = d.value
        full = np.floor(scale * d.u * card).astype(np.int64)  # one-sided slack
        half = np.floor(scale * d.u * card / 2).astype(np.int64)  # between sides
        s = full[..., 0]
        op = d.op
        c1 = v.copy()
        c2 = v.copy()
        lo = v.copy()
        hi = v.copy()
        big = np.int64(1 << 40)

        def put(code: int, const: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
            mask = op == code
            c1[mask] = const[mask]
            lo[mask] = low[mask]
            hi[mask] = high[mask]

        c = np.minimum(v + 1 + s, card)  # a < c
        put(LT, c, np.full_like(v, -big), c - 1)
        c = np.minimum(v + s, card - 1)  # a <= c
        put(LE, c, np.full_like(v, -big), c)
        c = np.maximum(v - 1 - s, -1)  # a > c
        put(GT, c, c + 1, np.full_like(v, big))
        c = np.maximum(v - s, 0)  # a >= c
        put(GE, c, c, np.full_like(v, big))
        b_lo = np.maximum(v - half[..., 0], 0)
        b_hi = np.minimum(v + half[..., 1], card - 1)
        mask = op == BETWEEN
        c1[mask], c2[mask] = b_lo[mask], b_hi[mask]
        lo[mask], hi[mask] = b_lo[mask], b_hi[mask]

        dist = 1 + np.floor(scale * d.in_u * card / 2).astype(np.int64)
        others = np.clip(v[..., None] + d.in_sign * dist, 0, card - 1)
        used = np.arange(MAX_IN - 1)[None, None, :] < (d.in_m - 1)[..., None]
        others = np.where(used, others, _PAD)
        in_set = np.concatenate([v[..., None], others], axis=-1)
        in_set[op != IN] = _PAD
        return cls(c1, c2, lo, hi, in_set)

    def texts(self, d: SubDraws) -> list[str]:
        """The expressions, one string per subscription (predicates in slot order).

        Built per operator with list comprehensions over string tables: ~1 µs a predicate.
        """
        rows, cols = np.nonzero(d.valid())  # row-major: the slots of a row in order
        op = d.op[rows, cols]
        attr = d.attr[rows, cols]
        names = [f"a{i}" for i in range(int(attr.max(initial=0)) + 1)]
        top = int(max(self.c1.max(initial=0), self.c2.max(initial=0)))
        nums = [str(i) for i in range(top + 1)]
        nums.append("-1")  # nums[-1]: the only negative constant (``a > -1``)
        flat = np.empty(len(op), dtype=object)
        for code in (EQ, LT, LE, GT, GE):
            m = op == code
            sym = f" {OPS[code]} "
            flat[m] = [
                names[a] + sym + nums[c]
                for a, c in zip(attr[m].tolist(), self.c1[rows[m], cols[m]].tolist(), strict=True)
            ]
        m = op == BETWEEN
        flat[m] = [
            f"{names[a]} between {lo} and {hi}"
            for a, lo, hi in zip(
                attr[m].tolist(),
                self.c1[rows[m], cols[m]].tolist(),
                self.c2[rows[m], cols[m]].tolist(),
                strict=True,
            )
        ]
        m = op == IN
        sets = np.sort(self.in_set[rows[m], cols[m]], axis=1)
        sets[:, 1:][sets[:, 1:] == sets[:, :-1]] = _PAD  # sorted, so repeats are adjacent
        flat[m] = [
            names[a] + " in (" + ", ".join([nums[v] for v in vals if v != _PAD]) + ")"
            for a, vals in zip(attr[m].tolist(), sets.tolist(), strict=True)
        ]
        items = flat.tolist()
        ends = np.cumsum(d.k).tolist()
        starts = [0, *ends[:-1]]
        return [" and ".join(items[s:e]) for s, e in zip(starts, ends, strict=True)]


# -- events ---------------------------------------------------------------------------------------


def _event_rows(p: Params, bases: Bases, rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 15) values of n candidate events; row i uses ``bases[b[i]]``'s attributes."""
    b = rng.integers(0, p.bases, n)
    v = bases.values[b]
    moved = rng.random(v.shape) < p.mutate
    dist = 1 + np.floor(rng.random(v.shape) * p.jitter).astype(np.int64)
    sign = np.where(rng.random(v.shape) < 0.5, -1, 1)
    new = np.clip(v + sign * dist, 0, p.card - 1)
    flipped = np.clip(v - sign * dist, 0, p.card - 1)
    new = np.where(new == v, flipped, new)  # clipping must not undo the move
    out = np.where(moved, new, v)
    return np.concatenate([b[:, None], out], axis=1)


def draw_events(p: Params, bases: Bases, n: int, stream: int) -> tuple[np.ndarray, np.ndarray]:
    """n distinct events as ``(attrs (n, 15), values (n, 15))``, drawn sequentially."""
    rng = _rng(p, stream)
    seen: set[bytes] = set()
    attrs = np.empty((n, EVENT_ATTRS), dtype=np.int64)
    values = np.empty((n, EVENT_ATTRS), dtype=np.int64)
    got = 0
    tries = 0
    while got < n:
        batch = _event_rows(p, bases, rng, max(64, min(CHUNK, 2 * (n - got))))
        for row in batch:
            a = bases.attrs[row[0]]
            key = a.tobytes() + row[1:].tobytes()
            tries += 1
            if key in seen:
                continue
            seen.add(key)
            attrs[got], values[got] = a, row[1:]
            got += 1
            if got == n:
                break
        if tries > 20 * n + 1000:
            raise InvalidInput(
                f"could not draw {n} distinct events from {p.bases} base events",
                hint="raise --bases or --card, or ask for fewer events",
            )
    return attrs, values


def dense(p: Params, attrs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Events as an (n, D) matrix, _NONE where undefined (int32: any cardinality fits)."""
    out = np.full((len(attrs), p.dims), _NONE, dtype=np.int32)
    np.put_along_axis(out, attrs, values, axis=1)
    return out


def event_dicts(attrs: np.ndarray, values: np.ndarray) -> list[Event]:
    names: dict[int, str] = {}
    out = []
    for row_a, row_v in zip(attrs.tolist(), values.tolist(), strict=True):
        ev = {}
        for a, v in zip(row_a, row_v, strict=True):
            name = names.get(a)
            if name is None:
                name = names[a] = f"a{a}"
            ev[name] = v
        out.append(ev)
    return out


# -- the vectorised brute force -------------------------------------------------------------------


def candidates(d: SubDraws, events: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (event i, subscription j) where the event defines all of j's attributes.

    Only those can match (every predicate here is false on an undefined attribute).  Returns
    ``(i, j, values)`` with ``values[p]`` the event's values on j's 9 slots.  The pairs do not
    depend on ``scale``, so calibration computes them once.
    """
    valid = d.valid()
    ei: list[np.ndarray] = []
    sj: list[np.ndarray] = []
    vs: list[np.ndarray] = []
    step = max(1, 4_000_000 // max(1, len(d) * MAX_PREDS))
    for start in range(0, len(events), step):
        vals = events[start : start + step][:, d.attr]  # (e, n, 9)
        i, j = np.nonzero(((vals != _NONE) | ~valid).all(axis=-1))
        ei.append(i + start)
        sj.append(j)
        vs.append(vals[i, j])
    if not ei:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros((0, MAX_PREDS), dtype=events.dtype)
    return np.concatenate(ei), np.concatenate(sj), np.concatenate(vs)


def pair_holds(d: SubDraws, preds: Preds, sj: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """For candidate pairs: does the event satisfy every predicate of subscription ``sj``."""
    lo, hi, in_set = preds.lo[sj], preds.hi[sj], preds.in_set[sj]
    ok = (vals >= lo) & (vals <= hi)
    member = (vals[..., None] == in_set).any(axis=-1)
    ok = np.where(d.op[sj] == IN, member, ok)
    return (ok | ~d.valid()[sj]).all(axis=-1)


def match_matrix(d: SubDraws, preds: Preds, events: np.ndarray) -> np.ndarray:
    """``(events, subs)`` bool: does event i match subscription j (numpy brute force).

    Cost: one gather of events x subs x 9 values, then the predicates on the pairs where the
    event defines every attribute of the subscription.
    """
    i, j, vals = candidates(d, events)
    out = np.zeros((len(events), len(d)), dtype=bool)
    out[i, j] = pair_holds(d, preds, j, vals)
    return out


def _calibrate(p: Params, bases: Bases) -> tuple[float, float, tuple[float, float]]:
    """The scale whose calibration-sample match rate is closest to the target."""
    d = SubDraws.draw(p, bases, CALIB_SUBS, _rng(p, _S_CAL_SUBS))
    ev = dense(p, *draw_events(p, bases, CALIB_EVENTS, _S_CAL_EVENTS))

    _, sj, vals = candidates(d, ev)
    pairs = len(d) * len(ev)

    def rate(scale: float) -> float:
        return int(pair_holds(d, Preds.at(p, d, scale), sj, vals).sum()) / pairs

    lo, hi = 0.0, 1.0
    r_lo, r_hi = rate(lo), rate(hi)
    bounds = (r_lo, r_hi)
    if r_hi <= p.target_rate:
        return hi, r_hi, bounds
    if r_lo >= p.target_rate:
        return lo, r_lo, bounds
    for _ in range(CALIB_STEPS):
        mid = (lo + hi) / 2
        r = rate(mid)
        if r < p.target_rate:
            lo, r_lo = mid, r
        else:
            hi, r_hi = mid, r
    if abs(r_lo - p.target_rate) <= abs(r_hi - p.target_rate):
        return lo, r_lo, bounds
    return hi, r_hi, bounds


# -- the workload ----------------------------------------------------------------------------------


@dataclass
class Workload:
    """A generated workload in memory: schema, ``(id, expr)`` subscriptions, events."""

    params: Any  # Params, or the profile module's own (gen_dense.DenseParams)
    schema: dict[str, Any]
    subs: list[tuple[int, str]]
    events: list[Event]
    summary: dict[str, Any] = field(default_factory=dict)


class BEGen:
    """The ``begen`` profile for one :class:`Params`: calibrates once, then generates."""

    def __init__(self, params: Params) -> None:
        params.validate()
        self.p = params
        self.bases = Bases.make(params)
        t0 = time.perf_counter()
        self.scale, self.calib_rate, self.calib_bounds = _calibrate(params, self.bases)
        self.calib_s = time.perf_counter() - t0

    def sub_chunks(self, n: int) -> Iterator[tuple[SubDraws, Preds]]:
        """The draws of subscriptions ``0..n-1`` in chunks of :data:`CHUNK`."""
        for i, start in enumerate(range(0, n, CHUNK)):
            # always a whole chunk, so that subscription i does not depend on n
            d = SubDraws.draw(self.p, self.bases, CHUNK, _rng(self.p, _S_SUBS, i))
            d = d.head(min(CHUNK, n - start))
            yield d, Preds.at(self.p, d, self.scale)

    def subscriptions(self, n: int) -> Iterator[tuple[int, str]]:
        ident = 0
        for d, preds in self.sub_chunks(n):
            for text in preds.texts(d):
                yield ident, text
                ident += 1

    def events(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return draw_events(self.p, self.bases, n, _S_EVENTS)

    def check(
        self,
        subs: Sequence[tuple[int, str]],
        ev_attrs: np.ndarray,
        ev_values: np.ndarray,
        check_subs: int = CHECK_SUBS,
        check_events: int = CHECK_EVENTS,
        brute_subs: int = BRUTE_SUBS,
        brute_events: int = BRUTE_EVENTS,
    ) -> dict[str, Any]:
        """Match rates on the workload: vectorised, and by the reference evaluator.

        Subscriptions and events are i.i.d., so their first ones are a fair sample.  The
        reference evaluator must agree pair for pair with the vectorised model.
        """
        n_s = min(len(subs), check_subs)
        n_e = min(len(ev_attrs), check_events)
        out: dict[str, Any] = {}
        if not n_s or not n_e:
            return out
        d, preds = next(self.sub_chunks(n_s))
        ev = dense(self.p, ev_attrs[:n_e], ev_values[:n_e])
        mm = match_matrix(d, preds, ev)
        out["sample_rate"] = float(mm.mean())
        out["sample"] = [n_s, n_e]
        b_s, b_e = min(n_s, brute_subs), min(n_e, brute_events)
        sample = event_dicts(ev_attrs[:b_e], ev_values[:b_e])
        out.update(agree(self.p.schema(), subs[:b_s], sample, mm))
        return out


def make_workload(
    subs: int = 100_000,
    events: int = 1_000,
    *,
    check: bool = True,
    **params: Any,
) -> Workload:
    """Generate a workload in memory (see the module docstring for the parameters).

    ``check`` adds the measured match rates to ``summary`` (vectorised and brute force).
    """
    if params.get("profile") == "rich":  # tools.bench.gen_rich
        schema, sub_list, ev_list, summary = gen_rich.make(subs, events, check=check, **params)
        return Workload(
            Params(subs=subs, events=events, profile="rich"), schema, sub_list, ev_list, summary
        )
    if params.get("profile") in gen_dense.PROFILES:  # its own knobs: gen_dense.DenseParams
        knobs = {k: v for k, v in params.items() if k != "profile"}
        return Workload(*gen_dense.make_workload(subs, events, check=check, **knobs))
    params.setdefault("card", profile_card(params.get("profile", "begen")))
    p = Params(subs=subs, events=events, **params)
    gen = BEGen(p)
    t0 = time.perf_counter()
    sub_list = list(gen.subscriptions(subs))
    t_subs = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev_attrs, ev_values = gen.events(events)
    ev_list = event_dicts(ev_attrs, ev_values)
    t_events = time.perf_counter() - t0
    summary = _summary(gen, len(sub_list), len(ev_list))
    summary["seconds"] = {"calibrate": gen.calib_s, "subs": t_subs, "events": t_events}
    if check:
        t0 = time.perf_counter()
        summary.update(gen.check(sub_list, ev_attrs, ev_values))
        summary["seconds"]["check"] = time.perf_counter() - t0
    return Workload(p, p.schema(), sub_list, ev_list, summary)


def _summary(gen: BEGen, subs: int, events: int) -> dict[str, Any]:
    p = gen.p
    return {
        "profile": p.profile,
        "params": asdict(p),
        "subs": subs,
        "events": events,
        "attributes": p.dims,
        "scale": gen.scale,
        "target_rate": p.target_rate,
        "calibration_rate": gen.calib_rate,
        "calibration_bounds": list(gen.calib_bounds),
        "calibration_sample": [CALIB_SUBS, CALIB_EVENTS],
    }


def generate(
    out_dir: str | os.PathLike[str],
    subs: int = 100_000,
    events: int = 1_000,
    dims: int = 400,
    card: int | None = None,
    seed: int = 1,
    zipf: float = 0.0,
    eq_share: float = 0.3,
    *,
    bases: int = 25,
    target_rate: float = 0.01,
    mutate: float = 0.3,
    profile: str = "begen",
    check: bool = True,
) -> dict[str, Any]:
    """Write ``schema.json``, ``subs.jsonl`` and ``events.jsonl`` to ``out_dir``.

    Returns the summary (counts, scale, measured match rates, file names).  Subscriptions
    are streamed to the file chunk by chunk.  ``card`` None: the profile's.
    """
    if profile not in PROFILES:
        raise InvalidInput(f"unknown profile {profile!r}", hint=f"one of {tuple(PROFILES)}")
    if profile == "rich":  # tools.bench.gen_rich
        return gen_rich.generate(
            out_dir, subs, events, seed=seed, target_rate=target_rate, check=check
        )
    if profile in gen_dense.PROFILES:  # its width sets the rate; knobs: gen_dense.generate
        return gen_dense.generate(out_dir, subs, events, seed=seed, card=card, check=check)
    p = Params(
        subs=subs,
        events=events,
        dims=dims,
        card=profile_card(profile) if card is None else card,
        seed=seed,
        zipf=zipf,
        eq_share=eq_share,
        bases=bases,
        target_rate=target_rate,
        mutate=mutate,
        profile=profile,
    )
    gen = BEGen(p)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schema.json").write_text(json.dumps(p.schema(), indent=1) + "\n")
    t0 = time.perf_counter()
    head: list[tuple[int, str]] = []
    with open(out / "subs.jsonl", "w", encoding="utf-8") as f:
        ident = 0
        for d, preds in gen.sub_chunks(subs):
            if ident and ident % (8 * CHUNK) == 0:
                _log(f"{ident:,}/{subs:,} subscriptions written")
            texts = preds.texts(d)
            # expressions hold only names, digits, spaces and ( ) , < > = - : nothing to escape
            f.write("".join(f'{{"id": {ident + i}, "expr": "{t}"}}\n' for i, t in enumerate(texts)))
            if len(head) < CHECK_SUBS:
                head.extend((ident + i, t) for i, t in enumerate(texts[: CHECK_SUBS - len(head)]))
            ident += len(texts)
    t_subs = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev_attrs, ev_values = gen.events(events)
    with open(out / "events.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(e) + "\n" for e in event_dicts(ev_attrs, ev_values))
    t_events = time.perf_counter() - t0
    summary = _summary(gen, subs, events)
    summary["seconds"] = {"calibrate": gen.calib_s, "subs": t_subs, "events": t_events}
    if check:
        t0 = time.perf_counter()
        summary.update(gen.check(head, ev_attrs, ev_values))
        summary["seconds"]["check"] = time.perf_counter() - t0
    summary["files"] = {
        "schema": str(out / "schema.json"),
        "subs": str(out / "subs.jsonl"),
        "events": str(out / "events.jsonl"),
    }
    return summary
