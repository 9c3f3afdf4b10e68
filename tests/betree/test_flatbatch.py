"""Batches matched on packed views, 64 events a word (betree.packed.flatbatch).

Against the brute-force evaluator and the page walk: every attribute type, direct atoms,
multi-clause subscriptions, string ids, deletions, bad events, batch sizes around the
word and :data:`betree.packed.flatbatch.LEAST`, batches split for the truth matrix's bound, and
sharded stores (joined views).  Phase 1 alone against ``PBTree.collect`` on trees whose
atoms sit under several entries (an ``in`` list's keys, ``=`` and ``>=`` of one key,
``>`` and ``>=`` of one key), at the ends of the domains.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.packed import flatbatch
from betree.stores.sharded import open_index
from pbtree import PBTree
from pbtree.view import NARROW, SearchView
from storage import open_store
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, edge_atoms, edge_events
from tests.support.pbtree_model import OPS, float_key, int_key, probe, str_key
from tests.support.workload import SCHEMA, build_hashed, event, expression

SCHEMA_ = Schema.from_json(SCHEMA)
SIZES = [2, 63, 64, 65, 127, 128, 129, 300, 400]


def _subs(rng: random.Random, n: int) -> dict[Any, str]:
    subs: dict[Any, str] = {}
    for k in range(n):
        ident: Any = k if k % 3 else f"id-{k}\u00e9"
        two = k % 5 == 0  # several clauses: reported once an event
        subs[ident] = f"({expression(rng)}) or ({expression(rng)})" if two else expression(rng)
    return subs


def _events(rng: random.Random, n: int) -> list[Any]:
    events: list[Any] = [event(rng) for _ in range(n)]
    for k in range(5, n, 97):
        events[k] = {"i": "not an int"}  # a bad event keeps its own error
    return events


def _expected(subs: dict[Any, str], events: list[Any]) -> list[set[Any] | None]:
    """The brute-force evaluator's answer to each event (None: a bad event)."""
    return [None if isinstance(ev.get("i"), str) else brute(subs, SCHEMA_, ev) for ev in events]


def _same(got: list[Any], expected: list[set[Any] | None]) -> None:
    assert len(got) == len(expected)
    for ids, want in zip(got, expected, strict=True):
        if want is None:
            assert isinstance(ids, Exception)
            continue
        assert isinstance(ids, list) and len(ids) == len(set(ids)), "an id returned twice"
        assert set(ids) == want


def _both(store: Any, events: list[Any], singles: dict[int, Any] | None = None) -> list[Any]:
    """``match_many`` of ``events``, checked against ``match_many_arrays`` (the lists, made
    from one object per held clause and word, hold what the arrays hold, in one order) and
    against ``match`` of each event: the same ids in the same order, so that every path
    writes the same output (``bexdb match`` in batches, Spark tasks on small splits).
    ``singles`` keeps each event's ``match`` (by ``id``) across calls on an unchanged store,
    so a sweep of batch sizes matches each event alone once, not once a size."""
    singles = {} if singles is None else singles
    lists = store.match_many(events)
    arrays = store.match_many_arrays(events)
    assert len(lists) == len(arrays) == len(events)
    for got, ids, ev in zip(lists, arrays, events, strict=True):
        if isinstance(got, Exception):
            assert isinstance(ids, Exception) and str(ids) == str(got)
        else:
            assert isinstance(ids, np.ndarray) and got == ids.tolist()
            if id(ev) not in singles:
                singles[id(ev)] = store.match(ev)
            assert got == singles[id(ev)]
    return lists


@pytest.mark.parametrize("settings", [{"max_cap": 3, "min_size": 2}, {}], ids=["small", "default"])
def test_batches_on_a_view_match_the_brute_force(tmp_path: Path, settings: dict[str, int]) -> None:
    rng = random.Random(31)
    subs = _subs(rng, 250)
    events = _events(rng, 400)
    with Index.open(tmp_path, schema=SCHEMA, settings=settings) as idx:
        idx.subscribe_many(subs.items())
        expected = _expected(subs, events)
        walked = idx.match_many(events)  # 400 events walked: past FLAT_AFTER
        assert idx.engine.flat.describe()["held"]  # batches count towards a view
        _same(walked, expected)
        singles: dict[int, Any] = {}  # the store is unchanged across the sizes
        for size in SIZES:
            got = [
                r for k in range(0, 400, size) for r in _both(idx, events[k : k + size], singles)
            ]
            assert idx.engine.last_stats["pages"] == 0  # from the view
            _same(got, expected)
        assert idx.engine.last_timings.keys() == {"views"}
        # the batch reaches the nodes each event reaches on its own: same candidates
        valid = [ev for ev in events[:300] if not isinstance(ev.get("i"), str)]
        idx.match_many(valid)
        batched = idx.engine.last_stats["candidates"]
        one_by_one = 0
        for ev in valid:
            idx.match(ev)
            one_by_one += idx.engine.last_stats["candidates"]
        assert batched == one_by_one
        gone = list(subs)[::4]
        idx.unsubscribe_many(gone)  # a new generation: its view built again
        for ident in gone:
            del subs[ident]
        idx.check()
        expected = _expected(subs, events)
        _same(idx.match_many(events), expected)
        _same(idx.match_many(events), expected)
        assert idx.engine.flat.describe()["held"]


def test_a_batch_split_into_words_matches_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truth matrix past :data:`SAT_BYTES` is matched 64 events at a time."""
    rng = random.Random(32)
    subs = _subs(rng, 300)
    events = _events(rng, 400)
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        whole = idx.match_many(events)
        monkeypatch.setattr(flatbatch, "SAT_BYTES", 1)
        assert flatbatch.words_for(400, 10) == 1
        split = idx.match_many(events)
    assert [sorted(r, key=repr) for r in whole if isinstance(r, list)] == [
        sorted(r, key=repr) for r in split if isinstance(r, list)
    ]
    _same(split, _expected(subs, events))


@pytest.mark.parametrize("dense", [0.0, 2.0], ids=["transposed", "sorted"])
def test_pairs_by_event(monkeypatch: pytest.MonkeyPatch, dense: float) -> None:
    """:func:`flatbatch.by_event` both ways (every word dense / every word sparse) against
    the bits read one by one: every (row, event) pair once, in event order, rows ascending
    within an event."""
    monkeypatch.setattr(flatbatch, "DENSE", dense)
    rng = np.random.default_rng(7)
    for n, share in [(1, 0.5), (5, 0.01), (300, 0.2), (2000, 0.03), (64, 1.0)]:
        bits = rng.random((n, 64)) < share
        bits[rng.integers(0, n)] = False  # (a row held for no event)
        words = (bits.astype(np.uint64) << np.arange(64, dtype=np.uint64)).sum(axis=1)
        words = words.astype(np.uint64)
        rows, bounds = flatbatch.by_event(words)
        assert bounds[0] == 0 and bounds[-1] == len(rows) and len(bounds) == 65
        for e in range(64):
            want = np.flatnonzero(bits[:, e])
            assert np.array_equal(rows[bounds[e] : bounds[e + 1]], want), (n, e)


@pytest.mark.parametrize(("dense", "shared"), [(2.0, 10**9), (0.0, 0)], ids=["sparse", "dense"])
def test_batches_with_every_word_one_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dense: float, shared: int
) -> None:
    """The brute force's answers with every word's pairs sorted and every list made of new
    ints (or every word transposed and every list of shared objects), plain and sharded."""
    monkeypatch.setattr(flatbatch, "DENSE", dense)
    monkeypatch.setattr(flatbatch, "SHARED", shared)
    rng = random.Random(38)
    subs = _subs(rng, 400)
    events = _events(rng, 300) + _shaped(rng, [70, 40])
    expected = _expected(subs, events)
    with Index.open(tmp_path / "p", schema=SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        _same(_both(idx, events), expected)
    root = build_hashed(tmp_path / "s", subs, shards=3)
    with open_index(root) as store:
        store.match_many(events)  # (walked: the views built)
        _same(_both(store, events), expected)
        assert store.join is not None


def _shaped(rng: random.Random, sizes: list[int]) -> list[Any]:
    """Events in groups of one shape each (the sizes given), shuffled."""
    events: list[Any] = []
    attrs = ["i", "j", "f", "s", "b", "il", "sl"]
    for size in sizes:
        while True:
            ev = event(rng)
            if len(ev) > 1:
                break
        shape = sorted(ev)
        for _ in range(size):
            while True:  # (another event of that shape)
                other = event(rng)
                other.update({a: ev[a] for a in shape if a not in other})
                other = {a: other[a] for a in shape}
                if sorted(other) == shape:
                    break
            events.append(other)
        attrs = attrs[1:] + attrs[:1]
    rng.shuffle(events)
    return events


@pytest.mark.parametrize("seed", range(6))
def test_large_shapes_start_words_of_their_own(seed: int) -> None:
    """:func:`flatbatch.arrange`: shape order, ascending slots, every word but the last at
    least half full, a shape of :data:`HALF` events or more never after a half-full word."""
    rng = random.Random(seed)
    sizes = [rng.choice([1, 2, 5, 31, 32, 33, 63, 64, 65, 130]) for _ in range(rng.randint(1, 12))]
    batch = _shaped(rng, sizes)
    order, slots = flatbatch.arrange(batch)
    assert sorted(order) == list(range(len(batch)))
    shapes = [tuple(sorted(batch[e])) for e in order]
    assert shapes == sorted(shapes)
    assert np.all(np.diff(slots) > 0) and slots[0] == 0
    fill = np.bincount(slots >> 6)
    assert np.all(fill[:-1] >= flatbatch.HALF) and fill[-1] >= 1
    assert len(fill) <= 2 * ((len(batch) + 63) // 64)
    first = [0] + [i for i in range(1, len(order)) if shapes[i] != shapes[i - 1]]
    for i, j in zip(first, [*first[1:], len(order)], strict=True):
        if j - i >= flatbatch.HALF and i:
            assert slots[i] % 64 == 0 or slots[i] % 64 < flatbatch.HALF
            assert slots[i] == slots[i - 1] + 1 or slots[i] % 64 == 0


def test_batches_of_large_shapes_match_the_brute_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches whose shapes fill words of their own (gaps between the events) match as
    the brute force does, in one pass and split into passes of one word."""
    rng = random.Random(37)
    subs = _subs(rng, 400)
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        gaps = 0
        for sizes in ([40, 3, 50, 33, 1], [130, 31, 32, 64, 65], [200]):
            events = _shaped(rng, sizes)
            _, slots = flatbatch.arrange(events)
            gaps += int(slots[-1]) + 1 - len(events)
            expected = _expected(subs, events)
            _same(_both(idx, events), expected)
            assert idx.engine.last_stats["pages"] == 0
            monkeypatch.setattr(flatbatch, "SAT_BYTES", 1)
            _same(_both(idx, events), expected)
            monkeypatch.undo()
        assert gaps  # (some shape started a word)


def test_batches_on_views_at_the_ends_of_every_domain(tmp_path: Path) -> None:
    rng = random.Random(33)
    atoms = edge_atoms()
    subs = {
        k: e
        for k, e in enumerate(
            [*atoms, *(f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(300))]
        )
    }
    events = edge_events()
    schema = Schema.from_json(EDGE_SCHEMA)
    with Index.open(tmp_path, schema=EDGE_SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(subs.items())
        walked = [sorted(idx.match(ev), key=repr) for ev in events]
        idx.engine.flat.after = 0
        batch = (events * (flatbatch.LEAST // len(events) + 1))[: 2 * flatbatch.LEAST]
        got = idx.match_many(batch)
        assert idx.engine.flat.describe()["held"]
    for k, ids in enumerate(got):
        assert isinstance(ids, list)
        assert sorted(ids, key=repr) == walked[k % len(events)], batch[k]
    for k, ev in enumerate(events[:20]):
        assert set(walked[k]) == brute(subs, schema, ev)


@pytest.mark.parametrize("keyed", [flatbatch.KEYED, 0.0], ids=["default", "keys"])
def test_sharded_batches_on_joined_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: float
) -> None:
    """Batches on a sharded store's joined views; with each row's most selective atom
    tested first or as the default decides (each shard's own rows and keys)."""
    monkeypatch.setattr(flatbatch, "KEYED", keyed)
    rng = random.Random(34)
    subs = _subs(rng, 300)
    events = _events(rng, 300)
    root = build_hashed(tmp_path / "s", subs, shards=4)
    expected = _expected(subs, events)
    with open_index(root, readonly=False) as store:
        _same(store.match_many(events), expected)  # walked, views built
        store.match_many(events)
        assert store.join is not None
        singles: dict[int, Any] = {}  # the store is unchanged across the sizes
        for size in (64, 129, 300):
            got = [
                r for k in range(0, 300, size) for r in _both(store, events[k : k + size], singles)
            ]
            _same(got, expected)
        store.subscribe_many([(5000, "i >= 0"), (3, "j = 1")])  # a new one, a replacement
        subs.update({5000: "i >= 0", 3: "j = 1"})
        store.unsubscribe_many(list(subs)[10:60])
        for ident in list(subs)[10:60]:
            del subs[ident]
        expected = _expected(subs, events)
        for _ in range(2):
            _same(_both(store, events), expected)
        assert store.join is not None


@pytest.mark.parametrize(
    ("make", "kind"),
    [(int_key, "int"), (float_key, "float"), (str_key, "string")],
    ids=["int", "float", "string"],
)
def test_phase_one_of_atoms_under_several_entries(
    make: Callable[[random.Random], Any], kind: str
) -> None:
    """Ids drawn from a small range, each under several (op, key) entries: repeats in a
    list, under several keys, and ``=`` with ``>=`` of one key; two trees merged (their
    ids past the first's: an atom belongs to one attribute)."""
    rng = random.Random(35)
    bases = [1000, 1400]
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            for name in "ab":
                tree = PBTree(txn, name, leaf_cap=3, internal_cap=3, list_cap=3)
                for _ in range(600):
                    tree.insert(rng.choice(OPS), make(rng), rng.randrange(1, 150))
                tree.insert("=", make(rng), 151)
                tree.insert(">=", 5 if kind != "string" else "b", 152)
                tree.insert("=", 5 if kind != "string" else "b", 152)
        with store.read() as txn:
            trees = [PBTree(txn, name) for name in "ab"]
            views = [SearchView(txn, name, t.record) for name, t in zip("ab", trees, strict=True)]
            searches = {"a": views[0], "m": SearchView.merged(views, bases)}
            for k in range(8):
                # (odd passes of int trees: int values only, whose cuts numpy finds)
                draw = (lambda: rng.randint(-35, 35)) if kind == "int" and k % 2 else None
                batch = [
                    {
                        attr: draw() if draw else probe(rng, make)
                        for attr in ("a", "m")
                        if rng.random() < 0.8
                    }
                    for _ in range(rng.choice([1, 64, 100, 200]))
                ]
                where = flatbatch.Layout.packed(len(batch))
                cols = flatbatch.columns(batch, {"a": kind, "m": kind}, where)
                shard = flatbatch.Shard(cast(Any, None), {}, 0, 0, 2000)
                sat = flatbatch.satisfied(searches, [shard], batch, cols, where)
                for e, values in enumerate(batch):
                    held = np.zeros(2000, dtype=bool)
                    held[0] = True
                    for attr, value in values.items():
                        runs = [np.empty(0, np.uint32), *searches[attr].collect(value)]
                        held[np.concatenate(runs)] = True
                    bits = (sat[e >> 6] >> np.uint64(e & 63)) & np.uint64(1)
                    assert np.array_equal(bits.astype(bool), held), values


_LOW, _HIGH = -(1 << 63), (1 << 63) - 1
#: int trees by name: the keys each draws, and whether it is narrow (searched with the
#: others at once) or not (one by one): near both ends of int64, around 0, and spans just
#: under and at the narrow bound
_INT_TREES: dict[str, tuple[Callable[[random.Random], int], bool]] = {
    "lo": (lambda r: _LOW + r.randint(1, 60), True),
    "lo0": (lambda r: _LOW + r.randint(0, 60), False),
    "hi": (lambda r: _HIGH - r.randint(1, 60), True),
    "hi0": (lambda r: _HIGH - r.randint(0, 60), False),
    "mid": (lambda r: r.randint(-30, 30), True),
    "span": (lambda r: r.choice([0, 1, NARROW - 4, NARROW - 3]), True),
    "span2": (lambda r: r.choice([0, 1, NARROW - 3, NARROW - 2]), False),
}


@pytest.mark.parametrize("gaps", [False, True], ids=["packed", "gaps"])
def test_phase_one_of_int_trees_at_once(gaps: bool) -> None:
    """Narrow int trees searched at once beside the others searched one by one (each tree
    its own attribute and atom ids, ids repeated under several entries), every event's
    bits against ``SearchView.collect``: keys near both ends of int64, values at the ends
    (past every key), on keys and beside them, some attributes undefined, events side by
    side or with gaps between them in their words."""
    rng = random.Random(39)
    names = list(_INT_TREES)
    with tempfile.TemporaryDirectory() as path, open_store(path) as store:
        with store.write() as txn:
            for t, name in enumerate(names):
                tree = PBTree(txn, name, leaf_cap=3, internal_cap=3, list_cap=3)
                make = _INT_TREES[name][0]
                for _ in range(300):
                    tree.insert(rng.choice(OPS), make(rng), 200 * t + rng.randrange(1, 60))
        with store.read() as txn:
            searches = {name: SearchView(txn, name, PBTree(txn, name).record) for name in names}
            assert {n: v.narrow for n, v in searches.items()} == {
                n: narrow for n, (_, narrow) in _INT_TREES.items()
            }
            atoms = 200 * len(names)
            for _ in range(6):
                batch = []
                for _ in range(rng.choice([1, 63, 64, 65, 150])):
                    event = {}
                    for name in names:
                        if rng.random() < 0.75:
                            key = _INT_TREES[name][0](rng)
                            pick = rng.choice([key, key - 1, key + 1, _LOW, _HIGH, 0])
                            event[name] = min(max(pick, _LOW), _HIGH)
                    batch.append(event)
                steps = [rng.choice([1, 1, 2, 30]) if gaps else 1 for _ in batch]
                slots = np.cumsum([0, *steps[1:]]).astype(np.int64)
                where = flatbatch.Layout.of(slots)
                cols = flatbatch.columns(batch, dict.fromkeys(names, "int"), where)
                shard = flatbatch.Shard(cast(Any, None), {}, 0, 0, atoms)
                sat = flatbatch.satisfied(searches, [shard], batch, cols, where)
                for e, values in enumerate(batch):
                    held = np.zeros(atoms, dtype=bool)
                    held[0] = True
                    for attr, value in values.items():
                        runs = [np.empty(0, np.uint32), *searches[attr].collect(value)]
                        held[np.concatenate(runs)] = True
                    slot = int(slots[e])
                    bits = (sat[slot >> 6] >> np.uint64(slot & 63)) & np.uint64(1)
                    assert np.array_equal(bits.astype(bool), held), values


def test_least_events_matched_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(36)
    subs = _subs(rng, 200)
    with Index.open(tmp_path, schema=SCHEMA) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        idx.match(event(rng))
        assert idx.engine.flat.describe()["held"]

        def refuse(*args: Any) -> Any:
            raise AssertionError("a batch under LEAST events matched as a batch")

        monkeypatch.setattr(flatbatch, "match", refuse)
        events = _events(rng, flatbatch.LEAST - 1)
        _same(idx.match_many(events), _expected(subs, events))
        with pytest.raises(AssertionError):
            idx.match_many([event(rng) for _ in range(flatbatch.LEAST)])


@pytest.mark.parametrize("keyed", [0.0, 2.0], ids=["keys", "no-keys"])
def test_batches_of_clauses_of_many_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: float
) -> None:
    """Clauses of 1 to 28 atoms (up to 4 rows, ANDed a clause at once), subscriptions of
    several clauses, ``in`` lists of many values (an atom under several equality keys:
    each value's run ORed apart) and attributes left undefined, with every row's most
    selective atom tested first (``keys``: :data:`KEYED` 0) or none (2: never), in
    batches around the word and :data:`LEAST`, before and after deletions and on reopening,
    against the brute-force evaluator."""
    monkeypatch.setattr(flatbatch, "KEYED", keyed)
    attrs = {f"a{k}": {"type": "int", "min": -(1 << 63), "max": (1 << 63) - 1} for k in range(28)}
    schema_json = {"attributes": {**attrs, "s": {"type": "string"}}}
    schema = Schema.from_json(schema_json)
    rng = random.Random(41)
    words = [f"w{k}" for k in range(12)]

    def atom() -> str:
        k = rng.randrange(29)
        if k == 28:
            picked = ", ".join(f'"{w}"' for w in rng.sample(words, rng.randint(1, 9)))
            return f"s {rng.choice(['in', 'not in'])} ({picked})"
        return f"a{k} {rng.choice(['<=', '>=', '!=', '=', '<', '>'])} {rng.randint(0, 9)}"

    def clause() -> str:
        return " and ".join(atom() for _ in range(rng.choice([1, 3, 8, 9, 17, 28])))

    subs = {
        k: clause() if k % 4 else f"({clause()}) or ({clause()}) or ({clause()})"
        for k in range(200)
    }
    edges = [-(1 << 63), (1 << 63) - 1, 0, 5, 9, -1]
    events = [
        {
            **{
                f"a{k}": rng.choice(edges) if rng.random() < 0.05 else rng.randint(0, 9)
                for k in range(28)
                if rng.random() < 0.9
            },
            **({"s": rng.choice([*words, "other"])} if rng.random() < 0.8 else {}),
        }
        for _ in range(600)
    ]
    settings = {"max_cap": 4, "min_size": 2}
    with Index.open(tmp_path, schema=schema_json, settings=settings) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.flat.after = 0
        idx.match(events[0])
        assert idx.engine.flat.describe()["held"]
        for size in (1, 64, 65, 128, 129, 600):
            want = _brutes(subs, schema, events[:size])
            _same(_lists_and_arrays(idx, events[:size]), want)
        for k in range(0, 200, 7):
            idx.unsubscribe(k)
            del subs[k]
        idx.check()
        _same(idx.match_many(events), _brutes(subs, schema, events))
    with Index.open(tmp_path) as idx:
        idx.engine.flat.after = 0
        want = _brutes(subs, schema, events[:300])
        _same(idx.match_many(events[:300]), want)  # (the pages walked: the view then held)
        _same(_lists_and_arrays(idx, events[:300]), want)


def _brutes(subs: dict[Any, str], schema: Schema, events: list[Any]) -> list[set[Any] | None]:
    return [brute(subs, schema, ev) for ev in events]


def _lists_and_arrays(store: Any, events: list[Any]) -> list[Any]:
    """``match_many`` of ``events``, checked against ``match_many_arrays``: in one order
    from :data:`LEAST` events (a batch), as sets under it (matched one by one: once the
    clauses' key atoms are learnt, an event's ids can come in another order, as before
    these changes)."""
    lists = store.match_many(events)
    arrays = store.match_many_arrays(events)
    if len(events) >= flatbatch.LEAST:
        assert [ids.tolist() for ids in arrays] == lists
    else:
        assert [set(ids.tolist()) for ids in arrays] == [set(ids) for ids in lists]
    return lists
