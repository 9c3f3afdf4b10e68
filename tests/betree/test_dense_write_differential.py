"""Online writes into a dense store built by the batch build (``betree.disk.bulk.Batch``),
against the brute-force evaluator: the PB+tree pages the build wrote whole (full leaves,
list nodes of up to 2,048 items) changed in place by ``subscribe_many`` of new ids,
replacements, ``unsubscribe_many`` and single writes, so that leaves split and merge, list
items come and go and list nodes split (``pbtree.nodes``: runs changed as arrays, nodes
copied from the page cache).  ``check()`` after every write; matches against the brute
force after every write and on the store reopened."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk.bulk import Batch
from betree.index import Index
from betree.lang.schema import Schema
from tests.support.brute import brute
from tools.bench import gen_dense

ATTRS = 2


def other_form(rng: random.Random) -> str:
    """Comparisons beside the ranges: ``=`` runs in the leaves, strict bounds, ``!=``'s list."""
    a, b = rng.randrange(ATTRS), rng.randrange(ATTRS)
    k, m = rng.randrange(10**6), rng.randrange(10**6)
    return rng.choice(
        [
            f"a{a} = {k}",
            f"a{a} > {k} and a{b} < {m}",
            f"a{a} != {k}",
            f"a{a} >= {k} or a{b} <= {m}",
            f"a{a} between {min(k, m)} and {max(k, m)} and a{b} != {m}",
        ]
    )


def matches(idx: Index, schema: Schema, subs: dict[Any, str], events: list[Any]) -> None:
    for ev in events:
        got = idx.match(ev)
        assert len(got) == len(set(got)), "an id returned twice"
        assert set(got) == brute(subs, schema, ev), ev


@pytest.mark.parametrize("seed", [1, 2])
def test_online_writes_into_a_built_dense_store(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    _, doc, dense, events, _ = gen_dense.make_workload(
        2800, 40, seed=seed, attributes=ATTRS, preds=2, width=0.4, domain="int", check=False
    )
    schema = Schema.from_json(doc)
    base, spare = dense[:1950], dense[1950:]
    subs: dict[Any, str] = dict(base)
    path = tmp_path / "s"
    with Index.open(path, schema=doc, sync=False) as idx:
        batch = Batch(idx)
        for ident, expr in base:
            batch.add_text(ident, expr)
        batch.build()
        idx.check()
    for phase in range(2):  # the second on the store reopened
        with Index.open(path, sync=False) as idx:
            matches(idx, schema, subs, events[:5])
            for step in range(8):
                r = rng.random()
                if r < 0.35 and spare:  # new ids, many atoms: leaves split, list nodes fill
                    new: list[tuple[Any, str]] = [
                        spare.pop() for _ in range(min(len(spare), rng.randint(20, 120)))
                    ]
                    new += [(f"o{phase}-{step}-{k}", other_form(rng)) for k in range(10)]
                    idx.subscribe_many(new)
                    subs.update(new)
                elif r < 0.6:  # replacements: the old atoms go, new ones come
                    olds = rng.sample(sorted(subs, key=repr), min(len(subs), 60))
                    again = [(i, rng.choice([other_form(rng), rng.choice(dense)[1]])) for i in olds]
                    idx.subscribe_many(again)
                    subs.update(again)
                elif r < 0.85:  # deletes: items leave leaves and lists, nodes merge
                    gone = rng.sample(sorted(subs, key=repr), min(len(subs), rng.randint(50, 300)))
                    assert all(idx.unsubscribe_many(gone))
                    for ident in gone:
                        del subs[ident]
                else:  # one at a time
                    one, expr = f"one{phase}-{step}", other_form(rng)
                    idx.subscribe(one, expr)
                    subs[one] = expr
                    victim = rng.choice(sorted(subs, key=repr))
                    assert idx.unsubscribe(victim)
                    del subs[victim]
                idx.check()
                matches(idx, schema, subs, rng.sample(events, 4))
            assert len(idx) == len(subs)
    with Index.open(path, readonly=True) as idx:
        matches(idx, schema, subs, events)
