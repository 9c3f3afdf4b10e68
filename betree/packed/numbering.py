"""A batch's atom truths numbered list by list: a PB+tree list's bits as one slice.

A batch (:mod:`betree.packed.flatbatch`) keeps its truths as a ``words x atoms`` matrix.
By atom id, a PB+tree list's items (``words x items`` bits: suffix-ORs of GT, prefix-ORs
of LT) are ORed into scattered columns a word at a time, a gather and a scatter of every
item (rich 100K, 1,024 events: ~80 µs an event, mostly the latitude/longitude boxes of
geo rules and the ip ranges).  Numbered so that each list's atoms are consecutive
columns, the same bits are one slice a list; so are each attribute's direct defaults (the
negated atoms held unless found failing).  The numbering (a *slot* an atom) is a
permutation of the view's atom ids held beside the view, nothing on disk changes: the
lists' atoms first in list order, then each direct group's defaults as one run, then the
rest (atom 0, always true, keeps slot 0).  A list whose atoms an earlier list placed, or
that holds an atom twice, is read through its items' slots (a fancy OR, as by atom id).
The rows are kept by slot too (the rows step gathers by slot).

(:mod:`betree.packed.slots` numbers a keyed view the same way for one event at a time;
this one needs no keys, and numbers the rows.)  Cost: built once a view, one pass over
its lists; 8 bytes a list item, 4 an atom and 32 a row (rich 100K: ~12 MB).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from betree.matching.direct import DirectAtoms
from pbtree.view import SearchView


def number(
    searches: Mapping[str, SearchView],
    atoms: int,
    grouped: Mapping[str, DirectAtoms],
    keys: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, list[Placed]], dict[str, int]]:
    """The numbering itself (also :class:`betree.packed.slots.Slots`'): the slot of each of
    ``atoms`` atoms (int64); by attribute, each of its GT, LT and NE lists as
    :data:`Placed`; by attribute, the first slot of its direct defaults where they are one
    run.  One pass over the lists.  ``keys`` (a keyed view's clause keys, atom ids
    ascending): those the lists and defaults leave numbered first of the rest, one run
    (rich 100K: 37K of 39K keys), so that their truths are one slice an event."""
    slot = np.full(atoms, -1, dtype=np.int64)
    slot[0] = 0
    free = 1
    lists: dict[str, list[Placed]] = {}
    for name, search in searches.items():
        parts = lists[name] = []
        for part in (search.gt, search.lt, search.ne):
            ids = part.ids.astype(np.intp)
            new = slot.take(ids) < 0
            if not part.distinct:  # (an atom twice in the list: placed once)
                once = np.zeros(len(ids), dtype=bool)
                once[np.unique(ids, return_index=True)[1]] = True
                new &= once
            placed = int(np.count_nonzero(new))
            slot[ids[new]] = np.arange(free, free + placed)
            parts.append((free, ids, new))
            free += placed
    defaults: dict[str, int] = {}
    for name, group in grouped.items():
        ids = group.default.ids
        if len(ids) and bool((slot.take(ids) < 0).all()) and len(np.unique(ids)) == len(ids):
            slot[ids] = np.arange(free, free + len(ids))
            defaults[name] = free
            free += len(ids)
    if keys is not None:
        keys = keys[slot.take(keys) < 0]
        slot[keys] = np.arange(free, free + len(keys))
        free += len(keys)
    rest = np.flatnonzero(slot < 0)
    slot[rest] = np.arange(free, free + len(rest))
    return slot, lists, defaults


def rows_by_slot(
    slot: np.ndarray, rows: np.ndarray, other: tuple[np.ndarray, np.ndarray] | None
) -> np.ndarray:
    """``rows`` (atom ids) by ``slot``: ``other``'s copy (the view's other numbering, as
    its permutation and its rows by slot) where its permutation is ``slot``, so that the
    per-event :class:`betree.packed.slots.Slots` and the batch's :class:`Numbered` of one
    view hold one copy (rich 100K: 8.8 MB); else a new one."""
    if other is not None and other[0].dtype == slot.dtype and np.array_equal(other[0], slot):
        return other[1]
    return slot.take(rows)


#: one list numbered: the first slot of the atoms it placed, its items' atom ids, and
#: which items it placed (the others an earlier list placed, or repeat an item)
Placed = tuple[int, np.ndarray, np.ndarray]


class Numbered:
    """The slot of each atom of a view (``slot``), its rows by slot, and where each list
    and each direct group's defaults sit."""

    __slots__ = ("defaults", "lists", "rows", "shared", "slot")

    def __init__(
        self,
        searches: Mapping[str, SearchView],
        atoms: int,
        grouped: Mapping[str, DirectAtoms],
        rows: np.ndarray,
        other: tuple[np.ndarray, np.ndarray] | None = None,
        keys: np.ndarray | None = None,
    ) -> None:
        slot, lists, defaults = number(searches, atoms, grouped, keys)
        #: attribute -> per list (GT, LT, NE): its first slot when its items are
        #: consecutive slots from there, else -1; and each item's slot
        self.lists: dict[str, tuple[tuple[int, np.ndarray], ...]] = {
            name: tuple(
                (first if bool(new.all()) else -1, slot.take(ids)) for first, ids, new in parts
            )
            for name, parts in lists.items()
        }
        #: attribute -> the first slot of its direct group's defaults (one run)
        self.defaults: dict[str, int] = defaults
        dtype = np.int32 if atoms < 1 << 31 else np.int64
        self.slot: np.ndarray = slot.astype(dtype)
        #: the view's rows, each atom by its slot (``other``'s where the same: :func:`rows_by_slot`)
        self.rows: np.ndarray = rows_by_slot(self.slot, rows, other)
        self.shared = other is not None and self.rows is other[1]  # (counted there)

    def items(self, attr: str, part: int, lo: int, hi: int) -> slice | np.ndarray:
        """The slots of items ``lo:hi`` of list ``part`` (0 GT, 1 LT, 2 NE) of ``attr``:
        a slice where consecutive."""
        first, slots = self.lists[attr][part]
        return slice(first + lo, first + hi) if first >= 0 else slots[lo:hi]

    def default(self, attr: str, ids: np.ndarray) -> slice | np.ndarray:
        """The slots of ``attr``'s direct defaults ``ids``: a slice where one run."""
        first = self.defaults.get(attr)
        return slice(first, first + len(ids)) if first is not None else self.slot.take(ids)

    @property
    def nbytes(self) -> int:
        """Memory of the permutation, the lists' slots and the rows (unless shared)."""
        lists = sum(s.nbytes for each in self.lists.values() for _, s in each)
        rows = 0 if self.shared else self.rows.nbytes
        return int(self.slot.nbytes + rows + lists)
