"""Placing clauses: a stored clause's places from its atom ids (``Writer.stored_places``,
what placement and clustering use) against ``Engine.places`` of the compiled clause, and
batches deferred to the pending area (betree.disk.pending) then placed, against the
brute-force evaluator, over every operator, the ends of every domain and deletes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk import catalog, pending
from betree.disk.nodes import CNode
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from storage import codec
from storage.errors import InvalidInput
from tests.support import edges
from tests.support.brute import brute
from tests.support.workload import SCHEMA, build_hashed, event, expression


@pytest.fixture(autouse=True)
def _every_batch_deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch's clauses wait in the pending area, however small the batch or store,
    until the test places them (or the area outgrows the store)."""
    monkeypatch.setattr(pending, "DEFER_FROM", 1)
    monkeypatch.setattr(pending, "DEFER_STORE", 0)
    monkeypatch.setattr(pending, "PLACE_CLAUSES", 1 << 60)
    monkeypatch.setattr(pending, "PLACE_SHARE", 1.0)


def valid(idx: Index, texts: list[str]) -> dict[int, str]:
    """``texts`` by id, less those the schema refuses."""
    out = {}
    for k, text in enumerate(texts):
        try:
            idx.engine.compiler().compile(k, text)
        except InvalidInput:
            continue
        out[k] = text
    return out


def same_stored_places(idx: Index, subs: dict[Any, str]) -> int:
    """In one write transaction, each stored clause's places from its atom ids against its
    compiled clause's; returns the clauses compared."""
    seen = 0
    with idx.store.write() as txn, idx.engine.writer(txn) as writer:
        for ident, text in subs.items():
            sid_key = catalog.subscription_key(txn, ident)
            assert sid_key is not None
            _, _, atom_ids = catalog.subscription_record(txn, ident, sid_key)
            sid = codec.decode_u64(sid_key)
            clauses = idx.engine.compiler().compile(ident, text)
            assert len(clauses) == len(atom_ids)
            for k, (clause, ids) in enumerate(zip(clauses, atom_ids, strict=True)):
                entry = (catalog.clause_id(sid, k), ident, ids)
                assert writer.stored_places(entry) == idx.engine.places(clause), text
                seen += 1
    return seen


@pytest.mark.parametrize("workload", ["random", "edges"])
def test_stored_places_equal_the_compiled_clauses(tmp_path: Path, workload: str) -> None:
    """Places from atom ids equal the compiler's: the atoms' requirements first read (a
    fresh process's memo: an order atom's from its stored entries), then kept (a second
    transaction: the memo's packed places), and for atoms new to the
    transaction (subscribed inside it, not yet committed)."""
    rng = random.Random(21)
    if workload == "random":
        schema: dict[str, Any] = SCHEMA
        texts = [expression(rng) for _ in range(1200)]
    else:
        schema = edges.EDGE_SCHEMA
        atoms = edges.edge_atoms()
        texts = atoms + [f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(1500)]
    with Index.open(tmp_path / "s", schema=schema) as idx:
        subs = valid(idx, texts)
        half = dict(list(subs.items())[: len(subs) // 2])
        idx.subscribe_many(list(half.items()))
    with Index.open(tmp_path / "s") as idx:  # (a fresh memo)
        assert same_stored_places(idx, half) > 600
        assert same_stored_places(idx, half) > 600  # (the memo's requirements)
        rest = {k: v for k, v in subs.items() if k not in half}
        with idx.store.write() as txn, idx.engine.writer(txn) as writer:
            for ident, text in rest.items():
                clauses = idx.engine.compiler().compile(ident, text)
                writer.insert(ident, text, clauses, None)
            for ident, text in rest.items():
                sid_key = catalog.subscription_key(txn, ident)
                assert sid_key is not None
                _, _, atom_ids = catalog.subscription_record(txn, ident, sid_key)
                sid = codec.decode_u64(sid_key)
                clauses = idx.engine.compiler().compile(ident, text)
                for k, (clause, ids) in enumerate(zip(clauses, atom_ids, strict=True)):
                    entry = (catalog.clause_id(sid, k), ident, ids)
                    assert writer.stored_places(entry) == idx.engine.places(clause), text
        idx.check()


@pytest.mark.parametrize("workload", ["random", "edges"])
def test_placed_batches_against_brute_force(tmp_path: Path, workload: str) -> None:
    """Batches wait in the pending area and are placed (routing, l-node appends, splits)
    among deletes and reopenings; ``check()`` after each step, answers equal to the brute
    force's, with clauses pending and once placed."""
    rng = random.Random(8)
    if workload == "random":
        schema: dict[str, Any] = SCHEMA
        texts = [expression(rng) for _ in range(2400)]
        evs = [event(rng) for _ in range(40)]
    else:
        schema = edges.EDGE_SCHEMA
        atoms = edges.edge_atoms()
        texts = atoms + [f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(2400)]
        evs = edges.edge_events()[:60]
    sch = Schema.from_json(schema)
    store = tmp_path / "s"
    held: dict[int, str] = {}
    placed = pending_seen = 0
    with Index.open(store, schema=schema) as idx:
        todo = list(valid(idx, texts).items())
    rng.shuffle(todo)
    for step in range(8):
        with Index.open(store) as idx:
            for _ in range(3):
                batch, todo = todo[:150], todo[150:]
                idx.subscribe_many(batch)
                held.update(batch)
                for ident in rng.sample(sorted(held), 20):
                    assert idx.unsubscribe(ident)
                    del held[ident]
                idx.check()
                with idx.store.read() as txn:
                    pending_seen += catalog.root_record(txn).get("pending_from") is not None
                if rng.random() < 0.5:
                    placed += idx.engine.place()
                    idx.check()
                for ev in rng.sample(evs, 6):
                    assert set(idx.match(ev)) == brute(held, sch, ev), (step, ev)
    assert placed > 1000 and pending_seen > 10, (placed, pending_seen)


def _grouped(idx: Index) -> int:
    """Of the root's clauses in the view ``idx`` holds for its snapshot, how many it matches
    in groups below the root (:func:`betree.disk.pending.groups`); 0 with no view."""
    with idx.store.read() as txn:
        based = idx.engine.flat.held(txn.gen)
        rec = catalog.root_record(txn)
        root = txn.load(rec["space"], rec["root"], CNode)
    if based is None or based.view.ranged is not None or based.delta.added:
        return 0
    return int(root.size) - int(based.view.clause_at[1])


@pytest.mark.parametrize("shards", [0, 2])
def test_pending_groups_in_views_against_brute_force(tmp_path: Path, shards: int) -> None:
    """Packed views built over a pending area (its clauses matched in groups below the
    root) answer as the brute force, under random interleavings of deferred batches,
    placement, subscribe, replace, unsubscribe, match, match_many and reopening; plain
    and sharded (each shard's view, then the shards' joined)."""
    rng = random.Random(41 + shards)
    texts = [expression(rng) for _ in range(3000)]
    sch = Schema.from_json(SCHEMA)
    with Index.open(tmp_path / "v", schema=SCHEMA) as idx:
        todo = list(valid(idx, texts).items())
    held: dict[Any, str] = {}
    if shards:
        first, todo = todo[:200], todo[200:]
        held.update(first)
        store: Any = Path(build_hashed(tmp_path / "sh", dict(first), shards))
    else:
        store = tmp_path / "s"
    grouped = placed = 0
    for step in range(10):
        opened: Any = (
            open_index(store, readonly=False) if shards else Index.open(store, schema=SCHEMA)
        )
        with opened as idx:
            parts = idx.indexes if shards else [idx]
            for part in parts:
                part.engine.flat.after = 0  # (a view from the first match)
            for _ in range(6):
                r = rng.random()
                if r < 0.35:
                    batch, todo = todo[:120], todo[120:]
                    idx.subscribe_many(batch)
                    held.update(batch)
                elif r < 0.5 and held:
                    ident = rng.choice(sorted(held, key=str))
                    if rng.random() < 0.5:
                        assert idx.unsubscribe(ident)
                        del held[ident]
                    else:  # a replacement
                        (_, text), todo = todo[0], todo[1:]
                        idx.subscribe(ident, text)
                        held[ident] = text
                elif r < 0.6:
                    placed += sum(part.engine.place() for part in parts)
                elif r < 0.8:
                    evs = [event(rng) for _ in range(12)]
                    for ev, got in zip(evs, idx.match_many(evs), strict=True):
                        assert set(got) == brute(held, sch, ev), (step, ev)
                else:
                    for _ in range(6):
                        ev = event(rng)
                        assert set(idx.match(ev)) == brute(held, sch, ev), (step, ev)
                    grouped += sum(_grouped(part) for part in parts)
            idx.check()
    assert grouped > 500 and placed > 500, (grouped, placed)


class _Abort(Exception):
    pass


def _routes(idx: Index, places: list[Any], feedback: dict[str, float], together: bool) -> Any:
    """In a transaction then aborted: where each clause goes and every c-node's scores
    after, routed one by one (``BETree._route``) or node by node (``_route_together``)."""
    seen: dict[str, Any] = {}
    with pytest.raises(_Abort), idx.store.write() as txn, idx.engine.writer(txn) as w:
        tree = w.tree
        tree._feedback = feedback
        if together:
            assert tree._route_together([]) == []  # (a placement of nothing: no group)
            went = {}
            for page, at, used in tree._route_together(places):
                assert at == sorted(at)
                went.update({k: (page, used) for k in at})
            seen["went"] = [went[k] for k in range(len(places))]
        else:
            seen["went"] = [tree._route(tree.root, p, set(), +1) for p in places]
        seen["scores"] = {node.page: list(node.pdir) for node, _, _ in tree.walk()}
        raise _Abort
    return seen


@pytest.mark.parametrize("seed", [3, 4])
def test_routing_node_by_node_is_routing_one_by_one(tmp_path: Path, seed: int) -> None:
    """Placement routes a batch node by node (``BETree._route_together``): every clause
    goes where routing it alone after the earlier ones would, and every p-node's score
    is the same after (with self-adjustment's feedback weighing the scores and without:
    ties, floats), over a tree of small nodes several levels deep."""
    rng = random.Random(seed)
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        subs = valid(idx, [expression(rng) for _ in range(900)])
        items = list(subs.items())
        for start in range(0, 600, 100):
            idx.subscribe_many(items[start : start + 100])
            idx.engine.place()
        idx.check()
        clauses = [c for k, text in items[600:] for c in idx.engine.compiler().compile(k, text)]
        places = [idx.engine.places(c) for c in clauses]
        attrs = sorted({a for p in places for a in p})
        for feedback in ({}, {a: rng.choice([0.0, 0.25, 0.5, 0.9]) for a in attrs}):
            one = _routes(idx, places, feedback, together=False)
            assert _routes(idx, places, feedback, together=True) == one
            assert len({page for page, _ in one["went"]}) > 5  # (several c-nodes reached)
            assert any(used for _, used in one["went"])
