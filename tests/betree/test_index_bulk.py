"""A batch-built index answers exactly like the brute-force evaluator and passes check()."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from betree.compiler import Compiler
from betree.disk.atomkeys import attr_of_test_key
from betree.disk.bulk import Batch, build_index
from betree.disk.bulkrecords import string_columns
from betree.index import Index
from betree.lang.atoms import OrderAtom, TestAtom, atom_from_tuple
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from pbtree.bulk import build, build_columns
from pbtree.operators import SLOT
from storage import codec, open_store
from storage.errors import InvalidInput, StoreDamaged
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_rich


@pytest.mark.parametrize("settings", [{"max_cap": 3, "min_size": 2}, {}])
def test_batch_build_is_exact(tmp_path: Path, settings: dict[str, int]) -> None:
    rng = random.Random(5)
    subs = {rng.choice([i, f"s{i}"]): expression(rng) for i in range(400)}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings=settings) as idx:
        compiled = [
            (ident, expr, idx.engine.compiler().compile(ident, expr))
            for ident, expr in subs.items()
        ]
        summary = build_index(idx, compiled)
        assert summary["subscriptions"] == len(subs)
        idx.check()
        for _ in range(60):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e in subs.items() if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want
        # the built index keeps working online
        victims = rng.sample(sorted(subs, key=str), 100)
        idx.unsubscribe_many(victims)
        for ident in victims:
            del subs[ident]
        idx.subscribe_many([("new", "i > 3"), (victims[0], "j < 5")])
        subs.update({"new": "i > 3", victims[0]: "j < 5"})
        idx.check()
        for _ in range(30):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e in subs.items() if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want
        with pytest.raises(InvalidInput, match="empty index"):
            build_index(idx, compiled[:1])


def test_batch_interns_equal_atoms_once(tmp_path: Path) -> None:
    """An atom reached through the conjunct memo, the parser (under ``or``/``not``) and after
    the compile caches were dropped (a new object) is one atom of the catalog; floats,
    strings and lists beside them; the build checks and matches like the evaluator."""
    subs = {
        1: "i between 3 and 9",
        2: "i >= 3 and j = 4",
        3: "(i >= 3 and i <= 9) or s = 'x'",
        4: "not (i < 3) and s = 'x'",
        5: "f >= 1.5 and f >= 1.5 and s >= 'x'",
        6: "j in (1, 2) and s = 'x'",
        7: "i >= 3",
    }
    rng = random.Random(3)
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        batch = Batch(idx)
        for n, (ident, expr) in enumerate(subs.items()):
            if n % 3 == 2:
                idx.engine.drop_compile_caches()
            batch.add(ident, expr, idx.engine.compiler().compile(ident, expr))
        # i >= 3, i <= 9, j = 4, s = 'x', i undefined, f >= 1.5, s >= 'x', j in (1, 2)
        assert batch.build()["atoms"] == 8
        idx.check()
        for _ in range(200):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e in subs.items() if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want


def test_direct_parts_from_keys_as_decoding_gives_them() -> None:
    """A test atom's part of its direct record, made from its key's bytes
    (:func:`storage.codec.pack_pair`, the attribute read by ``attr_of_test_key``), is the part
    decoding the key and packing ``[aid, tuple]`` gave: rich rules' atoms, and attribute
    names of every msgpack string header (fixstr, str8, str16, not ASCII); order atoms'
    keys are left to the decoder; a damaged key is refused."""

    compiler = Compiler.of(gen_rich.SCHEMA, None)
    p = gen_rich.params(seed=41)
    atoms = {
        a
        for i in range(300)
        for c in compiler.compile(i, gen_rich.subscription(p, i, 9))
        for a in c
    }
    atoms |= {TestAtom(name, "has", "x") for name in ("a" * 31, "b" * 32, "é" * 200, "c" * 70000)}
    tests = 0
    for aid, atom in enumerate(sorted(atoms), 1):
        key = codec.encode_value(atom.as_tuple())
        t = codec.decode_value(key)
        attr = attr_of_test_key(key)
        assert attr == (t[1] if t[0] == "test" and len(t[1].encode()) < 1 << 16 else None)
        assert codec.pack_pair(aid, key) == codec.pack_part([aid, t])
        tests += attr is not None
    assert tests > 100
    with pytest.raises(StoreDamaged):
        codec.pack_pair(1, key[:-1] + bytes([key[-1] ^ 1]))


def test_batch_refs_of_shared_objects_as_of_copies(tmp_path: Path) -> None:
    """Rich rules whose clauses share atom objects (a product repeats its one-clause
    parts' atoms in each clause, keyed once by :meth:`Batch.add`) give the atom ids that
    the same clauses of copies (every atom another object) give, and every atom not held
    as a column is keyed by its own store key, ids in order of first use."""
    p = gen_rich.params(seed=29)
    with Index.open(tmp_path / "s", schema=gen_rich.SCHEMA) as idx:
        compiler = idx.engine.compiler()
        shared, copied = Batch(idx), Batch(idx)
        want: dict[bytes, int] = {}
        repeated = 0  # atom objects in more than one clause of their subscription
        for i in range(300):
            expr = gen_rich.subscription(p, i, 20)
            clauses = compiler.compile(i, expr)
            repeated += sum(map(len, clauses)) - len({id(a) for c in clauses for a in c})
            shared.add(i, expr, clauses)
            copies = [tuple(atom_from_tuple(a.as_tuple()) for a in c) for c in clauses]
            copied.add(i, expr, copies)
            for a in (a for c in clauses for a in c):
                if not (isinstance(a, OrderAtom) and len(a.entries) == 1) or (
                    type(a.entries[0][1]) not in (int, float)  # (columns: ints and floats)
                ):
                    want.setdefault(codec.encode_value(a.as_tuple()), len(want) + 1)
        assert repeated > 100
        assert shared.atoms == want and copied.atoms == want
        assert shared.refs == copied.refs and shared.lens == copied.lens


def test_string_trees_from_numbered_columns(tmp_path: Path) -> None:
    """A PB+tree of strings built from the batch build's numbered columns
    (:func:`string_columns`) is the one its sorted ``(constant, operator, id)`` triples
    build: the same store, byte for byte.  Constants of mixed types are not taken so; a
    string UTF-8 cannot encode is refused, as the triples' build refuses it."""
    rng = random.Random(7)
    words = ["", "a", "A", "b", "é", "Ünï", "z" * 40, "topic-1", "Topic-1", "中"]
    consts = [rng.choice(words) for _ in range(3000)]
    ops = [SLOT[rng.choice(["=", "!=", "<", "<=", ">", ">="])] for _ in consts]
    ids = [rng.randint(1, 400) for _ in consts]
    names = {v: k for k, v in SLOT.items()}
    triples = sorted(zip(consts, map(names.__getitem__, ops), ids, strict=True), key=lambda t: t[0])
    packed = string_columns(consts, ops, ids)
    assert packed is not None and packed[0] == sorted(set(words) & set(consts))
    for name, make in (
        ("triples", lambda txn: build(txn, "t", triples)),
        ("columns", lambda txn: build_columns(txn, "t", *packed)),
    ):
        with open_store(tmp_path / name) as store, store.write() as txn:
            make(txn)
    assert (tmp_path / "triples" / "data.mdb").read_bytes() == (
        tmp_path / "columns" / "data.mdb"
    ).read_bytes()
    assert string_columns(["a", 1], [0, 0], [1, 2]) is None
    with pytest.raises(InvalidInput):
        string_columns(["a", "\ud800"], [0, 0], [1, 2])
