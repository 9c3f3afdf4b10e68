"""The batch build's atom records: the catalog (``aid`` and ``atom`` records), each
attribute's direct-test record and its bottom-up PB+tree, written from the interned atoms'
ids, store keys and key columns (:mod:`betree.disk.bulk` calls them once a build).

Why apart: the BE-Tree's construction over clause indices (:mod:`betree.disk.bulk`) and the
records of the atoms it indexes are two subjects; these functions touch no clause.

Cost: O(atoms) C-level work for the records (written a :data:`betree.disk.pieces.STEP` at a
time), O(atoms log atoms) for the sort of the keys or of the PB+trees' constants; memory
the columns of one attribute's predicates at a time, beside the keys.  A dense batch's keys
(:class:`~betree.disk.atomkeys.ColumnKeys`) are encoded twice, once for each order (ids,
keys), with their namespace before them for the ``atom`` records (the ``aid`` records'
keys likewise, :func:`aid_keys`): one ``bytes`` a record key, cut from one buffer a step
(100K dense: ``write_catalog`` 10.1 -> 5.1 CPU s, docs/bench/dense-load, denseload45).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from betree.disk import catalog
from betree.disk.atomkeys import (
    ColumnKeys,
    OrderKeys,
    attr_of_order_key,
    attr_of_test_key,
    encode_int_pairs,
    key_order,
    take_keys,
)
from betree.disk.pieces import STEP, Pieces
from pbtree.bulk import build as build_pbtree
from pbtree.bulk import build_columns
from pbtree.keys import int64_array, key_domain
from pbtree.operators import SLOT
from storage import codec


def write_catalog(
    pieces: Pieces, aids: np.ndarray, keys: Sequence[bytes], refs: np.ndarray, cols: OrderKeys
) -> None:
    """The atom catalog: the ``aid`` records (id -> key) in id order, then the ``atom``
    records (key -> ``[id, uses]``) in key order (:func:`key_order` when it can)."""
    for start in range(0, len(keys), STEP):
        part = aid_keys(aids[start : start + STEP])
        pieces.put_many(catalog.AID, part, keys[start : start + STEP], prefixed=True)
    by_key = key_order(cols)
    if by_key is None:
        by_key = sorted_keys(keys)
    # the records made a step at a time: a list and a bytes object a record, two a key
    # (~200 MB at 100K dense when made all at once); column keys made with their
    # namespace before them (LMDB's key: no second bytes object a record)
    lead = catalog.ATOM + b"\0"
    for start in range(0, len(keys), STEP):
        rows = by_key[start : start + STEP]
        counts = encode_int_pairs(aids[rows], refs[aids[rows]])
        if isinstance(keys, ColumnKeys):
            pieces.put_many(catalog.ATOM, keys.take(rows, lead), counts, prefixed=True)
        else:
            pieces.put_many(catalog.ATOM, take_keys(keys, rows.tolist()), counts)


def aid_keys(aids: np.ndarray) -> list[bytes]:
    """The LMDB keys of the ``aid`` records of ``aids`` (their namespace, then
    :func:`storage.codec.encode_u64` of each), cut from one buffer."""
    lead = catalog.AID + b"\0"
    size = len(lead) + 8
    mat = np.empty((len(aids), size), dtype=np.uint8)
    mat[:, : len(lead)] = np.frombuffer(lead, dtype=np.uint8)
    mat[:, len(lead) :] = aids.astype(">u8").view(np.uint8).reshape(len(aids), 8)
    buf = mat.tobytes()
    return [buf[i : i + size] for i in range(0, len(buf), size)]


def sorted_keys(keys: Sequence[bytes]) -> np.ndarray:
    """The keys' order, sorted (LMDB's: ~2x faster to insert).  ('S' ignores trailing zero
    bytes, which only costs order; keys of very unequal lengths sort as Python bytes: as
    'S', rich 100K's ~470K keys of up to ~2 KB were a ~1 GB array.)"""
    widest = max(map(len, keys), default=0)
    if widest <= 4096 and widest * len(keys) <= 4 * sum(map(len, keys)) + (1 << 20):
        return np.argsort(np.array(keys, dtype=bytes), kind="stable")
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def write_atoms(
    pieces: Pieces,
    aids: np.ndarray,
    keys: Sequence[bytes],
    cols: OrderKeys,
    decoded: Mapping[int, Any],
) -> None:
    """Direct-test lists, and one bottom-up PB+tree per attribute, from the
    atoms' ids (ascending) and store keys: the one-comparison order atoms read as columns
    (:func:`betree.disk.atomkeys.parse`), any other order atom decoded once (unless in
    ``decoded`` by atom id: an order atom's tuple holds its entries).  An attribute's
    predicates go to its tree as columns (:func:`order_columns`).  A test atom is not
    decoded: its attribute is read from its key (:func:`~betree.disk.atomkeys.
    attr_of_test_key`) and its key's bytes become its part of the attribute's direct
    record (:func:`storage.codec.pack_pair`), the bytes decoding and packing it gave
    (rich rules: ~half their atoms, ~4 µs and a few hundred bytes of objects each).

    One attribute at a time (the atoms' attributes read first, from their keys' bytes:
    :func:`~betree.disk.atomkeys.attr_of_order_key`): its predicates' or its direct
    record's parts are held only while its tree or record is written (all at once, rich
    200K's were ~380 MB).  The trees are written in attribute order, then the direct
    records in the order their attributes first occur, as before."""
    rest = np.flatnonzero(~cols.ok)
    names: dict[str, int] = {}  # the attributes of the atoms not read as columns
    number = names.setdefault
    at = np.empty(len(rest), dtype=np.int64)  # per atom of ``rest``: its attribute's number
    is_order = np.zeros(len(rest), dtype=bool)
    for j, (aid, key) in enumerate(
        zip(aids[rest].tolist(), take_keys(keys, rest.tolist()), strict=True)
    ):
        attr = None if aid in decoded else attr_of_test_key(key)
        if attr is None:
            attr = None if aid in decoded else attr_of_order_key(key)
            if attr is not None:
                is_order[j] = True
            else:
                t = decoded[aid] if aid in decoded else codec.decode_value(key)
                attr, is_order[j] = t[1], t[0] == "order"
        at[j] = number(attr, len(names))
    by_name = list(names)
    on_cols = set(cols.names)  # (each a tree, as before: even with no atom read so)
    for attr in sorted(on_cols | {by_name[i] for i in np.unique(at[is_order]).tolist()}):
        rows = rest[is_order & (at == names[attr])] if attr in names else rest[:0]
        consts, ops, ids = _order_predicates(attr, cols, aids, keys, rows, decoded)
        packed = order_columns(consts, ops, ids)
        if packed is None:
            packed = string_columns(consts, ops, ids)
        if packed is None:  # constants of mixed types: the triples, sorted (checked so)
            slots = {v: k for k, v in SLOT.items()}
            triples = sorted(zip(consts, map(slots.__getitem__, ops), ids, strict=True), key=_first)
            build_pbtree(pieces.txn, attr, triples)
        else:
            build_columns(pieces.txn, attr, *packed)
        pieces.wrote(PREDICATE_BYTES * len(ids))
        del consts, ops, ids, packed
    direct = ~is_order
    firsts = np.unique(at[direct], return_index=True)
    for i in firsts[0][np.argsort(firsts[1], kind="stable")].tolist():  # (first occurrence)
        rows = rest[direct & (at == i)]
        listed: list[bytes] = []
        for aid, key in zip(aids[rows].tolist(), take_keys(keys, rows.tolist()), strict=True):
            if aid not in decoded and attr_of_test_key(key) is not None:
                listed.append(codec.pack_pair(aid, key))
            else:
                t = decoded[aid] if aid in decoded else codec.decode_value(key)
                listed.append(codec.pack_part([aid, t]))
        catalog.put_direct(pieces.txn, by_name[i], listed)


def _order_predicates(
    attr: str,
    cols: OrderKeys,
    aids: np.ndarray,
    keys: Sequence[bytes],
    rows: np.ndarray,
    decoded: Mapping[int, Any],
) -> tuple[Any, Any, Any]:
    """Attribute ``attr``'s predicates as ``(constants, slots, ids)``: its atoms read as
    columns (int64 arrays when no constant is a float and no atom was decoded), then those
    of ``rows`` (order atoms' keys, ascending ids) decoded, entry by entry."""
    i = cols.names.index(attr) if attr in cols.names else -1
    sel = cols.ok & (cols.attr == i)
    floats = cols.is_float[sel]
    if not floats.any():
        if not len(rows):
            return cols.ints[sel], cols.code[sel].astype(np.int64), aids[sel]
        consts: list[Any] = cols.ints[sel].tolist()
    else:
        as_float, ints = cols.floats[sel].tolist(), cols.ints[sel].tolist()
        consts = [f if x else c for f, x, c in zip(as_float, floats, ints, strict=True)]
    ops = array("q", cols.code[sel].tolist())
    ids = array("q", aids[sel].tolist())
    slot = SLOT
    strings: dict[str, str] = {}  # (one object a distinct string, not one an entry)
    for aid, key in zip(aids[rows].tolist(), take_keys(keys, rows.tolist()), strict=True):
        t = decoded[aid] if aid in decoded else codec.decode_value(key)
        for op, c in t[2]:
            consts.append(strings.setdefault(c, c) if type(c) is str else c)
            ops.append(slot[op])
            ids.append(aid)
    return consts, ops, ids


def string_columns(
    consts: Sequence[Any], ops: Sequence[int], ids: Sequence[int]
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, str] | None:
    """One attribute's predicates as :func:`pbtree.bulk.build_columns` takes them when its
    constants are all strings (rich rules' in-lists): the distinct ones sorted, each
    predicate's number among them; else None.  What :func:`pbtree.bulk.build` makes of
    the sorted ``(constant, operator, id)`` triples (~100 bytes a predicate: rich 20K's
    ``user.country``, 180K predicates, 12 MB), without them."""
    if not all(type(c) is str for c in consts):
        return None
    keys = sorted(set(consts))
    for key in keys:  # (as the build checks each constant: a string UTF-8 can encode)
        key_domain(key)
    number = {key: k for k, key in enumerate(keys)}
    kid = np.fromiter(map(number.__getitem__, consts), dtype=np.int64, count=len(consts))
    slots = np.asarray(ops, dtype=np.int64)
    return keys, kid, slots, np.asarray(ids, dtype=np.int64), "str"


_first = itemgetter(0)
#: a PB+tree's bytes a predicate, about, as the write transaction holds them (its id in
#: runs, its key's entry, the pages' fill: dense 20K, 25.5 MB of pages for 397K predicates;
#: counted 24 before, so that a piece of PB+trees held ~2.5x its limit to its commit)
PREDICATE_BYTES = 64


def order_columns(
    consts: Sequence[Any] | np.ndarray,
    ops: Sequence[int] | np.ndarray,
    ids: Sequence[int] | np.ndarray,
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, str] | None:
    """One attribute's predicates as :func:`pbtree.bulk.build_columns` takes them (distinct
    constants ascending, per predicate its constant's number, slot and id) when its
    constants are all int64 ints (lists, or int64 arrays as the batch's columns hold them)
    or all floats; else None.  ~0.1 µs a predicate."""
    array = consts if isinstance(consts, np.ndarray) else int64_array(consts)
    if array is None and all(type(c) is float for c in consts):
        array = np.array(consts, dtype=np.float64)
    if array is None:
        return None
    order = np.argsort(array, kind="stable")
    ranked = array[order]
    new = np.concatenate(([True], ranked[1:] != ranked[:-1])) if len(ranked) else ranked > 0
    kid = np.empty(len(order), dtype=np.int64)
    kid[order] = np.cumsum(new) - 1
    keys = ranked[new].tolist()  # the distinct constants, ascending (ints, or floats)
    return keys, kid, np.asarray(ops, dtype=np.int64), np.asarray(ids, dtype=np.int64), "num"
