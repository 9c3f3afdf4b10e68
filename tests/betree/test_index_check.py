"""The index checker finds BE-Tree and catalog damage done on purpose."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.disk.catalog import NS, ROOT, put_home
from betree.disk.nodes import CNode
from betree.disk.tree import BETree
from betree.index import Index
from pbtree import PBTree
from pbtree.operators import OPERATORS
from storage import codec
from tests.support.index_check import idx, violations

__all__ = ["idx"]  # the fixture of the checker tests


def walk(idx: Index) -> list[CNode]:
    with idx.store.read() as txn:
        tree = BETree(txn, txn.get_obj(NS, ROOT))
        return [node for node, _, _ in tree.walk()]


def test_wrong_score(idx: Index) -> None:
    root = walk(idx)[0]
    with idx.store.write() as txn:
        node = txn.load_mut(txn.get_obj(NS, ROOT)["space"], root.page, CNode)
        node.add_score(node.pdir[0][0], 5)  # (the count only, not the tree below)
    found = violations(idx)
    assert len(found) == 1 and "scores" in found[0] and f"page {root.page}" in found[0]


def test_clause_in_too_large_a_bucket(idx: Index) -> None:
    # move a clause from a leaf bucket's l-node up to its parent bucket's l-node
    nodes = walk(idx)
    leaf = next(n for n in nodes if n.attr == "x" and not n.top and n.size and n.is_leaf)
    with idx.store.write() as txn, idx.engine.writer(txn) as w:
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
        codes, consts, ids = tree.predicate_columns()
        op, const, aid = OPERATORS[codes[-1]], consts[-1], int(ids[-1])
        assert tree.delete(op, const, aid)
    found = violations(idx)
    assert f"PB+tree 'y' lacks atom {aid}'s entry {op} {const!r}" in found


def test_pbtree_entry_of_no_atom(idx: Index) -> None:
    with idx.store.write() as txn:
        assert PBTree(txn, "y").insert("<", 7, 9999)
    assert "PB+tree 'y' holds < 7 for atom 9999, no atom has it" in violations(idx)


def _delete_entry(tree: PBTree, const: str) -> int:
    """Delete the ``=`` entry of ``const`` from ``tree``; the atom it was for."""
    _, consts, ids = tree.predicate_columns()
    aid = int(ids[list(consts).index(const)])
    assert tree.delete("=", const, aid)
    return aid


def test_pbtree_entries_compared_on_string_constants(tmp_path: Path) -> None:
    """Not every constant an int64: the entries are compared as sets."""
    schema = {"attributes": {"s": {"type": "string"}, "f": {"type": "float"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many([(i, f's in ("a{i}", "b{i % 3}") and f >= {i / 2}') for i in range(40)])
        idx.check()
        with idx.store.write() as txn:
            aid = _delete_entry(PBTree(txn, "s"), "b1")
            assert PBTree(txn, "f").insert(">", 0.25, aid)
        found = violations(idx)
        assert found == [
            f"PB+tree 'f' holds > 0.25 for atom {aid}, no atom has it",
            f"PB+tree 's' lacks atom {aid}'s entry = 'b1'",
        ]


def test_an_in_atom_stored_out_of_order_is_rebuilt(idx: Index) -> None:
    """An atom key whose constants are not ascending is not read off directly: it is
    rebuilt as an atom (and its records then disagree, which the check reports)."""
    idx.subscribe("z", "x in (3, 5)")
    with idx.store.write() as txn:
        (aid,) = [
            aid
            for aid, key in ((codec.decode_u64(k), v) for k, v in txn.scan(b"aid"))
            if codec.decode_value(key)[2] == [["=", 3], ["=", 5]]
        ]
        txn.put(
            b"aid", codec.encode_u64(aid), codec.encode_value(["order", "x", [["=", 5], ["=", 3]]])
        )
    assert f"atom {aid}: reverse record missing or wrong" in violations(idx)


def _atom_records(idx: Index) -> list[tuple[bytes, list[int]]]:
    with idx.store.read() as txn:
        return [(key, codec.decode_value(value)) for key, value in txn.scan(b"atom")]


def test_atom_records_are_checked_one_by_one(idx: Index) -> None:
    """Counts, counters and reverse records: every wrong atom record is named (the counts
    are compared as arrays; each finding names its atom)."""
    (k1, (a1, r1)), (_, (a2, _)), (k3, (a3, _)) = _atom_records(idx)[:3]
    with idx.store.write() as txn:
        txn.put(b"atom", k1, codec.encode_value([a1, r1 + 2]))  # a wrong count
        txn.put(b"aid", codec.encode_u64(a2), k3)  # atom a2's reverse record leads elsewhere
        txn.delete(b"atom", k3)  # atom a3 is used, but has no record
    found = violations(idx)
    assert any(
        v.startswith(f"atom {a1} (") and f"counts {r1 + 2} uses, found {r1}" in v for v in found
    )
    assert f"atom {a2}: reverse record missing or wrong" in found
    assert f"atom {a3} is used but not in the catalog" in found


def test_atom_records_beyond_the_counter_or_not_ints(idx: Index) -> None:
    records = _atom_records(idx)
    with idx.store.read() as txn:
        next_atom = txn.get_obj(NS, ROOT)["next_atom"]
    (k1, (a1, r1)), (k2, (a2, _)) = records[:2]
    with idx.store.write() as txn:
        txn.put(b"atom", k1, codec.encode_value([next_atom + 5, r1]))
        txn.put(b"atom", k2, codec.encode_value([a2, "two"]))  # not a count: still reported
    found = violations(idx)
    assert f"atom {next_atom + 5} beyond the counter" in found
    assert any(v.startswith(f"atom {a2} (") and "counts two uses" in v for v in found)
    assert f"atom {a1} is used but not in the catalog" in found


def test_pbtree_entries_of_megabyte_strings(tmp_path: Path) -> None:
    """String constants of a megabyte are compared as they are (never copied into an
    array as wide as the longest), and a missing entry is still named."""
    from pbtree.keys import int64_array

    big = "x" * (1 << 20)
    assert int64_array([big, "a"]) is None and int64_array([True, 1]) is None
    assert int64_array([2**63, 1]) is None and int64_array([-(2**63), 2**63 - 1]) is not None
    assert int64_array([]) is not None
    schema = {"attributes": {"s": {"type": "string"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many([(i, f's in ("{big}{i}", "b{i}")') for i in range(30)])
        idx.check()
        with idx.store.write() as txn:
            aid = _delete_entry(PBTree(txn, "s"), "b7")
        assert violations(idx) == [f"PB+tree 's' lacks atom {aid}'s entry = 'b7'"]


def test_reverse_record_of_the_same_length_differs_by_one_byte(idx: Index) -> None:
    """The atom and reverse records are compared in bulk, byte for byte: a reverse record
    as long as its atom's key, the constant one more (a valid key of another atom), or
    another atom's key of the same length, is reported; the others are not."""
    records = _atom_records(idx)
    k1, (a1, _) = records[3]
    kind, attr, ((op, const),) = codec.decode_value(k1)
    other = codec.encode_value([kind, attr, [[op, const + 1]]])
    assert len(other) == len(k1) and other != k1
    k2, (a2, _) = records[10]
    (k3,) = [k for k, (a, _) in records if len(k) == len(k2) and a != a2][:1]
    with idx.store.write() as txn:
        txn.put(b"aid", codec.encode_u64(a1), other)
        txn.put(b"aid", codec.encode_u64(a2), k3)
    found = [v for v in violations(idx) if "reverse record" in v]
    assert sorted(found) == sorted(f"atom {a}: reverse record missing or wrong" for a in (a1, a2))


def test_reverse_records_of_sparse_atom_ids(tmp_path: Path) -> None:
    """Atom ids far apart (most atoms unsubscribed: ids up to ~3,000 for ~10 atoms) are
    located by binary search, not a table of every id: a clean store passes, a reverse
    record leading elsewhere is reported."""
    schema = {"attributes": {"x": {"type": "int"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many([(i, f"x > {i}") for i in range(3000)])
        idx.unsubscribe_many([i for i in range(3000) if i % 300])
        idx.check()
        records = _atom_records(idx)
        assert len(records) == 10 and max(a for _, (a, _) in records) > 2600
        (_, (a1, _)), (k2, _) = records[2], records[5]
        with idx.store.write() as txn:
            txn.put(b"aid", codec.encode_u64(a1), k2)
        assert f"atom {a1}: reverse record missing or wrong" in violations(idx)


def test_pbtree_entries_of_column_and_other_atoms_together(tmp_path: Path) -> None:
    """One tree's entries from atoms read as columns (one comparison) and from others
    (``in``, a float bound of an int): compared together; a clean store passes, a missing
    entry of either kind is named with its constant as the atom holds it."""
    schema = {"attributes": {"x": {"type": "int"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many(
            [(i, f"x >= {i} and x in ({i + 100}, {i + 200})") for i in range(30)]
            + [(100 + i, f"x < {i}.5") for i in range(10)]
        )
        idx.check()
        with idx.store.write() as txn:
            tree = PBTree(txn, "x")
            codes, consts, ids = tree.predicate_columns()
            entries = list(zip(codes.tolist(), consts.tolist(), ids.tolist(), strict=True))
            (c1, k1, a1) = next(e for e in entries if OPERATORS[e[0]] == ">=" and e[1] == 7)
            (c2, k2, a2) = next(e for e in entries if OPERATORS[e[0]] == "=" and e[1] == 205)
            assert tree.delete(OPERATORS[c1], k1, a1) and tree.delete(OPERATORS[c2], k2, a2)
        assert sorted(violations(idx)) == sorted(
            [
                f"PB+tree 'x' lacks atom {a1}'s entry >= 7",
                f"PB+tree 'x' lacks atom {a2}'s entry = 205",
            ]
        )


@pytest.mark.parametrize("domain", ["int", "float"])
@pytest.mark.parametrize("shared", [False, True])
def test_pbtree_entry_moved_to_another_constant_or_operator(
    tmp_path: Path, shared: bool, domain: str
) -> None:
    """A tree's entry replaced by one of the same atom id with another constant, then with
    another operator, is named both ways (entries compared by id alone when no id repeats,
    a dense store's every tree; by all three columns when an atom has two entries, an
    in-list: ``shared``); a clean store passes either way.  On a float domain too (its
    constants compared as float bits, :class:`pbtree.keys.Numbers`): a constant moved to
    the next double is found as well."""
    schema = {"attributes": {"x": {"type": domain}}}
    half = "" if domain == "int" else ".5"
    k: int | float = 7 if domain == "int" else 7.5
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many([(i, f"x >= {i}{half} and x != {i + 1000}") for i in range(30)])
        if shared:  # (an in-list: one order atom, one id, an entry a value)
            idx.subscribe_many(
                [(100 + i, f"x in ({i + 100}{half}, {i + 200}{half})") for i in range(10)]
            )
        idx.check()
        with idx.store.read() as txn:
            codes, consts, ids = PBTree(txn, "x").predicate_columns()
        assert (len(set(ids.tolist())) < len(ids)) == shared
        at = int(np.flatnonzero(consts == k)[0])
        op, aid = OPERATORS[int(codes[at])], int(ids[at])
        moves: list[tuple[str, int | float]] = [(op, k + 1), ("<=" if op != "<=" else ">=", k)]
        if domain == "float":
            moves.append((op, math.nextafter(k, 8)))
        for new_op, new_const in moves:
            with idx.store.write() as txn:
                tree = PBTree(txn, "x")
                assert tree.delete(op, k, aid) and tree.insert(new_op, new_const, aid)
            found = violations(idx)
            assert f"PB+tree 'x' lacks atom {aid}'s entry {op} {k}" in found
            assert f"PB+tree 'x' holds {new_op} {new_const} for atom {aid}, no atom has it" in found
            with idx.store.write() as txn:
                tree = PBTree(txn, "x")
                assert tree.delete(new_op, new_const, aid) and tree.insert(op, k, aid)
            idx.check()


def test_float_domain_edges_compare_as_columns(tmp_path: Path, monkeypatch: Any) -> None:
    """A float domain's clean store, its constants at the doubles' edges (signed zero,
    subnormals, the largest doubles, ints), checks clean with every tree's entries compared
    as number columns (no fall back to sets of tuples: ``_same`` true for each)."""
    from betree.checking import predicates

    results: list[bool] = []
    same = predicates._same
    monkeypatch.setattr(predicates, "_same", lambda *a: results.append(same(*a)) or results[-1])
    edges = ["-0.0", "0", "5e-324", "-5e-324", "2.2250738585072014e-308", "1.7976931348623157e308"]
    edges += ["-1.7976931348623157e308", "-9223372036854775808", "9.3e18", "1.5", "-2.25"]
    schema = {"attributes": {"x": {"type": "float"}, "y": {"type": "float"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        subs = [(i, f"x > {c} and y <= {c}") for i, c in enumerate(edges)]
        idx.subscribe_many(subs)
        idx.check()
    assert results == [True, True]
