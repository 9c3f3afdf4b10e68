"""More damage the index checker must find: clause copies, homes, records, places.

The checker works over packed arrays (:mod:`betree.checking.check`); each case here breaks one
per-clause fact and asserts the violation it reports, so that no vectorised step goes
blind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from betree.disk.catalog import AID, ATOM, DIRECT, NS, ROOT, put_home
from betree.disk.nodes import CNode, Entry
from betree.disk.tree import BETree
from betree.index import Index
from betree.lang.atoms import OrderAtom
from pbtree import PBTree
from storage import codec
from tests.support.index_check import idx, violations

__all__ = ["idx"]  # the fixture of the checker tests, which ``mixed`` extends


@pytest.fixture
def mixed(idx: Index) -> Index:
    """The checker tests' index, plus subscriptions of two clauses each."""
    idx.subscribe_many([(f"t{i}", f"x < {i} or y = {i}") for i in range(40)])
    idx.check()
    return idx


def lnodes(idx: Index) -> list[tuple[CNode, list[Entry]]]:
    with idx.store.read() as txn:
        tree = BETree(txn, txn.get_obj(NS, ROOT))
        return [(node, tree.entries(node)) for node, _, _ in tree.walk() if node.size]


def edit(idx: Index, page: int, entries: list[Entry], home: int | None = None) -> Any:
    """Replace the l-node of ``page`` by ``entries`` (and move the first one's home)."""
    with idx.store.write() as txn, idx.engine.writer(txn) as w:
        w.tree._rewrite(page, entries)
        if home is not None:
            put_home(txn, entries[0][0], home)


def test_clause_stored_twice(mixed: Index) -> None:
    (a, ea), (b, eb) = lnodes(mixed)[-2:]
    edit(mixed, b.page, [*eb, ea[0]])
    found = violations(mixed)
    assert any(
        v.endswith(f"clause {ea[0][0]} stored twice (also at c-node {a.page})") for v in found
    )


def test_clause_missing_from_the_tree(mixed: Index) -> None:
    node, entries = lnodes(mixed)[-1]
    edit(mixed, node.page, entries[1:])
    ext, cid = entries[0][1], entries[0][0]
    found = violations(mixed)
    assert f"subscription {ext!r}: clause {cid & 0xFFFF} is not in the BE-Tree" in found
    assert any("scores" in v for v in found)  # the p-nodes above it count one too many


def test_wrong_home_record(mixed: Index) -> None:
    node, entries = lnodes(mixed)[-1]
    with mixed.store.write() as txn:
        txn.put(b"home", codec.encode_u64(entries[0][0]), codec.encode_u64(node.page + 1))
    found = violations(mixed)
    k = entries[0][0] & 0xFFFF
    assert found == [f"subscription {entries[0][1]!r}: clause {k} home record is wrong"]


def test_stored_copy_differs_from_its_record(mixed: Index) -> None:
    node, entries = lnodes(mixed)[-1]
    cid, ext, ids = entries[0]
    edit(mixed, node.page, [(cid, ext, [*ids[:-1], ids[-1] + 1]), *entries[1:]])
    found = violations(mixed)
    stored = (ext, [*ids[:-1], ids[-1] + 1])
    assert f"subscription {ext!r}: clause {cid & 0xFFFF} stored as {stored}" in found


def test_clause_of_no_subscription(mixed: Index) -> None:
    node, entries = lnodes(mixed)[-1]
    cid, ext, ids = entries[0]
    stray = cid + 9
    edit(mixed, node.page, [*entries, (stray, ext, ids)])
    found = violations(mixed)
    assert any(v.endswith(f": clause {stray} of {ext!r} belongs to no subscription") for v in found)
    assert f"clause {stray} in the BE-Tree belongs to no subscription" in found


def test_clause_outside_its_bucket(mixed: Index) -> None:
    # a clause of one leaf bucket of x moved into a sibling leaf bucket
    pairs = lnodes(mixed)
    leaves = [(n, e) for n, e in pairs if n.attr == "x" and not n.top and n.is_leaf]
    (a, ea), (b, eb) = next(
        (p, q) for p in leaves for q in leaves if p[0].parent == q[0].parent and p is not q
    )
    edit(mixed, a.page, ea[1:])
    edit(mixed, b.page, [*eb, ea[0]], home=b.page)
    found = violations(mixed)
    assert any(f"page {b.page}: clause {ea[0][0]} span" in v and "outside" in v for v in found)


def test_clause_left_above_a_pnode_that_could_take_it(mixed: Index) -> None:
    # a clause of the x directory moved up into the root's l-node
    with mixed.store.read() as txn:
        root = txn.get_obj(NS, ROOT)["root"]
    node, entries = next((n, e) for n, e in lnodes(mixed) if n.attr == "x")
    _, rooted = next(((n, e) for n, e in lnodes(mixed) if n.page == root), (None, []))
    edit(mixed, node.page, entries[1:])
    edit(mixed, root, [*rooted, entries[0]], home=root)
    found = violations(mixed)
    assert f"page {root}: clause {entries[0][0]} stays although p-node 'x' could take it" in found


@pytest.mark.parametrize("idx", ["int"], indirect=True)  # (the float tree has no bucket on y)
def test_clause_not_constrained_on_its_bucket(mixed: Index) -> None:
    # "x < 3 or y = 3" has a clause on y alone; put it into a bucket of x
    node, entries = next((n, e) for n, e in lnodes(mixed) if n.attr == "y")
    target, tentries = next((n, e) for n, e in lnodes(mixed) if n.attr == "x")
    loner = next(e for e in entries if isinstance(e[1], str))
    edit(mixed, node.page, [e for e in entries if e is not loner])
    edit(mixed, target.page, [*tentries, loner], home=target.page)
    found = violations(mixed)
    assert f"page {target.page}: clause {loner[0]} is not constrained on 'x'" in found


@pytest.mark.parametrize("fixture", ["idx", "mixed"])  # int ids alone (numpy), mixed (dict)
def test_id_map_leads_elsewhere(fixture: str, idx: Index, request: pytest.FixtureRequest) -> None:
    index: Index = request.getfixturevalue(fixture)  # (``idx`` asked for: its parameter)
    with index.store.write() as txn:
        sid = codec.decode_u64(txn.get(b"ext", codec.encode_id(3)) or b"")
        txn.put(b"ext", codec.encode_id(3), codec.encode_u64(sid + 1))
    assert violations(index) == [f"subscription 3: id map does not lead to internal id {sid}"]


def test_atom_on_an_attribute_the_schema_lacks(idx: Index) -> None:
    """An atom record naming no attribute of the schema is reported, not a KeyError."""
    with idx.store.write() as txn:
        key = codec.encode_value(OrderAtom("nope", [("=", 1)]).as_tuple())
        aid = txn.get_obj(NS, ROOT)["next_atom"]
        txn.put_obj(ATOM, key, [aid, 0])
        txn.put(AID, codec.encode_u64(aid), key)
    found = violations(idx)
    assert f"atom {aid} (nope = 1) is on 'nope', not an attribute of the schema" in found


def test_direct_lists_compared_with_the_catalog(tmp_path: Path) -> None:
    """A direct record's atom is the catalog's atom of its id, on the record's attribute:
    one stored as another tuple than its key's (a list out of order) that builds the same
    atom is not reported; another atom under the id, or the list under another attribute,
    is."""
    schema = {"attributes": {"s": {"type": "string_list"}, "t": {"type": "string"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many(
            [(1, 's one of ("a", "b")'), (2, 's one of ("c", "d")'), (3, 'contains(t, "x")')]
        )
        idx.check()
        with idx.store.read() as txn:
            (aid, t), (other, u) = codec.decode_value(txn.get(DIRECT, b"s") or b"")
        assert t == ["test", "s", "one_of", ["a", "b"]] and u[3] == ["c", "d"]

        def put(attr: bytes, parts: list[Any]) -> None:
            with idx.store.write() as txn:
                for name in (b"s", b"u"):
                    txn.delete(DIRECT, name)
                txn.put(DIRECT, attr, codec.encode_parts([codec.pack_part(p) for p in parts]))

        put(b"s", [[aid, [*t[:3], ["b", "a"]]], [other, u]])
        idx.check()
        put(b"s", [[aid, u], [other, u]])
        assert any(v.startswith("direct atom lists differ") for v in violations(idx))
        put(b"u", [[aid, t], [other, u]])
        assert any(v.startswith("direct atom lists differ") for v in violations(idx))
        put(b"s", [[aid, t], [other, u]])
        idx.check()


def test_string_predicates_compared_with_their_atoms(tmp_path: Path) -> None:
    """A PB+tree of strings (compared as numbered constants): an entry missing, one no atom
    has, and two atoms' constants swapped are each reported; the sound tree passes."""
    schema = {"attributes": {"s": {"type": "string"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many([(i, f"s in ('a{i}', 'b{i}', 'c')") for i in range(6)])
        idx.check()
        with idx.store.read() as txn:
            _, consts, ids = PBTree(txn, "s").predicate_columns()
        (a, x), (b, y) = [(int(i), c) for i, c in zip(ids, consts, strict=True) if c != "c"][:2]
        assert a != b and x != y

        def edit(*steps: tuple[str, str, str, int]) -> list[str]:
            with idx.store.write() as txn:
                tree = PBTree(txn, "s")
                for how, op, const, aid in steps:
                    assert getattr(tree, how)(op, const, aid)
            found = violations(idx)
            with idx.store.write() as txn:  # (undone: the next case starts sound)
                tree = PBTree(txn, "s")
                for how, op, const, aid in reversed(steps):
                    undo = "delete" if how == "insert" else "insert"
                    assert getattr(tree, undo)(op, const, aid)
            idx.check()
            return found

        assert edit(("delete", "=", x, a)) == [f"PB+tree 's' lacks atom {a}'s entry = {x!r}"]
        assert edit(("insert", "=", "zz", a)) == [
            f"PB+tree 's' holds = 'zz' for atom {a}, no atom has it"
        ]
        swapped = edit(
            ("delete", "=", x, a),
            ("delete", "=", y, b),
            ("insert", "=", y, a),
            ("insert", "=", x, b),
        )
        assert f"PB+tree 's' lacks atom {a}'s entry = {x!r}" in swapped
        assert f"PB+tree 's' holds = {y!r} for atom {a}, no atom has it" in swapped
