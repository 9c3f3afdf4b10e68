"""A word's live rows made its held subscriptions over every clause of the view
(:mod:`betree.packed.subbits`: the rows ANDed into clauses, the clauses ORed into
subscriptions, by layers), forced on and off (:data:`betree.packed.flatbatch.DENSE_ROWS`):
``match_many`` against the brute force and both ways alike (a plain store's ids in the same
order), on rich
rules (clauses of several rows, subscriptions of several clauses), python-loaded and
sharded, through deletes, additions (the view's delta) and a reopening; the path seen
taken (or not); and the layers' reductions against a loop on random groups."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flatbatch, subbits
from betree.stores.sharded import open_index
from tests.support.direct import batch_cases, both_ways, churn
from tests.support.loads import python_loaded
from tests.support.workload import build_hashed
from tools.bench import gen_rich

Rich = tuple[dict[str, Any], dict[Any, str], list[Any]]
ON, OFF = 0.0, float("inf")


@pytest.fixture(scope="module")
def rich() -> Rich:
    schema_doc, subs_list, events, _ = gen_rich.make(
        800, 300, check=False, seed=131, target_rate=0.02
    )
    return schema_doc, dict(subs_list), events


def _taken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The clauses each call of :func:`subbits.held` returned (negative on a view with no
    clause of several rows or no subscription of several clauses)."""
    seen: list[int] = []
    held = subbits.held

    def record(view: Any, *args: Any) -> Any:
        got = held(view, *args)
        both = view.row_clause is not None and view.sids is not None
        seen.append(len(got[0]) if both else -1 - len(got[0]))
        return got

    monkeypatch.setattr(subbits, "held", record)
    return seen


def _forcing(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The dense rows' path forced off or on."""
    return lambda on: monkeypatch.setattr(flatbatch, "DENSE_ROWS", ON if on else OFF)


def test_subscriptions_from_every_clause_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    batches = batch_cases(random.Random(132), events)
    seen = _taken(monkeypatch)
    with Index.open(tmp_path / "py") as idx:
        idx.engine.flat.after = 0  # (the view at once, matched on the tree)
        idx.engine.ranging.margin = 0
        assert both_ways(_forcing(monkeypatch), idx.match_many, subs, schema, batches) > 300
        assert seen and max(seen) > 0
        churn(idx, subs, 133)  # deletes, then additions: the view's delta
        seen.clear()
        assert both_ways(_forcing(monkeypatch), idx.match_many, subs, schema, batches) > 200
        assert seen
        seen.clear()
        monkeypatch.setattr(flatbatch, "DENSE_ROWS", OFF)
        idx.match_many(events)
        assert not seen
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        idx.engine.flat.after = 0
        idx.engine.ranging.margin = 0
        seen.clear()
        assert (
            both_ways(_forcing(monkeypatch), idx.match_many_arrays, subs, schema, batches[:3]) > 200
        )
        assert seen


def test_subscriptions_from_every_clause_sharded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rich: Rich
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    root = Path(build_hashed(tmp_path / "s", subs, 3, schema_doc))
    seen = _taken(monkeypatch)
    batches = batch_cases(random.Random(134), events)
    with open_index(str(root), readonly=False) as store:
        store.match_many(events)  # (the views built)
        assert (
            both_ways(_forcing(monkeypatch), store.match_many, subs, schema, batches, False) > 300
        )
        assert seen and max(seen) > 0
        gone = list(subs)[3:300:3]
        store.unsubscribe_many(gone)
        for ident in gone:
            del subs[ident]
        assert (
            both_ways(_forcing(monkeypatch), store.match_many, subs, schema, batches[:3], False)
            > 200
        )


@pytest.mark.parametrize("seed", range(5))
def test_layers_reduce_as_a_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6 if seed else 2, size=300)  # (seed 0: every group of one)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    bits = rng.integers(0, 2**64, size=int(sizes.sum()), dtype=np.uint64)
    bits[rng.random(len(bits)) < 0.3] = 0
    by = subbits.layers(starts, len(bits))
    ored, anded = subbits.reduce(bits, by, True), subbits.reduce(bits, by, False)
    for g, (a, n) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
        assert ored[g] == np.bitwise_or.reduce(bits[a : a + n])
        assert anded[g] == np.bitwise_and.reduce(bits[a : a + n])
