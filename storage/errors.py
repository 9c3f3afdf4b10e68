"""The project's small error hierarchy.

Every error bexdb raises on purpose derives from :class:`BexdbError` and carries a
message and, where one exists, a hint for the fix.  LMDB's own exceptions are
translated into these once, at the storage edge (:mod:`storage.store`); nothing above
``storage`` ever sees an ``lmdb.Error``.
"""

from __future__ import annotations


class BexdbError(Exception):
    """Base of every error bexdb raises on purpose."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class StoreError(BexdbError):
    """The store cannot be opened, read or written."""


class VersionMismatch(StoreError):
    """The store (or one page) was written by another format version."""


class StoreFull(StoreError):
    """The LMDB map is full and may not grow further."""


class StoreReplaced(StoreError):
    """The store was replaced (compacted) while this process had it open.

    ``bexdb compact`` swaps a new directory in under the store's path and marks the old
    environment retired; a write begun on the old one (whose commits nobody would ever see
    again) raises this instead, before anything is written.  Reopen the path and redo the
    write.  Reading the old environment goes on working, at its last committed state.
    """

    def __init__(self, path: str, reason: str = "compacted") -> None:
        super().__init__(
            f"store {path} was replaced ({reason}) while open: nothing was written",
            "reopen it and retry",
        )
        self.path = path
        self.reason = reason


class ShardedStore(StoreError):
    """A plain store was expected where a sharded one (a manifest and its shards) lies.

    Raised before anything is opened or created, so nothing is written beside the
    manifest.  Sharded stores are opened with ``betree.stores.sharded.open_index``; ``reason``
    says why one refuses a write (one whose manifest does not route ids by bexdb's hash).
    """

    def __init__(self, path: str, reason: str | None = None) -> None:
        if reason is None:
            super().__init__(
                f"{path} is a sharded store (manifest.json and its shards), not one store",
                "open it with betree.stores.sharded.open_index(path) (as bexdb subscribe, match, "
                "explain, inspect and verify do)",
            )
        else:
            super().__init__(
                f"{path} is a sharded store that takes no writes: {reason}; nothing was written",
                "rebuild it with `bexdb load --replace --shards K`, which partitions by the hash",
            )
        self.path = path


#: What to do about a damaged store: the same advice wherever the damage shows.
RESTORE_HINT = (
    "restore the store from a copy, or rebuild it from its input with `bexdb load --replace`"
)


class StoreDamaged(StoreError):
    """What was read from disk is not what bexdb wrote: a page or record whose checksum,
    encoding or shape is wrong, an LMDB structure LMDB itself finds corrupt, a data file
    shorter than its own header says.

    Every decoding failure of stored bytes becomes this one error where the bytes are
    read (:mod:`storage.store`, :mod:`storage.codec`), so commands fail with one message
    and exit code (1) and ``bexdb verify`` reports it (exit 4) instead of a traceback.
    """

    def __init__(self, what: str, hint: str = RESTORE_HINT) -> None:
        super().__init__(f"store damaged: {what}", hint)
        self.what = what


class CorruptPage(StoreDamaged):
    """A page could not be decoded or is of an unexpected kind or version."""

    def __init__(self, page: int, reason: str) -> None:
        super().__init__(f"page {page}: {reason}")
        self.page = page
        self.reason = reason


class CheckFailed(BexdbError):
    """A structure's ``check()`` found broken invariants; ``violations`` lists them all."""

    def __init__(self, what: str, violations: list[str]) -> None:
        head = f"{what}: {len(violations)} violation(s)"
        super().__init__(head + "".join(f"\n  - {v}" for v in violations))
        self.violations = violations


class InvalidInput(BexdbError):
    """User input (an expression, an event, a key, a schema) is not acceptable."""

    def __init__(self, message: str, column: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.column = column
