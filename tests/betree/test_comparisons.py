"""The columnar compile of plain numeric conjunctions (``betree.lang.comparisons``,
``Compiler.comparisons``, ``Batch.add_text``/``add_comparisons``, as ``bexdb load --engine
python`` uses them): where it answers, its triples are the atoms ``compile`` gives (same
clause order, same constants of the same type, ``[]`` for a false text); where it declines,
the general path runs; a store built through it is the store ``Batch.add`` of the compiled
clauses builds, record for record, passes ``check()`` and answers as brute force, reopened
and after deletes.  Workloads: dense ranges (int and float domains), the mixed test
workload, int64's and double's edges (±2**63, ±1.8e308, an overflow, subnormals, ``-0``,
``-0.0``), integral floats, leading zeros, equal and crossed ``between`` ends, duplicate
attributes, ``in``, ``<>``, keywords' case, tabs and newlines, unknown and string
attributes, texts that do not compile."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from betree.disk import catalog
from betree.disk.bulk import Batch
from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from loaders import python_load
from loaders.records import read_jsonl
from storage import codec
from storage.errors import InvalidInput
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_dense

EDGES = [0, -1, 1, 10**18 - 1, -(10**18) + 1, 10**18, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1]
FLOATS = [
    "0.0", "-0.0", "0.5", "-2.25", "1.", "1.e3", "1E3", "2.5e-3", "1e-400", "5e-324",
    "-5e-324", "1.8e308", "-1.8e308", "1e309", "-1e309", "9223372036854775807.0",
    "9223372036854775808.0", "-9223372036854775808.0", "-9223372036854775809.0", "03", "-03",
    "1e19", "123456789.123456789",
]  # fmt: skip
OPS = ["<", "<=", "=", "!=", "<>", ">=", ">"]


def _edge_texts(rng: random.Random) -> list[str]:
    """Texts on the test schema's int ``i``/``j`` and float ``f``, every operator, int64's
    and double's edges, ``-0``, equal and crossed ends, duplicates, ``in``, strings, case,
    whitespace and bad texts."""
    texts = [
        "i between 5 and 5",  # equal ends: one "=" atom
        "i between 6 and 5 and j > 1",  # crossed ends: false
        "j > 1 and i between 6 and 5",
        "i between 6 and 5 and s = 'x'",  # false, but not all numeric pieces
        "i between 6 and 5 and j > 1e309",  # false, and an overflow: the error wins
        "i between -0 and 0",
        "i = -0 and j <> 3",
        "f between -0.0 and 0.0 and i = -0.0",
        "f between 0.5 and 0.5",
        "f between 2.5 and 2",
        "f between 1 and 1.0",
        "i > 1 and i < 5",  # one attribute twice: the general path merges
        "f > 1.5 and f < 5.5",
        "i in (1, 2) and j > 3",
        "i in (4) and j > 3",
        "f in (1.5, 2.5) and j > 3",
        "f between 1 and 2 and i >= 7",  # int constants on a float attribute
        "f between 1.5 and 2 and i >= 7.5",  # a float constant on an int attribute
        "nope > 3",
        "nope > 3.5",
        "s > 3",
        "s > 3.5",
        "i > 3 and",
        "i >> 3",
        "i > 03",
        "i > 1.5.5",
        "i > 1.5e",
        "i > .5",
        "i > -.5",
        "i > 1_000",
        "i > 1x",
        "I > 3",
        "i BETWEEN 1 AND 9 And j<=4",
        "f BeTwEeN 1.5 aNd 9.25 AND j<=4",
        "i  between  1  and  9  and  j  =  4",
        "i between 1 and 9\tand j = 4",
        "i between 1 and 9 and\nj = 4",
        " i > 3",
        "i > 3 ",
        "i>3 and j<-3 and f>=-2.5",
        "i > - 3",
        "(i > 3) and j < 2",
        "i > 3 or j < 2",
        "not i > 3 and j < 2",
        "i not between 1 and 3",
        "i > 3 and true",
        "i > 3 and f is null",
        "i > 3 -- a comment",
        "i > 3 # a comment",
        "i = 'x'",
        "i = true",
        "",
    ]
    numbers = [*map(str, EDGES), *FLOATS]
    for _ in range(600):
        pieces = []
        for attr in rng.sample(["i", "j", "f"], rng.randint(1, 3)):
            a = rng.choice([*numbers, str(rng.randint(-50, 50)), str(rng.uniform(-50, 50))])
            b = rng.choice([*numbers, "3", "3.5", str(rng.uniform(-1e300, 1e300))])
            if rng.random() < 0.5:
                pieces.append(f"{attr} between {a} and {b}")
            else:
                pieces.append(f"{attr} {rng.choice(OPS)} {a}")
        texts.append(" and ".join(pieces))
    return texts


def _exact(c: object) -> tuple[str, object]:
    """A constant with its type and, for a float, its bits (``-0.0 == 0`` in Python)."""
    if type(c) is float:
        return "float", struct.pack("<d", c)
    return type(c).__name__, c


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
        answered = declined = false = floats = 0
        for n, text in enumerate(texts):
            triples = compiler.comparisons(n, text)
            if triples is None:
                declined += 1
                continue
            answered += 1
            want = _outcome(idx, n, text)
            assert isinstance(want, list), (text, want)
            got = [[(attr, op, _exact(c)) for attr, op, c in triples]] if triples else []
            assert got == [
                [(a.attr, a.entries[0][0], _exact(a.entries[0][1])) for a in c] for c in want
            ], text  # type: ignore[attr-defined]
            assert all(len(a.entries) == 1 for c in want for a in c)  # type: ignore[attr-defined]
            false += not triples
            floats += any(type(c) is float for _, _, c in triples)
            assert all(type(c) is float or -(2**63) <= c < 2**63 for _, _, c in triples)  # type: ignore[operator]
        assert answered > 200 and declined > 100 and false > 10 and floats > 100, (
            answered, declined, false, floats,
        )  # fmt: skip
        assert compiler.comparisons(1, "i between 5 and 5") == [("i", "=", 5)]
        assert compiler.comparisons(1, "f between -0.0 and 1.5") == [
            ("f", ">=", 0),
            ("f", "<=", 1.5),
        ]
        assert compiler.comparisons(1, f"i < {2**63}") is None  # outside int64: the error
        assert compiler.comparisons(1, "f < 1e309") is None  # an overflow: the error
        with pytest.raises(InvalidInput):
            compiler.comparisons(float("nan"), "i > 1")  # the id checked as compile does


def _outcome_reason(doc: dict[str, Any], ident: Any, text: str) -> str:
    """The reason the full compile gives for a bad text, as the rejects file words it."""
    from betree.compiler import Compiler

    try:
        Compiler.of(doc, None).compile(ident, text)
    except InvalidInput as exc:
        return exc.message.split(": ", 1)[-1]
    raise AssertionError(f"{text!r} compiles")


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


@pytest.mark.parametrize("domain", ["int", "float"])
def test_python_load_rejects_with_reasons(tmp_path: Path, domain: str) -> None:
    """Through ``bexdb load --engine python``'s code: good dense lines beside bad ones; the
    rejects name each line's reason (the full compile's: the fast path declines them), the
    store answers as brute force on the good ones."""
    _, doc, subs, events, _ = gen_dense.make_workload(
        200, 30, seed=9, attributes=5, preds=3, width=0.4, domain=domain, card=100, check=False
    )
    bad = [
        ("b1", "a0 between 1 and"),
        ("b2", "zz > 3"),
        ("b3", f"a1 > {2**64}"),
        ("b4", "a2 = 'x'"),
        ("b5", "a3 between 1.5 and 1e309"),
        ("b6", "a4 > 2.5.1"),
    ]
    want_reasons = {i: _outcome_reason(doc, i, e) for i, e in bad}
    lines = [json.dumps({"id": i, "expr": e}) for i, e in subs + bad]
    lines.append(json.dumps({"id": subs[0][0], "expr": "a0 > 1.5"}))  # a duplicate id
    path = tmp_path / "subs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rejects = tmp_path / "rejects.jsonl"
    with rejects.open("w") as out:
        summary = python_load.load(
            tmp_path / "store", read_jsonl(path), doc, rejects=out, memory_budget=1
        )
    # (both lines of a duplicated id are rejected)
    assert summary["loaded"] == len(subs) - 1 and summary["rejected"] == len(bad) + 2
    rows = [json.loads(line) for line in rejects.open()]
    reasons = {row["id"]: row["error"] for row in rows if row["id"] in want_reasons}
    assert reasons == want_reasons and all(reasons.values())
    assert "zz" in reasons["b2"] and "overflows" in reasons["b5"]
    assert sum(row["id"] == subs[0][0] for row in rows) == 2  # both lines of the duplicate
    with Index.open(tmp_path / "store") as idx:
        idx.check()
        assert _brute(idx, subs[1:], events)


@pytest.mark.parametrize("via", ["add", "add_text"])
def test_atom_ids_and_keys_are_one_by_one_interning(tmp_path: Path, via: str) -> None:
    """Float constants held as bits in the batch's columns (through ``add``'s atom objects
    or the triples) get the ids interning every atom by its store key one by one gives
    (order of first use) and that key, ``codec.encode_value(atom.as_tuple())``, in the
    ``aid`` records: floats beside ints, strings, lists and tests, edges included."""
    rng = random.Random(3)
    texts = _edge_texts(rng)[:200] + [expression(rng) for _ in range(300)]
    texts += [
        f"f between {rng.uniform(-9, 9)} and {rng.uniform(-9, 9)} and i > 2" for _ in range(100)
    ]
    want: dict[bytes, int] = {}
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        compiler, batch = idx.engine.compiler(), Batch(idx)
        for n, text in enumerate(texts):
            try:
                clauses = compiler.compile(n, text)
            except InvalidInput:
                continue
            for clause in clauses:
                for atom in clause:
                    want.setdefault(codec.encode_value(atom.as_tuple()), len(want) + 1)
            if via == "add":
                batch.add(n, text, clauses)
            else:
                batch.add_text(n, text)
        batch.build()
        idx.check()
        with idx.store.read() as txn:
            got = {value: codec.decode_u64(key) for key, value in txn.scan(catalog.AID)}
    assert got == want
    assert (
        sum(
            codec.decode_value(k)[0] == "order" and type(codec.decode_value(k)[2][0][1]) is float
            for k in want
        )
        > 100
    )
