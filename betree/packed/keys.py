"""Each clause's key atoms of a packed view (:class:`betree.packed.flat.FlatTree`), chosen
from how often each atom held: the atom that held least, tested first, and the next least.

Pure functions of the view's rows, so that a view learns its keys over its first events
(:meth:`betree.packed.flat.FlatTree.learn`) and a view that replaces it (a fold) chooses
them at once from the counts it learnt (:mod:`betree.packed.carry`).  Any key is one of its
clause's atoms (padding, atom 0, only for a clause with no other), which is all the keyed
match needs to be exact.  Cost: a few numpy passes over the rows (rich 50K, 137K rows:
~17 ms).
"""

from __future__ import annotations

import numpy as np


def choose(
    rows: np.ndarray, row_at: np.ndarray, row_clause: np.ndarray | None, held: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each clause's key and second key (atom ids, ``rows``' dtype): its atom of the least
    ``held`` count (per atom id; the padding atom 0 must count more than any other), then
    its next least (padding if none).  ``row_at``: each clause's first row; ``row_clause``:
    each row's clause (None: one row a clause)."""
    # per row, then per clause, the least (count, atom) as one int64
    wide = rows.astype(np.int64)
    counted = held.take(wide).astype(np.int64) << 32 | wide
    key = _least(counted, row_at, rows.dtype)
    mine = key if row_clause is None else key.take(row_clause)  # by row
    counted[rows == mine[:, None]] = 1 << 62  # the key left out: the next least
    return key, _least(counted, row_at, rows.dtype)


def _least(counted: np.ndarray, row_at: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Per clause, the atom of the least ``count << 32 | atom`` of its rows (atom 0 for a
    clause of no row)."""
    best = counted.min(axis=1, initial=1 << 62)
    per = np.diff(row_at.astype(np.int64))
    least = np.zeros(len(per), dtype=np.int64)
    some = per > 0
    if len(best):
        least[some] = np.minimum.reduceat(best, row_at[:-1][some].astype(np.int64))
    return (least & 0xFFFFFFFF).astype(dtype)
