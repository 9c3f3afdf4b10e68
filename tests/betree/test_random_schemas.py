"""Random schemas (:mod:`tests.support.random_schemas`) against the brute-force evaluator,
on every matching path one store goes through: the pages, a packed view caught up across
writes (deltas folded at a tiny bound, in the background), the view matched by intervals;
``match``, ``match_many`` and ``match_many_arrays`` (batches of 1, 63, 65, 128 and 160:
from 128 events a view matches 64 a machine word), with
refused events among valid ones in a batch; subscribes, replacements and deletes between
the phases; then the store reopened.  One run of a plain store and one of a hash-sharded
store.  Stop 36's checker: other attribute counts, hints, pools of shared constants and
ends at ±2**63 than the fixed schemas (it found intervals failing on ends near -2**63)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import delta
from betree.stores.sharded import HASH, open_index, shard_name, shard_of, write_manifest
from storage.codec import encode_id
from storage.errors import InvalidInput
from tests.support.brute import brute
from tests.support.random_schemas import I64_MAX, I64_MIN, Draw, draw_schema

MODES = ("pages", "view", "intervals")


def _mode(store: Any, mode: str) -> None:
    """Match ``store`` (each shard) by walking its pages, on a packed view, or on the
    view by intervals, whatever each costs."""
    for idx in getattr(store, "indexes", None) or [store]:
        engine = idx.engine
        engine.flat.after = 1 << 60 if mode == "pages" else 0
        engine.ranging.after = 0 if mode == "intervals" else 1 << 60
        engine.ranging.margin = math.inf


def _check(
    store: Any,
    subs: dict[Any, str],
    schema: Schema,
    events: list[Any],
    draw: Draw,
    sizes: tuple[int, ...] = (160, 1, 63, 65, 128),
    singles: int = 25,
) -> None:
    """Every path's answers equal the brute force's (``match`` of the first ``singles``
    events, batches of ``sizes``); refused events refused alone."""
    want = [brute(subs, schema, ev) for ev in events]
    for ev, expected in zip(events[:singles], want, strict=False):
        got = store.match(ev)
        assert len(got) == len(set(got)) and set(got) == expected, ev
    for size in sizes:
        for start in range(0, len(events), size):
            batch, expected = events[start : start + size], want[start : start + size]
            for ev, got, arr, exp in zip(
                batch, store.match_many(batch), store.match_many_arrays(batch), expected,
                strict=True,
            ):  # fmt: skip
                assert len(got) == len(set(got)) and set(got) == exp, (size, ev)
                assert isinstance(arr, np.ndarray) and set(arr.tolist()) == exp, (size, ev)
    bad = draw.bad_events()
    mixed = list(events[:10])
    for b in bad:
        mixed.insert(draw.rng.randrange(len(mixed) + 1), b)
    for ev, got, arr in zip(
        mixed, store.match_many(mixed), store.match_many_arrays(mixed), strict=True
    ):
        if any(ev is b for b in bad):
            assert isinstance(got, InvalidInput) and isinstance(arr, InvalidInput), ev
            with pytest.raises(InvalidInput):
                store.match(ev)
        else:
            assert set(got) == brute(subs, schema, ev), ev


def _write(store: Any, subs: dict[Any, str], draw: Draw, tag: str) -> None:
    """Deletes, or new subscriptions with a replacement among them."""
    rng = draw.rng
    if rng.random() < 0.35 and subs:
        gone = rng.sample(sorted(subs, key=repr), min(len(subs), rng.randint(1, 5)))
        store.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        return
    ids = [
        rng.choice([f"{tag}-{k}", rng.randint(I64_MIN, I64_MAX)]) for k in range(rng.randint(1, 6))
    ]
    fresh = {ident: draw.expression() for ident in ids}
    if subs and rng.random() < 0.5:
        fresh[rng.choice(sorted(subs, key=repr))] = draw.expression()
    store.subscribe_many(fresh.items())
    subs.update(fresh)


def _workload(seed: int) -> tuple[dict[str, Any], Schema, Draw, dict[Any, str], list[Any]]:
    rng = random.Random(seed)
    doc = draw_schema(rng)
    draw = Draw(rng, doc)
    n = rng.choice([0, 1, 60, 150])
    if rng.random() < 0.15:  # all identical
        text = draw.expression()
        subs: dict[Any, str] = dict.fromkeys(range(n), text)
    else:
        ids = [rng.choice([i, f"id{i}", I64_MAX - i, I64_MIN + i]) for i in range(n)]
        subs = {ident: draw.expression() for ident in ids}
    return doc, Schema.from_json(doc), draw, subs, [draw.event() for _ in range(160)]


@pytest.fixture()
def small_folds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas folded at a tiny bound (in the background, then at once far past it)."""
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)


@pytest.mark.sampled(2)
@pytest.mark.parametrize("seed", range(8))
def test_plain_store(tmp_path: Path, seed: int, small_folds: None) -> None:
    doc, schema, draw, subs, events = _workload(seed)
    with Index.open(tmp_path, schema=doc) as idx:
        idx.subscribe_many(subs.items())
        for mode in MODES:
            _mode(idx, mode)
            _check(idx, subs, schema, events, draw)
            for step in range(3):
                _write(idx, subs, draw, f"{mode}{step}")
                _check(idx, subs, schema, events, draw, (160,), 6)
        idx.engine.flat.wait()
        _check(idx, subs, schema, events, draw)
        idx.check()
    with Index.open(tmp_path) as idx:
        _mode(idx, MODES[seed % 3])
        _check(idx, subs, schema, events, draw)


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", range(100, 104))
def test_hash_sharded_store(tmp_path: Path, seed: int, small_folds: None) -> None:
    doc, schema, draw, subs, events = _workload(seed)
    shards = 1 + seed % 3
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, text in subs.items():
        parts[shard_of(encode_id(ident), shards)].append((ident, text))
    for k, part in enumerate(parts):
        with Index.open(tmp_path / shard_name(k), schema=doc) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(tmp_path, entries, {"by": "id", "hash": HASH, "shards": shards})
    with open_index(tmp_path, readonly=False) as store:
        for mode in MODES:
            _mode(store, mode)
            _check(store, subs, schema, events, draw)
            _write(store, subs, draw, mode)
            _check(store, subs, schema, events, draw, (160,), 6)
    with open_index(tmp_path) as store:
        _mode(store, MODES[seed % 3])
        _check(store, subs, schema, events, draw)
