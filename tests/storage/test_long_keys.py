"""Keys past LMDB's 511-byte limit (issue 13 item 3): ids, string constants, in-lists and
attribute names of 600 B, 10 KB and 1 MB, stored and found again everywhere.

The storage edge stores a record whose key is too long under its head and a digest
(:mod:`storage.store`); these tests drive it from the bottom (records mixed with short keys,
in key order, damage) up to every command that reads or writes a store.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from storage import StoreError, open_store
from storage.txn import MAX_KEY
from tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"600B": 600, "10KB": 10_000, "1MB": 1_000_000}
NS = b"demo"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    with open_store(tmp_path / "store") as opened:
        yield opened


def sample_keys(rng: random.Random) -> list[bytes]:
    """Short and long keys that share heads and prefixes: the cases order can get wrong."""
    head = bytes(rng.randrange(256) for _ in range(MAX_KEY - len(NS) - 1 - 32))
    limit = MAX_KEY - len(NS) - 1  # the longest key stored as it is
    keys = {b"", b"\x00", b"\x01", b"\xff" * 3, head, head + b"\x00", head[:-1]}
    keys.update(head + bytes([rng.randrange(256)]) * n for n in (1, 31, 32, 33, 40, 200))
    keys.update(bytes([rng.randrange(256)]) * n for n in (limit - 1, limit, limit + 1))
    for _ in range(60):
        n = rng.choice([3, limit - 2, limit, limit + 1, 600, 5000])
        base = rng.choice([b"", head, b"\x01" * 500])
        keys.add((base + bytes(rng.randrange(256) for _ in range(n)))[: max(n, len(base))])
    return list(keys)


def test_records_round_trip_with_long_and_short_keys_in_key_order(store: Any) -> None:
    rng = random.Random(13)
    keys = sample_keys(rng)
    assert any(len(k) > MAX_KEY for k in keys) and any(len(k) < 100 for k in keys)
    model = {k: rng.randbytes(rng.choice([0, 5, 3000])) for k in keys}
    with store.write() as txn:
        half = len(keys) // 2
        for k in keys[:half]:
            txn.put(NS, k, model[k])
        txn.put_many(NS, keys[half:], [model[k] for k in keys[half:]])
        txn.put(b"demn", b"x" * 2000, b"neighbour")  # namespaces around NS stay apart
        txn.put(b"demp", b"y" * 2000, b"neighbour")
        assert dict(txn.scan(NS)) == model  # a write transaction sees its own records
        probe = sorted(keys + [k + b"?" for k in keys])  # (found and absent, short and long)
        assert txn.get_many(NS, probe) == [model.get(k) for k in probe]
    with store.read() as txn:
        assert [k for k, _ in txn.scan(NS)] == sorted(model)
        assert txn.scan_all(NS) == (sorted(model), [model[k] for k in sorted(model)])
        assert txn.count(NS) == len(model)
        for k, v in model.items():
            assert txn.get(NS, k) == v
            assert txn.get(NS, k + b"?") is None or k + b"?" in model
        assert txn.get_many(NS, probe) == [model.get(k) for k in probe]
        assert txn.get_many(b"demn", [b"x" * 2000, b"x"]) == [b"neighbour", None]
        for start in [*rng.sample(keys, 15), b"\x00" * 600, b"\xff" * 600]:
            assert [k for k, _ in txn.scan(NS, start)] == sorted(k for k in model if k >= start)
        assert txn.check_records() == []
    gone = rng.sample(keys, len(keys) // 3)
    with store.write() as txn:
        for k in gone:
            txn.delete(NS, k)
            del model[k]
        txn.put_obj(NS, b"L" * 700, {"a": [1, 2]})
        model[b"L" * 700] = txn.get(NS, b"L" * 700)
    with store.read() as txn:
        assert txn.scan_all(NS) == (sorted(model), [model[k] for k in sorted(model)])
        assert txn.count(NS) == len(model)
        assert txn.get_obj(NS, b"L" * 700) == {"a": [1, 2]}
        assert [k for k, _ in txn.scan(b"demn")] == [b"x" * 2000]
        assert txn.count(b"demp") == 1


def test_scan_all_of_short_keys_is_the_scan(store: Any) -> None:
    """A namespace of short keys only is read by two cursor passes: the same records, in
    order, as :meth:`scan`, its neighbours (and a neighbour's long keys) left out, in a read
    and in a write transaction."""
    rng = random.Random(5)
    model = {
        rng.randbytes(rng.randrange(0, 40)): rng.randbytes(rng.choice([0, 8, 900]))
        for _ in range(300)
    }
    with store.write() as txn:
        txn.put_many(NS, list(model), list(model.values()))
        txn.put(b"demn", b"\xff" * 20, b"before")
        txn.put(b"demp", b"", b"after")
        txn.put(b"demp", b"z" * 2000, b"a long neighbour")
        assert txn.scan_all(NS) == (sorted(model), [model[k] for k in sorted(model)])
        assert txn.scan_all(b"empty") == ([], [])
    with store.read() as txn:
        want = list(txn.scan(NS))
        assert want == sorted(model.items())
        assert txn.scan_all(NS) == ([k for k, _ in want], [v for _, v in want])
        assert txn.scan_all(b"demp") == ([b"", b"z" * 2000], [b"after", b"a long neighbour"])
        assert txn.scan_all(b"zzz") == ([], [])


def test_records_against_a_dict_across_commits_reopens_and_map_growth(tmp_path: Path) -> None:
    """Seeded stress: puts, bulk puts and deletes of long and short keys in a map that must
    grow (each growth replays the transaction's writes), compared with a dict after every
    commit; the store is reopened now and then."""
    rng = random.Random(31)
    keys = sample_keys(rng)
    model: dict[bytes, bytes] = {}
    store = open_store(tmp_path / "s", map_size=64 * 1024)
    try:
        for step in range(40):
            with store.write() as txn:
                for _ in range(rng.randrange(1, 8)):
                    k = rng.choice(keys)
                    if rng.random() < 0.3:
                        txn.delete(NS, k)
                        model.pop(k, None)
                    else:
                        model[k] = rng.randbytes(rng.choice([1, 100, 4000]))
                        txn.put(NS, k, model[k])
                batch = rng.sample(keys, 5)
                values = [rng.randbytes(50) for _ in batch]
                txn.put_many(NS, batch, values)
                model.update(zip(batch, values, strict=True))
            with store.read() as txn:
                assert txn.scan_all(NS) == (sorted(model), [model[k] for k in sorted(model)])
                assert txn.count(NS) == len(model)
                k = rng.choice(keys)
                assert txn.get(NS, k) == model.get(k)
            if step % 10 == 9:
                store.close()
                store = open_store(tmp_path / "s")
        assert store.env.info()["map_size"] > 64 * 1024
    finally:
        store.close()


def test_short_keys_keep_their_layout(store: Any) -> None:
    """Stores written before long keys existed read unchanged: a key that fits is stored as
    ``ns + 0 + key``, one byte past the limit under the 511-byte digest key."""
    fits = b"k" * (MAX_KEY - len(NS) - 1)
    with store.write() as txn:
        txn.put(NS, fits, b"short")
        txn.put(NS, fits + b"k", b"long")
    with store.env.begin(db=store.env.open_db(b"records")) as raw:
        stored = [bytes(k) for k, _ in raw.cursor()]
    assert NS + b"\0" + fits in stored
    (long,) = (k for k in stored if k.startswith(NS + b"\1"))
    assert len(long) == MAX_KEY


def damage(path: Path, needle: bytes) -> None:
    """Flip one byte of ``needle`` where the data file holds it (a long record's value)."""
    data = (path / "data.mdb").read_bytes()
    at = data.index(needle) + len(needle) // 2
    with open(path / "data.mdb", "r+b") as f:
        f.seek(at)
        f.write(bytes([data[at] ^ 0x20]))


@pytest.mark.parametrize("where", ["value", "key"])
def test_damaged_long_key_record_is_refused_and_reported(tmp_path: Path, where: str) -> None:
    """A flipped byte in a long record's stored key (its value holds the whole key; its
    LMDB key only the head): reads refuse the record, ``check_records`` reports it."""
    key = b"\x02" + b"k" * 300 + b"m" * 400  # its head: 1 + 300 + 171 bytes
    with open_store(tmp_path / "s") as store, store.write() as txn:
        txn.put(NS, key, b"value")
        txn.put(NS, b"short", b"value")
    damage(tmp_path / "s", b"m" * 300 if where == "value" else b"k" * 300)
    with open_store(tmp_path / "s", readonly=True) as store, store.read() as txn:
        (found,) = txn.check_records()
        assert "damaged" in found and "does not lead back" in found
        with pytest.raises(StoreError, match="damaged"):
            list(txn.scan(NS))
        if where == "value":
            with pytest.raises(StoreError, match="damaged"):
                txn.get(NS, key)
        assert txn.get(NS, b"short") == b"value"


# -- the index: ids, string constants, in-lists and attribute names --------------------------


def workload(n: int) -> tuple[dict[str, Any], list[tuple[Any, str]], str, str]:
    """A schema with an attribute named by ``n`` bytes, and subscriptions whose ids, string
    constants and in-lists are about ``n`` bytes long (``"s"`` and ``9`` are short)."""
    attr = "a" + "_" * (n - 1)
    big = "g" * n
    schema = {"attributes": {"price": {"type": "int"}, "genre": {"type": "string"}, attr: {}}}
    schema["attributes"][attr] = {"type": "string"}
    # in-lists of n bytes: numbers (up to 100 KB: each is a PB+tree entry, 16K of them,
    # enough for the key sizes) and two strings
    in_list = ", ".join(map(str, range(0, 7 * (min(n, 100_000) // 6), 7)))
    strings = f'"{"e" * (n // 2)}", "{"f" * (n // 2)}"'
    not_in = ", ".join(map(str, range(0, 7 * 100, 7)))
    subs = [
        ("x" * n, f'genre = "{big}"'),
        ("y" * n + "1", f"price in ({in_list}) or genre in ({strings})"),
        ("y" * n + "2", f'{attr} >= "{big}" and not genre = "{big}z"'),
        ("s", f'genre > "{big}" or {attr} = "q"'),
        (9, f"price not in ({not_in}) and price > 0"),
    ]
    return schema, subs, attr, big


def expected(subs: list[tuple[Any, str]], hits: set[int]) -> list[str]:
    return sorted(json.dumps(subs[i][0]) for i in hits)


@pytest.mark.parametrize("size", list(SIZES))
def test_index_stores_and_matches_long_ids_constants_lists_and_names(
    tmp_path: Path, size: str
) -> None:
    schema, subs, attr, big = workload(SIZES[size])
    path = tmp_path / "s"
    events = [
        ({"genre": big, "price": 14}, {0, 1}),
        ({"genre": big + "z", attr: "q", "price": 8}, {3, 4}),
        ({attr: big + "0", "price": 7 * (SIZES[size] // 6) + 7}, {2, 4}),
        ({"genre": "a", "price": 0}, {1}),
    ]
    with Index.open(path, schema=schema) as idx:
        idx.subscribe(*subs[0])
        idx.subscribe_many(subs[1:])
        for event, hits in events:
            assert sorted(map(json.dumps, idx.match(event))) == expected(subs, hits), event
        why = idx.explain(subs[2][0], events[2][0])
        assert why["matches"] and why["expression"] == subs[2][1]
        idx.check()
    with Index.open(path) as idx:  # reopened: everything is read back from disk
        assert len(idx) == len(subs)
        for event, hits in events:
            assert sorted(map(json.dumps, idx.match(event))) == expected(subs, hits), event
        assert idx.unsubscribe(subs[0][0]) and idx.unsubscribe(subs[1][0])
        assert not idx.unsubscribe("x" * (SIZES[size] + 1))
        idx.subscribe(subs[2][0], "price = 14")  # replaced in place
        idx.check()
        assert sorted(map(json.dumps, idx.match(events[0][0]))) == expected(subs, {2})


@pytest.mark.parametrize(("op", "order"), [("!=", 1), (">", 1), ("<", -1), ("<=", -1)])
def test_list_predicates_inserted_in_order_beside_many_keys_walk_few_pages(
    store: Any, op: str, order: int
) -> None:
    """A long `not in` list (or ordered bounds) beside many other keys: each insert touches
    O(log n) pages, not every leaf item up to the end of the tree (was O(n) each)."""
    from pbtree import PBTree

    with store.write() as txn:
        tree = PBTree(txn, "price")
        for k in range(0, 30_000, 3):  # 10,000 keys: over 300 leaves
            tree.insert("=", k, 1)
        tree.pages_read = 0
        keys = list(range(0, 3_000, 3))[::order]
        for k in keys:
            tree.insert(op, k, 2)
        assert tree.pages_read < 40 * len(keys)  # a walk to the end: ~300 a key
        tree.check()
        holds = {"!=": lambda v, k: v != k, ">": lambda v, k: v > k}
        holds |= {"<": lambda v, k: v < k, "<=": lambda v, k: v <= k}
        for v in (-1, 0, 1500, 2997, 2998, 29_997, 40_000):
            want = {1} if v % 3 == 0 and 0 <= v < 30_000 else set()
            want |= {2} if any(holds[op](v, k) for k in keys) else set()
            assert set(tree.search(v)) == want, v


# -- the commands ------------------------------------------------------------------------------


def write_lines(path: Path, docs: list[Any]) -> str:
    path.write_text("".join((d if isinstance(d, str) else json.dumps(d)) + "\n" for d in docs))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def matches(capsys: pytest.CaptureFixture[str], store: str, events: list[Any]) -> list[Any]:
    """``bexdb match``'s answers, each a sorted list of JSON ids."""
    path = write_lines(Path(store).parent / "events.jsonl", events)
    code, out, err = run(capsys, "match", store, path)
    assert code == 0, err
    return [sorted(map(json.dumps, json.loads(line)["matches"])) for line in out.splitlines()]


LONG_SCHEMA, LONG_SUBS, LONG_ATTR, LONG_BIG = workload(10_000)
EVENTS = [
    {"genre": LONG_BIG, "price": 14},
    {"genre": LONG_BIG + "z", LONG_ATTR: "q", "price": 8},
    {LONG_ATTR: LONG_BIG + "0", "price": 7 * (10_000 // 6) + 7},
    {"genre": "a", "price": 0},
]
WANT = [expected(LONG_SUBS, hits) for hits in ({0, 1}, {3, 4}, {2, 4}, {1})]


def test_cli_subscribe_match_explain_unsubscribe_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(LONG_SCHEMA))
    subs = write_lines(tmp_path / "subs.jsonl", [{"id": i, "expr": e} for i, e in LONG_SUBS])
    argv = [sys.executable, "-m", "tools.cli", "subscribe", store, subs, "--schema", str(schema)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # was exit 1: MDB_BAD_VALSIZE
    assert "subscribed 5" in done.stdout
    assert matches(capsys, store, EVENTS) == WANT
    long_id = json.dumps(LONG_SUBS[2][0])
    code, out, err = run(capsys, "explain", store, long_id, json.dumps(EVENTS[2]), "--json")
    assert code == 0 and json.loads(out)["matches"] is True, err
    assert run(capsys, "verify", store)[0] == 0
    code, _, err = run(capsys, "unsubscribe", store, json.dumps(LONG_SUBS[0][0]), long_id)
    assert code == 0, err
    assert run(capsys, "unsubscribe", store, "z" * 5000)[0] == 3  # absent: exit 3
    assert run(capsys, "verify", store)[0] == 0
    assert matches(capsys, store, EVENTS[:1]) == [expected(LONG_SUBS, {1})]


HUGE = "c" * 1_000_000  # below every other genre constant
LOAD_EVENTS = [*EVENTS, {"genre": HUGE}]
LOAD_WANT = [*WANT, ['"' + "m" * 600 + '"']]


def load(tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str) -> str:
    """``bexdb load --engine ENGINE`` of 600 B ids, 10 KB and 1 MB constants and lists, and
    bad records (a type error, a duplicated long id): every good record is loaded, the bad
    ones are in the rejects, exit 3."""
    store, rejects = str(tmp_path / "s"), tmp_path / "rejects.jsonl"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(LONG_SCHEMA))
    docs: list[Any] = [{"id": i, "expr": e} for i, e in LONG_SUBS]
    docs += [
        {"id": "m" * 600, "expr": f'genre = "{HUGE}"'},
        {"id": "d" * 700, "expr": "price = 1"},
        {"id": "bad" * 300, "expr": f'price = "{LONG_BIG}"'},  # a string on an int
        {"id": "d" * 700, "expr": "price = 2"},
    ]
    subs = write_lines(tmp_path / "subs.jsonl", docs)
    code, out, err = run(
        capsys, "load", store, subs, "--engine", engine, "--schema", str(schema),
        "--rejects", str(rejects), "--max-rejects", "10",
    )  # fmt: skip
    assert code == 3, err  # was exit 1: the whole load aborted on MDB_BAD_VALSIZE
    assert json.loads(out.splitlines()[-1])["loaded"] == len(LONG_SUBS) + 1
    lines = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert sorted(r["line"] for r in lines) == [7, 8, 9]
    assert sorted(r["id"] for r in lines) == ["bad" * 300, "d" * 700, "d" * 700]
    assert run(capsys, "verify", store)[0] == 0
    assert matches(capsys, store, LOAD_EVENTS) == LOAD_WANT
    return store


@pytest.mark.spark
def test_cli_load_spark_keeps_long_records_and_rejects_only_bad_ones(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load(tmp_path, capsys, "spark")  # on the run's session (the process's active one)


def test_verify_reports_a_damaged_long_id_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One flipped byte in the id map's copy of a 10 KB id: ``bexdb verify`` exits 4 naming
    the damaged record, and ``bexdb unsubscribe`` of that id fails with the typed error."""
    store = tmp_path / "s"
    ident = "x" * 10_000
    with Index.open(store, schema=LONG_SCHEMA) as idx:
        idx.subscribe_many([(ident, "price = 1"), (2, "price = 2")])
    key = b"\x02" + ident.encode()
    damage(store, struct.pack(">I", len(key)) + key[:100])  # the ext record's value
    code, _, err = run(capsys, "verify", str(store))
    assert code == 4 and "ext record" in err and "does not lead back" in err, err
    code, _, err = run(capsys, "unsubscribe", str(store), ident)
    assert code == 1 and "damaged" in err and "Traceback" not in err, err


def test_cli_load_python_keeps_long_records_and_compact_preserves_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = load(tmp_path, capsys, "python")
    for extra in ([], ["--rebuild"]):  # compaction copies long-key records as they are
        code, _, err = run(capsys, "compact", store, *extra)
        assert code == 0, err
        assert run(capsys, "verify", store)[0] == 0
        assert matches(capsys, store, LOAD_EVENTS) == LOAD_WANT


def test_serve_put_get_delete_long_ids_and_constants(tmp_path: Path) -> None:
    from tests.support.http import call
    from tools.serve import spawn

    with Index.open(tmp_path / "s", schema=LONG_SCHEMA):
        pass
    proc, url = spawn(tmp_path / "s", "--workers", "1")
    try:
        ident = "p" * 600
        wide = "w" * 5000  # past gunicorn's own request line limit (4094 bytes): h11 takes it
        assert call(url, "PUT", f"/subscriptions/{wide}", {"expr": "price = 1"})[0] == 201
        assert call(url, "GET", f"/subscriptions/{wide}")[:2] == (
            200,
            {"id": wide, "expr": "price = 1"},
        )
        expr = f'genre = "{LONG_BIG}"'
        assert call(url, "PUT", f"/subscriptions/{ident}", {"expr": expr})[0] == 201  # was 500
        assert call(url, "GET", f"/subscriptions/{ident}")[:2] == (200, {"id": ident, "expr": expr})
        assert call(url, "POST", "/match", {"genre": LONG_BIG})[:2] == (200, {"matches": [ident]})
        assert call(url, "DELETE", f"/subscriptions/{ident}")[0] == 204
        assert call(url, "POST", "/match", {"genre": LONG_BIG})[1] == {"matches": []}
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.mark.parametrize("long", [False, True])
def test_prefixed_put_many_stores_what_put_many_stores(tmp_path: Path, long: bool) -> None:
    """``put_many(..., prefixed=True)`` (keys given with ``ns + b"\\0"`` before them, as the
    batch build makes them in numpy) stores the records ``put_many`` stores of the bare
    keys: byte for byte the same LMDB records, a key too long for LMDB included (then the
    long layout); and the records read back the same."""
    rng = random.Random(9)
    keys = sample_keys(rng) if long else [rng.randbytes(rng.randrange(0, 60)) for _ in range(300)]
    keys = sorted(set(keys))
    assert any(len(k) > MAX_KEY - len(NS) - 1 for k in keys) == long
    values = [rng.randbytes(rng.choice([0, 7, 300])) for _ in keys]
    raw: list[list[tuple[bytes, bytes]]] = []
    for prefixed in (False, True):
        with open_store(tmp_path / f"s{prefixed}") as opened:
            with opened.write() as txn:
                given = [NS + b"\0" + k for k in keys] if prefixed else keys
                txn.put_many(NS, given, values, prefixed=prefixed)
            with opened.read() as txn:
                assert txn.scan_all(NS) == (keys, values)
                assert txn.check_records() == []
            with opened.env.begin() as t:
                raw.append(list(t.cursor(db=opened.records_db)))
    assert raw[0] == raw[1] and len(raw[0]) == len(keys)
