"""``Index``: subscriptions in, matches out — the entry point over the BE-Tree, the PB+trees
and their catalog.

Its records (subscriptions, atoms, homes, per-attribute lists) are laid out and owned by
:mod:`betree.disk.catalog`; a write transaction's inserting and deleting is
:class:`betree.disk.writer.Writer`; an atom's grid span is :func:`betree.disk.grid.atom_span`.

Matching: phase 1 marks satisfied atoms in a boolean array (one PB+tree search per event
attribute, plus the direct tests); phase 2 walks the BE-Tree (see :mod:`betree.disk.tree`), or,
once a snapshot has served enough events, tests its packed view (:mod:`betree.packed.flat`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from typing import Any

import numpy as np

from betree.checking.check import check_index
from betree.checking.explained import bucket_path, sent_values, shown_atom
from betree.compiler import Compiler
from betree.disk import adjust as adjusting
from betree.disk import catalog, grid
from betree.disk.adjust import ADJUST_DEFAULTS, Collector
from betree.disk.catalog import (
    SubId,
    clause_id,
    load_atom,
    load_home,
    record_attributes,
    root_record,
    subscription_record,
)
from betree.disk.metadata import item_meta, with_metas
from betree.disk.nodes import id_array, listed
from betree.disk.tree import DEFAULTS, BETree, Places
from betree.disk.writer import Memo, Writer, gc_paused
from betree.lang.atoms import Atom, Clause, forget_interned
from betree.lang.dnf import MAX_CLAUSES
from betree.lang.schema import Schema
from betree.matching import batch as batching
from betree.matching.direct import DirectAtoms, mark
from betree.matching.snapshot import Records, Snapshot
from betree.packed import flat, flatbatch, ranging
from betree.packed.delta import Based, Delta, settle
from pbtree import PBTree
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import InvalidInput, StoreDamaged, StoreError, StoreReplaced
from storage.store import Store, open_store, refuse_sharded, store_exists
from storage.txn import ReadTxn, WriteTxn

_SCALAR = ("int", "float", "string")
CATCH_UP_WRITES = 64  #: subscriptions a write catches the held view up to (caught_up)


class Index:
    """A subscription index in a store directory.

    >>> with Index.open(path, schema=doc) as idx:  # doctest: +SKIP
    ...     idx.subscribe("s1", 'price between 20 and 40 and genre = "classics"')
    ...     idx.match({"price": 26, "genre": "classics"})
    ['s1']
    """

    def __init__(self, store: Store, schema: Schema) -> None:
        self.store = store
        self._use_schema(schema, None)
        self._schema_gen = -1  # the generation whose schema version was last compared
        self._snapshot: tuple[int, Snapshot] | None = None
        #: the per-attribute records of the last snapshot, reused while unchanged
        self._records = Records(self._attribute)
        self._spans: dict[Atom, tuple[int, int] | tuple[()]] = {}  # atom -> grid span, bounded
        self._memo = Memo()  # what writes read before (betree.disk.writer.Memo)
        self.last_stats: dict[str, int] = {}
        #: where the last batched match's time went (:meth:`match_many_validated`)
        self.last_timings: dict[str, float] = {}
        # self-adjustment: matching counts in memory until :meth:`adjust` flushes them
        self._collector: Collector | None = None
        self._flush_every = math.inf
        #: collect matching statistics in this process even when the store's ``adjust``
        #: setting is off (flushed only by an explicit :meth:`adjust`)
        self.collecting = False
        #: with the ``adjust`` setting on, flush every ``adjust_window`` events from match()
        self.auto_adjust = True
        #: the packed view of the tree that matching uses once a snapshot lasts
        self.flat = flat.FlatSlot(store.cache)
        self.flat.background = lambda: flat.fresh_base(self.store, self._attribute)  # folds aside
        #: whether that view is matched by intervals instead (betree.packed.ranging)
        self.ranging = ranging.Ranging(self._types)

    # -- the schema (betree.stores.schemaedit changes it on a live store) -------------------------

    def schema_in(self, txn: ReadTxn) -> Schema:
        """The schema of ``txn``'s snapshot, everything derived from it rebuilt when another
        process or call changed it since (the root record's ``schema_version``, which
        :mod:`betree.stores.schemaedit` counts).  Cost: one root-record read per new generation."""
        if txn.gen != self._schema_gen:
            version = root_record(txn).get("schema_version", 0)
            if version != self._schema_version:
                self._use_schema(Schema.from_json(catalog.load_schema(txn)), version)
            self._schema_gen = txn.gen
        return self.schema

    def refresh_schema(self) -> Schema:  # before compiling outside a snapshot: ~10 µs
        with self.store.read() as txn:
            return self.schema_in(txn)

    def _use_schema(self, schema: Schema, version: int | None) -> None:
        self.schema = schema
        self._schema_version = version
        self._types = {name: grid.kind_of(spec.type) for name, spec in schema.attributes.items()}
        self._scalar = frozenset(name for name, kind in self._types.items() if kind in _SCALAR)
        #: Attributes whose event values are matched transformed (folded, or ip keys).
        self._keyed = schema.folded | {n for n, s in schema.attributes.items() if s.type == "ip"}
        #: per attribute, the grid range the children of a new p-node's top bucket halve
        #: (:func:`betree.disk.grid.hint_range` of the schema's ``min``/``max``)
        self.hints = {
            name: grid.hint_range(grid.kind_of(spec.type), spec.min, spec.max)
            for name, spec in schema.attributes.items()
        }
        self._compiler: Compiler | None = None  # made with the store's max_clauses

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        schema: Mapping[str, Any] | Schema | None = None,
        *,
        readonly: bool = False,
        settings: Mapping[str, int] | None = None,
        **store_options: Any,
    ) -> Index:
        """Open the index in ``path``, creating it (with ``schema``) if missing.

        A new store needs a schema.  An existing store keeps its own schema; passing a
        different one is an error.  ``settings`` (``max_cap``, ``min_size``,
        ``max_clauses``, and the self-adjustment settings ``adjust``, ``adjust_window``,
        ``theta`` of :mod:`betree.disk.adjust`) apply to a new store.
        """
        given = schema if isinstance(schema, Schema) or schema is None else Schema.from_json(schema)
        if given is None and not store_exists(path):  # create nothing that cannot be used
            refuse_sharded(path)
            raise StoreError(
                f"no store at {path}",
                "create it with `bexdb load`, `bexdb subscribe --schema F`, or a schema",
            )
        store = open_store(path, readonly=readonly, **store_options)
        try:
            with store.read() as txn:
                stored = catalog.load_schema(txn)
            if stored is None:
                if given is None:
                    raise InvalidInput(
                        f"{path} holds no index yet and no schema was given",
                        hint="pass a schema (README: Language) to create it",
                    )
                if readonly:
                    raise StoreError(f"{path} holds no index", "create it first")
                cls._create(store, given, dict(settings or {}))
                current = given
            else:
                current = Schema.from_json(stored)
                if given is not None and given != current:
                    raise InvalidInput(
                        f"{path} already has a different schema",
                        hint="open it without a schema, or rebuild it with `bexdb load`",
                    )
        except BaseException:
            store.close()
            raise
        return cls(store, current)

    @staticmethod
    def _create(store: Store, schema: Schema, settings: dict[str, int]) -> None:
        options = {**DEFAULTS, "max_clauses": MAX_CLAUSES, **ADJUST_DEFAULTS, **settings}
        if not 1 <= options["max_clauses"] < catalog.CLAUSES_LIMIT:
            raise InvalidInput(f"max_clauses must be in [1, {catalog.CLAUSES_LIMIT})")
        adjusting.check_settings(options)
        with store.write() as txn:
            rec = BETree.create(txn, options)
            rec.update(max_clauses=options["max_clauses"], next_sid=0, next_atom=1, subs=0)
            rec.update(attributes=record_attributes(txn))
            rec.update({k: options[k] for k in ADJUST_DEFAULTS})
            catalog.put_root(txn, rec)
            catalog.put_schema(txn, schema.to_json())

    def close(self) -> None:
        """Close the store, first flushing matching statistics not yet flushed (if writable).

        Statistics of a store replaced meanwhile (``bexdb compact``) are dropped: they
        cannot be written to it, and closing it is what its reopening needs.
        """
        try:
            if self._collector is not None and self._collector.events and not self.store.readonly:
                self.adjust()
        except StoreReplaced:
            pass
        finally:
            self.flat.wait()
            self.flat.drop()
            self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self.store.read() as txn:
            return int(root_record(txn)["subs"])

    # -- writing -------------------------------------------------------------------------

    def subscribe(self, ident: SubId, expr: str, meta: Any = None) -> bool:
        """Insert (or replace) one subscription and its metadata, atomically.  True if new."""
        return self.subscribe_many([(ident, expr, meta)])[0]

    def subscribe_many(self, items: Iterable[Sequence[Any]]) -> list[bool]:
        """Insert or replace many subscriptions in one transaction (all or nothing): items
        ``(id, expr)`` or ``(id, expr, meta)`` (a JSON object: :mod:`betree.disk.metadata`).

        Every expression is compiled before anything is written; an error names the
        subscription id and changes nothing.
        """
        self.refresh_schema()
        with gc_paused():
            compiled = [(i[0], i[1], self.compile(i[0], i[1]), item_meta(i)) for i in items]
            created = []
            with self.store.write() as txn, self.writer(txn) as w:
                for ident, expr, clauses, meta in compiled:
                    created.append(w.insert(ident, expr, clauses, meta))
        w.committed()
        self.caught_up(len(created))
        return created

    def compile(self, ident: SubId, expr: str) -> list[Clause]:
        """Type-check and normalize one expression; errors name the subscription
        (:class:`betree.compiler.Compiler` under the store's ``max_clauses``)."""
        return self.compiler().compile(ident, expr)

    def compiler(self) -> Compiler:
        """The store's compiler (its schema and ``max_clauses``, read once)."""
        if self._compiler is None:
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

    def unsubscribe(self, ident: SubId) -> bool:
        """Delete one subscription; False if there was none with that id."""
        return self.unsubscribe_many([ident])[0]

    def unsubscribe_many(self, idents: Iterable[SubId], *, strict: bool = False) -> list[bool]:
        """Delete subscriptions in one transaction; per id, whether it existed.

        With ``strict``, an absent id deletes nothing: :class:`InvalidInput` names every
        absent one and the transaction is rolled back.
        """
        idents = list(idents)
        with gc_paused(), self.store.write() as txn, self.writer(txn) as w:
            found = [w.delete(ident) for ident in idents]
            missing = [ident for ident, ok in zip(idents, found, strict=True) if not ok]
            if strict and missing:
                raise InvalidInput(
                    "no subscription " + ", ".join(map(repr, missing)) + ": nothing was deleted"
                )
        self.caught_up(len(found))
        return found

    @contextmanager
    def writer(self, txn: WriteTxn) -> Iterator[Writer]:
        """A :class:`betree.disk.writer.Writer` inserting and deleting in ``txn``, which writes
        the root record when the block ends without an error."""
        writer = Writer(txn, self.places, self.hints, self._memo)
        yield writer
        writer.finish()

    def subscriptions(self, txn: ReadTxn | None = None) -> list[tuple[SubId, str]]:
        """Every ``(id, expression)``, in insertion order (one snapshot, or ``txn``'s)."""
        if txn is None:
            with self.store.read() as snap:
                return self.subscriptions(snap)
        return list(catalog.subscriptions(txn))

    def iter_subscriptions(self) -> Iterator[tuple[SubId, str]]:
        """Every ``(id, expression)`` as given, in insertion order, streamed from one
        snapshot (held until the iterator is exhausted or closed): what ``bexdb export``
        writes.  Cost: one cursor step and one small decode per subscription."""
        with self.store.read() as txn:
            yield from catalog.subscriptions(txn, int(root_record(txn)["subs"]))

    def iter_records(self) -> Iterator[tuple[SubId, str, str | None]]:
        """:meth:`iter_subscriptions` with each one's metadata text (None: none)."""
        with self.store.read() as txn:
            yield from catalog.subscription_records(txn, int(root_record(txn)["subs"]))

    def settings(self, txn: ReadTxn | None = None) -> dict[str, int]:
        """The index settings (``max_cap``, ``min_size``, ``max_clauses``, and those of
        self-adjustment: ``adjust``, ``adjust_window``, ``theta``), in a snapshot of their
        own or ``txn``'s."""
        if txn is None:
            with self.store.read() as snap:
                return self.settings(snap)
        rec = root_record(txn)
        out = {k: rec[k] for k in ("max_cap", "min_size", "max_clauses")}
        out.update({k: rec.get(k, v) for k, v in ADJUST_DEFAULTS.items()})
        return out

    def set_adjust(
        self, enabled: bool | None = None, window: int | None = None, theta: int | None = None
    ) -> None:
        """Change the stored self-adjustment settings (see :mod:`betree.disk.adjust`).

        ``enabled``: collect statistics while matching, flush them every ``window``
        matched events, and re-insert the clauses of underflowing p-nodes on deletion.
        """
        with self.store.write() as txn:
            rec = root_record(txn)
            for key, value in (("adjust", enabled), ("adjust_window", window), ("theta", theta)):
                if value is not None:
                    rec[key] = int(value)
            adjusting.check_settings(rec)
            catalog.put_root(txn, rec)

    def adjust(self) -> dict[str, Any]:
        """Flush this process's matching statistics and run the self-adjustment policies.

        One write transaction: the counts join the stored windows and attribute feedback;
        nodes whose window ended are ranked and those below ``theta`` recycled (their
        clauses re-inserted).  Callable at any time, whatever the settings.  Returns what
        was done (events, nodes, evaluated, recycled p-nodes / l-nodes, re-inserted
        clauses, seconds).
        """
        collector = self._collector if self._collector is not None else Collector()
        self._collector = None
        with gc_paused(), self.store.write() as txn, self.writer(txn) as w:
            return adjusting.flush(w, collector)

    @property
    def collector(self) -> Collector | None:
        """The matching statistics collected since the last flush (None: none yet)."""
        return self._collector

    def discard_statistics(self) -> None:
        """Drop the matching statistics not yet flushed (a measurement that must not
        become feedback, such as ``bexdb bench adapt``'s timing passes)."""
        self._collector = None

    def adjust_summary(self) -> dict[str, Any]:
        """Self-adjustment settings and totals: flushed events, open windows, recycled
        nodes and clauses, the attributes with the most matching feedback."""
        with self.store.read() as txn:
            return adjusting.summary(txn, root_record(txn))

    def record(self, ident: SubId) -> tuple[str, str | None] | None:
        """The expression and metadata text of a subscription (one snapshot), or None."""
        with self.store.read() as txn:
            return catalog.subscription_of(txn, ident)

    def expression(self, ident: SubId) -> str | None:
        """The stored expression of a subscription, or None."""
        with self.store.read() as txn:
            sid = catalog.subscription_key(txn, ident)
            if sid is None:
                return None
            return str(subscription_record(txn, ident, sid)[1])

    # -- matching ------------------------------------------------------------------------

    def match(self, event: Mapping[str, object]) -> list[SubId]:
        """Ids of every subscription ``event`` satisfies, each once, in no promised order."""
        with self.store.read() as txn:
            found = self.match_validated(txn, self.schema_in(txn).validate_event(event))
        self.adjust_if_due()
        return found

    def match_many(self, events: Sequence[object]) -> list[list[SubId] | InvalidInput]:
        """Match a batch of events in one read snapshot; one result per event, in order.

        Each result is the list of ids :meth:`match` would return, or the
        :class:`InvalidInput` that event raised in validation (that event alone: the others
        are still matched).  Cost: see :meth:`match_many_validated`.
        """
        return self._match_many(events, True)

    def match_many_arrays(self, events: Sequence[object]) -> list[np.ndarray | InvalidInput]:
        """:meth:`match_many` with each event's ids as one numpy array
        (:func:`betree.disk.nodes.id_array`): what ``bexdb match`` writes, without a Python
        object per id."""
        return self._match_many(events, False)

    def match_many_meta(self, events: Sequence[object]) -> list[Any]:
        """:meth:`match_many` with ``(id, metadata text or None)`` for each id, read in
        the snapshot matched (:func:`betree.disk.metadata.with_metas`)."""
        return self._match_many(events, True, True)

    def _match_many(self, events: Sequence[object], lists: bool, meta: bool = False) -> list[Any]:
        with self.store.read() as txn:  # (validated in the schema of the snapshot matched)
            self.schema_in(txn)
            results = batching.match_batch(
                events, self.validate, lambda valid: self.match_many_validated(txn, valid, lists)
            )
            if meta:
                results = with_metas([txn], None, results)
        self.adjust_if_due()
        return results

    def validate(self, event: object) -> Mapping[str, object]:
        """An event's validated values (:func:`event_values`)."""
        return event_values(self.schema, event)

    def match_many_validated(
        self, txn: ReadTxn, batch: Sequence[Mapping[str, object]], lists: bool = False
    ) -> list[Any]:
        """:meth:`match_validated` of each validated event of ``batch`` in ``txn`` (as
        :func:`betree.disk.nodes.id_array`, or as lists), in one pass over the index
        (:mod:`betree.matching.batch`: one PB+tree search per distinct value, each reached node and
        l-node page read and checked once for the whole batch).

        A batch of one, or with statistics collected (self-adjustment), is matched event
        by event; on a packed view (its events count towards one) by
        :func:`betree.packed.flatbatch.match`, or one by one under ``flatbatch.LEAST`` events.
        ``last_stats`` holds the totals, ``last_timings`` the seconds of each phase.
        """
        snap = self._snap(txn, records=False)
        collecting = self._collector is not None or snap.collect or self.collecting
        if len(batch) <= 1 or collecting:
            return listed([id_array(self.match_validated(txn, v)) for v in batch], lists)
        view = self._view(txn, snap, len(batch))
        if view is not None:  # the pages it replaces are gone (docs/matching.md)
            if len(batch) < flatbatch.LEAST:
                return listed([self._match_view(txn, view, v) for v in batch], lists)
            shard = flatbatch.Shard(view.view, view.grouped, 0, 0, view.atoms)
            found = self.match_on_views(view.view, [shard], batch)
            return listed(settle(found, [view.delta], batch, [txn]), lists)
        if len(batch) > batching.MAX_EVENTS:  # bounds the bit matrix: see betree.matching.batch
            step = batching.MAX_EVENTS
            parts = [batch[k : k + step] for k in range(0, len(batch), step)]
            return [ids for p in parts for ids in self.match_many_validated(txn, p, lists)]
        snap = self._snap(txn)
        order = batching.shape_order(batch)
        batch = [batch[e] for e in order]
        clock = time.perf_counter
        t0 = clock()
        types = self._types
        sat, pages = batching.satisfied(
            txn, snap.trees, snap.grouped, snap.next_atom, self._scalar, batch
        )
        t1 = clock()
        coords = [
            {attr: grid.event_coord(types[attr], value) for attr, value in values.items()}
            for values in batch
        ]
        tree = BETree(txn, snap.rec)
        reached = batching.reached_pages(tree, coords)
        t2 = clock()
        hits = batching.check_pages(reached, sat, len(batch))
        t3 = clock()
        arrays = hits.arrays()
        found = list(arrays)
        for k, ids in zip(order, arrays, strict=True):
            found[k] = ids
        self.last_stats = {"candidates": hits.candidates, "pages": pages + tree.pages_read}
        self.last_timings = {  # seconds
            "phase1": t1 - t0,
            "walk": t2 - t1,
            "check": t3 - t2,
            "results": clock() - t3,
        }
        return listed(found, lists)

    def match_on_views(
        self,
        whole: flatbatch.Whole,
        shards: Sequence[flatbatch.Shard],
        batch: Sequence[Mapping[str, object]],
        lists: bool = False,
    ) -> list[Any]:
        """A validated batch matched on packed views (:mod:`betree.packed.flatbatch`), each
        event's ids an array or a list; ``last_timings`` holds the seconds it took."""
        t0 = time.perf_counter()
        found, candidates = self.ranging.match(
            shards, batch, lambda: flatbatch.match(whole, shards, batch, self._types, lists), lists
        )
        self.last_stats = {"candidates": candidates, "pages": 0}
        self.last_timings = {"views": time.perf_counter() - t0}
        return found

    def adjust_if_due(self) -> None:
        """Flush the matching statistics once a window of events has been collected.

        :meth:`match` calls it; callers that match through :meth:`match_validated` in
        their own read transaction (``bexdb serve``) call it after
        closing it.  A no-op unless the store's ``adjust`` setting is on and the store
        is writable.  In a store replaced meanwhile (``bexdb compact``) the window's
        statistics are dropped rather than failing the match that completed it: they are
        advice, and the caller reopens the store (``bexdb serve`` does, by inode).
        """
        if self._collector is not None and self._collector.events >= self._flush_every:
            with suppress(StoreReplaced):
                self.adjust()

    def match_validated(self, txn: ReadTxn, values: Mapping[str, object]) -> list[SubId]:
        """Match an event already validated by ``schema.validate_event`` in ``txn``."""
        snap = self._snap(txn, records=False)
        stats = self._collector
        if stats is None and (snap.collect or self.collecting):
            stats = self._collector = Collector()
        # the per-node statistics come from the walk only
        view = None if stats is not None else self._view(txn, snap)
        if view is not None:
            return self._match_view(txn, view, values).tolist()  # type: ignore[no-any-return]
        snap = self._snap(txn)
        sat, coords, pages = self._phase1(
            txn, snap.trees, snap.grouped, snap.next_atom, values, False
        )
        tree = BETree(txn, snap.rec)
        out: dict[int, SubId] = {}
        candidates = tree.match(coords, sat, out, stats)
        if stats is not None:
            stats.events += 1
        self.last_stats = {"candidates": candidates, "pages": pages + tree.pages_read}
        return list(out.values())

    def held_view(self, txn: ReadTxn) -> Based | None:
        """The packed view of ``txn``'s snapshot if one is held (caught up to it, not
        built: :meth:`_view`), for a sharded store to join its shards' (betree.packed.joined)."""
        snap = self._snap(txn, records=False)
        if self._collector is not None or snap.collect or self.collecting:
            return None  # (the statistics come from walks)
        return self._view(txn, snap, 0)

    def _view(self, txn: ReadTxn, snap: Snapshot, events: int = 1) -> Based | None:
        """The packed view for ``txn``'s snapshot (a base view and the delta since:
        :mod:`betree.packed.delta`) for ``events`` more events, or None (:class:`FlatSlot`;
        never within a write: it holds committed pages)."""
        if txn.writable:
            return None
        rec = snap.rec

        def make() -> Based:
            full = self._snap(txn)
            view = flat.build(BETree(txn, rec), full.trees)
            return Based(view, full.grouped, rec["next_atom"], Delta.empty(rec))

        return self.flat.get(txn.gen, make, rec["subs"], events, self._catch_up(txn, rec))

    def _catch_up(self, txn: ReadTxn, rec: dict[str, Any]) -> Callable[[Based], Based | None]:
        def catch_up(held: Based) -> Based | None:
            delta = held.delta.advance(txn, rec, self._memo.atoms)
            return None if delta is None else replace(held, delta=delta)

        return catch_up

    def caught_up(self, changed: int) -> None:
        """After a write of ``changed`` subscriptions by this process: the held view caught
        up to it now, not at the next match (:meth:`betree.packed.flat.FlatSlot.advance`; other
        processes catch up at theirs).  Cost: what that match saves (~0.2 ms a commit at
        100K); not past :data:`CATCH_UP_WRITES` (a batch's writes/s count)."""
        if self.flat.held_gen() < 0 or changed > CATCH_UP_WRITES:
            return
        with self.store.read() as txn:
            rec = self._snap(txn, records=False).rec
            self.flat.advance(txn.gen, self._catch_up(txn, rec))

    def _match_view(self, txn: ReadTxn, based: Based, values: Mapping[str, object]) -> np.ndarray:
        """The ids an event matches, from a view (:func:`betree.disk.nodes.id_array` form)."""
        truths: list[np.ndarray] = []

        def tree() -> tuple[list[np.ndarray], int]:
            sat, coords, _ = self._phase1(
                txn, based.view.searches, based.grouped, based.atoms, values, True
            )
            truths.append(sat)
            found, candidates = based.view.match(coords, sat)
            return [found], candidates

        shard = flatbatch.Shard(based.view, based.grouped, 0, 0, based.atoms)
        (found,), candidates = self.ranging.match([shard], [values], tree)
        self.last_stats = {"candidates": candidates, "pages": 0}
        if truths:  # the tree's phase 1 serves the delta's older atoms
            return based.delta.matched(found, truths[0], values)
        return settle([found], [based.delta], [values], [txn])[0]  # matched by intervals

    def _phase1(
        self,
        txn: ReadTxn,
        trees: Mapping[str, Any],
        grouped: Mapping[str, DirectAtoms],
        next_atom: int,
        values: Mapping[str, object],
        based: bool,
    ) -> tuple[np.ndarray, dict[str, int], int]:
        """The satisfied atoms (by atom id), the event's grid coordinates and the PB+tree
        pages read: from the snapshot's pages (``trees`` their records), or (``based``, ``trees``
        a base view's searches) from a base view's sorted arrays, by the base's atom ids."""
        sat = np.zeros(next_atom, dtype=bool)
        sat[0] = True
        pages = 0
        coords: dict[str, int] = {}
        types = self._types
        found: list[np.ndarray] = []  # from the view: set at once
        for attr, value in values.items():
            kind = types[attr]
            coords[attr] = grid.event_coord(kind, value)
            if kind not in _SCALAR or attr not in trees:
                continue
            if based:
                found += trees[attr].collect(value)
                continue
            pbtree = PBTree(txn, attr, record=trees[attr])
            ids = pbtree.search_array(value)
            if len(ids):
                sat[ids] = True
            pages += pbtree.pages_read
        if found:
            sat[np.concatenate(found)] = True
        mark(sat, grouped, values)
        return sat, coords, pages

    def _snap(self, txn: ReadTxn, records: bool = True) -> Snapshot:
        """Per-commit state (cached by gen): the root record, and with ``records`` the
        PB+tree records and direct atoms (:mod:`betree.matching.snapshot`; a match on a held
        view needs neither: one scan of a record per attribute saved per commit)."""
        if self._snapshot is not None and self._snapshot[0] == txn.gen:
            snap = self._snapshot[1]
            if snap.complete or not records:
                return snap
        rec = root_record(txn)
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

    def _attribute(self, key: bytes, what: str) -> str:
        """The attribute a per-attribute record is keyed by: a record whose key (not
        covered by the value's checksum) names no attribute of the schema is damage."""
        name = key.decode("utf-8", "replace")
        if name not in self._types:
            raise StoreDamaged(f"a {what} record for {name!r}, not an attribute of the schema")
        return name

    # -- explaining ----------------------------------------------------------------------

    def explain(self, ident: SubId, event: Mapping[str, object]) -> dict[str, Any]:
        """Why subscription ``ident`` does or does not match ``event``.

        For each clause: every atom with the event value it saw (and, on an attribute
        declared ``fold_case`` or of type ``ip``, the value as sent; on ``geo_within_radius``
        the distance and the radius: :mod:`betree.checking.explained`) and its truth value; then
        the index path — from the root, each p-node and c-directory bucket down to the
        c-node whose l-node holds the clause — and where this event's traversal would be
        pruned (an attribute the event does not define, or a value outside the bucket).
        """
        sent = sent_values(event)  # (betree.checking.explained: what each atom shows)
        with self.store.read() as txn:
            values = self.schema_in(txn).validate_event(event)
            ips = {n for n, spec in self.schema.attributes.items() if spec.type == "ip"}
            sid = catalog.subscription_key(txn, ident)
            if sid is None:
                raise InvalidInput(f"no subscription {ident!r}")
            _, expr, clause_ids = subscription_record(txn, ident, sid)
            rec = root_record(txn)
            tree = BETree(txn, rec)
            clauses = []
            for k, ids in enumerate(clause_ids):
                atoms = []
                for aid in ids:
                    if not aid:
                        atoms.append({"atom": "true", "holds": True})
                        continue
                    atom = load_atom(txn, aid)
                    atoms.append(shown_atom(atom, values, sent, self._keyed, ips))
                home = load_home(txn, clause_id(codec.decode_u64(sid), k))
                path = bucket_path(tree, home, values, self._types)
                clauses.append(
                    {
                        "atoms": atoms,
                        "holds": all(a["holds"] for a in atoms),
                        "home": home,
                        "path": path,
                        "reached": all(step["reached"] for step in path),
                    }
                )
        return {
            "id": ident,
            "expression": expr,
            "matches": any(c["holds"] for c in clauses),
            "clauses": clauses,
        }

    def coords(self, values: Mapping[str, object]) -> dict[str, int]:
        """A validated event's grid coordinate on each attribute it defines."""
        return {attr: grid.event_coord(self._types[attr], value) for attr, value in values.items()}

    # -- places ---------------------------------------------------------------------------

    def places(self, clause: Clause) -> Places:
        """Per attribute the clause needs defined, the grid interval its atoms allow
        (:func:`betree.disk.grid.clause_places`, spans kept by atom)."""
        return grid.clause_places(clause, self._types, self._spans)

    # -- inspecting -----------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts and shapes for ``bexdb inspect`` (reads every directory and tree page)."""
        with self.store.read() as txn:
            rec = root_record(txn)
            tree = BETree(txn, rec)
            sizes: dict[str, int] = {}
            bins = (0, 8, 32, 64, 128, 256, 1024)
            depth = pnodes = cnodes = spilled = extended = clauses = 0
            for node, _, level in tree.walk():
                cnodes += 1
                pnodes += len(node.pdir)
                depth = max(depth, level)
                clauses += node.size
                if node.size:
                    upper = next((b for b in bins if node.size <= b), None)
                    label = f"<= {upper}" if upper is not None else f"> {bins[-1]}"
                    sizes[label] = sizes.get(label, 0) + 1
                    pages = sum(1 for _ in tree.lnode_pages(node))
                    spilled += pages > 1
                extended += node.cap > rec["max_cap"]
            trees = {
                key.decode(): PBTree(txn, key.decode()).stats() for key, _ in txn.scan(PBTREE_NS)
            }
            return {
                "subscriptions": rec["subs"],
                "clauses": clauses,
                "predicates": txn.count(catalog.ATOM),
                "with_meta": txn.count(catalog.META),  # subscriptions that have metadata
                "betree": {
                    "depth": depth,
                    "p_nodes": pnodes,
                    "c_nodes": cnodes,
                    "l_node_sizes": {  # bins in size order
                        label: sizes[label]
                        for label in (*(f"<= {b}" for b in bins), f"> {bins[-1]}")
                        if label in sizes
                    },
                    "spilled_l_nodes": spilled,
                    "extended_l_nodes": extended,
                    "max_cap": rec["max_cap"],
                    "min_size": rec["min_size"],
                },
                "pbtrees": trees,
                "adjust": adjusting.summary(txn, rec),
                "pages": {k: {"pages": n, "bytes": b} for k, (n, b) in txn.page_kinds().items()},
                "store": self.store.stat(),
            }

    # -- checking -------------------------------------------------------------------------

    def check(self) -> None:
        """Every invariant of the BE-Tree, the catalog and the PB+trees; raises CheckFailed."""
        with self.store.read() as txn:
            self.schema_in(txn)
            check_index(self, txn)


def event_values(schema: Schema, event: object) -> Mapping[str, object]:
    """The validated values of one decoded event; raises :class:`InvalidInput` with the
    reason it is not one (README: Language, events): the one rule for every matcher."""
    if not isinstance(event, Mapping):
        raise InvalidInput("an event must be a JSON object")
    return schema.validate_event(event)
