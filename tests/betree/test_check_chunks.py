"""``check()`` reads the catalog in chunks (:mod:`betree.checking.atomrecords`, the
subscription records, the clause places, the atoms' spans): with chunks of a few records
it finds exactly what it finds in one chunk, damage in a later chunk included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from betree.checking import atomrecords, check
from betree.disk import atomspans
from betree.index import Index
from pbtree import PBTree
from pbtree.operators import OPERATORS
from storage import codec
from tests.support.index_check import idx, violations

__all__ = ["idx"]


def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomrecords, "CHUNK", 7)
    monkeypatch.setattr(check, "SUB_CHUNK", 5)
    monkeypatch.setattr(check, "CHUNK", 3)
    monkeypatch.setattr(atomspans, "_STEP", 4)


def test_a_sound_index_passes_in_small_chunks(idx: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    idx.subscribe_many([(f"t{i}", f"x < {i} or y = {i}") for i in range(40)])
    _small_chunks(monkeypatch)
    idx.check()
    idx.unsubscribe_many(list(range(0, 120, 3)))
    idx.check()


def test_damage_in_later_chunks_is_found_as_in_one(
    idx: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    with idx.store.read() as txn:
        records = [(k, codec.decode_value(v)) for k, v in txn.scan(b"atom")]
    (k1, (a1, r1)), (_, (a2, _)), (k3, (a3, _)) = records[-1], records[-9], records[-20]
    with idx.store.write() as txn:
        txn.put(b"atom", k1, codec.encode_value([a1, r1 + 2]))  # a wrong count
        txn.put(b"aid", codec.encode_u64(a2), k3)  # atom a2's reverse record leads elsewhere
        txn.delete(b"atom", k3)  # atom a3 is used, but has no record
        tree = PBTree(txn, "y")
        codes, consts, ids = tree.predicate_columns()
        op, const, aid = OPERATORS[codes[-1]], consts[-1], int(ids[-1])
        assert tree.delete(op, const, aid)
        sid = codec.decode_u64(txn.get(b"ext", codec.encode_id(117)) or b"")
        txn.put(b"ext", codec.encode_id(117), codec.encode_u64(sid + 1))
    whole = violations(idx)
    _small_chunks(monkeypatch)
    chunked = violations(idx)
    assert chunked == whole
    assert any(v.startswith(f"atom {a1} (") and f"counts {r1 + 2} uses" in v for v in chunked)
    assert f"atom {a2}: reverse record missing or wrong" in chunked
    assert f"atom {a3} is used but not in the catalog" in chunked
    assert f"PB+tree 'y' lacks atom {aid}'s entry {op} {const!r}" in chunked
    assert f"subscription 117: id map does not lead to internal id {sid}" in chunked


@pytest.mark.parametrize("damage", ["count", "reverse", "missing", "schema", "none"])
def test_keys_read_from_the_store_after_the_atom_pass_find_the_same(
    idx: Index, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """When every atom key reads as columns (a dense store's), ``check()`` holds none of the
    reverse records' keys (the atom records' pass compares their hashes) and the spans
    read any key they need from the store (:class:`atomrecords.StoredKeys`; ``!=`` atoms
    are spanned from their decoded keys): it reports exactly what it reports with the keys held."""
    idx.subscribe_many([(f"n{i}", f"x != {i} and y < {i}") for i in range(30)])
    with idx.store.read() as txn:
        records = [(k, codec.decode_value(v)) for k, v in txn.scan(b"atom")]
    (k1, (a1, r1)), (_, (a2, _)), (k3, _) = records[-1], records[-9], records[-20]
    with idx.store.write() as txn:
        if damage == "count":
            txn.put(b"atom", k1, codec.encode_value([a1, r1 + 2]))
        elif damage == "reverse":
            txn.put(b"aid", codec.encode_u64(a2), k3)
        elif damage == "missing":
            txn.delete(b"atom", k3)
        elif damage == "schema":
            key = codec.encode_value(("order", "nope", (("!=", 1),)))
            aid = txn.get_obj(b"bexdb", b"index")["next_atom"]
            txn.put_obj(b"atom", key, [aid, 0])
            txn.put(b"aid", codec.encode_u64(aid), key)
    taken: list[bool] = []
    real = check.aid_records

    def counted(txn: Any, hold: bool = False) -> Any:
        out = real(txn, hold=hold)
        taken.append(isinstance(out[0].held, atomrecords.StoredKeys))
        return out

    def run() -> list[str]:
        if damage == "none":
            idx.check()
            return []
        return violations(idx)

    monkeypatch.setattr(check, "aid_records", counted)
    read = run()
    assert taken == [True]  # (the path under test was taken: no key held)
    monkeypatch.setattr(check, "aid_records", lambda txn: counted(txn, hold=True))
    assert run() == read
    assert taken == [True, False]
    assert (read == []) == (damage == "none")
    if damage == "schema":
        assert any("(nope != 1) is on 'nope'" in v for v in read)


@pytest.mark.parametrize("seed", range(3))
def test_absent_is_setdiff1d(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """``atomrecords.absent`` (ids of one sorted array missing from another, by binary
    search a chunk at a time): ``np.setdiff1d``'s answer, in chunks of a few, for ascending
    and unordered ``among``, empty sides, and ids at both ends."""
    monkeypatch.setattr(atomrecords, "CHUNK", 7)
    rng = np.random.default_rng(seed)
    values = np.unique(rng.integers(0, 300, 120))
    among = np.unique(np.concatenate((rng.integers(0, 300, 150), values[[0, -1]])))
    for a, b in [
        (values, among),
        (values, among[::-1].copy()),
        (values, among[:0]),
        (values[:0], among),
        (values, among[:1]),
        (among, values),
    ]:
        assert atomrecords.absent(a, b).tolist() == np.setdiff1d(a, b, assume_unique=True).tolist()
