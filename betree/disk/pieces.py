"""A batch build's writes committed in pieces, so that no write transaction outgrows a budget.

A write transaction holds every page it dirties until its commit (LMDB's dirty pages, and
the encoded copies :meth:`storage.txn.WriteTxn.commit` hands it), so one commit of a whole
batch build holds about the raw store's size at its end (dense 100K: ~750 MB on top of the
batch).  :class:`Pieces` commits whenever the bytes written since the last commit reach its
``limit`` and begins the next transaction; after a commit LMDB reuses the freed pages for
the next piece, so the build's writes cost about one piece.

Only for a fresh store that nothing reads until the build ends: a loader builds into a
staging directory and publishes it (renames) only after the whole build, ``check()`` and
the compacting copy (:mod:`loaders.records`), so a crash between two pieces leaves an
unpublished staging store, never a half-built published one.  The root record (subscription
count, counters) is written by the last piece.

Cost: a commit per piece (no fsync: loaders open the staging store with ``sync=False``).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from itertools import islice
from typing import Any

from storage.store import Store
from storage.txn import WriteTxn

#: what one piece's bytes cost while it is written: the encoded pages and records in Python,
#: LMDB's dirty copy, the lists ``put_many`` builds (measured roughly, dense 20K)
PIECE_COST = 4
#: records handed to LMDB in one call at most (bounds the call's list of pairs)
STEP = 1 << 16


def piece_limit(budget_bytes: int | None) -> int | None:
    """Bytes a piece may write under a load's memory budget (None: no limit, one commit).
    A thirty-second of the budget: the rest is for the batch itself, the check and the heap.
    (An eighth made the pieces the load's peak: dense 100K's build, 1,024 MB budget, three
    pieces, 670 MB, against the check's ~600; a thirty-second, 566: docs/bench/dense-load,
    denseload43.)"""
    if budget_bytes is None:
        return None
    return max(budget_bytes // (8 * PIECE_COST), 1)


class Pieces:
    """The current write transaction of a build (:attr:`txn`), renewed after each piece.

    Callers report what they wrote (:meth:`wrote`) and must take :attr:`txn` again after
    it: a piece may have been committed.  ``commits``: how many so far (for tests and
    figures).  An exception aborts the current piece (those committed stay: see above).
    """

    def __init__(self, store: Store, limit: int | None) -> None:
        self.store, self.limit = store, limit
        self.commits = 0
        self.used = 0
        self._cm: AbstractContextManager[WriteTxn] | None = None
        self.txn: WriteTxn

    def __enter__(self) -> Pieces:
        self._begin()
        return self

    def __exit__(self, *exc: Any) -> None:
        cm, self._cm = self._cm, None
        if cm is not None:
            cm.__exit__(*exc)
            if exc[0] is None:
                self.commits += 1

    def _begin(self) -> None:
        self._cm = self.store.write(replay=False)  # (no copy of every record write)
        self.txn = self._cm.__enter__()
        self.used = 0

    def wrote(self, nbytes: int) -> None:
        """Count ``nbytes`` written in the current piece; commit it once over the limit."""
        self.used += nbytes
        if self.limit is not None and self.used >= self.limit and self._cm is not None:
            cm, self._cm = self._cm, None
            cm.__exit__(None, None, None)
            self.commits += 1
            self._begin()

    def put_many(
        self, ns: bytes, keys: list[bytes], values: Iterable[bytes], prefixed: bool = False
    ) -> None:
        """:meth:`WriteTxn.put_many` in steps, each counted, so that a large namespace is
        split across pieces; ``values`` may be a generator (encoded as it is consumed)."""
        it, step = iter(values), self._step(keys)
        for start in range(0, len(keys), step):
            part = keys[start : start + step]
            vals = list(islice(it, len(part)))
            self.txn.put_many(ns, part, vals, prefixed)
            lead = len(ns) + 1 if prefixed else 0  # (counted as the key alone, either way)
            self.wrote(sum(map(len, part)) + sum(map(len, vals)) + (16 - lead) * len(part))

    def _step(self, keys: list[bytes]) -> int:
        """Records a call: :data:`STEP`, fewer under a small limit (~ a quarter piece)."""
        if self.limit is None or not keys:
            return STEP
        guess = len(keys[0]) + 64  # (a record's bytes, roughly: the key and a short value)
        return max(1, min(STEP, self.limit // (4 * guess)))
