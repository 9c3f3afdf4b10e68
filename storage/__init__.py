"""Physical storage: one LMDB environment holding every structure as pages.

Public surface: :func:`open_store`, :class:`Store`, the transaction classes, and the
error hierarchy.  Only this package imports ``lmdb`` and ``msgpack``.
"""

from storage.errors import (
    BexdbError,
    CheckFailed,
    CorruptPage,
    InvalidInput,
    ShardedStore,
    StoreDamaged,
    StoreError,
    StoreFull,
    StoreReplaced,
    VersionMismatch,
)
from storage.store import FORMAT_VERSION, Store, open_store
from storage.txn import ReadTxn, WriteTxn

__all__ = [
    "FORMAT_VERSION",
    "BexdbError",
    "CheckFailed",
    "CorruptPage",
    "InvalidInput",
    "ReadTxn",
    "ShardedStore",
    "Store",
    "StoreDamaged",
    "StoreError",
    "StoreFull",
    "StoreReplaced",
    "VersionMismatch",
    "WriteTxn",
    "open_store",
]
