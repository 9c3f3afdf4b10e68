"""``Index``: subscriptions in, matches out — the entry point over the BE-Tree, the PB+trees
and their catalog.

Its records (subscriptions, atoms, homes, per-attribute lists) are laid out and owned by
:mod:`betree.catalog`; a write transaction's inserting and deleting is
:class:`betree.writer.Writer`; an atom's grid span is :func:`betree.grid.atom_span`.

Matching: phase 1 marks satisfied atoms in a boolean array (one PB+tree search per event
attribute, plus the direct tests); phase 2 walks the BE-Tree (see :mod:`betree.tree`), or,
once a snapshot has served enough events, tests its packed view (:mod:`betree.flat`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

from betree import adjust as adjusting
from betree import batch as batching
from betree import catalog, flat, flatbatch, grid, ranging
from betree.adjust import ADJUST_DEFAULTS, Collector
from betree.catalog import (
    SubId,
    clause_id,
    load_atom,
    load_home,
    record_attributes,
    root_record,
    subscription_record,
)
from betree.check import check_index
from betree.direct import DirectAtoms, holding
from betree.lang.atoms import Atom, Clause, atom_from_tuple
from betree.lang.bounded import forget_older_half
from betree.lang.conjuncts import ConjunctMemo
from betree.lang.dnf import MAX_CLAUSES, to_clauses
from betree.lang.expr import Node
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.nodes import id_array, listed
from betree.tree import DEFAULTS, BETree, Places
from betree.writer import Writer, gc_paused
from pbtree import PBTree
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import InvalidInput, StoreDamaged, StoreError, StoreReplaced
from storage.store import Store, open_store, refuse_sharded, store_exists
from storage.txn import ReadTxn, WriteTxn

_SCALAR = ("int", "float", "string")
#: Atoms whose grid span :meth:`Index.places` keeps (~200 bytes each); when full, the older
#: half is forgotten.
SPANS_LIMIT = 1 << 19
FlatView = flat.FlatTree | None


class Index:
    """A subscription index in a store directory.

    >>> with Index.open(path, schema=doc) as idx:  # doctest: +SKIP
    ...     idx.subscribe("s1", 'price between 20 and 40 and genre = "classics"')
    ...     idx.match({"price": 26, "genre": "classics"})
    ['s1']
    """

    def __init__(self, store: Store, schema: Schema) -> None:
        self.store = store
        self.schema = schema
        self._types = {name: grid.kind_of(spec.type) for name, spec in schema.attributes.items()}
        self._scalar = frozenset(name for name, kind in self._types.items() if kind in _SCALAR)
        #: Attributes whose event values are matched transformed (folded, or ip keys).
        self._keyed = schema.folded | {n for n, s in schema.attributes.items() if s.type == "ip"}
        #: per attribute, the grid range the children of a p-node's top bucket halve
        #: (:func:`betree.grid.hint_range` of the schema's ``min``/``max``)
        self.hints = {
            name: grid.hint_range(grid.kind_of(spec.type), spec.min, spec.max)
            for name, spec in schema.attributes.items()
        }
        self._always_defined = tuple(
            name for name, spec in schema.attributes.items() if not spec.allow_undefined
        )
        self._conjuncts = ConjunctMemo(schema)
        self._snapshot: tuple[int, dict[str, Any]] | None = None
        self._spans: dict[Atom, tuple[int, int] | tuple[()]] = {}  # atom -> grid span, bounded
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
        #: whether that view is matched by intervals instead (betree.ranging)
        self.ranging = ranging.Ranging(self._types)

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
        ``theta`` of :mod:`betree.adjust`) apply to a new store.
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

    def subscribe(self, ident: SubId, expr: str) -> bool:
        """Insert (or replace) one subscription, atomically.  True if it was new."""
        return self.subscribe_many([(ident, expr)])[0]

    def subscribe_many(self, items: Iterable[tuple[SubId, str]]) -> list[bool]:
        """Insert or replace many subscriptions in one transaction (all or nothing).

        Every expression is compiled before anything is written; an error names the
        subscription id and changes nothing.
        """
        with gc_paused():
            compiled = [(ident, expr, self.compile(ident, expr)) for ident, expr in items]
            created = []
            with self.store.write() as txn, self.writer(txn) as w:
                for ident, expr, clauses in compiled:
                    created.append(w.insert(ident, expr, clauses))
        return created

    def compile(self, ident: SubId, expr: str) -> list[Clause]:
        """Type-check and normalize one expression; errors name the subscription.

        A plain conjunction is joined from its remembered pieces (:mod:`betree.lang.conjuncts`,
        ~4 µs), anything else parsed and normalized (~35 µs for 8 predicates).
        """
        codec.encode_id(ident)  # validates the id
        if not isinstance(expr, str):
            raise InvalidInput(f"subscription {ident!r}: the expression must be a string")
        max_clauses = self._max_clauses()
        if max_clauses >= 1:
            clauses = self._conjuncts.clauses(expr)
            if clauses is not None:
                return clauses
        try:
            node: Node = compile_expr(expr, self.schema)
            return to_clauses(node, max_clauses, always_defined=self._always_defined)
        except InvalidInput as exc:
            raise InvalidInput(
                f"subscription {ident!r}: {exc.message}", column=exc.column, hint=exc.hint
            ) from exc

    def _max_clauses(self) -> int:
        if not hasattr(self, "_max_clauses_cache"):
            with self.store.read() as txn:
                self._max_clauses_cache = int(root_record(txn)["max_clauses"])
        return self._max_clauses_cache

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
            return found

    @contextmanager
    def writer(self, txn: WriteTxn) -> Iterator[Writer]:
        """A :class:`betree.writer.Writer` inserting and deleting in ``txn``, which writes
        the root record when the block ends without an error."""
        writer = Writer(txn, self.places, self.hints)
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
            yield from catalog.subscriptions(txn)

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
        """Change the stored self-adjustment settings (see :mod:`betree.adjust`).

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
        values = self.schema.validate_event(event)
        with self.store.read() as txn:
            found = self.match_validated(txn, values)
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
        (:func:`betree.nodes.id_array`): what ``bexdb match`` writes, without a Python
        object per id."""
        return self._match_many(events, False)

    def _match_many(self, events: Sequence[object], lists: bool) -> list[Any]:
        def matched(valid: list[Mapping[str, object]]) -> list[Any]:
            with self.store.read() as txn:
                return self.match_many_validated(txn, valid, lists)

        results = batching.match_batch(events, self.validate, matched)
        self.adjust_if_due()
        return results

    def validate(self, event: object) -> Mapping[str, object]:
        """An event's validated values (:func:`event_values`)."""
        return event_values(self.schema, event)

    def match_many_validated(
        self, txn: ReadTxn, batch: Sequence[Mapping[str, object]], lists: bool = False
    ) -> list[Any]:
        """:meth:`match_validated` of each validated event of ``batch`` in ``txn`` (as
        :func:`betree.nodes.id_array`, or as lists), in one pass over the index
        (:mod:`betree.batch`: one PB+tree search per distinct value, each reached node and
        l-node page read and checked once for the whole batch).

        A batch of one, or with statistics collected (self-adjustment), is matched event
        by event; on a packed view (its events count towards one) by
        :func:`betree.flatbatch.match`, or one by one under ``flatbatch.LEAST`` events.
        ``last_stats`` holds the totals, ``last_timings`` the seconds of each phase.
        """
        snap = self._snap(txn)
        collecting = self._collector is not None or snap["collect"] or self.collecting
        if len(batch) <= 1 or collecting:
            return listed([id_array(self.match_validated(txn, v)) for v in batch], lists)
        view = self._view(txn, snap, len(batch))
        if view is not None:  # the pages it replaces are gone (README)
            if len(batch) < flatbatch.LEAST:
                return listed([self._match_view(txn, snap, view, v) for v in batch], lists)
            shard = flatbatch.Shard(view, snap["grouped"], 0, 0, snap["next_atom"])
            return self.match_on_views(view, [shard], batch, lists)
        if len(batch) > batching.MAX_EVENTS:  # bounds the bit matrix: see betree.batch
            step = batching.MAX_EVENTS
            parts = [batch[k : k + step] for k in range(0, len(batch), step)]
            return [ids for p in parts for ids in self.match_many_validated(txn, p, lists)]
        order = batching.shape_order(batch)
        batch = [batch[e] for e in order]
        clock = time.perf_counter
        t0 = clock()
        types = self._types
        sat, pages = batching.satisfied(
            txn, snap["trees"], snap["grouped"], snap["next_atom"], self._scalar, batch
        )
        t1 = clock()
        coords = [
            {attr: self._coord(types[attr], value) for attr, value in values.items()}
            for values in batch
        ]
        tree = BETree(txn, snap["rec"])
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
        """A validated batch matched on packed views (:mod:`betree.flatbatch`), each
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
        snap = self._snap(txn)
        stats = self._collector
        if stats is None and (snap["collect"] or self.collecting):
            stats = self._collector = Collector()
        # the per-node statistics come from the walk only
        view = None if stats is not None else self._view(txn, snap)
        if view is not None:
            return self._match_view(txn, snap, view, values).tolist()  # type: ignore[no-any-return]
        sat, coords, pages = self._phase1(txn, snap, values, None)
        tree = BETree(txn, snap["rec"])
        out: dict[int, SubId] = {}
        candidates = tree.match(coords, sat, out, stats)
        if stats is not None:
            stats.events += 1
        self.last_stats = {"candidates": candidates, "pages": pages + tree.pages_read}
        return list(out.values())

    def held_view(self, txn: ReadTxn) -> tuple[flat.FlatTree, dict[str, DirectAtoms], int] | None:
        """The packed view of ``txn``'s snapshot if one is held, with the snapshot's
        direct atoms and atom count (a sharded store joins its shards': betree.joined)."""
        view = None if txn.writable else self.flat.held(txn.gen)
        if view is None:
            return None
        snap = self._snap(txn)
        if self._collector is not None or snap["collect"] or self.collecting:
            return None  # (the statistics come from walks)
        return view, snap["grouped"], snap["next_atom"]

    def _view(self, txn: ReadTxn, snap: dict[str, Any], events: int = 1) -> flat.FlatTree | None:
        """The packed view of ``txn``'s snapshot for ``events`` more events, or None
        (:class:`betree.flat.FlatSlot`; never within a write: it holds committed pages)."""
        if txn.writable:
            return None
        make = lambda: flat.build(BETree(txn, snap["rec"]), snap["trees"])  # noqa: E731
        return self.flat.get(txn.gen, make, snap["rec"]["subs"], events)  # clauses >= subs

    def _match_view(
        self, txn: ReadTxn, snap: dict[str, Any], view: flat.FlatTree, values: Mapping[str, object]
    ) -> np.ndarray:
        """The ids an event matches, from a view (:func:`betree.nodes.id_array` form)."""

        def tree() -> tuple[list[np.ndarray], int]:
            sat, coords, _ = self._phase1(txn, snap, values, view)
            found, candidates = view.match(coords, sat)
            return [found], candidates

        shard = flatbatch.Shard(view, snap["grouped"], 0, 0, snap["next_atom"])
        (found,), candidates = self.ranging.match([shard], [values], tree)
        self.last_stats = {"candidates": candidates, "pages": 0}
        return found

    def _phase1(
        self, txn: ReadTxn, snap: dict[str, Any], values: Mapping[str, object], view: FlatView
    ) -> tuple[np.ndarray, dict[str, int], int]:
        """The satisfied atoms (by atom id), the event's grid coordinates and the PB+tree
        pages read: from the view's sorted arrays when given one, else from the pages."""
        trees: dict[str, dict[str, Any]] = snap["trees"]
        sat = np.zeros(snap["next_atom"], dtype=bool)
        sat[0] = True
        pages = 0
        coords: dict[str, int] = {}
        types = self._types
        found: list[np.ndarray] = []  # from the view: set at once
        for attr, value in values.items():
            kind = types[attr]
            coords[attr] = self._coord(kind, value)
            if kind not in _SCALAR or attr not in trees:
                continue
            if view is not None:
                found += view.searches[attr].collect(value)
                continue
            pbtree = PBTree(txn, attr, record=trees[attr])
            ids = pbtree.search_array(value)
            if len(ids):
                sat[ids] = True
            pages += pbtree.pages_read
        if found:
            sat[np.concatenate(found)] = True
        sat[holding(snap["grouped"], values)] = True
        return sat, coords, pages

    def _snap(self, txn: ReadTxn) -> dict[str, Any]:
        """Per-commit state: root record, PB+tree records, direct atoms (cached by gen)."""
        if self._snapshot is not None and self._snapshot[0] == txn.gen:
            return self._snapshot[1]
        rec = root_record(txn)
        trees = {}
        for key, value in txn.scan(PBTREE_NS):
            name = self._attribute(key, "PB+tree")
            trees[name] = codec.decode_value(value)
        direct: dict[str, list[tuple[int, Atom]]] = {}
        for key, value in txn.scan(catalog.DIRECT):
            name = self._attribute(key, "direct atoms")
            direct[name] = [(aid, atom_from_tuple(t)) for aid, t in codec.decode_value(value)]
            if any(atom.attr != name for _, atom in direct[name]):
                raise StoreDamaged(f"the direct atoms of {name!r} name another attribute")
        listed = {"pbtrees": list(trees), "direct": list(direct)}
        if listed != rec.get("attributes"):
            raise StoreDamaged(
                f"the per-attribute records found ({listed}) are not those the root record "
                f"lists ({rec.get('attributes')})"
            )
        # read-only, statistics could never be flushed: collect only when asked to
        collect = bool(rec.get("adjust")) and not self.store.readonly
        snap = {
            "rec": rec,
            "next_atom": rec["next_atom"],
            "trees": trees,
            "direct": direct,
            "grouped": {name: DirectAtoms(atoms) for name, atoms in direct.items()},
            "collect": collect,
        }
        auto = collect and self.auto_adjust and not self.store.readonly
        self._flush_every = rec.get("adjust_window", 1) if auto else math.inf
        self._snapshot = (txn.gen, snap)
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
        declared ``fold_case`` or of type ``ip``, the value as sent) and its truth value; then
        the index path — from the root, each p-node and c-directory bucket down to the
        c-node whose l-node holds the clause — and where this event's traversal would be
        pruned (an attribute the event does not define, or a value outside the bucket).
        """
        values = self.schema.validate_event(event)
        with self.store.read() as txn:
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
                    shown = {
                        "atom": atom.to_expr(),
                        "attribute": atom.attr,
                        "value": values.get(atom.attr),
                        "holds": atom.holds(values),
                    }
                    if atom.attr in self._keyed and event.get(atom.attr) is not None:
                        shown["sent"] = event[atom.attr]  # as sent; "value": as matched
                    atoms.append(shown)
                home = load_home(txn, clause_id(codec.decode_u64(sid), k))
                path = self._path(tree, home, values)
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

    def _path(self, tree: BETree, home: int, values: Mapping[str, object]) -> list[dict[str, Any]]:
        """The c-directory buckets from the root down to ``home``, each reached or not."""
        steps = []
        page = home
        while True:
            node = tree.node(page)
            if node.attr is None:
                break
            kind = self._types[node.attr]
            defined = node.attr in values
            x = self._coord(kind, values[node.attr]) if defined else None
            reached = defined and (node.top or node.lo <= x <= node.hi)  # type: ignore[operator]
            why = None if reached else ("undefined" if not defined else "value outside bucket")
            steps.append(
                {
                    "attribute": node.attr,
                    # the bucket as values (an attribute's values from lo to hi), and on the
                    # grid (betree.grid: where the c-directory halves it)
                    "bucket": "top"
                    if node.top
                    else [grid.shown(kind, node.lo), grid.shown(kind, node.hi)],
                    "grid": None if node.top else [node.lo, node.hi],
                    "c_node": node.page,
                    "reached": reached,
                    "pruned": why,
                }
            )
            page = node.parent
        steps.reverse()
        return steps

    def coords(self, values: Mapping[str, object]) -> dict[str, int]:
        """A validated event's grid coordinate on each attribute it defines."""
        return {attr: self._coord(self._types[attr], value) for attr, value in values.items()}

    def _coord(self, kind: str, value: object) -> int:
        if kind in _SCALAR:
            return grid.coord(kind, value)
        return int(bool(value)) if kind == "bool" else 0

    # -- places ---------------------------------------------------------------------------

    def places(self, clause: Clause) -> Places:
        """Per attribute the clause needs defined, the grid interval its atoms allow.

        Cost: ~0.3 µs per atom whose span is cached (by atom, bounded; ``()`` for the
        atom ``a is null``, which needs nothing) and found by identity (see
        :func:`betree.lang.atoms.order_atoms`).
        """
        spans: dict[str, tuple[int, int]] = {}
        cache = self._spans
        empty = False
        for atom in clause:
            span = cache.get(atom)
            if span is None:
                if len(cache) > SPANS_LIMIT:
                    forget_older_half(cache)
                span = cache[atom] = (
                    grid.atom_span(self._types[atom.attr], atom) if atom.requires_defined else ()
                )
            if not span:
                continue
            attr = atom.attr
            prev = spans.get(attr)
            if prev is not None:
                span = (max(span[0], prev[0]), min(span[1], prev[1]))
            spans[attr] = span
            empty = empty or span[0] > span[1]
        if not empty:
            return spans
        full = (0, grid.GRID_MAX)
        return {attr: span if span[0] <= span[1] else full for attr, span in spans.items()}

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
            check_index(self, txn)


def event_values(schema: Schema, event: object) -> Mapping[str, object]:
    """The validated values of one decoded event; raises :class:`InvalidInput` with the
    reason it is not one (README: Language, events): the one rule for every matcher."""
    if not isinstance(event, Mapping):
        raise InvalidInput("an event must be a JSON object")
    return schema.validate_event(event)
