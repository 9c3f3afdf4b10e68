"""Sharded stores, and one open for plain and sharded stores alike (:func:`open_index`).

A sharded store (``bexdb load --shards K``) is a directory of K independent, complete stores
(each with its own copy of the schema) plus a manifest::

    TARGET/manifest.json   {"format": "bexdb-shards", "version": 1,
                            "shards": [{"path": "shard-0000", "subscriptions": N}, ...],
                            "subscriptions": total, "partitioning": {...}}
    TARGET/shard-0000/     a plain store, as `bexdb load` would build alone
    TARGET/shard-0001/     ...

Subscriptions are split by a stable hash of their id, so each id lives in exactly one shard
and a match is the union of the shards' matches.  ``partitioning`` records the hash
(:data:`HASH`: :func:`shard_of` over the id key of :func:`storage.codec.encode_id`, which
the Spark load routes records by), so that a writer can route an id to its shard
(:func:`shard_for`).
Why shards rather than one big store: the K stores are built by K Spark tasks at once (the
batch build of one store is single-threaded), and can sit on different disks.

Callers use :func:`open_index`, which returns the same interface (:class:`AnyIndex`) for
both kinds (a plain store's :class:`Index` itself), and :func:`verify`, which checks every
shard and the manifest and reports all violations once.  Writes to a sharded store (routed
by :data:`HASH`, all-or-nothing across shards, recovered after a crash) are
:mod:`betree.stores.shardwrite`'s; :attr:`AnyIndex.writable` says whether a store opened
takes them.

>>> with open_index("store/") as store:  # doctest: +SKIP
...     store.match({"price": 26})
[5, 's1']
"""

from __future__ import annotations

import fcntl
import heapq
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from betree.disk.catalog import SubId
from betree.disk.metadata import item_meta, with_metas
from betree.disk.nodes import listed
from betree.index import Index, event_values, gc_paused
from betree.lang.schema import Schema
from betree.matching.batch import match_batch
from betree.packed.joined import Joined
from betree.packed.views import JoinedViews
from betree.stores import shardwrite
from betree.stores.manifest import (  # re-exported: the routing of sharded stores' callers
    FORMAT as FORMAT,
)
from betree.stores.manifest import HASH as HASH
from betree.stores.manifest import MANIFEST as MANIFEST
from betree.stores.manifest import VERSION as VERSION
from betree.stores.manifest import is_routed
from betree.stores.manifest import is_sharded as is_sharded
from betree.stores.manifest import read_manifest as read_manifest
from betree.stores.manifest import shard_name as shard_name
from betree.stores.manifest import shard_of as shard_of
from betree.stores.manifest import store_paths as store_paths
from betree.stores.manifest import write_manifest as write_manifest
from betree.stores.verifying import misplaced, shard_violations
from betree.stores.verifying import verify as verify  # re-exported: the commands' verify
from storage.codec import encode_id
from storage.errors import (
    CheckFailed,
    InvalidInput,
    ShardedStore,
    StoreError,
    StoreReplaced,
)
from storage.lmdbfile import data_file
from storage.store import DEFAULT_CACHE_BYTES
from storage.txn import ReadTxn

Matcher = Callable[[Mapping[str, object]], list[SubId]]


class AnyIndex(Protocol):
    """What the commands and the service need from a store, plain (:class:`Index` itself)
    or sharded (:class:`ShardedIndex`): the one interface :func:`open_index` returns."""

    @property
    def schema(self) -> Schema: ...  # as of the last snapshot (Engine.schema_in)

    @property
    def indexes(self) -> list[Index]:
        """The open :class:`Index` of each plain store inside (itself for a plain store)."""
        ...

    @property
    def writable(self) -> bool:
        """Whether the write methods work (a store opened writable; a sharded one also
        partitioned by :data:`HASH`)."""
        ...

    @property
    def index(self) -> Index:
        """The one writable :class:`Index`; raises :class:`ShardedStore` for a sharded one."""
        ...

    def add_to_schema(self, doc: Any) -> dict[str, list[str]]:
        """Add attributes or change hints (:mod:`betree.disk.schemaedit`), in every shard
        or none."""
        ...

    def snapshot(self) -> AbstractContextManager[Matcher]:
        """A context manager giving a :data:`Matcher` over one consistent read snapshot."""
        ...

    def match(self, event: Mapping[str, object]) -> list[SubId]: ...

    def match_many(self, events: Sequence[object]) -> list[list[SubId] | InvalidInput]:
        """One result per event, in order, in one snapshot: its ids, or the
        :class:`InvalidInput` it failed validation with (:meth:`Index.match_many`)."""
        ...

    def match_many_arrays(self, events: Sequence[object]) -> list[np.ndarray | InvalidInput]:
        """:meth:`match_many` with each event's ids as one numpy array
        (:meth:`Index.match_many_arrays`)."""
        ...

    def subscribe(self, ident: SubId, expr: str, meta: Any = None) -> bool: ...

    def subscribe_many(self, items: Iterable[Sequence[Any]]) -> list[bool]:
        """:meth:`Index.subscribe_many`: items ``(id, expr)`` or ``(id, expr, meta)``."""
        ...

    def record(self, ident: SubId) -> tuple[str, str | None] | None:
        """The expression and metadata text (None: none) of a subscription, or None."""
        ...

    def records(self) -> Iterator[tuple[SubId, str, str | None]]:
        """:meth:`subscriptions` with each one's metadata text (``bexdb export``)."""
        ...

    def match_many_meta(self, events: Sequence[object]) -> list[Any]:
        """:meth:`match_many` with ``(id, metadata text or None)`` per id, read in the
        snapshot matched (:meth:`Index.match_many_meta`)."""
        ...

    def unsubscribe(self, ident: SubId) -> bool: ...

    def unsubscribe_many(self, idents: Iterable[SubId], *, strict: bool = False) -> list[bool]: ...

    def expression(self, ident: SubId) -> str | None: ...

    def explain(self, ident: SubId, event: Mapping[str, object]) -> dict[str, Any]:
        """:meth:`Index.explain` in the store holding ``ident`` (with ``"shard"`` when
        sharded)."""
        ...

    def stats(self) -> list[tuple[str | None, dict[str, Any]]]:
        """:meth:`Index.stats` of each plain store inside, with its shard name (or None)."""
        ...

    def subscriptions(self) -> Iterator[tuple[SubId, str]]:
        """Every ``(id, expression)`` as given (``bexdb export``)."""
        ...

    def page(self, after: SubId | None, limit: int) -> list[tuple[SubId, str]]:
        """Up to ``limit`` ``(id, expression)`` in id order from the first id above
        ``after`` (:func:`betree.disk.catalog.subscriptions_by_id`; ``GET /subscriptions``)."""
        ...

    def check(self) -> None: ...

    def size_on_disk(self) -> int: ...

    def close(self) -> None: ...

    def generations(self) -> tuple[int, ...]:
        """Every shard's latest committed generation, as a match begun now sees it."""
        ...

    def __len__(self) -> int: ...

    def __enter__(self) -> AnyIndex: ...

    def __exit__(self, *exc: object) -> None: ...


class ShardedIndex:
    """Every shard of a sharded store, matched as one: the union of the shards' answers.

    Cost of a match: one match per shard (each over a K-th of the subscriptions), plus
    building the union; the shards hold disjoint ids, so the union is a concatenation.
    Writes (opened with ``readonly=False``, on a store partitioned by :data:`HASH`): the
    methods of :class:`Index`, each call one batch, all-or-nothing across shards
    (:mod:`betree.stores.shardwrite`).
    """

    def __init__(
        self,
        root: Path,
        manifest: dict[str, Any],
        shards: list[Index],
        readonly: bool = True,
        options: dict[str, Any] | None = None,
    ) -> None:
        # beside the facade, the state shard_for, betree.streams.rewind and tests read: root,
        # routed (ids partitioned by HASH), idents (each shard's as opened), join
        self.root = root
        self._manifest = manifest
        self._indexes = shards
        self._names: list[str] = [entry["path"] for entry in manifest["shards"]]
        self._readonly = readonly
        self._options = dict(options or {})
        self.routed = is_routed(manifest)
        self._takes_writes = self.routed and not readonly
        self.idents = [_inode(root / name) for name in self._names]
        #: each shard's data file, as a string: :meth:`_refresh` stats them every snapshot
        #: (16 shards: 36 µs of CPU, against 137 with the paths joined each time)
        self._files = [os.fspath(data_file(root / name)) for name in self._names]
        self._root_ident = _root_inode(root)
        #: the shards' packed views joined, while every shard holds its own (betree.packed.joined)
        self.join: Joined | None = None
        for index in shards:
            index.engine.before_lean = self._release_pages

    @classmethod
    def open(
        cls, root: str | os.PathLike[str], *, readonly: bool = True, **options: Any
    ) -> ShardedIndex:
        """Open every shard (writable unless ``readonly``), having first completed a batch
        that a killed writer left half-applied (:mod:`betree.stores.shardwrite`).

        ``cache_bytes`` (of :func:`storage.store.open_store`) bounds the decoded pages of
        the whole store: each of the K shards gets a K-th of it (at least 1 MiB), so that a
        process holding a sharded store (``bexdb serve --cache-mb``, a matcher) is bounded
        as one holding a plain store is.
        """
        base = Path(root)
        manifest = read_manifest(base)
        budget = options.get("cache_bytes", DEFAULT_CACHE_BYTES)
        options = {**options, "cache_bytes": max(budget // len(manifest["shards"]), 1 << 20)}
        if shardwrite.has_journal(base):
            recover(base, manifest, **options)
        shards: list[Index] = []
        # each shard's schema read while no batch is being applied (a schema change is one
        # batch in every shard: opened midway, the shards would seem to disagree)
        try:
            with shardwrite.reading(base) if is_routed(manifest) else nullcontext():
                for entry in manifest["shards"]:
                    shards.append(Index.open(base / entry["path"], readonly=readonly, **options))
            first = shards[0].schema
            for entry, index in zip(manifest["shards"], shards, strict=True):
                if index.schema != first:
                    raise StoreError(
                        f"{base}: shard {entry['path']} has another schema than the first",
                        "run `bexdb verify`; rebuild the store with `bexdb load`",
                    )
            names = [entry["path"] for entry in manifest["shards"]]
            wrong = misplaced(shards, names) if is_routed(manifest) else None
            if wrong is not None:
                raise StoreError(
                    f"{base}: {wrong}",
                    "restore the shards' order in manifest.json, then run `bexdb verify`",
                )
        except BaseException:
            for index in shards:
                index.close()
            raise
        return cls(base, manifest, shards, readonly, options)

    @property
    def indexes(self) -> list[Index]:
        """The open :class:`Index` of each shard, in manifest order."""
        return self._indexes

    @property
    def writable(self) -> bool:
        """Whether the write methods work: opened writable, partitioned by :data:`HASH`."""
        return self._takes_writes

    @property
    def index(self) -> Index:
        raise ShardedStore(str(self.root))

    @property
    def schema(self) -> Schema:
        return self.indexes[0].schema

    def add_to_schema(self, doc: Any) -> dict[str, list[str]]:
        """Add attributes or change hints in all shards or none (betree.disk.schemaedit)."""
        with self._write_locked():
            return shardwrite.change_schema(self.root, self._shard, len(self.indexes), doc)

    @contextmanager
    def _write_locked(self) -> Iterator[None]:
        """Steps 1-2 of betree.stores.shardwrite, and every shard's schema as now committed."""
        self._writable()
        with shardwrite.locked(self.root, shardwrite.WRITE_LOCK, fcntl.LOCK_EX):
            self._still_here()
            self._refresh()
            self._recover()
            for index in self.indexes:
                index.engine.refresh_schema()
            yield

    # -- writing (betree.stores.shardwrite) ------------------------------------------------------

    def subscribe(self, ident: SubId, expr: str, meta: Any = None) -> bool:
        """Insert (or replace) one subscription in its shard.  True if it was new."""
        return self.subscribe_many([(ident, expr, meta)])[0]

    def subscribe_many(self, items: Iterable[Sequence[Any]]) -> list[bool]:
        """Insert or replace subscriptions, each in its shard, all or nothing (one batch);
        items ``(id, expr)`` or ``(id, expr, meta)`` (:mod:`betree.disk.metadata`).

        Every expression is compiled before anything is written; an error names the
        subscription id and changes nothing.
        """
        items = list(items)
        metas = [item_meta(item) for item in items]
        # one pause of the collector for the whole batch, so one young pass at its end,
        # not one a shard written as well (each pass counts towards a full one: ~30 ms of
        # a 1,000-subscription batch into 1M, docs/bench/live/README.md)
        with self._write_locked(), gc_paused():
            routes: list[int] = []  # (each item's shard, its id's key made once)
            clauses = []
            for item in items:  # step 2: every expression compiled, in its shard
                routes.append(self._route(item[0]))
                compiler = self._shard(routes[-1], False).engine.compiler()
                clauses.append(compiler.compile(item[0], item[1]))
            if not items:
                return []
            ops = [
                ["put", item[0], item[1]] + ([] if meta is None else [meta])
                for item, meta in zip(items, metas, strict=True)
            ]
            return shardwrite.write_batch(self.root, self._shard, self._route, ops, clauses, routes)

    def unsubscribe(self, ident: SubId) -> bool:
        """Delete one subscription; False if there was none with that id."""
        return self.unsubscribe_many([ident])[0]

    def unsubscribe_many(self, idents: Iterable[SubId], *, strict: bool = False) -> list[bool]:
        """Delete subscriptions, all in one batch; per id, whether it existed.

        With ``strict``, an absent id (or one named twice) deletes nothing:
        :class:`InvalidInput` names every absent one.
        """
        idents = list(idents)
        with self._write_locked():
            for ident in idents:
                encode_id(ident)  # validates it
            if strict:
                seen: set[bytes] = set()

                def present(ident: SubId) -> str | None:
                    key = encode_id(ident)
                    found = None if key in seen else self.expression(ident)
                    seen.add(key)
                    return found

                shardwrite.missing(idents, present)
            if not idents:
                return []
            ops = [["delete", ident] for ident in idents]
            return shardwrite.write_batch(self.root, self._shard, self._route, ops)

    def _writable(self) -> None:
        if not self.routed:
            raise ShardedStore(
                str(self.root),
                "its manifest does not partition ids by bexdb's hash, so a write cannot "
                "know the shard of an id",
            )
        if self._readonly:
            raise StoreError(
                f"sharded store {self.root} was opened read-only",
                "open it with open_index(path, readonly=False)",
            )

    def _route(self, ident: SubId) -> int:
        return shard_of(encode_id(ident), len(self.indexes))

    def _shard(self, i: int, reopen: bool) -> Index:
        """Shard ``i``; with ``reopen``, opened again at its path (it was compacted)."""
        if reopen:
            self._reopen(i)
        return self.indexes[i]

    def _reopen(self, i: int) -> None:
        """Close shard ``i``, then open its path (one environment of a path at a time:
        :meth:`betree.stores.live.LiveIndex.current`)."""
        self.indexes[i].close()
        self.idents[i] = None
        path = self.root / self._names[i]
        self.indexes[i] = Index.open(path, readonly=self._readonly, **self._options)
        self.indexes[i].engine.before_lean = self._release_pages
        self.idents[i] = _inode(path)

    def _release_pages(self) -> None:
        """Before one shard builds a lean view (:attr:`betree.engine.Engine.before_lean`):
        every shard's decoded pages let go, and the others' views made due at their next
        match (their walks cost as much: built now, not after walks that would decode
        pages again among the lean view's arrays, left fragmented once they go)."""
        for index in self.indexes:
            index.engine.store.cache.clear()
            index.engine.flat.walked(index.engine.flat.walk_seconds)

    def _still_here(self) -> None:
        """Under the writer lock: :class:`StoreReplaced` (nothing written) if another
        store was put at the root since it was opened (``bexdb load --replace``, which
        holds the old root's lock while it swaps: :func:`betree.stores.maintain.retiring`)."""
        if _root_inode(self.root) != self._root_ident:
            raise StoreReplaced(str(self.root), "replaced by a load")

    def _reading(self) -> AbstractContextManager[None]:
        """No batch applied meanwhile (only stores that take writes have one to wait for)."""
        return shardwrite.reading(self.root) if self.routed else nullcontext()

    def generations(self) -> tuple[int, ...]:
        """Every shard's latest generation as :meth:`snapshot` would take it: compacted
        shards reopened first, read while no batch is being applied.  Cost: a ``stat`` and
        a read transaction per shard."""
        self._refresh()
        with self._reading():
            found = []
            for index in self.indexes:
                with index.store.read() as txn:
                    found.append(txn.gen)
        return tuple(found)

    def _refresh(self) -> None:
        """Reopen each shard compacted since it was opened (a new data file at its path)."""
        for i, file in enumerate(self._files):
            if _file_inode(file) not in (None, self.idents[i]):
                self._reopen(i)

    def _recover(self) -> None:
        """Complete a killed writer's batch (the caller holds the writer lock)."""
        shardwrite.redo(self.root, self._shard)  # no journal: a failed read and an unlink

    def _holder(self, ident: SubId) -> int | None:
        """The shard holding ``ident``, or None: the one it routes to, else a search."""
        routed = shard_for(self, ident)
        candidates = range(len(self.indexes)) if routed is None else [routed]
        return next((i for i in candidates if self.indexes[i].expression(ident) is not None), None)

    @contextmanager
    def snapshot(self) -> Iterator[Matcher]:
        """One read snapshot of every shard, begun while no batch is being applied.

        A shard compacted since it was opened (a new data file at its path: one ``stat``
        per shard) is reopened first, so that writes made in the new one are seen.
        """
        self._refresh()
        with ExitStack() as stack:
            with self._reading():
                txns = [(index, stack.enter_context(index.store.read())) for index in self.indexes]
            for index, txn in txns:
                index.engine.schema_in(txn)
            views = self._views(txns)

            def match(values: Mapping[str, object]) -> list[SubId]:
                if views is not None:
                    return views.match(values)
                out: list[SubId] = []
                for index, txn in txns:
                    out.extend(index.engine.match(txn, values))
                return out

            yield match

    def _views(self, txns: list[tuple[Index, ReadTxn]]) -> JoinedViews | None:
        """The strategy of the shards' base views joined, when every shard holds one for its
        snapshot (:mod:`betree.packed.joined`; kept while they last), each shard's delta
        since applied (:class:`betree.packed.views.JoinedViews`); None: match shard by shard."""
        parts = [index.engine.held_view(txn) for index, txn in txns]
        held = [p for p in parts if p is not None]
        if len(held) < len(parts):
            self.join = None
            return None
        if self.join is None or not self.join.holds(parts):
            self.join = Joined(held)
        first = self.indexes[0].engine
        deltas = [p.delta for p in held]
        return JoinedViews(self.join, deltas, [txn for _, txn in txns], first.ranging, first.types)

    def match(self, event: Mapping[str, object]) -> list[SubId]:
        with self.snapshot() as match:
            return match(self.schema.validate_event(event))

    def match_many(self, events: Sequence[object]) -> list[list[SubId] | InvalidInput]:
        """:meth:`Index.match_many` of every shard, their snapshots begun together as in
        :meth:`snapshot`, joined per event (the shards hold disjoint ids: a concatenation).
        Events are validated once, in the schema of a snapshot begun just before."""
        self.indexes[0].engine.refresh_schema()
        return match_batch(events, self._validate, partial(self._match_valid, True))

    def match_many_arrays(self, events: Sequence[object]) -> list[np.ndarray | InvalidInput]:
        self.indexes[0].engine.refresh_schema()
        return match_batch(events, self._validate, partial(self._match_valid, False))

    def match_many_meta(self, events: Sequence[object]) -> list[Any]:
        self.indexes[0].engine.refresh_schema()
        return match_batch(events, self._validate, partial(self._match_valid, None))

    def _validate(self, event: object) -> Mapping[str, object]:
        return event_values(self.schema, event)

    def _match_valid(self, lists: bool | None, valid: list[Mapping[str, object]]) -> list[Any]:
        """Each valid event's ids (as lists, or arrays); ``lists`` None: as lists of
        ``(id, metadata text)`` read in the snapshots matched (betree.disk.metadata)."""
        self._refresh()
        with ExitStack() as stack:
            with self._reading():  # begun while no batch is being applied, as snapshot()
                txns = [(index, stack.enter_context(index.store.read())) for index in self.indexes]
            views = self._views(txns)
            shard_txns = [txn for _, txn in txns]
            if views is not None:
                found = views.match_many(valid)
                self.indexes[0].engine.note(views)  # (what bexdb serve's metrics read)
            else:
                parts = [index.engine.match_many(txn, valid) for index, txn in txns]
                found = [np.concatenate(ids) for ids in zip(*parts, strict=True)]
            if lists is None:
                route = self._route if self.routed else None
                return with_metas(shard_txns, route, listed(found, True))
        return listed(found, lists)

    def expression(self, ident: SubId) -> str | None:
        shard = self._holder(ident)
        return None if shard is None else self.indexes[shard].expression(ident)

    def record(self, ident: SubId) -> tuple[str, str | None] | None:
        shard = self._holder(ident)
        return None if shard is None else self.indexes[shard].record(ident)

    def explain(self, ident: SubId, event: Mapping[str, object]) -> dict[str, Any]:
        shard = self._holder(ident)
        if shard is None:
            raise InvalidInput(f"no subscription {ident!r} in any of {len(self.indexes)} shards")
        return {**self.indexes[shard].explain(ident, event), "shard": self._names[shard]}

    def stats(self) -> list[tuple[str | None, dict[str, Any]]]:
        return [
            (name, counts)
            for name, index in zip(self._names, self.indexes, strict=True)
            for _, counts in index.stats()
        ]

    def subscriptions(self) -> Iterator[tuple[SubId, str]]:
        """Every ``(id, expression)``, shard after shard (each shard in one snapshot)."""
        for index in self.indexes:
            yield from index.subscriptions()

    def records(self) -> Iterator[tuple[SubId, str, str | None]]:
        for index in self.indexes:
            yield from index.records()

    def page(self, after: SubId | None, limit: int) -> list[tuple[SubId, str]]:
        """Each shard's page, read while no batch is applied, merged by id: ``limit``
        records read per shard."""
        self._refresh()
        with self._reading():
            pages = [index.page(after, limit) for index in self.indexes]
        return list(islice(heapq.merge(*pages, key=lambda item: encode_id(item[0])), limit))

    def check(self) -> None:
        self._refresh()
        with self._reading():
            violations, _ = shard_violations(self.root, self._manifest, self.indexes)
        if violations:
            raise CheckFailed(f"sharded store {self.root}", violations)

    def size_on_disk(self) -> int:
        return sum(index.store.size_on_disk() for index in self.indexes)

    def close(self) -> None:
        for index in self.indexes:
            index.close()

    def __len__(self) -> int:
        with self._reading():  # no batch half-counted
            return sum(len(index) for index in self.indexes)

    def __enter__(self) -> ShardedIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_index(
    path: str | os.PathLike[str], *, readonly: bool = True, **options: Any
) -> Index | ShardedIndex:
    """Open a plain or a sharded store (``options`` go to :meth:`Index.open`).

    ``readonly=False`` opens a plain store writable (creating it if ``options`` hold a
    schema), a sharded one writable (taking writes if partitioned by :data:`HASH`).
    """
    if is_sharded(path):
        return ShardedIndex.open(path, readonly=readonly, **options)
    return Index.open(path, readonly=readonly, **options)


def shard_for(store: Index | ShardedIndex, ident: SubId) -> int | None:
    """Where ``ident`` belongs in ``store.indexes``: in a sharded store partitioned by
    :data:`HASH`, :func:`shard_of` of its id key; in one split some other way None (any
    shard may hold it); in a plain store 0, its one index.  Cost: one hash."""
    if not isinstance(store, ShardedIndex):
        return 0
    return store._route(ident) if store.routed else None


def recover(root: Path, manifest: dict[str, Any], *, held: bool = False, **options: Any) -> bool:
    """Complete the batch a killed writer left (:mod:`betree.stores.shardwrite`, step 6), under
    the writer lock (``held``: the caller holds it), with the shards opened writable for
    the while; True if there was one."""
    with ExitStack() as stack:
        if not held:
            stack.enter_context(shardwrite.locked(root, shardwrite.WRITE_LOCK, fcntl.LOCK_EX))
        opened: dict[int, Index] = {}

        def close() -> None:
            for index in opened.values():
                index.close()

        stack.callback(close)

        def shard(i: int, reopen: bool) -> Index:
            if reopen and i in opened:
                opened.pop(i).close()
            if i not in opened:
                opened[i] = Index.open(root / manifest["shards"][i]["path"], **options)
            return opened[i]

        return shardwrite.redo(root, shard)


def _root_inode(root: Path) -> tuple[int, int] | None:
    """What names the sharded store at ``root``: its manifest's device and inode."""
    return _file_inode(root / MANIFEST)


def _inode(store: Path) -> tuple[int, int] | None:
    """What names the plain store (a shard) at ``store``: its data file's."""
    return _file_inode(data_file(store))


def _file_inode(file: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(file)
    except OSError:
        return None
    return st.st_dev, st.st_ino
