"""Seeded stress tests of the PB+tree against a brute-force model.

Tiny node capacities make splits, merges and re-pointing happen on nearly every step;
``check()`` runs after every step and the store is closed and reopened between phases.
Run longer from the command line: ``python -m tests.pbtree.test_pbtree_stress ITER SEED``.
"""

from __future__ import annotations

import random
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pbtree import PBTree
from pbtree.operators import OPERATORS
from pbtree.view import RUNS_DICT, IntKeys, Runs, SearchView
from storage import open_store
from storage.errors import InvalidInput
from tests.support.pbtree_model import OPS, brute_search, float_key, int_key, probe, str_key


def same_runs(tree: Callable[[Any], Any], view: Callable[[Any], Any], value: Any) -> bool:
    """Whether the view's id runs for ``value`` hold the tree's ids, repeated no more
    often (the view keeps an atom that is both ``=`` and ``>=`` of one key once)."""
    runs = [np.concatenate([*f(value), np.empty(0, np.uint32)]) for f in (tree, view)]
    (ids, counts), (vids, vcounts) = (np.unique(r, return_counts=True) for r in runs)
    return bool(np.array_equal(ids, vids) and (vcounts <= counts).all())


def listed(tree: PBTree) -> set[tuple[str, Any, int]]:
    """The tree's entries by :meth:`PBTree.predicate_columns`, each listed once."""
    codes, consts, ids = tree.predicate_columns()
    entries = list(
        zip(map(OPERATORS.__getitem__, codes.tolist()), consts, ids.tolist(), strict=True)
    )
    assert len(entries) == len(tree) == len(set(entries))
    return set(entries)


def checked(tree: PBTree) -> set[tuple[str, Any, int]]:
    """The tree's entries as ``check()`` returns them (from the pages it read, not read
    again), each listed once (compared with the model, as :func:`listed` is)."""
    codes, consts, ids = tree.check()
    entries = list(
        zip(map(OPERATORS.__getitem__, codes.tolist()), consts.tolist(), ids.tolist(), strict=True)
    )
    assert len(entries) == len(tree) == len(set(entries))
    return set(entries)


def run(steps: int, seed: int, make: Callable[[random.Random], Any], phases: int = 4) -> int:
    """Random interleavings of insert / delete / search; returns searches made."""
    rng = random.Random(seed)
    model: set[tuple[str, Any, int]] = set()
    searches = 0
    with tempfile.TemporaryDirectory() as path:
        for phase in range(phases):
            with open_store(path, cache_pages=64) as store:
                for _ in range(steps // phases):
                    with store.write() as txn:
                        tree = PBTree(txn, "a", leaf_cap=3, internal_cap=3, list_cap=3)
                        action = rng.random()
                        # grow in early phases, shrink in the last one
                        grow = 0.6 if phase < phases - 1 else 0.3
                        if action < grow or not model:
                            triple = (rng.choice(OPS), make(rng), rng.randint(0, 40))
                            added = tree.insert(*triple)
                            assert added == (triple not in model)
                            model.add(triple)
                        elif action < 0.92:
                            triple = rng.choice(sorted(model, key=repr))
                            assert tree.delete(*triple)
                            model.discard(triple)
                            assert not tree.delete(*triple)
                        else:
                            value = probe(rng, make)
                            assert set(tree.search(value)) == brute_search(model, value)
                            searches += 1
                        assert checked(tree) == model
                        assert len(tree) == len(model)
                    with store.read() as txn:
                        tree = PBTree(txn, "a")
                        value = probe(rng, make)
                        assert set(tree.search(value)) == brute_search(model, value)
                        assert same_runs(
                            tree.collect, SearchView(txn, "a", tree.record).collect, value
                        )
                        searches += 1
                        assert listed(tree) == model
            with open_store(path, readonly=True) as store, store.read() as txn:
                PBTree(txn, "a").check()
        # shrink to nothing: every page but the sentinels and the root leaf is freed
        with open_store(path) as store:
            for triple in sorted(model, key=repr):
                with store.write() as txn:
                    tree = PBTree(txn, "a")
                    assert tree.delete(*triple)
                    model.discard(triple)
                    assert checked(tree) == model
            with store.read() as txn:
                tree = PBTree(txn, "a")
                assert len(tree) == 0
                assert len(list(txn.space_pages(tree.record["space"]))) == 7
    return searches


#: Steps of a stress run: the bounded sample's, and ``--full``'s (docs/testing.md).
STEPS, FULL_STEPS = 1300, 2600


@pytest.mark.parametrize("make,seed", [(float_key, 2), (str_key, 3)], ids=["float-2", "string-3"])
def test_stress(make: Callable[[random.Random], Any], seed: int, full: bool) -> None:
    assert run(FULL_STEPS if full else STEPS, seed, make) > 100


@pytest.mark.sampled(1)
@pytest.mark.parametrize("seed", [1, 4])
def test_stress_int(seed: int, full: bool) -> None:
    """Int keys, the densest duplicates: one seed per run, both under ``--full``."""
    assert run(FULL_STEPS if full else STEPS, seed, int_key) > 100


@pytest.mark.parametrize(
    "keys",
    [
        [-(2**63), 2**53, 2**53 + 1, 2**63 - 1, -0.0, 1.8e308, -1.8e308, 0.5, 7],
        ["", "a", "a\x00", "\uffff", "\U0001f600", "\U0010ffff", "x" * 5000],
    ],
    ids=["numbers", "strings"],
)
def test_view_at_the_ends_of_the_domains(keys: list[Any]) -> None:
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a", leaf_cap=3, internal_cap=3, list_cap=3)
            for n, key in enumerate(keys * 3):
                tree.insert(rng.choice(OPS), key, n)
        with store.read() as txn:
            tree = PBTree(txn, "a")
            view = SearchView(txn, "a", tree.record)
            probes = [*keys, 2**53 + 2, 2**62, -(2**62), 0, "b", "\U0001f601"]
            for value in probes:
                if isinstance(value, str) != isinstance(keys[0], str):
                    with pytest.raises(InvalidInput):
                        view.collect(value)
                    continue
                assert same_runs(tree.collect, view.collect, value), value


def test_view_of_an_empty_tree() -> None:
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            PBTree(txn, "a")
        with store.read() as txn:
            assert SearchView(txn, "a", PBTree(txn, "a").record).collect(3) == []


def test_aborted_transaction_changes_nothing() -> None:
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a", leaf_cap=3, internal_cap=3, list_cap=3)
            for i in range(20):
                tree.insert(">", i, i)
        with pytest.raises(RuntimeError), store.write() as txn:
            tree = PBTree(txn, "a")
            for i in range(20):
                tree.delete(">", i, i)
                tree.insert("<", i + 100, i)
            raise RuntimeError("abort")
        with store.read() as txn:
            tree = PBTree(txn, "a")
            tree.check()
            assert set(tree.search(100)) == set(range(20))


def test_many_trees_share_a_store() -> None:
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            PBTree(txn, "price").insert(">=", 10, 1)
            PBTree(txn, "genre").insert("=", "classics", 2)
        with store.read() as txn:
            assert list(PBTree(txn, "price").search(12)) == [1]
            assert list(PBTree(txn, "genre").search("classics")) == [2]
            assert list(PBTree(txn, "missing").search(1)) == []
            PBTree(txn, "price").check()
            PBTree(txn, "genre").check()


if __name__ == "__main__":
    iterations, seed = int(sys.argv[1]), int(sys.argv[2])
    for maker in (int_key, float_key, str_key):
        print(maker.__name__, run(iterations, seed, maker), "searches")


@pytest.mark.parametrize("make", [int_key, float_key, str_key], ids=["int", "float", "string"])
def test_merged_views_find_what_each_tree_finds(make: Callable[[random.Random], Any]) -> None:
    """Three trees on one attribute (the shards of a store), equal keys in several, one
    empty: a merged view's runs hold each tree's, its ids offset by the tree's base."""
    rng = random.Random(6)
    bases = [0, 1000, 5000]
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            for name, count in zip("abc", (60, 0, 90), strict=True):
                tree = PBTree(txn, name, leaf_cap=3, internal_cap=3, list_cap=3)
                for n in range(count):
                    tree.insert(rng.choice(OPS), make(rng), n)
        with store.read() as txn:
            trees = [PBTree(txn, name) for name in "abc"]
            views = [SearchView(txn, name, t.record) for name, t in zip("abc", trees, strict=True)]
            merged = SearchView.merged(views, bases)
            for _ in range(200):
                value = probe(rng, make)

                def each(v: Any) -> list[np.ndarray]:
                    runs = [np.concatenate([*t.collect(v), np.empty(0, np.uint32)]) for t in trees]
                    return [r + np.uint32(b) for r, b in zip(runs, bases, strict=True)]

                assert same_runs(each, merged.collect, value), value


def test_view_of_a_long_int_tree() -> None:
    """More int64 keys than a view keeps as Python objects (pbtree.view.RUNS_DICT): keys and
    leaf runs read off arrays find what the tree finds, for ints, floats between and on
    them, and values past both ends, alone and merged with a short tree."""
    rng = random.Random(7)
    count = 4 * RUNS_DICT  # (a third of them in the GreaterThan list, a half in leaves)
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            tree = PBTree(txn, "a")
            for n in range(count):
                key = rng.randint(-(2**40), 2**40)
                key = rng.choice([2**63 - 1, -(2**63), 0]) if n % 100 == 0 else key
                tree.insert(rng.choice(OPS), key, n)
            short = PBTree(txn, "b")
            for n in range(50):
                short.insert(rng.choice(OPS), rng.randint(-5, 5), n)
        with store.read() as txn:
            tree = PBTree(txn, "a")
            view = SearchView(txn, "a", tree.record)
            assert isinstance(view.gt.keys, IntKeys) and isinstance(view.eq, Runs)
            merged = SearchView.merged([view, SearchView(txn, "b", short.record)], [0, count])
            keys = list(view.eq)
            probes = [*rng.sample(keys, 50), 2**63 - 1, -(2**63), 0, 0.0, -0.0, 2.5, 1e300]
            probes += [float(k) for k in rng.sample(keys, 20)] + [-1e300, 2**62 + 0.5]
            for value in probes:
                assert same_runs(tree.collect, view.collect, value), value
                assert (value in view.eq) == any(value == k for k in keys), value
                ours = np.concatenate([*merged.collect(value), np.empty(0, np.uint32)])
                mine = np.concatenate([*tree.collect(value), np.empty(0, np.uint32)])
                assert set(mine.tolist()) <= set(ours.tolist()), value
