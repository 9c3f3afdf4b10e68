"""The check's comparison of a PB+tree's entries with its attribute's atoms' entries.

Why its own module: the comparison is one subject of :mod:`betree.checking.check` (which
was at its 800-line limit), taken whole: both sides as ``(operator code, constant, atom
id)`` columns, sorted and compared with numpy when the constants are all int64 or all
strings (numbered first), else as sets of tuples, whose differences name the entries.
A float domain's constants (ints and floats, as its canonical atoms hold them) compare as
columns too: each a float flag and its value or float64 bits (:class:`pbtree.keys.Numbers`),
equal only when types and bits are, so that a difference (``-0.0`` against ``0``, say)
falls to the sets, which decide as before.

Cost: a sort of each side (by id alone when no id repeats), ~0.1 µs an entry; a set of
tuples, ~1 µs an entry, only for mixed constants or a fault.  Memory: one attribute's
entries, both sides, at a time.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from pbtree.keys import Numbers, int64_array, numbers
from pbtree.operators import OPERATORS


def joined(pieces: list[Any], dtype: Any) -> np.ndarray:
    none = np.zeros(0, dtype=dtype)
    return np.concatenate([none, *(np.asarray(p, dtype=dtype) for p in pieces)])


def _numbered(have: Any, want: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Two sides' constants (arrays or lists) as int64 numbers, a number a distinct string,
    when every one is a str (rich rules' PB+trees: their in-lists of strings), so that they
    compare as int64 constants do; else ``(None, None)``."""
    have = have.tolist() if isinstance(have, np.ndarray) else have
    want = want.tolist() if isinstance(want, np.ndarray) else want
    if not (_STR.issuperset(map(type, have)) and _STR.issuperset(map(type, want))):
        return None, None
    # (numbered in order of first appearance, ``have``'s then ``want``'s: the distinct
    # strings found by ``dict.fromkeys``, each entry looked up by ``map``, no Python step
    # an entry: rich 100K's ~1.5M entries, ~0.45 -> ~0.1 s)
    number = {c: k for k, c in enumerate(dict.fromkeys(chain(have, want)))}
    at = number.__getitem__
    mine = np.fromiter(map(at, have), dtype=np.int64, count=len(have))
    theirs = np.fromiter(map(at, want), dtype=np.int64, count=len(want))
    return mine, theirs


_STR = frozenset((str,))


def _entry_orders(*sides: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orders of two sides' ``(ids, codes, constants)`` entries under which equal multisets
    are equal arrays: by id alone when no id repeats on either side (one comparison atom an
    id: a dense store's every tree, ~3x faster than three keys), else by all three."""
    ids, codes, consts, tids, tcodes, tconsts = sides
    h, w = np.argsort(ids, kind="stable"), np.argsort(tids, kind="stable")
    mine, theirs = ids[h], tids[w]
    if bool(np.all(mine[1:] != mine[:-1])) and bool(np.all(theirs[1:] != theirs[:-1])):
        return h, w
    return np.lexsort((ids, codes, consts)), np.lexsort((tids, tcodes, tconsts))


def _as_numbers(consts: np.ndarray | Numbers) -> Numbers:
    return consts if isinstance(consts, Numbers) else Numbers.of_ints(consts)


def _is_column(consts: Any) -> bool:
    return isinstance(consts, (np.ndarray, Numbers))


def _same(have: tuple[np.ndarray, np.ndarray, np.ndarray], want: tuple[Any, Any, Any]) -> bool:
    """Whether two sides' ``(codes, constants, ids)`` entries (as many on each side) are
    the same multiset, by numpy: constants all int64, all strings (numbered) or all
    numbers (:class:`~pbtree.keys.Numbers`: an entry's float flag joins its operator
    code).  False when they differ or cannot be compared so (the caller decides, by sets)."""
    codes, consts, ids = have
    tcodes, wconsts, tids = want
    mine = consts if consts.dtype == np.int64 else int64_array(consts.tolist())
    theirs = wconsts if isinstance(wconsts, np.ndarray) else None
    if isinstance(wconsts, list):
        theirs = int64_array(wconsts)
    if mine is None or theirs is None:
        mine_n = numbers(consts.tolist()) if mine is None else Numbers.of_ints(mine)
        theirs_n = wconsts if isinstance(wconsts, Numbers) else None
        if theirs_n is None and theirs is not None:
            theirs_n = Numbers.of_ints(theirs)
        elif theirs_n is None:
            theirs_n = numbers(wconsts)
        if mine_n is not None and theirs_n is not None:
            mine, theirs = mine_n.bits, theirs_n.bits
            codes = codes.astype(np.int64) * 2 + mine_n.is_float
            tcodes = tcodes.astype(np.int64) * 2 + theirs_n.is_float
        else:
            mine, theirs = _numbered(consts, wconsts)
    if mine is None or theirs is None:
        return False
    h, w = _entry_orders(ids, codes, mine, tids, tcodes, theirs)
    return (
        np.array_equal(mine[h], theirs[w])
        and np.array_equal(codes[h], tcodes[w])
        and np.array_equal(ids[h], tids[w])
    )


def check_predicates(
    name: str,
    have: tuple[np.ndarray, np.ndarray, np.ndarray],
    want: tuple[list[Any], list[Any], list[Any]] | None,
    errors: list[str],
) -> None:
    """The ``(operator, constant, id)`` entries of PB+tree ``name`` (columns, as
    :meth:`PBTree.predicate_columns`) are those of its attribute's order atoms (``want``:
    per column a list of pieces, arrays or lists), each once.  Compared sorted with numpy
    when every constant is an int64 (~0.1 µs an entry, a set of tuples ~1 µs), every one
    a string (numbered first: :func:`_numbered`) or every one a number of a float domain
    (as :class:`~pbtree.keys.Numbers`, floatcheck47), else as sets; the difference is
    listed as sets."""
    codes, consts, ids = have
    pieces = want if want is not None else ([], [], [])
    tcodes, tids = joined(pieces[0], np.int8), joined(pieces[2], np.int64)
    if len(ids) == len(tids) == 0:
        return
    wconsts: Any
    if all(isinstance(p, np.ndarray) and p.dtype == np.int64 for p in pieces[1]):
        wconsts = joined(pieces[1], np.int64)
    elif all(isinstance(p, (np.ndarray, Numbers)) for p in pieces[1]):  # (a float domain's)
        wconsts = Numbers.joined([_as_numbers(p) for p in pieces[1]])
    else:
        wconsts = list(chain.from_iterable(p.tolist() if _is_column(p) else p for p in pieces[1]))
    if len(ids) == len(tids) and _same(have, (tcodes, wconsts, tids)):
        return
    if isinstance(wconsts, (np.ndarray, Numbers)):
        wconsts = wconsts.tolist()
    held = list(
        zip(map(OPERATORS.__getitem__, codes.tolist()), consts.tolist(), ids.tolist(), strict=True)
    )
    needed = [
        (OPERATORS[c] if c >= 0 else "?", k, a)
        for c, k, a in zip(tcodes.tolist(), wconsts, tids.tolist(), strict=True)
    ]
    have_set, want_set = set(held), set(needed)
    if have_set == want_set:
        if len(held) != len(have_set):
            errors.append(f"PB+tree {name!r} holds {len(held) - len(have_set)} entries twice")
        return
    for op, const, aid in sorted(want_set - have_set, key=repr)[:20]:
        errors.append(f"PB+tree {name!r} lacks atom {aid}'s entry {op} {const!r}")
    for op, const, aid in sorted(have_set - want_set, key=repr)[:20]:
        errors.append(f"PB+tree {name!r} holds {op} {const!r} for atom {aid}, no atom has it")
