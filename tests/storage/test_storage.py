"""The page store: codec round trips, meta checks, map growth, cache across commits."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pbtree import PBTree
from pbtree.nodes import LeafNode
from storage import InvalidInput, StoreDamaged, StoreError, VersionMismatch, codec, open_store
from storage.errors import StoreFull
from storage.store import Store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def path() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield os.path.join(tmp, "store")


ids = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.text())


@given(ids, ids)
def test_id_keys_round_trip_and_preserve_order(a: int | str, b: int | str) -> None:
    ka, kb = codec.encode_id(a), codec.encode_id(b)
    assert codec.decode_id(ka) == a and type(codec.decode_id(ka)) is type(a)
    if type(a) is type(b):
        assert (ka < kb) == (a < b)  # type: ignore[operator]
    else:  # all ints sort before all strings, and 5 never equals "5"
        assert (ka < kb) == isinstance(a, int)


def test_id_keys_refuse_bad_ids() -> None:
    for bad in (True, 1.5, None, 1 << 63, -(1 << 63) - 1):
        with pytest.raises(InvalidInput):
            codec.encode_id(bad)  # type: ignore[arg-type]
    assert codec.encode_id(5) != codec.encode_id("5")


@given(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 64) - 1))
def test_u64_keys_preserve_order(a: int, b: int) -> None:
    assert (codec.encode_u64(a) < codec.encode_u64(b)) == (a < b)
    assert codec.decode_u64(codec.encode_u64(a)) == a


_ELEMENT = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=8,
)


@given(st.lists(_ELEMENT, max_size=20))
def test_a_list_record_from_its_packed_elements(values: list[object]) -> None:
    """encode_parts of the elements packed alone is encode_value of the list (what a
    writer's direct-atom lists rely on), and decodes back."""
    parts = [codec.pack_part(v) for v in values]
    assert codec.encode_parts(parts) == codec.encode_value(values)


@pytest.mark.parametrize("n", [0, 15, 16, 65535, 65536])
def test_a_list_record_from_parts_at_the_header_sizes(n: int) -> None:
    values = [[k, ["test", "tags", "has", "é" * (k % 3)]] for k in range(n)]
    joined = codec.encode_parts([codec.pack_part(v) for v in values])
    assert joined == codec.encode_value(values) and codec.decode_value(joined) == values


def test_page_envelope_round_trip() -> None:
    node = LeafNode(
        9, 1, 2, [1, 2.5, 3], [[1], [], [7, 8]], [[], [4], []], [1, 2, 3], [4, 5, 6], [7, 8, 9]
    )
    raw = codec.encode_page(42, LeafNode.KIND, node.to_fields())
    assert codec.page_gen(raw) == 42
    back = LeafNode.from_fields(9, codec.decode_page(9, raw, LeafNode.KIND))
    assert back.to_fields() == node.to_fields()
    assert back.keys == [1, 2.5, 3] and isinstance(back.keys[0], int)


def test_meta_records_settings_and_refuses_other_formats(path: str) -> None:
    with open_store(path, settings={"pbtree": {"leaf_cap": 5}}) as store:
        assert store.settings == {"pbtree": {"leaf_cap": 5}}
    with open_store(path, settings={"ignored": True}) as store:
        assert store.settings == {"pbtree": {"leaf_cap": 5}}
        with store.env.begin(write=True, db=store.meta_db) as txn:
            txn.put(b"format", codec.encode_format({"format": 99, "settings": {}}))
    with pytest.raises(VersionMismatch, match="format version 99; this bexdb reads version 2"):
        open_store(path)


def test_missing_store_and_readonly_writes(path: str) -> None:
    with pytest.raises(StoreError, match="no store at"):
        open_store(path, readonly=True)
    open_store(path).close()
    with (
        open_store(path, readonly=True) as store,
        pytest.raises(StoreError, match="read-only"),
        store.write(),
    ):
        pass


def test_the_map_grows_when_full(path: str) -> None:
    with open_store(path, map_size=64 * 1024) as store:
        with store.write() as txn:
            for i in range(3000):
                txn.put(b"r", codec.encode_u64(i), b"x" * 200)
            tree = PBTree(txn, "a")
            for i in range(3000):
                tree.insert("<", i, i)
        assert store.env.info()["map_size"] > 64 * 1024
        with store.read() as txn:
            assert txn.count(b"r") == 3000
            assert len(PBTree(txn, "a").search(-1)) == 3000
            PBTree(txn, "a").check()


def test_a_write_without_replay_log_refuses_a_full_map(path: str) -> None:
    """``write(replay=False)`` keeps no copy of its record writes: a map too small is a
    StoreFull error, nothing written; the same writes with the log grow the map."""
    with open_store(path, map_size=64 * 1024) as store:
        keys = [b"%06d" % i for i in range(200)]
        with pytest.raises(StoreFull, match="no replay log"), store.write(replay=False) as txn:
            txn.put_many(b"r", keys, [b"x" * 1000] * len(keys))
        with store.read() as txn:
            assert txn.count(b"r") == 0
        with store.write() as txn:
            txn.put_many(b"r", keys, [b"x" * 1000] * len(keys))
        with store.read() as txn:
            assert txn.count(b"r") == len(keys)


def test_failed_write_leaves_last_commit(path: str) -> None:
    with open_store(path) as store:
        with store.write() as txn:
            txn.put(b"r", b"k", b"1")
        with pytest.raises(ZeroDivisionError), store.write() as txn:
            txn.put(b"r", b"k", b"2")
            txn.put(b"r", b"j", b"3")
            1 / 0  # noqa: B018
        with store.read() as txn:
            assert list(txn.scan(b"r")) == [(b"k", b"1")]


def test_a_page_put_packed_reads_back_in_and_after_its_transaction(path: str) -> None:
    """``put_packed`` (bulk builds): the page is readable and mutable in its transaction,
    written at commit, and read from the store afterwards (never published as an object)."""
    fields = LeafNode(0, 0, 0, [1, 2], [[5], []], [[], [6, 7]], [1, 1], [2, 2], [3, 3])
    with open_store(path) as store:
        with store.write() as txn:
            space, a, b = txn.new_space(), txn.alloc(), txn.alloc()
            txn.put_packed(space, a, LeafNode.KIND, fields.to_fields())
            txn.put_packed(space, b, LeafNode.KIND, fields.to_fields())
            assert txn.load(space, a, LeafNode).bound == [[], [6, 7]]
            txn.load_mut(space, b, LeafNode).keys[1] = 9  # decoded, then kept as the node
            c = txn.alloc()
            txn.put_new(space, c, LeafNode(c))
            assert list(txn.space_pages(space)) == [a, b, c]
        with store.read() as txn:
            leaf = txn.load(space, a, LeafNode)
            assert (leaf.keys, leaf.eq, leaf.bound, leaf.nep) == (
                [1, 2],
                [[5], []],
                [[], [6, 7]],
                [3, 3],
            )
            assert txn.load_uncached(space, b, LeafNode).keys == [1, 9]
            assert txn.page_gen(space, a) == txn.page_gen(space, c) == txn.gen


def writer(path: str, body: str) -> None:
    """Run ``body`` in a separate process with ``store`` open on ``path``."""
    code = "from storage import open_store\nfrom pbtree import PBTree\n"
    code += f"with open_store({path!r}) as store:\n" + textwrap.indent(
        textwrap.dedent(body), "    "
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_cache_stays_correct_across_commits_of_other_processes(path: str) -> None:
    writer(
        path,
        """
        with store.write() as txn:
            tree = PBTree(txn, "a", leaf_cap=4, internal_cap=4, list_cap=4)
            for i in range(50):
                tree.insert(">", i, i)
    """,
    )
    with open_store(path, readonly=True) as store:
        with store.read() as txn:
            assert set(PBTree(txn, "a").search(10)) == set(range(10))
        assert len(store.cache) > 0
        writer(
            path,
            """
            with store.write() as txn:
                tree = PBTree(txn, "a")
                for i in range(5):
                    tree.delete(">", i, i)
                tree.insert(">", 3, 1000)
        """,
        )
        hits = store.cache.hits
        with store.read() as txn:
            tree = PBTree(txn, "a")
            assert set(tree.search(10)) == set(range(5, 10)) | {1000}
            tree.check()
        assert store.cache.hits > hits  # unchanged pages were reused, changed ones re-read


def test_old_snapshot_keeps_its_view(path: str) -> None:
    with open_store(path) as store:
        with store.write() as txn:
            PBTree(txn, "a").insert("=", 1, 1)
        with store.read() as old:
            with store.write() as txn:
                PBTree(txn, "a").insert("=", 1, 2)
            assert list(PBTree(old, "a").search(1)) == [1]
            with store.read() as new:
                assert list(PBTree(new, "a").search(1)) == [1, 2]
            assert list(PBTree(old, "a").search(1)) == [1]


def test_tree_written_by_one_process_is_read_by_another(path: str) -> None:
    writer(
        path,
        """
        import random
        rng = random.Random(7)
        with store.write() as txn:
            tree = PBTree(txn, "s", leaf_cap=3, internal_cap=3, list_cap=3)
            for i in range(300):
                tree.insert(rng.choice(["<", "<=", "=", "!=", ">=", ">"]), rng.choice("abcdefg"), i)
    """,
    )
    import random

    from tests.support.pbtree_model import brute_search

    rng = random.Random(7)
    model = {
        (rng.choice(["<", "<=", "=", "!=", ">=", ">"]), rng.choice("abcdefg"), i)
        for i in range(300)
    }
    with open_store(path, readonly=True) as store, store.read() as txn:
        tree = PBTree(txn, "s")
        tree.check()
        for value in ["", "a", "c", "cc", "g", "h"]:
            assert set(tree.search(value)) == brute_search(model, value)


def test_store_is_a_context_manager(path: str) -> None:
    store: Store
    with open_store(path) as store:
        assert store.size_on_disk() > 0
        assert store.stat()["psize"] >= 4096


def test_compacting_copy_keeps_everything_and_shrinks(path: str) -> None:
    with open_store(path) as store:
        for batch in range(20):
            with store.write() as txn:
                tree = PBTree(txn, "a", leaf_cap=4, internal_cap=4, list_cap=4)
                for i in range(50):
                    tree.insert("<", batch * 50 + i, i)
                    txn.put(b"r", codec.encode_u64(batch * 50 + i), b"v" * 40)
        copy = path + "-copy"
        size = store.copy_compact(copy)
        assert size < store.size_on_disk()
        with pytest.raises(StoreError, match="already holds a store"):
            store.copy_compact(copy)
        with store.read() as txn:
            want = list(txn.scan(b"r")), set(PBTree(txn, "a").search(-1))
    with open_store(copy, readonly=True) as store, store.read() as txn:
        assert (list(txn.scan(b"r")), set(PBTree(txn, "a").search(-1))) == want
        PBTree(txn, "a").check()


def test_a_compacting_copy_never_carries_the_retired_mark(path: str) -> None:
    """From its own snapshot (bytes) and from the caller's view (buffers) alike."""
    with open_store(path) as store:
        with store.write() as txn:
            txn.put(b"r", b"k", b"v")
        with store.env.begin(write=True, db=store.meta_db) as raw:
            raw.put(b"retired", b"a mark", db=store.meta_db)
        store.copy_compact(path + "-own")
        with store.read() as view:
            store.copy_compact(path + "-view", txn=view)
    for copy in (path + "-own", path + "-view"):
        with open_store(copy) as store:
            with store.env.begin(db=store.meta_db) as raw:
                assert raw.get(b"retired", db=store.meta_db) is None
            with store.write() as txn:  # a retired store would refuse this
                txn.put(b"r", b"k2", b"w")
            with store.read() as txn:
                assert list(txn.scan(b"r")) == [(b"k", b"v"), (b"k2", b"w")]


def test_a_replaced_store_refuses_writes_and_keeps_its_readers(path: str) -> None:
    from storage import StoreReplaced

    with open_store(path) as store:
        with store.write() as txn:
            txn.put(b"r", b"k", b"1")
        with pytest.raises(StoreError, match="already holds"), store.replacing() as view:
            store.copy_compact(path, txn=view)  # fails in the block: no mark, writes go on
        with store.write() as txn:
            txn.put(b"r", b"k", b"2")
        # a writer in another process, started inside the block, waits on the lock
        code = textwrap.dedent(
            f"""
            from storage import StoreReplaced, open_store
            with open_store({path!r}) as store:
                try:
                    with store.write() as txn:
                        txn.put(b"r", b"late", b"x")
                except StoreReplaced as exc:
                    print("refused:", exc)
            """
        )
        with store.replacing() as view:
            late = subprocess.Popen(
                [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
            )
            store.copy_compact(path + "-copy", txn=view)
            time.sleep(1)  # the writer is blocked on the lock by now (or opens later)
        out, _ = late.communicate(timeout=60)
        assert late.returncode == 0 and out.startswith("refused: store ") and "compacted" in out
        with pytest.raises(StoreReplaced, match="reopen it"), store.write() as txn:
            txn.put(b"r", b"k", b"3")
        with store.read() as txn:  # readers keep reading the old environment
            assert list(txn.scan(b"r")) == [(b"k", b"2")]
        with pytest.raises(StoreReplaced), store.replacing():  # nor a second replacement
            pass
    with open_store(path + "-copy") as copy, copy.write() as txn:  # the mark is not copied
        assert list(txn.scan(b"r")) == [(b"k", b"2")]
        txn.put(b"r", b"k", b"3")


def test_page_cache_is_bounded_by_bytes_and_pages() -> None:
    from storage.cache import PageCache, weight

    cache = PageCache(max_bytes=10 * weight(100))
    for page in range(100):
        cache.publish(page, object(), 1, 1, 100)
        assert cache.bytes <= cache.max_bytes
    assert len(cache) == 10 and cache.lookup(99) is not None and cache.lookup(0) is None
    cache.lookup(90)  # recently used: survives the next eviction
    cache.publish(100, object(), 1, 1, 100)
    assert cache.lookup(90) is not None and cache.lookup(91) is None
    counted = PageCache(max_bytes=1 << 30, max_pages=3)
    for page in range(5):
        counted.publish(page, object(), 1, 1, 10)
    assert len(counted) == 3 and counted.bytes == 3 * weight(10)


def test_swap_in_replaces_a_directory_in_one_step(tmp_path: Path) -> None:
    from storage.swap import swap_in

    target, new = tmp_path / "store", tmp_path / "new"
    new.mkdir()
    (new / "f").write_text("1")
    swap_in(new, target)  # nothing there yet: a rename
    assert (target / "f").read_text() == "1" and not new.exists()
    new.mkdir()
    (new / "f").write_text("2")
    with open(target / "f") as kept:  # a reader of the old store keeps reading it
        swap_in(new, target)
        assert (target / "f").read_text() == "2" and not new.exists()
        assert kept.read() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


_I64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


@given(st.lists(_I64, max_size=40))
def test_bulk_int_id_codecs_agree_with_one_by_one(ids: list[int]) -> None:
    keys = codec.encode_ids(ids)
    assert keys == [codec.encode_id(i) for i in ids]
    back = codec.decode_int_ids(keys)
    if ids:
        assert back is not None and back.tolist() == ids


@given(st.lists(st.one_of(_I64, st.text(max_size=12)), max_size=40))
def test_bulk_id_codecs_with_strings(ids: list[int | str]) -> None:
    keys = codec.encode_ids(ids)
    assert keys == [codec.encode_id(i) for i in ids]
    if any(isinstance(i, str) for i in ids):
        assert codec.decode_int_ids(keys) is None  # the caller decodes one by one


@given(st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), max_size=40))
def test_bulk_u64_codecs(values: list[int]) -> None:
    keys = codec.encode_u64s(values)
    assert keys == [codec.encode_u64(v) for v in values]
    assert codec.decode_u64s(keys).tolist() == values


def test_bulk_codecs_refuse_bad_input() -> None:
    with pytest.raises(InvalidInput):
        codec.encode_ids([1, True])  # a bool is not an id, in bulk as one by one
    with pytest.raises(StoreDamaged, match="not 8 bytes long"):
        codec.decode_u64s([b"\x00" * 8, b"\x00" * 7])
    assert codec.int_ids([1 << 63]) is None  # out of range: left to encode_id's error


def _page_table_leaves(path: str) -> int:
    import lmdb  # (the table's own statistics)

    env = lmdb.open(path, readonly=True, lock=False, max_dbs=8)
    try:
        with env.begin() as txn:
            return int(txn.stat(env.open_db(b"pages", txn=txn, create=False))["leaf_pages"])
    finally:
        env.close()


def test_pages_past_the_last_key_are_appended_full(path: str) -> None:
    """A commit's pages after every stored one go in with ``MDB_APPEND``: the pages table
    is about its compacted size (split pages were left half full), and pages rewritten
    before the last key (written normally) and the appended ones all read back."""
    keys = list(range(30))  # (~300 bytes a page: a dozen to an LMDB page)
    fields = LeafNode(0, 0, 0, keys, [[k] for k in keys], [[]] * 30, keys, keys, keys)
    spaces: dict[int, list[int]] = {}
    with open_store(path) as store:
        for _ in range(3):
            with store.write() as txn:
                space = txn.new_space()
                spaces[space] = [txn.alloc() for _ in range(400)]
                for page in spaces[space]:
                    txn.put_packed(space, page, LeafNode.KIND, fields.to_fields())
        first_space = min(spaces)
        first = spaces[first_space][0]
        with store.write() as txn:  # a page before the last key, rewritten
            txn.load_mut(first_space, first, LeafNode).keys[0] = -1
        copy = path + "-copy"
        store.copy_compact(copy)
        with store.read() as txn:
            assert txn.load_uncached(first_space, first, LeafNode).keys[:2] == [-1, 1]
            for space, pages in spaces.items():
                assert list(txn.space_pages(space)) == pages
                last = txn.load_uncached(space, pages[-1], LeafNode)
                assert last.keys == keys and last.eq == [[k] for k in keys]
    raw, compact = _page_table_leaves(path), _page_table_leaves(copy)
    assert compact > 50 and raw <= 1.1 * compact, (raw, compact)


def _mapped_kb(data_file: str) -> int:
    """Resident KB of this process's mappings of ``data_file`` (``/proc/self/smaps``)."""
    inode, total, inside = os.stat(data_file).st_ino, 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
                inside = fields[4] == str(inode) and fields[4] != "0"
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise over /proc/self/maps")
def test_released_pages_leave_the_map_and_read_back(path: str) -> None:
    """``release_mapped_pages`` drops the store's pages read so far from the process's
    resident memory; the same snapshot reads them back unchanged."""
    fields = LeafNode(0, 0, 0, list(range(30)), [[k] for k in range(30)], [[]] * 30, [], [], [])
    with open_store(path) as store:
        with store.write() as txn:
            space = txn.new_space()
            pages = [txn.alloc() for _ in range(2000)]
            for page in pages:
                txn.put_packed(space, page, LeafNode.KIND, fields.to_fields())
        data_file = os.path.join(path, "data.mdb")
        with store.read() as txn:
            before = [txn.load_uncached(space, page, LeafNode).keys for page in pages]
            read = _mapped_kb(data_file)
            assert store.release_mapped_pages()
            released = _mapped_kb(data_file)
            after = [txn.load_uncached(space, page, LeafNode).keys for page in pages]
        assert read > 200 and released < read / 4, (read, released)
        assert after == before == [list(range(30))] * len(pages)
