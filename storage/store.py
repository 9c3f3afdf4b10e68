"""The store: one LMDB environment in a directory, holding every structure as pages.

Tables (LMDB named databases):

* ``meta``    — ``format`` (msgpack map: format version, settings), ``gen`` (u64, number
  of the last commit), ``next_page`` and ``next_space`` (u64 counters); ``retired`` (a
  msgpack map) once the environment has been replaced at its path (:meth:`Store.replacing`).
* ``pages``   — page key (:func:`storage.codec.page_key`) -> page value (header + envelope).
* ``records`` — records under a namespace; structures keep their roots and catalogues here
  (subscriptions, id maps, tree roots, atoms).  Layout (see "Long keys" below)::

      short   ns + b"\\0" + key                            -> value
      long    ns + b"\\1" + key[:head] + blake2b-256(key)   -> u32 len(key) + key + value

Long keys.  LMDB refuses keys over :data:`MAX_KEY` (511) bytes, yet ids, string constants,
in-lists (atom keys) and attribute names have no length limit (SPEC section 10).  A record
whose ``ns + b"\\0" + key`` fits is stored as it always was (stores written before long keys
existed read unchanged); a longer one is stored under the fixed-length key above
(``head = MAX_KEY - len(ns) - 1 - 32``: every long key is exactly 511 bytes) with its whole
key at the start of its value.  Namespaces never contain bytes 0 or 1, so the long range
``ns + b"\\1"`` belongs to ``ns`` alone and short-key walks never see it.  Why this layout:

* order is kept: long keys are all longer than ``head``, so two with different heads
  are stored in their real order; :meth:`ReadTxn.scan` sorts only runs of long keys that
  share their head, and merges the two ranges by the real key, so readers that assume
  sorted keys (``betree.check``) still can;
* the digest makes the key unique: two keys with one head and one 256-bit digest are a
  collision no one will meet (2**-128 even among 2**64 keys), so a record whose stored key
  does not lead back to where it is stored is damage: reads raise
  :class:`~storage.errors.StoreError`, :meth:`ReadTxn.check_records` reports it;
* chaining the key over several records was rejected: every read of a long key would
  cost several gets, and a record would no longer be one LMDB put.

:data:`FORMAT_VERSION` did not change with this layout: it only adds records that could not
be written before.  A bexdb from before it misses a store's long records (its ``verify``
reports the counts that disagree).

Transactions: any number of :meth:`Store.read` snapshots (threads and processes), one
:meth:`Store.write` at a time (LMDB's writer lock spans processes).  A write buffers the
pages it changes and writes each once at commit; records go straight to LMDB.  Every
write is logged so that when the map is full the transaction is replayed after growing
the map: callers never see ``MapFullError``.  A crash before commit leaves the previous
commit intact (LMDB's copy-on-write B+tree and meta-page flip).

Replacement: ``bexdb compact`` holds the writer lock from its copy to the swap of the
directories and leaves the old environment marked retired (:meth:`Store.replacing`), so no
commit lands where nobody will read it again: a write begun in a retired environment
raises :class:`~storage.errors.StoreReplaced`, and its caller reopens the path.

Costs: a page visit is a cache hit (~0.1 µs) or one LMDB get (1–2 µs) plus, if the page
changed since it was cached, one decode.  A durable commit is one fsync (~140 µs).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import re
import struct
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from itertools import chain, islice, takewhile
from operator import itemgetter
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import lmdb

from storage import codec, lmdbfile
from storage.cache import PageCache
from storage.errors import (
    CorruptPage,
    ShardedStore,
    StoreDamaged,
    StoreError,
    StoreFull,
    StoreReplaced,
    VersionMismatch,
)

#: Version of the store layout as a whole (tables, meta records, key layouts).
#: 2: page values carry a CRC-32 (:mod:`storage.codec`).
FORMAT_VERSION = 2
DEFAULT_MAP_SIZE = 1 << 40  # 1 TiB of address space; the file grows only as written
#: Decoded-page memory a store may hold: enough for the whole working set of a
#: million-subscription BEGen index (measured: 88K pages, 155 MB).
DEFAULT_CACHE_BYTES = 256 << 20
_MAX_MAP_SIZE = 1 << 46
#: The file that makes a directory a sharded store (owned by ``betree.sharded``); a plain
#: store is never opened, nor created, beside one.
SHARD_MANIFEST = "manifest.json"
#: Meta key marking an environment replaced at its path: no write may begin in it.
_RETIRED = b"retired"
#: LMDB's largest key (its default build, which py-lmdb bundles), part of the record layout:
#: longer record keys are stored under a digest (module docstring).
MAX_KEY = 511
_DIGEST = 32  # bytes of a long key's blake2b digest
_LEN = struct.Struct(">I")  # a long-key record's key length, at the start of its value
_SEPARATOR = re.compile(b"[\0\1]")  # ends a record key's namespace: short or long key


class PageNode(Protocol):
    """What a structure's decoded page must offer to be stored."""

    KIND: ClassVar[int]

    @classmethod
    def from_fields(cls, page: int, fields: list[Any]) -> Any: ...

    def to_fields(self) -> list[Any]: ...


N = TypeVar("N", bound=PageNode)


def _lmdb_error(exc: lmdb.Error, path: str) -> StoreError:
    """Translate one LMDB error into the project's hierarchy (done once, here)."""
    if isinstance(exc, lmdb.MapFullError):
        return StoreFull(f"store {path} is full", "open it with a larger map_size")
    if isinstance(exc, lmdb.ReadonlyError):
        return StoreError(f"store {path} is read-only", "open it with readonly=False")
    if isinstance(exc, lmdb.ReadersFullError):
        return StoreError(
            f"store {path}: too many concurrent readers", "open it with a larger max_readers"
        )
    if isinstance(exc, _DAMAGE):
        return StoreDamaged(f"{path}: LMDB reports {exc.__class__.__name__}: {exc}")
    return StoreError(f"store {path}: {exc}")


def _long_key(ns: bytes, key: bytes) -> bytes:
    """Where the record of a key too long for LMDB is stored: exactly :data:`MAX_KEY` bytes."""
    head = MAX_KEY - len(ns) - 1 - _DIGEST
    return ns + b"\1" + key[:head] + hashlib.blake2b(key, digest_size=_DIGEST).digest()


def _stored(ns: bytes, key: bytes, value: bytes) -> tuple[bytes, bytes]:
    """The LMDB key and value of a record (the layout in the module docstring)."""
    if len(ns) + 1 + len(key) <= MAX_KEY:
        return ns + b"\0" + key, value
    return _long_key(ns, key), _LEN.pack(len(key)) + key + value


#: LMDB errors that mean its own structures are broken.  ``BadTxnError`` follows an
#: earlier failure inside the same transaction (LMDB flags the transaction unusable);
#: ``PageNotFoundError`` a page number beyond the file's last page.
_DAMAGE = (
    lmdb.CorruptedError,
    lmdb.PanicError,
    lmdb.InvalidError,
    lmdb.BadTxnError,
    lmdb.PageNotFoundError,
    lmdb.VersionMismatchError,
    lmdb.IncompatibleError,
)


def _decode(page: int, raw: bytes | memoryview, cls: type[N]) -> N:
    """A page's node: envelope checks in :func:`storage.codec.decode_page`, then the
    structure's ``from_fields``, whose failures on fields of the wrong shape or type (the
    checksum held, yet the fields are not what the kind's layout says) are damage too."""
    fields = codec.decode_page(page, raw, cls.KIND)
    try:
        return cls.from_fields(page, fields)  # type: ignore[no-any-return]
    except (KeyError, IndexError, TypeError, ValueError, struct.error) as exc:
        raise CorruptPage(page, f"malformed fields ({exc.__class__.__name__}: {exc})") from exc


def _counter(txn: lmdb.Transaction, store: Store, name: bytes) -> int:
    raw = txn.get(name, db=store._meta)
    if raw is None:
        raise StoreDamaged(f"{store.path}: meta record {name.decode()} is missing")
    return codec.decode_u64(raw)


class ReadTxn:
    """A consistent snapshot.  Use through :meth:`Store.read`."""

    writable = False

    def __init__(self, store: Store, txn: lmdb.Transaction) -> None:
        self.store = store
        self._txn = txn
        self._pages = store._pages
        self._records = store._records
        self._cache = store.cache
        self.gen = _counter(txn, store, b"gen")

    # -- pages ---------------------------------------------------------------------

    def load(self, space: int, page: int, cls: type[N]) -> N:
        """The decoded page ``page`` of ``space``; shared, never to be mutated.

        Cost: a cache hit (no LMDB access when validated in this snapshot's generation),
        else one LMDB get, else one decode.
        """
        entry = self._cache.lookup(page)
        if entry is not None and entry[2] == self.gen and entry[0].KIND == cls.KIND:
            self._cache.hits += 1
            return entry[0]  # type: ignore[no-any-return]
        raw = self._raw(space, page)
        gen = codec.page_gen(raw)
        if entry is not None and entry[1] == gen and entry[0].KIND == cls.KIND:
            entry[2] = self.gen
            self._cache.hits += 1
            return entry[0]  # type: ignore[no-any-return]
        self._cache.misses += 1
        node = _decode(page, raw, cls)
        self._cache.publish(page, node, gen, self.gen, len(raw))
        return node

    def load_uncached(self, space: int, page: int, cls: type[N]) -> N:
        """Decode ``page`` from the snapshot, bypassing the cache (checks, post-mortems)."""
        return _decode(page, self._raw(space, page), cls)

    def _raw(self, space: int, page: int) -> bytes | memoryview:
        try:
            raw = self._txn.get(codec.page_key(space, page), db=self._pages)
        except lmdb.Error as exc:
            raise _lmdb_error(exc, self.store.path) from exc
        if raw is None:
            raise CorruptPage(page, f"missing from space {space}")
        return raw

    def page_gen(self, space: int, page: int) -> int:
        """The generation that last wrote a page (for checks and tests)."""
        return codec.page_gen(self._raw(space, page))

    def page_size(self, space: int, page: int) -> int:
        """Bytes of a page's value as stored."""
        return len(self._raw(space, page))

    def space_pages(self, space: int) -> Iterator[int]:
        """Ids of every page stored in ``space``, in order (one cursor walk over keys)."""
        prefix = codec.space_prefix(space)
        cursor = self._txn.cursor(db=self._pages)
        if not cursor.set_range(prefix):
            return
        for key in cursor.iternext(keys=True, values=False):
            if bytes(key[:4]) != prefix:
                break
            yield codec.split_page_key(bytes(key))[1]

    def page_kinds(self) -> dict[str, tuple[int, int]]:
        """Per page kind: ``(pages, stored bytes)`` — one cursor walk over every page."""
        out: dict[str, tuple[int, int]] = {}
        for _, value in self._txn.cursor(db=self._pages).iternext():
            name = codec.page_kind_name(value)
            n, size = out.get(name, (0, 0))
            out[name] = (n + 1, size + len(value))
        return out

    def spaces(self) -> dict[int, int]:
        """Page count per space present in the ``pages`` table."""
        counts: dict[int, int] = {}
        for key in self._txn.cursor(db=self._pages).iternext(keys=True, values=False):
            space = codec.split_page_key(bytes(key))[0]
            counts[space] = counts.get(space, 0) + 1
        return counts

    # -- records -------------------------------------------------------------------

    def get(self, ns: bytes, key: bytes) -> bytes | None:
        """The record ``key`` in namespace ``ns``, or None.

        Cost: one LMDB get; for a long key (module docstring), one digest (~1 µs a KB) too.
        """
        if len(ns) + 1 + len(key) <= MAX_KEY:
            value = self._txn.get(ns + b"\0" + key, db=self._records)
            return None if value is None else bytes(value)
        where = _long_key(ns, key)
        value = self._txn.get(where, db=self._records)
        return None if value is None else self._long_record(ns, where, value)[1]

    def _long_record(
        self, ns: bytes, where: bytes, value: bytes | memoryview
    ) -> tuple[bytes, bytes]:
        """``(key, value)`` of the long-key record stored at ``where``; refuses damage."""
        raw = bytes(value)
        size = _LEN.unpack_from(raw)[0] if len(raw) >= _LEN.size else -1
        key = raw[_LEN.size : _LEN.size + size]
        if size < 0 or len(key) != size:
            reason = "value too short for its key"
        elif len(ns) + 1 + size <= MAX_KEY or _long_key(ns, key) != where:
            reason = "stored key does not lead back to the record"
        else:
            return key, raw[_LEN.size + size :]
        raise StoreError(
            f"store {self.store.path} is damaged: {ns.decode(errors='replace')} record "
            f"{where[len(ns) + 1 : len(ns) + 25]!r}… (a long key): {reason}",
            "run `bexdb verify`; restore the store from a copy or rebuild it from its input",
        )

    def scan(self, ns: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Records of ``ns`` in key order from ``start``: ``(key, value)`` pairs.

        Cost: ~1 µs a record (keys are compared as bytes: slicing and comparing the
        snapshot's memoryviews cost 2.5 µs); one more cursor seek for the long keys, and
        when ``ns`` has some, a merge of the two ranges by key (``heapq.merge``).
        """
        short = self._scan_short(ns, start)
        longs = self._scan_long(ns, start)
        first = next(longs, None)
        if first is None:
            return short
        return heapq.merge(short, chain([first], longs), key=itemgetter(0))

    def _scan_short(self, ns: bytes, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        prefix = ns + b"\0"
        end, cut = ns + b"\1", len(prefix)  # every short key of ``ns`` sorts below ``end``
        cursor = self._txn.cursor(db=self._records)
        # a short key is at most MAX_KEY - cut bytes: it is >= a longer ``start`` iff it is
        # above ``start`` cut to that length
        skip = start[: MAX_KEY - cut] if len(start) > MAX_KEY - cut else None
        if not cursor.set_range(prefix + start[: MAX_KEY - cut]):
            return
        for key, value in cursor.iternext():
            whole = bytes(key)
            if whole >= end:
                break
            if whole[cut:] != skip:
                yield whole[cut:], bytes(value)

    def _scan_long(self, ns: bytes, start: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Long-key records of ``ns`` from ``start`` in key order: stored in order of
        their head, each run sharing one head sorted by key in memory."""
        prefix = ns + b"\1"
        end, cut = ns + b"\2", len(prefix)
        cursor = self._txn.cursor(db=self._records)
        if not cursor.set_range(prefix + start[: MAX_KEY - cut - _DIGEST]):
            return
        run: list[tuple[bytes, bytes]] = []
        head = b""
        for key, value in cursor.iternext():
            where = bytes(key)
            if where >= end:
                break
            if where[cut:-_DIGEST] != head:
                yield from sorted((r for r in run if r[0] >= start), key=itemgetter(0))
                run, head = [], where[cut:-_DIGEST]
            run.append(self._long_record(ns, where, value))
        yield from sorted((r for r in run if r[0] >= start), key=itemgetter(0))

    def scan_all(self, ns: bytes) -> tuple[list[bytes], list[bytes]]:
        """Every record of ``ns`` in key order, as its keys and its values (for bulk
        decoding: :func:`storage.codec.decode_u64s`, :func:`storage.codec.decode_values`)."""
        keys: list[bytes] = []
        values: list[bytes] = []
        for key, value in self.scan(ns):
            keys.append(key)
            values.append(value)
        return keys, values

    def count(self, ns: bytes) -> int:
        """Number of records in ``ns`` (a key-only cursor walk over each key range)."""
        total = 0
        for sep in (b"\0", b"\1"):
            end = ns + bytes([sep[0] + 1])
            cursor = self._txn.cursor(db=self._records)
            if cursor.set_range(ns + sep):
                keys = map(bytes, cursor.iternext(values=False))
                total += sum(1 for _ in takewhile(end.__gt__, keys))
        return total

    def get_obj(self, ns: bytes, key: bytes) -> Any:
        """A record decoded with :func:`storage.codec.decode_value`, or None."""
        value = self.get(ns, key)
        return None if value is None else codec.decode_value(value)

    def check_records(self) -> list[str]:
        """Violations of the record layout: every long-key record whose stored key does
        not lead back to where it is stored (module docstring), or whose key names no
        namespace.

        Cost: one cursor seek per namespace plus a read and a digest of each long-key
        record (short keys are skipped by ranges, not visited).
        """
        errors: list[str] = []
        cursor = self._txn.cursor(db=self._records)
        found = cursor.first()
        while found:
            where = bytes(cursor.key())
            sep = _SEPARATOR.search(where)
            if sep is None:
                errors.append(f"record {where[:40]!r}: its key names no namespace")
                found = cursor.next()
            elif where[sep.start()] == 0:
                found = cursor.set_range(where[: sep.start()] + b"\1")
            else:
                try:
                    self._long_record(where[: sep.start()], where, cursor.value())
                except StoreError as exc:
                    errors.append(exc.message)
                found = cursor.next()
        return errors


class WriteTxn(ReadTxn):
    """The one writer.  Use through :meth:`Store.write`; commits when the block ends."""

    writable = True

    def __init__(self, store: Store, txn: lmdb.Transaction) -> None:
        super().__init__(store, txn)
        self._dirty: dict[int, tuple[int, Any]] = {}  # page -> (space, node)
        self._freed: dict[int, int] = {}  # page -> space
        self._log: list[tuple[bytes, bytes | None]] = []  # record writes, for replay
        self._next_page = _counter(txn, store, b"next_page")
        self._next_space = _counter(txn, store, b"next_space")

    # -- pages ---------------------------------------------------------------------

    def load(self, space: int, page: int, cls: type[N]) -> N:
        dirty = self._dirty.get(page)
        if dirty is not None:
            return dirty[1]  # type: ignore[no-any-return]
        if page in self._freed:
            raise CorruptPage(page, "used after it was freed in this transaction")
        return super().load(space, page, cls)

    def load_uncached(self, space: int, page: int, cls: type[N]) -> N:
        dirty = self._dirty.get(page)
        if dirty is not None:
            return dirty[1]  # type: ignore[no-any-return]
        return super().load_uncached(space, page, cls)

    def load_mut(self, space: int, page: int, cls: type[N]) -> N:
        """A private, writable copy of a page, written back at commit."""
        dirty = self._dirty.get(page)
        if dirty is not None:
            return dirty[1]  # type: ignore[no-any-return]
        node = super().load_uncached(space, page, cls)
        self._dirty[page] = (space, node)
        return node  # type: ignore[no-any-return]

    def space_pages(self, space: int) -> Iterator[int]:
        """Pages of ``space`` as this transaction will commit them (dirty and freed)."""
        pages = set(super().space_pages(space)) - self._freed.keys()
        pages.update(page for page, (owner, _) in self._dirty.items() if owner == space)
        return iter(sorted(pages))

    def alloc(self) -> int:
        """A fresh page id (ids are never reused)."""
        page = self._next_page
        self._next_page += 1
        return page

    def put_new(self, space: int, page: int, node: PageNode) -> None:
        """Register a new node for ``page`` (from :meth:`alloc`), written at commit."""
        self._dirty[page] = (space, node)

    def mark_dirty(self, space: int, page: int, node: PageNode) -> None:
        """Make sure ``node`` (a private copy) is written back at commit."""
        self._dirty[page] = (space, node)

    def free(self, space: int, page: int) -> None:
        """Remove a page at commit."""
        self._dirty.pop(page, None)
        self._freed[page] = space

    def new_space(self) -> int:
        """A fresh space id for a new structure."""
        space = self._next_space
        self._next_space += 1
        return space

    def drop_space(self, space: int) -> int:
        """Free every page of ``space``; returns how many."""
        pages = list(self.space_pages(space))
        for page in pages:
            self.free(space, page)
        for page, (owner, _) in list(self._dirty.items()):
            if owner == space:
                del self._dirty[page]
        return len(pages)

    # -- records -------------------------------------------------------------------

    def put(self, ns: bytes, key: bytes, value: bytes) -> None:
        """Set a record."""
        self._apply(*_stored(ns, key, value))

    def put_obj(self, ns: bytes, key: bytes, value: Any) -> None:
        """Set a record to ``codec.encode_value(value)``."""
        self._apply(*_stored(ns, key, codec.encode_value(value)))

    def put_many(self, ns: bytes, keys: Iterable[bytes], values: Iterable[bytes]) -> None:
        """Set many records at once (one LMDB call; ~0.5 µs a record in key order)."""
        keys = list(keys)
        if max(map(len, keys), default=0) <= MAX_KEY - len(ns) - 1:
            pairs = list(zip(map((ns + b"\0").__add__, keys), values, strict=True))
        else:
            pairs = [_stored(ns, k, v) for k, v in zip(keys, values, strict=True)]
        self._log.extend(pairs)
        try:
            self._txn.cursor(db=self._records).putmulti(pairs)
        except lmdb.MapFullError:
            self._grow_and_replay()
        except lmdb.Error as exc:
            raise _lmdb_error(exc, self.store.path) from exc

    def delete(self, ns: bytes, key: bytes) -> None:
        """Remove a record (no error if absent)."""
        if len(ns) + 1 + len(key) <= MAX_KEY:
            self._apply(ns + b"\0" + key, None)
        else:
            self._apply(_long_key(ns, key), None)

    def _apply(self, key: bytes, value: bytes | None, log: bool = True) -> None:
        if log:
            self._log.append((key, value))
        try:
            if value is None:
                self._txn.delete(key, db=self._records)
            else:
                self._txn.put(key, value, db=self._records)
        except lmdb.MapFullError:
            self._grow_and_replay()
        except lmdb.Error as exc:
            raise _lmdb_error(exc, self.store.path) from exc

    def _grow_and_replay(self) -> None:
        """Abort, double the map, and redo every record write of this transaction."""
        self._txn.abort()
        self._txn = self.store._grow()
        for key, value in self._log:
            self._apply(key, value, log=False)

    # -- commit --------------------------------------------------------------------

    def _flush(self) -> None:
        """Write dirty pages, delete freed ones, advance counters; then commit."""
        gen = self.gen + 1
        encode, key = codec.encode_page, codec.page_key
        encoded = [
            (key(space, page), encode(gen, node.KIND, node.to_fields()))
            for page, (space, node) in self._dirty.items()
        ]  # once: a map that must grow retries the writes, not the encoding
        while True:
            try:
                txn, pages, meta = self._txn, self._pages, self.store._meta
                for page, space in self._freed.items():
                    txn.delete(codec.page_key(space, page), db=pages)
                txn.cursor(db=pages).putmulti(encoded)
                txn.put(b"gen", codec.encode_u64(gen), db=meta)
                txn.put(b"next_page", codec.encode_u64(self._next_page), db=meta)
                txn.put(b"next_space", codec.encode_u64(self._next_space), db=meta)
                txn.commit()
                break
            except lmdb.MapFullError:
                self._grow_and_replay()
            except lmdb.Error as exc:
                raise _lmdb_error(exc, self.store.path) from exc
        cache = self._cache
        for (page, (_, node)), (_, value) in zip(self._dirty.items(), encoded, strict=True):
            cache.publish(page, node, gen, gen, len(value))
        self.gen = gen


class Store:
    """An open store.  Create with :func:`open_store`; close (or use as a context)."""

    def __init__(
        self,
        path: str,
        env: lmdb.Environment,
        readonly: bool,
        cache_bytes: int,
        cache_pages: int | None,
    ) -> None:
        self.path = path
        self.env = env
        self.readonly = readonly
        self.cache = PageCache(cache_bytes, cache_pages)
        self._meta = env.open_db(b"meta", create=not readonly)
        self._pages = env.open_db(b"pages", create=not readonly)
        self._records = env.open_db(b"records", create=not readonly)
        self.settings: dict[str, Any] = {}

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the environment; open transactions must have ended."""
        self.env.close()

    @contextmanager
    def read(self) -> Iterator[ReadTxn]:
        """A read snapshot for the duration of the block."""
        txn = self._begin(write=False)
        try:
            yield ReadTxn(self, txn)
        except lmdb.Error as exc:  # from a cursor or get of the block: translated here once
            raise _lmdb_error(exc, self.path) from exc
        finally:
            txn.abort()

    @contextmanager
    def write(self) -> Iterator[WriteTxn]:
        """The write transaction; committed (durably) when the block exits normally.

        Waits for LMDB's writer lock (held by any other writer, in any process, and by a
        compaction for its whole copy).  Raises :class:`~storage.errors.StoreReplaced`,
        having written nothing, if this environment was retired by a compaction meanwhile:
        the caller reopens the path and redoes the write.  Checking costs one meta get
        (about 1 µs) per transaction.
        """
        if self.readonly:
            raise StoreError(f"store {self.path} was opened read-only", "open it writable")
        wtxn = WriteTxn(self, self._begin(write=True))
        try:
            yield wtxn
        except lmdb.Error as exc:
            wtxn._txn.abort()
            raise _lmdb_error(exc, self.path) from exc
        except BaseException:
            wtxn._txn.abort()
            raise
        wtxn._flush()

    def _begin(self, write: bool) -> lmdb.Transaction:
        """A new LMDB transaction; a write one only in an environment not retired.

        Every write transaction begins here (also the one a full map restarts in
        :meth:`_grow`, whose lock was released meanwhile), so every one checks the mark.
        """
        for _ in range(2):
            try:
                if not write:
                    return self.env.begin(buffers=True)
                txn = self.env.begin(write=True)
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)  # another process grew the map: adopt its size
                continue
            except lmdb.Error as exc:
                raise _lmdb_error(exc, self.path) from exc
            try:
                retired = txn.get(_RETIRED, db=self._meta)
            except lmdb.Error as exc:
                txn.abort()
                raise _lmdb_error(exc, self.path) from exc
            if retired is None:
                return txn
            txn.abort()
            info = codec.decode_value(bytes(retired))
            raise StoreReplaced(self.path, str(info.get("reason", "replaced")))
        raise StoreError(f"store {self.path}: cannot begin a transaction")

    @contextmanager
    def replacing(self, reason: str = "compacted") -> Iterator[ReadTxn]:
        """Hold the writer lock while this store's replacement is built and swapped in.

        For ``bexdb compact``: the block gets a read view of a write transaction, so what
        it copies (:meth:`copy_compact` with ``txn=``) is the last commit and no writer, in
        any process, can commit after it until the block ends.  The block swaps the copy in
        under the path; on its normal exit the mark ``retired`` is committed in the same
        transaction, and the lock released.  A writer that waited on the lock, or that has
        this environment open and writes later, then gets
        :class:`~storage.errors.StoreReplaced` (nothing written), reopens the path and
        finds the new store, which holds every commit made before the copy.  Readers of
        this environment keep reading it.  The block must put the replacement in place
        or raise; if it raises, the transaction is aborted: no mark, and writers carry on
        here.

        Cost: writers wait for the whole block (the copy, its check, the swap) instead of
        writing into a store about to be dropped.  The view must not be written through:
        this is not a :class:`WriteTxn`.  A process killed between the swap and the commit
        of the mark (a directory fsync and a commit apart) lets a writer that was waiting
        on the lock commit into the old environment; writers that open the path meanwhile
        get the new store.
        """
        if self.readonly:
            raise StoreError(f"store {self.path} was opened read-only", "open it writable")
        mark = codec.encode_value({"reason": reason, "pid": os.getpid()})
        txn = self._begin(write=True)
        while True:  # the mark is put first, while a full map can still grow: nothing
            try:  # is copied yet, so the lock may be let go (copies skip the mark)
                txn.put(_RETIRED, mark, db=self._meta)
                break
            except lmdb.MapFullError:
                txn.abort()
                txn = self._grow()
            except lmdb.Error as exc:
                txn.abort()
                raise _lmdb_error(exc, self.path) from exc
        try:
            yield ReadTxn(self, txn)
        except BaseException:
            txn.abort()
            raise
        try:
            txn.commit()
        except lmdb.Error as exc:
            raise StoreError(
                f"store {self.path} was replaced, but its old environment could not be "
                f"marked retired ({exc}): a process that still has it open may write there",
                "restart the writers that had the store open",
            ) from exc

    def _grow(self) -> lmdb.Transaction:
        size = self.env.info()["map_size"]
        if size >= _MAX_MAP_SIZE:
            raise StoreFull(f"store {self.path} is full at {size} bytes", "free disk space")
        self.env.set_mapsize(size * 2)
        return self._begin(write=True)

    def size_on_disk(self) -> int:
        """Bytes of the data file."""
        return os.path.getsize(lmdbfile.data_file(self.path))

    def copy_compact(
        self, path: str | os.PathLike[str], batch: int = 65536, *, txn: ReadTxn | None = None
    ) -> int:
        """Write a compacted copy of the store into the new directory ``path``.

        Every table is rewritten in key order with LMDB's append mode, so B-tree pages
        come out full and no free pages are carried over (LMDB's own compacting copy
        keeps the half-full pages that sequential inserts leave behind).  Reads ``txn``
        (the view of :meth:`replacing`, when the copy is to replace the store: then no
        commit can come after it), else a snapshot of its own, beside which readers and
        the writer carry on.  A ``retired`` mark is never copied.  Returns the new file's
        bytes.

        Cost: one cursor pass per table; MEASURED.md puts sorted appends at 0.3–3 M
        entries/s depending on value size.
        """
        target = Path(path)
        if lmdbfile.data_file(target).exists():
            raise StoreError(f"{target} already holds a store")
        target.mkdir(parents=True, exist_ok=True)
        size = max(self.env.info()["map_size"], 1 << 30)
        try:
            dst = lmdb.open(str(target), map_size=size, max_dbs=4, sync=False, readahead=False)
        except lmdb.Error as exc:
            raise _lmdb_error(exc, str(target)) from exc
        try:
            with ExitStack() as stack:
                src = (
                    txn._txn
                    if txn is not None
                    else stack.enter_context(self.env.begin(buffers=True))
                )
                for name, db in (
                    (b"meta", self._meta),
                    (b"pages", self._pages),
                    (b"records", self._records),
                ):
                    out_db = dst.open_db(name)
                    items = src.cursor(db=db).iternext()
                    if db is self._meta:
                        items = ((k, v) for k, v in items if bytes(k) != _RETIRED)
                    while True:
                        chunk = [(bytes(k), bytes(v)) for k, v in islice(items, batch)]
                        if not chunk:
                            break
                        with dst.begin(write=True, db=out_db) as out:
                            out.cursor().putmulti(chunk, append=True)
            dst.sync(True)
        except lmdb.Error as exc:
            raise _lmdb_error(exc, str(target)) from exc
        finally:
            dst.close()
        return os.path.getsize(lmdbfile.data_file(target))

    def sync(self) -> None:
        """Force commits made with ``sync=False`` to disk."""
        self.env.sync(True)

    def damage(self, limit: int = 100) -> list[str]:
        """What a full read of every table finds broken (for ``bexdb verify`` and before
        ``bexdb compact`` copies): LMDB errors while walking its B-trees, keys out of
        order (a damaged key: checksums cover values, not keys) or of lengths LMDB never
        stores, page keys of the wrong length, page values whose header or checksum does
        not hold.  At most ``limit`` findings.

        Cost: one cursor pass over every entry and a CRC-32 of every page (about 1 µs
        per 4 KB): a fraction of what the structures' own checks read.
        """
        found: list[str] = []
        longest = self.env.max_key_size()
        try:
            txn = self.env.begin(buffers=True)
        except lmdb.Error as exc:
            raise _lmdb_error(exc, self.path) from exc
        with txn:
            for name, db in (
                ("meta", self._meta),
                ("pages", self._pages),
                ("records", self._records),
            ):
                previous = b""
                try:
                    for key, value in txn.cursor(db=db).iternext():
                        whole = bytes(key)
                        if whole <= previous:  # a damaged key: LMDB lookups may miss it
                            found.append(f"table {name}: key {whole[:40]!r} out of order")
                        previous = whole
                        if not 0 < len(key) <= longest:  # LMDB never stores such a key
                            found.append(f"table {name}: a key of {len(key)} bytes")
                        elif db is self._pages:
                            why = (
                                f"a key of {len(key)} bytes"
                                if len(key) != codec.PAGE_KEY_SIZE
                                else codec.page_damage(value)
                            )
                            if why is not None:
                                found.append(f"table pages, key {bytes(key).hex()}: {why}")
                        if len(found) >= limit:
                            return found
                except lmdb.Error as exc:
                    found.append(f"table {name}: LMDB reports {exc.__class__.__name__}: {exc}")
        return found

    def stat(self) -> dict[str, Any]:
        """LMDB figures for ``bexdb inspect``: sizes, entries, pages in use and free.

        Free pages are the file's pages that no table uses (LMDB keeps them for reuse);
        a compacting copy (:meth:`copy_compact`) drops them.
        """
        info = self.env.info()
        main = self.env.stat()
        psize = main["psize"]
        used = 2 + sum(main[k] for k in ("branch_pages", "leaf_pages", "overflow_pages"))
        entries = {}
        with self.env.begin() as txn:
            for name, db in (
                ("meta", self._meta),
                ("pages", self._pages),
                ("records", self._records),
            ):
                st = txn.stat(db)
                entries[name] = st["entries"]
                used += st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
        file_pages = info["last_pgno"] + 1
        return {
            "psize": psize,
            "map_size": info["map_size"],
            "file_bytes": self.size_on_disk(),
            "used_pages": used,
            "free_pages": max(file_pages - used, 0),
            "entries": entries,
        }


def refuse_sharded(path: str | os.PathLike[str]) -> None:
    """Raise :class:`ShardedStore` if ``path`` is a sharded store, not one environment."""
    if os.path.exists(os.path.join(path, SHARD_MANIFEST)):
        raise ShardedStore(str(path))


def store_exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a plain store's environment (a sharded store is not one)."""
    return lmdbfile.data_file(path).exists()


def open_store(
    path: str | os.PathLike[str],
    readonly: bool = False,
    *,
    map_size: int = DEFAULT_MAP_SIZE,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    cache_pages: int | None = None,
    settings: dict[str, Any] | None = None,
    sync: bool = True,
    max_readers: int = 256,
) -> Store:
    """Open (or, unless ``readonly``, create) the store in directory ``path``.

    ``cache_bytes`` bounds the memory of decoded pages kept for readers (and
    ``cache_pages``, if given, their number).  ``settings`` are recorded in the meta
    record when the store is created and returned as ``store.settings`` on every open (a
    later open's ``settings`` are ignored: a store keeps the settings it was built with).
    ``sync=False`` trades durability of the last commits for speed (bulk loads call
    :meth:`Store.sync` once at the end).

    >>> with open_store(tmp) as store, store.write() as txn:  # doctest: +SKIP
    ...     txn.put(b"demo", b"k", b"v")
    """
    path = str(path)
    refuse_sharded(path)
    exists = store_exists(path)
    if readonly and not exists:
        raise StoreError(f"no store at {path}", "create it with `bexdb load` or `bexdb subscribe`")
    if not exists:
        Path(path).mkdir(parents=True, exist_ok=True)
    else:
        damage = lmdbfile.damage(path)  # before LMDB maps it: bad offsets are SIGBUS
        if damage is not None:
            raise StoreDamaged(f"{lmdbfile.data_file(path)}: {damage}")
    try:
        env = lmdb.open(
            path,
            map_size=map_size,
            max_dbs=4,
            readonly=readonly,
            readahead=False,
            sync=sync,
            max_readers=max_readers,
            lock=True,
        )
    except lmdb.Error as exc:
        raise _lmdb_error(exc, path) from exc
    try:
        store = Store(path, env, readonly, cache_bytes, cache_pages)
        _check_meta(store, settings or {})
    except lmdb.Error as exc:
        env.close()
        raise _lmdb_error(exc, path) from exc
    except BaseException:
        env.close()
        raise
    return store


def _check_meta(store: Store, settings: dict[str, Any]) -> None:
    """Create the meta record on a new store; refuse a store of another format."""
    with store.env.begin(db=store._meta) as rtxn:
        raw = rtxn.get(b"format")
    if raw is None:
        if store.readonly:
            raise StoreError(f"{store.path} is not a bexdb store (no meta record)")
        with store.env.begin(write=True, db=store._meta) as txn:
            if txn.get(b"format") is None:
                record = {"format": FORMAT_VERSION, "settings": settings}
                txn.put(b"format", codec.encode_format(record))
                txn.put(b"gen", codec.encode_u64(0))
                txn.put(b"next_page", codec.encode_u64(1))
                txn.put(b"next_space", codec.encode_u64(1))
            raw = txn.get(b"format")
    decoded = codec.decode_format(raw) if raw is not None else None
    meta: dict[str, Any] = decoded if isinstance(decoded, dict) else {}
    found = meta.get("format")
    if found != FORMAT_VERSION:
        raise VersionMismatch(
            f"store {store.path} has format version {found!r}; this bexdb reads version "
            f"{FORMAT_VERSION}",
            "open it with the bexdb release that wrote it, or rebuild it from its input",
        )
    store.settings = dict(meta.get("settings") or {})
