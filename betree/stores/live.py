"""A store kept open at its path across replacements, and writes redone when one overtakes them.

``bexdb compact`` and ``bexdb load --replace`` put a new store in place of the old one
(:func:`storage.swap.swap_in`).  A reader notices by the inode of the store's data file or
manifest (:func:`storage.swap.identity`) and reopens the path; a writer that had the old
store open gets :class:`StoreReplaced` at its next write, having written nothing, and the
write is redone once in the reopened store (:func:`write_reopening`), so that no
acknowledged write is lost.  A second replacement within one write is reported: it is
raised again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from betree.index import Index, SubId
from betree.lang.schema import Schema
from betree.stores.sharded import AnyIndex, ShardedIndex, is_sharded, open_index
from storage.errors import StoreReplaced
from storage.store import store_exists
from storage.swap import creating, identity, identity_probes

T = TypeVar("T")


def write_reopening(write: Callable[[Any], T], index_of: Callable[[bool], Any]) -> T:
    """``write(index_of(False))``, redone once in ``index_of(True)`` (the path reopened)
    if the store was replaced meanwhile.  Costs nothing unless it happens."""
    try:
        return write(index_of(False))
    except StoreReplaced:
        pass
    return write(index_of(True))


class LiveIndex:
    """The store now at ``path``, plain or sharded, reopened when it has been replaced.

    Cost per :meth:`current`: one ``stat`` (about 2 µs) while the store stays the same.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, **options: Any
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.options = options
        self.opened: Index | ShardedIndex | None = None
        self.ident: tuple[int, int] | None = None
        self.probes = identity_probes(self.path)

    def current(self, reopen: bool = False) -> Index | ShardedIndex:
        """The open store, reopened if the path names another one now.

        ``reopen``: whatever the inode says (the store open here was found retired).
        While a replacement is half-way (the old store renamed away, the new one not yet
        in: only where :func:`storage.swap.swap_in` cannot exchange them) the old one is
        kept.  The old one is closed before the new one is opened: py-lmdb (3.0 and later)
        refuses a second environment whose files it has open, and the files it records for
        one opened during a swap may be the new store's.  A store that cannot be opened
        raises, and the next call tries again.
        """
        ident = identity(self.probes)
        if self.opened is not None and not reopen and (ident is None or ident == self.ident):
            return self.opened
        self.close()  # first: one environment of a path at a time (py-lmdb 3 refuses two)
        self.opened = open_index(self.path, readonly=self.readonly, **self.options)
        self.ident = ident
        return self.opened

    def writable(self, reopen: bool = False) -> AnyIndex:
        """The store, to write with its methods (``subscribe_many``, ``unsubscribe_many``...:
        a sharded one's raise :class:`ShardedStore` if its ids cannot be routed)."""
        return self.current(reopen)

    def write(self, write: Callable[[AnyIndex], T]) -> T:
        """``write(index)``, redone once if a replacement overtook it (module docstring)."""
        return write_reopening(write, self.writable)

    def close(self) -> None:
        if self.opened is not None:
            self.opened.close()
            self.opened = None

    def __enter__(self) -> LiveIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_subscriptions(
    path: str | os.PathLike[str],
    items: Sequence[Sequence[Any]],
    schema: Any = None,
) -> list[bool]:
    """Insert or replace ``items`` (``(id, expr)`` or ``(id, expr, meta)``) in the store at
    ``path``, all in one transaction; per item, whether it was new (``bexdb subscribe``).

    A missing store is created (with ``schema``, else one inferred from ``items``) and
    published only if every item goes in (:func:`storage.swap.creating`): a failed first
    write leaves nothing behind.  A write overtaken by a replacement is redone
    (:func:`write_reopening`).  A sharded store takes the batch all or nothing across its
    shards (:mod:`betree.stores.shardwrite`).
    """
    if store_exists(path) or is_sharded(path):
        with LiveIndex(path, schema=schema) as live:
            return live.write(lambda idx: idx.subscribe_many(items))
    if schema is None:
        schema = Schema.infer((item[0], item[1]) for item in items)
    with creating(Path(path)) as staging, Index.open(staging, schema=schema) as idx:
        return idx.subscribe_many(items)


def delete_subscriptions(path: str | os.PathLike[str], ids: Sequence[SubId]) -> None:
    """Delete ``ids`` from the store at ``path``, all or nothing: if one is absent, none is
    deleted and the absent ones are named (:class:`InvalidInput`, ``bexdb unsubscribe``)."""
    with LiveIndex(path) as live:
        live.write(lambda idx: idx.unsubscribe_many(ids, strict=True))
