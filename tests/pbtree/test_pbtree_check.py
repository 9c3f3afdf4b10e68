"""The PB+tree checker finds damage done on purpose, and names the page and the fact."""

from __future__ import annotations

import random
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pbtree import PBTree
from pbtree.bulk import build as bulk_build
from pbtree.check import lists_in_bulk
from pbtree.nodes import InternalNode, LeafNode, ListNode
from pbtree.operators import GT, LT, NE
from storage import CheckFailed, CorruptPage, Store, VersionMismatch, WriteTxn, codec, open_store

#: a float domain's 40 keys (ints and floats, as its canonical atoms hold them): the edges
#: of the doubles, signed zero, subnormals, halves (floatcheck47)
FLOAT_KEYS = sorted(
    [
        -float("inf"),
        -1.7976931348623157e308,
        -3.5,
        -5e-324,
        -0.0,
        5e-324,
        2.2250738585072014e-308,
        0.25,
    ]
    + [k + 0.5 if k % 2 else k for k in range(1, 31)]
    + [1.7976931348623157e308, float("inf")]
)


@pytest.fixture(params=["int", "float"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """A tree of 40 keys with every operator, small nodes so lists span several pages:
    ints, or a float domain's (:data:`FLOAT_KEYS`)."""
    keys = list(range(40)) if request.param == "int" else FLOAT_KEYS
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a", leaf_cap=4, internal_cap=4, list_cap=4)
            for k, key in enumerate(keys):
                for j, op in enumerate(("<", "<=", "=", "!=", ">=", ">")):
                    if (k + j) % 3 == 0:
                        tree.insert(op, key, k * 10 + j)
            tree.check()
        yield store


def damage(store: Store, harm: Callable[[WriteTxn, PBTree], None]) -> list[str]:
    """Apply ``harm`` in a transaction, then return the checker's violations."""
    with store.write() as txn:
        harm(txn, PBTree(txn, "a"))
    with store.read() as txn, pytest.raises(CheckFailed) as failed:
        PBTree(txn, "a").check()
    return failed.value.violations


def mut(txn: WriteTxn, tree: PBTree, page: int, cls: Any) -> Any:
    return txn.load_mut(tree.record["space"], page, cls)


def nth_real(txn: WriteTxn, tree: PBTree, kind: int, n: int) -> ListNode:
    page = tree.record["lists"][kind][0]
    for _ in range(n + 1):
        page = txn.load(tree.record["space"], page, ListNode).next
    return mut(txn, tree, page, ListNode)


def leaf(txn: WriteTxn, tree: PBTree, n: int) -> LeafNode:
    page = tree.record["first"]
    for _ in range(n):
        page = txn.load(tree.record["space"], page, LeafNode).next
    return mut(txn, tree, page, LeafNode)


def test_intact_tree_passes(store: Store) -> None:
    with store.read() as txn:
        PBTree(txn, "a").check()


def test_cut_list_link(store: Store) -> None:
    found: dict[str, int] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        node = nth_real(txn, tree, GT, 1)
        found["page"] = node.page
        node.next = 0

    violations = damage(store, harm)
    assert f"page {found['page']}: GreaterThan list ends without reaching its tail" in violations[0]
    assert any("orphaned" in v for v in violations)


def test_broken_back_link(store: Store) -> None:
    found: dict[str, int] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        node = nth_real(txn, tree, LT, 2)
        found["page"], found["prev"] = node.page, node.prev
        node.prev = node.page

    violations = damage(store, harm)
    want = (
        f"page {found['page']}: LessThan list: prev link {found['page']}, expected {found['prev']}"
    )
    assert want in violations


def test_moved_pointer(store: Store) -> None:
    found: dict[str, Any] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        node = leaf(txn, tree, 2)
        found["page"], found["key"], found["was"] = node.page, node.keys[1], node.gtp[1]
        node.gtp[1] = tree.record["lists"][GT][1]  # the tail: never a GT pointer

    violations = damage(store, harm)
    tail = None
    with store.read() as txn:
        tail = PBTree(txn, "a").record["lists"][GT][1]
    want = (
        f"page {found['page']}: leaf item {found['key']!r}: GreaterThan pointer {tail}, "
        f"expected {found['was']}"
    )
    assert violations == [want]


def test_inequality_pointer_checked_too(store: Store) -> None:
    def harm(txn: WriteTxn, tree: PBTree) -> None:
        node = leaf(txn, tree, 0)
        node.nep[0] = tree.record["lists"][NE][1]

    violations = damage(store, harm)
    assert len(violations) == 1 and "Inequality pointer" in violations[0]


def test_swapped_leaf_keys(store: Store) -> None:
    found: dict[str, Any] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        node = leaf(txn, tree, 1)
        node.keys[0], node.keys[1] = node.keys[1], node.keys[0]
        found["page"], found["keys"] = node.page, node.keys[:2]

    violations = damage(store, harm)
    a, b = found["keys"]
    assert f"page {found['page']}: keys out of order: {a!r} then {b!r}" in violations


def test_separator_bound(store: Store) -> None:
    found: dict[str, Any] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        root = mut(txn, tree, tree.record["root"], InternalNode)
        child = mut(txn, tree, root.children[0], InternalNode)
        child.keys[-1] = root.keys[0] + 100
        found["page"] = child.page

    violations = damage(store, harm)
    assert any(v.startswith(f"page {found['page']}: separator") for v in violations)


def test_bound_ids_must_mirror_lists(store: Store) -> None:
    def harm(txn: WriteTxn, tree: PBTree) -> None:
        node = leaf(txn, tree, 3)
        node.bound[0] = [*node.bound[0], 99999]

    violations = damage(store, harm)
    assert len(violations) == 1 and "bound ids" in violations[0] and "99999" in violations[0]


def test_orphaned_page(store: Store) -> None:
    found: dict[str, int] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        page = txn.alloc()
        txn.put_new(tree.record["space"], page, LeafNode(page))
        found["page"] = page

    violations = damage(store, harm)
    assert violations == [
        f"page {found['page']}: orphaned: stored in the tree's space but unreachable"
    ]


def test_corrupt_page(store: Store) -> None:
    with store.read() as txn:
        tree = PBTree(txn, "a")
        space = tree.record["space"]
        page = txn.load(space, tree.record["lists"][NE][0], ListNode).next
    with store.env.begin(write=True, db=store.pages_db) as raw:
        raw.put(codec.page_key(space, page), codec.encode_u64(999) + b"\xc1garbage")
    with store.read() as txn, pytest.raises(CheckFailed) as failed:
        PBTree(txn, "a").check()
    assert any(
        v.startswith(f"page {page}: unreadable Inequality list node")
        for v in failed.value.violations
    )


def test_unknown_page_version_is_refused(store: Store) -> None:
    with store.write() as txn:
        tree = PBTree(txn, "a")
        page = tree.record["root"]
        head, body = (
            codec.encode_u64(txn.gen),
            codec.encode_format([InternalNode.KIND, 99, [], b""]),
        )
        raw = head + struct.pack(">I", zlib.crc32(body, zlib.crc32(head))) + body
        txn.lmdb_txn.put(codec.page_key(tree.record["space"], page), raw, db=store.pages_db)
    store.cache.clear()
    with store.read() as txn, pytest.raises(VersionMismatch, match=r"layout version 99"):
        txn.load(PBTree(txn, "a").record["space"], page, InternalNode)


def test_wrong_page_kind_is_refused(store: Store) -> None:
    with store.read() as txn:
        tree = PBTree(txn, "a")
        with pytest.raises(CorruptPage, match=r"expected a pbtree\.leaf page, found pbtree\.list"):
            txn.load(tree.record["space"], tree.record["lists"][GT][0], LeafNode)


def test_bulk_verification_trusts_sound_trees_only() -> None:
    """The bulk pass over lists and pointers (which check() trusts before walking item by
    item) holds on sound trees of every operator, numbers and strings, after deletes and
    bulk builds; and turns down each damage below (check() then names it)."""
    rng = random.Random(7)
    ops = ("<", "<=", "=", "!=", ">=", ">")
    with tempfile.TemporaryDirectory() as path, open_store(path) as store, store.write() as txn:
        for name, make in (
            ("ints", lambda: rng.randrange(-50, 50)),
            ("floats", lambda: rng.choice([-0.0, 1.5, 2.0**63, -1.8e308, rng.random()])),
            ("strs", lambda: rng.choice(["", "a", "é", "ab", "zz", "\U0001f600"])),
        ):
            tree = PBTree(txn, name, leaf_cap=4, internal_cap=4, list_cap=3)
            live = []
            for i in range(300):
                op, c = rng.choice(ops), make()
                tree.insert(op, c, i)
                live.append((op, c, i))
            for op, c, i in rng.sample(live, 120):
                tree.delete(op, c, i)
            tree.check()
            assert lists_in_bulk(tree)
        triples = sorted(
            ((rng.randrange(1000), rng.choice(ops), i) for i in range(2000)),
            key=lambda t: t[0],
        )
        bulk_build(txn, "bulk", triples)
        tree = PBTree(txn, "bulk")
        tree.check()
        assert lists_in_bulk(tree)
        assert lists_in_bulk(PBTree(txn, "absent"))


@pytest.mark.parametrize("what", ["gt_id_added", "lt_run_unsorted", "ne_id_added", "lt_pointer"])
def test_bulk_verification_turns_down_damage(store: Store, what: str) -> None:
    def harm(txn: WriteTxn, tree: PBTree) -> None:
        if what == "lt_pointer":
            item = leaf(txn, tree, 1)
            item.ltp[0] = tree.record["lists"][LT][0]  # the head: never a LessThan pointer
            return
        runs = nth_real(txn, tree, {"gt": GT, "lt": LT, "ne": NE}[what[:2]], 1).runs()
        if what == "gt_id_added":
            runs[0] = [*runs[0], 99999]  # a GreaterThan >= id not in its key's bound run
        elif what == "lt_run_unsorted":
            runs[0] = [99998, 99999, *runs[0]][::-1]
        else:
            runs[0] = sorted({*runs[0], 88888})

    with store.write() as txn:
        harm(txn, PBTree(txn, "a"))
    with store.read() as snapshot:
        tree = PBTree(snapshot, "a")
        assert not lists_in_bulk(tree)
        with pytest.raises(CheckFailed):
            tree.check()


@pytest.mark.parametrize("run", ["eq", "bound"])
@pytest.mark.parametrize("how", ["unsorted", "repeated"])
def test_leaf_runs_checked_in_bulk_named_item_by_item(store: Store, run: str, how: str) -> None:
    """A leaf item's ``=`` or ``bound`` run out of order or with a repeat: the bulk pass over
    every leaf's runs turns it down and the item-by-item pass names the page and the key."""
    found: dict[str, Any] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        for n in range(40):
            node = leaf(txn, tree, n)
            runs = getattr(node, run)
            for i, ids in enumerate(runs):
                if ids:
                    runs[i] = (
                        [ids[0], ids[0], *ids[1:]] if how == "repeated" else [*ids, ids[0] - 1]
                    )
                    found["page"], found["key"] = node.page, node.keys[i]
                    return

    violations = damage(store, harm)
    name = "=" if run == "eq" else "bound"
    want = f"page {found['page']}: item {found['key']!r}: {name} ids not sorted and unique"
    assert want in violations


@pytest.mark.parametrize("keys", ["ints", "edges", "mixed", "strs"])
def test_list_key_without_leaf_item_found_by_every_locator(keys: str) -> None:
    """A list item whose key no leaf holds (int64 keys located by ``searchsorted``, others
    through a dict): turned down in bulk, named item by item."""
    values: list[Any] = {
        "ints": list(range(-20, 20)),
        "edges": [-(2**63), -(2**62), -1, 0, 1, 2**62, 2**63 - 1],
        "mixed": [-1.8e308, -0.0, 1, 1.5, 2**62, 1.8e308],
        "strs": ["", "a", "é", "zz", "\U0001f600"],
    }[keys]
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a", leaf_cap=4, internal_cap=4, list_cap=3)
            for i, c in enumerate(values):
                tree.insert(">", c, i)
                tree.insert("<", c, 1000 + i)
            tree.check()
            assert lists_in_bulk(tree)
        with store.write() as txn:
            tree = PBTree(txn, "a")
            node = nth_real(txn, tree, GT, 0)
            node.keys[0] = (
                "0"
                if keys == "strs"
                else -3.5
                if keys == "mixed"
                else values[0] - 1
                if keys != "edges"
                else -(2**63) + 1
            )
            bad = node.keys[0]
        with store.read() as txn:
            tree = PBTree(txn, "a")
            assert not lists_in_bulk(tree)
            with pytest.raises(CheckFailed) as failed:
                tree.check()
        assert any(f"key {bad!r} has no leaf item" in v for v in failed.value.violations)


def keyed_store(path: str, kind: str) -> Store:
    """A store holding tree ``a`` of 40 keys of one kind (int64s, floats or strings) with
    every operator, small nodes: its leaves' keys are checked in bulk (numpy for int64s,
    else compared in C), one by one only on a fault."""
    make: dict[str, Callable[[int], Any]] = {
        "ints": lambda k: (k - 20) * 2**58,
        "floats": lambda k: -1.8e308 if k == 0 else (k - 20) / 3,
        "strs": lambda k: f"k{k:02d}\U0001f600",
    }
    store = open_store(path)
    with store.write() as txn:
        tree = PBTree(txn, "a", leaf_cap=4, internal_cap=4, list_cap=4)
        for k in range(40):
            for j, op in enumerate(("<", "<=", "=", "!=", ">=", ">")):
                if (k + j) % 3 == 0:
                    tree.insert(op, make[kind](k), k * 10 + j)
    with store.read() as txn:
        PBTree(txn, "a").check()
    return store


@pytest.mark.parametrize("kind", ["ints", "floats", "strs"])
@pytest.mark.parametrize("harm", ["swapped", "repeated", "above", "below", "domain", "link"])
def test_leaf_keys_checked_in_bulk_named_one_by_one(kind: str, harm: str) -> None:
    """Each leaf-key fault (order, a repeat, outside the parent's bounds, of another
    domain) and a broken leaf link: the bulk pass over all leaves turns it down and the
    leaf-by-leaf pass names it, as it always did."""
    with tempfile.TemporaryDirectory() as path, keyed_store(path, kind) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a")
            node = leaf(txn, tree, 3)
            before = txn.load(tree.record["space"], node.prev, LeafNode)
            after = txn.load(tree.record["space"], node.next, LeafNode)
            page, keys = node.page, node.keys
            if harm == "swapped":
                keys[0], keys[1] = keys[1], keys[0]
                want = f"page {page}: keys out of order: {keys[0]!r} then {keys[1]!r}"
            elif harm == "repeated":
                keys[1] = keys[0]
                want = f"page {page}: keys out of order: {keys[0]!r} then {keys[0]!r}"
            elif harm in ("above", "below"):  # a separator moved: the keys still ascend
                parent = mut(txn, tree, tree.record["root"], InternalNode)
                for _ in range(tree.record["height"] - 2):
                    parent = mut(txn, tree, parent.children[0], InternalNode)
                space = tree.record["space"]
                left, right = (txn.load(space, c, LeafNode) for c in parent.children[:2])
                if harm == "above":
                    parent.keys[0] = key = left.keys[-1]
                    want = f"page {left.page}: key {key!r} not below the bound {key!r}"
                else:
                    parent.keys[0] = right.keys[1]
                    want = f"page {right.page}: key {right.keys[0]!r} below the bound"
            elif harm == "domain":
                keys[0] = 5 if kind == "strs" else "5"
                domain = "str" if kind == "strs" else "num"
                want = f"page {page}: key {keys[0]!r} is not of the tree's domain {domain!r}"
            else:
                node.next = before.page
                want = f"page {page}: next link {before.page}, expected {after.page}"
        with store.read() as txn, pytest.raises(CheckFailed) as failed:
            PBTree(txn, "a").check()
    assert any(v.startswith(want) for v in failed.value.violations), failed.value.violations


def test_leaf_key_faults_reported_in_walk_order(store: Store) -> None:
    """A key fault found leaf by leaf is listed where the walk meets its leaf: before a
    later leaf's fill fault, as when keys were checked during the walk."""
    found: dict[str, Any] = {}

    def harm(txn: WriteTxn, tree: PBTree) -> None:
        first = leaf(txn, tree, 1)
        first.keys[0], first.keys[1] = first.keys[1], first.keys[0]
        later = leaf(txn, tree, 4)
        while len(later.keys) > 1:
            later.delete_item(0)
        found["first"], found["later"] = first.page, later.page

    violations = damage(store, harm)
    heads = (f"page {found['first']}: keys out of order", f"page {found['later']}: 1 items")
    assert [v.split(":")[0] for v in violations if v.startswith(heads)] == [
        f"page {found['first']}",
        f"page {found['later']}",
    ]


def test_dirty_leaf_with_uneven_columns_checked_item_by_item(store: Store) -> None:
    """In a write transaction a leaf is its writer's node: one whose columns differ in
    length (it cannot be packed into arrays) is still checked, and named."""
    with pytest.raises(CheckFailed) as failed, store.write() as txn:  # (aborted)
        tree = PBTree(txn, "a")
        node = leaf(txn, tree, 2)
        node.eq.append([1])
        tree.check()
    assert f"page {node.page}: leaf columns differ in length" in failed.value.violations


@pytest.mark.parametrize("harm", ["unsorted", "empty", "order"])
def test_list_faults_only_the_lists_show(harm: str) -> None:
    """List faults that leave every pointer, bound run and count as they were (a run
    reversed, an item's ids moved to the next item, two items swapped in their node): the
    bulk pass over each list's nodes turns them down, and each is named."""
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a", leaf_cap=4, internal_cap=4, list_cap=4)
            for op, key, ident in ((">", 5, 7), (">", 6, 8), (">=", 6, 1), (">=", 6, 2)):
                tree.insert(op, key, ident)
        with store.write() as txn:
            node = nth_real(txn, PBTree(txn, "a"), GT, 0)
            runs = node.runs()  # (key 5: [], [7]; key 6: [1, 2], [8])
            if harm == "unsorted":
                runs[2] = [2, 1]
                want = "GreaterThan list item 6: ids not sorted and unique"
            elif harm == "empty":
                runs[1], runs[3] = [], [7, 8]
                want = "GreaterThan list item 5 holds no ids"
            else:
                node.keys[:] = [6, 5]
                runs[:] = [*runs[2:], *runs[:2]]
                want = "GreaterThan list out of order: 6 then 5"
        with store.read() as txn:
            tree = PBTree(txn, "a")
            assert not lists_in_bulk(tree)
            with pytest.raises(CheckFailed) as failed:
                tree.check()
    assert f"page {node.page}: {want}" in failed.value.violations
