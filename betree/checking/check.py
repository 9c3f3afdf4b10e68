"""Invariant checks of an index: the BE-Tree, its catalog, and every PB+tree.

BE-Tree facts (the BE-Tree paper, docs/REFERENCES.md): every clause in the smallest bucket
that encloses it (its place on the bucket's attribute lies in the bucket and in neither
child); the c-node of a non-atomic leaf bucket never partitioned; each attribute partitioned
at most once on a path; no clause left in an l-node while a p-node there could take it
(but the root's pending ones: :mod:`betree.disk.pending`); bucket geometry (children halve
their parent; a top bucket spans the hint range, or one the hints had before a change:
``former_hints``); parent links; l-node sizes and page chains; p-node scores equal the
clauses below them; page accounting.

Catalog facts: every subscription's clauses are stored exactly once, at the c-node their
``home`` record names, with the atoms their record lists; atom reference counts equal
their uses; every order atom's entries are in its PB+tree and every PB+tree id is a live
atom; direct atoms are listed under their attribute; every metadata record belongs to a
subscription and holds an object within its bound (:func:`betree.disk.metadata.check_metas`).
First of all, every record stored
under a long key leads back to where it is stored (:meth:`ReadTxn.check_records`); when
one does not, the check stops there, as the others would read the damaged records.

How: the subscription records are read 16K at a time and packed into numpy arrays
(internal id, subscription, atom ids per clause); the id map and home records are read in
one scan each (keys decoded with numpy; int ids found with numpy among the id map's keys);
the atom catalog in chunks (:mod:`betree.checking.atomrecords`: every atom record compared
with its reverse record, whose keys are then let go); one walk of the BE-Tree collects every
stored clause from the l-node pages' packed arrays (zero-copy), with the c-node holding it,
and decodes each c-node once (the pages' arrays then gathered into one each, a page let go
as it is copied, the atom ids kept ``uint32`` as stored: richmem48); then the per-clause
facts are checked over arrays, 32K clauses at a time: a clause's place on an attribute is
the intersection of its atoms' grid spans on it (the rule of
:meth:`betree.engine.Engine.places`, from a per-atom table), the stored copy is compared
with the record.  Each PB+tree is read once: its check returns the
entries, compared with its attribute's atoms' (taken one attribute at a time: the atoms
not read as columns decoded again then, :class:`~betree.checking.atomrecords.OtherAtoms`).  A direct
record's atom is compared with its catalog key by packing it (equal bytes: the same atom;
else both are built and compared, as damage or another packing may need).  Python work
per subscription is one record decode; per c-node and l-node page a few steps; a violation
costs its message only.

Cost: reads every page and record once, bypassing the page cache; O(clauses) numpy work
and one record decode per subscription (measured figures: docs/bench/build-check.md).
Memory: arrays of about 150 bytes per clause and ~60 per atom (the spans, the columns);
at 100K dense subscriptions (2M atoms) the heap peaks at ~300 MB.  The store's pages,
mapped as they are read, are dropped from the process after each pass and each PB+tree
(:meth:`storage.store.Store.release_mapped_pages`: they stayed resident to the end, ~420 MB
at 100K dense: docs/bench/dense-load, denseload41).  The C heap's free memory is handed
back after each record pass (``malloc_trim``: after the reverse records' ~85 MB at 100K
dense, which stayed under the spans and the atom pass: the check's peak, denseload43).
The atom records' pass runs before the spans are made and compares hashes of the keys;
when every reverse key reads as columns (a dense store's) no key is held (~46 bytes an
atom, ~0.9 GB at 1M dense): the spans read any key they need from the store (denseload45,
boundload46).  The clauses' atom ids and the spans are let go after the clauses' checks,
before the catalog's and the PB+trees' (boundload46: ~1 GB at 1M dense).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from operator import eq, ne
from typing import TYPE_CHECKING, Any

import numpy as np

from betree.checking.atomrecords import (
    AidReader,
    OtherAtoms,
    Scanned,
    absent,
    aid_records,
    other_atoms,
    scan_atoms,
)
from betree.checking.predicates import check_predicates, joined
from betree.disk import catalog, grid, pending
from betree.disk.adjust import check_adjust
from betree.disk.atomspans import NO_ATTR, AtomSpans
from betree.disk.bulk import pack_clauses, rows_of
from betree.disk.catalog import record_attributes, root_record
from betree.disk.changelog import check_log
from betree.disk.metadata import check_metas
from betree.disk.nodes import CNode, LNodePage
from betree.lang.atoms import Atom, OrderAtom, atom_from_tuple
from betree.packed.heap import return_freed_memory
from pbtree import PBTree
from pbtree.check import Columns
from pbtree.keys import int64_array
from pbtree.operators import SLOT
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import BexdbError, CheckFailed
from storage.txn import ReadTxn

if TYPE_CHECKING:
    from betree.index import Index

#: clauses whose places are checked in one vectorised step (bounds the temporaries:
#: ~200 bytes a clause atom)
CHUNK = 1 << 15
#: subscription records decoded at once (a Python object per atom id of theirs)
SUB_CHUNK = 1 << 14


def check_index(index: Index, txn: ReadTxn) -> None:
    """Raise :class:`CheckFailed` listing every broken invariant of ``index``."""
    damaged = txn.check_records()
    if damaged:  # the checks below read those records: report what was found, stop there
        raise CheckFailed("index", damaged)
    return_freed_memory()  # (what the caller freed, a loader's build or copy: ~270 MB)
    errors: list[str] = []
    rec = root_record(txn)
    trees = _tree_names(index, txn, errors)
    if rec.get("attributes") != record_attributes(txn):
        errors.append(
            f"root record lists per-attribute records {rec.get('attributes')}, "
            f"found {record_attributes(txn)}"
        )
    catalog_errors: list[str] = []
    cat = _read_catalog(txn, rec, catalog_errors)
    return_freed_memory()  # (the records decoded: ~170 MB of the C heap at 100K dense)
    index.store.release_mapped_pages()  # (the id map's pages, read once)
    aid_keys, cols, hashes = aid_records(txn)
    return_freed_memory()  # (the chunks' records and parse: ~85 MB of the C heap at 100K dense)
    found = np.bincount(cat.atoms[cat.atoms > 0])  # uses per atom id
    scanned = scan_atoms(txn, rec, aid_keys, found, hashes)
    del hashes
    atoms = AtomSpans(index.schema, aid_keys, cols, keep=False)
    del cols
    others = other_atoms(index.schema, aid_keys, atoms.col_ids)  # (their entries: not held)
    outside = [i for i, name in enumerate(others.names) if name not in index.schema.attributes]
    for aid in others.ids[np.isin(others.attr, outside)].tolist():
        attr = others.attr_of(aid)
        errors.append(
            f"atom {aid} ({atoms.atom(aid)}) is on {attr!r}, not an attribute of the schema"
        )
    atoms.read_keys_from(AidReader(txn))  # (the keys held: let go before the tree walk)
    del aid_keys
    return_freed_memory()
    index.store.release_mapped_pages()
    stored = _check_tree(index, txn, rec, errors)
    stored.pending = pending.first(rec)
    errors.extend(pending.check_pending(rec))
    if stored.pending is not None:  # every pending clause waits in the root's l-node
        away = (stored.cids >= np.uint64(stored.pending)) & (stored.node != 0)
        for j in np.flatnonzero(away).tolist():
            page = stored.nodes[int(stored.node[j])].page
            errors.append(f"page {page}: pending clause {int(stored.cids[j])} is not in the root")
    _check_clauses(cat, stored, atoms, errors, catalog_errors)
    # (not read by the passes below: ~16 bytes a clause atom, 24 an atom id, ~1 GB at 1M)
    cat.spend()
    stored.spend()
    atoms.drop_spans()
    return_freed_memory()
    errors.extend(catalog_errors)
    tree_errors: list[str] = []

    def checked(name: str) -> Columns:
        """PB+tree ``name`` checked, and its predicates from the same read (read again only
        when the check found it faulty or it has no record)."""
        try:
            if name in trees:
                try:
                    return PBTree(txn, name).check()
                except CheckFailed as exc:
                    tree_errors.extend(f"PB+tree {name!r}: {v}" for v in exc.violations)
            return PBTree(txn, name).predicate_columns()
        finally:  # (its pages, read once: ~20 MB a tree at 100K dense)
            index.store.release_mapped_pages()

    _check_catalog(txn, rec, cat, stored, scanned, found, atoms, others, trees, checked, errors)
    errors.extend(tree_errors)
    errors.extend(check_adjust(txn, rec, set(index.schema.attributes)))
    errors.extend(check_log(txn, rec))
    errors.extend(check_metas(txn))
    if errors:
        raise CheckFailed("index", errors)


def _tree_names(index: Index, txn: ReadTxn, errors: list[str]) -> list[str]:
    """The attributes that have a PB+tree record; a record keyed by no attribute of the
    schema (a damaged key: keys carry no checksum) is a violation, and is skipped."""
    names = []
    for key, _ in txn.scan(PBTREE_NS):
        name = key.decode("utf-8", "replace")
        if name in index.schema.attributes:
            names.append(name)
        else:
            errors.append(f"a PB+tree record for {name!r}, not an attribute of the schema")
    return names


# -- the subscription records, packed --------------------------------------------------------


@dataclass
class _Catalog:
    """Every subscription record's clauses as arrays, in record (internal id) order."""

    exts: list[Any]  # per subscription: its external id
    n_ext: int  # id map records
    cids: np.ndarray  # per clause: its clause id (catalog.clause_id)
    sub: np.ndarray  # per clause: index into exts
    k: np.ndarray  # per clause: its number in the subscription
    starts: np.ndarray  # per clause: first of its atom ids in ``atoms``
    lens: np.ndarray
    atoms: np.ndarray  # every clause's atom ids, concatenated
    order: np.ndarray | None  # cids sorted (None when they already are)
    sorted_cids: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.sorted_cids = self.cids if self.order is None else self.cids[self.order]

    def spend(self) -> None:
        """Let the clauses' atom ids go (the clauses' checks are done)."""
        self.starts = self.lens = self.atoms = np.zeros(0, dtype=np.int64)

    def locate(self, cids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per clause id: its clause index here (where known) and whether it is known."""
        keys = self.sorted_cids
        if not len(keys):
            return np.zeros(len(cids), dtype=np.int64), np.zeros(len(cids), dtype=bool)
        at = np.minimum(np.searchsorted(keys, cids), len(keys) - 1)
        known = keys[at] == cids
        return (at if self.order is None else self.order[at]), known


def _read_catalog(txn: ReadTxn, rec: dict[str, Any], errors: list[str]) -> _Catalog:
    """One scan of the subscription records and one of the id map; checks that the id map
    leads each subscription to its internal id, which is below the counter."""
    keys: list[bytes] = []
    exts: list[Any] = []
    sids_parts, packed, counts = [np.zeros(0, dtype=np.uint64)], [], [0]
    for chunk, values in txn.scan_chunks(catalog.SUB, SUB_CHUNK):  # (a chunk decoded at once)
        sids_parts.append(codec.decode_u64s(chunk))
        keys.extend(chunk)
        records = list(map(codec.decode_value, values))
        exts.extend(ext for ext, _, _ in records)
        packed.append(pack_clauses([clauses for _, _, clauses in records]))
        counts.append(len(records))
        del chunk, values, records
        txn.store.release_mapped_pages()  # (the chunk's pages, read once)
    sids = np.concatenate(sids_parts)
    ext_keys, ext_values = txn.scan_all(catalog.EXT)
    leads = _id_map_leads(exts, keys, sids, ext_keys, ext_values)
    for j in np.flatnonzero(~leads).tolist():
        errors.append(f"subscription {exts[j]!r}: id map does not lead to internal id {sids[j]}")
    for j in np.flatnonzero(sids >= rec["next_sid"]).tolist():
        errors.append(f"subscription {exts[j]!r}: internal id {sids[j]} beyond the counter")
    n_ext = len(ext_keys)
    del keys, ext_keys, ext_values
    firsts = np.cumsum(counts).tolist()  # each chunk's first subscription's position
    sub = joined([p[0] + first for p, first in zip(packed, firsts, strict=False)], np.int64)
    k, lens, atoms = (joined([p[i] for p in packed], np.int64) for i in (1, 2, 3))
    del packed
    cids = catalog.clause_ids(sids[sub], k)
    ascending = bool(np.all(cids[1:] > cids[:-1]))
    return _Catalog(
        exts=exts,
        n_ext=n_ext,
        cids=cids,
        sub=sub,
        k=k,
        starts=np.cumsum(lens) - lens,
        lens=lens,
        atoms=atoms,
        order=None if ascending else np.argsort(cids, kind="stable"),
    )


def _id_map_leads(
    exts: list[Any],
    keys: list[bytes],
    sids: np.ndarray,
    ext_keys: list[bytes],
    ext_values: list[bytes],
) -> np.ndarray:
    """Per subscription: whether the id map leads its external id to its record's key.

    Int ids (the common case) are found with numpy among the map's keys, which LMDB keeps
    sorted (:func:`codec.encode_id` preserves order); other ids through a dict.
    """
    ids, table = codec.int_ids(exts), codec.decode_int_ids(ext_keys)
    if ids is not None and table is not None and len(table) and set(map(len, ext_values)) == {8}:
        at = np.minimum(np.searchsorted(table, ids), len(table) - 1)
        return (table[at] == ids) & (codec.decode_u64s(ext_values)[at] == sids)
    ext_map = dict(zip(ext_keys, ext_values, strict=True))
    leads = map(ext_map.get, codec.encode_ids(exts))
    return np.fromiter(map(eq, leads, keys), dtype=bool, count=len(keys))


# -- the BE-Tree walk ----------------------------------------------------------------------


@dataclass
class _Stored:
    """Every clause found in the BE-Tree, in walk order, and the c-nodes holding them."""

    nodes: list[CNode] = field(default_factory=list)
    used: list[frozenset[str]] = field(default_factory=list)
    children: list[tuple[CNode, CNode] | None] = field(default_factory=list)
    parts: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=list
    )  # (node index, l-node page, cids, lens, atom ids) per l-node page
    exts: list[Any] = field(default_factory=list)
    # filled by pack(): per stored clause, in walk order
    cids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    node: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lpage: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    atoms: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # filled by _check_clauses: per catalog clause, the c-node of its last copy (or -1);
    # per stored clause, whether a subscription has it
    where: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    known: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    #: the first pending clause id (betree.disk.pending), or None
    pending: int | None = None

    def pack(self) -> None:
        """Gather the pages' arrays into one each, each page let go once copied (so the
        pages and the arrays are not held twice over), the atom ids as the pages hold
        them (``uint32``: half of int64's bytes, compared as numbers)."""
        parts, self.parts = self.parts, []
        if not parts:
            return
        sizes = [len(p[2]) for p in parts]
        self.node = np.repeat(np.array([p[0] for p in parts], dtype=np.int64), sizes)
        self.lpage = np.repeat(np.array([p[1] for p in parts], dtype=np.int64), sizes)
        self.cids = np.empty(sum(sizes), dtype=np.uint64)
        self.lens = np.empty(sum(sizes), dtype=np.int64)
        self.atoms = np.empty(sum(len(p[4]) for p in parts), dtype=np.uint32)
        at = row = 0
        for i, size in enumerate(sizes):
            _, _, cids, lens, atoms = parts[i]
            parts[i] = _GONE
            self.cids[at : at + size] = cids
            self.lens[at : at + size] = lens
            self.atoms[row : row + len(atoms)] = atoms
            at, row = at + size, row + len(atoms)

    def spend(self) -> None:
        """Keep what the catalog's checks read (``cids``, ``where``, ``known``) only."""
        self.nodes, self.used, self.children, self.exts = [], [], [], []
        self.node = self.lpage = self.lens = self.atoms = np.zeros(0, dtype=np.int64)


_EMPTY = np.zeros(0, dtype=np.int64)
#: what :meth:`_Stored.pack` leaves in a page's place once copied
_GONE = (0, 0, _EMPTY, _EMPTY, _EMPTY)


def _check_tree(index: Index, txn: ReadTxn, rec: dict[str, Any], errors: list[str]) -> _Stored:
    """Walk the BE-Tree: its shape and pages; collect the clauses for the later checks."""
    space = rec["space"]
    max_cap = rec["max_cap"]
    former = rec.get("former_hints", {})
    seen: set[int] = set()
    out = _Stored()

    def err(page: int, message: str) -> None:
        errors.append(f"page {page}: {message}")

    def load(page: int, cls: Any, role: str) -> Any:
        if page in seen:
            err(page, f"reached twice (again as {role})")
            return None
        seen.add(page)
        try:
            return txn.load_uncached(space, page, cls)
        except BexdbError as exc:
            err(page, f"unreadable {role}: {exc}")
            return None

    def subtree(page: int, parent: int, used: frozenset[str], expect: tuple[Any, ...]) -> int:
        """Check one c-node and everything below it; return the clauses below it."""
        node: CNode | None = load(page, CNode, "c-node")
        if node is None:
            return 0
        attr, top, lo, hi = expect
        if top and [node.lo, node.hi] in former.get(attr, []):
            lo, hi = node.lo, node.hi  # made under hints changed since (betree.disk.schemaedit)
        if (node.attr, node.top, node.lo, node.hi) != (attr, top, lo, hi):
            err(page, f"bucket {(node.attr, node.top, node.lo, node.hi)}, expected {expect}")
        if node.parent != parent:
            err(page, f"parent link {node.parent}, expected {parent}")
        if node.pdir and node.is_leaf and not node.atomic and node.attr is not None:
            err(page, "the c-node of a non-atomic leaf bucket is partitioned")
        if node.cap < max_cap or node.cap % max_cap:
            err(page, f"l-node capacity {node.cap} is not a multiple of max_cap")
        below = _lnode(node, used)
        if node.left or node.right:
            if node.atomic:
                err(page, "an atomic bucket has children")
            (llo, lhi), (rlo, rhi) = grid.halves(node.lo, node.hi)
            below += subtree(node.left, page, used, (node.attr, False, llo, lhi))
            below += subtree(node.right, page, used, (node.attr, False, rlo, rhi))
        for pattr, ptop, score in node.pdir:
            if pattr in used:
                err(page, f"attribute {pattr!r} partitioned twice on one path")
            hint = index.engine.hints.get(pattr)
            if hint is None:
                err(page, f"p-node on unknown attribute {pattr!r}")
                continue
            n = subtree(ptop, page, used | {pattr}, (pattr, True, *hint))
            if n != score:
                err(page, f"p-node {pattr!r} scores {score}, but {n} clauses lie below it")
            below += n
        return below

    def _lnode(node: CNode, used: frozenset[str]) -> int:
        at = len(out.nodes)
        out.nodes.append(node)
        out.used.append(used)
        kids.append((node.left, node.right) if node.attr is not None and node.left else None)
        count = 0
        cur = node.lnode
        while cur:
            lpage: LNodePage | None = load(cur, LNodePage, "l-node page")
            if lpage is None:
                break
            cids, exts, lens, atoms = lpage.arrays()
            if not len(exts):
                err(cur, "empty l-node page left in a chain")
            out.parts.append((at, cur, cids, lens, atoms))
            out.exts.extend(exts.tolist())
            count += len(exts)
            cur = lpage.next
        if count != node.size:
            err(node.page, f"l-node size {node.size}, but its pages hold {count} clauses")
        return count

    kids: list[tuple[int, int] | None] = []  # per c-node: its child buckets' pages
    subtree(rec["root"], 0, frozenset(), (None, False, 0, 0))
    # the walk decoded every readable child bucket: no need to load them again
    by_page = {node.page: node for node in out.nodes}
    out.children = [
        (by_page[pair[0]], by_page[pair[1]])
        if pair is not None and pair[0] in by_page and pair[1] in by_page
        else None
        for pair in kids
    ]
    pages = set(txn.space_pages(space))
    for page in sorted(pages - seen):
        err(page, "orphaned: stored in the BE-Tree's space but unreachable")
    for page in sorted(seen - pages):
        err(page, "reached but not stored")
    out.pack()
    return out


# -- per-clause facts, vectorised -------------------------------------------------------------


def _check_clauses(
    cat: _Catalog,
    stored: _Stored,
    spans: AtomSpans,
    tree_errors: list[str],
    catalog_errors: list[str],
) -> None:
    """Each stored clause: atoms, uniqueness, subscription, place; the copy matches its record.

    Sets ``stored.where`` (per catalog clause: the c-node holding its last copy, or -1)
    and ``stored.known``.
    """
    cids, node, lpage, lens, atoms = (
        stored.cids,
        stored.node,
        stored.lpage,
        stored.lens,
        stored.atoms,
    )
    nodes = stored.nodes
    exts = stored.exts
    page_of = np.array([n.page for n in nodes], dtype=np.int64)

    def err(page: int, message: str) -> None:
        tree_errors.append(f"page {page}: {message}")

    for j in np.flatnonzero(lens == 0).tolist():
        err(int(lpage[j]), f"clause {int(cids[j])} has no atoms (atom 0 stands for none)")
    # stored twice: each later copy names the c-node of the copy before it
    by_cid = np.argsort(cids, kind="stable")
    twice = np.flatnonzero(cids[by_cid][1:] == cids[by_cid][:-1])
    copies = zip(by_cid[twice + 1].tolist(), by_cid[twice].tolist(), strict=True)
    for later, earlier in sorted(copies):
        other = int(page_of[node[earlier]])
        err(int(lpage[later]), f"clause {int(cids[later])} stored twice (also at c-node {other})")
    pos, known = cat.locate(cids)
    for j in np.flatnonzero(~known).tolist():
        err(int(lpage[j]), f"clause {int(cids[j])} of {exts[j]!r} belongs to no subscription")
    where = np.full(len(cat.cids), -1, dtype=np.int64)
    where[pos[known]] = page_of[node[known]]  # the last copy wins, as a dict would keep
    stored.where, stored.known = where, known
    starts = np.cumsum(lens) - lens
    held = np.flatnonzero(known)
    for lo in range(0, len(held), CHUNK):
        part = held[lo : lo + CHUNK]
        _check_places(cat, pos[part], node[part], cids[part], stored, spans, page_of, err)
        _check_copies(cat, pos[part], part, starts, lens, atoms, exts, catalog_errors)


def _check_places(
    cat: _Catalog,
    pos: np.ndarray,
    node: np.ndarray,
    cids: np.ndarray,
    stored: _Stored,
    spans: AtomSpans,
    page_of: np.ndarray,
    err: Any,
) -> None:
    """Clauses ``pos`` of the catalog, held by c-nodes ``node``: each in the right bucket."""
    nodes = stored.nodes
    rows, owner = rows_of(cat.starts[pos], cat.lens[pos])
    ids = cat.atoms[rows]
    ranks = spans.of(ids)
    node_rank = np.array([spans.rank_of(n.attr) for n in nodes], dtype=np.int64)
    on = ranks == node_rank[node][owner]  # the rows on the holding c-node's attribute
    n = len(pos)
    defined = np.zeros(n, dtype=bool)
    defined[owner[on]] = True
    lo = np.zeros(n, dtype=np.uint64)
    hi = np.full(n, grid.GRID_MAX, dtype=np.uint64)
    np.maximum.at(lo, owner[on], spans.lo[ids[on]])
    np.minimum.at(hi, owner[on], spans.hi[ids[on]])
    empty = lo > hi
    lo[empty], hi[empty] = 0, grid.GRID_MAX
    bucketed = node_rank[node] != NO_ATTR
    for j in np.flatnonzero(bucketed & ~defined).tolist():
        holder = nodes[node[j]]
        err(holder.page, f"clause {int(cids[j])} is not constrained on {holder.attr!r}")
    # the bucket encloses the place, and neither child does
    nlo = np.array([n.lo for n in nodes], dtype=np.uint64)[node]
    nhi = np.array([n.hi for n in nodes], dtype=np.uint64)[node]
    top = np.array([n.top for n in nodes], dtype=bool)[node]
    placed = bucketed & defined
    outside = placed & ~top & ~((nlo <= lo) & (hi <= nhi))
    for j in np.flatnonzero(outside).tolist():
        span = (int(lo[j]), int(hi[j]))
        err(nodes[node[j]].page, f"clause {int(cids[j])} span {span} lies outside the bucket")
    kids = [c for c in stored.children if c is not None]
    if kids:
        which = np.array([-1 if c is None else 0 for c in stored.children], dtype=np.int64)
        which[which == 0] = np.arange(len(kids))
        for side in (0, 1):
            clo = np.array([c[side].lo for c in kids], dtype=np.uint64)
            chi = np.array([c[side].hi for c in kids], dtype=np.uint64)
            w = which[node]
            has = placed & (w >= 0)
            wk = np.where(has, w, 0)
            fits = has & (clo[wk] <= lo) & (hi <= chi[wk])
            for j in np.flatnonzero(fits).tolist():
                child = kids[int(w[j])][side].page
                holder = nodes[node[j]].page
                err(holder, f"clause {int(cids[j])} belongs in the smaller bucket {child}")
    # no p-node of the holding c-node could take the clause
    nattr = len(spans.names)
    pairs = sorted(
        i * nattr + spans.rank[pattr]
        for i, n in enumerate(nodes)
        for pattr in n.pmap
        if pattr not in stored.used[i] and pattr in spans.rank
    )
    if not pairs:
        return
    keys = np.array(pairs, dtype=np.int64)
    ok = (ranks >= 0) & (placed | ~bucketed)[owner]
    if stored.pending is not None:  # the root's pending clauses wait for placement
        ok &= ~((node == 0) & (cids >= np.uint64(stored.pending)))[owner]
    row_keys = node[owner] * nattr + ranks
    at = np.minimum(np.searchsorted(keys, row_keys), len(keys) - 1)
    hits = np.flatnonzero(ok & (keys[at] == row_keys))
    told: set[tuple[int, int]] = set()
    for r in hits.tolist():
        j, rank = int(owner[r]), int(ranks[r])
        if (j, rank) not in told:
            told.add((j, rank))
            err(
                nodes[node[j]].page,
                f"clause {int(cids[j])} stays although p-node {spans.names[rank]!r} could take it",
            )


def _check_copies(
    cat: _Catalog,
    pos: np.ndarray,
    held: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    atoms: np.ndarray,
    exts: list[Any],
    errors: list[str],
) -> None:
    """The stored copies ``held`` of catalog clauses ``pos``: same id and atom ids."""
    rlens = cat.lens[pos]
    slens = lens[held]
    differ = rlens != slens
    same = np.flatnonzero(~differ)
    rrows, owner = rows_of(cat.starts[pos[same]], rlens[same])
    srows, _ = rows_of(starts[held[same]], slens[same])
    bad = np.zeros(len(same), dtype=bool)
    bad[owner[cat.atoms[rrows] != atoms[srows]]] = True
    differ[same[bad]] = True
    sub = cat.sub[pos].tolist()
    cat_exts = cat.exts
    other = map(ne, map(exts.__getitem__, held.tolist()), map(cat_exts.__getitem__, sub))
    differ |= np.fromiter(other, dtype=bool, count=len(sub))
    for j in np.flatnonzero(differ).tolist():
        h = int(held[j])
        ids = atoms[starts[h] : starts[h] + lens[h]].tolist()
        ext = cat_exts[sub[j]]
        k = int(cat.k[pos[j]])
        errors.append(f"subscription {ext!r}: clause {k} stored as {(exts[h], ids)}")


def _check_catalog(
    txn: ReadTxn,
    rec: dict[str, Any],
    cat: _Catalog,
    stored: _Stored,
    scanned: Scanned,
    found: np.ndarray,
    atoms: AtomSpans,
    others: OtherAtoms,
    trees: list[str],
    checked: Callable[[str], Columns],
    errors: list[str],
) -> None:
    if rec["subs"] != len(cat.exts):
        errors.append(f"root record counts {rec['subs']} subscriptions, found {len(cat.exts)}")
    where = stored.where
    for j in np.flatnonzero(where < 0).tolist():
        errors.append(
            f"subscription {cat.exts[cat.sub[j]]!r}: clause {int(cat.k[j])} is not in the BE-Tree"
        )
    # home records, in one scan: each found clause's names the c-node holding it
    home_keys, home_values = txn.scan_all(catalog.HOME)
    home_cids, home_pages = codec.decode_u64s(home_keys), codec.decode_u64s(home_values)
    del home_keys, home_values
    home = np.full(len(cat.cids), -1, dtype=np.int64)
    hpos, hknown = cat.locate(home_cids)
    home[hpos[hknown]] = home_pages[hknown].astype(np.int64)
    for j in np.flatnonzero((where >= 0) & (home != where)).tolist():
        errors.append(
            f"subscription {cat.exts[cat.sub[j]]!r}: clause {int(cat.k[j])} home record is wrong"
        )
    del home, hpos, hknown, home_pages
    for cid in np.unique(stored.cids[~stored.known]).tolist():
        errors.append(f"clause {cid} in the BE-Tree belongs to no subscription")
    if cat.n_ext != len(cat.exts):
        errors.append(f"{cat.n_ext} id map records for {len(cat.exts)} subscriptions")
    if len(home_cids) != len(cat.cids):
        errors.append(f"{len(home_cids)} home records for {len(cat.cids)} clauses")
    del home_cids

    def uses(aid: int) -> int:
        return int(found[aid]) if 0 <= aid < len(found) else 0

    errors.extend(scanned.errors)  # (the atom records, read before the tree walk)
    stray, live = scanned.stray, scanned.live

    def shown(aid: int) -> Atom:
        return stray[aid] if aid in stray else atoms.atom(aid)

    def is_live(aid: int) -> bool:
        k = int(np.searchsorted(live, aid))
        return k < len(live) and int(live[k]) == aid

    for aid, refs in scanned.wrong:
        if refs != uses(aid):
            errors.append(f"atom {aid} ({shown(aid)}) counts {refs} uses, found {uses(aid)}")
        if aid >= rec["next_atom"]:
            errors.append(f"atom {aid} beyond the counter")
    for aid in absent(np.flatnonzero(found), live).tolist():
        errors.append(f"atom {aid} is used but not in the catalog")
    # the atoms not read as columns: direct ones (no entries), and the attributes of the
    # order ones, whose entries are decoded one attribute at a time (in ``wanted``)
    rows = others.among(absent(live, atoms.col_ids))
    rows = rows[~np.isin(others.ids[rows], list(stray))]
    direct = {aid for aid, atom in stray.items() if not isinstance(atom, OrderAtom)}
    direct.update(others.ids[rows[~others.order[rows]]].tolist())
    rows = rows[others.order[rows]]
    rest_attrs = {atom.attr for atom in stray.values() if isinstance(atom, OrderAtom)}
    rest_attrs.update(others.names[i] for i in np.unique(others.attr[rows]).tolist())

    def same(aid: int, t: Any, attr: str) -> bool:
        """Whether a direct record's atom ``t`` (decoded) is atom ``aid`` and on ``attr``:
        when ``t`` packs to the atom's store key, without building either (rich rules:
        ~half their atoms direct; a test's constructor keys every value)."""
        if aid not in stray and codec.encode_value(t) == atoms.keys[aid]:
            return type(t[1]) is str and t[1] == attr
        atom = atom_from_tuple(t)
        return atom == shown(aid) and atom.attr == attr

    listed: set[int] = set()
    for key, value in txn.scan(catalog.DIRECT):
        attr = key.decode("utf-8", "replace")
        pairs = codec.decode_value(value)
        alive = _among([aid for aid, _ in pairs], live, is_live)
        listed.update(
            aid for (aid, t), ok in zip(pairs, alive, strict=True) if ok and same(aid, t, attr)
        )
    txn.store.release_mapped_pages()  # (the direct records' pages, read once)
    if listed != direct:
        errors.append(f"direct atom lists differ from the catalog: {sorted(listed ^ direct)}")
    keep = atoms.kept(set(stray))  # (those in live: below)
    on_cols = set(atoms.col_attributes(keep))

    def wanted(attr: str) -> tuple[list[Any], list[Any], list[Any]] | None:
        """Attribute ``attr``'s atoms' entries: its column atoms', then the others'."""
        pieces: tuple[list[Any], list[Any], list[Any]] = ([], [], [])
        if attr in on_cols:
            codes, consts, ids = atoms.order_column(attr, keep)
            inside = np.isin(ids, live)
            pieces = ([codes[inside]], [consts[inside]], [ids[inside]])
        number = others.names.index(attr) if attr in others.names else -1
        mine = others.entries(atoms.keys, rows[others.attr[rows] == number])
        theirs = ((a, t.entries) for a, t in stray.items() if isinstance(t, OrderAtom))
        ops, values, owners = array("b"), [], array("q")  # (flat: no list an atom)
        strings: dict[str, str] = {}  # (one object a distinct string, not one an entry)
        for aid, entries in chain(mine, ((a, e) for a, e in theirs if stray[a].attr == attr)):
            for op, const in entries:
                ops.append(SLOT.get(op, -1))
                values.append(strings.setdefault(const, const) if type(const) is str else const)
                owners.append(aid)
        txn.store.release_mapped_pages()  # (the reverse records' pages read for them)
        if owners:
            pieces[0].append(np.frombuffer(ops, dtype=np.int8))
            pieces[1].append(values)
            pieces[2].append(np.frombuffer(owners, dtype=np.int64))
        return pieces if attr in on_cols or attr in rest_attrs else None

    for name in sorted(set(trees) | on_cols | rest_attrs):
        check_predicates(name, checked(name), wanted(name), errors)


def _among(aids: list[Any], live: np.ndarray, is_live: Callable[[int], bool]) -> list[bool]:
    """Per atom id of a direct record: whether it is in ``live`` (ascending, int64), by one
    ``searchsorted`` when every id is an int of int64 (not a bool), else ``is_live`` each
    (as damage may give): the same answers, no numpy call an id (rich 100K's 136K direct
    atoms: ~0.4 -> ~0.01 s)."""
    ids = int64_array(aids)
    if ids is None or not len(live):
        return list(map(is_live, aids))
    at = np.minimum(np.searchsorted(live, ids), len(live) - 1)
    return (live[at] == ids).tolist()  # type: ignore[no-any-return]
