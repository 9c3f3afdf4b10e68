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
The rows are kept by slot too (the rows step gathers by slot).  After the keys come the
direct *runs*: each list attribute's ``any`` atoms and each geo grid's, held ones and
failing negations apart (:meth:`betree.matching.direct.DirectAtoms.runs`), so that the
rows over words their batch forms give (every atom of the run, held or not) are one slice
ORed into all the words at once (:func:`word_planes`; rich 100K, 1,024 events: ~1.2M of
~1.9M (word, atom) cells no longer ORed by fancy index a word at a time); the failing
negations' runs lead their attribute's run of defaults, and a run's atoms the keys placed
before it go by slot.

(:mod:`betree.packed.slots` numbers a keyed view the same way for one event at a time;
this one needs no keys, and numbers the rows.)  Cost: built once a view, one pass over
its lists and direct runs; 8 bytes a list item, 4 an atom and 32 a row (rich 100K:
~12 MB), 8 bytes a run's atom where the keys split the run (rich 100K: ~0.7 MB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from betree.matching.direct import DirectAtoms
from pbtree.view import SearchView


def number(
    searches: Mapping[str, SearchView],
    atoms: int,
    grouped: Mapping[str, DirectAtoms],
    keys: np.ndarray | None = None,
    placed_runs: dict[str, list[Run]] | None = None,
) -> tuple[np.ndarray, dict[str, list[Placed]], dict[str, int]]:
    """The numbering itself (also :class:`betree.packed.slots.Slots`'): the slot of each of
    ``atoms`` atoms (int64); by attribute, each of its GT, LT and NE lists as
    :data:`Placed`; by attribute, the first slot of its direct defaults where they are one
    run.  One pass over the lists.  ``keys`` (a keyed view's clause keys, atom ids
    ascending): those the lists and defaults leave numbered first of the rest, one run
    (rich 100K: 37K of 39K keys), so that their truths are one slice an event.  Then each
    direct group's runs (:meth:`betree.matching.direct.DirectAtoms.runs`: the atoms a list
    or geo index answers as rows over words, in the order it gives them), each one run
    of the atoms not placed before it (the keys stay one run; the failing defaults' runs
    lead their group's run of defaults), recorded in ``placed_runs`` as :data:`Run`."""
    slot = np.full(atoms, -1, dtype=np.int64)
    slot[0] = 0
    free = 1
    runs = {name: group.runs() for name, group in grouped.items()}
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
            # (the failing defaults' runs first, each in its order: a slice of the run)
            inner = [aids for aids, hit in runs[name] if not hit]
            if inner:
                first = np.concatenate(inner)
                if len(np.unique(first)) == len(first) and bool(np.isin(first, ids).all()):
                    ids = np.concatenate((first, ids[~np.isin(ids, first)]))
                    at = free
                    for aids in inner:
                        if placed_runs is not None:
                            placed_runs.setdefault(name, []).append((aids, False, at, None))
                        at += len(aids)
            slot[ids] = np.arange(free, free + len(ids))
            defaults[name] = free
            free += len(ids)
    if keys is not None:
        keys = keys[slot.take(keys) < 0]
        slot[keys] = np.arange(free, free + len(keys))
        free += len(keys)
    for name, each in runs.items():  # (after the keys: their run kept whole)
        for aids, hit in each:
            new = slot.take(aids) < 0
            placed = int(np.count_nonzero(new))
            if not placed:  # (placed before: within the defaults, or taken by others)
                continue
            slot[aids[new]] = np.arange(free, free + placed)
            if placed_runs is not None:
                inside = None if placed == len(aids) else new
                placed_runs.setdefault(name, []).append((aids, hit, free, inside))
            free += placed
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
#: one direct run numbered: its atom ids (in the order its rows come), whether held
#: (else failing defaults), the first slot of those it placed, and which it placed
#: (None: all of them)
Run = tuple[np.ndarray, bool, int, np.ndarray | None]


class Slice(NamedTuple):
    """Where a direct run's rows go (:meth:`Numbered.run`): its atoms' columns ``inside``
    (None: all of them) at the slots ``lo:hi``; the others' (``rest``: placed before it)
    by their slots."""

    lo: int
    hi: int
    inside: np.ndarray | None  # intp positions in the run
    rest: np.ndarray  # intp positions in the run


class Numbered:
    """The slot of each atom of a view (``slot``), its rows by slot, and where each list
    and each direct group's defaults sit."""

    __slots__ = ("defaults", "lists", "rows", "runs", "shared", "slot")

    def __init__(
        self,
        searches: Mapping[str, SearchView],
        atoms: int,
        grouped: Mapping[str, DirectAtoms],
        rows: np.ndarray,
        other: tuple[np.ndarray, np.ndarray] | None = None,
        keys: np.ndarray | None = None,
    ) -> None:
        placed: dict[str, list[Run]] = {}
        slot, lists, defaults = number(searches, atoms, grouped, keys, placed)
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
        #: attribute -> its direct runs: (atom ids, held, where their rows go)
        self.runs: dict[str, list[tuple[np.ndarray, bool, Slice]]] = {
            name: [(aids, hit, _slice(aids, lo, inn)) for aids, hit, lo, inn in each]
            for name, each in placed.items()
        }

    def items(self, attr: str, part: int, lo: int, hi: int) -> slice | np.ndarray:
        """The slots of items ``lo:hi`` of list ``part`` (0 GT, 1 LT, 2 NE) of ``attr``:
        a slice where consecutive."""
        first, slots = self.lists[attr][part]
        return slice(first + lo, first + hi) if first >= 0 else slots[lo:hi]

    def default(self, attr: str, ids: np.ndarray) -> slice | np.ndarray:
        """The slots of ``attr``'s direct defaults ``ids``: a slice where one run."""
        first = self.defaults.get(attr)
        return slice(first, first + len(ids)) if first is not None else self.slot.take(ids)

    def run(self, attr: str, aids: np.ndarray, hit: bool) -> Slice | None:
        """Where the rows of ``attr``'s direct atoms ``aids`` (held, or failing defaults:
        ``hit``) go, where they are one of its runs (the same atoms in the same order)."""
        for ids, on, where in self.runs.get(attr, ()):
            if on == hit and (ids is aids or np.array_equal(ids, aids)):
                return where
        return None

    @property
    def nbytes(self) -> int:
        """Memory of the permutation, the lists' slots, the direct runs' parts outside
        their slices and the rows (unless shared)."""
        lists = sum(s.nbytes for each in self.lists.values() for _, s in each)
        runs = sum(
            w.rest.nbytes + (0 if w.inside is None else w.inside.nbytes)
            for each in self.runs.values()
            for _, _, w in each
        )
        rows = 0 if self.shared else self.rows.nbytes
        return int(self.slot.nbytes + rows + lists + runs)


def _slice(aids: np.ndarray, lo: int, inside: np.ndarray | None) -> Slice:
    """A run's :class:`Slice` (``inside``: the atoms it placed from slot ``lo`` on)."""
    if inside is None:
        return Slice(lo, lo + len(aids), None, np.zeros(0, dtype=np.intp))
    rest = np.flatnonzero(~inside)
    return Slice(lo, lo + len(aids) - len(rest), np.flatnonzero(inside), rest)


#: whether :func:`word_planes` ORs a direct run's rows as one slice (off: by slot, as
#: a run of scattered slots; the tests force it)
RUNS = True
#: rows of bits into the truths' columns: (the words, the columns or a slice of them, the
#: rows: ``words x columns``)
Plane = tuple[np.ndarray, "np.ndarray | slice", np.ndarray]


def word_planes(
    numbered: Numbered | None,
    attr: str,
    words: np.ndarray,
    aids: np.ndarray,
    bits: np.ndarray,
    hit: bool,
    base: int,
) -> list[Plane]:
    """A direct kind's rows over ``words`` (``bits``, ``words x atoms``, of ``attr``'s atoms
    ``aids``, held or failing defaults: ``hit``) as planes of a batch's truths (columns
    from ``base``): where ``numbered`` made them a run, one slice (and the few atoms an
    earlier run or the keys placed, by slot); else the atoms held for some event, by slot
    or by id (rich 100K, 1,024 events: ~1.9M (word, atom) cells ORed a word at a time by
    fancy index, ~43 µs an event)."""
    out: list[Plane] = []
    run = None if numbered is None or not RUNS else numbered.run(attr, aids, hit)
    if run is not None:
        own = bits if run.inside is None else bits.take(run.inside, axis=1)
        out.append((words, slice(base + run.lo, base + run.hi), own))
        if not len(run.rest):
            return out
        aids, bits = aids.take(run.rest), bits.take(run.rest, axis=1)
    some = np.flatnonzero(bits.any(axis=0))
    if len(some):
        ids = aids.take(some)
        ids = ids + base if numbered is None else numbered.slot.take(ids) + base
        out.append((words, ids, np.ascontiguousarray(bits.take(some, axis=1))))
    return out
