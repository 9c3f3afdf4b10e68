"""The index against a brute-force evaluator on random workloads.

Every form of SPEC section 3, missing and null attributes, lists, or/not nesting, deletes,
replacements and reopening; ``check()`` after mutations.  The oracle is
``betree.lang.expr.evaluate`` over the parsed expression — it never sees the index.
"""

from __future__ import annotations

import random
import tempfile
from typing import Any

import pytest

from betree.index import Index
from betree.lang.schema import Schema
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression


def run(seed: int, steps: int, settings: dict[str, int], flat: bool = False) -> None:
    """``flat``: every match from a packed view of its snapshot (betree.packed.flat), built
    afresh after each write, instead of only once a snapshot has served many events."""
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = {}
    with tempfile.TemporaryDirectory() as path:
        for phase in range(3):
            with Index.open(path, schema=SCHEMA, settings=settings) as idx:
                if flat:
                    idx.engine.flat.after = 0
                for step in range(steps):
                    r = rng.random()
                    if r < 0.5 or not subs:
                        ident: Any = rng.choice([rng.randint(0, 400), f"s{rng.randint(0, 400)}"])
                        batch = [(ident, expression(rng))]
                        if rng.random() < 0.2:
                            batch += [(f"b{step}-{k}", expression(rng)) for k in range(20)]
                        idx.subscribe_many(batch)
                        subs.update(batch)
                    elif r < 0.7:
                        ident = rng.choice(sorted(subs, key=repr))
                        assert idx.unsubscribe(ident)
                        del subs[ident]
                        assert not idx.unsubscribe(ident)
                    else:
                        ev = event(rng)
                        got = idx.match(ev)
                        assert len(got) == len(set(got)), "an id returned twice"
                        assert set(got) == brute(subs, schema, ev), (ev, phase, step)
                        assert idx.engine.flat.describe()["held"] == flat
                    if step % 10 == 0:
                        idx.check()
                idx.check()
                assert len(idx) == len(subs)
        with Index.open(path, readonly=True) as idx:
            if flat:
                idx.engine.flat.after = 0
            for _ in range(50):
                ev = event(rng)
                assert set(idx.match(ev)) == brute(subs, schema, ev)


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_nodes(seed: int) -> None:
    """Tiny l-nodes: partitioning, clustering and merging on nearly every step."""
    run(seed, 150, {"max_cap": 3, "min_size": 2})


def test_default_nodes() -> None:
    run(7, 150, {})


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_small_nodes_flat(seed: int) -> None:
    """The same workloads matched from packed views (deep trees, many buckets)."""
    run(seed, 150, {"max_cap": 3, "min_size": 2}, flat=True)


def test_default_nodes_flat() -> None:
    run(8, 150, {}, flat=True)
