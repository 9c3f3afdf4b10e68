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
    order = by[0]  # (the groups by their members, most first, ascending among equals)
    assert sorted(order.tolist()) == list(range(len(sizes)))
    assert sorted(order.tolist(), key=lambda g: (-int(sizes[g]), g)) == order.tolist()
    ored, anded = subbits.reduce(bits, by, True), subbits.reduce(bits, by, False)
    for j, g in enumerate(order.tolist()):
        a, n = int(starts[g]), int(sizes[g])
        assert ored[j] == np.bitwise_or.reduce(bits[a : a + n])
        assert anded[j] == np.bitwise_and.reduce(bits[a : a + n])


@pytest.mark.parametrize("rows_of", [1, 3], ids=["one-row", "rows"])
@pytest.mark.parametrize("subs_of", [1, 4], ids=["one-clause", "clauses"])
@pytest.mark.parametrize("removed", [False, True], ids=["kept", "gone"])
def test_held_as_a_loop(rows_of: int, subs_of: int, removed: bool) -> None:
    """:func:`subbits.held` on views of clauses of one row or several and subscriptions
    of one clause or several (their layers then absent: None), with removed clauses or
    none, against a loop: each subscription once, its first clause, in subscription
    order (every clause in clause order where no subscription has several)."""
    rng = np.random.default_rng(rows_of * 10 + subs_of + removed)
    n = 400
    sizes = rng.integers(1, rows_of + 1, size=n)
    row_at = np.concatenate(([0], np.cumsum(sizes)))
    row_clause = np.repeat(np.arange(n), sizes)
    sids = rng.integers(0, n // subs_of, size=n).astype(np.uint64) if subs_of > 1 else None
    view: Any = type("View", (), {})()
    view.rows = np.zeros((int(row_at[-1]), 8), dtype=np.int32)
    view.row_at, view.row_clause, view.sids = row_at, row_clause if rows_of > 1 else None, sids
    gone = rng.random(n) < 0.2 if removed else None
    for _ in range(3):
        rows = np.flatnonzero(rng.random(len(view.rows)) < 0.7)
        mask = rng.integers(0, 2**64, size=len(rows), dtype=np.uint64)
        mask[rng.random(len(rows)) < 0.3] = 0
        bits = np.zeros(len(view.rows), dtype=np.uint64)
        bits[rows] = mask
        clause_bits = [
            0 if gone is not None and gone[c] else int(np.bitwise_and.reduce(bits[a:b]))
            for c, (a, b) in enumerate(zip(row_at[:-1].tolist(), row_at[1:].tolist(), strict=True))
        ]
        if sids is None:
            want = [(c, x) for c, x in enumerate(clause_bits) if x]
        else:
            by_sub: dict[int, list[int]] = {}
            for c in range(n):
                by_sub.setdefault(int(sids[c]), []).append(c)
            want = []
            for _, cs in sorted(by_sub.items()):
                x = 0
                for c in cs:
                    x |= clause_bits[c]
                if x:
                    want.append((cs[0], x))
        clause, got = subbits.held(view, rows, mask, gone)
        assert list(zip(clause.tolist(), got.tolist(), strict=True)) == want
        assert len(want) > 20
