"""``Writer``: one write transaction's view of an index — interning, inserting, deleting.

A subscription's insertion writes its catalog records (:mod:`betree.disk.catalog`: ``sub``,
``ext``, ``meta`` if it has metadata, one ``home`` per clause, the ``atom``/``aid``
records of atoms new to the index with their PB+tree entries or direct tests), then
inserts each clause into the BE-Tree at its places; deletion undoes the same, releasing
atoms whose last use goes.  PB+trees and direct-atom lists touched are kept open for the
transaction, and :meth:`Writer.finish` writes the direct lists, the change log's entry
(:mod:`betree.disk.changelog`) and the root record once at the end.

An attribute's direct atoms are one record (a list of ``[atom id, atom tuple]``; 4 MB for
31K atoms of ``user.interests`` at 50K rich rules).  Decoded and encoded whole, a write
that adds or drops one cost ~200 ms and left ~100K objects for the garbage collector
(whose passes then cost the next matches up to 1.5 s).  Instead the writer keeps each
list as its elements' packed bytes by atom id (:class:`Memo`, across transactions, taken
again only while the stored record is the very bytes it wrote or read), and writes the
record by joining them (:func:`storage.codec.encode_parts`): a write costs one
comparison, one join and one checksum of the record, and no object an element.

A batch (:meth:`Writer.insert_many`, ``subscribe_many``) reads its atoms' records first, in
key order, and puts its clauses into the BE-Tree together, grouped by l-node
(:meth:`betree.disk.tree.BETree.insert_many`); ``home`` and ``atom`` records are written
once at the end, in key order (one LMDB ``putmulti`` each), and so are the ``sub`` and
``ext`` records of a batch of distinct ids.  The records are those one insert at a time
writes; only where the tree's splits fall may differ.  Cost at 100K BEGen: ~0.25 ms of
CPU a subscription (one at a time: ~0.3-0.35; docs/bench/live/README.md).

A batch of new distinct ids bound for the pending area (:mod:`betree.disk.pending`: the
large batches into a large store) is written column-wise (:meth:`Writer._insert_new`):
its atoms' keys listed per clause, their uses counted in one pass (C), then each distinct
atom's record counted, or a new atom made, once for the batch (1M BEGen: ~2,700 atoms a
shard's part of 1,000, against ~15,500 uses one at a time), the new atoms' ``aid``
records in one ``putmulti``; the atoms' keys listed per clause in the one pass that keys
them, the ``atom`` records not yet known and the ids' ``ext`` records read in key order
through one LMDB cursor each (:meth:`storage.txn.ReadTxn.get_many`), and the ``sub``
records, the change log's entries and the pending clauses built as columns (one
comprehension each, not a loop an item).  The records, atom ids and pending clauses are
those one insert at a time writes (``tests/betree/test_write_columns.py`` compares every
record).

:meth:`betree.engine.Engine.writer` makes one; self-adjustment (:func:`betree.disk.adjust.flush`)
re-inserts clauses through its tree.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import Any

from betree.disk import catalog, changelog, grid, pending
from betree.disk.adjust import feedback
from betree.disk.catalog import SubId, clause_id
from betree.disk.nodes import Entry
from betree.disk.tree import BETree, Places
from betree.lang.atoms import Atom, Clause, OrderAtom, atom_from_tuple
from betree.lang.bounded import forget_older_half
from pbtree import PBTree
from storage import codec
from storage.errors import StoreDamaged
from storage.txn import WriteTxn


class Writer:
    """Inserting and deleting subscriptions in ``txn``.

    ``places`` gives a clause's places (:meth:`betree.engine.Engine.places`); ``hints`` the
    grid range a new p-node's top bucket halves, per attribute; ``types`` each attribute's
    grid kind.  ``memo``: the atoms (by id), their requirements on places (by id) and
    stored clauses' places (by clause id) that earlier transactions of this store
    read, kept by the caller across them (bounded): ids are never reused and a clause's
    atoms never change, so only what was committed before this transaction goes in.
    """

    def __init__(
        self,
        txn: WriteTxn,
        places: Callable[[Clause], Places],
        hints: Mapping[str, tuple[int, int]],
        types: Mapping[str, str],
        memo: Memo | None = None,
    ) -> None:
        self.txn = txn
        self.places = places
        self.hints = hints
        self.memo = memo if memo is not None else Memo()
        self.types = types
        self.rec = catalog.root_record(txn)
        self.first_atom = self.rec["next_atom"]  # ids from here on are this transaction's
        self.first_sid = self.rec["next_sid"]
        self.trees: dict[str, PBTree] = {}
        self.tree = BETree(
            txn,
            self.rec,
            places=self.stored_places,
            hint=hints.__getitem__,
            moved=self._moved,
            prefetch=self._prefetch,
            feedback=feedback(txn),
            dissolve=bool(self.rec.get("adjust")),
        )
        #: the direct-atom lists read or changed: each element's packed bytes by atom id
        self.direct: dict[str, dict[int, bytes]] = {}
        self.atoms: dict[int, Atom] = {}
        #: ``atom`` records read or changed in this transaction (key -> [aid, refcount],
        #: None once dropped), written once by :meth:`finish`: a batch's repeated atoms
        #: cost one get and one put each, not one per use
        self.counts: dict[bytes, list[int] | None] = {}
        #: the ``atom`` records as this process's last commit left them (:class:`Memo`),
        #: if no other transaction committed since (else forgotten)
        self.known = self.memo.counts if self.memo.counted == self._state() else {}
        if not self.known:
            self.memo.counts.clear()
            self.memo.counted = None
        #: places of the clauses this transaction inserted or clustered (a clause's atoms,
        #: hence its places, never change), for clustering's re-reads
        self.placed: dict[int, Places] = {}
        #: atoms' requirements (:meth:`_requirement`) of this transaction's new atoms
        self.spans: dict[int, tuple[str, tuple[int, int] | tuple[()]]] = {}
        #: what this transaction removed and added, for the change log (betree.disk.changelog)
        self.removed: changelog.Removed = []
        self.added: changelog.Added = []
        self.expressions: list[str] = []  # of the removed, in their order
        #: ``home`` records set (a page) or dropped (None) in this transaction, written
        #: once, in key order, by :meth:`finish`: clustering moves a clause several times
        self.homes: dict[int, int | None] = {}
        #: clauses inserted but not yet put into the BE-Tree (only inside insert_many)
        self.pending: list[tuple[Entry, Places]] | None = None
        #: of those, the ones bound for the pending area (betree.disk.pending)
        self.deferred: list[Entry] = []
        #: whether this transaction's batches may defer placement (a self-adjusting store's
        #: re-insertions would split the root under them: it places at once), and whether
        #: the batch under way does (:func:`betree.disk.pending.defers`)
        self.defers = not self.rec.get("adjust")
        self.deferring = False
        #: ``sub`` and ``ext`` records not yet written (inside an insert_many of distinct
        #: ids): ``(sid key, id key, sub record)``
        self.records: list[tuple[bytes, bytes, list[Any]]] | None = None
        #: the store key of each atom met (atoms are interned objects; a key is a pure
        #: function of its atom, so the memo's, kept across transactions)
        self.keys = self.memo.keys
        #: inside :meth:`insert_many`, the key of each atom object of its items, by id
        self.keyed: dict[int, bytes] = {}
        #: the change log entry :meth:`finish` wrote, by its number (for this process's
        #: catch-up: not read back and decoded, ~10K objects a batch of 1,000)
        self.logged: dict[int, changelog.Change] = {}

    def stored_places(self, entry: Entry) -> Places:
        """A stored clause's places, from the atom ids its l-node entry carries (each
        atom's requirement kept by id: no atom object built or hashed once it is known)."""
        cid, _, ids = entry
        places = self.placed.get(cid)
        if places is not None:
            return places
        kept = self.memo.placed.get(cid)
        if kept is not None:
            places = self.placed[cid] = {attr: (v >> 64, v & _U64) for attr, v in kept.items()}
            return places
        spans, memo_spans = self.spans, self.memo.spans
        pairs = []
        for aid in ids:
            if aid:
                pair = memo_spans.get(aid) or spans.get(aid) or self._requirement(aid)
                pairs.append(pair)
        places = self.placed[cid] = grid.combined(pairs)
        if catalog.clause_parts(cid)[0] < self.first_sid:
            packed = {attr: lo << 64 | hi for attr, (lo, hi) in places.items()}
            remember(self.memo.placed, cid, packed)
        return places

    def _requirement(self, aid: int) -> tuple[str, tuple[int, int] | tuple[()]]:
        """Atom ``aid``'s attribute and :func:`betree.disk.grid.requirement` (kept); an
        order atom not held as an object is not made one: its span from the entries its
        store key holds (:func:`betree.disk.grid.entries_span`, the atom's own), what the
        splits' re-read clauses need of ~14,000 atoms a placement of 24,000 into 1M BEGen."""
        atom = self.atoms.get(aid)
        if atom is None:
            atom = self.memo.atoms.get(aid)
        if atom is None:
            stored = codec.decode_value(catalog.atom_key(self.txn, aid))
            if stored[0] == "order":
                attr = str(stored[1])
                pair: tuple[str, tuple[int, int] | tuple[()]]
                pair = (attr, grid.entries_span(self.types[attr], stored[2]))
            else:
                atom = self.atom(aid)
        if atom is not None:
            pair = (atom.attr, grid.requirement(self.types[atom.attr], atom))
        if aid < self.first_atom:
            remember(self.memo.spans, aid, pair)
        else:
            self.spans[aid] = pair
        return pair

    def _moved(self, cid: int, page: int) -> None:
        self.homes[cid] = page

    def _home(self, cid: int) -> int | None:
        """The c-node page holding clause ``cid`` as this transaction left it."""
        if cid in self.homes:
            return self.homes[cid]
        home = self.txn.get(catalog.HOME, codec.encode_u64(cid))
        return None if home is None else codec.decode_u64(home)

    def _prefetch(self, entries: list[Entry]) -> None:
        """Read the requirements of the atoms of the stored clauses among ``entries``
        whose places are not known yet, in atom id order (the ``aid`` and ``atom``
        records one after another, not scattered over the clustering of an l-node)."""
        placed, memo_placed, spans, memo_spans = (
            self.placed,
            self.memo.placed,
            self.spans,
            self.memo.spans,
        )
        wanted = {
            aid
            for cid, _, ids in entries
            if cid not in placed and cid not in memo_placed
            for aid in ids
            if aid and aid not in memo_spans and aid not in spans
        }
        for aid in sorted(wanted):
            self._requirement(aid)

    def atom(self, aid: int) -> Atom:
        """The atom with id ``aid`` (cached for the transaction)."""
        atom = self.atoms.get(aid)
        if atom is None:
            atom = self.memo.atoms.get(aid)
        if atom is None:
            atom = self.atoms[aid] = catalog.load_atom(self.txn, aid)
            if aid < self.first_atom:
                remember(self.memo.atoms, aid, atom)
        return atom

    def _pbtree(self, attr: str) -> PBTree:
        if attr not in self.trees:
            self.trees[attr] = PBTree(self.txn, attr)
        return self.trees[attr]

    def _direct(self, attr: str) -> dict[int, bytes]:
        """The direct atoms of ``attr`` as this transaction left them (module docstring);
        the memo's copy is taken (not copied): :meth:`finish` gives it back."""
        parts = self.direct.get(attr)
        if parts is None:
            stored = self.txn.get(catalog.DIRECT, attr.encode()) or b""
            kept = self.memo.direct.pop(attr, None)
            if kept is not None and kept[0] == stored:
                parts = kept[1]
            else:
                listed = codec.decode_value(stored) if stored else []
                parts = {int(entry[0]): codec.pack_part(entry) for entry in listed}
            self.direct[attr] = parts
        return parts

    def _key(self, atom: Atom) -> bytes:
        key = self.keys.get(atom)
        if key is None:
            if len(self.keys) >= MEMO_LIMIT:
                forget_older_half(self.keys)
            key = self.keys[atom] = codec.encode_value(atom.as_tuple())
        return key

    def intern(self, atom: Atom) -> int:
        """The id of ``atom``, counting one more use (a new atom gets the next id, its
        PB+tree entries or its direct test)."""
        key = self.keyed.get(id(atom)) or self._key(atom)
        found = self._count(key)
        if found is not None:
            found[1] += 1
            self.atoms[found[0]] = atom
            return int(found[0])
        aid = self._new_atom(key, atom, 1)
        self.txn.put(catalog.AID, codec.encode_u64(aid), key)
        return aid

    def _new_atom(self, key: bytes, atom: Atom, uses: int) -> int:
        """The next atom id for ``atom`` (store key ``key``), with ``uses`` uses, its PB+tree
        entries or its direct test (the caller writes its ``aid`` record)."""
        aid = int(self.rec["next_atom"])
        self.atoms[aid] = atom
        self.rec["next_atom"] = aid + 1
        self.counts[key] = [aid, uses]
        if isinstance(atom, OrderAtom):
            tree = self._pbtree(atom.attr)
            for op, const in atom.entries:
                tree.insert(op, const, aid)
        else:
            self._direct(atom.attr)[aid] = codec.pack_part([aid, list(atom.as_tuple())])
        return aid

    def _count(self, key: bytes) -> list[int] | None:
        """The ``[aid, refcount]`` of atom ``key`` as this transaction left it (None: no
        such atom)."""
        if key in self.counts:
            return self.counts[key]
        if key in self.known:
            kept = self.known[key]
            found = None if kept is None else [kept[0], kept[1]]
            self.counts[key] = found
            return found
        found = self.counts[key] = _atom_count(self.txn.get(catalog.ATOM, key))
        return found

    def _read_counts(self, keys: list[bytes]) -> None:
        """:meth:`_count` of each of ``keys`` (sorted; none read yet), from one LMDB cursor
        walking them in order."""
        counts = self.counts
        for key, raw in zip(keys, self.txn.get_many(catalog.ATOM, keys), strict=True):
            counts[key] = _atom_count(raw)

    def insert_many(
        self, items: Sequence[tuple[SubId, str, list[Clause], str | None]]
    ) -> list[bool]:
        """:meth:`insert` of each ``(id, expression, clauses, meta)`` in turn (the same
        records and atom ids as one call each), the ``atom`` records of all their atoms
        read first, once each, in key order (what a B-tree reads fastest), and the clauses
        put into the BE-Tree together at the end, grouped by l-node (before that only if
        the batch replaces or deletes one of its own)."""
        # each atom object's key once (by identity: the items hold them meanwhile, and the
        # memo is cleared however the batch ends, before an id can be reused; an atom
        # hashes in Python, so a dict of atoms costs a call a use)
        keyed = self.keyed
        try:
            objects: dict[bytes, Atom] = {}  # (the batch's atom object of each key)
            per_clause: list[list[bytes]] = []  # (each clause's atoms' keys, in order)
            for _, _, clauses, _ in items:
                for clause in clauses:
                    keys = []
                    for atom in clause:
                        key = keyed.get(id(atom))
                        if key is None:
                            key = keyed[id(atom)] = self._key(atom)
                            objects[key] = atom
                        keys.append(key)
                    per_clause.append(keys)
            self._read_counts(sorted(objects.keys() - self.counts.keys() - self.known.keys()))
            self.pending = []
            self.deferring = self.defers and pending.defers(self.rec, len(items))
            # distinct ids: no insert of the batch reads another's records, so they are
            # written together at the end, each kind in key order (one LMDB call each)
            exts = [codec.encode_id(item[0]) for item in items]
            distinct = len(set(exts)) == len(items)
            self.records = [] if distinct else None
            if distinct and self._all_new(exts):
                created = self._insert_new(items, exts, objects, per_clause)
            else:
                created = [self.insert(i, expr, clauses, meta) for i, expr, clauses, meta in items]
            self._place_pending()
            if self.records:
                sids, exts, subs = zip(*self.records, strict=True)
                self.txn.put_many(catalog.SUB, sids, codec.encode_values(subs))
                order = sorted(range(len(exts)), key=exts.__getitem__)
                self.txn.put_many(catalog.EXT, [exts[k] for k in order], [sids[k] for k in order])
        finally:
            self.pending = None
            self.deferred = []
            self.records = None
            keyed.clear()
        return created

    def _all_new(self, exts: list[bytes]) -> bool:
        """Whether a batch of these (distinct) ids goes wholly into the pending area and
        replaces none (:meth:`_insert_new` writes it)."""
        if not self.deferring and self.rec.get("pending_from") is None:
            return False
        return all(found is None for found in self.txn.get_many(catalog.EXT, sorted(exts)))

    def _insert_new(
        self,
        items: Sequence[tuple[SubId, str, list[Clause], str | None]],
        exts: list[bytes],
        objects: dict[bytes, Atom],
        per_clause: list[list[bytes]],
    ) -> list[bool]:
        """:meth:`insert` of each of ``items`` (distinct ids, none stored, deferred: the
        same records, atom ids and pending clauses), written column-wise: each distinct
        atom's record counted and a new one made once for the batch (in order of first
        use, the ids one at a time gives), not once a use; the clause's atom ids by one
        lookup an atom.  ``exts``: the items' id keys; ``objects``: each atom key's atom;
        ``per_clause``: each clause's atoms' keys, the items' clauses in order."""
        uses = Counter(chain.from_iterable(per_clause))  # (by first use: the ids' order)
        ids: dict[bytes, int] = {}
        made: list[tuple[int, bytes]] = []
        count = self._count
        for key, n in uses.items():
            found = count(key)
            if found is None:
                aid = self._new_atom(key, objects[key], n)
                made.append((aid, key))
            else:
                found[1] += n
                aid = int(found[0])
                self.atoms[aid] = objects[key]
            ids[key] = aid
        if made:  # (ascending ids: the key order)
            aids, keys = zip(*made, strict=True)
            self.txn.put_many(catalog.AID, codec.encode_u64s(aids), keys)
        # the records as columns: every clause's atom ids, then per item its sid, key and
        # clauses' ids (clause ``k`` of sid ``s`` is ``s << CLAUSE_BITS | k``)
        first = int(self.rec["next_sid"])
        end = first + len(items)
        clause_atoms = [
            [ids[key] for key in keys] if keys else [0] for keys in per_clause
        ]  # (``[0]``: the true atom of an empty clause)
        sids = range(first, end)
        sid_keys = codec.encode_u64s(sids)
        idents = [item[0] for item in items]
        if all(len(item[2]) == 1 for item in items):  # one clause an item (the common case)
            per_item = [[aids] for aids in clause_atoms]
            self.deferred.extend(
                zip([clause_id(sid, 0) for sid in sids], idents, clause_atoms, strict=True)
            )
        else:
            per_item, at = [], 0
            for sid, ident, (_, _, clauses, _) in zip(sids, idents, items, strict=True):
                atom_ids = clause_atoms[at : at + len(clauses)]
                at += len(clauses)
                per_item.append(atom_ids)
                self.deferred.extend(
                    (clause_id(sid, k), ident, aids) for k, aids in enumerate(atom_ids)
                )
        self.added.extend(map(list, zip(sids, idents, per_item, strict=True)))
        records = self.records
        assert records is not None
        records.extend(
            (sid_key, ext_key, [item[0], item[1], atom_ids])
            for sid_key, ext_key, item, atom_ids in zip(
                sid_keys, exts, items, per_item, strict=True
            )
        )
        for item, ext_key in zip(items, exts, strict=True):
            if item[3] is not None:
                catalog.put_meta(self.txn, ext_key, item[3])
        self.rec["next_sid"] = end
        self.rec["subs"] += len(items)
        self.rec.setdefault("pending_from", first)
        return [True] * len(items)

    def _place_pending(self) -> None:
        """Put the clauses :meth:`insert_many` holds back into the BE-Tree, grouped by the
        l-node each goes to (:meth:`betree.disk.tree.BETree.insert_many`), or into its
        pending area (:mod:`betree.disk.pending`)."""
        if self.pending:
            held, self.pending = self.pending, []
            self.tree.insert_many(held)
        if self.deferred:
            deferred, self.deferred = self.deferred, []
            self.tree.defer(deferred)

    def place(self) -> int:
        """Move the pending area's clauses into the tree (:mod:`betree.disk.pending`), as
        one batch's clauses are inserted; returns how many were moved."""
        start = pending.first(self.rec)
        if start is None:
            return 0
        taken = self.tree.take_pending(start)
        self._prefetch(taken)
        self.tree.insert_many([(entry, self.stored_places(entry)) for entry in taken])
        del self.rec["pending_from"]
        return len(taken)

    def release(self, aid: int) -> None:
        """Count one use of atom ``aid`` less; drop the atom with its last use."""
        key = catalog.atom_key(self.txn, aid)
        found = self._count(key)
        if found is None:
            raise StoreDamaged(f"the record of atom {aid} is missing or malformed")
        if found[1] > 1:
            found[1] -= 1
            return
        self.counts[key] = None
        self.txn.delete(catalog.AID, codec.encode_u64(aid))
        atom = atom_from_tuple(codec.decode_value(key))
        if isinstance(atom, OrderAtom):
            tree = self._pbtree(atom.attr)
            for op, const in atom.entries:
                tree.delete(op, const, aid)
        else:
            self._direct(atom.attr).pop(aid, None)

    def insert(
        self, ident: SubId, expr: str, clauses: list[Clause], meta: str | None = None
    ) -> bool:
        """Insert (or replace) subscription ``ident`` with its metadata text (validated:
        :func:`betree.disk.metadata.meta_text`; a replacement without it drops the old one);
        True if it was new."""
        existed = self.delete(ident)
        sid = self.rec["next_sid"]
        self.rec["next_sid"] = sid + 1
        atom_ids = [[self.intern(atom) for atom in clause] or [0] for clause in clauses]
        sid_key = codec.encode_u64(sid)
        self.added.append([sid, ident, atom_ids])
        ext_key = codec.encode_id(ident)
        if self.records is None:
            self.txn.put_obj(catalog.SUB, sid_key, [ident, expr, atom_ids])
            self.txn.put(catalog.EXT, ext_key, sid_key)
        else:
            self.records.append((sid_key, ext_key, [ident, expr, atom_ids]))
        if meta is not None:
            catalog.put_meta(self.txn, ext_key, meta)
        self._put_clauses(sid, ident, clauses, atom_ids)
        self.rec["subs"] += 1
        return not existed

    def _put_clauses(
        self, sid: int, ident: SubId, clauses: list[Clause], atom_ids: list[list[int]]
    ) -> None:
        """Into the tree at their places, or into the pending area: always while it exists,
        else for a batch when the writer defers (:mod:`betree.disk.pending`)."""
        entries = [(clause_id(sid, k), ident, ids) for k, ids in enumerate(atom_ids)]
        if self.rec.get("pending_from") is None and (self.pending is None or not self.deferring):
            places = [self.places(clause) for clause in clauses]
            for entry, place in zip(entries, places, strict=True):
                self.placed[entry[0]] = place
                if self.pending is None:
                    self.tree.insert(entry, place)
                else:
                    self.pending.append((entry, place))
            return
        self.rec.setdefault("pending_from", sid)
        if self.pending is None:
            self.tree.defer(entries)
        else:
            self.deferred.extend(entries)

    def delete(self, ident: SubId) -> bool:
        """Delete subscription ``ident``; False if there was none."""
        sid_key = catalog.subscription_key(self.txn, ident)
        if sid_key is None:
            return False
        sid = codec.decode_u64(sid_key)
        if sid >= self.first_sid:  # (inserted by this transaction: maybe held back)
            self._place_pending()
        _, expr, atom_ids = catalog.subscription_record(self.txn, ident, sid_key)
        for k, ids in enumerate(atom_ids):
            cid = clause_id(sid, k)
            home = self._home(cid)
            if home is None or not self.tree.remove(cid, home):
                raise StoreDamaged(f"clause {cid} of {ident!r} is not where its record says")
            self.homes[cid] = None
            for aid in ids:
                if aid:
                    self.release(aid)
        self.txn.delete(catalog.SUB, sid_key)
        ext_key = codec.encode_id(ident)
        self.txn.delete(catalog.EXT, ext_key)
        catalog.put_meta(self.txn, ext_key, None)
        self.removed.append([sid, ident])
        self.expressions.append(str(expr))
        self.rec["subs"] -= 1
        return True

    def committed(self) -> None:
        """After the commit: the atoms this transaction made or used go into the memo too
        (for the catch-up of this process's views: :meth:`betree.packed.delta.Delta.advance`,
        and the placement of the pending area, which would read each again)."""
        memo = self.memo.atoms
        for aid, atom in self.atoms.items():
            if aid not in memo:
                remember(memo, aid, atom)
        # the atom records as committed, for the next transaction if no other commits
        # first (use counts change in place: copied, so that an aborted one leaves them)
        counts = self.memo.counts
        for key, found in self.counts.items():
            if len(counts) >= MEMO_LIMIT and key not in counts:
                forget_older_half(counts)
            counts[key] = None if found is None else (found[0], found[1])
        self.memo.counted = self._state()

    def _state(self) -> tuple[int, ...]:
        """What tells the store's state as this writer began, or (after its commit) left it:
        its generation (every commit's, any process's, advances it) and the root
        record's counters, so that a store put in its place is not taken for it."""
        rec = self.rec
        return (
            self.txn.gen,
            rec["next_sid"],
            rec["next_atom"],
            rec["subs"],
            rec.get("log_next", 0),
        )

    def close(self) -> None:
        """The reference cycle with its BE-Tree broken (the tree holds bound methods of
        this writer), once the transaction's block ends.

        Why: left to the cyclic collector, the cycle kept the whole transaction (its decoded
        dirty pages, the records it wrote, its replay log) until a full collection, which a
        big heap makes rare: rich 50K, single ``subscribe`` calls in a matching process kept
        ~4 MB a write (PB+tree leaf pages of ~70K ids decoded for writing, a 2 MB direct
        record), 600 MB after 150 writes, all freed at once in the next fold's
        ``gc.collect`` (docs/bench/live/README.md, "leak42").  Now reference counting frees
        them when the caller drops the writer."""
        self.tree.detach()
        # the places this transaction took (~7 objects a clause: ~300K in a placement of
        # 24,000 into 1M BEGen) go now, not through the collector's pass after it (the
        # memo's copies are packed: no object for the collector)
        self.placed = {}

    def finish(self) -> None:
        """Write the ``home`` and atom records changed, the direct-atom lists touched, the
        change log's entry (if subscriptions changed) and the root record."""
        homes = sorted(self.homes.items())
        placed = [(cid, page) for cid, page in homes if page is not None]
        if placed:
            cids, pages = zip(*placed, strict=True)
            self.txn.put_many(catalog.HOME, codec.encode_u64s(cids), codec.encode_u64s(pages))
        for cid, page in homes:
            if page is None:
                self.txn.delete(catalog.HOME, codec.encode_u64(cid))
        counts = sorted(self.counts.items())
        for key, found in counts:
            if found is None:
                self.txn.delete(catalog.ATOM, key)
        kept = [(key, found) for key, found in counts if found is not None]
        if kept:  # (one LMDB call in key order: ~4,500 records a batch of 1,000 BEGen)
            keys, values = zip(*kept, strict=True)
            self.txn.put_many(catalog.ATOM, keys, codec.encode_values(values))
        for attr, parts in self.direct.items():  # (as catalog.put_direct writes them)
            key = attr.encode()
            if parts:
                stored = codec.encode_parts(list(parts.values()))
                self.txn.put(catalog.DIRECT, key, stored)
            else:
                stored = b""
                self.txn.delete(catalog.DIRECT, key)
            # the memo's again (an aborted commit leaves other bytes stored: not taken)
            self.memo.direct[attr] = (stored, parts)
        if self.removed or self.added:
            changelog.append(self.txn, self.rec, self.removed, self.added, self.expressions)
            self.logged = {int(self.rec["log_next"]) - 1: (self.removed, self.added)}
        self.rec["attributes"] = catalog.attributes_after(
            self.txn,
            self.rec.get("attributes"),
            [attr for attr, tree in self.trees.items() if tree.exists],
            {attr: bool(parts) for attr, parts in self.direct.items()},
        )
        catalog.put_root(self.txn, self.rec)


#: the low 64 bits of an int (a stored clause's span packed in the :class:`Memo`)
_U64 = (1 << 64) - 1

#: entries a :class:`Memo` keeps of each kind (when full, the older half is forgotten)
MEMO_LIMIT = 1 << 18


class Memo:
    """What writes of one store read or made before, by id (:class:`Writer`): atoms (~300
    bytes each), their requirements on places (~150: a stored clause's places from its
    atom ids, no atom object hashed; an order atom's from its stored entries, no atom
    object made) and stored clauses' places (~200, each span packed in one int: a dict
    of ints is no work for the garbage collector), at most
    :data:`MEMO_LIMIT` of each, and atoms' store keys (~100: a batch of 1,000 at 1M BEGen
    looks up ~9,000 atoms, mostly known).  It saves clustering (which takes every clause of an
    overflowing l-node again), and the catch-up of this process's views
    (:meth:`betree.packed.delta.Delta.advance`), a catalog read and decode per atom.  And
    per attribute, its direct-atom record as last written or read with its elements'
    packed bytes (~2x the record: module docstring).

    ``counts``: the ``atom`` records (``(aid, refcount)``, None: no such atom) as this
    process's last commit left them, valid while ``counted`` is the store's state
    (:meth:`Writer._state`: its generation, which every commit of any process advances,
    and the root record's counters); any other commit in between, or a transaction that
    does not report its commit (:meth:`Writer.committed`), makes the next writer forget
    them.  At 1M BEGen in 2 shards ~65% of a batch's ~2,700 atom records a shard are
    known so (an LMDB get and a decode each saved); ~100 bytes an entry, bounded as
    the rest."""

    def __init__(self) -> None:
        self.atoms: dict[int, Atom] = {}
        self.keys: dict[Atom, bytes] = {}
        self.counts: dict[bytes, tuple[int, int] | None] = {}
        self.counted: tuple[int, ...] | None = None
        #: (each span ``(lo, hi)`` as ``lo << 64 | hi``: a dict of ints is not tracked by
        #: the garbage collector, whose pass after a placement walked ~7 objects a place)
        self.placed: dict[int, dict[str, int]] = {}
        self.spans: dict[int, tuple[str, tuple[int, int] | tuple[()]]] = {}
        self.direct: dict[str, tuple[bytes, dict[int, bytes]]] = {}


def remember(memo: dict[int, Any], key: int, value: Any) -> None:
    if len(memo) >= MEMO_LIMIT:
        forget_older_half(memo)
    memo[key] = value


def _atom_count(raw: bytes | None) -> list[int] | None:
    """An ``atom`` record (``[aid, refcount, ...]``) as ``[aid, refcount]``; None for none."""
    if raw is None:
        return None
    found = codec.decode_value(raw)
    if not isinstance(found, list) or len(found) < 2:
        raise StoreDamaged("the record of an atom is missing or malformed")
    return [int(found[0]), int(found[1])]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one batch of writes.

    A large write transaction keeps many objects alive (dirty pages, compiled clauses), and
    the collector's full passes over them cost 40% of bulk insertion time (measured: 1,690
    vs 2,900 subscriptions/s).  Nothing here makes reference cycles; whatever another
    thread makes meanwhile is collected once the collector is back.

    What the batch allocated is still counted: the collector's next young pass would come
    inside the next match (a batch of 1,000 left one over ~100K objects, 0.15-0.25 s; one
    BEGen subscription a few hundred, whose passes cost a match right after a write ~0.1
    ms on average at 100K, against none in a frozen store's matches, which allocate and
    free).  The batch pays it here instead: one pass over the two young generations.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            gc.collect(1)
