"""One event's atom truths by slot on a keyed view (:mod:`betree.packed.slots`: each
PB+tree list's atoms numbered consecutively, its held prefix or suffix set as one slice)
against phase 1 by atom id on every atom, and the answers against the brute force: rich
rules python-loaded, through deletes and additions (the delta's older atoms read by
slot), reopened, in small batches, sharded; and stores whose lists share atoms or hold
one twice (``i < 3 or i > 9``, ``i < 3 or i < 9``) and the edge literals."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.matching.pages import phase1
from betree.packed import flat, flatbatch
from betree.packed import slots as slots_module
from betree.packed.flat import LEARN
from betree.packed.joined import Joined
from betree.packed.slots import KeyedRuns, Slots
from betree.stores.sharded import HASH, ShardedIndex, shard_name, shard_of, write_manifest
from pbtree import view as pbtree_view
from pbtree.view import RUNS_DICT, Runs, SearchView
from storage.codec import encode_id
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, edge_atoms, edge_events
from tests.support.loads import python_loaded
from tests.support.workload import SCHEMA, WORDS, event, expression
from tools.bench import gen_rich


def _settle(idx: Index, events: list[Any]) -> None:
    """The view built, its keys learnt, tried and settled, its slots made."""
    idx.engine.flat.after = 0
    idx.engine.ranging.margin = 0  # the tree, never intervals
    for ev in (events * (1 + 4 * LEARN // len(events)))[: 4 * LEARN]:
        idx.match(ev)
    with idx.store.read() as txn:
        held = idx.engine.flat.held(txn.gen)
    assert held is not None and held.view.slots is not None


def _same_truths(idx: Index, events: list[Any]) -> int:
    """Every event's truths by slot equal phase 1's by atom id, on every atom; the
    lists' slices counted whose atoms were placed by an earlier list or twice."""
    engine = idx.engine
    with idx.store.read() as txn:
        based = engine.flat.held(txn.gen)
        assert based is not None
        view, slots = based.view, based.view.slots
        assert slots is not None and view.by_key is not None
        assert sorted(slots.slot.tolist()) == list(range(based.atoms))  # a permutation
        apart = Slots(
            view.searches, based.atoms, view.by_key, {}, view.rows, view.row_at
        )  # (defaults not in runs)
        schema = engine.schema_in(txn)
        for ev in events:
            values = schema.validate_event(ev)
            want, _, _ = phase1(
                txn, view.searches, based.grouped, based.atoms, engine.types, values, True, False
            )
            for each in (slots, apart):
                got = each.truths(view.searches, based.grouped, engine.types, values)
                assert np.array_equal(got.take(each.slot), want), ev
    return sum(len(part[2]) for parts in slots.lists.values() for part in parts)


def _sweep(idx: Any, subs: dict[Any, str], schema: Schema, events: list[Any]) -> int:
    """Every event matched one by one, then in small batches (one by one inside),
    against the brute force; the matches found."""
    total = 0
    wants = []
    for ev in events:
        want = brute(subs, schema, ev)
        assert set(idx.match(ev)) == want, ev
        wants.append(want)
        total += len(want)
    step = max(1, flatbatch.LEAST - 1)
    for k in range(0, len(events), step):
        got = idx.match_many(events[k : k + step])
        assert [set(ids) for ids in got] == wants[k : k + step]
    return total


@pytest.fixture(scope="module")
def rich() -> tuple[dict[str, Any], dict[Any, str], list[Any]]:
    schema_doc, subs_list, events, _ = gen_rich.make(
        600, 120, check=False, seed=61, target_rate=0.01
    )
    return schema_doc, dict(subs_list), events


def test_rich_truths_by_slot_and_answers(
    tmp_path: Path, rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    python_loaded(tmp_path / "py", subs, schema_doc)
    with Index.open(tmp_path / "py") as idx:
        _settle(idx, events)
        assert _same_truths(idx, events) > 0  # (ranges of ip blocks share atoms)
        assert _sweep(idx, subs, schema, events) > 100
        items = list(subs.items())
        for ident, _ in items[::3]:  # deletes, then additions: the view's delta
            assert idx.unsubscribe(ident)
            del subs[ident]
        # additions of the base's atoms (copies) and of a few new ones, under the fold
        added = {f"c{k}": e for k, e in items[1::3][:40]}
        fresh = gen_rich.make(15, 1, check=False, seed=62, target_rate=0.01)[1]
        added.update({f"n{k}": e for k, e in fresh})
        idx.subscribe_many(added.items())
        subs.update(added)
        idx.check()
        assert _sweep(idx, subs, schema, events[:40]) > 10  # (before the delta lingers)
        with idx.store.read() as txn:
            held = idx.engine.flat.held(txn.gen)
        assert held is not None and held.delta.clauses and held.view.slots is not None
        assert _sweep(idx, subs, schema, events) > 100
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        _settle(idx, events)
        _same_truths(idx, events)
        _sweep(idx, subs, schema, events)


def test_rich_sharded_against_the_brute_force(
    tmp_path: Path, rich: tuple[dict[str, Any], dict[Any, str], list[Any]]
) -> None:
    """Sharded: each shard matched on its own keyed view (slots), then the views joined."""
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    shards = 2
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), shards)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(tmp_path / shard_name(k), schema=schema_doc) as idx:
            idx.subscribe_many(part)
            _settle(idx, events)
            _same_truths(idx, events)
            _sweep(idx, dict(part), schema, events)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(tmp_path, entries, {"by": "id", "hash": HASH, "shards": shards})
    with ShardedIndex.open(tmp_path) as store:
        for index in store.indexes:
            index.engine.flat.after = 0
            index.engine.ranging.margin = 0
        assert _sweep(store, subs, schema, events) > 100


def test_shared_and_repeated_atoms_and_edges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every comparison type, disjunctions of one attribute (an atom in GT and LT, or
    twice in one list), absent attributes and the edge literals, keys kept whatever
    share held, through deletes."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    rng = random.Random(63)
    subs: dict[Any, str] = {k: expression(rng) for k in range(400)}
    for k in range(150):
        a, b = sorted(rng.sample(range(-3, 24), 2))
        x, y = sorted(rng.sample(range(-100, 100), 2))
        forms = [f"i < {a} or i > {b}", f"i < {a} or i < {b}", f"i >= {a} or i >= {b}"]
        forms += [f"j < {x} or j > {y}", f"f <= {x / 20} or f > {y / 20}"]
        subs[f"o{k}"] = rng.choice(forms)
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        idx.subscribe_many(subs.items())
        for k in rng.sample(range(400), 60):
            idx.unsubscribe(k)
            del subs[k]
        events = [event(rng) for _ in range(200)]
        _settle(idx, events)
        assert _same_truths(idx, events) > 0
        assert _sweep(idx, subs, Schema.from_json(SCHEMA), events) > 50
    atoms = edge_atoms()
    edged = {f"e{k}": f"{rng.choice(atoms)} and {rng.choice(atoms)}" for k in range(300)}
    with Index.open(tmp_path / "edge", schema=EDGE_SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(edged.items())
        evs = edge_events()
        _settle(idx, evs)
        _same_truths(idx, evs)
        _sweep(idx, edged, Schema.from_json(EDGE_SCHEMA), evs)


def test_lists_of_one_two_or_no_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trees whose GT, LT or NE list holds one or two atoms and whose other lists are
    empty (``i`` compared only by ``!=``, ``j`` by one ``>``, ``f`` by one ``<=`` and
    two ``>``, ``s`` by one ``!=`` and one ``<``): no list's cut skipped but the empty
    ones', against phase 1 and the brute force, through deletes (lists emptied or left
    with one item) and reopening."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    rng = random.Random(65)
    forms = ["i != 4", "i != 9", "j > 3", "f <= 1", "f >= 2", "f > 3", '"ab" != s', 's < "b"']
    subs: dict[Any, str] = {}
    for k in range(160):
        picked = rng.sample(forms, rng.randint(1, 2))
        subs[k] = " and ".join(picked) if rng.random() < 0.8 else " or ".join(picked)
    subs |= {f"x{k}": "i != 4 and j > 3" for k in range(20)}
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(subs.items())
        events = [event(rng) for _ in range(150)]
        events += [{"i": 4, "j": 3, "f": 1.0, "s": "ab"}, {"i": 9, "j": 12, "f": -5, "s": "a"}]
        _settle(idx, events)
        _same_truths(idx, events)
        assert _sweep(idx, subs, Schema.from_json(SCHEMA), events) > 100
        for k in [k for k, e in subs.items() if "i != 9" in e or "f <=" in e or "f >" in e]:
            assert idx.unsubscribe(k)
            del subs[k]
        idx.check()
        assert _sweep(idx, subs, Schema.from_json(SCHEMA), events) > 50
    with Index.open(tmp_path, readonly=True) as idx:  # reopened: lists of one item
        _settle(idx, events)
        _same_truths(idx, events)
        _sweep(idx, subs, Schema.from_json(SCHEMA), events)


def test_lists_holding_an_atom_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tree's view merged with itself (every id twice in its lists, as shards' views
    of one atom would be) and with a shifted copy: the truths by slot of every value
    equal the searches' own runs set by atom id."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    rng = random.Random(64)
    subs = {k: expression(rng) for k in range(300)}
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(subs.items())
        events = [event(rng) for _ in range(120)]
        _settle(idx, events)
        with idx.store.read() as txn:
            based = idx.engine.flat.held(txn.gen)
            assert based is not None
            schema = idx.engine.schema_in(txn)
            values = [schema.validate_event(ev) for ev in events]
        atoms = based.atoms
        none = np.zeros(0, dtype=np.intp)
        for bases in ([0, 0], [0, atoms]):
            searches = {
                name: SearchView.merged([s, s], bases) for name, s in based.view.searches.items()
            }
            rows, row_at = based.view.rows[:0], based.view.row_at[:1]
            slots = Slots(searches, 2 * atoms, (none, none, none, none), {}, rows, row_at)
            assert sorted(slots.slot.tolist()) == list(range(2 * atoms))
            before = sum(len(part[2]) for parts in slots.lists.values() for part in parts)
            items = sum(len(p.ids) for s in searches.values() for p in (s.gt, s.lt, s.ne))
            assert before >= items // 2 if bases == [0, 0] else before < items // 2
            for v in values:
                want = np.zeros(2 * atoms, dtype=bool)
                want[0] = True
                for attr, value in v.items():
                    if attr in searches and idx.engine.types[attr] in ("int", "float", "string"):
                        for run in searches[attr].collect(value):
                            want[run.astype(np.intp)] = True
                got = slots.searched(searches, idx.engine.types, v)
                assert np.array_equal(got.take(slots.slot), want), v


@pytest.mark.parametrize("runs_most", [RUNS_DICT, 3])
def test_equal_runs_by_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs_most: int
) -> None:
    """The leaf runs equal to an event's value set by slot (``Slots.equal``), kept by key
    as a dict and, past ``RUNS_DICT`` int keys, as :class:`pbtree.view.Runs`: truths
    against phase 1 on every atom, answers against the brute force, through deletes and
    reopening."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    monkeypatch.setattr(pbtree_view, "RUNS_DICT", runs_most)
    rng = random.Random(66)
    forms = [
        lambda: f"j = {rng.randint(-2, 22)}",
        lambda: f"i in ({rng.randint(0, 20)}, {rng.randint(0, 20)})",
        lambda: f"f = {rng.choice(['-2.5', '0', '2', '2.5', '-5'])}",
        lambda: f"s = {_quoted(rng.choice(WORDS))}",
        lambda: f"j != {rng.randint(-2, 22)}",
        lambda: "j > 3",
        lambda: "f <= 1",
    ]
    subs: dict[Any, str] = {}
    for k in range(260):
        picked = [form() for form in rng.sample(forms, rng.randint(1, 3))]
        subs[k] = " and ".join(picked) if rng.random() < 0.8 else " or ".join(picked)
    events = [event(rng) for _ in range(150)]
    events += [{"j": 2, "f": 2.0, "i": 20, "s": ""}, {"j": 22, "f": -5, "s": "\u00e9t\u00e9"}]
    with Index.open(tmp_path, schema=SCHEMA, settings={"max_cap": 3}) as idx:
        idx.subscribe_many(subs.items())
        _settle(idx, events)
        with idx.store.read() as txn:
            based = idx.engine.flat.held(txn.gen)
            assert based is not None and based.view.slots is not None
            equal = based.view.slots.equal
        kinds = {name: type(runs) for name, runs in equal.items()}
        assert (kinds["j"] is Runs) == (runs_most == 3) and kinds["s"] is KeyedRuns
        _same_truths(idx, events)
        assert _sweep(idx, subs, Schema.from_json(SCHEMA), events) > 100
        for k in [k for k in subs if k % 3 == 0]:
            assert idx.unsubscribe(k)
            del subs[k]
        idx.check()
        _settle(idx, events)
        _same_truths(idx, events)
        assert _sweep(idx, subs, Schema.from_json(SCHEMA), events) > 50
    with Index.open(tmp_path, readonly=True) as idx:
        _settle(idx, events)
        _same_truths(idx, events)
        _sweep(idx, subs, Schema.from_json(SCHEMA), events)


def test_keyed_runs_get_as_indexing() -> None:
    """``KeyedRuns.get`` (its own, not ``Mapping.get``'s) answers as indexing does: a
    key's run (an equal float key too, an empty run as it is), else the default."""
    runs = KeyedRuns({"a": 0, 2: 1, "": 2}, np.array([0, 2, 2, 5]), np.arange(5, dtype=np.int32))
    for key in ("a", 2, 2.0, ""):
        assert np.array_equal(runs.get(key), runs[key])
    assert runs.get(2).tolist() == [] and runs.get("").tolist() == [2, 3, 4]
    assert runs.get("b") is None and runs.get("b", 7) == 7 and runs.get(3) is None


def _quoted(word: str) -> str:
    return json.dumps(word)


def test_sharded_events_matched_by_slot(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rich: tuple[dict[str, Any], dict[Any, str], list[Any]],
) -> None:
    """A sharded store's events, once every shard's keys are settled, matched shard by
    shard by slot (``Joined.match_slotted``, the route asserted taken): answers against
    the brute force, one by one and in small batches, before and after writes (each
    shard's delta: additions and deletions), and reopened."""
    monkeypatch.setattr(flat, "KEYED_PASS", 2.0)
    taken = [0, 0]  # (events by slot, events not)
    plain = Joined.match_slotted

    def counted(self: Joined, *args: Any) -> Any:
        got = plain(self, *args)
        taken[got is None] += 1
        return got

    monkeypatch.setattr(Joined, "match_slotted", counted)
    schema_doc, subs, events = rich
    schema = Schema.from_json(schema_doc)
    items = list(subs.items())
    first, later = dict(items[:450]), dict(items[450:])
    shards = 2
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, expr in first.items():
        parts[shard_of(encode_id(ident), shards)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(tmp_path / shard_name(k), schema=schema_doc) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(tmp_path, entries, {"by": "id", "hash": HASH, "shards": shards})

    def settled(store: ShardedIndex) -> None:
        for index in store.indexes:
            index.engine.flat.after = 0
            index.engine.ranging.margin = 0  # the tree, never intervals
        for ev in (events * (1 + 4 * LEARN // len(events)))[: 4 * LEARN]:
            store.match(ev)
        taken[:] = [0, 0]

    with ShardedIndex.open(tmp_path, readonly=False) as store:
        settled(store)
        assert _sweep(store, first, schema, events) > 50
        assert taken[0] >= len(events) and not taken[1], taken
        store.subscribe_many(later.items())
        gone = [ident for k, ident in enumerate(first) if k % 4 == 0]
        for ident in gone:
            assert store.unsubscribe(ident)
        now = {**first, **later}
        for ident in gone:
            del now[ident]
        taken[:] = [0, 0]
        assert _sweep(store, now, schema, events) > 50
        assert taken[0] >= len(events) and not taken[1], taken
        for index in store.indexes:
            index.check()
    with ShardedIndex.open(tmp_path) as store:
        settled(store)
        assert _sweep(store, now, schema, events) > 50
        assert taken[0] >= len(events) and not taken[1], taken


def _moved(events: list[Any]) -> list[Any]:
    """Each event, then copies with only ``now`` or only the longitude moved: a direct
    group's answer for one value on another event's other attributes (the segment and
    cap tests read ``now``, the geo ones the longitude)."""
    out = []
    for ev in events:
        out.append(ev)
        if "now" in ev:
            out += [{**ev, "now": ev["now"] + 86_400 * 40}, {**ev, "now": ev["now"] - 3_600}]
        if "longitude" in ev:
            out.append({**ev, "longitude": -ev["longitude"]})
            out.append({**ev, "longitude": ev["longitude"] + 0.05})
    return out


@pytest.mark.parametrize(("memo_ids", "memo_most"), [(0, 1024), (1 << 18, 1024), (900, 3)])
def test_direct_memo_against_phase1_and_the_brute_force(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rich: tuple[dict[str, Any], dict[Any, str], list[Any]],
    memo_ids: int,
    memo_most: int,
) -> None:
    """The direct groups' answers kept by value (:class:`betree.packed.slots.Memo`): off,
    on, and bounded so tight it empties every few values (some answers too big to keep):
    every event's truths equal phase 1's, its answers the brute force's, events asked
    twice, with ``now`` or the longitude alone changed, through deletes and a reopen."""
    monkeypatch.setattr(slots_module, "MEMO_IDS", memo_ids)
    monkeypatch.setattr(slots_module, "MEMO_MOST", memo_most)
    schema_doc, subs, events = rich
    subs = dict(subs)
    schema = Schema.from_json(schema_doc)
    events = _moved(events[:50])
    python_loaded(tmp_path / "py", subs, schema_doc)
    with Index.open(tmp_path / "py") as idx:
        _settle(idx, events)
        for _ in range(2):  # (the second time, from the memos where on)
            _same_truths(idx, events)
            assert _sweep(idx, subs, schema, events) > 100
        with idx.store.read() as txn:
            held = idx.engine.flat.held(txn.gen)
        assert held is not None and held.view.slots is not None
        memos = [d[6] for d in held.view.slots.direct if d[6] is not None]
        reads = {d[0]: d[1].reads for d in held.view.slots.direct}
        assert reads["latitude"] == ("longitude",) and reads["user.interests"] == ()
        assert reads["segments_with_timestamp"] == reads["frequency_caps"] == ("now",)
        kept = [len(memo.answers) for memo in memos]
        assert len(kept) >= 5
        if memo_ids == 0:
            assert sum(kept) == 0
        else:
            assert max(kept) <= memo_most and sum(kept) > 0
            assert all(m.ids <= memo_ids for m in memos)
        for ident in list(subs)[::4]:
            assert idx.unsubscribe(ident)
            del subs[ident]
        assert _sweep(idx, subs, schema, events) > 50
    with Index.open(tmp_path / "py", readonly=True) as idx:  # reopened: a new view
        _settle(idx, events)
        _same_truths(idx, events)
        _sweep(idx, subs, schema, events)


def test_direct_memo_sits_out_values_that_do_not_repeat(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rich: tuple[dict[str, Any], dict[Any, str], list[Any]],
) -> None:
    """A memo whose keys stop repeating (the same events asked again, ``now`` a new
    second each time: the segment and cap groups' keys) finds none kept over a window and
    is left idle, its answers let go; the list groups' (values repeating) stay kept;
    every event's truths as phase 1's, its answers the brute force's."""
    schema_doc, subs, events = rich
    python_loaded(tmp_path / "py", dict(subs), schema_doc)
    with Index.open(tmp_path / "py") as idx:
        _settle(idx, events[:16])
        monkeypatch.setattr(slots_module, "MEMO_WINDOW", 16)
        monkeypatch.setattr(slots_module, "MEMO_REST", 10**6)
        asked = [
            {**ev, "now": ev["now"] + 1_000 * r + k} if "now" in ev else ev
            for r in range(4)
            for k, ev in enumerate(events[:16])
        ]
        _same_truths(idx, asked)
        with idx.store.read() as txn:
            held = idx.engine.flat.held(txn.gen)
        assert held is not None and held.view.slots is not None
        memos = {d[0]: d[6] for d in held.view.slots.direct if d[6] is not None}
        for name in ("segments_with_timestamp", "frequency_caps"):
            assert memos[name].rest > 0 and not memos[name].answers
        assert memos["user.interests"].rest == 0 and memos["user.interests"].answers
        assert _sweep(idx, dict(subs), Schema.from_json(schema_doc), asked + events) > 100
