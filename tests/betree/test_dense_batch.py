"""The batch build's atoms as columns (``betree.disk.bulk.Batch``, ``betree.disk.atomkeys``):
one-comparison int atoms held as columns and interned at the build by one sort must get the
ids one-by-one interning gives (order of first use) and the same store keys; the keys and
the atom records encoded in numpy must be ``codec.encode_value``'s bytes; the records read
back as columns must be what decoding gives.  Workloads: the mixed test workload (every
operator, strings, floats, lists), the dense one, and int64's edges; ``check()`` after
each build and brute-force answers."""

from __future__ import annotations

import platform
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.disk import atomkeys, bulkrecords, catalog
from betree.disk.bulk import Batch, release_freed_heap
from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from pbtree.operators import OPERATORS, SLOT
from storage import codec
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_dense

INTS = [
    0, 1, -1, 127, 128, -32, -33, 255, 256, -128, -129, 65535, 65536, -32768, -32769,
    2**32 - 1, 2**32, -(2**31), -(2**31) - 1, 2**63 - 1, -(2**63), 2**62, -(2**62),
]  # fmt: skip


def test_encoders_write_codecs_bytes() -> None:
    rng = random.Random(4)
    values = INTS + [rng.randint(-(2**63), 2**63 - 1) for _ in range(2000)]
    values += [rng.randint(-(10**6), 10**6) for _ in range(2000)]
    names = ["a0", "a13", "ü", "", "x" * 31, "日本", "y" * 32, "é" * 40]  # (32+ bytes: no fixstr)
    attr = np.array([rng.randrange(len(names)) for _ in values])
    code = np.array([rng.randrange(len(OPERATORS)) for _ in values])
    ints = np.array(values, dtype=np.int64)
    keys = atomkeys.encode_order(names, attr, code, ints)
    for a, c, v, key in zip(attr.tolist(), code.tolist(), values, keys, strict=True):
        assert key == codec.encode_value(("order", names[a], ((OPERATORS[c], v),)))
    # with a namespace's lead before each (the LMDB key): the same keys after it
    assert atomkeys.encode_order(names, attr, code, ints, b"atom\0") == [
        b"atom\0" + key for key in keys
    ]
    assert atomkeys.encode_order(names, attr[:0], code[:0], ints[:0], b"atom\0") == []
    other = np.array([rng.choice(values) for _ in values], dtype=np.int64)
    records = atomkeys.encode_int_pairs(ints, other)
    assert records == [
        codec.encode_value([a, b]) for a, b in zip(values, other.tolist(), strict=True)
    ]
    table, ok = atomkeys.parse_int_pairs(records)
    assert ok.all() and table[:, 0].tolist() == values and table[:, 1].tolist() == other.tolist()


def test_float_keys_are_codecs_bytes() -> None:
    """Float64 constants beside int ones (``encode_order``'s ``floats``): every key is
    ``codec.encode_value``'s, whatever the mix; the columns read back (``parse``) are the
    ones given; ``ColumnKeys`` of such columns makes the same keys."""
    rng = random.Random(5)
    reals = [0.5, -0.5, 1.8e308, -1.8e308, 5e-324, -5e-324, 2.0**63, -(2.0**64), 1e19, 1.5e-300]
    reals += [rng.uniform(-1e6, 1e6) for _ in range(1500)]
    reals += [rng.uniform(-1e300, 1e300) for _ in range(500)]
    values: list[Any] = INTS + reals + [rng.randint(-(10**6), 10**6) for _ in range(1500)]
    rng.shuffle(values)
    names = ["a0", "a13", "ü", "", "x" * 31, "y" * 32]
    attr = np.array([rng.randrange(len(names)) for _ in values])
    code = np.array([rng.randrange(len(OPERATORS)) for _ in values])
    is_float = np.array([type(v) is float for v in values])
    ints = np.array([0 if type(v) is float else v for v in values], dtype=np.int64)
    floats = np.array([v if type(v) is float else 0.0 for v in values])
    keys = atomkeys.encode_order(names, attr, code, ints, b"", (is_float, floats))
    for a, c, v, key in zip(attr.tolist(), code.tolist(), values, keys, strict=True):
        assert key == codec.encode_value(("order", names[a], ((OPERATORS[c], v),)))
    got = atomkeys.parse(keys)
    short = np.array([len(names[a].encode()) < 32 for a in attr.tolist()])
    assert got.ok[short].all()
    assert np.array_equal(got.is_float[short], is_float[short])
    assert np.array_equal(got.floats[short], floats[short])
    assert np.array_equal(got.ints[short], ints[short])
    cols = atomkeys.OrderKeys(
        ok=np.ones(len(values), dtype=bool), attr=attr, names=names, code=code.astype(np.int8),
        is_float=is_float, ints=ints, floats=floats,
    )  # fmt: skip
    rows = rng.sample(range(len(values)), 300)
    assert atomkeys.ColumnKeys(cols).take(rows, b"atom\0") == [b"atom\0" + keys[i] for i in rows]


def test_int_pairs_other_shapes_left_to_the_caller() -> None:
    good = codec.encode_value([3, 4])
    records = [
        good,
        codec.encode_value([2**63, 1]),  # past int64
        codec.encode_value([1, 2, 3]),
        codec.encode_value([1.5, 2]),
        codec.encode_value([1, "two"]),
        codec.encode_value([True, 1]),
        codec.encode_value("ab"),
        good[:-1] + bytes([good[-1] ^ 1]),  # failing its checksum
        good[:3],
        b"",
    ]
    table, ok = atomkeys.parse_int_pairs(records)
    assert ok.tolist() == [True] + [False] * (len(records) - 1)
    assert table[0].tolist() == [3, 4] and not table[1:].any()


def _reference_ids(compiled: list[tuple[Any, str, Any]]) -> dict[bytes, int]:
    """Atom keys -> ids as interning one by one gives them (order of first use)."""
    ids: dict[bytes, int] = {}
    for _, _, clauses in compiled:
        for clause in clauses:
            for atom in clause:
                ids.setdefault(codec.encode_value(atom.as_tuple()), len(ids) + 1)
    return ids


def _mixed(rng: random.Random) -> list[tuple[Any, str]]:
    subs: list[tuple[Any, str]] = [(i, expression(rng)) for i in range(300)]
    ops = ["<", "<=", "=", "!=", ">=", ">"]
    for k in range(200):  # int64's edges, shared and not, beside the rest
        c = rng.choice(INTS)
        subs.append((f"e{k}", f"i {rng.choice(ops)} {c} and j between {-c - 1} and 2"))
    subs += [("f", "i > 3 and s = 'x'"), ("g", "i > 3 or f < 1.5"), ("h", "i in (1, 2, 3)")]
    rng.shuffle(subs)
    return subs


@pytest.mark.parametrize("seed", [1, 2])
def test_batch_interns_as_one_by_one(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    subs = _mixed(rng)
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 4}) as idx:
        compiled = []
        for ident, expr in subs:
            try:
                compiled.append((ident, expr, idx.engine.compiler().compile(ident, expr)))
            except Exception:  # (an expression the schema refuses: not this test's)
                continue
        batch = Batch(idx)
        for ident, expr, clauses in compiled:
            batch.add(ident, expr, clauses)
        want = _reference_ids(compiled)
        assert batch.build()["atoms"] == len(want)
        idx.check()
        with idx.store.read() as txn:
            ids, keys = txn.scan_all(catalog.AID)
            stored = dict(zip(keys, codec.decode_u64s(ids).tolist(), strict=True))
            assert stored == want
            for n, (ident, _, clauses) in enumerate(compiled):
                raw = txn.get(catalog.SUB, codec.encode_u64(n))
                assert raw is not None
                record = codec.decode_value(raw)
                atoms = [
                    [want[codec.encode_value(a.as_tuple())] for a in c] or [0] for c in clauses
                ]
                assert record[0] == ident and record[2] == atoms
        for _ in range(80):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            expect = {i for i, e, _ in compiled if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == expect


@pytest.mark.parametrize(
    "exprs",
    [
        ["i >= 15", "b = false and b", "il none of (0) or f != 3.0"],  # 1 + 0 + 2 clauses
        ["b = false and b", "i < 3 or j > 4", 's = "x"'],  # 0 + 2 + 1
    ],
)
def test_batch_of_unsatisfiable_and_several_clause_subscriptions(
    tmp_path: Path, exprs: list[str]
) -> None:
    """As many clauses as subscriptions, but not one each: each record keeps its own (a
    shortcut once took equal totals for one clause each and shifted the clauses)."""
    rng = random.Random(5)
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        compiled = [
            (f"s{k}", e, idx.engine.compiler().compile(f"s{k}", e)) for k, e in enumerate(exprs)
        ]
        counts = [len(c) for _, _, c in compiled]
        assert sum(counts) == len(counts) and counts != [1] * len(counts)
        batch = Batch(idx)
        for ident, expr, clauses in compiled:
            batch.add(ident, expr, clauses)
        batch.build()
        idx.check()
        for _ in range(60):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e, _ in compiled if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want


def test_dense_batch_reopened_and_mutated(tmp_path: Path) -> None:
    _, doc, subs, events, _ = gen_dense.make_workload(
        300, 40, seed=3, attributes=5, preds=3, width=0.5, domain="int", card=300, check=False
    )
    with Index.open(tmp_path / "s", schema=doc, settings={"max_cap": 8}) as idx:
        batch = Batch(idx)
        compiled = [(i, e, idx.engine.compiler().compile(i, e)) for i, e in subs]
        for ident, expr, clauses in compiled:
            batch.add(ident, expr, clauses)
        assert batch.build()["atoms"] == len(_reference_ids(compiled))
        idx.check()
    with Index.open(tmp_path / "s") as idx:
        idx.unsubscribe_many([i for i, _ in subs[::3]])
        idx.subscribe("new", "a0 between 10 and 200 and a1 >= 5")
        idx.check()
        left = [(i, e) for i, e in subs[1::3] + subs[2::3]] + [
            ("new", "a0 between 10 and 200 and a1 >= 5")
        ]
        hits = 0
        for ev in events:
            values = idx.schema.validate_event(ev)
            want = {i for i, e in left if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want
            hits += len(want)
        assert hits


def _anon_mb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no RssAnon")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_release_freed_heap_gives_memory_back() -> None:
    """What a batch build leaves freed in the C heap (blocks between live ones, which glibc
    keeps) goes back to the kernel: the mechanism the loaders use between a build and its
    check, measured as resident memory, not time."""
    big, pins = [], []
    for i in range(6000):  # ~96 MB of 16 KB blocks, each followed by a live 600-byte one
        big.append(bytes(16384) + i.to_bytes(4, "little"))
        pins.append(bytes(600) + i.to_bytes(4, "little"))
    held = _anon_mb()
    del big
    kept = _anon_mb()
    assert release_freed_heap()
    after = _anon_mb()
    assert kept - after >= 40, (held, kept, after)
    assert len(pins) == 6000


def test_column_keys_read_as_parse_reads() -> None:
    """The columns a batch hands its build (:func:`atomkeys.column_keys`) are what parsing
    the keys gives: the held atoms' rows from the columns, the others' parsed and their
    attributes numbered after the held ones (names shared or new, long names included)."""
    rng = random.Random(7)
    long = "x" * 40  # (parse leaves names of 32 bytes or more to be decoded)
    held_names = ["a", "b", long]
    keys: list[bytes] = []
    rest, at, attr, code, ints, reals, flags = [], [], [], [], [], [], []
    for k in range(600):
        if rng.random() < 0.6:
            a, c = rng.randrange(3), rng.choice([*INTS, 0.5, -1.8e308, rng.uniform(-9, 9)])
            op = rng.choice(["<", "<=", "=", ">=", ">"])
            real = type(c) is float
            one = (np.array([a]), np.array([SLOT[op]]), np.array([0 if real else c]))
            flag = (np.array([real]), np.array([c if real else 0.0]))
            keys.append(atomkeys.encode_order(held_names, *one, b"", flag)[0])
            at.append(k)
            attr.append(a)
            code.append(SLOT[op])
            ints.append(0 if real else c)
            reals.append(c if real else 0.0)
            flags.append(real)
        else:
            name = rng.choice(["a", "c", "d", long])
            shape = rng.randrange(3)
            if shape == 0:
                t: Any = ("order", name, ((rng.choice([">", "<="]), rng.uniform(-1e308, 1e308)),))
            elif shape == 1:
                t = ("order", name, ((">=", rng.randrange(-50, 50)),))
            else:
                t = ("eq", name, rng.randrange(5))
            keys.append(codec.encode_value(t))
            rest.append(k)
    got = atomkeys.column_keys(
        held_names,
        keys,
        np.array(rest, dtype=np.int64),
        np.array(at, dtype=np.int64),
        np.array(attr, dtype=np.int64),
        np.array(code, dtype=np.int64),
        np.array(ints, dtype=np.int64),
        (np.array(flags, dtype=bool), np.array(reals)),
    )
    assert got.names[:3] == held_names
    want = atomkeys.parse(keys)
    for k in range(len(keys)):
        if k in set(at):
            t = codec.decode_value(keys[k])
            real = type(t[2][0][1]) is float
            assert got.ok[k] and got.is_float[k] == real
            assert (got.names[got.attr[k]], got.code[k]) == (t[1], SLOT[t[2][0][0]])
            assert (got.floats[k] if real else got.ints[k]) == t[2][0][1]
        else:
            assert bool(got.ok[k]) == bool(want.ok[k])
            if want.ok[k]:
                assert got.names[got.attr[k]] == want.names[want.attr[k]]
                assert got.code[k] == want.code[k] and got.is_float[k] == want.is_float[k]
                assert got.ints[k] == want.ints[k]
                assert got.floats[k] == want.floats[k] or np.isnan(want.floats[k])
            else:
                assert got.attr[k] == -1


def _leaf_pages(path: Path) -> int:
    import lmdb  # (the store's own table statistics)

    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=8)
    try:
        with env.begin() as txn:
            return int(txn.stat(env.open_db(b"records", txn=txn, create=False))["leaf_pages"])
    finally:
        env.close()


@pytest.mark.parametrize("limit", [None, 1 << 16])
def test_batch_writes_records_full_and_matches(tmp_path: Path, limit: int | None) -> None:
    """A batch build writes its records namespace by namespace in key order, so LMDB's
    pages come out about as full as a compacted copy's (in another order they are half
    full); in one commit or many, with the index's own records written back last and the
    answers those of brute force, before and after a reopen with writes."""
    _, doc, subs, events, _ = gen_dense.make_workload(
        1500, 60, seed=4, attributes=6, preds=3, width=0.5, domain="int", check=False
    )
    doc = {"attributes": {**doc["attributes"], "x" * 40: {"type": "int"}}}
    subs = [(i, f"{e} and {'x' * 40} >= {i % 7}" if i % 3 else e) for i, e in subs]
    with Index.open(tmp_path / "raw", schema=doc, settings={"max_cap": 8}, sync=False) as idx:
        batch = Batch(idx)
        for ident, expr in subs:
            batch.add_text(ident, expr)
        counts = batch.build(limit)
        assert (counts["commits"] > 3) == (limit is not None)
        idx.check()
        idx.store.copy_compact(tmp_path / "compact")
    raw, compact = _leaf_pages(tmp_path / "raw"), _leaf_pages(tmp_path / "compact")
    assert compact > 100 and raw <= 1.1 * compact, (raw, compact)
    with Index.open(tmp_path / "raw") as idx:
        assert idx.schema.attributes.keys() == doc["attributes"].keys()
        live: dict[Any, str] = dict(subs)
        for ev in events[:30]:
            assert set(idx.match(ev)) == brute(live, idx.schema, ev)
        idx.unsubscribe_many([i for i, _ in subs[::4]])
        idx.subscribe("new", "a0 between 10 and 200000 and a1 >= 5")
        idx.check()
        live = {i: e for i, e in subs if i % 4} | {"new": "a0 between 10 and 200000 and a1 >= 5"}
        for ev in events[30:]:
            assert set(idx.match(ev)) == brute(live, idx.schema, ev)


def test_aid_record_keys_are_the_stored_keys() -> None:
    """``bulkrecords.aid_keys``: the LMDB keys of ``aid`` records (namespace, then the id's
    u64), cut from one buffer, for ids of every width."""
    ids = np.array([1, 2, 255, 256, 2**32, 2**63 - 1], dtype=np.int64)
    assert bulkrecords.aid_keys(ids) == [
        catalog.AID + b"\0" + codec.encode_u64(i) for i in ids.tolist()
    ]
    assert bulkrecords.aid_keys(ids[:0]) == []
