"""Bottom-up PB+tree construction: valid by check(), answers like the brute-force model."""

from __future__ import annotations

import random
import tempfile

import pytest

from pbtree import PBTree
from pbtree.bulk import build
from storage import InvalidInput, open_store
from tests.support.pbtree_model import CMP, brute_search


@pytest.mark.parametrize("n,seed", [(0, 1), (1, 2), (7, 3), (300, 4), (3000, 5)])
def test_bulk_build_matches_model_and_checks(n: int, seed: int) -> None:
    rng = random.Random(seed)
    kinds = [lambda: rng.randint(-50, 50), lambda: rng.randint(-40, 40) / 4]
    make = rng.choice(kinds)
    model = {(rng.choice(list(CMP)), make(), rng.randint(0, 500)) for _ in range(n)}
    triples = sorted(((k, op, i) for op, k, i in model), key=lambda t: t[0])
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        for caps in ({"leaf_cap": 3, "internal_cap": 3, "list_cap": 3}, {}):
            name = f"t{len(caps)}"
            with store.write() as txn:
                tree = build(txn, name, triples, **caps)
                tree.check()
                assert len(tree) == len(model)
            with store.read() as txn:
                tree = PBTree(txn, name)
                tree.check()
                for v in [-60, -0.25, 0, 3, 3.5, 60, *[rng.randint(-50, 50) for _ in range(20)]]:
                    assert set(tree.search(v)) == brute_search(model, v)
        # a bulk-built tree takes further online inserts and deletes
        with store.write() as txn:
            tree = PBTree(txn, "t3")
            for op, k, i in sorted(model, key=repr)[: n // 2]:
                assert tree.delete(op, k, i)
                model.discard((op, k, i))
            tree.insert(">", 1000, 9)
            model.add((">", 1000, 9))
            tree.check()
            for v in [-60, 0, 1001]:
                assert set(tree.search(v)) == brute_search(model, v)


def test_bulk_build_refuses_unsorted_or_mixed() -> None:
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with pytest.raises(InvalidInput, match="out of order"), store.write() as txn:
            build(txn, "a", [(2, "=", 1), (1, "=", 2)])
        with pytest.raises(InvalidInput, match="out of order or mixed"), store.write() as txn:
            build(txn, "a", [(1, "=", 1), ("x", "=", 2)])
        with store.write() as txn:
            build(txn, "a", [(1, "=", 1)])
        with pytest.raises(InvalidInput, match="already exists"), store.write() as txn:
            build(txn, "a", [(1, "=", 1)])
