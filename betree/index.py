"""``Index``: subscriptions in, matches out — the entry point over the BE-Tree, the PB+trees
and their catalog.

Its records (subscriptions, atoms, homes, per-attribute lists) are laid out and owned by
:mod:`betree.disk.catalog`; a write transaction's inserting and deleting is
:class:`betree.disk.writer.Writer`; an atom's grid span is :func:`betree.disk.grid.atom_span`.

``Index`` is the facade: opening, writing, matching, reading back, explaining, inspecting
and checking — the names of :class:`betree.stores.sharded.AnyIndex`, which a sharded store
offers too (``tests/test_architecture.py`` pins them).  What is not the user's is reached
through the objects that own it: matching's state, knobs (``flat``, ``ranging``,
``last_stats``, ``last_timings``) and compiler are ``index.engine``'s
(:class:`betree.engine.Engine`); self-adjustment (settings, statistics, flush, summary) is
``index.adjustment`` (:class:`betree.disk.adjustment.Adjustment`); the store is
``index.store``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

import numpy as np

from betree.checking.check import check_index
from betree.checking.explained import bucket_path, sent_values, shown_atom
from betree.disk import adjust as adjusting
from betree.disk import catalog, schemaedit
from betree.disk.adjust import ADJUST_DEFAULTS
from betree.disk.adjustment import Adjustment
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
from betree.disk.tree import DEFAULTS, BETree
from betree.disk.writer import gc_paused
from betree.engine import Engine
from betree.lang.dnf import MAX_CLAUSES
from betree.lang.schema import Schema
from betree.matching.batch import match_batch
from pbtree import PBTree
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import InvalidInput, StoreError, StoreReplaced
from storage.store import Store, open_store, refuse_sharded, store_exists


class Index:
    """A subscription index in a store directory.

    >>> with Index.open(path, schema=doc) as idx:  # doctest: +SKIP
    ...     idx.subscribe("s1", 'price between 20 and 40 and genre = "classics"')
    ...     idx.match({"price": 26, "genre": "classics"})
    ['s1']
    """

    def __init__(self, store: Store, schema: Schema) -> None:
        self.store = store
        #: matching's state and strategies, the schema as of the last snapshot, writes' places
        self.engine = Engine(store, schema)
        #: self-adjustment: its settings, this process's statistics, their flush, summary
        self.adjustment = Adjustment(store, self.engine)

    @property
    def schema(self) -> Schema:
        """The schema as of the last snapshot read (:meth:`betree.engine.Engine.schema_in`)."""
        return self.engine.schema

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
            collector = self.engine.collector
            if collector is not None and collector.events and not self.store.readonly:
                self.adjustment.flush()
        except StoreReplaced:
            pass
        finally:
            self.engine.close()
            self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self.store.read() as txn:
            return int(root_record(txn)["subs"])

    # -- what a sharded store has too (betree.stores.sharded.AnyIndex) ---------------------------

    @property
    def indexes(self) -> list[Index]:
        """The plain stores inside: this one (a sharded store has one per shard)."""
        return [self]

    @property
    def index(self) -> Index:
        """The one writable plain store: this one (a sharded store raises ``ShardedStore``)."""
        return self

    @property
    def writable(self) -> bool:
        """Whether the write methods work (the store was opened writable)."""
        return not self.store.readonly

    def add_to_schema(self, doc: Any) -> dict[str, list[str]]:
        """Add attributes or change hints (:func:`betree.disk.schemaedit.add_to_schema`)."""
        return schemaedit.add_to_schema(self, doc)

    def size_on_disk(self) -> int:
        return self.store.size_on_disk()

    def generations(self) -> tuple[int, ...]:
        """The latest committed generation, as a match begun now sees it."""
        with self.store.read() as txn:
            return (txn.gen,)

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
        self.engine.refresh_schema()
        with gc_paused():
            compiler = self.engine.compiler()
            compiled = [(i[0], i[1], compiler.compile(i[0], i[1]), item_meta(i)) for i in items]
            with self.store.write() as txn, self.engine.writer(txn) as w:
                created = w.insert_many(compiled)
        w.committed()
        self.engine.caught_up(len(created), w.logged)
        self.engine.place(due_only=True)
        return created

    def unsubscribe(self, ident: SubId) -> bool:
        """Delete one subscription; False if there was none with that id."""
        return self.unsubscribe_many([ident])[0]

    def unsubscribe_many(self, idents: Iterable[SubId], *, strict: bool = False) -> list[bool]:
        """Delete subscriptions in one transaction; per id, whether it existed.

        With ``strict``, an absent id deletes nothing: :class:`InvalidInput` names every
        absent one and the transaction is rolled back.
        """
        idents = list(idents)
        with gc_paused(), self.store.write() as txn, self.engine.writer(txn) as w:
            found = [w.delete(ident) for ident in idents]
            missing = [ident for ident, ok in zip(idents, found, strict=True) if not ok]
            if strict and missing:
                raise InvalidInput(
                    "no subscription " + ", ".join(map(repr, missing)) + ": nothing was deleted"
                )
        self.engine.caught_up(len(found), w.logged)
        return found

    def subscriptions(self) -> Iterator[tuple[SubId, str]]:
        """Every ``(id, expression)`` as given, in insertion order, streamed from one
        snapshot (held until the iterator is exhausted or closed): what ``bexdb export``
        writes.  Cost: one cursor step and one small decode per subscription."""
        with self.store.read() as txn:
            yield from catalog.subscriptions(txn, int(root_record(txn)["subs"]))

    def records(self) -> Iterator[tuple[SubId, str, str | None]]:
        """:meth:`subscriptions` with each one's metadata text (None: none)."""
        with self.store.read() as txn:
            yield from catalog.subscription_records(txn, int(root_record(txn)["subs"]))

    def page(self, after: SubId | None, limit: int) -> list[tuple[SubId, str]]:
        """Up to ``limit`` ``(id, expression)`` in id order from the first id above
        ``after`` (:func:`betree.disk.catalog.subscriptions_by_id`; ``GET /subscriptions``)."""
        with self.store.read() as txn:
            return list(islice(catalog.subscriptions_by_id(txn, after), limit))

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
            found = self.engine.match(txn, self.engine.schema_in(txn).validate_event(event))
        self.adjustment.flush_if_due()
        return found

    @contextmanager
    def snapshot(self) -> Iterator[Callable[[Mapping[str, object]], list[SubId]]]:
        """A matcher of validated events over one consistent read snapshot (what ``bexdb
        serve`` matches each request in); statistics flushed after it when due."""
        with self.store.read() as txn:
            self.engine.schema_in(txn)
            yield lambda values: self.engine.match(txn, values)
        self.adjustment.flush_if_due()  # self-adjustment, when the store has it on (a write)

    def match_many(self, events: Sequence[object]) -> list[list[SubId] | InvalidInput]:
        """Match a batch of events in one read snapshot; one result per event, in order.

        Each result is the list of ids :meth:`match` would return, or the
        :class:`InvalidInput` that event raised in validation (that event alone: the others
        are still matched).  Cost: see :meth:`betree.engine.Engine.match_many`.
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

    def _validate(self, event: object) -> Mapping[str, object]:
        return event_values(self.schema, event)

    def _match_many(self, events: Sequence[object], lists: bool, meta: bool = False) -> list[Any]:
        with self.store.read() as txn:  # (validated in the schema of the snapshot matched)
            self.engine.schema_in(txn)
            results = match_batch(
                events, self._validate, lambda valid: self.engine.match_many(txn, valid, lists)
            )
            if meta:
                results = with_metas([txn], None, results)
        self.adjustment.flush_if_due()
        return results

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
            values = self.engine.schema_in(txn).validate_event(event)
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
                    atoms.append(shown_atom(atom, values, sent, self.engine.keyed, ips))
                home = load_home(txn, clause_id(codec.decode_u64(sid), k))
                path = bucket_path(tree, home, values, self.engine.types)
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

    # -- inspecting -----------------------------------------------------------------------

    def stats(self) -> list[tuple[str | None, dict[str, Any]]]:
        """Counts and shapes for ``bexdb inspect`` (reads every directory and tree page),
        as a sharded store gives them: one ``(shard name, counts)``, here ``(None, …)``."""
        return [(None, self._counts())]

    def _counts(self) -> dict[str, Any]:
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
            self.engine.schema_in(txn)
            check_index(self, txn)


def event_values(schema: Schema, event: object) -> Mapping[str, object]:
    """The validated values of one decoded event; raises :class:`InvalidInput` with the
    reason it is not one (README: Language, events): the one rule for every matcher."""
    if not isinstance(event, Mapping):
        raise InvalidInput("an event must be a JSON object")
    return schema.validate_event(event)
