"""A batch's phase 1 on every narrow int PB+tree at once (:mod:`betree.packed.flatbatch`).

BEGen-like stores define hundreds of int attributes a batch; searched one by one
(:func:`betree.packed.flatbatch.satisfied`), each costs ~25 numpy calls.  The narrow ones
(:attr:`pbtree.view.SearchView.narrow`: int64 keys less than 2**32 apart in each list) are
joined here into one sorted key array a list kind, so that a few dozen numpy calls search
them all (100K BEGen subscriptions, 250 attributes, 1,024 events: 5.9 against 15.5 µs an
event).  Cost: the joined arrays are made each batch, linear in the lists' items.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np

from pbtree.view import SearchView, ranges

_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))  # bit i of a word
#: one list kind's bits found for a batch: (cells of the flat ``words x atoms`` matrix,
#: the bits to OR into them, whether no atom repeats in the list)
Found = tuple[np.ndarray, np.ndarray, bool]


class _Joined(NamedTuple):
    """One list kind of several narrow PB+tree views (:attr:`SearchView.narrow`) as one:
    attribute k's keys shifted to ``k << 32`` plus their distance from one below its
    first, so that all ascend in one int64 array and one ``searchsorted`` finds where
    every attribute's values fall among its own keys."""

    keys: np.ndarray  # int64, ascending
    at: np.ndarray  # where each key's ids start in ``ids`` (and their end)
    ids: np.ndarray  # the atom ids end to end
    first: np.ndarray  # each attribute's first id position in ``ids`` (and their end)
    query: np.ndarray  # each run's value shifted as its attribute's keys

    @classmethod
    def of(cls, lists: list[Any], attr: np.ndarray, x: np.ndarray) -> _Joined:
        """``lists`` (each with ``ints``, ``at``, ``ids``: one an attribute) and the runs'
        attributes and values."""
        keys = [lst.ints for lst in lists]
        sizes = [len(k) for k in keys]
        below = np.array([int(k[0]) - 1 if len(k) else 0 for k in keys], dtype=np.int64)
        above = np.array([int(k[-1]) + 1 if len(k) else 0 for k in keys], dtype=np.int64)
        shift = (np.arange(len(keys), dtype=np.int64) << 32) - below
        joined = np.concatenate([np.empty(0, dtype=np.int64), *keys]) + np.repeat(shift, sizes)
        # (a value past the keys is clipped to one past them: it falls at the same place)
        query = np.clip(x, below[attr], above[attr]) + shift[attr]
        first = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum([len(lst.ids) for lst in lists], out=first[1:])
        at = np.concatenate([lst.at[:-1] for lst in lists] + [np.zeros(1, dtype=np.int64)])
        at += np.repeat(first, [*sizes, 1])
        ids = np.concatenate([np.empty(0, dtype=np.uint32), *(lst.ids for lst in lists)])
        return cls(joined, at, ids, first, query)

    def cuts(self, side: str) -> np.ndarray:
        """Each run's id position in ``ids`` (where a bisection of its own list's keys
        puts it)."""
        return self.at[np.searchsorted(self.keys, self.query, side=side)]  # type: ignore[call-overload]


class _EqList(NamedTuple):
    """A view's equality runs as a list (:meth:`_Joined.of` takes it)."""

    ints: np.ndarray
    at: np.ndarray
    ids: np.ndarray


def search_ints(
    found: list[tuple[SearchView, np.ndarray, np.ndarray]],
    atoms: int,
    words: int,
    lists: dict[str, list[Found]],
    slot: np.ndarray | None = None,
) -> None:
    """The batch's bits of every narrow view in ``found`` at once (each with its column's
    events' slots and values as int64; ``slot``: the atoms' numbering, if any): a few
    dozen numpy calls in all, where :func:`betree.packed.flatbatch.satisfied` takes
    about 25 an attribute (at 100K BEGen subscriptions, 250 attributes a batch of 1,024:
    5.9 µs an event against 15.5).

    A *run* is one value's events in one word and attribute, a *group* the runs of one word
    and attribute, in value order.  An event defines an attribute once, so a run's and a
    group's bits are sums of distinct bits, and a running sum over all runs (``uint64``,
    wrapping) gives every group's ORs by subtraction: a GreaterThan item between two runs'
    cuts holds for the later run and those past it (a suffix), a LessThan item for the
    earlier one and those before (a prefix), an Inequality item for the group less its own
    key's run, an equality item for its run."""
    x = np.concatenate([numbers for _, _, numbers in found])
    slots = np.concatenate([events for _, events, _ in found])
    attr = np.repeat(np.arange(len(found), dtype=np.int64), [len(v) for _, _, v in found])
    group = attr * words + (slots >> 6)
    order = np.lexsort((x, group))
    x, group = x[order], group[order]
    new = np.ones(len(x), dtype=bool)
    new[1:] = (group[1:] != group[:-1]) | (x[1:] != x[:-1])
    runs = np.flatnonzero(new)
    bits = np.add.reduceat(_BIT[slots[order] & 63], runs)  # (distinct bits: sum is OR)
    x, group = x[runs], group[runs]
    attr = group // words
    cell = (group - attr * words) * atoms  # each run's word, as its row of cells
    start = np.ones(len(group), dtype=bool)
    start[1:] = group[1:] != group[:-1]
    end = np.ones(len(group), dtype=bool)
    end[:-1] = start[1:]
    which = np.cumsum(start) - 1  # each run's group
    upto = np.cumsum(bits)  # (through each run; differences within a group exact)
    before = upto - bits
    last, base = upto[end][which], before[start][which]  # through / before the group
    total = last - base  # the group's events
    views = [view for view, _, _ in found]

    def by_slot(ids: np.ndarray) -> np.ndarray:  # (``slot``: the view's numbering)
        return ids if slot is None else slot.take(ids)

    def add(
        kind: str, ids: np.ndarray, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray, distinct: bool
    ) -> None:
        size = hi - lo
        cells = np.repeat(cell, size) + by_slot(ids[ranges(lo, hi)])
        lists.setdefault(kind, []).append((cells, np.repeat(rows, size), distinct))

    gt = _Joined.of([v.gt for v in views], attr, x)
    cut = gt.cuts("left")  # items from the previous run's cut to this one's hold for it
    lo = np.where(start, gt.first[attr], np.roll(cut, 1))
    add("gt", gt.ids, lo, cut, last - before, all(v.gt.distinct for v in views))
    lt = _Joined.of([v.lt for v in views], attr, x)
    cut = lt.cuts("right")  # items from this run's cut to the next one's hold for it
    hi = np.where(end, lt.first[attr + 1], np.roll(cut, -1))
    add("lt", lt.ids, cut, hi, upto - base, all(v.lt.distinct for v in views))
    eq = _Joined.of(
        [_EqList(cast(np.ndarray, v.eq_ints), v.eq_at, v.eq_ids) for v in views], attr, x
    )
    item = np.searchsorted(eq.keys, eq.query)
    hit = item < len(eq.keys)
    hit[hit] = eq.keys[item[hit]] == eq.query[hit]
    lo, hi = eq.at[np.where(hit, item, 0)], eq.at[np.where(hit, item + 1, 0)]
    add("eq", eq.ids, lo, hi, bits, all(v.eq_distinct for v in views))
    ne = _Joined.of([v.ne for v in views], attr, x)
    if not len(ne.ids):
        return
    # every item of the group's attribute holds for the group, but those of a run's key
    heads = np.flatnonzero(start)
    glo, ghi = ne.first[attr[heads]], ne.first[attr[heads] + 1]
    size = ghi - glo
    cells = np.repeat(cell[heads], size) + by_slot(ne.ids[ranges(glo, ghi)])
    rows = np.repeat(total[heads], size)
    j, k = ne.cuts("left"), ne.cuts("right")
    own = np.flatnonzero(j < k)
    if len(own):
        block = np.cumsum(size) - size  # each group's first item in ``rows``
        shift = block[which[own]] - ne.first[attr[own]]
        rows[ranges(j[own], k[own]) + np.repeat(shift, k[own] - j[own])] = np.repeat(
            total[own] - bits[own], k[own] - j[own]
        )
    lists.setdefault("ne", []).append((cells, rows, all(v.ne.distinct for v in views)))
