"""Transactions: consistent snapshots and the one writer, over the store's three tables.

Any number of :meth:`Store.read` snapshots (threads and processes), one
:meth:`Store.write` at a time (LMDB's writer lock spans processes).  A write buffers the
pages it changes and writes each once at commit; records go straight to LMDB.  Every
write is logged so that when the map is full the transaction is replayed after growing
the map: callers never see ``MapFullError``.  A crash before commit leaves the previous
commit intact (LMDB's copy-on-write B+tree and meta-page flip).

Records (the ``records`` table) live under a namespace; structures keep their roots and
catalogues there (subscriptions, id maps, tree roots, atoms).  Layout::

      short   ns + b"\\0" + key                            -> value
      long    ns + b"\\1" + key[:head] + blake2b-256(key)   -> u32 len(key) + key + value

Long keys.  LMDB refuses keys over :data:`MAX_KEY` (511) bytes, yet ids, string constants,
in-lists (atom keys) and attribute names have no length limit.  A record whose
``ns + b"\\0" + key`` fits is stored under it; a longer one under the fixed-length key
above (``head = MAX_KEY - len(ns) - 1 - 32``: every long key is exactly 511 bytes), with
its whole key at the start of its value.  Namespaces never contain bytes 0 or 1, so the long range
``ns + b"\\1"`` belongs to ``ns`` alone and short-key walks never see it.  Why this layout:

* order is kept: long keys are all longer than ``head``, so two with different heads
  are stored in their real order; :meth:`ReadTxn.scan` sorts only runs of long keys that
  share their head, and merges the two ranges by the real key, so readers that assume
  sorted keys (``betree.checking.check``) still can;
* the digest makes the key unique: two keys with one head and one 256-bit digest are a
  collision no one will meet (2**-128 even among 2**64 keys), so a record whose stored key
  does not lead back to where it is stored is damage: reads raise
  :class:`~storage.errors.StoreError`, :meth:`ReadTxn.check_records` reports it;
* chaining the key over several records was rejected: every read of a long key would
  cost several gets, and a record would no longer be one LMDB put.

Stores holding long keys are of format 2 (:data:`storage.store.FORMAT_VERSION`), which a
bexdb from before refuses.

Costs: a page visit is a cache hit (~0.1 µs) or one LMDB get (1–2 µs) plus, if the page
changed since it was cached, one decode.  A durable commit is one fsync (~140 µs).
"""

from __future__ import annotations

import hashlib
import heapq
import re
import struct
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice, takewhile
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import lmdb

from storage import codec
from storage.errors import CorruptPage, StoreDamaged, StoreError, StoreFull

if TYPE_CHECKING:
    from storage.store import Store

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
    def from_fields(cls, page: int, fields: Sequence[Any]) -> Any: ...

    def to_fields(self) -> list[Any]: ...


N = TypeVar("N", bound=PageNode)


def lmdb_error(exc: lmdb.Error, path: str) -> StoreError:
    """Translate one LMDB error into the project's hierarchy (done once, here)."""
    if isinstance(exc, lmdb.MapFullError):
        return StoreFull(f"store {path} is full", "open it with a larger map_size")
    if isinstance(exc, lmdb.ReadonlyError):
        return StoreError(f"store {path} is read-only", "open it with readonly=False")
    if isinstance(exc, lmdb.ReadersFullError):
        return StoreError(
            f"store {path}: too many concurrent readers", "open it with a larger max_readers"
        )
    if isinstance(exc, LMDB_DAMAGE):
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
LMDB_DAMAGE = (
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


def _writable(node: Any) -> Any:
    """A decoded node made fit for a writer: decoded fields are tuples, as the page cache
    keeps them (:func:`storage.codec.decode_page`), so a node whose class has a
    ``copy()`` (c-nodes, l-node pages) is copied into its writable form (~2 µs)."""
    copy = getattr(node, "copy", None)
    return node if copy is None else copy()


def _counter(txn: lmdb.Transaction, store: Store, name: bytes) -> int:
    raw = txn.get(name, db=store.meta_db)
    if raw is None:
        raise StoreDamaged(f"{store.path}: meta record {name.decode()} is missing")
    return codec.decode_u64(raw)


class ReadTxn:
    """A consistent snapshot.  Use through :meth:`Store.read`."""

    writable = False

    def __init__(self, store: Store, txn: lmdb.Transaction) -> None:
        self.store = store
        self._txn = txn
        self._pages = store.pages_db
        self._records = store.records_db
        self._cache = store.cache
        self.gen = _counter(txn, store, b"gen")

    @property
    def lmdb_txn(self) -> lmdb.Transaction:
        """The LMDB transaction under this one (for :meth:`Store.copy_compact`)."""
        return self._txn

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
            raise lmdb_error(exc, self.store.path) from exc
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

    def get_many(self, ns: bytes, keys: Sequence[bytes]) -> list[bytes | None]:
        """:meth:`get` of each of ``keys`` (best sorted): one LMDB cursor positioned on each
        in turn (~0.35 µs a key against ~0.45 for a get, and one Python call for all)."""
        prefix = ns + b"\0"
        cursor = self._txn.cursor(db=self._records)
        fits = MAX_KEY - len(prefix)
        return [
            (bytes(cursor.value()) if cursor.set_key(prefix + key) else None)
            if len(key) <= fits
            else self.get(ns, key)
            for key in keys
        ]

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
        raise StoreDamaged(
            f"{self.store.path}: {ns.decode(errors='replace')} record "
            f"{where[len(ns) + 1 : len(ns) + 25]!r}… (a long key): {reason}"
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
        decoding: :func:`storage.codec.decode_u64s`, :func:`storage.codec.decode_values`).

        Cost: when ``ns`` has no long keys (the common case), two C-level cursor passes,
        keys then values, about 0.3 µs a record (a loop over :meth:`scan`: ~0.8)."""
        if next(self._scan_long(ns, b""), None) is not None:
            keys: list[bytes] = []
            values: list[bytes] = []
            for key, value in self.scan(ns):
                keys.append(key)
                values.append(value)
            return keys, values
        prefix = ns + b"\0"
        end, cut = ns + b"\1", len(prefix)
        cursor = self._txn.cursor(db=self._records)
        if not cursor.set_range(prefix):
            return [], []
        found = list(takewhile(end.__gt__, map(bytes, cursor.iternext(values=False))))
        cursor.set_range(prefix)
        values = list(map(bytes, islice(cursor.iternext(keys=False), len(found))))
        return [key[cut:] for key in found], values

    def scan_chunks(self, ns: bytes, n: int) -> Iterator[tuple[list[bytes], list[bytes]]]:
        """:meth:`scan_all` in key order, at most ``n`` records at a time: a reader of a
        large namespace holds one chunk of Python bytes, not every record (a check's
        catalog pass: two million atoms, ~250 MB as lists).  ~0.5 µs a record."""
        if next(self._scan_long(ns, b""), None) is not None:
            pairs = self.scan(ns)
            while chunk := list(islice(pairs, n)):
                yield [k for k, _ in chunk], [v for _, v in chunk]
            return
        prefix = ns + b"\0"
        end, cut = ns + b"\1", len(prefix)
        cursor = self._txn.cursor(db=self._records)
        if not cursor.set_range(prefix):
            return
        items = cursor.iternext()  # (one iterator: each chunk goes on where the last ended)
        while True:
            keys: list[bytes] = []
            values: list[bytes] = []
            for key, value in islice(items, n):
                whole = bytes(key)
                if whole >= end:
                    break
                keys.append(whole[cut:])
                values.append(bytes(value))
            if keys:
                yield keys, values
            if len(keys) < n:
                return

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
        not lead back to where it is stored (module docstring), whose key names no
        namespace, or which is out of key order.

        Every step must move the cursor to a strictly greater key: a damaged LMDB branch
        key can send ``set_range`` back to where it started (it spun forever before), so
        a step that does not advance is reported and the walk goes on key by key
        (``next``, which follows the pages, not the keys), skipping what is not above
        the last key seen.  The walk ends after at most every stored key once.

        Cost: one cursor seek per namespace plus a read and a digest of each long-key
        record (short keys are skipped by ranges, not visited); on damage, one visit a key.
        """
        errors: list[str] = []
        cursor = self._txn.cursor(db=self._records)
        found, last, skip = cursor.first(), b"", True
        while found:
            where = bytes(cursor.key())
            if where <= last and last:
                errors.append(
                    f"record {where[:40]!r}: out of key order (after {last[:40]!r}); "
                    "a damaged key in the LMDB file"
                )
                skip = False  # walk key by key from here on
                found = cursor.next()
                continue
            last = where
            sep = _SEPARATOR.search(where)
            if sep is None:
                errors.append(f"record {where[:40]!r}: its key names no namespace")
            elif where[sep.start()] == 0:
                if skip:
                    found = cursor.set_range(where[: sep.start()] + b"\1")
                    continue
            else:
                try:
                    self._long_record(where[: sep.start()], where, cursor.value())
                except StoreError as exc:
                    errors.append(exc.message)
            found = cursor.next()
        return errors


class _Packed:
    """A dirty page given encoded (:meth:`WriteTxn.put_packed`)."""

    __slots__ = ("KIND", "value")

    def __init__(self, kind: int, value: bytes) -> None:
        self.KIND = kind
        self.value = value


class WriteTxn(ReadTxn):
    """The one writer.  Use through :meth:`Store.write`; commits when the block ends."""

    writable = True

    def __init__(self, store: Store, txn: lmdb.Transaction, *, replay: bool = True) -> None:
        super().__init__(store, txn)
        self._dirty: dict[int, tuple[int, Any]] = {}  # page -> (space, node)
        self._freed: dict[int, int] = {}  # page -> space
        # record writes, for replay when the map grows (None: not kept, see Store.write)
        self._log: list[tuple[bytes, bytes | None]] | None = [] if replay else None
        self._next_page = _counter(txn, store, b"next_page")
        self._next_space = _counter(txn, store, b"next_space")

    # -- pages ---------------------------------------------------------------------

    def load(self, space: int, page: int, cls: type[N]) -> N:
        dirty = self._dirty.get(page)
        if dirty is not None:
            return self._unpacked(page, dirty, cls)
        if page in self._freed:
            raise CorruptPage(page, "used after it was freed in this transaction")
        return super().load(space, page, cls)

    def load_uncached(self, space: int, page: int, cls: type[N]) -> N:
        dirty = self._dirty.get(page)
        if dirty is None:
            return super().load_uncached(space, page, cls)
        if type(dirty[1]) is _Packed:  # decoded for this reader, not kept: its class (a
            return _decode(page, dirty[1].value, cls)  # checker's) may not be the writer's
        return dirty[1]  # type: ignore[no-any-return]

    def load_mut(self, space: int, page: int, cls: type[N]) -> N:
        """A private, writable copy of a page, written back at commit.

        A node whose class has a ``copy()`` (a c-node, an l-node page) is the committed
        node, read as :meth:`ReadTxn.load` reads it (from the cache when it holds it),
        copied, not decoded again for the writer: a batch of 1,000 subscriptions into a
        1M store takes ~2,700 pages so (an LMDB get, a CRC and a decode each, ~10 µs,
        against a copy's ~2 µs)."""
        dirty = self._dirty.get(page)
        if dirty is not None:
            return self._unpacked(page, dirty, cls)
        node: Any
        if hasattr(cls, "copy"):  # the committed node, from the cache when it holds it
            node = _writable(super().load(space, page, cls))
        else:
            node = super().load_uncached(space, page, cls)
        self._dirty[page] = (space, node)
        return node  # type: ignore[no-any-return]

    def _unpacked(self, page: int, dirty: tuple[int, Any], cls: type[N]) -> N:
        """A dirty page's node; one given packed (:meth:`put_packed`) is decoded and kept as
        a node from now on."""
        node = dirty[1]
        if type(node) is _Packed:
            node = _writable(_decode(page, node.value, cls))
            self._dirty[page] = (dirty[0], node)
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

    def put_packed(self, space: int, page: int, kind: int, fields: list[Any]) -> None:
        """Register a new page (from :meth:`alloc`) given as its fields, encoded now.

        For bulk builds: the transaction holds the page's bytes (about what it takes on
        disk) instead of a node object of several times that, and does not publish it to
        the page cache at commit.  Reading it back in this transaction decodes it.
        """
        self._dirty[page] = (space, _Packed(kind, codec.encode_page(self.gen + 1, kind, fields)))

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

    def put_many(
        self, ns: bytes, keys: Iterable[bytes], values: Iterable[bytes], prefixed: bool = False
    ) -> None:
        """Set many records at once (one LMDB call; ~0.5 µs a record in key order).
        ``prefixed``: each key given with its namespace already before it (``ns + b"\\0" +
        key``: made so in numpy by a bulk writer, one bytes object a record fewer)."""
        keys = list(keys)
        if prefixed:
            if max(map(len, keys), default=0) <= MAX_KEY:
                pairs = list(zip(keys, values, strict=True))
            else:  # (a key too long for LMDB: stored by the layout's long form)
                keys = [key[len(ns) + 1 :] for key in keys]
                pairs = [_stored(ns, k, v) for k, v in zip(keys, values, strict=True)]
        elif max(map(len, keys), default=0) <= MAX_KEY - len(ns) - 1:
            pairs = list(zip(map((ns + b"\0").__add__, keys), values, strict=True))
        else:
            pairs = [_stored(ns, k, v) for k, v in zip(keys, values, strict=True)]
        if self._log is not None:
            self._log.extend(pairs)
        try:
            self._txn.cursor(db=self._records).putmulti(pairs)
        except lmdb.MapFullError:
            self._grow_and_replay()
        except lmdb.Error as exc:
            raise lmdb_error(exc, self.store.path) from exc

    def delete(self, ns: bytes, key: bytes) -> None:
        """Remove a record (no error if absent)."""
        if len(ns) + 1 + len(key) <= MAX_KEY:
            self._apply(ns + b"\0" + key, None)
        else:
            self._apply(_long_key(ns, key), None)

    def _apply(self, key: bytes, value: bytes | None, log: bool = True) -> None:
        if log and self._log is not None:
            self._log.append((key, value))
        try:
            if value is None:
                self._txn.delete(key, db=self._records)
            else:
                self._txn.put(key, value, db=self._records)
        except lmdb.MapFullError:
            self._grow_and_replay()
        except lmdb.Error as exc:
            raise lmdb_error(exc, self.store.path) from exc

    def _grow_and_replay(self) -> None:
        """Abort, double the map, and redo every record write of this transaction."""
        self._txn.abort()
        if self._log is None:
            size = self.store.env.info()["map_size"]
            raise StoreFull(
                f"store {self.store.path}: a write that keeps no replay log filled the map "
                f"({size} bytes); nothing was written",
                "open the store with a larger map_size",
            )
        self._txn = self.store.grow()
        for key, value in self._log:
            self._apply(key, value, log=False)

    # -- commit --------------------------------------------------------------------

    def abort(self) -> None:
        """Drop everything this transaction wrote (:meth:`Store.write` on an exception)."""
        self._txn.abort()

    def commit(self) -> None:
        """Write dirty pages, delete freed ones, advance counters; then commit.  Called by
        :meth:`Store.write` when its block ends normally."""
        gen = self.gen + 1
        encode, key = codec.encode_page, codec.page_key
        encoded = [
            (
                key(space, page),
                node.value if type(node) is _Packed else encode(gen, node.KIND, node.to_fields()),
            )
            for page, (space, node) in self._dirty.items()
        ]  # once: a map that must grow retries the writes, not the encoding
        while True:
            try:
                txn, pages, meta = self._txn, self._pages, self.store.meta_db
                for page, space in self._freed.items():
                    txn.delete(codec.page_key(space, page), db=pages)
                _put_pages(txn.cursor(db=pages), encoded)
                txn.put(b"gen", codec.encode_u64(gen), db=meta)
                txn.put(b"next_page", codec.encode_u64(self._next_page), db=meta)
                txn.put(b"next_space", codec.encode_u64(self._next_space), db=meta)
                txn.commit()
                break
            except lmdb.MapFullError:
                self._grow_and_replay()
            except lmdb.Error as exc:
                raise lmdb_error(exc, self.store.path) from exc
        cache = self._cache
        for (page, (_, node)), (_, value) in zip(self._dirty.items(), encoded, strict=True):
            if type(node) is not _Packed:
                cache.publish(page, node, gen, gen, len(value))
        self.gen = gen


def _put_pages(cursor: lmdb.Cursor, pairs: list[tuple[bytes, bytes]]) -> None:
    """Write page records in key order; those past the table's last key appended
    (``MDB_APPEND``).  Why: LMDB fills a leaf page only when appending; otherwise a split
    leaves each page half full, so a bulk build's ~1.7 KB pages went two to a 4 KB page and
    its pages table was twice its compacted size.  Costs a sort of the commit's keys."""
    ordered = sorted(pairs)
    last = bytes(cursor.key()) if cursor.last() else b""
    cut = bisect_right(ordered, last, key=itemgetter(0))
    if cut:
        cursor.putmulti(ordered[:cut])
    if cut < len(ordered):
        cursor.putmulti(ordered[cut:], append=True)
