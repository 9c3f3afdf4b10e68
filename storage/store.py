"""The store: one LMDB environment in a directory, holding every structure as pages.

Tables (LMDB named databases):

* ``meta``    — ``format`` (msgpack map: format version, settings), ``gen`` (u64, number
  of the last commit), ``next_page`` and ``next_space`` (u64 counters); ``retired`` (a
  msgpack map) once the environment has been replaced at its path (:meth:`Store.replacing`).
* ``pages``   — page key (:func:`storage.codec.page_key`) -> page value (header + envelope).
* ``records`` — records under a namespace (layout: :mod:`storage.txn`).

Replacement: ``bexdb compact`` holds the writer lock from its copy to the swap of the
directories and leaves the old environment marked retired (:meth:`Store.replacing`), so no
commit lands where nobody will read it again: a write begun in a retired environment
raises :class:`~storage.errors.StoreReplaced`, and its caller reopens the path.

Opening checks the data file against LMDB's own meta pages before mapping it
(:mod:`storage.lmdbfile`: a short file would be a SIGBUS).  Transactions and the record
layout: :mod:`storage.txn`.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import lmdb

from storage import codec, lmdbfile
from storage.cache import PageCache
from storage.errors import (
    ShardedStore,
    StoreDamaged,
    StoreError,
    StoreFull,
    StoreReplaced,
    VersionMismatch,
)
from storage.txn import ReadTxn, WriteTxn, lmdb_error

#: Version of the store layout as a whole (tables, meta records, key layouts).
#: 2: page values carry a CRC-32 (:mod:`storage.codec`).
FORMAT_VERSION = 2
DEFAULT_MAP_SIZE = 1 << 40  # 1 TiB of address space; the file grows only as written
#: Decoded-page memory a store may hold: enough for the whole working set of a
#: million-subscription BEGen index (measured: 88K pages, 155 MB).
DEFAULT_CACHE_BYTES = 256 << 20
_MAX_MAP_SIZE = 1 << 46
#: The file that makes a directory a sharded store (owned by ``betree.stores.sharded``); a plain
#: store is never opened, nor created, beside one.
SHARD_MANIFEST = "manifest.json"
#: The LMDB engine every environment is opened with: LMDB 0.9's data format, the one
#: :mod:`storage.lmdbfile` checks.  py-lmdb 3 also bundles LMDB 1.0 (another format) and
#: picks it for new files when ``LMDB_DEFAULT_LIB_VERSION=1`` is set; older py-lmdb has
#: only 0.9 and no such argument.
try:
    lmdb.version(lib_version=0)
    ENGINE: dict[str, Any] = {"lib_version": 0}
except TypeError:
    ENGINE = {}
#: Meta key marking an environment replaced at its path: no write may begin in it.
_RETIRED = b"retired"
#: madvise(2) and its advice dropping a range's pages from this process's map (Linux)
_MADV_DONTNEED = 4


def _libc_madvise() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_madvise = _libc_madvise()


def _mapped(st: os.stat_result) -> list[tuple[int, int]]:
    """The address ranges where this process maps the file ``st`` describes."""
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and int(fields[4]) == st.st_ino:
                major, minor = (int(x, 16) for x in fields[3].split(":"))
                if os.makedev(major, minor) == st.st_dev:
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    found.append((start, end))
    return found


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
        self.meta_db = env.open_db(b"meta", create=not readonly)
        self.pages_db = env.open_db(b"pages", create=not readonly)
        self.records_db = env.open_db(b"records", create=not readonly)
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
            raise lmdb_error(exc, self.path) from exc
        finally:
            txn.abort()

    @contextmanager
    def write(self, *, replay: bool = True) -> Iterator[WriteTxn]:
        """The write transaction; committed (durably) when the block exits normally.

        ``replay`` False (bulk builds into a fresh store): the transaction keeps no copy of
        its record writes (as many as the store has records) to redo them when the map must
        grow; a full map is then :class:`~storage.errors.StoreFull`, having written nothing
        (the default map, 1 TiB of address space, is not filled by a load this machine holds).

        Waits for LMDB's writer lock (held by any other writer, in any process, and by a
        compaction for its whole copy).  Raises :class:`~storage.errors.StoreReplaced`,
        having written nothing, if this environment was retired by a compaction meanwhile:
        the caller reopens the path and redoes the write.  Checking costs one meta get
        (about 1 µs) per transaction.
        """
        if self.readonly:
            raise StoreError(f"store {self.path} was opened read-only", "open it writable")
        wtxn = WriteTxn(self, self._begin(write=True), replay=replay)
        try:
            yield wtxn
        except lmdb.Error as exc:
            wtxn.abort()
            raise lmdb_error(exc, self.path) from exc
        except BaseException:
            wtxn.abort()
            raise
        wtxn.commit()

    def _begin(self, write: bool) -> lmdb.Transaction:
        """A new LMDB transaction; a write one only in an environment not retired.

        Every write transaction begins here (also the one a full map restarts in
        :meth:`grow`, whose lock was released meanwhile), so every one checks the mark.
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
                raise lmdb_error(exc, self.path) from exc
            try:
                retired = txn.get(_RETIRED, db=self.meta_db)
            except lmdb.Error as exc:
                txn.abort()
                raise lmdb_error(exc, self.path) from exc
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
                txn.put(_RETIRED, mark, db=self.meta_db)
                break
            except lmdb.MapFullError:
                txn.abort()
                txn = self.grow()
            except lmdb.Error as exc:
                txn.abort()
                raise lmdb_error(exc, self.path) from exc
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

    def grow(self) -> lmdb.Transaction:
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

        Cost: one cursor pass per table, O(entries) appends in key order (their rates:
        docs/bench/README.md, "Building blocks").
        """
        target = Path(path)
        if lmdbfile.data_file(target).exists():
            raise StoreError(f"{target} already holds a store")
        target.mkdir(parents=True, exist_ok=True)
        size = max(self.env.info()["map_size"], 1 << 30)
        try:
            dst = lmdb.open(
                str(target), map_size=size, max_dbs=4, sync=False, readahead=False, **ENGINE
            )
        except lmdb.Error as exc:
            raise lmdb_error(exc, str(target)) from exc
        try:
            with ExitStack() as stack:
                # a snapshot of its own yields bytes (copied by LMDB's binding, in C); the
                # caller's view yields buffers, copied here
                src = (
                    txn.lmdb_txn
                    if txn is not None
                    else stack.enter_context(self.env.begin(buffers=False))
                )
                for name, db in (
                    (b"meta", self.meta_db),
                    (b"pages", self.pages_db),
                    (b"records", self.records_db),
                ):
                    out_db = dst.open_db(name)
                    items = src.cursor(db=db).iternext()
                    if txn is not None:
                        items = ((bytes(k), bytes(v)) for k, v in items)
                    if db is self.meta_db:
                        items = ((k, v) for k, v in items if k != _RETIRED)
                    while True:
                        chunk = list(islice(items, batch))
                        if not chunk:
                            break
                        with dst.begin(write=True, db=out_db) as out:
                            out.cursor().putmulti(chunk, append=True)
            dst.sync(True)
        except lmdb.Error as exc:
            raise lmdb_error(exc, str(target)) from exc
        finally:
            dst.close()
        return os.path.getsize(lmdbfile.data_file(target))

    def release_mapped_pages(self) -> bool:
        """Drop this process's mapping of the store's pages read so far (``madvise`` with
        ``MADV_DONTNEED`` over LMDB's map of the data file, found in ``/proc/self/maps``:
        LMDB does not say where it mapped it); whether it could.

        The pages stay in the kernel's page cache and are mapped again, unchanged, when
        next read (the map is the file's, shared and read-only): what a one-off pass over
        the whole store (``check()``) leaves counted in the process's resident memory
        goes, and nothing else changes.  Measured: the python load's ``check()`` of a
        dense 100K store kept ~420 MB of the store's pages resident to its end
        (docs/bench/dense-load, denseload41).  Elsewhere than Linux: nothing.
        """
        if _madvise is None:
            return False
        try:
            ranges = _mapped(os.stat(lmdbfile.data_file(self.path)))
        except OSError:
            return False
        return bool(ranges) and all(
            _madvise(start, end - start, _MADV_DONTNEED) == 0 for start, end in ranges
        )

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
            raise lmdb_error(exc, self.path) from exc
        with txn:
            for name, db in (
                ("meta", self.meta_db),
                ("pages", self.pages_db),
                ("records", self.records_db),
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
                        elif db is self.pages_db:
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
                ("meta", self.meta_db),
                ("pages", self.pages_db),
                ("records", self.records_db),
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
            **ENGINE,
        )
    except lmdb.Error as exc:
        raise lmdb_error(exc, path) from exc
    try:
        store = Store(path, env, readonly, cache_bytes, cache_pages)
        _check_meta(store, settings or {})
    except lmdb.Error as exc:
        env.close()
        raise lmdb_error(exc, path) from exc
    except BaseException:
        env.close()
        raise
    return store


def _check_meta(store: Store, settings: dict[str, Any]) -> None:
    """Create the meta record on a new store; refuse a store of another format."""
    with store.env.begin(db=store.meta_db) as rtxn:
        raw = rtxn.get(b"format")
    if raw is None:
        if store.readonly:
            raise StoreError(f"{store.path} is not a bexdb store (no meta record)")
        with store.env.begin(write=True, db=store.meta_db) as txn:
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
