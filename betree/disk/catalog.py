"""The catalog: every record of an index besides its pages, with their layout and keys.

Records (namespaces of the store's ``records`` table; values msgpack unless u64, all
through :mod:`storage.codec`):

* :data:`NS` (``bexdb``) holds three records of the index itself:

  - :data:`ROOT` (``index``), the root record: BE-Tree space and root, ``max_cap``,
    ``min_size``, ``max_clauses``, the next subscription and atom ids (``next_sid``,
    ``next_atom``), the subscription count ``subs``, the per-attribute records that
    exist (``attributes``: :func:`record_attributes`), and the self-adjustment settings
    ``adjust``, ``adjust_window``, ``theta``;
  - :data:`SCHEMA` (``schema``), the schema document (:class:`betree.lang.schema.Schema`);
  - :data:`ADJUST_STATE` (``adjust``), self-adjustment totals and attribute feedback
    (:mod:`betree.disk.adjust`).

* :data:`EXT` (``ext``)  external id key (:func:`storage.codec.encode_id`) -> internal
  id (u64).
* :data:`SUB` (``sub``)  internal id (u64) -> ``[external id, expression, clauses]``:
  each clause as its atom ids (``[0]`` for the empty conjunction).  A clause's places
  (:mod:`betree.disk.tree`) are derived from its atoms when needed.
* :data:`HOME` (``home``)  clause id (:func:`clause_id`: ``sid << 16 | k``, u64) -> the
  c-node page whose l-node holds the clause (u64).
* :data:`ATOM` (``atom``)  canonical atom (msgpack of ``Atom.as_tuple()``) ->
  ``[atom id, refcount]``; :data:`AID` (``aid``)  atom id (u64) -> canonical atom.
  Equal atoms share one id (interning).  Atom id 0 is always true: it stands for an
  empty conjunction, and has no record.
* :data:`DIRECT` (``direct``)  attribute -> ``[[atom id, atom tuple], ...]``: the atoms
  tested per event (every atom that is not an order atom).
* ``log`` (:mod:`betree.disk.changelog`): what each recent commit added and removed, for
  readers that keep a packed view across writes.
* :data:`ADJ` (``adj``)  c-node page (u64) -> its self-adjustment window
  (:mod:`betree.disk.adjust`); freeing a c-node drops it.
* :data:`META` (``meta``)  external id key -> the subscription's metadata as compact
  JSON text (a string), for those that have one (:mod:`betree.disk.metadata`).

Order atoms (``< <= = != >= >`` and what reduces to them) live in the attribute's
PB+tree (:mod:`pbtree.tree`, namespace ``pbtree``) under their atom id, one entry per
``(op, constant)``.

Values carry a checksum and keys do not (:mod:`storage.store`): the readers here turn a
record that another record names but that is missing or of the wrong shape into
:class:`StoreDamaged`, so that a damaged store fails with what was found, not with a
``KeyError`` or ``TypeError``.  Cost: each helper is one record get or put.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from betree.lang.atoms import Atom, atom_from_tuple
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import StoreDamaged
from storage.txn import ReadTxn, WriteTxn

#: namespace of the index's own records, keyed :data:`ROOT`, :data:`SCHEMA`, :data:`ADJUST_STATE`
NS = b"bexdb"
ROOT = b"index"
SCHEMA = b"schema"
ADJUST_STATE = b"adjust"
EXT = b"ext"
SUB = b"sub"
HOME = b"home"
ATOM = b"atom"
AID = b"aid"
DIRECT = b"direct"
ADJ = b"adj"
META = b"meta"

#: a clause id is its subscription's internal id shifted by this, or'ed with its number
CLAUSE_BITS = 16
#: ``max_clauses`` must be below this (a clause's number must fit :data:`CLAUSE_BITS`)
CLAUSES_LIMIT = 1 << CLAUSE_BITS

SubId = int | str


def clause_id(sid: int, k: int) -> int:
    """The id of clause ``k`` of the subscription with internal id ``sid``."""
    return sid << CLAUSE_BITS | k


def clause_parts(cid: int) -> tuple[int, int]:
    """The subscription's internal id and the clause's number in it."""
    return cid >> CLAUSE_BITS, cid & (CLAUSES_LIMIT - 1)


def clause_ids(sids: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """:func:`clause_id` over arrays (u64)."""
    return (sids.astype(np.uint64) << np.uint64(CLAUSE_BITS)) | ks.astype(np.uint64)


# -- the index's own records -------------------------------------------------------------


def root_record(txn: ReadTxn) -> dict[str, Any]:
    """The index's root record (tree root, counters, settings); a store that has an
    index but lost this record (its key damaged) is :class:`StoreDamaged`."""
    rec = txn.get_obj(NS, ROOT)
    if not isinstance(rec, dict):
        raise StoreDamaged("the index's root record is missing or malformed")
    return rec


def put_root(txn: WriteTxn, rec: dict[str, Any]) -> None:
    txn.put_obj(NS, ROOT, rec)


def load_schema(txn: ReadTxn) -> Any:
    """The stored schema document, or None in a store that holds no index yet."""
    return txn.get_obj(NS, SCHEMA)


def put_schema(txn: WriteTxn, doc: Any) -> None:
    txn.put_obj(NS, SCHEMA, doc)


def record_attributes(txn: ReadTxn) -> dict[str, list[str]]:
    """The attributes that have a PB+tree record and a direct-atoms record, as the root
    record lists them (``attributes``), so that matching can tell a record lost to a
    damaged key (keys carry no checksum; a scan would just not find it) from none.
    Cost: a scan of the two namespaces (one record per attribute): a bulk build's; a
    write keeps the lists up by :func:`attributes_after`."""
    return {
        "pbtrees": [key.decode("utf-8", "replace") for key, _ in txn.scan(PBTREE_NS)],
        "direct": [key.decode("utf-8", "replace") for key, _ in txn.scan(DIRECT)],
    }


def attributes_after(
    txn: ReadTxn, listed: Any, pbtrees: Iterable[str], direct: Mapping[str, bool]
) -> dict[str, list[str]]:
    """:func:`record_attributes` after a write, from the root record's lists before it
    (``listed``) and what the write left: the PB+trees it opened (a writer's are never
    dropped) and, per direct-atoms record it touched, whether it is still there.  Cost:
    a set per kind, sorted only when one came or went (the scan it saves: ~0.29 ms a
    write at 100K BEGen, 249 records, 17% of a ``subscribe``); lists of another shape
    (damage) are scanned again."""
    if not isinstance(listed, dict) or set(listed) != {"pbtrees", "direct"}:
        return record_attributes(txn)
    try:
        trees, directs = set(listed["pbtrees"]), set(listed["direct"])
        now_trees = trees.union(pbtrees)
        now_direct = directs.union(a for a, on in direct.items() if on)
        now_direct.difference_update(a for a, on in direct.items() if not on)
        if now_trees == trees and now_direct == directs:
            return {"pbtrees": listed["pbtrees"], "direct": listed["direct"]}
        return {  # (in key order, as a scan lists them)
            "pbtrees": sorted(now_trees, key=str.encode),
            "direct": sorted(now_direct, key=str.encode),
        }
    except TypeError:  # (not lists of names)
        return record_attributes(txn)


# -- subscriptions ---------------------------------------------------------------------------


def linked_record(txn: ReadTxn, ns: bytes, key: bytes, what: str) -> Any:
    """A record that another record names (so it must exist), decoded; a list of at
    least two items (``sub`` and ``atom`` records are).  Missing or of another shape, it
    is damage: :class:`StoreDamaged` naming ``what``."""
    found = txn.get_obj(ns, key)
    if not isinstance(found, list) or len(found) < 2:
        raise StoreDamaged(f"the record of {what} is missing or malformed")
    return found


def subscription_key(txn: ReadTxn, ident: SubId) -> bytes | None:
    """The internal id (encoded) of subscription ``ident``, or None."""
    return txn.get(EXT, codec.encode_id(ident))


def subscription_record(txn: ReadTxn, ident: SubId, sid_key: bytes) -> Any:
    """The ``sub`` record that the ``ext`` record of ``ident`` points at, which must be
    ``ident``'s: a damaged pointer (u64 values carry no checksum) would otherwise make
    ``unsubscribe`` delete, or ``explain`` describe, another subscription."""
    found = linked_record(txn, SUB, sid_key, f"subscription {ident!r}")
    if type(found[0]) is not type(ident) or found[0] != ident:
        raise StoreDamaged(f"the id record of {ident!r} points at {found[0]!r}'s subscription")
    return found


def subscriptions(txn: ReadTxn, expected: int | None = None) -> Iterator[tuple[SubId, str]]:
    """Every ``(id, expression)``, in insertion order: one cursor step and one small
    decode per subscription.

    A backup must be whole (``bexdb export``): a key out of order, or with ``expected``
    (the root record's count) a different number of records, raises
    :class:`~storage.errors.StoreDamaged` naming what was found (a flipped bit in a record
    key can end the scan early, or move a record out of its place)."""
    last, count = b"", 0
    for key, value in txn.scan(SUB):
        if key <= last and count:
            raise StoreDamaged(f"subscription records out of key order at {key.hex()}")
        last, count = key, count + 1
        ident, expr = codec.decode_value(value)[:2]
        yield ident, expr
    if expected is not None and count != expected:
        raise StoreDamaged(
            f"{count:,} subscription records found where the store counts {expected:,}"
        )


def subscription_records(
    txn: ReadTxn, expected: int | None = None
) -> Iterator[tuple[SubId, str, str | None]]:
    """:func:`subscriptions` with each one's metadata text (None: it has none): one get
    more per subscription when the store holds any metadata."""
    held = has_metas(txn)
    for ident, expr in subscriptions(txn, expected):
        yield ident, expr, load_meta(txn, ident) if held else None


def subscription_of(txn: ReadTxn, ident: SubId) -> tuple[str, str | None] | None:
    """The expression and metadata text of subscription ``ident``, or None."""
    sid = subscription_key(txn, ident)
    if sid is None:
        return None
    return str(subscription_record(txn, ident, sid)[1]), load_meta(txn, ident)


def has_metas(txn: ReadTxn) -> bool:
    """Whether any subscription has metadata (two cursor seeks)."""
    return next(txn.scan(META), None) is not None


def load_meta(txn: ReadTxn, ident: SubId) -> str | None:
    """The metadata text of subscription ``ident``, or None (:mod:`betree.disk.metadata`)."""
    found = txn.get_obj(META, codec.encode_id(ident))
    if found is not None and not isinstance(found, str):
        raise StoreDamaged(f"the metadata record of {ident!r} is not JSON text")
    return found


def put_meta(txn: WriteTxn, key: bytes, text: str | None) -> None:
    """Set (or with None, drop) the metadata record of the id key ``key``."""
    if text is None:
        txn.delete(META, key)
    else:
        txn.put_obj(META, key, text)


def subscriptions_by_id(txn: ReadTxn, after: SubId | None = None) -> Iterator[tuple[SubId, str]]:
    """Every ``(id, expression)`` in id order (the order of :func:`storage.codec.encode_id`:
    integers by value, then strings by their UTF-8 bytes), from the first id above
    ``after``: one cursor seek, then a cursor step and one record get per subscription."""
    start = b"" if after is None else codec.encode_id(after)
    for key, sid in txn.scan(EXT, start):
        if key != start:
            ident = codec.decode_id(key)
            yield ident, str(subscription_record(txn, ident, sid)[1])


def load_home(txn: ReadTxn, cid: int) -> int:
    """The c-node page whose l-node holds clause ``cid``."""
    home = txn.get(HOME, codec.encode_u64(cid))
    if home is None:
        raise StoreDamaged(f"clause {cid} has no home record")
    return codec.decode_u64(home)


def put_home(txn: WriteTxn, cid: int, page: int) -> None:
    txn.put(HOME, codec.encode_u64(cid), codec.encode_u64(page))


# -- atoms -------------------------------------------------------------------------------------


def atom_key(txn: ReadTxn, aid: int) -> bytes:
    """The canonical atom (the ``atom`` record's key) of atom id ``aid``."""
    key = txn.get(AID, codec.encode_u64(aid))
    if key is None:
        raise StoreDamaged(f"atom {aid} is missing from the catalog")
    return key


def load_atom(txn: ReadTxn, aid: int) -> Atom:
    """The atom with id ``aid`` from the catalog."""
    return atom_from_tuple(codec.decode_value(atom_key(txn, aid)))


def load_direct(txn: ReadTxn, attr: str) -> list[list[Any]]:
    """The direct atoms of ``attr`` as stored (``[[atom id, atom tuple], ...]``)."""
    return txn.get_obj(DIRECT, attr.encode()) or []


def put_direct(txn: WriteTxn, attr: str, parts: list[bytes]) -> None:
    """Store the direct atoms of ``attr``, each ``[atom id, atom tuple]`` packed alone
    (:func:`storage.codec.pack_part` or :func:`~storage.codec.pack_pair`): the record
    :func:`load_direct` reads (none: drop the record)."""
    if parts:
        txn.put(DIRECT, attr.encode(), codec.encode_parts(parts))
    else:
        txn.delete(DIRECT, attr.encode())
