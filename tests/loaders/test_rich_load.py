"""``bexdb load --engine python`` of rich ad-targeting rules (``bexdb gen --profile rich``:
fold_case strings and in-lists, ``one of``/``none of``/``all of``, patterns, ip, geo,
segments, frequency caps, ``or``/``not``): the batch interns its atoms by their store
keys, so what compiling keeps is bytes, not atom objects.  Each store answers ``match``
and ``match_many`` as the brute-force evaluator does, reopened, after deletes and a new
subscription, under several memory budgets; a Spark load (sharded) too; ``check()`` is
clean.  No timing asserted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from betree import compiler as compiler_module
from betree.disk import catalog
from betree.disk.bulk import Batch
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from loaders import python_load
from loaders.records import read_jsonl
from loaders.spark import driver
from storage import codec
from tests.support.brute import brute_answers
from tools.bench import gen_rich

SETTINGS = {"max_cap": 8, "min_size": 2}

Rich = tuple[dict[str, Any], list[tuple[Any, str]], list[Any]]


@pytest.fixture(scope="module")
def rich() -> Rich:
    doc, subs, events, _ = gen_rich.make(700, 120, check=False, seed=38, target_rate=0.02)
    mixed: list[tuple[Any, str]] = [(i if i % 4 else f"r{i}", e) for i, e in subs]
    return doc, mixed, events


def _answers(reader: Any, events: list[Any]) -> list[list[str]]:
    one = [sorted(json.dumps(m) for m in reader.match(ev)) for ev in events]
    many = [sorted(json.dumps(m) for m in ms) for ms in reader.match_many(events)]
    assert one == many
    return one


@pytest.mark.parametrize("budget", [None, 1])
def test_rich_python_load_answers_as_brute_force(tmp_path: Path, rich: Rich, budget: Any) -> None:
    doc, subs, events = rich
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    expected = brute_answers(doc, subs, events)
    assert sum(map(len, expected)) > 20
    target = tmp_path / "store"
    summary = python_load.load(
        target, read_jsonl(path), doc, settings=SETTINGS, memory_budget=budget
    )
    assert summary["loaded"] == len(subs) and summary["rejected"] == 0
    assert (summary["compile_chunks"] > 1) == (budget is not None)
    with Index.open(target) as idx:  # reopened
        idx.check()
        assert _answers(idx, events) == expected
        gone = [i for i, _ in subs[::3]]
        assert all(idx.unsubscribe_many(gone))
        new = ("n1", 'user.interests one of ("x", "Topic-1-news") or hour < 3')
        idx.subscribe(*new)
        idx.check()
        left = [(i, e) for i, e in subs if i not in set(gone)] + [new]
        assert _answers(idx, events) == brute_answers(doc, left, events)


def test_batch_keeps_store_keys_not_atoms(tmp_path: Path, rich: Rich) -> None:
    """What a batch keeps a subscription compiled: each distinct atom (but the int
    comparisons held as columns) once, as its store key (bytes); the build writes exactly
    those keys to the atom catalog, and the stored clauses are the compiler's."""
    doc, subs, _ = rich
    schema = Schema.from_json(doc)
    with Index.open(tmp_path / "s", schema=schema, settings=SETTINGS) as idx:
        batch = Batch(idx)
        compiler = idx.engine.compiler()
        expected: set[bytes] = set()
        for ident, expr in subs:
            batch.add_text(ident, expr)
            for clause in compiler.compile(ident, expr):
                expected.update(codec.encode_value(a.as_tuple()) for a in clause)
        held = list(batch.atoms)
        assert held and all(type(key) is bytes for key in held)
        assert len(set(held)) == len(held) and set(held) <= expected
        columns = len(batch.col_const)
        assert len(held) + columns >= len(expected)
        batch.build()
        with idx.store.read() as txn:
            stored = set(txn.scan_all(catalog.ATOM)[0])
            aids, keys = txn.scan_all(catalog.AID)
            key_of = dict(zip(codec.decode_u64s(aids).tolist(), keys, strict=True))
            records = list(map(codec.decode_value, txn.scan_all(catalog.SUB)[1]))
        assert stored == expected
        for (ident, expr), (stored_id, text, clauses) in zip(subs, records, strict=True):
            assert (stored_id, text) == (ident, expr)
            got = sorted(sorted(key_of[a] for a in c if a) for c in clauses)
            want = [
                sorted(codec.encode_value(a.as_tuple()) for a in c)
                for c in compiler.compile(ident, expr)
            ]
            assert got == sorted(want), ident


@pytest.mark.spark
def test_rich_spark_load_answers_as_brute_force(spark: Any, tmp_path: Path) -> None:
    """A Spark load (two shards, one compile task a file, so that a compiler sees more
    expressions than the memo's window and leaves it) answers as brute force does."""
    n = compiler_module.MEMO_WINDOW + 300
    doc, subs, events, _ = gen_rich.make(n, 60, check=False, seed=39, target_rate=0.02)
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    summary = driver.load(
        tmp_path / "spark",
        [str(path)],
        doc,
        spark=spark,
        shards=2,
        settings=SETTINGS,
        split_bytes=1 << 30,
        progress=None,
    )
    assert summary["loaded"] == n
    expected = brute_answers(doc, subs, events)
    assert sum(map(len, expected)) > 20
    with open_index(tmp_path / "spark") as idx:
        idx.check()
        assert _answers(idx, events) == expected
