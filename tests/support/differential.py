"""The online differential run of a store against the brute-force evaluator, over any
workload: random subscribes (batches of three, ids drawn from a small range so that some
replace), deletes and matches, ``check()`` on the way, then a batch through ``match_many``;
twice, the second time on the store reopened. The real-events workload
(:mod:`tests.support.real_events`) and the be-tree library's forms
(``tests/betree/test_special_differential.py``) both run it."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from betree.index import Index
from betree.lang.schema import Schema
from tests.support.brute import brute


def online_differential(
    path: Path,
    schema_doc: dict[str, Any],
    settings: dict[str, int],
    expression: Callable[[random.Random], str],
    event: Callable[[random.Random], dict[str, Any]],
    seed: int,
    steps: int = 150,
) -> int:
    """``steps`` steps a phase on a store at ``path``, every ``match`` against the brute force
    and every event of an 80-event ``match_many``; the number of matches seen."""
    rng = random.Random(seed)
    schema = Schema.from_json(schema_doc)
    subs: dict[Any, str] = {}
    matched = 0
    for phase in range(2):  # the second reopens the store
        with Index.open(path, schema=None if phase else schema_doc, settings=settings) as idx:
            for step in range(steps):
                r = rng.random()
                if r < 0.45 or not subs:
                    batch = [(f"s{rng.randint(0, 120)}", expression(rng)) for _ in range(3)]
                    idx.subscribe_many(batch)
                    subs.update(batch)
                elif r < 0.55:
                    ident = rng.choice(sorted(subs))
                    assert idx.unsubscribe(ident)
                    del subs[ident]
                else:
                    ev = event(rng)
                    got = idx.match(ev)
                    assert len(got) == len(set(got))
                    want = brute(subs, schema, ev)
                    assert set(got) == want, (ev, phase, step)
                    matched += len(want)
                if step % 30 == 0:
                    idx.check()
            idx.check()
            events = [event(rng) for _ in range(80)]
            for ev, res in zip(events, idx.match_many(events), strict=True):
                assert set(res) == brute(subs, schema, ev), ev  # type: ignore[arg-type]
    return matched
