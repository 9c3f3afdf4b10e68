"""The index checker finds BE-Tree and catalog damage done on purpose."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from betree.catalog import NS, ROOT, put_home
from betree.index import Index
from betree.nodes import CNode
from betree.tree import BETree
from storage import CheckFailed, codec

SCHEMA = {"attributes": {"x": {"type": "int", "min": 0, "max": 63}, "y": {"type": "int"}}}


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[Index]:
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 2, "min_size": 1}) as idx:
        idx.subscribe_many([(i, f"x = {i % 64} and y > {i}") for i in range(120)])
        idx.check()
        yield idx


def violations(idx: Index) -> list[str]:
    with pytest.raises(CheckFailed) as failed:
        idx.check()
    return failed.value.violations


def walk(idx: Index) -> list[CNode]:
    with idx.store.read() as txn:
        tree = BETree(txn, txn.get_obj(NS, ROOT))
        return [node for node, _, _ in tree.walk()]


def test_wrong_score(idx: Index) -> None:
    root = walk(idx)[0]
    with idx.store.write() as txn:
        node = txn.load_mut(txn.get_obj(NS, ROOT)["space"], root.page, CNode)
        node.pdir[0][2] += 5
    found = violations(idx)
    assert len(found) == 1 and "scores" in found[0] and f"page {root.page}" in found[0]


def test_clause_in_too_large_a_bucket(idx: Index) -> None:
    # move a clause from a leaf bucket's l-node up to its parent bucket's l-node
    nodes = walk(idx)
    leaf = next(n for n in nodes if n.attr == "x" and not n.top and n.size and n.is_leaf)
    with idx.store.write() as txn, idx.writer(txn) as w:
        entry = w.tree.entries(leaf)[0]
        w.tree._rewrite(leaf.page, w.tree.entries(leaf)[1:])
        w.tree._append(leaf.parent, [entry])
        put_home(txn, entry[0], leaf.parent)
    found = violations(idx)
    assert any(f"clause {entry[0]} belongs in the smaller bucket" in v for v in found)


def test_missing_atom_reference(idx: Index) -> None:
    with idx.store.write() as txn:
        key, value = next(iter(txn.scan(b"atom")))
        aid, refs = codec.decode_value(value)
        txn.put(b"atom", key, codec.encode_value([aid, refs + 1]))
    assert any("uses, found" in v for v in violations(idx))


def test_pbtree_entry_missing_for_an_atom(idx: Index) -> None:
    from pbtree import PBTree

    with idx.store.write() as txn:
        tree = PBTree(txn, "y")
        op, const, aid = next(iter(tree.predicates()))
        assert tree.delete(op, const, aid)
    found = violations(idx)
    assert f"PB+tree 'y' lacks atom {aid}'s entry {op} {const!r}" in found
