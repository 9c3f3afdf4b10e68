"""Every atom of a store with its grid span, read from the atoms' store keys: the rule of
:meth:`betree.engine.Engine.places` for a whole store at once, in numpy.

Two users: the batch build of a Spark load (:func:`betree.disk.bulk.build_from_parts`), which
computes its clauses' places here from their atom ids instead of the compile job packing
them per clause, and the check (:mod:`betree.checking.check`), which tests each stored clause's
bucket against them.

Why from the keys: a workload of few repeated predicates (``bexdb gen --profile wide``)
has ~0.8 atoms a subscription, most of them ``=`` or ``in`` atoms of ints; their entries
and spans are read off the decoded keys (the span is the least constant's grid
coordinate to the greatest's, as :func:`grid.atom_span` gives it).  The one-comparison
order atoms of numbers on int and float attributes (the dense workload's ranges, two a
``between``, none shared) are read as columns (:func:`betree.disk.atomkeys.parse`) and
spanned in numpy, no Python object an atom (~0.3 µs an atom, against ~4 decoded one by
one).  Other order atoms of numbers, and those of strings, are spanned from their decoded
entries (:func:`grid.entries_span`), and test atoms from their test's name (the grid, or a
bool test's value), as :func:`grid.atom_span` spans the atom: a rich rule's in-lists,
ranges of strings and tests are not rebuilt as objects (the constructors sort and key
every value; twice a load, in the build and in the check); any other key is rebuilt as
an :class:`Atom` and spanned (~5 µs).  :meth:`AtomSpans.places` ~0.1 µs a clause atom.
Memory: five arrays of 8 bytes per atom id and per column atom; the entries of the atoms
decoded one by one; the column atoms are spanned 64K at a time (the temporaries: ~100
bytes an atom of a step).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from betree.disk import grid
from betree.disk.atomkeys import OrderKeys, key_columns, parse, take_keys, test_of_key
from betree.lang.atoms import Atom, OrderAtom, atom_from_tuple
from betree.lang.schema import Schema
from betree.lang.testkinds import KINDS
from pbtree.keys import Numbers
from pbtree.operators import BY_CODE, BY_SYMBOL
from storage import codec

#: attribute ranks that are not an attribute's: no attribute (a c-node's that partitions
#: none), an attribute no atom is on, an atom that constrains no place
NO_ATTR, UNKNOWN, SKIP = -3, -2, -1


#: clause atoms placed in one numpy step (:meth:`AtomSpans.places_in_steps`)
PLACE_STEP = 1 << 20


class AtomSpans:
    """Per atom id (of ``keys``, atom id -> store key): its attribute, its entries if an
    order atom, and, on an attribute of ``schema``, that attribute's rank and its grid span.

    Atoms that constrain nothing (those true on an undefined attribute, the true atom 0,
    ids without an atom) have rank :data:`SKIP`.  Ranks number the attributes by name.
    :meth:`atom` builds an atom object (for messages).  ``cols``: the keys already read
    as columns (:func:`betree.disk.atomkeys.parse`), in ascending id order.  ``keep``
    False (the batch build, which needs only the spans): ``attr_of`` and ``entries`` are
    left empty, so that the decoded entries are not held (rich 200K: ~560 MB).  ``own``
    (keys the load encoded: the batch build's): a test atom's attribute and test
    read from its key's bytes (:func:`~betree.disk.atomkeys.test_of_key`), not decoded
    (rich rules: a third of their atoms, one-of lists and geo arguments built for nothing;
    the check, reading a store's keys, decodes each, its checksum checked).
    """

    def __init__(
        self,
        schema: Schema,
        keys: Mapping[int, bytes],
        cols: OrderKeys | None = None,
        *,
        keep: bool = True,
        own: bool = False,
    ) -> None:
        kinds = {name: grid.kind_of(spec.type) for name, spec in schema.attributes.items()}
        self.keys = keys  # (read again for an atom's tuple: not kept decoded, ~300 B each)
        self.attr_of: dict[int, str] = {}  # atoms not read as columns (below)
        self.entries: dict[int, Any] = {}  # of those, order atoms' (operator, constant) pairs
        self.built: dict[int, Atom] = {}
        ids, values = key_columns(keys)
        cols = parse(values) if cols is None else cols  # (read by the caller: not again)
        numeric = np.array([kinds.get(name) in _NUMERIC for name in cols.names] + [False])
        is_int = np.array([kinds.get(name) == "int" for name in cols.names] + [False])
        on_int = is_int[cols.attr] & ~cols.is_float
        inside = (cols.ints > -_SIGN) & (cols.ints < _SIGN - 1)  # (int64 ends: below)
        fast = cols.ok & numeric[cols.attr] & (~on_int | inside) & (cols.code != _NE)
        fast &= ~(cols.is_float & is_int[cols.attr])  # (a float bound of an int: its entries)
        #: the one-comparison atoms on int and float attributes, spanned in numpy: their ids,
        #: attribute (an index into ``col_names``), operator code and constant
        #: (every atom such, a dense build's and check's: the columns themselves, not copies:
        #: ~34 bytes an atom, ~680 MB at 1M dense)
        self.col_names = cols.names
        pick: Any = slice(None) if bool(fast.all()) else fast
        self.col_ids, self.col_attr, self.col_code = ids[pick], cols.attr[pick], cols.code[pick]
        self.col_float = cols.is_float[pick]
        self.col_ints, self.col_floats = cols.ints[pick], cols.floats[pick]
        # (typed arrays, not lists of Python ints: the grid's coordinates are ~2**63)
        aids, los, his = array("q"), array("Q"), array("Q")
        attrs: list[str] = []
        spanned: set[str] = set()  # the attributes of the atoms not read as columns
        seen: dict[Any, Any] = {}
        slow = np.flatnonzero(~fast).tolist()
        for aid, key in zip(ids[slow].tolist(), take_keys(values, slow), strict=True):
            head = test_of_key(key) if own else None
            if head is not None and head[1] in KINDS:  # (the build's own keys: not decoded)
                attr = seen.setdefault(head[0], head[0])
                spanned.add(attr)
                if keep:  # (as the decoded path below keeps it)
                    self.attr_of[aid] = attr
                if attr in kinds and aid != 0 and head[1] != "undefined":
                    aids.append(aid)
                    attrs.append(attr)
                    lo, hi = _test_span(kinds[attr], head[1])
                    los.append(lo)
                    his.append(hi)
                continue
            t = codec.decode_value(key)
            if type(t) is list and len(t) > 1 and type(t[1]) is str:  # (else damage: below)
                t[1] = seen.setdefault(t[1], t[1])  # one string per attribute, not per atom
            kind = kinds.get(t[1]) if t[0] == "order" else None
            consts = _ints_in(t[2]) if kind == "int" else None
            entries: Any = None
            span: tuple[int, int] | None = None
            if _is_test(t):  # (spanned from its test's name: not built)
                attr = t[1]
                if attr in kinds and aid != 0 and t[2] != "undefined":
                    span = _test_span(kinds[attr], t[2])
            elif consts is not None:  # (the grid coordinate of an int: clamped, offset)
                attr, entries = t[1], t[2]
                span = _SIGN + max(min(consts), -_SIGN), _SIGN + min(max(consts), _SIGN - 1)
            elif kind in _CONSTANTS and _pairs_in(t[2], _CONSTANTS[kind]):  # from the entries
                attr, entries = t[1], t[2]
                span = grid.entries_span(kind, t[2])
            else:  # (not kept in ``built``: +620 MB at rich 100K; messages build theirs)
                atom = atom_from_tuple(t)
                attr = atom.attr
                if isinstance(atom, OrderAtom):
                    entries = atom.entries
                if attr in kinds and aid != 0 and atom.requires_defined:
                    span = grid.atom_span(kinds[attr], atom)
            spanned.add(attr)
            if keep:  # (the build's are not: ~560 MB at rich 200K, held to the places)
                self.attr_of[aid] = attr
                if entries is not None:
                    self.entries[aid] = entries
            if span is not None:
                aids.append(aid)
                attrs.append(attr)
                los.append(span[0])
                his.append(span[1])
        used = np.flatnonzero(np.bincount(self.col_attr, minlength=len(self.col_names))).tolist()
        fallback = {attr for attr in spanned if attr in kinds}
        self.names = sorted(fallback.union(self.col_names[i] for i in used))
        self.rank = {name: r for r, name in enumerate(self.names)}
        size = int(ids.max()) + 1 if len(ids) else 1
        self.attr = np.full(size, SKIP, dtype=np.int64)
        self.lo = np.zeros(size, dtype=np.uint64)
        self.hi = np.zeros(size, dtype=np.uint64)
        at = np.frombuffer(aids, dtype=np.int64) if aids else np.zeros(0, dtype=np.int64)
        self.attr[at] = list(map(self.rank.__getitem__, attrs))
        self.lo[at] = np.frombuffer(los, dtype=np.uint64) if los else 0
        self.hi[at] = np.frombuffer(his, dtype=np.uint64) if his else 0
        ranks = np.array([self.rank.get(name, SKIP) for name in self.col_names] + [SKIP])
        self.attr[self.col_ids] = ranks[self.col_attr]
        for kind in _NUMERIC:
            on = np.array([kinds.get(name) == kind for name in self.col_names] + [False])
            rows = np.flatnonzero(on[self.col_attr])
            for start in range(0, len(rows), _STEP):  # (a step's temporaries at a time)
                sel = rows[start : start + _STEP]
                consts = self.col_ints[sel]
                if kind == "float":
                    consts = np.where(self.col_float[sel], self.col_floats[sel], consts)
                spans = _comparison_spans(kind, self.col_code[sel], consts)
                self.lo[self.col_ids[sel]], self.hi[self.col_ids[sel]] = spans

    def kept(self, skip: set[int]) -> np.ndarray:
        """Per atom read as columns: whether its id is not in ``skip``."""
        return ~np.isin(self.col_ids, np.fromiter(skip, dtype=np.int64, count=len(skip)))

    def col_attributes(self, keep: np.ndarray) -> list[str]:
        """The attributes of the atoms read as columns where ``keep``."""
        used = np.flatnonzero(np.bincount(self.col_attr[keep], minlength=len(self.col_names)))
        return [self.col_names[i] for i in used.tolist()]

    def order_column(
        self, name: str, keep: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | Numbers, np.ndarray]:
        """The atoms on ``name`` read as columns, where ``keep``, as PB+tree entries:
        operator codes, constants (an int64 array when all are ints, else
        :class:`~pbtree.keys.Numbers`: no Python float an atom), atom ids.  One attribute
        at a time, so that a caller holds one attribute's entries, not every attribute's
        (~24 bytes an atom)."""
        i = self.col_names.index(name) if name in self.col_names else -1
        sel = keep & (self.col_attr == i)
        floats = self.col_float[sel]
        consts: np.ndarray | Numbers = self.col_ints[sel]
        if floats.any():
            consts = Numbers.of_columns(floats, self.col_ints[sel], self.col_floats[sel])
        return self.col_code[sel].astype(np.int64), consts, self.col_ids[sel]

    def drop_spans(self) -> None:
        """Let the ranks and spans go (24 bytes an atom id), keeping the columns, the
        keys and the names: what the check's catalog pass reads after the places."""
        self.attr = np.zeros(0, dtype=np.int64)
        self.lo, self.hi = np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)

    def read_keys_from(self, keys: Mapping[int, bytes]) -> None:
        """Read atoms' keys (for :meth:`atom`, messages) from ``keys`` from now on, so that
        the caller can let go of the keys it built this from (~50 bytes an atom)."""
        self.keys = keys

    def decoded(self, aid: int) -> Any:
        """Atom ``aid``'s tuple, decoded from its key (each call decodes it)."""
        return codec.decode_value(self.keys[aid])

    def atom(self, aid: int) -> Atom:
        """Atom ``aid`` as an object (built once)."""
        atom = self.built.get(aid)
        if atom is None:
            atom = self.built[aid] = atom_from_tuple(self.decoded(aid))
        return atom

    def of(self, ids: np.ndarray) -> np.ndarray:
        """Attribute ranks of atom ids (:data:`SKIP` where out of range)."""
        inside = (ids >= 0) & (ids < len(self.attr))
        return np.where(inside, self.attr[np.where(inside, ids, 0)], SKIP)

    def rank_of(self, attr: str | None) -> int:
        return NO_ATTR if attr is None else self.rank.get(attr, UNKNOWN)

    def places(
        self, lens: np.ndarray, atoms: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`betree.engine.Engine.places` of every clause (its atom count in ``lens``,
        the atom ids of all concatenated in ``atoms``) as rows: rows per clause, and per row the
        attribute's rank, lo and hi, a clause's rows by attribute name (the steps of
        :meth:`places_in_steps`, joined)."""
        parts = list(self.places_in_steps(lens, atoms))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, np.int64), self.lo[:0], self.hi[:0]
        return tuple(np.concatenate(column) for column in zip(*parts, strict=True))  # type: ignore[return-value]

    def places_in_steps(
        self, lens: np.ndarray, atoms: np.ndarray, step: int = PLACE_STEP
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`places`' rows for consecutive runs of whole clauses of about ``step``
        atoms each, in clause order: the temporaries (~8 arrays of 8 bytes a clause atom,
        ~1.3 GB over 1M dense subscriptions' 20M) are a run's, not every clause's.

        Per attribute a clause's atoms on it allow the intersection of their spans; an
        empty one is the whole grid (as :meth:`betree.engine.Engine.places` gives it).
        """
        ends = np.cumsum(lens)
        first = 0
        while first < len(lens):
            start = int(ends[first - 1]) if first else 0
            last = int(np.searchsorted(ends, start + step, side="right"))
            last = max(last, first + 1)
            stop = int(ends[last - 1])
            yield self._places(lens[first:last], atoms[start:stop])
            first = last

    def _places(
        self, lens: np.ndarray, atoms: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        width = max(1, len(self.names))
        clause = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        ids = np.asarray(atoms, dtype=np.int64)
        rank = self.of(ids)
        keep = rank >= 0
        group, ids = clause[keep] * width + rank[keep], ids[keep]
        del clause, rank, keep
        if not bool(np.all(group[1:] >= group[:-1])):  # (a clause's atoms come by attribute)
            order = np.argsort(group, kind="stable")
            group, ids = group[order], ids[order]
        if not len(group):
            return np.zeros(len(lens), dtype=np.int64), group, self.lo[:0], self.hi[:0]
        first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
        lo = np.maximum.reduceat(self.lo[ids], first)
        hi = np.minimum.reduceat(self.hi[ids], first)
        empty = lo > hi
        lo[empty], hi[empty] = 0, grid.GRID_MAX
        heads = group[first]
        return np.bincount(heads // width, minlength=len(lens)), heads % width, lo, hi


_SIGN = 1 << 63
#: column atoms spanned in one numpy step (~100 bytes of temporaries each)
_STEP = 1 << 16
_INT = frozenset((int,))
#: the code of ``!=``, which bounds nothing (spanned from its entries, as any atom)
_NE = BY_SYMBOL["!="].code
#: per code, whether the operator bounds from below, from above, strictly
_LOWER, _UPPER, _STRICT = (
    np.array([getattr(op, side) for op in BY_CODE], dtype=bool)
    for side in ("lower", "upper", "strict")
)


def _comparison_spans(
    kind: str, codes: np.ndarray, consts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grid.atom_span` of one-comparison atoms (operator codes, not ``!=``), in numpy:
    the constant's coordinate, one step inwards for a strict bound on ints, to an end of
    the grid on the open side."""
    at = grid.coords(kind, consts)
    op = np.array(codes, dtype=np.int64)
    lower, upper, strict = _LOWER[op], _UPPER[op], _STRICT[op]
    step = np.uint64(1 if kind == "int" else 0)
    lo = np.where(lower, at, np.uint64(0))
    hi = np.where(upper, at, np.uint64(grid.GRID_MAX))
    lo = np.where(lower & strict, lo + step, lo)
    hi = np.where(upper & strict, hi - step, hi)
    return lo, hi


_NUMERIC = frozenset(("int", "float"))
#: per attribute kind, the constants of the order atoms spanned from their entries (the
#: numbers' ranges, and strings': rich rules' ``=``, ``in`` and ranges of strings)
_CONSTANTS = {kind: frozenset((int, float)) for kind in _NUMERIC} | {"string": frozenset((str,))}


def held_entries(kinds: Mapping[str, str], t: Any) -> Any:
    """The entries :class:`AtomSpans` holds for a decoded key ``t`` (``kinds``: the grid
    kind of each attribute of the schema): an order atom's, None for any other atom (for
    a check that decodes its atoms' keys again, an attribute at a time)."""
    if _is_test(t):
        return None
    kind = kinds.get(t[1]) if t[0] == "order" else None
    if kind == "int" and _ints_in(t[2]) is not None:
        return t[2]
    if kind in _CONSTANTS and _pairs_in(t[2], _CONSTANTS[kind]):
        return t[2]
    atom = atom_from_tuple(t)
    return atom.entries if isinstance(atom, OrderAtom) else None


def _pairs_in(entries: Any, types: frozenset[type]) -> bool:
    """Whether an order atom's decoded entries are ``(operator, constant)`` pairs, each
    constant of one of ``types`` (numbers: not bools), which :func:`grid.entries_span`
    spans as the atom would be."""
    if type(entries) is not list or not entries:
        return False
    for entry in entries:
        if type(entry) is not list or len(entry) != 2 or type(entry[1]) not in types:
            return False
        if entry[0] not in BY_SYMBOL:
            return False
    return True


def _is_test(t: Any) -> bool:
    """Whether a decoded key is a test atom's ``("test", attribute, test, argument)`` of a
    known test (its argument is not looked at: the span does not depend on it)."""
    return (
        len(t) == 4 and t[0] == "test" and type(t[1]) is str and type(t[2]) is str and t[2] in KINDS
    )


def _test_span(kind: str, test: str) -> tuple[int, int]:
    """:func:`grid.atom_span` of a test atom on an attribute of type ``kind``, from its
    test's name (its argument plays no part): the bool tests' one value, else the grid."""
    if test == "bool_true":
        return 1, 1
    if test == "bool_false":
        return 0, 0
    return grid.interval(kind, None, False, None, False)


def _ints_in(entries: Any) -> list[int] | None:
    """The constants of an order atom's decoded entries if they are ``=`` pairs of ints
    (not bools): an ``=`` or ``in`` atom of ints, whose span is the hull of its constants
    (in any order, as :func:`grid.atom_span` takes the first and last of them sorted)."""
    if type(entries) is not list or not entries:
        return None
    try:
        consts = [c for op, c in entries if op == "="]
    except (TypeError, ValueError):  # not pairs
        return None
    if len(consts) != len(entries) or not _INT.issuperset(map(type, consts)):
        return None
    return consts
