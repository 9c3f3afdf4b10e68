"""Batches of writes in one transaction against a brute-force evaluator.

A write transaction keeps atom use counts and clause places in memory and writes the
counts once at its end (:class:`betree.disk.writer.Writer`), so a batch that uses an atom
many times, replaces a subscription it inserted itself, or drops an atom's last use and
then uses the atom again, must leave the same store as one write at a time would:
``check()`` (use counts, reverse records, homes, tree invariants) after every batch,
matches against ``betree.lang.expr.evaluate``, and again after reopening.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from typing import Any

import pytest

from betree.index import Index
from betree.lang.schema import Schema
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression


def run(seed: int, batches: int, settings: dict[str, int]) -> None:
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = {}
    pool = [expression(rng) for _ in range(25)]  # few expressions: atoms shared widely
    with tempfile.TemporaryDirectory() as path:
        for phase in range(2):
            with Index.open(path, schema=SCHEMA, settings=settings) as idx:
                for b in range(batches):
                    r = rng.random()
                    if r < 0.75 or not subs:
                        batch: list[tuple[Any, str]] = []
                        for _ in range(rng.randint(1, 60)):
                            ident: Any = rng.choice([rng.randint(0, 80), f"s{rng.randint(0, 80)}"])
                            expr = rng.choice(pool) if rng.random() < 0.7 else expression(rng)
                            batch.append((ident, expr))  # ids repeat: replaced in the batch
                        expected = []
                        for ident, expr in batch:
                            expected.append(ident not in subs)
                            subs[ident] = expr
                        assert idx.subscribe_many(batch) == expected
                    else:
                        gone = rng.sample(
                            sorted(subs, key=repr), k=min(len(subs), rng.randint(1, 30))
                        )
                        found = idx.unsubscribe_many([*gone, gone[0]])
                        assert found == [True] * len(gone) + [False]  # the repeat is gone
                        for ident in gone:
                            del subs[ident]
                    idx.check()
                    assert len(idx) == len(subs)
                    for _ in range(3):
                        ev = event(rng)
                        got = idx.match(ev)
                        assert len(got) == len(set(got)), "an id returned twice"
                        assert set(got) == brute(subs, schema, ev), (ev, phase, b)
        with Index.open(path, readonly=True) as idx:
            for _ in range(40):
                ev = event(rng)
                assert set(idx.match(ev)) == brute(subs, schema, ev)


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [11, 12])
def test_batches_small_nodes(seed: int) -> None:
    """Tiny l-nodes: each batch partitions and clusters, re-reading stored clauses' places."""
    run(seed, 40, {"max_cap": 3, "min_size": 2})


def test_batches_default_nodes() -> None:
    run(13, 40, {})


def test_batch_drops_and_reuses_an_atom() -> None:
    """An atom's last use removed and the atom used again in one transaction: a fresh
    atom id, no stale record; and the reverse (a new atom dropped in its own batch)."""
    schema = Schema.from_json(SCHEMA)
    with tempfile.TemporaryDirectory() as path, Index.open(path, schema=SCHEMA) as idx:
        expr = "i = 3 and s = 'ab'"
        idx.subscribe_many([(1, expr)])
        idx.subscribe_many(
            [
                (1, "i = 4 or s != 'ab'"),
                (2, expr),
                (1, expr),
                (2, "i = 5"),
                (3, "i = 4 or s != 'ab'"),
            ]
        )
        idx.check()
        subs = {1: expr, 2: "i = 5", 3: "i = 4 or s != 'ab'"}
        for value in (3, 4, 5, 6):
            ev = {"i": value, "s": "ab"}
            assert set(idx.match(ev)) == brute(subs, schema, ev)
        assert idx.unsubscribe_many([1, 2, 3]) == [True, True, True]
        idx.check()
        assert idx.match({"i": 3, "s": "ab"}) == []


def test_atom_counts_kept_only_while_no_other_writer_committed() -> None:
    """The writer keeps the ``atom`` records its commits left (``Memo.counts``) for the next
    transaction of the process; another process's commit in between (here one that uses
    and drops the same atoms) must make it read them again: ``check()`` compares every
    atom's use count with its uses, so a stale count kept would fail it."""
    schema = Schema.from_json(SCHEMA)
    rng = random.Random(5)
    pool = [expression(rng) for _ in range(12)]
    other = (
        "import sys, json; from betree.index import Index\n"
        "with Index.open(sys.argv[1]) as idx:\n"
        "    batch = json.loads(sys.argv[2])\n"
        "    idx.subscribe_many(batch)\n"
        "    idx.unsubscribe_many([i for i, _ in batch[::2]])\n"
    )
    subs: dict[Any, str] = {}
    with tempfile.TemporaryDirectory() as path, Index.open(path, schema=SCHEMA) as idx:
        for round_ in range(6):
            batch = [(f"a{round_}-{k}", rng.choice(pool)) for k in range(20)]
            idx.subscribe_many(batch)
            subs.update(batch)
            theirs = [(f"b{round_}-{k}", rng.choice(pool)) for k in range(20)]
            argv = [sys.executable, "-c", other, path, json.dumps(theirs)]
            subprocess.run(argv, check=True)
            subs.update(theirs[1::2])
            mine = [(f"c{round_}-{k}", rng.choice(pool)) for k in range(3)]
            idx.subscribe_many(mine)
            subs.update(mine)
            idx.check()
        assert dict(idx.subscriptions()) == subs
        for _ in range(20):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, schema, ev)
