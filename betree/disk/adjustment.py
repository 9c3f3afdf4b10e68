"""``Index.adjustment``: one store's self-adjustment as its owner works it — the stored
settings, the matching statistics this process collected, their flush, the summary.

The policies (ranking, recycling, what a flush writes) are :mod:`betree.disk.adjust`'s; the
statistics are collected by the index's engine (:attr:`betree.engine.Engine.collector`)
while it matches (the engine, a room above, is named here for types only).  Kept apart
from :class:`betree.index.Index` so the facade stays the user's
(:class:`betree.stores.sharded.AnyIndex`); maintenance (``bexdb adjust``), the benchmarks
and the tests reach it as ``index.adjustment``.  Cost: that of what it calls.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from betree.disk import adjust
from betree.disk.adjust import ADJUST_DEFAULTS, Collector
from betree.disk.catalog import root_record
from betree.disk.writer import gc_paused
from storage.errors import StoreReplaced
from storage.store import Store
from storage.txn import ReadTxn

if TYPE_CHECKING:
    from betree.engine import Engine


class Adjustment:
    """Self-adjustment of the store an :class:`betree.index.Index` opened (its engine's
    statistics)."""

    def __init__(self, store: Store, engine: Engine) -> None:
        self.store = store
        self.engine = engine

    def settings(self, txn: ReadTxn | None = None) -> dict[str, int]:
        """The index settings (``max_cap``, ``min_size``, ``max_clauses``, and those of
        self-adjustment: ``adjust``, ``adjust_window``, ``theta``), in a snapshot of their
        own or ``txn``'s: what a store rebuilt like this one is created with."""
        if txn is None:
            with self.store.read() as snap:
                return self.settings(snap)
        rec = root_record(txn)
        out = {k: rec[k] for k in ("max_cap", "min_size", "max_clauses")}
        out.update({k: rec.get(k, v) for k, v in ADJUST_DEFAULTS.items()})
        return out

    def set(
        self, enabled: bool | None = None, window: int | None = None, theta: int | None = None
    ) -> None:
        """Change the stored self-adjustment settings (see :mod:`betree.disk.adjust`).

        ``enabled``: collect statistics while matching, flush them every ``window``
        matched events, and re-insert the clauses of underflowing p-nodes on deletion.
        Enabling it places the pending clauses first (:mod:`betree.disk.pending`: the
        re-insertions could split the root under them).
        """
        with self.store.write() as txn, self.engine.writer(txn) as w:
            if enabled:
                w.place()
            for key, value in (("adjust", enabled), ("adjust_window", window), ("theta", theta)):
                if value is not None:
                    w.rec[key] = int(value)
            adjust.check_settings(w.rec)

    def flush(self) -> dict[str, Any]:
        """Flush this process's matching statistics and run the self-adjustment policies.

        One write transaction: the counts join the stored windows and attribute feedback;
        nodes whose window ended are ranked and those below ``theta`` recycled (their
        clauses re-inserted).  Callable at any time, whatever the settings.  Returns what
        was done (events, nodes, evaluated, recycled p-nodes / l-nodes, re-inserted
        clauses, seconds).
        """
        collector = self.engine.take_statistics()
        with gc_paused(), self.store.write() as txn, self.engine.writer(txn) as w:
            return adjust.flush(w, collector)

    def flush_if_due(self) -> None:
        """Flush the matching statistics once a window of events has been collected.

        The index's matches call it after closing their read transaction.  A no-op unless
        the store's ``adjust`` setting is on and the store is writable.  In a store
        replaced meanwhile (``bexdb compact``) the window's statistics are dropped rather
        than failing the match that completed it: they are advice, and the caller reopens
        the store (``bexdb serve`` does, by inode).
        """
        if self.engine.due():
            with suppress(StoreReplaced):
                self.flush()

    @property
    def collector(self) -> Collector | None:
        """The matching statistics collected since the last flush (None: none yet)."""
        return self.engine.collector

    def discard(self) -> None:
        """Drop the matching statistics not yet flushed (a measurement that must not
        become feedback, such as ``bexdb bench adapt``'s timing passes)."""
        self.engine.collector = None

    def summary(self) -> dict[str, Any]:
        """Self-adjustment settings and totals: flushed events, open windows, recycled
        nodes and clauses, the attributes with the most matching feedback."""
        with self.store.read() as txn:
            return adjust.summary(txn, root_record(txn))
