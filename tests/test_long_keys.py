"""Keys past LMDB's 511-byte limit (issue 13 item 3): ids, string constants, in-lists and
attribute names of 600 B, 10 KB and 1 MB, stored and found again everywhere.

The storage edge stores a record whose key is too long under its head and a digest
(:mod:`storage.store`); these tests drive it from the bottom (records mixed with short keys,
in key order, damage) up to every command that reads or writes a store.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from storage import StoreError, open_store
from storage.store import MAX_KEY
from tools.cli import main

ROOT = Path(__file__).resolve().parent.parent
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
    with store.read() as txn:
        assert [k for k, _ in txn.scan(NS)] == sorted(model)
        assert txn.scan_all(NS) == (sorted(model), [model[k] for k in sorted(model)])
        assert txn.count(NS) == len(model)
        for k, v in model.items():
            assert txn.get(NS, k) == v
            assert txn.get(NS, k + b"?") is None or k + b"?" in model
        for start in rng.sample(keys, 15) + [b"\x00" * 600, b"\xff" * 600]:
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
