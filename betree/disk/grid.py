"""Grid coordinates: every attribute's domain mapped onto the integers [0, 2**64).

The BE-Tree's c-directory halves an attribute's domain into buckets (BE-Tree paper, sec.
4.3; docs/REFERENCES.md); its invariance needs a discrete domain with atomic (single-value)
buckets.  Each value is mapped by a monotone, non-decreasing function ``g`` onto u64 grid
coordinates, so that ``lo <= x <= hi`` implies ``g(lo) <= g(x) <= g(hi)``: an interval
enclosed by a bucket in grid space contains every value its predicate accepts.

* ``int``: ``x + 2**63``; float bounds round inwards (ceil for lower, floor for upper).
* ``float``: the IEEE-754 bits made order-preserving (sign flipped, negatives inverted);
  ``-0.0`` is ``0.0``; an int bound goes through the nearest double (which keeps the
  enclosure, since no double lies between an int and its nearest double).
* ``string``: the first 8 bytes of UTF-8, big-endian (prefix order is code-point order).
* ``bool``: ``False`` 0, ``True`` 1.
* lists: one atomic bucket (placement under a p-node only says "defined").

An interval that holds no value has ``lo > hi``.  Exclusive int bounds past an end of the
domain (``x > 2**63 - 1``, ``x < -2**63``, ``x > 9.3e18``) make one step past the u64 range
(``lo = 2**64`` or ``hi = -1``); :func:`hull` brings every span back into u64, an empty one
as :data:`EMPTY`, before it is packed into numpy arrays or compared with buckets.

The top bucket of every c-directory encloses everything.  Its children halve the
attribute's *hint range*: the schema's ``min``/``max`` for ints and floats, else the whole
grid; values outside the hints stay in the top bucket, matching correctly (schema hints are hints).

An atom's *span* (:func:`atom_span`) is the hull of its entries' intervals: where a
clause holding it may sit in an attribute's c-directory.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from betree.lang.atoms import Atom, OrderAtom, TestAtom
from betree.lang.bounded import forget_older_half
from pbtree.operators import bounds

GRID_MAX = (1 << 64) - 1
#: the interval that holds no value, in u64 (any ``lo > hi`` means the same)
EMPTY = (GRID_MAX, 0)
_SIGN = 1 << 63
_DOUBLE = struct.Struct(">d")
_U64 = struct.Struct(">Q")


#: Schema types placed on the grid as another type: an ``int_enum`` as an ``int`` (its
#: ``=`` and ``in`` atoms go to a PB+tree), ``segments`` and ``frequency_caps`` as lists.
_GRID_KINDS = {
    "int_enum": "int",
    "segments": "int_list",
    "frequency_caps": "int_list",
    "float_list": "int_list",  # placed as any list: under a p-node, "defined"
    "objects": "int_list",  # an array of objects (any PATH (…)): as a list
    "ip": "string",  # addresses as order-preserving string keys (betree.lang.ipaddr)
}


def kind_of(schema_type: str) -> str:
    """The grid kind of an attribute of this schema type (the type itself for most)."""
    return _GRID_KINDS.get(schema_type, schema_type)


def float_coord(x: float) -> int:
    """A double's grid coordinate: its IEEE bits made order-preserving (-0.0 as 0.0)."""
    if x == 0.0:
        x = 0.0
    bits = int(_U64.unpack(_DOUBLE.pack(x))[0])
    return bits ^ GRID_MAX if bits & _SIGN else bits | _SIGN


def coord(kind: str, value: Any, *, upper: bool = False) -> int:
    """Grid coordinate of ``value`` on an attribute of type ``kind``.

    ``upper`` rounds a non-integral bound of an int attribute down instead of up.
    """
    if kind == "int":
        if isinstance(value, float):
            if math.isinf(value):
                return GRID_MAX if value > 0 else 0
            value = math.floor(value) if upper else math.ceil(value)
        return min(max(int(value), -_SIGN), _SIGN - 1) + _SIGN
    if kind == "float":
        return float_coord(float(value)) if not isinstance(value, float) else float_coord(value)
    if kind == "string":
        return int(_U64.unpack(value.encode("utf-8")[:8].ljust(8, b"\0"))[0])
    if kind == "bool":
        return int(bool(value))
    return 0


def event_coord(kind: str, value: Any) -> int:
    """A validated event value's coordinate on an attribute of grid ``kind``: a scalar's
    :func:`coord`, a bool's 0 or 1, any other kind's 0 (its one bucket)."""
    if kind in ("int", "float", "string"):
        return coord(kind, value)
    return int(bool(value)) if kind == "bool" else 0


def coords(kind: str, values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """:func:`coord` of each of ``values`` (one attribute's, validated), as ``uint64``:
    whole arrays of int64 ints or of doubles in a few numpy calls, anything else one by
    one."""
    array = np.array(values) if kind in ("int", "float") else None
    if array is not None and array.dtype == np.int64 and kind == "int":
        return array.view(np.uint64) ^ np.uint64(_SIGN)
    if array is not None and array.dtype in (np.int64, np.float64) and kind == "float":
        bits = (array.astype(np.float64) + 0.0).view(np.uint64)  # (-0.0 + 0.0 is 0.0)
        return np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(_SIGN))
    return np.array([coord(kind, value) for value in values], dtype=np.uint64)


def hint_range(kind: str, lo: Any = None, hi: Any = None) -> tuple[int, int]:
    """The grid range the top bucket's children halve."""
    if kind == "bool":
        return 0, 1
    if kind in ("int_list", "string_list"):
        return 0, 0
    if kind in ("int", "float") and lo is not None and hi is not None and lo <= hi:
        return coord(kind, lo), coord(kind, hi, upper=True)
    return 0, GRID_MAX


def interval(
    kind: str, lo: Any, lo_inclusive: bool, hi: Any, hi_inclusive: bool
) -> tuple[int, int]:
    """Grid interval enclosing the values of ``lo <(=) x <(=) hi`` (None = unbounded).

    Exclusive bounds move one grid step inwards only where that is exact (ints); elsewhere
    they stay (a bucket may then enclose a value the predicate rejects — never the
    reverse).  An exclusive int bound at an end of the domain steps past the u64 range
    (``lo = 2**64`` or ``hi = -1``: the interval is empty); :func:`hull` bounds it.
    """
    if kind in ("int_list", "string_list"):
        return 0, 0
    glo = 0 if lo is None else coord(kind, lo)
    ghi = GRID_MAX if hi is None else coord(kind, hi, upper=True)
    if kind == "int":
        if lo is not None and not lo_inclusive and lo == math.floor(lo):
            glo += 1
        if hi is not None and not hi_inclusive and hi == math.floor(hi):
            ghi -= 1
    return glo, ghi


def hull(spans: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """The smallest interval holding every one of ``spans`` (from :func:`interval`), in u64:
    :data:`EMPTY` when it holds no value.

    An empty span takes part like any other (``(0, -1)`` with ``(5, 9)`` gives ``(0, 9)``),
    as it did before spans were bounded: clauses stored by then keep their places.
    """
    lo, hi = GRID_MAX + 1, -1
    for slo, shi in spans:
        lo, hi = min(lo, slo), max(hi, shi)
    return (lo, hi) if lo <= hi else EMPTY


def halves(lo: int, hi: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two children of the bucket ``[lo, hi]`` (``lo < hi``)."""
    mid = (lo + hi) // 2
    return (lo, mid), (mid + 1, hi)


def shown(kind: str, c: int) -> Any:
    """:func:`value` for JSON: an infinite float as the string ``"inf"`` or ``"-inf"``."""
    x = value(kind, c)
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def value(kind: str, c: int) -> Any:
    """The value at grid coordinate ``c`` (for showing buckets): the int, the double, the
    8-byte string prefix, or the bool; ``None`` for lists.  ``coord(kind, value(kind, c))``
    is ``c`` for ints, floats and bools (strings: for prefixes that are whole characters).
    """
    if kind == "int":
        return c - _SIGN
    if kind == "float":
        bits = c ^ _SIGN if c & _SIGN else c ^ GRID_MAX
        x = float(_DOUBLE.unpack(_U64.pack(bits))[0])
        return x if x == x else (math.inf if c & _SIGN else -math.inf)  # NaN bits: beyond
    if kind == "string":
        return _U64.pack(c).rstrip(b"\0").decode("utf-8", errors="replace")
    if kind == "bool":
        return bool(c)
    return None


def atom_span(kind: str, atom: Atom) -> tuple[int, int]:
    """An atom on an attribute of type ``kind`` as one grid interval (the hull of its
    entries; the BE-Tree paper's Table 1), in u64; :data:`EMPTY` for an atom no defined
    value satisfies (``x > 2**63 - 1``).  Tests other than the bool ones span the grid.
    """
    if isinstance(atom, TestAtom):
        if atom.test == "bool_true":
            return 1, 1
        if atom.test == "bool_false":
            return 0, 0
    if not isinstance(atom, OrderAtom):
        return interval(kind, None, False, None, False)
    return entries_span(kind, atom.entries)


def entries_span(kind: str, entries: Sequence[Sequence[Any]]) -> tuple[int, int]:
    """:func:`atom_span` of an order atom given by its canonical ``(operator, constant)``
    entries (as its store key holds them: no atom object to build)."""
    if all(op == "=" for op, _ in entries):
        # "a = c" or "a in (…)": entries sort by constant and the grid is monotone,
        # so the hull is the first constant's interval to the last's.
        first, last = entries[0][1], entries[-1][1]
        if kind == "int" and type(first) is int and type(last) is int:  # (interval's, exactly)
            return coord(kind, first), coord(kind, last)
        return hull([interval(kind, first, True, last, True)])
    spans = []
    for op, c in entries:
        between = bounds(op, c)
        if between is None:  # "!=": not an interval, the whole line
            return interval(kind, None, False, None, False)
        lo, lo_incl, hi, hi_incl = between
        spans.append(interval(kind, lo, lo_incl, hi, hi_incl))
    return hull(spans)


#: atoms whose grid span :func:`clause_places` keeps in its cache (~200 bytes each); when
#: full, the older half is forgotten
SPANS_LIMIT = 1 << 19


def clause_places(
    clause: Iterable[Atom],
    types: Mapping[str, str],
    cache: dict[Atom, tuple[int, int] | tuple[()]],
) -> dict[str, tuple[int, int]]:
    """Per attribute a clause needs defined, the grid interval its atoms allow (its
    *places*, :mod:`betree.disk.tree`); ``types``: each attribute's kind (:func:`kind_of`).

    Cost: ~0.3 µs per atom whose span is in ``cache`` (by atom, bounded; ``()`` for the
    atom ``a is null``, which needs nothing) and found by identity (see
    :func:`betree.lang.forms.order_atoms`).
    """
    pairs = []
    for atom in clause:
        span = cache.get(atom)
        if span is None:
            if len(cache) > SPANS_LIMIT:
                forget_older_half(cache)
            span = cache[atom] = requirement(types[atom.attr], atom)
        pairs.append((atom.attr, span))
    return combined(pairs)


def requirement(kind: str, atom: Atom) -> tuple[int, int] | tuple[()]:
    """What ``atom`` (on an attribute of grid ``kind``) asks of its clause's places: its
    :func:`atom_span`, or ``()`` if it holds where the attribute is undefined."""
    return atom_span(kind, atom) if atom.requires_defined else ()


def combined(
    pairs: Iterable[tuple[str, tuple[int, int] | tuple[()]]],
) -> dict[str, tuple[int, int]]:
    """A clause's places from its atoms' ``(attribute, requirement)`` pairs
    (:func:`requirement`): the spans of an attribute intersected; if any attribute's
    comes out empty (the clause holds for no event), every empty one is the whole grid."""
    spans: dict[str, tuple[int, int]] = {}
    empty = False
    for attr, span in pairs:
        if not span:
            continue
        prev = spans.get(attr)
        if prev is not None:
            span = (max(span[0], prev[0]), min(span[1], prev[1]))
        spans[attr] = span
        empty = empty or span[0] > span[1]
    if not empty:
        return spans
    full = (0, GRID_MAX)
    return {attr: span if span[0] <= span[1] else full for attr, span in spans.items()}
