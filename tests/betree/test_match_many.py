"""``match_many`` against per-event ``Index.match`` and the brute-force evaluator (issue 16).

Random workloads over every attribute type (:mod:`tests.support.workload`) with deletes,
replacements and reopening; batches of 1, 2, 17 and 256 events with duplicates and invalid
events mixed in; the edge values of :mod:`tests.support.edges`; a sharded store.  The oracle is
``betree.lang.expr.evaluate`` over the parsed expression — it never sees the index.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from storage.errors import InvalidInput
from tests.support import edges
from tests.support.workload import SCHEMA, build_sharded, event, expression

BATCH_SIZES = (1, 2, 17, 256)
#: events that fail validation, each for a reason of its own
INVALID: list[Any] = [
    [1, 2],
    "event",
    7,
    {"i": "not an int"},
    {"il": [1, None]},
    {"b": 3},
    {"f": float("nan")},
    {"sl": "not a list"},
]


@functools.cache
def _compiled(expr: str, schema: Schema) -> Any:
    return compile_expr(expr, schema)


def brute(subs: dict[Any, str], schema: Schema, values: dict[str, Any]) -> set[Any]:
    return {ident for ident, expr in subs.items() if evaluate(_compiled(expr, schema), values)}


def batch_of(rng: random.Random, size: int) -> list[Any]:
    """``size`` random events, some repeated, some invalid (never all of them)."""
    out: list[Any] = []
    for _ in range(size):
        r = rng.random()
        if out and r < 0.15:
            out.append(rng.choice(out))  # a duplicate
        elif size > 1 and r < 0.25:
            out.append(rng.choice(INVALID))
        else:
            out.append(event(rng))
    return out


def check_batch(store: Any, schema: Schema, subs: dict[Any, str], batch: list[Any]) -> None:
    """``store.match_many(batch)`` agrees, event by event, with ``store.match`` and the
    brute-force oracle; invalid events get the error ``match`` raises, the others match."""
    results = store.match_many(batch)
    assert len(results) == len(batch)
    for ev, got in zip(batch, results, strict=True):
        try:
            values = schema.validate_event(ev) if isinstance(ev, dict) else None
        except InvalidInput as exc:
            assert isinstance(got, InvalidInput), (ev, got)
            assert got.message == exc.message
            continue
        if values is None:
            assert isinstance(got, InvalidInput), (ev, got)
            assert got.message == "an event must be a JSON object"
            continue
        assert isinstance(got, list), (ev, got)
        assert len(got) == len(set(got)), "an id returned twice"
        assert set(got) == set(store.match(ev)) == brute(subs, schema, values), ev


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_match_many_differential(tmp_path: Path, seed: int) -> None:
    """Writes, deletes and reopening between batches of every size; small ``max_cap`` so
    that the tree has p-nodes, split buckets and spilled l-nodes."""
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = {}
    settings = {"max_cap": 4, "min_size": 2}
    for _ in range(3):
        with Index.open(tmp_path, schema=SCHEMA, settings=settings) as idx:
            for _step in range(60):
                r = rng.random()
                if r < 0.6 or not subs:
                    batch = [(rng.randint(0, 300), expression(rng)) for _ in range(8)]
                    batch.append((f"s{rng.randint(0, 50)}", expression(rng)))
                    idx.subscribe_many(batch)
                    subs.update(batch)
                elif r < 0.85:
                    ident = rng.choice(sorted(subs, key=repr))
                    assert idx.unsubscribe(ident)
                    del subs[ident]
                else:
                    check_batch(idx, schema, subs, batch_of(rng, rng.choice(BATCH_SIZES)))
            for size in BATCH_SIZES:
                check_batch(idx, schema, subs, batch_of(rng, size))
    with Index.open(tmp_path, readonly=True) as idx:
        check_batch(idx, schema, subs, batch_of(rng, 256))
        assert idx.match_many([]) == []


def test_a_batch_split_in_parts_reports_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch walked on the pages in parts of ``MAX_EVENTS`` (a bound on its bit matrix)
    reports the candidates and phase seconds of every part, not of its last one (the
    figures ``bexdb bench match`` adds up), and matches as the brute force."""
    from betree.matching import batch as batching
    from betree.matching.pages import Pages

    rng = random.Random(9)
    subs = {n: expression(rng) for n in range(120)}
    schema = Schema.from_json(SCHEMA)
    events = [schema.validate_event(event(rng)) for _ in range(90)]
    seen = []
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(subs.items())
        engine = idx.engine
        for part in (1024, 40):  # one part, then three
            monkeypatch.setattr(batching, "MAX_EVENTS", part)
            with idx.store.read() as txn:
                pages = Pages(txn, engine.snapshot(txn), engine.types, engine.scalar, None)
                found = pages.match_many(events, lists=True)
            seen.append((pages.stats["candidates"], set(pages.timings)))
            for values, got in zip(events, found, strict=True):
                assert set(got) == brute(subs, schema, values)
    assert seen[0] == seen[1] and seen[0][0] > 0, seen
    assert seen[0][1] == {"phase1", "walk", "check", "results"}


def test_match_many_edges(tmp_path: Path) -> None:
    """Every edge atom, alone and under ``not``, against the edge events in one batch."""
    schema = Schema.from_json(edges.EDGE_SCHEMA)
    atoms = edges.edge_atoms()
    subs: dict[Any, str] = {}
    for k, text in enumerate(atoms):
        subs[k] = text
        subs[f"n{k}"] = f"not ({text})"
    with Index.open(tmp_path, schema=edges.EDGE_SCHEMA, settings={"max_cap": 8}) as idx:
        idx.subscribe_many(list(subs.items()))
        batch: list[Any] = [*edges.EVENTS, *edges.EVENTS[:5], "bad", {"x": 1.5}]
        check_batch(idx, schema, subs, batch)


def test_match_many_sharded(tmp_path: Path) -> None:
    """A sharded store answers each event with the union of its shards."""
    rng = random.Random(7)
    schema = Schema.from_json(SCHEMA)
    subs = {i: expression(rng) for i in range(300)}
    with open_index(build_sharded(tmp_path / "sharded", subs)) as store:
        for size in BATCH_SIZES:
            check_batch(store, schema, subs, batch_of(rng, size))
    with open_index(tmp_path / "sharded" / "shard-0000") as plain:
        part = {i: e for i, e in subs.items() if i % 2 == 0}
        check_batch(plain, schema, part, batch_of(rng, 17))


def test_match_many_feeds_self_adjustment(tmp_path: Path) -> None:
    """With statistics being collected, a batch is matched event by event and counted as
    its events; the answers are the same."""
    rng = random.Random(11)
    schema = Schema.from_json(SCHEMA)
    subs = {i: expression(rng) for i in range(200)}
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(list(subs.items()))
        idx.engine.collecting = True
        batch = [event(rng) for _ in range(17)]
        check_batch(idx, schema, subs, batch)
        assert idx.adjustment.collector is not None and idx.adjustment.collector.events == 2 * len(
            batch
        )
