"""Batch construction of a whole index from a complete set of compiled subscriptions.

The paper's BE-B: when every subscription is known in advance, attribute statistics come
from the whole set, and the tree is built top-down in one pass — the fixed point the
dynamic insertion rules (Alg. 3-6) converge to, without moving any clause twice: at each
c-node the most popular unused attribute (present in at least ``min_size`` clauses) gets
a p-node while the l-node would overflow; each c-directory bucket splits in halves while
it overflows (forced split), and a bucket whose own clauses still overflow is partitioned.
PB+trees are built bottom-up (:mod:`pbtree.bulk`) and the catalog written in key order.

The clauses' places are packed (:class:`PlaceTable`: one ``(attribute, lo, hi)`` row per
attribute of a clause, in numpy arrays) and the tree is built over arrays of clause
indices: a c-node counts its clauses' attributes once (``bincount``), and each p-node it
creates takes its clauses from a per-attribute index of those rows and subtracts their
attributes from the counts, so a c-node with p p-nodes costs O(its clauses' rows), not
O(p x rows); buckets split their clauses with vectorised comparisons; each l-node's pages
are cut from the packed atom ids (filled as :meth:`LNodePage.has_room` would fill them).
The result is the store appending clause by clause would give, byte for byte.

Cost: O(rows x depth) numpy work for the tree; O(clauses) C-level work for the records
(written per namespace in one LMDB call each, their keys packed with numpy) and
O(atoms log atoms) for the PB+trees; every page written once (measured figures, and the
designs they beat: docs/bench/build-check.md).  Memory: the compiled set (ids, texts,
atom ids) plus ~40 bytes per clause attribute, and the write transaction.
"""

from __future__ import annotations

import ctypes
import platform
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, pairwise
from struct import Struct
from typing import TYPE_CHECKING, Any

import numpy as np

from betree.disk import catalog
from betree.disk.atomkeys import (
    AtomKeys,
    ColumnKeys,
    OrderKeys,
    column_keys,
    encode_order,
    key_columns,
    parse,
)
from betree.disk.atomspans import AtomSpans
from betree.disk.batchtexts import Texts
from betree.disk.bulkrecords import write_atoms, write_catalog
from betree.disk.catalog import record_attributes, root_record
from betree.disk.grid import halves
from betree.disk.nodes import PAGE_BUDGET, CNode, LNodePage, entry_bytes
from betree.disk.pieces import Pieces
from betree.disk.tree import BETree, Places
from betree.lang.atoms import Clause, OrderAtom
from betree.lang.comparisons import Triple
from pbtree.operators import SLOT
from storage import codec
from storage.errors import InvalidInput
from storage.txn import WriteTxn

if TYPE_CHECKING:
    from betree.index import Index

Compiled = tuple[Any, str, list[Clause]]  # (external id, expression, clauses)


def build_index(index: Index, subscriptions: Sequence[Compiled]) -> dict[str, int]:
    """Fill the empty ``index`` with compiled ``subscriptions`` (distinct ids); one commit."""
    batch = Batch(index)
    for ident, expr, clauses in subscriptions:
        batch.add(ident, expr, clauses)
    return batch.build()


class PlaceTable:
    """The places of many clauses, packed: per clause its ``(attribute, lo, hi)`` rows.

    About 24 bytes per row, where a dict of tuples per clause takes about 1 KB.
    Attributes are numbered as they first appear (``names``).
    """

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.sizes = array("q")  # rows per clause
        self.attr = array("q")  # per row: the attribute's number
        self.lo = array("Q")
        self.hi = array("Q")

    def __len__(self) -> int:
        return len(self.sizes)

    @classmethod
    def from_arrays(
        cls,
        names: Sequence[str],
        sizes: np.ndarray,
        attr: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> PlaceTable:
        """The table of rows packed elsewhere: rows per clause, and per row the attribute's
        number in ``names``, lo and hi (for loaders that compute places in bulk)."""
        return cls.from_steps(names, [(sizes, attr, lo, hi)])

    @classmethod
    def from_steps(
        cls,
        names: Sequence[str],
        steps: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    ) -> PlaceTable:
        """:meth:`from_arrays` of consecutive runs of clauses, each appended as it comes
        (:meth:`AtomSpans.places_in_steps`: no run's temporaries held beside another's)."""
        table = cls()
        table.names = {name: i for i, name in enumerate(names)}
        columns = (table.sizes, table.attr, table.lo, table.hi)
        for step in steps:
            for column, part in zip(columns, step, strict=True):
                dtype = np.uint64 if column.typecode == "Q" else np.int64
                column.frombytes(np.ascontiguousarray(part, dtype=dtype).data.cast("B"))
        return table

    def add(self, places: Mapping[str, Sequence[int]]) -> None:
        """Append one clause's places (``{attribute: (lo, hi)}``)."""
        names = self.names
        try:
            numbers = [names[attr] for attr in places]
        except KeyError:
            for attr in places:
                names.setdefault(attr, len(names))
            numbers = [names[attr] for attr in places]
        spans = list(chain.from_iterable(places.values()))
        self.sizes.append(len(numbers))
        self.attr.extend(numbers)
        self.lo.extend(spans[0::2])
        self.hi.extend(spans[1::2])


@dataclass
class PackedSubs:
    """Subscriptions for :func:`build_from_parts`, with their clauses packed: per
    subscription its clause count, per clause its atom count, and every atom id
    concatenated (a loader that interned in bulk has them so; no list per clause)."""

    idents: list[Any]
    exprs: Iterable[str]  # read once, in order (a list, or a batch's :class:`Texts`)
    per_sub: np.ndarray
    lens: np.ndarray
    atoms: np.ndarray

    def __len__(self) -> int:
        return len(self.idents)

    def clause_ids(self) -> Iterator[list[list[int]]]:
        """Each subscription's clauses as lists of atom ids (its stored record's form), made
        :data:`CLAUSE_STEP` subscriptions at a time as consumed (all at once, 1M dense's
        20M ids as Python ints and lists were ~870 MB at the build's end)."""
        ends = np.cumsum(self.per_sub)
        clause_ends = np.concatenate(([0], np.cumsum(self.lens)))
        for start in range(0, len(self.per_sub), CLAUSE_STEP):
            stop = min(start + CLAUSE_STEP, len(self.per_sub))
            c0 = int(ends[start - 1]) if start else 0
            c1 = int(ends[stop - 1]) if stop else 0
            base = int(clause_ends[c0])
            flat = self.atoms[base : int(clause_ends[c1])].tolist()
            bounds = (clause_ends[c0 : c1 + 1] - base).tolist()
            clauses = [flat[a:b] for a, b in pairwise(bounds)]
            i = 0
            for n in self.per_sub[start:stop].tolist():
                yield clauses[i : i + n]
                i += n


#: subscriptions whose stored clause lists :meth:`PackedSubs.clause_ids` makes at once
CLAUSE_STEP = 1 << 14


class Batch:
    """Compiled subscriptions gathered for one batch build, interned at the build.

    Keeps per subscription its id and text (as bytes, up to a limit, then spilled:
    :class:`Texts`), and its clauses packed (atom references in one array): a loader
    holding a million subscriptions needs a few hundred bytes each, not the several KB of
    their atom objects.  An order atom of one comparison with an int64
    or float constant (two a ``between``: the dense workloads' every atom, none shared) is
    held as columns (attribute, operator code with :data:`_FLOAT` set for a float, the
    constant or its float64 bits: 11 bytes an occurrence, against ~200 for a dict entry)
    and interned at the build by one sort (a float by its bits, which its key holds as
    they are); any other atom is interned as it
    arrives by its store key (``codec.encode_value(atom.as_tuple())``, the bytes the build
    writes: ~90 bytes an atom of rich rules, where the atom object, its entries and their
    tuples took ~2 KB for an in-list of a dozen strings: the rich load's compile grew
    ~7 KB a subscription; ~1 µs an occurrence to encode).  Atom ids are given in order of
    first use, as interning one by one gives them.
    """

    def __init__(self, index: Index, texts: Texts | None = None) -> None:
        self.index = index
        self.atoms: dict[bytes, int] = {}  # store key -> atom id
        self.first: array[int] = array("q")  # per atom of ``atoms``: where it is first used
        self.idents: list[Any] = []
        # the texts, to their records: held up to a limit, then spilled (:class:`Texts`)
        self.exprs = Texts() if texts is None else texts
        self.per_sub: array[int] = array("q")  # clauses a subscription
        self.lens: array[int] = array("q")  # atoms a clause
        # per clause atom: an id of ``atoms`` (> 0), 0 (the true atom), or -(k + 1) for
        # the column atom k
        self.refs: array[int] = array("q")
        self.names: dict[str, int] = {}  # the column atoms' attributes
        self.col_attr: array[int] = array("h")
        self.col_code: array[int] = array("b")
        self.col_const: array[int] = array("q")
        self.metas: list[tuple[Any, str]] = []  # (id, metadata text) of those that have it

    def __len__(self) -> int:
        return len(self.idents)

    def add(
        self, ident: Any, expr: str, clauses: Sequence[Clause], meta: str | None = None
    ) -> None:
        """One subscription, with its metadata text (:func:`betree.disk.metadata.meta_text`)."""
        if meta is not None:
            self.metas.append((ident, meta))
        self.idents.append(ident)
        self.exprs.append(expr)
        self.per_sub.append(len(clauses))
        refs, atoms, encode_value = self.refs, self.atoms, codec.encode_value
        # (an atom object in several clauses, as a product repeats its one-clause parts'
        # atoms in each, is keyed once: its id, while the clauses hold it, -> its atom id)
        known: dict[int, int] = {}
        for clause in clauses:
            self.lens.append(len(clause) or 1)
            if not clause:
                refs.append(0)
            for atom in clause:
                if type(atom) is OrderAtom and len(atom.entries) == 1:
                    op, c = atom.entries[0]
                    if (type(c) is int and -_SIGN <= c < _SIGN) or type(c) is float:
                        names = self.names
                        attr = names.get(atom.attr)
                        if attr is None:
                            attr = names[atom.attr] = len(names)
                        self.col_attr.append(attr)
                        if type(c) is int:
                            self.col_code.append(SLOT[op])
                            self.col_const.append(c)
                        else:
                            self.col_code.append(SLOT[op] | _FLOAT)
                            self.col_const.frombytes(_double(c))
                        refs.append(-len(self.col_const))
                        continue
                aid = known.get(id(atom))
                if aid is None:
                    key = encode_value(atom.as_tuple())
                    aid = atoms.get(key)
                    if aid is None:
                        aid = atoms[key] = len(atoms) + 1
                        self.first.append(len(refs))
                    known[id(atom)] = aid
                refs.append(aid)

    def add_comparisons(
        self, ident: Any, expr: str, atoms: Sequence[Triple], meta: str | None = None
    ) -> None:
        """One subscription of one clause given as ``(attribute, operator, constant)``
        triples (canonical int or float constants) in the clause's order (``[]``: false,
        no clause), as :meth:`betree.compiler.Compiler.comparisons` gives them: what
        :meth:`add` does with the same clause's atoms, without an object each."""
        if meta is not None:
            self.metas.append((ident, meta))
        self.idents.append(ident)
        self.exprs.append(expr)
        self.per_sub.append(1 if atoms else 0)
        if not atoms:
            return
        self.lens.append(len(atoms))
        names, attrs, codes, consts = self.names, self.col_attr, self.col_code, self.col_const
        start = len(consts)
        for attr, op, c in atoms:
            number = names.get(attr)
            if number is None:
                number = names[attr] = len(names)
            attrs.append(number)
            if type(c) is int:
                codes.append(SLOT[op])
                consts.append(c)
            else:
                codes.append(SLOT[op] | _FLOAT)
                consts.frombytes(_double(c))
        self.refs.extend(range(-start - 1, -len(consts) - 1, -1))

    def add_text(self, ident: Any, expr: str, meta: str | None = None) -> None:
        """Compile ``expr`` with the index's compiler and add it: a plain conjunction of
        numeric comparisons straight to the columns (:meth:`add_comparisons`), anything
        else through :meth:`add`.  Errors: the compiler's (nothing added)."""
        compiler = self.index.engine.compiler()
        atoms = compiler.comparisons(ident, expr)
        if atoms is not None:
            self.add_comparisons(ident, expr, atoms, meta)
        else:
            self.add(ident, expr, compiler.compile(ident, expr), meta)

    def build(self, limit: int | None = None) -> dict[str, int]:
        """Write everything into the (empty) index; one commit, or one each ``limit`` bytes
        written (:func:`build_from_parts`).  The clauses' places are computed there from
        the atoms' keys, in numpy (:class:`AtomSpans`).  The batch is spent: its atoms and
        columns are let go before the build writes (the interning's arrays with them)."""
        ids, keys, cols = self._intern()
        subs = PackedSubs(
            self.idents,
            self.exprs,
            np.frombuffer(self.per_sub, dtype=np.int64).copy(),
            np.frombuffer(self.lens, dtype=np.int64).copy(),
            ids,
        )
        atoms, keys = AtomKeys(keys), []  # (spent once written: ~145 MB at 100K dense)
        return build_from_parts(
            self.index, subs, None, atoms, metas=self.metas, limit=limit, cols=cols, spend=True
        )

    def _intern(self) -> tuple[np.ndarray, Sequence[bytes], OrderKeys]:
        """Every clause atom's id, every atom's store key (by id, from 1) and the keys as
        columns; the batch's atoms and columns emptied.  When every atom is a column atom
        (a dense batch's), the keys are :class:`ColumnKeys` of the columns: made as the
        build writes them, not held (1M dense: ~1.4 GB as Python bytes)."""
        refs = np.frombuffer(self.refs, dtype=np.int64) if len(self.refs) else np.zeros(0, np.int64)
        column = np.flatnonzero(refs < 0)  # where each column atom is used, in order
        attr = np.frombuffer(self.col_attr, dtype=np.int16)
        code = np.frombuffer(self.col_code, dtype=np.int8)
        const = np.frombuffer(self.col_const, dtype=np.int64)
        order = np.lexsort((const, code, attr))  # stable: a group's first is its first use
        new = np.zeros(len(order), dtype=bool)
        for part in (attr, code, const):  # (one sorted copy at a time: 2M atoms, 16 MB each)
            ranked = part[order]
            new[1:] |= ranked[1:] != ranked[:-1]
        new[:1] = True
        group = np.empty(len(order), dtype=np.int64)
        group[order] = np.cumsum(new) - 1
        heads = order[new]  # each distinct column atom's first use (a column index)
        del order, new
        others = np.frombuffer(self.first, dtype=np.int64) if len(self.first) else column[:0]
        first = np.concatenate((others, column[heads]))
        aid = np.empty(len(first), dtype=np.int64)
        aid[np.argsort(first, kind="stable")] = np.arange(1, len(first) + 1)
        ids = np.where(refs > 0, aid[np.maximum(refs, 1) - 1], 0) if len(aid) else refs
        ids[column] = aid[len(others) :][group]
        del group, column, first
        by_aid = np.argsort(aid[len(others) :], kind="stable")  # (keys made in id order)
        heads, col_at = heads[by_aid], aid[len(others) :][by_aid] - 1
        kind = code[heads].astype(np.int64)
        is_float = kind >= _FLOAT
        const = const[heads]
        floats = (is_float, np.where(is_float, const.view(np.float64), 0.0))
        held = (attr[heads].astype(np.int64), kind & (_FLOAT - 1), np.where(is_float, 0, const))
        names = list(self.names)
        del refs, attr, code, const  # (views of the columns emptied below: let go with them)
        self.refs, self.first = array("q"), array("q")
        self.col_attr, self.col_code, self.col_const = array("h"), array("b"), array("q")
        if not len(others):  # every atom a column atom, ids 1..n: its key made when written
            n = len(held[2])
            cols = OrderKeys(
                ok=np.ones(n, dtype=bool),
                attr=held[0],
                names=names,
                code=held[1].astype(np.int8),
                is_float=floats[0],
                ints=held[2],
                floats=floats[1],
            )
            return ids, ColumnKeys(cols), cols
        made = encode_order(names, *held, floats=floats)  # (column atoms: ids 1..n, in order)
        keys: list[bytes] = [b""] * len(aid)
        for i, key in zip(col_at.tolist(), made, strict=True):
            keys[i] = key
        del made
        atoms, self.atoms = self.atoms, {}
        at = aid[: len(others)].tolist()
        while atoms:  # (the dict let go as the list takes its keys)
            key, j = atoms.popitem()
            keys[at[j - 1] - 1] = key
        cols = column_keys(names, keys, aid[: len(others)] - 1, col_at, *held, floats)
        return ids, keys, cols


_SIGN = 1 << 63
#: a column atom's operator code with this bit set: its constant is a float64, held as
#: its bits in the int64 column
_FLOAT = 8
#: a float's eight bytes in the machine's order, an int64 column's (appended by
#: ``frombytes``: 0.12 against 0.40 µs for the bits unpacked to an int first)
_double = Struct("=d").pack

#: an l-node page's bytes as its build counts them for :class:`Pieces` (roughly): its
#: header and envelope, and per clause its id, atom count and external id, and its atoms
_PAGE_COST, _CLAUSE_COST, _ATOM_COST = 64, 21, 4


def build_from_parts(
    index: Index,
    subs: Sequence[tuple[Any, str, list[list[int]]]] | PackedSubs,
    places: PlaceTable | Sequence[Places] | None,
    atoms: Mapping[int, bytes],
    orders: Mapping[int, Any] | None = None,
    metas: Iterable[tuple[Any, str]] = (),
    limit: int | None = None,
    cols: OrderKeys | None = None,
    spend: bool = False,
) -> dict[str, int]:
    """Fill the empty ``index`` from interned parts; one commit, or with ``limit`` a commit
    each time that many bytes were written (:class:`betree.disk.pieces.Pieces`: a fresh,
    unpublished store only; ``commits`` in the counts returned).

    ``subs`` are ``(external id, expression, clauses as atom ids)`` with distinct ids
    (or the same packed, :class:`PackedSubs`), internal ids given by position; ``places``
    holds :meth:`betree.engine.Engine.places` of every clause in order (packed, or one mapping per
    clause); ``atoms`` maps every atom id used (dense from 1; 0 is the true atom) to its
    store key, ``codec.encode_value(atom.as_tuple())`` of a canonical atom: what Spark's
    executors made once per atom, written as it is (an atom object each would cost ~5 µs
    more to build here).  ``places`` None: computed here from the atoms' keys
    (:class:`AtomSpans`: ~2.2 s for a shard of 500K subscriptions and 421K atoms of few
    repeated predicates, where packing them per clause cost the compile job ~8 µs a
    subscription).  For loaders that intern (and compute places) elsewhere.  ``orders``:
    the order atoms' tuples by atom id, when the caller has them (not decoded again).
    ``metas``: ``(id, metadata text)`` of the subscriptions that have metadata (validated:
    :func:`betree.disk.metadata.meta_text`), written in key order in one call.  ``cols``:
    the atoms' keys as columns, as :func:`betree.disk.atomkeys.parse` reads them, when the
    caller holds them so (:meth:`Batch.build`: not parsed again).  ``spend``: ``atoms`` (an
    :class:`AtomKeys` made for this call) emptied once written, before the BE-Tree's build.
    """
    if places is not None and not isinstance(places, PlaceTable):
        table = PlaceTable()
        for place in places:
            table.add(place)
        places = table
    with Pieces(index.store, limit) as pieces:
        txn = pieces.txn
        rec = root_record(txn)
        if rec["subs"] or rec["next_sid"]:
            raise InvalidInput("a batch build needs an empty index")
        # Records are written namespace by namespace in key order (``aid``, ``atom``, ``ext``,
        # ``meta``, ``pbtree``, then ``home`` and ``sub``), each run after every key already
        # there but a few: LMDB then fills its pages (a run inserted before other keys
        # leaves them half full: the raw store's records twice their compacted size).  The
        # index's own two records (``bexdb``) are taken out meanwhile and written back last.
        schema_doc = txn.get(catalog.NS, catalog.SCHEMA)
        txn.delete(catalog.NS, catalog.ROOT)
        txn.delete(catalog.NS, catalog.SCHEMA)
        if isinstance(subs, PackedSubs):
            idents = subs.idents
            clauses = _Clauses.packed(idents, subs.per_sub, subs.lens, subs.atoms)
        else:
            idents = [ident for ident, _, _ in subs]
            clauses = _Clauses(idents, [clause_ids for _, _, clause_ids in subs])
        decoded: Mapping[int, Any] = orders or {}
        aids, held = key_columns(atoms)
        count = len(atoms)
        keys = held if isinstance(held, (list, ColumnKeys)) else list(held)
        if cols is None:  # the one-comparison atoms, read as columns (once, for both)
            cols = parse(keys)
        if places is None:
            spans = AtomSpans(index.schema, atoms, cols, keep=False, own=True)
            steps = spans.places_in_steps(clauses.lens, clauses.atoms)
            places = PlaceTable.from_steps(spans.names, steps)
            decoded = {}  # (each key decoded again: what keeping them cost in memory)
            del spans
        if len(places) != len(clauses):
            raise InvalidInput(f"{len(places)} places given for {len(clauses)} clauses")
        next_atom = int(aids[-1]) + 1 if len(aids) else 1
        refs = np.bincount(clauses.atoms, minlength=next_atom)
        refs[0] = 0
        write_catalog(pieces, aids, keys, refs, cols)
        sids = codec.encode_u64s(range(len(subs)))
        exts = codec.encode_ids(idents)
        by_ext = sorted(range(len(exts)), key=exts.__getitem__)
        pieces.put_many(catalog.EXT, [exts[i] for i in by_ext], [sids[i] for i in by_ext])
        del exts, by_ext
        pairs = sorted((codec.encode_id(ident), text) for ident, text in metas)
        pieces.put_many(
            catalog.META, [k for k, _ in pairs], codec.encode_values(t for _, t in pairs)
        )
        write_atoms(pieces, aids, keys, cols, decoded)
        del keys, cols, held
        if spend and isinstance(atoms, AtomKeys):
            atoms.spend()
        txn = pieces.txn
        builder = _Builder(txn, rec, index, places, clauses)
        builder.fill(rec["root"], np.arange(len(clauses), dtype=np.int64), frozenset())
        del places
        builder.placed()  # (the places, ~32 bytes a clause attribute: 1M dense, ~330 MB)
        builder.write_lnodes(pieces)
        cids, homes = clauses.cids.tolist(), builder.home.tolist()
        pieces.put_many(catalog.HOME, codec.encode_u64s(cids), codec.encode_u64s(homes))
        del builder, cids, homes
        if isinstance(subs, PackedSubs):
            records = zip(idents, subs.exprs, subs.clause_ids(), strict=True)
            pieces.put_many(catalog.SUB, sids, map(codec.encode_value, records))
            del records
        else:
            pieces.put_many(catalog.SUB, sids, codec.encode_values(subs))
        txn = pieces.txn
        rec.update(next_sid=len(subs), next_atom=next_atom, subs=len(subs))
        rec.update(attributes=record_attributes(txn))
        if schema_doc is not None:
            txn.put(catalog.NS, catalog.SCHEMA, schema_doc)
        catalog.put_root(txn, rec)
    return {
        "subscriptions": len(subs),
        "clauses": len(clauses),
        "atoms": count,
        "commits": pieces.commits,
    }


def release_freed_heap() -> bool:
    """Give the C heap's free memory back to the kernel (glibc's ``malloc_trim``); whether
    it could.  For a loader between a batch build and its ``check()``, once the index is
    closed: LMDB keeps every dirty page of a write transaction on the environment's own
    free list until it closes (about the store's size after a batch build), and glibc keeps
    what is freed, so the check started from the build's high-water mark.  Measured, dense
    20K python load, the index reopened and the heap trimmed: RSS after the build 349 ->
    107 MB, the load's peak 632 -> 508 MB.  Elsewhere than glibc: nothing."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


class _Clauses:
    """Every clause of a build, packed: internal id, external id, atom ids (CSR)."""

    def __init__(self, idents: list[Any], clause_ids: list[list[list[int]]]) -> None:
        self._set(idents, *pack_clauses(clause_ids))

    @classmethod
    def packed(
        cls, idents: list[Any], per_sub: np.ndarray, lens: np.ndarray, atoms: np.ndarray
    ) -> _Clauses:
        self = cls.__new__(cls)
        sub, k = _clause_numbers(np.asarray(per_sub, dtype=np.int64))
        self._set(idents, sub, k, np.asarray(lens, dtype=np.int64), atoms.astype(np.int64))
        return self

    def _set(
        self, idents: list[Any], sub: np.ndarray, k: np.ndarray, lens: np.ndarray, atoms: np.ndarray
    ) -> None:
        self.lens, self.atoms = lens, atoms
        self.cids = catalog.clause_ids(sub, k)
        self.exts = list(map(idents.__getitem__, sub.tolist()))
        self.starts = np.cumsum(self.lens) - self.lens

    def __len__(self) -> int:
        return len(self.exts)


def pack_clauses(
    clause_ids: Sequence[Sequence[Sequence[int]]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Subscriptions' clauses (lists of atom ids) as arrays: per clause its subscription's
    position, its number in it and its atom count; and every atom id, concatenated (ids
    must be ints: strings and floats are refused, not converted).  ~1 µs a clause of
    eight atoms."""
    per_sub = np.fromiter(map(len, clause_ids), dtype=np.int64, count=len(clause_ids))
    sub, k = _clause_numbers(per_sub)
    flat = list(chain.from_iterable(clause_ids))
    lens = np.fromiter(map(len, flat), dtype=np.int64, count=len(flat))
    atoms = np.frombuffer(array("q", chain.from_iterable(flat)), dtype=np.int64)
    return sub, k, lens, atoms


def _clause_numbers(per_sub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per clause, its subscription's position and its number in it."""
    sub = np.repeat(np.arange(len(per_sub)), per_sub)
    k = np.arange(len(sub)) - np.repeat(np.cumsum(per_sub) - per_sub, per_sub)
    return sub, k


def rows_of(starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``starts[j] .. starts[j] + sizes[j]`` for every j, and the j of each row."""
    total = int(sizes.sum())
    offsets = np.cumsum(sizes) - sizes
    rows = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, sizes)
    owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    return rows, owner


class _Builder:
    """Top-down construction of the BE-Tree below an empty root, over clause indices.

    Attributes are ranked by name, so that the most popular attribute among equals is
    the greatest name (as ``max`` over ``(count, name)`` pairs would choose).
    """

    def __init__(
        self,
        txn: WriteTxn,
        rec: dict[str, Any],
        index: Index,
        places: PlaceTable,
        clauses: _Clauses,
    ) -> None:
        self.txn = txn
        self.tree = BETree(txn, rec)
        self.space = rec["space"]
        self.max_cap = rec["max_cap"]
        self.min_size = max(rec["min_size"], 1)  # an attribute must occur to be chosen
        self.index = index
        self.clauses = clauses
        # bytes a clause takes on an l-node page, as LNodePage.has_room counts them
        self.base = entry_bytes((0, None, []))
        self.per_atom = entry_bytes((0, None, [0])) - self.base
        self.names = sorted(places.names)
        rank = {name: r for r, name in enumerate(self.names)}
        # small ints, so that grouping rows by attribute is a radix sort
        small = np.int16 if len(rank) < 1 << 15 else np.int64
        remap = np.array([rank[name] for name in places.names], dtype=small)
        self.attr = remap[np.frombuffer(places.attr, dtype=np.int64)]
        self.lo = np.frombuffer(places.lo, dtype=np.uint64)
        self.hi = np.frombuffer(places.hi, dtype=np.uint64)
        self.sizes = np.frombuffer(places.sizes, dtype=np.int64)
        self.starts = np.cumsum(self.sizes) - self.sizes
        self.home = np.zeros(len(clauses), dtype=np.int64)
        # per l-node, as stored: its clauses, its pages, and where each page starts
        self.lnodes: list[tuple[np.ndarray, list[int], list[int]]] = []

    def _store(self, page: int, idx: np.ndarray) -> None:
        """The l-node of ``page``: clauses ``idx`` on a chain of packed pages, each filled
        as far as :meth:`LNodePage.has_room` allows (as appending them one by one would).

        The pages are allocated here, in the order appending would allocate them, and
        written by :meth:`write_lnodes`."""
        size = len(idx)
        node = self.txn.load_mut(self.space, page, CNode)
        if size:
            ends = np.cumsum(self.base + self.per_atom * self.clauses.lens[idx])
            cuts = [0]
            while cuts[-1] < size:
                before = int(ends[cuts[-1] - 1]) if cuts[-1] else 0
                end = int(np.searchsorted(ends, before + PAGE_BUDGET, side="right"))
                cuts.append(max(end, cuts[-1] + 1))
            pages = [self.txn.alloc() for _ in cuts[1:]]
            self.lnodes.append((idx, pages, cuts))
            node.lnode = pages[0]
            node.size += size
        self.home[idx] = page
        node.cap = -(-size // self.max_cap) * self.max_cap if size else self.max_cap

    def placed(self) -> None:
        """Let the places go: every clause is placed (:meth:`fill` done)."""
        self.attr = self.sizes = self.starts = np.zeros(0, dtype=np.int64)
        self.lo = self.hi = np.zeros(0, dtype=np.uint64)

    def write_lnodes(self, pieces: Pieces) -> None:
        """Write every l-node page: the clauses are gathered once, in l-node order, and
        each page is a slice of the gathered arrays (~15 µs a page, gathers included).
        The pages go in ``pieces``' transactions, counted as written (the c-nodes, made
        by :meth:`fill` in the one before, are committed with the first piece)."""
        if not self.lnodes:
            return
        c = self.clauses
        order = np.concatenate([idx for idx, _, _ in self.lnodes])
        lens = c.lens[order]
        rows, _ = rows_of(c.starts[order], lens)
        atoms = c.atoms[rows].astype(np.uint32)
        cids = c.cids[order]
        exts = list(map(c.exts.__getitem__, order.tolist()))
        at = np.concatenate(([0], np.cumsum(lens))).tolist()
        lens32 = lens.astype(np.uint32)
        first = 0
        for idx, pages, cuts in self.lnodes:
            for j, lpage in enumerate(pages):
                lo, hi = first + cuts[j], first + cuts[j + 1]
                fields = [
                    pages[j + 1] if j + 1 < len(pages) else 0,
                    cids[lo:hi].tobytes(),
                    exts[lo:hi],
                    lens32[lo:hi].tobytes(),
                    atoms[at[lo] : at[hi]].tobytes(),
                ]
                pieces.txn.put_new(self.space, lpage, LNodePage.from_fields(lpage, fields))
                pieces.wrote(_PAGE_COST + _CLAUSE_COST * (hi - lo) + _ATOM_COST * (at[hi] - at[lo]))
            first += len(idx)

    def fill(self, page: int, idx: np.ndarray, used: frozenset[int]) -> None:
        """SpacePartitioning of one c-node over the clauses ``idx`` it receives."""
        if len(idx) <= self.max_cap:
            self._store(page, idx)
            return
        rows, owner = rows_of(self.starts[idx], self.sizes[idx])
        attrs = self.attr[rows]
        nattr = len(self.names)
        counts = np.bincount(attrs, minlength=nattr)
        by_attr = np.argsort(attrs, kind="stable")  # rows grouped by attribute, in order
        bounds = np.concatenate(([0], np.cumsum(counts)))
        if used:
            counts[list(used)] = 0
        local_sizes = self.sizes[idx]
        local_starts = np.cumsum(local_sizes) - local_sizes
        alive = np.ones(len(idx), dtype=bool)
        left = len(idx)
        taken = set(used)
        while left > self.max_cap:
            best = int(counts.max())
            if best < self.min_size:
                break  # an extended l-node
            attr = int(np.flatnonzero(counts == best)[-1])
            group = by_attr[bounds[attr] : bounds[attr + 1]]
            group = group[alive[owner[group]]]
            moving = owner[group]  # ascending: clause order is kept
            alive[moving] = False
            left -= len(moving)
            gone, _ = rows_of(local_starts[moving], local_sizes[moving])
            counts -= np.bincount(attrs[gone], minlength=nattr)
            taken.add(attr)
            counts[list(taken)] = 0
            name = self.names[attr]
            lo, hi = self.index.engine.hints[name]
            top = self.txn.alloc()
            self.txn.put_new(self.space, top, CNode(top, name, True, lo, hi, page, self.max_cap))
            node = self.txn.load_mut(self.space, page, CNode)
            node.add_pnode(name, top)
            node.add_score(name, len(moving))
            span = rows[group]
            self.cluster(top, name, idx[moving], self.lo[span], self.hi[span], used | {attr})
        self._store(page, idx[alive])

    def cluster(
        self,
        page: int,
        attr: str,
        idx: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        used: frozenset[int],
    ) -> None:
        """SpaceClustering of one bucket: halve while it overflows, then partition.

        ``lo`` and ``hi`` are the clauses' places on the bucket's attribute ``attr``.
        """
        bucket = self.txn.load(self.space, page, CNode)
        if len(idx) <= self.max_cap or bucket.atomic:
            self.fill(page, idx, used)
            return
        (llo, lhi), (rlo, rhi) = halves(bucket.lo, bucket.hi)
        in_left = (lo >= llo) & (hi <= lhi)
        in_right = ~in_left & (lo >= rlo) & (hi <= rhi)
        rest = ~(in_left | in_right)
        left, right = self.txn.alloc(), self.txn.alloc()
        self.txn.put_new(self.space, left, CNode(left, attr, False, llo, lhi, page, self.max_cap))
        self.txn.put_new(self.space, right, CNode(right, attr, False, rlo, rhi, page, self.max_cap))
        node = self.txn.load_mut(self.space, page, CNode)
        node.left, node.right = left, right
        self.cluster(left, attr, idx[in_left], lo[in_left], hi[in_left], used)
        self.cluster(right, attr, idx[in_right], lo[in_right], hi[in_right], used)
        self.fill(page, idx[rest], used)
