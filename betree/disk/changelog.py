"""The change log: what each commit added and removed, for readers that keep a packed view.

A reader's packed view (:mod:`betree.packed.flat`) describes one snapshot; rebuilding it after
every write costs the whole store (~1.2 s a shard at 10M).  Instead a reader keeps an
older view as a base and reads from this log what was written since
(:mod:`betree.packed.delta`).  The writer (:meth:`betree.disk.writer.Writer.finish`) appends one
entry per commit that changed subscriptions.

Layout: namespace :data:`LOG` (``log``), key the entry's sequence number (u64), value
(msgpack) ``[removed, added, expressions]``:

* ``removed``: ``[[sid, external id], ...]``, the subscriptions deleted (a replaced one
  is deleted, then added under a new internal id);
* ``added``: ``[[sid, external id, clauses], ...]``, each clause as the atom ids of its
  ``sub`` record (``[0]`` for the empty conjunction).  A subscription added and then removed
  (or replaced) within one commit is in both lists.
* ``expressions``: ``[text, ...]``, one per item of ``removed``, in its order: the removed
  subscription's expression as its ``sub`` record held it, so that a reader can still
  evaluate what a subscription removed since its pinned state answered
  (:mod:`betree.streams.rewind`: its atom ids may have been freed and reused meanwhile).
  Entries written before it existed are ``[removed, added]`` and still read
  (:func:`read`: no texts).

The root record's ``log_next`` is the next entry's number (absent: no entry yet).  Only
the last :data:`KEEP` entries are kept (appending one drops the one ``KEEP`` before it);
a reader whose base is older rebuilds it.  Internal ids are never reused, so an entry's
``removed`` sids are absent from the ``sub`` records for good, and an ``added`` sid still
present has exactly the record the entry says (:func:`check_log`).

Cost: one record put and one delete per commit, of ~40 bytes a subscription written (and
its expression's text for a deletion).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from betree.disk import catalog
from storage import codec
from storage.txn import ReadTxn, WriteTxn

LOG = b"log"
#: entries kept; a base view more commits behind is rebuilt rather than caught up
KEEP = 256

Removed = list[list[Any]]
Added = list[list[Any]]
#: one entry's ``(removed, added)``
Change = tuple[Removed, Added]


class Entry(NamedTuple):
    """One commit's entry; ``expressions`` parallels ``removed`` (None: an entry written
    before the log kept them)."""

    removed: Removed
    added: Added
    expressions: list[str] | None


def append(
    txn: WriteTxn, rec: dict[str, Any], removed: Removed, added: Added, expressions: list[str]
) -> None:
    """Append one commit's entry (the caller writes ``rec``, the root record, after);
    ``expressions``: the text of each subscription of ``removed``."""
    if len(expressions) != len(removed):
        raise ValueError("one expression per removed subscription")
    seq = int(rec.get("log_next", 0))
    txn.put_obj(LOG, codec.encode_u64(seq), [removed, added, expressions])
    rec["log_next"] = seq + 1
    if seq >= KEEP:
        txn.delete(LOG, codec.encode_u64(seq - KEEP))


def entry(txn: ReadTxn, seq: int) -> Change | None:
    """Entry ``seq``, or None if it is no longer kept (or malformed: then the reader
    rebuilds from the pages, and :func:`check_log` reports it)."""
    found = read(txn, seq)
    return None if found is None else (found.removed, found.added)


def read(txn: ReadTxn, seq: int) -> Entry | None:
    """Entry ``seq`` with its removed subscriptions' expressions, or None as :func:`entry`."""
    found = txn.get_obj(LOG, codec.encode_u64(seq))
    if not _well_formed(found):
        return None
    return Entry(found[0], found[1], found[2] if len(found) == 3 else None)


def _well_formed(found: Any) -> bool:
    if not isinstance(found, list) or len(found) not in (2, 3):
        return False
    removed, added = found[:2]
    if len(found) == 3:
        texts = found[2]
        if not (
            isinstance(texts, list)
            and len(texts) == len(removed)
            and all(isinstance(t, str) for t in texts)
        ):
            return False
    return (
        isinstance(removed, list)
        and isinstance(added, list)
        and all(isinstance(r, list) and len(r) == 2 and isinstance(r[0], int) for r in removed)
        and all(
            isinstance(a, list)
            and len(a) == 3
            and isinstance(a[0], int)
            and isinstance(a[2], list)
            and all(isinstance(c, list) and c for c in a[2])
            for a in added
        )
    )


def check_log(txn: ReadTxn, rec: dict[str, Any]) -> list[str]:
    """The log's violations: entries outside the kept range, malformed ones (among them
    ``expressions`` not one text per removed subscription), a removed
    subscription still present, an added one present with another record."""
    errors: list[str] = []
    end = int(rec.get("log_next", 0))
    for key, value in txn.scan(LOG):
        seq = codec.decode_u64(key)
        if not max(0, end - KEEP) <= seq < end:
            errors.append(f"change log entry {seq} is outside the kept range [.., {end})")
            continue
        found = codec.decode_value(value)
        if not _well_formed(found):
            errors.append(f"change log entry {seq} is malformed")
            continue
        for sid, ident in found[0]:
            if txn.get(catalog.SUB, codec.encode_u64(sid)) is not None:
                errors.append(f"change log entry {seq}: removed subscription {ident!r} is present")
        for sid, ident, clauses in found[1]:
            sub = txn.get_obj(catalog.SUB, codec.encode_u64(sid))
            if sub is not None and (sub[0] != ident or sub[2] != clauses):
                errors.append(f"change log entry {seq}: added {ident!r} differs from its record")
    return errors
