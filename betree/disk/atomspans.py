"""Every atom of a store with its grid span, read from the atoms' store keys: the rule of
:meth:`betree.engine.Engine.places` for a whole store at once, in numpy.

Two users: the batch build of a Spark load (:func:`betree.disk.bulk.build_from_parts`), which
computes its clauses' places here from their atom ids instead of the compile job packing
them per clause, and the check (:mod:`betree.checking.check`), which tests each stored clause's
bucket against them.

Why from the keys: a workload of few repeated predicates (``bexdb gen --profile wide``)
has ~0.8 atoms a subscription, most of them ``=`` or ``in`` atoms of ints; their entries
and spans are read off the decoded keys (the span is the least constant's grid
coordinate to the greatest's, as :func:`grid.atom_span` gives it).  So are the order atoms
of numbers on int and float attributes (the dense workload's ranges, two atoms a
``between``: :func:`grid.entries_span` of their entries, ~2 µs an atom against ~7
rebuilt).  Any other key is rebuilt as an :class:`Atom` and spanned.  Cost, measured on a
wide shard (421K atoms, 334K of them read off, 3.9M clause atoms): ~2.5 µs an atom read
off, ~5 rebuilt; :meth:`AtomSpans.places` ~0.1 µs a clause atom.  Memory: per atom its
entries and attribute (its tuple is decoded again when asked for) and three arrays of 8
bytes per atom id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from betree.disk import grid
from betree.lang.atoms import Atom, OrderAtom, atom_from_tuple
from betree.lang.schema import Schema
from pbtree.operators import BY_CODE, BY_SYMBOL
from storage import codec

#: attribute ranks that are not an attribute's: no attribute (a c-node's that partitions
#: none), an attribute no atom is on, an atom that constrains no place
NO_ATTR, UNKNOWN, SKIP = -3, -2, -1


class AtomSpans:
    """Per atom id (of ``keys``, atom id -> store key): its attribute, its entries if an
    order atom, and, on an attribute of ``schema``, that attribute's rank and its grid span.

    Atoms that constrain nothing (those true on an undefined attribute, the true atom 0,
    ids without an atom) have rank :data:`SKIP`.  Ranks number the attributes by name.
    :meth:`atom` builds an atom object (for messages).
    """

    def __init__(self, schema: Schema, keys: dict[int, bytes]) -> None:
        kinds = {name: grid.kind_of(spec.type) for name, spec in schema.attributes.items()}
        self.keys = keys  # (read again for an atom's tuple: not kept decoded, ~300 B each)
        self.attr_of: dict[int, str] = {}
        self.entries: dict[int, Any] = {}  # order atoms: their (operator, constant) pairs
        self.built: dict[int, Atom] = {}
        aids, attrs, los, his = [], [], [], []
        ranges: dict[str, tuple[list[int], list[str], list[int], list[Any]]] = {}
        seen: dict[Any, Any] = {}
        for aid, key in keys.items():
            t = codec.decode_value(key)
            if type(t) is list and len(t) > 1 and type(t[1]) is str:  # (else damage: below)
                t[1] = seen.setdefault(t[1], t[1])  # one string per attribute, not per atom
            kind = kinds.get(t[1]) if t[0] == "order" else None
            code = _one_comparison(kind, t[2]) if kind is not None else None
            if code is not None:  # one comparison with a number: spanned below, in numpy
                attr = self.attr_of[aid] = t[1]
                self.entries[aid] = t[2]
                held = ranges.setdefault(kind, ([], [], [], []))  # type: ignore[arg-type]
                held[0].append(aid)
                held[1].append(attr)
                held[2].append(code)
                held[3].append(t[2][0][1])
                continue
            consts = _ints_in(t[2]) if kind == "int" else None
            if consts is not None:  # (the grid coordinate of an int: clamped, offset)
                attr = t[1]
                lo, hi = _SIGN + max(min(consts), -_SIGN), _SIGN + min(max(consts), _SIGN - 1)
                self.attr_of[aid], self.entries[aid] = attr, t[2]
            elif kind in _NUMERIC and _numbers_in(t[2]):  # ranges: spanned from the entries
                attr = self.attr_of[aid] = t[1]
                self.entries[aid] = t[2]
                lo, hi = grid.entries_span(kind, t[2])
            else:
                atom = self.atom(aid)
                attr = self.attr_of[aid] = atom.attr
                if isinstance(atom, OrderAtom):
                    self.entries[aid] = atom.entries
                if attr not in kinds or aid == 0 or not atom.requires_defined:
                    continue
                lo, hi = grid.atom_span(kinds[attr], atom)
            aids.append(aid)
            attrs.append(attr)
            los.append(lo)
            his.append(hi)
        self.names = sorted({attr for attr in self.attr_of.values() if attr in kinds})
        self.rank = {name: r for r, name in enumerate(self.names)}
        size = max(keys, default=0) + 1
        self.attr = np.full(size, SKIP, dtype=np.int64)
        self.lo = np.zeros(size, dtype=np.uint64)
        self.hi = np.zeros(size, dtype=np.uint64)
        self.attr[aids] = list(map(self.rank.__getitem__, attrs))
        self.lo[aids] = np.array(los, dtype=np.uint64)
        self.hi[aids] = np.array(his, dtype=np.uint64)
        for kind, (ids, names, codes, consts) in ranges.items():
            self.attr[ids] = list(map(self.rank.__getitem__, names))
            self.lo[ids], self.hi[ids] = _comparison_spans(kind, codes, consts)

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
        attribute's rank, lo and hi, a clause's rows by attribute name.

        Per attribute a clause's atoms on it allow the intersection of their spans; an
        empty one is the whole grid (as :meth:`betree.engine.Engine.places` gives it).
        """
        width = max(1, len(self.names))
        clause = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        ids = np.asarray(atoms, dtype=np.int64)
        rank = self.of(ids)
        keep = rank >= 0
        group, ids = clause[keep] * width + rank[keep], ids[keep]
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
_INT = frozenset((int,))
#: operator codes (:data:`pbtree.operators.SLOT`) of :func:`_one_comparison`: all but ``!=``
_CODES = {op.symbol: op.code for op in BY_CODE if op.lower or op.upper}
#: per code, whether the operator bounds from below, from above, strictly
_LOWER, _UPPER, _STRICT = (
    np.array([getattr(op, side) for op in BY_CODE], dtype=bool)
    for side in ("lower", "upper", "strict")
)


def _one_comparison(kind: str | None, entries: Any) -> int | None:
    """The operator's code if an order atom's decoded entries are one comparison (not
    ``!=``) with a number its attribute's grid takes exactly in numpy (an int of int64 on an
    int attribute, short of the ends a strict bound steps past; an int or a float on a
    float one); else None."""
    if type(entries) is not list or len(entries) != 1:
        return None
    entry = entries[0]
    if type(entry) is not list or len(entry) != 2:
        return None
    op, c = entry
    code = _CODES.get(op) if type(op) is str else None
    if code is None:
        return None
    if kind == "int":
        return code if type(c) is int and -_SIGN < c < _SIGN - 1 else None
    if kind == "float":
        return code if type(c) is float or (type(c) is int and -_SIGN <= c < _SIGN) else None
    return None


def _comparison_spans(
    kind: str, codes: list[int], consts: list[Any]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grid.atom_span` of one-comparison atoms (:func:`_one_comparison`), in numpy:
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
_NUMBER = frozenset((int, float))


def _numbers_in(entries: Any) -> bool:
    """Whether an order atom's decoded entries are ``(operator, number)`` pairs (not
    bools), which :func:`grid.entries_span` spans as the atom would be."""
    if type(entries) is not list or not entries:
        return False
    for entry in entries:
        if type(entry) is not list or len(entry) != 2 or type(entry[1]) not in _NUMBER:
            return False
        if entry[0] not in BY_SYMBOL:
            return False
    return True


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
