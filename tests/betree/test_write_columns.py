"""A deferred batch of new ids written column-wise (``Writer._insert_new``) against the same
batches written one subscription at a time (``Writer.insert``): the very same records
(``sub``, ``ext``, ``meta``, ``atom`` use counts, ``aid``, direct lists, ``home``, the root
record), ``check()`` after every batch, and matches against the brute-force evaluator,
before and after reopening, over batches that share atoms, reuse atoms a deletion
dropped, carry metadata, hold unsatisfiable and true clauses, and replace ids (those go
one at a time in both stores)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk import catalog, pending, writer
from betree.index import Index
from betree.lang.schema import Schema
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression

#: the catalog's record kinds a batch writes
KINDS = (catalog.SUB, catalog.EXT, catalog.META, catalog.ATOM, catalog.AID, catalog.DIRECT)


@pytest.fixture(autouse=True)
def _every_batch_deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pending, "DEFER_FROM", 1)
    monkeypatch.setattr(pending, "DEFER_STORE", 0)


def records(idx: Index) -> dict[bytes, list[tuple[bytes, bytes]]]:
    with idx.store.read() as txn:
        out = {ns: [(bytes(k), bytes(v)) for k, v in txn.scan(ns)] for ns in KINDS}
        out[catalog.HOME] = [(bytes(k), bytes(v)) for k, v in txn.scan(catalog.HOME)]
        out[b"root"] = [(b"", json.dumps(catalog.root_record(txn), sort_keys=True).encode())]
    return out


@pytest.mark.parametrize("seed", [3, 4])
def test_columns_write_what_one_at_a_time_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    pool = [expression(rng) for _ in range(30)] + ["false", "true"]
    subs: dict[Any, str] = {}
    used = {"columns": 0}
    real = writer.Writer._insert_new

    def counted(self: writer.Writer, *args: Any) -> list[bool]:
        used["columns"] += 1
        return real(self, *args)

    def one_at_a_time(self: writer.Writer, exts: list[bytes]) -> bool:
        return False

    a = Index.open(tmp_path / "a", schema=SCHEMA, settings={"max_cap": 4, "min_size": 2})
    b = Index.open(tmp_path / "b", schema=SCHEMA, settings={"max_cap": 4, "min_size": 2})
    next_id = 0
    for step in range(30):
        r = rng.random()
        if r < 0.7 or not subs:
            batch: list[Any] = []
            for _ in range(rng.randint(1, 40)):
                if subs and rng.random() < 0.05:
                    ident: Any = rng.choice(sorted(subs, key=repr))  # a replacement
                else:
                    ident, next_id = (next_id if rng.random() < 0.5 else f"s{next_id}"), next_id + 1
                expr = rng.choice(pool) if rng.random() < 0.7 else expression(rng)
                meta = {"n": step} if rng.random() < 0.2 else None
                batch.append((ident, expr, meta))
            expected = []
            for ident, expr, _ in batch:
                expected.append(ident not in subs)
                subs[ident] = expr
            with monkeypatch.context() as m:
                m.setattr(writer.Writer, "_insert_new", counted)
                assert a.subscribe_many(batch) == expected
            with monkeypatch.context() as m:
                m.setattr(writer.Writer, "_all_new", one_at_a_time)
                assert b.subscribe_many(batch) == expected
        elif r < 0.85:
            gone = rng.sample(sorted(subs, key=repr), k=min(len(subs), rng.randint(1, 15)))
            for idx in (a, b):
                idx.unsubscribe_many(gone)
            for ident in gone:
                del subs[ident]
        else:
            for idx in (a, b):
                idx.engine.place()
        assert records(a) == records(b), step
        a.check()
        for _ in range(3):
            ev = event(rng)
            assert set(a.match(ev)) == brute(subs, schema, ev), (step, ev)
    assert used["columns"] >= 10
    a.close()
    b.close()
    with Index.open(tmp_path / "a", readonly=True) as idx:
        idx.check()
        for _ in range(30):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, schema, ev)
