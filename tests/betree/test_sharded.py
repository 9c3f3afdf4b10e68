"""One open for plain and sharded stores (betree.stores.sharded.open_index), the shard routing of
the Spark load, and the event stream both ``bexdb match`` and ``bexdb serve`` use."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from betree.formats.jsonl import input_lines
from betree.index import Index
from betree.stores.sharded import (
    HASH,
    ShardedIndex,
    open_index,
    shard_for,
    shard_name,
    shard_of,
    write_manifest,
)
from betree.streams.stream import BATCH, match_lines
from storage.codec import encode_id
from storage.errors import InvalidInput, ShardedStore
from tests.support.workload import SCHEMA, event, expression

SHARDS = 3


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[object, str]]:
    """The same subscriptions in a plain store and in a store sharded as the load shards."""
    rng = random.Random(16)
    subs: dict[object, str] = {(i if i % 3 else f"s{i}"): expression(rng) for i in range(150)}
    root = tmp_path_factory.mktemp("stores")
    with Index.open(root / "plain", schema=SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
    parts: list[list[tuple[object, str]]] = [[] for _ in range(SHARDS)]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), SHARDS)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(root / "sharded" / shard_name(k), schema=SCHEMA) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(root / "sharded", entries, {"by": "id", "hash": HASH, "shards": SHARDS})
    return root / "plain", root / "sharded", subs


def test_one_interface_for_both_kinds(stores: tuple[Path, Path, dict[object, str]]) -> None:
    import betree

    assert betree.open_index is open_index  # the package's own name for it
    plain_path, sharded_path, subs = stores
    rng = random.Random(7)
    events = [event(rng) for _ in range(40)]
    with open_index(plain_path) as plain, open_index(sharded_path) as sharded:
        assert isinstance(plain, Index) and isinstance(sharded, ShardedIndex)
        assert len(plain) == len(sharded) == len(subs)
        assert dict(sharded.subscriptions()) == dict(plain.subscriptions()) == subs
        for ev in events:
            assert sorted(map(str, sharded.match(ev))) == sorted(map(str, plain.match(ev)))
        assert [shard for shard, _ in sharded.stats()] == [shard_name(k) for k in range(SHARDS)]
        assert sum(s["subscriptions"] for _, s in sharded.stats()) == len(subs)
        assert plain.stats()[0][0] is None
        assert sharded.size_on_disk() > 0 and plain.size_on_disk() > 0
        for ident in list(subs)[:20]:
            assert sharded.expression(ident) == plain.expression(ident) == subs[ident]
            why = sharded.explain(ident, events[0])
            assert why.pop("shard") == shard_name(shard_of(encode_id(ident), SHARDS))
            alone = plain.explain(ident, events[0])  # the tree paths differ: other trees
            assert (why["matches"], why["expression"]) == (alone["matches"], alone["expression"])
        assert sharded.expression("absent") is None
        with pytest.raises(InvalidInput, match=f"in any of {SHARDS} shards"):
            sharded.explain("absent", events[0])
        assert not plain.writable and not sharded.writable  # both opened read-only
        with pytest.raises(ShardedStore):
            sharded.index  # noqa: B018  # the writable Index a sharded store has not


def test_shard_routing_is_the_loads(stores: tuple[Path, Path, dict[object, str]]) -> None:
    """Each id sits in the shard ``shard_for`` names (what writes will route by)."""
    _, sharded_path, subs = stores
    with open_index(sharded_path) as sharded:
        assert isinstance(sharded, ShardedIndex)
        for ident in subs:
            shard = shard_for(sharded, ident)
            assert shard is not None and sharded.indexes[shard].expression(ident) == subs[ident]


def test_match_lines_judges_each_line(stores: tuple[Path, Path, dict[object, str]]) -> None:
    """Bad lines answered in place with their reason, blank lines skipped, batches of
    BATCH in order; plain and sharded stores alike."""
    plain_path, sharded_path, _ = stores
    rng = random.Random(3)
    good = [json.dumps(event(rng)).encode() + b"\n" for _ in range(BATCH + 5)]
    bad = [b"\xff\n", b"[1]\n", b'{"i": "x"}\n', b"{\n"]
    lines = [b"\xef\xbb\xbf" + good[0], b"  \n", *bad, *good[1:]]
    answers = []
    for path in (plain_path, sharded_path):
        with open_index(path) as store:
            batches = list(match_lines(store, input_lines(iter(lines))))
        assert [len(b) for b in batches] == [BATCH, len(good) + len(bad) - BATCH]
        results = [r for b in batches for r in b]
        answers.append([sorted(map(str, r["matches"])) if "matches" in r else r for r in results])
    assert answers[0] == answers[1]
    errors = [r["error"] for r in answers[0][1:5]]
    assert errors[0].startswith("not UTF-8")
    assert errors[1] == "an event must be a JSON object"
    assert "i" in errors[2]
    assert errors[3].startswith("malformed JSON")


def test_the_cache_budget_is_the_whole_stores(
    stores: tuple[Path, Path, dict[object, str]],
) -> None:
    """``cache_bytes`` bounds a sharded store as a whole: each shard gets its share."""
    plain, sharded, _ = stores
    with open_index(sharded, cache_bytes=30 << 20) as store:
        assert isinstance(store, ShardedIndex)
        assert [i.store.cache.max_bytes for i in store.indexes] == [10 << 20] * SHARDS
    with open_index(plain, cache_bytes=30 << 20) as one:
        assert isinstance(one, Index) and one.index.store.cache.max_bytes == 30 << 20
    with open_index(sharded) as store:  # the default budget, divided too
        assert isinstance(store, ShardedIndex)
        assert sum(i.store.cache.max_bytes for i in store.indexes) <= 256 << 20
