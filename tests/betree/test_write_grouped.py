"""``subscribe_many``'s batched write path (:meth:`betree.disk.writer.Writer.insert_many`):
the batch's atom records read first in key order, home records written once at the end,
and the clauses put into the BE-Tree together, grouped by l-node (:meth:`BETree.insert_many`).

What must hold: every record the format defines (subscriptions, ids, atoms and their ids
and use counts, direct lists, metadata, the change log's entry, the root record's
counters) is the very bytes one ``insert`` at a time in the same transaction writes; only
where the splits fall may differ.  And ``check()`` is clean after every batch, matches
agree with the brute force (every operator, edge values, the rich workload), and after
reopening.  An aborted batch leaves the last commit.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from betree.disk import catalog
from betree.index import Index
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, EVENTS, edge_atoms
from tests.support.workload import SCHEMA, event, expression
from tools.bench import gen_rich

#: the record namespaces whose contents one insert at a time defines
DEFINED = [catalog.SUB, catalog.EXT, catalog.ATOM, catalog.AID, catalog.DIRECT, catalog.META]
COUNTERS = ["next_sid", "next_atom", "subs", "attributes"]


def _batch(rng: random.Random, pool: list[str], ids: int, size: int) -> list[tuple[Any, ...]]:
    """Ids that repeat (replaced within the batch), shared and fresh expressions, and
    metadata on some."""
    out: list[tuple[Any, ...]] = []
    for _ in range(size):
        ident: Any = rng.choice([rng.randrange(ids), f"s{rng.randrange(ids)}"])
        expr = rng.choice(pool) if rng.random() < 0.6 else expression(rng)
        if rng.random() < 0.2:
            out.append((ident, expr, {"n": rng.randrange(5)}))
        else:
            out.append((ident, expr))
    return out


def _write(idx: Index, items: list[tuple[Any, ...]], grouped: bool) -> list[bool]:
    """One transaction: ``insert_many``, or one ``insert`` an item (what one at a time writes)."""
    compiled = [
        (i[0], i[1], idx.engine.compiler().compile(i[0], i[1]), None if len(i) < 3 else _meta(i[2]))
        for i in items
    ]
    with idx.store.write() as txn, idx.engine.writer(txn) as w:
        if grouped:
            return w.insert_many(compiled)
        return [w.insert(*item) for item in compiled]


def _meta(doc: dict[str, Any]) -> str:
    from betree.disk.metadata import meta_text

    return meta_text(doc)


def _records(idx: Index) -> dict[str, Any]:
    with idx.store.read() as txn:
        rec = catalog.root_record(txn)
        out: dict[str, Any] = {ns.decode(): list(txn.scan(ns)) for ns in DEFINED}
        out["log"] = list(txn.scan(b"log"))
        out["root"] = {k: rec.get(k) for k in COUNTERS}
    return out


def _agrees(idx: Index, subs: dict[Any, str], schema: Schema, rng: random.Random) -> None:
    idx.check()
    assert len(idx) == len(subs)
    for _ in range(6):
        ev = event(rng)
        got = idx.match(ev)
        assert len(got) == len(set(got))
        assert set(got) == brute(subs, schema, ev), ev


@pytest.mark.parametrize(("seed", "settings"), [(1, {"max_cap": 3, "min_size": 2}), (2, {})])
def test_grouped_batches_write_what_one_at_a_time_writes(
    tmp_path: Path, seed: int, settings: dict[str, int]
) -> None:
    """Two stores given the same batches, one grouped and one an insert at a time: the
    same defined records after every batch (atoms dropped and used again in a batch get
    the same fresh ids), both checked, both agreeing with the brute force."""
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    pool = [expression(rng) for _ in range(20)]
    subs: dict[Any, str] = {}
    paths = [tmp_path / "grouped", tmp_path / "single"]
    for _reopened in range(2):  # the second reopens both
        stores = [Index.open(p, schema=SCHEMA, settings=settings) for p in paths]
        try:
            for _ in range(12):
                if subs and rng.random() < 0.25:
                    gone = rng.sample(sorted(subs, key=repr), k=min(len(subs), rng.randint(1, 15)))
                    for idx in stores:
                        assert idx.unsubscribe_many(gone) == [True] * len(gone)
                    for ident in gone:
                        del subs[ident]
                else:
                    items = _batch(rng, pool, 40, rng.randint(1, 80))
                    expected = []
                    for item in items:
                        expected.append(item[0] not in subs)
                        subs[item[0]] = item[1]
                    assert _write(stores[0], items, True) == expected
                    assert _write(stores[1], items, False) == expected
                assert _records(stores[0]) == _records(stores[1])
                for idx in stores:
                    _agrees(idx, subs, schema, rng)
        finally:
            for idx in stores:
                idx.close()
    with Index.open(paths[0], readonly=True) as idx:
        _agrees(idx, subs, schema, rng)


def test_a_batch_that_replaces_its_own_after_its_clauses_wait(tmp_path: Path) -> None:
    """An id inserted and replaced (twice) in one batch, whose clauses wait for the end
    of the batch: the replacement puts them into the tree first, then removes them; the
    atom the first version alone used is dropped, the one the last version brings back
    gets a fresh id."""
    schema = Schema.from_json(SCHEMA)
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 2, "min_size": 2}) as idx:
        first = [(k, f"i = {k % 5} and j > {k}") for k in range(30)]
        assert idx.subscribe_many([*first, (3, "j = 777"), (3, "s = 'x'"), (40, "j = 777")]) == [
            True
        ] * 30 + [False, False, True]
        subs = dict(first) | {3: "s = 'x'", 40: "j = 777"}
        idx.check()
        for ev in [{"i": 3, "j": 99}, {"j": 777}, {"s": "x"}, {"i": 0, "j": 1}, {}]:
            assert set(idx.match(ev)) == brute(subs, schema, ev)


def test_every_operator_and_edge_value_in_batches(tmp_path: Path) -> None:
    """Every edge atom (ends of the int, float and string domains, every operator) in
    batches of mixed size, some replaced by others in the batch; brute force on the edge
    events after each batch and after reopening."""
    rng = random.Random(5)
    schema = Schema.from_json(EDGE_SCHEMA)
    atoms = edge_atoms()
    exprs = atoms + [f"({a}) and ({b})" for a, b in zip(atoms, reversed(atoms), strict=False)]
    subs: dict[Any, str] = {}
    path = tmp_path / "edges"
    with Index.open(path, schema=EDGE_SCHEMA, settings={"max_cap": 4, "min_size": 2}) as idx:
        at = 0
        while at < len(exprs):
            size = rng.randint(1, 120)
            items = [(rng.randrange(len(exprs)), e) for e in exprs[at : at + size]]
            at += size
            idx.subscribe_many(items)
            subs.update(items)
            idx.check()
            for ev in EVENTS:
                assert set(idx.match(ev)) == brute(subs, schema, ev), ev
    with Index.open(path, readonly=True) as idx:
        for ev in EVENTS:
            assert set(idx.match(ev)) == brute(subs, schema, ev), ev


def test_rich_rules_in_batches(tmp_path: Path) -> None:
    """The rich workload (nested, lists, geo, long direct lists) in batches that replace
    some of their own and earlier ones, checked after each, brute force after each."""
    doc, rules, evs, _ = gen_rich.make(400, 30, check=False, seed=3, target_rate=0.05)
    schema = Schema.from_json(doc)
    rng = random.Random(3)
    subs: dict[Any, str] = {}
    with Index.open(tmp_path / "rich", schema=doc, settings={"max_cap": 8}) as idx:
        for b in range(5):
            items = [(f"r{rng.randrange(300)}", expr) for _, expr in rules[b * 80 : b * 80 + 80]]
            idx.subscribe_many(items)
            subs.update(items)
            idx.check()
            for ev in evs[:15]:
                assert set(idx.match(ev)) == brute(subs, schema, ev)


def test_a_failing_batch_leaves_the_last_commit(tmp_path: Path) -> None:
    """A batch with an expression that does not compile writes nothing; an error inside
    the batched write (here in :meth:`Writer.finish`, after every clause was placed)
    aborts it whole: the last commit's records, a clean check, its answers."""
    schema = Schema.from_json(SCHEMA)
    subs = {k: f"i = {k % 7}" for k in range(50)}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(subs.items())
        before = _records(idx)
        with pytest.raises(InvalidInput):
            idx.subscribe_many([(k, f"j > {k}") for k in range(40, 90)] + [(1, "i = ")])
        assert _records(idx) == before
        items = [
            (k, "j > 1", idx.engine.compiler().compile(k, "j > 1"), None) for k in range(30, 260)
        ]
        with pytest.raises(RuntimeError), idx.store.write() as txn, idx.engine.writer(txn) as w:
            w.insert_many(items)
            w.finish = _boom  # type: ignore[method-assign]
        assert _records(idx) == before
        idx.check()
        for ev in [{"i": 3, "j": 5}, {"j": 2}, {}]:
            assert set(idx.match(ev)) == brute(subs, schema, ev)
    with Index.open(tmp_path / "s", readonly=True) as idx:
        idx.check()
        assert set(idx.match({"i": 3})) == brute(subs, schema, {"i": 3})


def _boom() -> None:
    raise RuntimeError("boom")


def test_a_shard_part_of_puts_and_deletes(tmp_path: Path) -> None:
    """A sharded batch's part for one shard (:func:`betree.stores.shardwrite.apply_part`):
    runs of puts go through ``insert_many``, a delete between them (of a put of the same
    part, of an earlier one, of none) ends a run; results, check and brute force."""
    from betree.stores.shardwrite import apply_part

    schema = Schema.from_json(SCHEMA)
    rng = random.Random(9)
    subs: dict[Any, str] = {}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        for b in range(8):
            ops: list[list[Any]] = []
            expected = []
            for _ in range(rng.randint(1, 50)):
                ident = rng.randrange(60)
                if rng.random() < 0.25:
                    ops.append(["delete", ident])
                    expected.append(ident in subs)
                    subs.pop(ident, None)
                else:
                    expr = expression(rng)
                    ops.append(["put", ident, expr])
                    expected.append(ident not in subs)
                    subs[ident] = expr
            assert apply_part(idx, f"b{b}", ops) == expected
            _agrees(idx, subs, schema, rng)


def _pages(idx: Index, cached: bool) -> dict[int, Any]:
    """Every c-node and l-node page's fields, through the page cache or decoded afresh."""
    from betree.disk.nodes import CNode, LNodePage
    from betree.disk.tree import BETree

    with idx.store.read() as txn:
        tree = BETree(txn, catalog.root_record(txn))
        load = txn.load if cached else txn.load_uncached
        out: dict[int, Any] = {}
        for node, _, _ in tree.walk():
            out[node.page] = load(tree.space, node.page, CNode).to_fields()
            page = node.lnode
            while page:
                lpage = load(tree.space, page, LNodePage)
                out[page] = lpage.to_fields()
                page = lpage.next
    return out


def test_pages_changed_from_the_cache_leave_it_as_committed(tmp_path: Path) -> None:
    """A write changes copies of the cached pages (:meth:`storage.txn.WriteTxn.load_mut`):
    a batch that aborts after changing them leaves every cached page as committed (the
    same fields as decoded afresh), and the next batches commit what they changed:
    check() clean, the brute force's answers, after reopening too."""
    schema = Schema.from_json(SCHEMA)
    rng = random.Random(5)
    subs: dict[Any, str] = {k: expression(rng) for k in range(300)}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(subs.items())
        before = _pages(idx, cached=True)  # (every page now in the cache)
        assert before == _pages(idx, cached=False)
        items = [(k, expression(rng)) for k in range(250, 600)]
        compiled = [(i, e, idx.engine.compiler().compile(i, e), None) for i, e in items]
        with pytest.raises(RuntimeError), idx.store.write() as txn, idx.engine.writer(txn) as w:
            w.insert_many(compiled)
            w.finish = _boom  # type: ignore[method-assign]
        assert _pages(idx, cached=True) == before
        for _ in range(3):
            batch = [(rng.randrange(900), expression(rng)) for _ in range(120)]
            idx.subscribe_many(batch)
            subs.update(batch)
            assert _pages(idx, cached=True) == _pages(idx, cached=False)
            idx.check()
            for _ in range(5):
                ev = event(rng)
                assert set(idx.match(ev)) == brute(subs, schema, ev)
    with Index.open(tmp_path / "s", readonly=True) as idx:
        idx.check()
        ev = event(rng)
        assert set(idx.match(ev)) == brute(subs, schema, ev)


def test_an_lnode_page_appended_to_as_arrays_is_the_page_of_all_its_clauses() -> None:
    """A page held as arrays takes appended clauses into a tail (:class:`LNodePage`):
    its arrays, clauses, length, ``holds`` and stored fields are those of a page built
    from all the clauses at once, ids ints, strings, both, the edges of int64, after a
    copy, and after a removal too."""
    from betree.disk.nodes import LNodePage

    rng = random.Random(3)
    edge_ids: list[Any] = [0, -(2**63), 2**63 - 1, "", "é", "s" * 300]
    for case in range(40):
        ids = [
            rng.choice([rng.randrange(1000), f"s{rng.randrange(99)}", *edge_ids]) for _ in range(9)
        ]
        if case % 2:
            ids = [rng.randrange(-(2**63), 2**63) for _ in range(9)]
        entries = [
            ((k + 1) << 16, ids[k], [rng.randrange(1, 2**32) for _ in range(rng.randint(1, 5))])
            for k in range(len(ids))
        ]
        cut = rng.randint(0, len(entries))
        whole = LNodePage(7, 3, list(entries))
        stored = LNodePage.from_fields(7, LNodePage(7, 3, entries[:cut]).to_fields())
        page = stored.copy() if case % 3 else stored
        for entry in entries[cut:]:
            page.add(entry)
        assert len(page) == len(whole) and page.nbytes >= 0
        assert page.holds(entries[-1][0]) and not page.holds(1)
        assert page.clauses() == whole.clauses()
        for got, want in zip(page.arrays(), whole.arrays(), strict=True):
            assert got.dtype == want.dtype and got.tolist() == want.tolist()
        assert page.to_fields() == whole.to_fields()
        if case % 4 == 0:
            page.add(((99 << 16), "late", [5]))
            page.remove(entries[0][0])
            assert page.clauses() == [*entries[1:], (99 << 16, "late", [5])]
        if page is not stored:  # the copy changed, the cached page not
            assert len(stored) == cut and stored.clauses() == entries[:cut]


def test_pages_the_cache_holds_are_immutable_and_untracked(tmp_path: Path) -> None:
    """The page cache holds c-nodes and l-node pages as a read decodes them, tuples and
    arrays (:func:`storage.codec.decode_page`), whether read or published by a commit:
    the garbage collector stops tracking their fields after one pass (a full pass over a
    rich store's cache otherwise walks a list a p-node), and a writer that changed a
    shared c-node instead of its copy is refused, not silently changing the cache."""
    import gc

    from betree.disk.nodes import CNode, LNodePage
    from betree.disk.tree import BETree

    rng = random.Random(11)
    subs: dict[Any, str] = {k: expression(rng) for k in range(300)}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(subs.items())
        idx.engine.place()  # (the batch's clauses wait in the root: betree.disk.pending)
        for k in range(40):  # single writes publish their pages at commit
            idx.subscribe(1000 + k, expression(rng))
        idx.unsubscribe(3)
        for _ in range(2):
            gc.collect()
        with idx.store.read() as txn:
            tree = BETree(txn, catalog.root_record(txn))
            nodes = [node for node, _, _ in tree.walk()]
            assert any(node.pdir for node in nodes)
            for node in nodes:
                assert type(node.pdir) is tuple and not gc.is_tracked(node.pdir)
                assert all(type(entry) is tuple for entry in node.pdir)
                page = node.lnode
                while page:
                    lpage = txn.load(tree.space, page, LNodePage)
                    assert lpage.arrays() is not None and not gc.is_tracked(lpage.arrays())
                    page = lpage.next
            owner = next(node for node in nodes if node.pdir)
            cached = txn.load(tree.space, owner.page, CNode)
            with pytest.raises(TypeError, match="shared"):
                cached.add_score(owner.pdir[0][0], 1)
            with pytest.raises(TypeError, match="shared"):
                cached.add_pnode("zz", 1)
            mine = cached.copy()
            mine.add_score(owner.pdir[0][0], 5)
            assert mine.pdir[0][2] == owner.pdir[0][2] + 5 and cached.pdir is owner.pdir
        idx.check()
