"""Batches matched by intervals (betree.packed.intervals: a batch's bucket and slice
searches shared, then each event's bitset ORs and slices in buffers reused) against the
brute-force evaluator: dense ranges at the ends of the int and float domains (±2**63,
±1.8e308, -0.0), batches whose events all define every attribute (one array conversion)
and batches where some do not, a batch of one, deletes and adds after the view, reopened,
built from a whole view and straight from the pages (a view too big for the cache)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flatbatch
from tests.support.brute import brute
from tests.support.edges import FLOAT_VALUES, INT_VALUES, NUMBER_LITERALS

SPEC = {
    "attributes": {
        **{f"i{k}": {"type": "int"} for k in range(4)},
        **{f"f{k}": {"type": "float"} for k in range(2)},
        "s": {"type": "string"},
    }
}
NUMERIC = [f"i{k}" for k in range(4)] + ["f0", "f1"]
LITERALS = [text for text, _ in NUMBER_LITERALS]
#: attributes whose ends are kept as uint32 offsets (span under 2**32) in a workload of
#: each shape: ``narrow`` (only those: ints only), ``mixed`` (also ends at the domains' ends)
NARROW = ("i0", "i1")


def _bound(rng: random.Random, attr: str) -> str:
    """A range's end: mostly near the middle (wide ranges), now and then (but on the
    :data:`NARROW` attributes) at a domain end."""
    if attr not in NARROW and rng.random() < 0.25:
        return rng.choice(LITERALS)
    if attr[0] == "i":
        return str(rng.randint(-60, 60))
    return rng.choice([str(round(rng.uniform(-1, 1), 2)), "-0.0", "0.0"])


def _expr(rng: random.Random, attrs: list[str]) -> str:
    parts = []
    for attr in rng.sample(attrs, rng.randint(1, min(5, len(attrs)))):
        lo, hi = sorted([_bound(rng, attr), _bound(rng, attr)], key=float)
        form = rng.randrange(6) if attr not in NARROW else rng.choice([0, 4, 5])  # (closed)
        if form < 3:
            parts.append(f"{attr} between {lo} and {hi}")
        elif form == 3:
            parts.append(f"{attr} {rng.choice(['<', '<=', '>', '>='])} {lo}")
        elif form == 4:
            parts.append(f"{attr} >= {lo} and {attr} < {hi}")
        else:
            parts.append(f"{attr} = {lo}" if attr[0] == "i" else f"{attr} > {lo}")
    if rng.random() < 0.1:
        parts.append(rng.choice(['s = "x"', "s is null", "i0 != 3", "i1 in (0, 9)"]))
    return " and ".join(parts)


def _event(rng: random.Random, every: bool) -> dict[str, Any]:
    """An event; ``every``: it defines every int and float attribute."""
    ev: dict[str, Any] = {}
    for attr in NUMERIC:
        if attr[0] == "i":
            ev[attr] = rng.choice([*INT_VALUES, *(rng.randint(-70, 70) for _ in range(6))])
        else:
            ev[attr] = rng.choice([*FLOAT_VALUES, *(rng.uniform(-1.2, 1.2) for _ in range(6))])
        if not every and rng.random() < 0.2:
            del ev[attr]
    if rng.random() < 0.5:
        ev["s"] = rng.choice(["x", "y"])
    return ev


def _check(idx: Index, subs: dict[Any, str], schema: Schema, rng: random.Random) -> None:
    """Batches of events all defining every attribute, of mixed events, of one, and each
    event alone: the brute-force answers, each id once."""
    full = [_event(rng, True) for _ in range(50)]
    mixed = [_event(rng, False) for _ in range(50)]
    for batch in (full, mixed, full[:1], mixed[:2] + full[:3]):
        want = [brute(subs, schema, ev) for ev in batch]
        for ev, got, expected in zip(batch, idx.match_many(batch), want, strict=True):
            assert len(got) == len(set(got)), ev
            assert set(got) == expected, ev
    for ev in full[:10] + mixed[:10]:
        assert set(idx.match(ev)) == brute(subs, schema, ev), ev


def _by_intervals(idx: Index, lean: bool) -> bool:
    """Whether the snapshot was matched by intervals: chosen over a whole view, or (``lean``)
    the view held as its interval matcher alone."""
    if not lean:
        return bool(idx.engine.ranging.describe()["intervals"])
    held = idx.engine.flat._held
    return held is not None and held[1].view.ranged is not None and len(held[1].view.rows) == 0


@pytest.mark.parametrize(
    ("seed", "shape", "cache"),
    [(51, "mixed", None), (52, "narrow", None), (53, "mixed", 1 << 20), (54, "narrow", 1 << 20)],
)
def test_batches_by_intervals_match_brute_force(
    tmp_path: Path, seed: int, shape: str, cache: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flatbatch, "LEAST", 2)  # (every batch of two or more as a batch)
    rng = random.Random(seed)
    schema = Schema.from_json(SPEC)
    attrs = NUMERIC if shape == "mixed" else list(NARROW)
    subs = {i: _expr(rng, attrs) for i in range(400)}
    # the least end and the greatest (2**32 - 3 above it: uint32 offsets 1 .. 2**32 - 2)
    subs[10**6] = f"i1 between -60 and {-60 + 2**32 - 3}"
    subs[10**6 + 1] = "i0 between -60 and 60 and i1 >= -60 and i1 <= 60"
    for phase in range(3):
        opened = {"cache_bytes": cache} if cache is not None else {}
        with Index.open(tmp_path, schema=SPEC if phase == 0 else None, **opened) as idx:
            idx.engine.flat.after = 0
            idx.engine.ranging.after = 0
            idx.engine.ranging.margin = math.inf
            if cache is not None:  # no whole view fits: the matcher built from the pages
                idx.engine.flat.share = 8 << 10
            if phase == 0:
                idx.subscribe_many(subs.items())
            _check(idx, subs, schema, rng)
            assert _by_intervals(idx, cache is not None)
            gone = rng.sample(sorted(subs), 40)  # a delta: removed, then added
            idx.unsubscribe_many(gone)
            for ident in gone:
                del subs[ident]
            fresh = {1000 * (phase + 1) + k: _expr(rng, attrs) for k in range(30)}
            idx.subscribe_many(fresh.items())
            subs.update(fresh)
            _check(idx, subs, schema, rng)
            idx.check()
