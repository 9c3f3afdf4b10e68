"""The engine behind one :class:`betree.index.Index`: what reading a plain store keeps
between calls, and the choice of matching strategy.

Kept: the schema of the last snapshot and what derives from it (each attribute's grid kind,
the hints new p-nodes halve), the per-snapshot state (:class:`betree.matching.snapshot.Snapshot`,
cached by generation), the matching statistics of self-adjustment not yet flushed, the
packed view held (:class:`betree.packed.held.FlatSlot`) and the interval choice on it
(:mod:`betree.packed.ranging`), the atoms' grid spans (writes' places).

Chosen per call (:meth:`Engine.strategy`): the page strategy
(:class:`betree.matching.pages.Pages`) while statistics are collected (they come from the
walk) or no view is held, else the held view (:class:`betree.packed.views.HeldView`).  Both
answer ``match(values)`` and ``match_many(batch, lists)``.  Cost of the choice: a dict
lookup by generation; a new generation reads the root record (and, for the pages, one
scan of the per-attribute records: :class:`betree.matching.snapshot.Records`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from betree.compiler import Compiler
from betree.disk import catalog, changelog, grid, pending
from betree.disk.adjust import Collector
from betree.disk.catalog import SubId, root_record
from betree.disk.nodes import id_array, listed
from betree.disk.tree import BETree, Places
from betree.disk.writer import Memo, Writer, gc_paused
from betree.lang.atoms import Atom, Clause, forget_interned
from betree.lang.schema import Schema
from betree.matching.pages import SCALAR, Pages
from betree.matching.snapshot import Records, Snapshot
from betree.packed import carry, flat, held, leanbuild, ranging
from betree.packed.delta import Based, Delta
from betree.packed.heap import return_freed_memory
from betree.packed.views import HeldView, JoinedViews, event_coords
from storage.errors import StoreDamaged
from storage.store import Store
from storage.txn import ReadTxn, WriteTxn

CATCH_UP_WRITES = 4096  #: subscriptions a write catches the held view up to (caught_up)

Strategy = Pages | HeldView  #: ``match(values)``, ``match_many(batch, lists)``, ``stats``


class Engine:
    """Matching over one plain store, and the state it keeps (see the module's docstring)."""

    def __init__(self, store: Store, schema: Schema) -> None:
        self.store = store
        self._use_schema(schema, None)
        self._schema_gen = -1  # the generation whose schema version was last compared
        self._root: tuple[int, dict[str, Any]] = (-1, {})  # (gen, root record): root()
        self._snapshot: tuple[int, Snapshot] | None = None
        #: the per-attribute records of the last snapshot, reused while unchanged (by the
        #: background folds too: one decoded copy a process, :mod:`betree.matching.snapshot`)
        self._records = Records(self._attribute)
        self._spans: dict[Atom, tuple[int, int] | tuple[()]] = {}  # atom -> grid span, bounded
        self._compiler: Compiler | None = None  # made with the store's max_clauses
        self.memo = Memo()  # what writes read before (betree.disk.writer.Memo)
        self.last_stats: dict[str, int] = {}
        #: where the last batched match's time went (:meth:`match_many`)
        self.last_timings: dict[str, float] = {}
        # self-adjustment: matching counts in memory until Index.adjustment flushes them
        self.collector: Collector | None = None
        self._flush_every = math.inf
        #: collect matching statistics in this process even when the store's ``adjust``
        #: setting is off (flushed only by an explicit ``Index.adjustment.flush``)
        self.collecting = False
        #: with the ``adjust`` setting on, flush every ``adjust_window`` events from match()
        self.auto_adjust = True
        #: the packed view of the tree that matching uses once a snapshot lasts
        self.flat = held.FlatSlot(store.cache)
        self.flat.background = self._fresh_base  # folds aside
        #: whether that view is matched by intervals instead (betree.packed.ranging)
        self.ranging = ranging.Ranging(self.types)
        self.flat.lean = self.ranging  # a view too big to hold whole: its intervals
        #: a rebuilt view takes over the keys and the tree's choice learnt on the one it replaces
        self.flat.rebuilt = lambda old, based: carry.take_over(old, based, self.ranging)
        #: called before a view is built lean from the pages, or whole past the page
        #: cache's share, as big a build (a sharded store lets every shard's decoded pages
        #: go then: dense 1M, 2 shards, the other shard's pages pinned ~120 MB of the freed
        #: memory the build allocated among)
        self.before_lean: Callable[[], None] = lambda: None

    # -- the schema (betree.disk.schemaedit changes it on a live store) -------------------------

    def schema_in(self, txn: ReadTxn) -> Schema:
        """The schema of ``txn``'s snapshot, everything derived from it rebuilt when another
        process or call changed it since (the root record's ``schema_version``, which
        :mod:`betree.disk.schemaedit` counts).  Cost: one root-record read per new generation."""
        if txn.gen != self._schema_gen:
            version = self.root(txn).get("schema_version", 0)
            if version != self._schema_version:
                self._use_schema(Schema.from_json(catalog.load_schema(txn)), version)
            self._schema_gen = txn.gen
        return self.schema

    def root(self, txn: ReadTxn) -> dict[str, Any]:
        """``txn``'s root record, decoded once a generation (not to be changed: the
        snapshot, the schema check, a write's catch-up and its placement check share it;
        ~20 µs a decode at 100K BEGen, its per-attribute lists); a write's own is fresh."""
        if txn.writable:
            return root_record(txn)
        if self._root[0] != txn.gen:
            self._root = (txn.gen, root_record(txn))
        return self._root[1]

    def refresh_schema(self) -> Schema:  # before compiling outside a snapshot: ~10 µs
        with self.store.read() as txn:
            return self.schema_in(txn)

    def _use_schema(self, schema: Schema, version: int | None) -> None:
        self.schema = schema
        self._schema_version = version
        self.types = {name: grid.kind_of(spec.type) for name, spec in schema.attributes.items()}
        #: what views' groupings of the root read and chose (betree.disk.pending.Chosen)
        self._chosen = pending.Chosen()
        self.scalar = frozenset(name for name, kind in self.types.items() if kind in SCALAR)
        #: Attributes whose event values are matched transformed (folded, or ip keys).
        self.keyed = schema.folded | {n for n, s in schema.attributes.items() if s.type == "ip"}
        #: per attribute, the grid range the children of a new p-node's top bucket halve
        #: (:func:`betree.disk.grid.hint_range` of the schema's ``min``/``max``)
        self.hints = {
            name: grid.hint_range(grid.kind_of(spec.type), spec.min, spec.max)
            for name, spec in schema.attributes.items()
        }

    def _attribute(self, key: bytes, what: str) -> str:
        """The attribute a per-attribute record is keyed by: a record whose key (not
        covered by the value's checksum) names no attribute of the schema is damage."""
        name = key.decode("utf-8", "replace")
        if name not in self.types:
            raise StoreDamaged(f"a {what} record for {name!r}, not an attribute of the schema")
        return name

    # -- the snapshot ---------------------------------------------------------------------

    def snapshot(self, txn: ReadTxn, records: bool = True) -> Snapshot:
        """Per-commit state (cached by gen): the root record, and with ``records`` the
        PB+tree records and direct atoms (:mod:`betree.matching.snapshot`; a match on a held
        view needs neither: one scan of a record per attribute saved per commit)."""
        if self._snapshot is not None and self._snapshot[0] == txn.gen:
            snap = self._snapshot[1]
            if snap.complete or not records:
                return snap
        rec = self.root(txn)
        self.schema_in(txn)
        # read-only, statistics could never be flushed: collect only when asked to
        collect = bool(rec.get("adjust")) and not self.store.readonly
        snap = Snapshot(rec, rec["next_atom"], collect)
        auto = collect and self.auto_adjust and not self.store.readonly
        self._flush_every = rec.get("adjust_window", 1) if auto else math.inf
        self._snapshot = (txn.gen, snap)
        if not records:
            return snap
        snap.with_records(self._records, txn)
        return snap

    # -- places and coordinates -------------------------------------------------------------

    def places(self, clause: Clause) -> Places:
        """Per attribute the clause needs defined, the grid interval its atoms allow
        (:func:`betree.disk.grid.clause_places`, spans kept by atom)."""
        return grid.clause_places(clause, self.types, self._spans)

    def coords(self, values: Mapping[str, object]) -> dict[str, int]:
        """A validated event's grid coordinate on each attribute it defines."""
        return event_coords(self.types, values)

    @contextmanager
    def writer(self, txn: WriteTxn) -> Iterator[Writer]:
        """A :class:`betree.disk.writer.Writer` inserting and deleting in ``txn`` (clauses
        placed by :meth:`places`), which writes the root record when the block ends without
        an error, and is closed when it ends (:meth:`betree.disk.writer.Writer.close`: its
        transaction's decoded pages freed as soon as the writer is let go)."""
        writer = Writer(txn, self.places, self.hints, self.types, self.memo)
        try:
            yield writer
            writer.finish()
        finally:
            writer.close()

    def place(self, due_only: bool = False) -> int:
        """Move the clauses waiting in the pending area into the BE-Tree, in a transaction
        of their own (:mod:`betree.disk.pending`); how many were moved.  ``due_only``:
        only once the area has passed its bound (what a batch does after its commit)."""
        with self.store.read() as txn:
            rec = self.root(txn)
            if pending.first(rec) is None or (due_only and not pending.due(txn, rec)):
                return 0
        with gc_paused(), self.store.write() as txn, self.writer(txn) as w:
            moved = w.place()
        w.committed()
        self.caught_up(0, w.logged)  # (no subscription changed: the held view stays valid)
        return moved

    # -- compiling (betree.compiler) --------------------------------------------------------

    def compiler(self) -> Compiler:
        """The store's compiler: type-checks and normalizes expressions in the schema as
        of the last snapshot under the store's ``max_clauses`` (read once a schema); errors
        name the subscription.  ``engine.compiler().compile(ident, expr)`` is what
        ``subscribe`` stores, for loaders that write clauses themselves."""
        if self._compiler is None or self._compiler.schema is not self.schema:
            with self.store.read() as txn:
                max_clauses = int(root_record(txn)["max_clauses"])
            self._compiler = Compiler(self.schema, max_clauses)
        return self._compiler

    def drop_compile_caches(self) -> None:
        """Let go of what compiling keeps for the next subscription (the compiler's memo of
        conjuncts, the atoms' grid spans, the atom intern table): a bulk loader calls it
        once everything is compiled, so that the build and check() can use that memory
        (dense 20K, python engine: the load's peak 1,259 -> 939 MB)."""
        self._spans.clear()
        self._compiler = None
        forget_interned()

    # -- statistics (self-adjustment) -------------------------------------------------------

    def collects(self, snap: Snapshot) -> bool:
        """Whether matching in ``snap`` collects statistics (then it walks the pages)."""
        return self.collector is not None or snap.collect or self.collecting

    def due(self) -> bool:
        """Whether a window of events has been collected (``Index`` flushes it)."""
        return self.collector is not None and self.collector.events >= self._flush_every

    def take_statistics(self) -> Collector:
        """The statistics collected (empty: none), no longer kept here."""
        collector = self.collector if self.collector is not None else Collector()
        self.collector = None
        return collector

    # -- the held view ----------------------------------------------------------------------

    def held_view(self, txn: ReadTxn) -> Based | None:
        """The packed view of ``txn``'s snapshot if one is held (caught up to it, not
        built: :meth:`_view`), for a sharded store to join its shards' (betree.packed.joined)."""
        snap = self.snapshot(txn, records=False)
        if self.collects(snap):
            return None  # (the statistics come from walks)
        based = self._view(txn, snap, 0)
        return None if based is None or based.view.ranged is not None else based  # (lean)

    def _fresh_base(self) -> tuple[int, Based]:
        """A base view in a snapshot of its own (a fold in the background): built lean from
        the pages when the held view is lean (:mod:`betree.packed.leanbuild`), else whole,
        keyed from the held view's counts here, not in the first match after it
        (:func:`betree.packed.carry.learn_from`)."""
        held = self.flat.held(self.flat.held_gen())
        if held is not None and held.view.ranged is not None:
            return leanbuild.lean_base(self.store, self._records, self.types)
        gen, based = flat.fresh_base(self.store, self._records, self.types, self._chosen)
        if held is not None:
            carry.learn_from(held.view, based)
        return gen, based

    def _view(self, txn: ReadTxn, snap: Snapshot, events: int = 1) -> Based | None:
        """The packed view for ``txn``'s snapshot (a base view and the delta since:
        :mod:`betree.packed.delta`) for ``events`` more events, or None (:class:`FlatSlot`;
        never within a write: it holds committed pages)."""
        if txn.writable:
            return None
        rec = snap.rec

        def make(lean: bool = True) -> Based:
            full, tree = self.snapshot(txn), BETree(txn, rec)
            if lean and lean_first(tree):  # the interval matcher alone, no whole view first
                self.before_lean()
                return_freed_memory(cycles=True)
                atoms = rec["next_atom"]
                view = leanbuild.lean_view(tree, full.trees, full.grouped, atoms, self.types)
            else:
                if leanbuild.too_big(rec["subs"], predicates(), self.flat.share):
                    self.before_lean()  # (a whole view past the share: as big a build)
                    return_freed_memory()  # (cycles collected just before: rich 1M, ~7 s)
                view = flat.build(tree, full.trees, types=self.types, memo=self._chosen)
            return Based(view, full.grouped, rec["next_atom"], Delta.empty(rec))

        def lean_first(tree: BETree) -> bool:
            """Whether to build lean from the pages: a whole view past the share whose
            intervals may pay, judged by the tree's shape (:func:`leanbuild.unbounded`)
            when a whole view could be held instead (else they are tried: nothing else
            could be); a whole view's intervals are tried on it after all (``_fit``)."""
            subs, limit = rec["subs"], self.flat.limit
            if self.flat.outgrown:  # (a whole view grew past its bound: the other one)
                return True
            if not self.ranging.worth(subs) or not leanbuild.too_big(
                subs, predicates(), self.flat.share
            ):
                return False
            return leanbuild.too_big(subs, predicates(), limit) or self.ranging.worth(
                subs, leanbuild.unbounded(tree, self.types)
            )

        def predicates() -> int:
            return sum(int(tree["count"]) for tree in self.snapshot(txn).trees.values())

        def whole() -> Based | None:  # (a lean one not worth holding: held whole if it fits)
            limit = self.flat.limit
            if self.flat.outgrown or leanbuild.too_big(rec["subs"], predicates(), limit):
                return None
            return make(False)

        catch_up = self._catch_up(txn, rec)
        return self.flat.get(txn.gen, make, rec["subs"], events, catch_up, predicates, whole)

    def _catch_up(
        self,
        txn: ReadTxn,
        rec: dict[str, Any],
        logged: Mapping[int, changelog.Change] | None = None,
    ) -> Callable[[Based], Based | None]:
        def catch_up(held: Based) -> Based | None:
            delta = held.delta.advance(txn, rec, self.memo.atoms, logged)
            return None if delta is None else replace(held, delta=delta)

        return catch_up

    def caught_up(self, changed: int, logged: Mapping[int, changelog.Change] | None = None) -> None:
        """After a write of ``changed`` subscriptions by this process: the held view caught
        up to it now, not at the next match (:meth:`betree.packed.held.FlatSlot.advance`; other
        processes catch up at theirs).  Cost: what that match saves (~0.2 ms a commit at
        100K; after a batch of 1,000 the 3-7 ms of CPU its next match saved, 1-2% of the
        batch's); not past :data:`CATCH_UP_WRITES` (a bigger batch leaves it to the next
        match).  ``logged``: the change log entries the write made, as it made them
        (:attr:`betree.disk.writer.Writer.logged`: not read back and decoded)."""
        if self.flat.held_gen() < 0 or changed > CATCH_UP_WRITES:
            return
        with self.store.read() as txn:
            rec = self.snapshot(txn, records=False).rec
            self.flat.advance(txn.gen, self._catch_up(txn, rec, logged))

    def close(self) -> None:
        """Give back the view held (waiting for a fold under way)."""
        self.flat.wait()
        self.flat.drop()

    # -- matching ---------------------------------------------------------------------------

    def strategy(self, txn: ReadTxn, events: int = 1) -> Strategy:
        """How ``events`` events are matched in ``txn``: on the pages while statistics are
        collected or no view is held for the snapshot (``events`` count towards building
        one), else on the view."""
        snap = self.snapshot(txn, records=False)
        collector = self.collector
        if collector is None and (snap.collect or self.collecting):
            collector = self.collector = Collector()
        view = None if collector is not None else self._view(txn, snap, events)
        if view is not None:
            return HeldView(txn, view, self.ranging, self.types)
        return Pages(txn, self.snapshot(txn), self.types, self.scalar, collector)

    def note(
        self, strategy: Pages | HeldView | JoinedViews, events: int = 1, seconds: float = 0.0
    ) -> None:
        """Keep what ``strategy``'s last call of ``events`` cost in ``seconds`` (``last_stats``,
        ``last_timings``; the walks' candidates for :meth:`betree.packed.ranging.Ranging.lean`,
        their seconds for :meth:`betree.packed.held.FlatSlot.walked`)."""
        if isinstance(strategy, Pages):
            self.ranging.walked(events, strategy.stats.get("candidates", 0))
            self.flat.walked(seconds)
        if strategy.stats:
            self.last_stats = strategy.stats
        self.last_timings = strategy.timings  # (none for a call matched event by event)

    def match(self, txn: ReadTxn, values: Mapping[str, object]) -> list[SubId]:
        """The ids an event validated by ``schema.validate_event`` matches in ``txn``."""
        strategy = self.strategy(txn)
        began = time.perf_counter()
        found = strategy.match(values)
        self.note(strategy, 1, time.perf_counter() - began)
        return found

    def match_many(
        self, txn: ReadTxn, batch: Sequence[Mapping[str, object]], lists: bool = False
    ) -> list[Any]:
        """:meth:`match` of each validated event of ``batch`` in ``txn`` (as
        :func:`betree.disk.nodes.id_array`, or as lists), by the strategy of the batch.

        A batch of one, or with statistics collected (self-adjustment), is matched event
        by event; on a packed view (its events count towards one) by
        :class:`betree.packed.views.HeldView`, else on the pages in one pass.
        ``last_stats`` holds the totals, ``last_timings`` the seconds of each phase.
        """
        if len(batch) <= 1 or self.collects(self.snapshot(txn, records=False)):
            return listed([id_array(self.match(txn, v)) for v in batch], lists)
        strategy = self.strategy(txn, len(batch))
        began = time.perf_counter()
        found = strategy.match_many(batch, lists)
        self.note(strategy, len(batch), time.perf_counter() - began)
        return found
