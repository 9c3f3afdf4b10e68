"""A word's live rows made its held subscriptions over every clause of a view (a batch's
rows step, :func:`betree.packed.flatbatch._rows`, where a word's live rows are many).

Why: on rich rules nearly every row is reached from every word of a batch, and ~70% of
them are live after their key: per word ~116K of 272K rows at rich 100K (seed 7), ~45K
held clauses, ~70K (clause, event) pairs.  Over the held rows alone, a clause's rows are
ANDed by a ``reduceat`` after a search for where each clause starts, and each
subscription with several clauses is kept once an event by sorting the (event,
subscription) pairs (~110 µs an event there).  Here the live rows' bits are placed in a
zeroed row of all the view's rows, each clause is the AND of its rows and each
subscription the OR of its clauses, both by *layers* made once a view: the groups
ordered by their members, most first, layer 0 a gather of each group's first member,
layer k an AND (OR) of the k-th member of the groups that have one, a prefix of them
(one AND into a slice a layer, no gather and scatter of the groups it reaches; ``reduceat``
over 200K short segments costs ~10 ns a segment, a layer a few ns an element).  The
subscriptions' bits are then placed back in subscription order (one scatter) and come
out each once, in that order, with no sort.

Cost: per word, a few passes over the view's rows and clauses (fixed, however few
rows live: the caller takes this path from :data:`betree.packed.flatbatch.DENSE_ROWS`
of them); per view, the layers (three stable sorts: ~30 ms at rich 100K, ~35 bytes a
clause with the groups' orders; ~21 ms and ~26 bytes as gathered layers), kept for the
last :data:`KEPT` views' arrays.
"""

from __future__ import annotations

import threading

import numpy as np

from betree.packed.flat import FlatTree

#: the views whose layers are kept (by their ``row_at`` array's identity)
KEPT = 8

#: (the groups' order, by their members, most first; layer 0 each group's first member in
#: that order; per layer k >= 1 the k-th members of the first groups, those with more
#: than k members)
Layers = tuple[np.ndarray, np.ndarray, list[np.ndarray]]
#: a view's subscriptions' layers over its clauses' (the members: positions in the
#: clauses' reduced order), and each subscription's first clause in subscription order
Subs = tuple[Layers, np.ndarray]
_KEPT: dict[int, tuple[np.ndarray, Layers | None, Subs | None]] = {}
_KEPT_LOCK = threading.Lock()  # (shards may be matched in threads)


def layers(starts: np.ndarray, n: int) -> Layers:
    """The layers of consecutive groups of ``n`` members starting at ``starts`` (each
    group non-empty, ascending): the groups by their members, most first (ascending among
    equals), layer 0 each one's first member, layer k the k-th members of those with more
    than k (the first of them)."""
    sizes = np.diff(np.append(starts, n))
    order = np.argsort(-sizes, kind="stable")
    first = starts.take(order)
    rest = [first[: int((sizes > k).sum())] + k for k in range(1, int(sizes.max(initial=1)))]
    return order, first, rest


def reduce(bits: np.ndarray, by: Layers, ored: bool) -> np.ndarray:
    """Each group's members' bits ORed (``ored``) or ANDed, by ``by``'s layers: the
    groups in its order (group ``by[0][j]`` at ``j``)."""
    _, first, rest = by
    out = bits.take(first)
    for members in rest:
        if ored:
            out[: len(members)] |= bits.take(members)
        else:
            out[: len(members)] &= bits.take(members)
    return out


def _layers(view: FlatTree) -> tuple[Layers | None, Subs | None]:
    """``view``'s rows by clause (None where every clause has one row), and its clauses
    by subscription (None where none has several), their members the clauses' positions
    in the rows' layers' order; made once, the last :data:`KEPT` kept."""
    got = _KEPT.get(id(view.row_at))
    if got is not None and got[0] is view.row_at:
        return got[1], got[2]
    rows = None
    if view.row_clause is not None:
        rows = layers(view.row_at[:-1].astype(np.int64), len(view.rows))
    subs = None
    if view.sids is not None:
        order = np.argsort(view.sids, kind="stable")
        ordered = view.sids[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        by, first, rest = layers(starts, len(order))
        at = order  # (each clause's position where the rows' layers reduced them)
        if rows is not None:
            at = np.empty_like(rows[0])
            at[rows[0]] = np.arange(len(rows[0]))
            at = at.take(order)
        subs = ((by, at.take(first), [at.take(m) for m in rest]), order.take(starts))
    with _KEPT_LOCK:
        while len(_KEPT) >= KEPT:
            del _KEPT[next(iter(_KEPT))]
        _KEPT[id(view.row_at)] = (view.row_at, rows, subs)
    return rows, subs


def held(
    view: FlatTree, rows: np.ndarray, mask: np.ndarray, gone: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """From a word's live ``rows`` of ``view`` (ascending, each once) and their bits
    ``mask`` (its removed clauses ``gone``): the clauses held for some event of the word,
    one a subscription (its first clause, in subscription order; all of them where no
    subscription has several), and their bits (the subscription's: the OR of its
    clauses')."""
    bits = np.zeros(len(view.rows), dtype=np.uint64)
    bits[rows] = mask
    by_row, by_sub = _layers(view)
    if by_row is not None:
        bits = reduce(bits, by_row, False)  # (the clauses in the layers' order)
        if gone is not None:
            bits[gone.take(by_row[0])] = 0
    elif gone is not None:
        bits[gone] = 0
    if by_sub is None:
        if by_row is not None:  # (back in clause order)
            reduced, bits = bits, np.zeros(len(bits), dtype=np.uint64)
            bits[by_row[0]] = reduced
        clause = np.flatnonzero(bits != 0)
        return clause, bits[clause]
    by, firsts = by_sub
    reduced, bits = reduce(bits, by, True), np.zeros(len(firsts), dtype=np.uint64)
    bits[by[0]] = reduced  # (back in subscription order)
    some = np.flatnonzero(bits != 0)  # (over bools: ~6x faster than over uint64)
    return firsts.take(some), bits[some]
