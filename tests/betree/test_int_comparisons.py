"""The columnar compile of plain integer conjunctions (``betree.lang.conjuncts.int_comparisons``,
``Compiler.int_comparisons``, ``Batch.add_text``/``add_comparisons``, as ``bexdb load
--engine python`` uses them): where it answers, its triples are the atoms ``compile`` gives
(same clause order, ``[]`` for a false text); where it declines, the general path runs; a
store built through it is the store ``Batch.add`` of the compiled clauses builds, record for
record, passes ``check()`` and answers as brute force, reopened and after deletes.
Workloads: dense ranges (int and float domains), the mixed test workload, int64's edges
(past 18 digits the general path), ``-0``, equal and crossed ``between`` ends, duplicate
attributes, ``in``, ``<>``, unknown and string attributes, texts that do not compile."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk.bulk import Batch
from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from loaders import python_load
from loaders.records import read_jsonl
from storage.errors import InvalidInput
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_dense

EDGES = [0, -1, 1, 10**18 - 1, -(10**18) + 1, 10**18, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1]
OPS = ["<", "<=", "=", "!=", "<>", ">=", ">"]


def _edge_texts(rng: random.Random) -> list[str]:
    """Texts on the test schema's int ``i``/``j`` and float ``f``, every operator, int64's
    edges, ``-0``, equal and crossed ends, duplicates, ``in``, strings and bad texts."""
    texts = [
        "i between 5 and 5",  # equal ends: one "=" atom
        "i between 6 and 5 and j > 1",  # crossed ends: false
        "j > 1 and i between 6 and 5",
        "i between 6 and 5 and s = 'x'",  # false, but not all integer pieces
        "i between -0 and 0",
        "i = -0 and j <> 3",
        "i > 1 and i < 5",  # one attribute twice: the general path merges
        "i in (1, 2) and j > 3",
        "i in (4) and j > 3",
        "f between 1 and 2 and i >= 7",  # int constants on a float attribute
        "f between 1.5 and 2 and i >= 7",
        "nope > 3",
        "s > 3",
        "i > 3 and",
        "i >> 3",
        "i > 03",
        "I > 3",
        "i BETWEEN 1 AND 9 And j<=4",
        "i  between  1  and  9  and  j  =  4",
        "(i > 3) and j < 2",
        "i > 3 or j < 2",
        "not i > 3 and j < 2",
    ]
    for _ in range(400):
        pieces = []
        for attr in rng.sample(["i", "j", "f"], rng.randint(1, 3)):
            a, b = rng.choice([*EDGES, rng.randint(-50, 50)]), rng.choice([*EDGES, 3])
            if rng.random() < 0.5:
                pieces.append(f"{attr} between {a} and {b}")
            else:
                pieces.append(f"{attr} {rng.choice(OPS)} {a}")
        texts.append(" and ".join(pieces))
    return texts


def _outcome(index: Index, ident: Any, text: str) -> object:
    try:
        return index.engine.compiler().compile(ident, text)
    except InvalidInput as exc:
        return ("error", exc.message)


def test_triples_are_the_compiled_atoms(tmp_path: Path) -> None:
    rng = random.Random(11)
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        compiler = idx.engine.compiler()
        texts = _edge_texts(rng) + [expression(rng) for _ in range(400)]
        answered = declined = false = 0
        for n, text in enumerate(texts):
            triples = compiler.int_comparisons(n, text)
            if triples is None:
                declined += 1
                continue
            answered += 1
            want = _outcome(idx, n, text)
            got = [[(attr, op, c) for attr, op, c in triples]] if triples else []
            assert got == [[(a.attr, *a.entries[0]) for a in c] for c in want], text  # type: ignore[attr-defined]
            false += not triples
            assert all(type(c) is int and -(2**63) <= c < 2**63 for _, _, c in triples)
        assert answered > 100 and declined > 100 and false > 10, (answered, declined, false)
        assert compiler.int_comparisons(1, "i between 5 and 5") == [("i", "=", 5)]
        assert compiler.int_comparisons(1, f"i < {2**63}") is None  # past 18 digits
        with pytest.raises(InvalidInput):
            compiler.int_comparisons(float("nan"), "i > 1")  # the id checked as compile does


def _store_records(path: Path) -> dict[bytes, bytes]:
    with Index.open(path) as idx, idx.store.env.begin() as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor()}


def _brute(idx: Index, subs: list[tuple[Any, str]], events: list[dict[str, Any]]) -> int:
    hits = 0
    for ev in events:
        values = idx.schema.validate_event(ev)
        want = {i for i, e in subs if evaluate(compile_expr(e, idx.schema), values)}
        assert set(idx.match(ev)) == want
        assert [set(m) for m in idx.match_many([ev])] == [want]
        hits += len(want)
    return hits


@pytest.mark.parametrize("workload", ["dense-int", "dense-float", "mixed"])
def test_add_text_builds_the_store_add_builds(tmp_path: Path, workload: str) -> None:
    rng = random.Random(7)
    if workload == "mixed":
        doc: dict[str, Any] = SCHEMA
        subs = [
            (f"m{k}", t)
            for k, t in enumerate(_edge_texts(rng) + [expression(rng) for _ in range(300)])
        ]
        events = [event(rng) for _ in range(60)]
    else:
        _, doc, subs, events, _ = gen_dense.make_workload(
            400, 60, seed=5, attributes=6, preds=3, width=0.5,
            domain=workload.split("-")[1], card=200, check=False,
        )  # fmt: skip
        subs += [("eq", "a0 between 7 and 7"), ("empty", "a1 between 9 and 2 and a2 > 1")]
    kept = []
    for via in ("add", "add_text"):
        with Index.open(tmp_path / via, schema=doc, settings={"max_cap": 8}) as idx:
            batch, kept = Batch(idx), []
            for ident, text in subs:
                try:
                    if via == "add":
                        batch.add(ident, text, idx.engine.compiler().compile(ident, text))
                    else:
                        batch.add_text(ident, text)
                except InvalidInput:
                    continue
                kept.append((ident, text))
            batch.build()
            idx.check()
    assert _store_records(tmp_path / "add") == _store_records(tmp_path / "add_text")
    with Index.open(tmp_path / "add_text") as idx:
        assert _brute(idx, kept, events)
        idx.unsubscribe_many([i for i, _ in kept[::4]])
        idx.check()
        left = [s for k, s in enumerate(kept) if k % 4]
    with Index.open(tmp_path / "add_text") as idx:
        _brute(idx, left, events[:20])


def test_python_load_rejects_with_reasons(tmp_path: Path) -> None:
    """Through ``bexdb load --engine python``'s code: good dense lines beside bad ones; the
    rejects name each line's reason, the store answers as brute force on the good ones."""
    _, doc, subs, events, _ = gen_dense.make_workload(
        200, 30, seed=9, attributes=5, preds=3, width=0.4, domain="int", card=100, check=False
    )
    bad = [
        ("b1", "a0 between 1 and"),
        ("b2", "zz > 3"),
        ("b3", f"a1 > {2**64}"),
        ("b4", "a2 = 'x'"),
    ]
    lines = [json.dumps({"id": i, "expr": e}) for i, e in subs + bad]
    path = tmp_path / "subs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rejects = tmp_path / "rejects.jsonl"
    with rejects.open("w") as out:
        summary = python_load.load(
            tmp_path / "store", read_jsonl(path), doc, rejects=out, memory_budget=1
        )
    assert summary["loaded"] == len(subs) and summary["rejected"] == len(bad)
    reasons = {json.loads(line)["id"]: json.loads(line)["error"] for line in rejects.open()}
    assert set(reasons) == {i for i, _ in bad} and all(reasons.values())
    assert "zz" in reasons["b2"]
    with Index.open(tmp_path / "store") as idx:
        idx.check()
        assert _brute(idx, subs, events)
