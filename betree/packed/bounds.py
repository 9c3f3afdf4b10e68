"""Each one-sided order atom of a PB+tree as an exact interval of grid coordinates.

The interval matcher (:mod:`betree.packed.intervals`) tests a clause's order atoms on an int or
float attribute as one interval ``[lo, hi]`` of :mod:`betree.disk.grid` coordinates.  The
grid's own spans (:func:`betree.disk.grid.atom_span`) only *enclose* an atom (a float bound stays
inclusive, a huge float bound on an int attribute is clamped); here every bound is exact,
so that ``lo <= coord(x) <= hi`` holds exactly when the atom does:

* an int attribute: a bound becomes the least (greatest) int64 it admits, ``x > 2.5`` is
  ``x >= 3``, ``x > 2**63 - 1`` and ``x >= 1e300`` admit nothing (an empty interval);
* a float attribute: coordinates are the order-preserving bits of doubles (``-0.0`` is
  ``0.0``), so an exclusive bound is one coordinate further in; an int constant no double
  equals is moved to the nearest double inside (``f >= 2**53 + 1`` is ``f >= 2**53 + 2``);
  event values are floats (the schema converts them).

Atoms are read from the PB+tree itself (its :class:`pbtree.view.SearchView`, which a packed
view holds anyway), not from the catalog (10 µs an atom to decode): an atom id appearing
once in the GreaterThan lists is ``>`` or, when the leaf of its key holds it too, ``>=``;
once in the LessThan lists ``<`` or ``<=``; only once under one leaf key, ``=``.  Any other
atom (``!=``, ``in``, several entries) is not an interval here.

Cost: a few numpy passes over the ids of the lists, and one Python step per key whose
keys are not all int64 (a float attribute's).  Memory: two u64 per atom id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from betree.disk.grid import float_coord
from pbtree.view import SearchView

_SIGN = 1 << 63
_TOP = (1 << 64) - 1
#: the interval that admits nothing
EMPTY = (_TOP, 0)


def lower(kind: str, key: Any, inclusive: bool) -> int | None:
    """The least coordinate of ``x > key`` (``>=`` when ``inclusive``), or None: none."""
    if kind == "int":
        if isinstance(key, float):
            if math.isinf(key):
                return 0 if key < 0 else None
            least = math.ceil(key) if inclusive else math.floor(key) + 1
        else:
            least = key if inclusive else key + 1
        return None if least >= _SIGN else max(least, -_SIGN) + _SIGN
    d = float(key)
    if isinstance(key, int) and d != key:  # no double equals it: the next one above
        if d < key:
            d = math.nextafter(d, math.inf)
        inclusive = True
    c = float_coord(d)
    return c if inclusive else c + 1


def upper(kind: str, key: Any, inclusive: bool) -> int | None:
    """The greatest coordinate of ``x < key`` (``<=`` when ``inclusive``), or None."""
    if kind == "int":
        if isinstance(key, float):
            if math.isinf(key):
                return _TOP if key > 0 else None
            most = math.floor(key) if inclusive else math.ceil(key) - 1
        else:
            most = key if inclusive else key - 1
        return None if most < -_SIGN else min(most, _SIGN - 1) + _SIGN
    d = float(key)
    if isinstance(key, int) and d != key:
        if d > key:
            d = math.nextafter(d, -math.inf)
        inclusive = True
    c = float_coord(d)
    return c if inclusive else c - 1


def event_coords(kind: str, values: np.ndarray | list[Any]) -> np.ndarray:
    """Validated event values of one int or float attribute as u64 coordinates."""
    if kind == "int":
        ints = np.asarray(values, dtype=np.int64)
        return ints.view(np.uint64) ^ np.uint64(_SIGN)
    bits = (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)  # -0.0 -> 0.0
    return np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(_SIGN))


def _counts(at: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(at, minlength=size)


def _key_index(at: np.ndarray) -> np.ndarray:
    """Per id of a list, the index of its key (``at``: where each key's ids start)."""
    return np.repeat(np.arange(len(at) - 1, dtype=np.int64), np.diff(at))


def atom_intervals(
    search: SearchView, kind: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The atom ids of this tree that are one interval each, with their ``lo`` and ``hi``
    coordinates (``lo > hi``: an atom that admits no value); and whether the tree holds
    atoms that are not intervals.  Memory: a few arrays over the tree's own atoms."""
    none_found = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    if search.domain != "num":
        return none_found[0], none_found[1], none_found[1], search.domain is not None
    gt, lt, ne = search.gt, search.lt, search.ne
    eq_keys = list(search.eq)
    if search.eq_ints is not None:  # (the runs end to end, in the keys' order)
        eq_ids, eq_key = search.eq_ids, _key_index(search.eq_at)
    else:
        eq_ids = np.concatenate([np.empty(0, dtype=np.uint32), *search.eq.values()])
        sizes = [len(v) for v in search.eq.values()]
        eq_key = np.repeat(np.arange(len(eq_keys), dtype=np.int64), sizes)
    # the tree's atoms numbered 0.. (``local``: their ids ascending; one sort, each list's
    # ids numbered by it: ``parts``)
    local, number = np.unique(np.concatenate([gt.ids, lt.ids, ne.ids, eq_ids]), return_inverse=True)
    size = len(local)
    cuts = np.cumsum([len(gt.ids), len(lt.ids), len(ne.ids)])
    parts = dict(
        zip(("gt", "lt", "ne", "eq"), np.split(number.astype(np.int64), cuts), strict=True)
    )

    simple = np.zeros(size, dtype=bool)
    lo = np.zeros(size, dtype=np.uint64)
    hi = np.full(size, _TOP, dtype=np.uint64)
    n_gt, n_lt = _counts(parts["gt"], size), _counts(parts["lt"], size)
    n_ne, n_eq = _counts(parts["ne"], size), _counts(parts["eq"], size)
    once = (n_gt + n_lt <= 1) & (n_eq <= 1) & (n_ne == 0)
    # the leaf key each atom sits under (-1: none)
    under = np.full(size, -1, dtype=np.int64)
    under[parts["eq"]] = eq_key
    ints_only = search.eq_ints is not None and gt.ints is not None and lt.ints is not None
    where = {} if ints_only else {key: k for k, key in enumerate(eq_keys)}
    for lst, part, is_lower in ((gt, "gt", True), (lt, "lt", False)):
        ids = parts[part]
        keep = once[ids]
        ids = ids[keep]
        item = _key_index(lst.at)[keep]
        same = _leaf_index(lst.ints, search.eq_ints, lst.keys, where)
        inclusive = under[ids] == same[item]
        plain = inclusive | (under[ids] < 0)  # (under another key: "= c or > d", not one)
        ids, item, inclusive = ids[plain], item[plain], inclusive[plain]
        c, none = _bounds(kind, lst.keys, lst.ints, item, inclusive, is_lower)
        (lo if is_lower else hi)[ids] = c
        lo[ids[none]], hi[ids[none]] = EMPTY
        simple[ids] = True
    ids = np.flatnonzero(once & (n_eq == 1) & (n_gt == 0) & (n_lt == 0))
    if len(ids):  # "= c": both bounds at c
        keys = under[ids]
        ints = search.eq_ints
        ones = np.ones(len(ids), dtype=bool)
        clo, nlo = _bounds(kind, eq_keys, _ints(ints, eq_keys), keys, ones, True)
        chi, nhi = _bounds(kind, eq_keys, _ints(ints, eq_keys), keys, ones, False)
        lo[ids], hi[ids] = clo, chi
        none = ids[nlo | nhi]
        lo[none], hi[none] = EMPTY
        simple[ids] = True
    return local[simple].astype(np.int64), lo[simple], hi[simple], not simple.all()


def _leaf_index(
    ints: np.ndarray | None, leaf: np.ndarray | None, keys: Sequence[Any], where: dict[Any, int]
) -> np.ndarray:
    """Per key of a list, the index of the same key among the leaf keys (-2: none): one
    ``searchsorted`` when both are int64, else a dict lookup a key."""
    if ints is None or leaf is None:
        return np.array([where.get(key, -2) for key in keys], dtype=np.int64)
    at = np.searchsorted(leaf, ints)
    found = at < len(leaf)
    found[found] = leaf[at[found]] == ints[found]
    return np.where(found, at, -2).astype(np.int64)


def _ints(ints: np.ndarray | None, keys: list[Any]) -> np.ndarray | None:
    """The leaf keys as int64 in the dict's order (the dict follows ``eq_ints``' order
    when every key is an int64), or None."""
    return ints if ints is not None and len(ints) == len(keys) else None


def _bounds(
    kind: str,
    keys: Sequence[Any],
    ints: np.ndarray | None,
    item: np.ndarray,
    inclusive: np.ndarray,
    is_lower: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Per entry (its key ``keys[item]``, whether ``inclusive``), the coordinate of its
    bound (:func:`lower` or :func:`upper`) as u64, and whether it admits nothing: in numpy
    for the int64 keys of an int attribute, else one Python step per entry."""
    if kind == "int" and ints is not None:
        k = ints[item]
        strict = ~inclusive
        none = strict & (k == (np.int64(_SIGN - 1) if is_lower else np.int64(-_SIGN)))
        c = k.view(np.uint64) ^ np.uint64(_SIGN)
        step = (strict & ~none).astype(np.uint64)
        return (c + step if is_lower else c - step), none
    found, none_list = [], []
    bound = lower if is_lower else upper
    for i, inc in zip(item.tolist(), inclusive.tolist(), strict=True):
        c = bound(kind, keys[i], inc)
        none_list.append(c is None)
        found.append(0 if c is None else c)
    return np.array(found, dtype=np.uint64), np.array(none_list, dtype=bool)
