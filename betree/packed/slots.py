"""One event's atom truths on a held view numbered list by list: PB+tree truths as slices.

What holds for a value in a PB+tree is a prefix of its GT list, a suffix of its LT list
and its NE list less one key's run (:meth:`pbtree.view.SearchView.spans`): on rich 100K
~106K atom ids an event (mostly the latitude/longitude boxes of geo rules and ip ranges),
collected and set one by one in a boolean array by atom id.  Numbered so that each list's
atoms are consecutive, the same truths are a few slices set at once (measured, rich 100K,
process CPU: 280 -> 190 µs an event; the defaults' 20K, 70 -> 50 µs; the whole match
1,100 -> 950).  The numbering (a *slot* an atom) is a permutation of the base view's atom
ids held beside the view, nothing on disk changes: the lists' atoms first, in list order,
then each direct group's defaults (the negated atoms that hold unless found failing: one
slice an attribute), then the keys not placed yet (one run: their truths one slice,
:meth:`Slots.clauses`), then the others ascending (atom 0, always true, keeps slot 0).  An
atom that an earlier list placed, or that its list holds twice (``a < 3 or a > 9`` sits
in GT and LT; rich 100K: 7% of the ip LT list), is set by its slot as well (the few of
the slice); so are the leaf runs equal to the value (kept by slot too: 4 bytes an id)
and the other direct atoms (through the permutation).  The numbering is
:func:`betree.packed.numbering.number`'s, the batches' too.  The keyed match reads the
keys and the candidate rows through it (:meth:`betree.packed.flat.FlatTree.match_slotted`;
the rows copied by slot).  The candidates (key and second key held: rich 100K, ~2,700 an
event, ~900 of them whole) are kept in key order and tested row by row (:meth:`Slots.held`):
every candidate's first row, the second rows of those left (a single-row clause's first
again), then the few longer clauses' other rows; no sort of the candidates and no ranges
of their rows, and the hits sorted by subscription alone (measured, rich 100K, captured
truths, load ~5: the keyed match ~536 -> ~450 µs an event).  Cost: 4 bytes an atom and a
list item, 4 more an atom placed before, a copy of the keys, their clauses and second
keys (~12 bytes a clause), each clause's first and second row in key order (8 bytes a
clause, 1-2 more for which are longer) and of the rows (32 bytes a row: rich 100K,
8.8 MB); built in one pass over the lists once the view's keys are settled.

The direct groups' answers (:meth:`betree.matching.direct.DirectAtoms.found`: the held
atoms and failing defaults of an attribute's value) are kept by value, by slot, in a
bounded :class:`Memo` an attribute: an event whose value (and ``now``, or the longitude,
where the group reads them) was seen lately sets them with no index asked and no gather
through the permutation (rich 100K and 20K, the generator's events: ~67% of the ~8.5
asks an event answered so).  Cost: at most :data:`MEMO_IDS` slots an attribute (1 MB);
a value not seen costs its key and one copy of its answer.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from betree.matching.direct import DirectAtoms, counting_now, found
from betree.matching.directkinds import joined
from betree.matching.pages import SCALAR
from betree.packed.numbering import number, rows_by_slot
from pbtree.keys import key_domain
from pbtree.view import IntKeys, Runs, SearchView, ranges

#: the fewest consecutive keys read as one slice (fewer: gathered with the others)
KEY_RUN = 64
#: a row's 8 truths, read as one uint64, when all hold
ALL = np.uint64(0x0101010101010101)
#: the most slots a direct group's :class:`Memo` keeps (0: no memo), and the most values
MEMO_IDS = 1 << 18
MEMO_MOST = 1024
#: a memo finding under one in MEMO_POOR asks of a window of MEMO_WINDOW kept sits out
#: the next MEMO_REST asks (an attribute whose values do not repeat)
MEMO_WINDOW, MEMO_POOR, MEMO_REST = 256, 8, 2048


class Slots:
    """The slot of each atom of a base view (``slot``); by attribute, each of its
    PB+tree's three lists as a :data:`Part`; and the view's keys by slot."""

    __slots__ = (
        "by_key",
        "defaults",
        "direct",
        "empty",
        "equal",
        "first_row",
        "grouped",
        "keys",
        "lists",
        "long",
        "next_row",
        "plans",
        "row_at",
        "rows",
        "run",
        "shared",
        "slot",
    )

    def __init__(
        self,
        searches: Mapping[str, SearchView],
        atoms: int,
        by_key: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        grouped: Mapping[str, DirectAtoms],
        rows: np.ndarray,
        row_at: np.ndarray,
        other: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        #: the keys numbered first of the rest (atom ids; none where a batch's numbering was
        #: there first: its permutation kept, its rows shared)
        self.keys = by_key[0] if other is None else None
        slot, lists, defaults = number(searches, atoms, grouped, self.keys)
        #: attribute -> its GT, LT and NE lists
        self.lists: dict[str, tuple[Part, ...]] = {}
        for name, placed in lists.items():
            parts = []
            for first, ids, new in placed:
                at = np.zeros(len(ids) + 1, dtype=np.int32)
                np.cumsum(new, out=at[1:])
                parts.append((first, at, slot.take(ids[~new])))
            self.lists[name] = tuple(parts)
        #: attribute -> its direct group's default ids and their first slot
        self.defaults: dict[str, tuple[np.ndarray, int]] = {
            name: (grouped[name].default.ids, first) for name, first in defaults.items()
        }
        self.slot = slot.astype(np.int32) if atoms < 1 << 31 else slot
        #: the direct groups of :meth:`truths` (``grouped``, the mapping they were read from),
        #: each as :data:`Direct`: one loop an event, the defaults' and the undefined
        #: atoms' slots ready
        self.grouped = grouped
        self.direct: list[Direct] = []
        for name, group in grouped.items():
            n, first = len(group.default), defaults.get(name, -1)
            runs = group.default.ids if n and first < 0 else None
            undefined = self.slot.take(group.undefined) if group.undefined else None
            memo = Memo(group.reads) if group.busy and group.reads is not None else None
            self.direct.append((name, group, first, n, runs, undefined, memo))
        #: attribute -> its leaf runs by key (:attr:`pbtree.view.SearchView.eq`) by slot:
        #: an event's equal runs set with no gather through :attr:`slot` (rich 100K: ~2,100
        #: ids an event, the os, country and category runs)
        self.equal: dict[str, Mapping[Any, np.ndarray]] = {
            name: _by_slot(search.eq, self.slot) for name, search in searches.items()
        }
        #: attribute -> its search and its non-empty lists' cuts as :data:`Plan` (trees
        #: with :class:`pbtree.view.IntKeys` lists are searched through ``spans``)
        self.plans: dict[str, tuple[SearchView, list[Plan]]] = {
            name: (search, _plan(search, self.lists[name]))
            for name, search in searches.items()
            if search.domain is not None
            and not any(type(p.keys) is IntKeys for p in (search.gt, search.lt, search.ne))
        }
        #: the view's rows (:attr:`betree.packed.flat.FlatTree.rows`) by slot: the keyed
        #: match's candidate rows read with no gather through :attr:`slot` (rich 100K,
        #: ~520 rows an event: that gather, ~4K atoms at random in 1.7 MB, measured 38 µs
        #: of ~300 alone; ``other``'s where the same: :func:`betree.packed.numbering.rows_by_slot`)
        self.rows = rows_by_slot(self.slot, rows, other)
        self.shared = other is not None and self.rows is other[1]  # (counted there)
        keys, at, order, second = by_key
        by_slot = np.argsort(self.slot.take(keys), kind="stable")
        moved = ranges(at.take(by_slot), at.take(by_slot + 1))
        starts = np.zeros(len(at), dtype=at.dtype)
        np.cumsum(np.diff(at).take(by_slot), out=starts[1:])
        #: :attr:`betree.packed.flat.FlatTree.by_key` with its keys by slot, ascending
        #: (their truths then read in one forward pass)
        self.by_key = (
            self.slot.take(keys.take(by_slot)).astype(np.intp),
            starts,
            order.take(moved),
            self.slot.take(second.take(moved)),
        )
        #: the keys' (by slot) last consecutive run, at least :data:`KEY_RUN` long, as
        #: (its first key's position, its first slot, its end): its truths a slice
        by_slot = self.by_key[0]
        breaks = np.flatnonzero(np.diff(by_slot) != 1)
        m = int(breaks[-1]) + 1 if len(breaks) else 0
        if len(by_slot) - m < KEY_RUN:
            m = len(by_slot)
        lo = int(by_slot[m]) if m < len(by_slot) else 0
        self.run = (m, lo, lo + len(by_slot) - m)
        #: each clause's rows, the clauses in key order (``by_key[2]``'s): its first row
        #: and its second (its first again where it has one), as positions in
        #: :attr:`rows`; where some clause has more than two rows or none, which (else
        #: None); and the view's row starts by clause (``row_at``), for those
        self.row_at = row_at
        self.first_row, self.next_row, self.long, self.empty = _rows_by_key(row_at, self.by_key[2])

    @property
    def nbytes(self) -> int:
        """Memory of the permutation, the rows, the lists' parts, the keys' copies, the
        clauses' rows in key order and the undefined atoms' slots."""
        parts = [a for each in self.lists.values() for part in each for a in part[1:]]
        keys = sum(a.nbytes for a in self.by_key)
        rows = 0 if self.shared else self.rows.nbytes
        equal = sum(_nbytes(runs) for runs in self.equal.values())
        parts_n = sum(a.nbytes for a in parts)
        undefined = sum(d[5].nbytes for d in self.direct if d[5] is not None)
        by_key = [self.first_row, self.long, self.empty]
        by_key += [self.next_row] if self.next_row is not self.first_row else []
        undefined += sum(a.nbytes for a in by_key if a is not None)
        return int(self.slot.nbytes + rows + keys + parts_n + equal + undefined)

    def truths(
        self,
        searches: Mapping[str, SearchView],
        grouped: Mapping[str, DirectAtoms],
        types: Mapping[str, str],
        values: Mapping[str, object],
    ) -> np.ndarray:
        """The satisfied atoms of a validated event by slot: what
        :func:`betree.matching.pages.phase1` finds on the view, in this numbering."""
        slot = self.slot
        sat = self.searched(searches, types, values)
        if grouped is self.grouped:
            self._direct(sat, values)
            return sat
        held, failed = found(grouped, values)
        some = False  # (as betree.matching.direct.mark sets them)
        for attr, group in grouped.items():
            ids = group.default.ids
            if attr in values and len(ids):
                some = True
                got = self.defaults.get(attr)
                if got is not None and got[0] is ids:
                    sat[got[1] : got[1] + len(ids)] = True
                else:  # (not numbered as one run)
                    sat[slot.take(ids)] = True
        if some and len(failed):
            sat[slot.take(failed)] = False
        if len(held):
            sat[slot.take(held)] = True
        return sat

    def candidates(self, sat: np.ndarray) -> np.ndarray:
        """The clauses whose key and second key hold, as positions in key order (in
        ``by_key[2]``), ``sat`` by slot (as :meth:`betree.packed.flat.FlatTree._match_by_key`
        finds them by atom id): the keys' run read as one slice, the others gathered."""
        keys, at, _, second = self.by_key
        m, lo, hi = self.run
        if m < len(keys):
            held = np.flatnonzero(sat[lo:hi])
            held += m
            if m:
                held = np.concatenate((np.flatnonzero(sat.take(keys[:m])), held))
        else:
            held = np.flatnonzero(sat.take(keys))
        at_key = ranges(at.take(held), at.take(held + 1))
        return at_key[sat.take(second.take(at_key))]

    def held(self, sat: np.ndarray) -> tuple[np.ndarray, int]:
        """The clauses (in key order) all of whose atoms hold, ``sat`` by slot, and the
        number of candidates (:meth:`candidates`) tested: their first rows, then the
        second rows of those left, then (where some clause has more) the others' rows."""
        pos = self.candidates(sat)
        candidates = len(pos)
        rows = self.rows
        if self.empty is not None:  # (no row: never holds)
            pos = pos[~self.empty.take(pos)]
        first = rows.take(self.first_row.take(pos), axis=0)
        pos = pos[sat.take(first).view(np.uint64).ravel() == ALL]
        if self.next_row is not self.first_row:
            nxt = rows.take(self.next_row.take(pos), axis=0)
            pos = pos[sat.take(nxt).view(np.uint64).ravel() == ALL]
        order = self.by_key[2]
        if self.long is not None and len(pos):
            some = np.flatnonzero(self.long.take(pos))
            if len(some):  # rows from the third on
                clause = order.take(pos.take(some))
                lo, hi = self.row_at.take(clause) + 2, self.row_at.take(clause + 1)
                ok = sat.take(rows.take(ranges(lo, hi), axis=0)).view(np.uint64).ravel() == ALL
                bad = np.repeat(some, hi - lo)[~ok]
                if len(bad):
                    keep = np.ones(len(pos), dtype=bool)
                    keep[bad] = False
                    pos = pos[keep]
        return order.take(pos), candidates

    def _direct(self, sat: np.ndarray, values: Mapping[str, object]) -> None:
        """:meth:`truths`' direct atoms set in ``sat``, as
        :func:`betree.matching.direct.found` and the defaults there, in one loop; an
        attribute's answer for a value seen lately read from its :class:`Memo`."""
        held: list[np.ndarray] = []
        failed: list[np.ndarray] = []
        on: list[np.ndarray] = []  # slots: undefined attributes' atoms, memos' held atoms
        off: list[np.ndarray] = []  # slots: memos' failing defaults
        memo_on = MEMO_IDS > 0 and not counting_now()
        some = False
        for attr, group, first, n, runs, none, memo in self.direct:
            if attr in values:
                if n:
                    some = True
                    if runs is None:
                        sat[first : first + n] = True
                    else:  # (not numbered as one run)
                        sat[self.slot.take(runs)] = True
                if not group.busy:
                    continue
                value = values[attr]
                if memo is None or not memo_on or memo.idle():
                    group.found(value, values, held, failed)
                    continue
                got = memo.get(value, values) or memo.put(value, values, group, self.slot)
                if len(got[0]):
                    on.append(got[0])
                if len(got[1]):
                    off.append(got[1])
            elif none is not None:
                on.append(none)
        if some and failed:
            sat[self.slot.take(joined(failed))] = False
        if some and off:
            sat[joined(off)] = False
        if held:
            sat[self.slot.take(joined(held))] = True
        if on:
            sat[joined(on)] = True

    def searched(
        self,
        searches: Mapping[str, SearchView],
        types: Mapping[str, str],
        values: Mapping[str, object],
    ) -> np.ndarray:
        """The PB+tree atoms that hold on a validated event, by slot (and atom 0)."""
        sat = np.zeros(len(self.slot), dtype=bool)
        sat[0] = True
        plans, equal = self.plans, self.equal
        for attr, value in values.items():
            search = searches.get(attr)
            if search is None or types[attr] not in SCALAR:
                continue
            plan = plans.get(attr)
            if plan is not None and plan[0] is search:
                if key_domain(value) != search.domain:
                    search.spans(value)  # (raises as the search does)
                run = equal[attr].get(value)
                if run is not None and len(run):
                    sat[run] = True
                for right, keys, pos, first, placed, slots, n in plan[1]:
                    # the items that hold: GT a prefix, LT a suffix, NE all but one key's
                    # (positions read by ``item``: no numpy scalar an item)
                    if right is None:  # (GT)
                        lo, hi = 0, pos.item(bisect_left(keys, value))
                    elif right:  # (LT)
                        lo, hi = pos.item(bisect_right(keys, value)), n
                    else:  # (NE: its key's run, if any, left out)
                        j, k = bisect_left(keys, value), bisect_right(keys, value)
                        if j < k:
                            _slices(sat, first, placed, slots, 0, pos.item(j))
                            lo, hi = pos.item(k), n
                        else:
                            lo, hi = 0, n
                    a, b = placed.item(lo), placed.item(hi)  # (as _slices, inline)
                    sat[first + a : first + b] = True
                    if hi - lo > b - a:
                        sat[slots[lo - a : hi - b]] = True
                continue
            eq, cuts = search.spans(value)
            if eq is not None and len(eq):  # (its run by slot: the same key, found again)
                sat[self.equal[attr][value]] = True
            parts = self.lists[attr]
            for k, lo, hi in cuts:
                first, at, slots = parts[k]
                a, b = int(at[lo]), int(at[hi])
                sat[first + a : first + b] = True
                if hi - lo > b - a:  # the atoms placed before in the slice (i - at[i] before i)
                    sat[slots[lo - a : hi - b]] = True
        return sat


class Memo:
    """One direct group's answers (:meth:`betree.matching.direct.DirectAtoms.found`) for
    the values seen lately, by slot: the held atoms and the failing defaults.  An answer
    is a function of the value and of the attributes the group ``reads`` beyond its own
    (:attr:`betree.matching.direct.DirectAtoms.reads`), so the key is those values; a
    validated value is hashable (lists come as tuples) and of the attribute's one type
    (an ``int`` never a ``bool``, a ``float`` never an ``int``), so equal keys are equal
    values.  Bounded: emptied when it would pass :data:`MEMO_IDS` ids or
    :data:`MEMO_MOST` values.  A race between threads costs a recomputed answer, never a
    wrong one (a key is set with its answer at once)."""

    __slots__ = ("answers", "asks", "hits", "ids", "reads", "rest")

    def __init__(self, reads: tuple[str, ...]) -> None:
        self.reads = reads
        self.answers: dict[object, tuple[np.ndarray, np.ndarray]] = {}
        self.ids = 0
        #: asks and hits in this window of :data:`MEMO_WINDOW` asks; asks left to sit out
        self.asks = self.hits = self.rest = 0

    def idle(self) -> bool:
        """Whether this ask is left to the indexes: for :data:`MEMO_REST` asks after a
        window of :data:`MEMO_WINDOW` that found under one in :data:`MEMO_POOR` kept (a
        stream that does not repeat its values then pays the memo's key and copy on a
        ninth of its asks)."""
        if self.rest:
            self.rest -= 1
            return True
        return False

    def key(self, value: object, values: Mapping[str, object]) -> object:
        """The memo's key of ``value`` on the event ``values``."""
        reads = self.reads
        if not reads:
            return value
        return (value, *[values.get(name) for name in reads])

    def get(
        self, value: object, values: Mapping[str, object]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The answer kept for ``value`` on this event, or None."""
        try:
            got = self.answers.get(self.key(value, values))
        except TypeError:  # (unhashable: never kept)
            got = None
        self.asks += 1
        if got is not None:
            self.hits += 1
        if self.asks >= MEMO_WINDOW:
            if self.hits * MEMO_POOR < self.asks:
                self.rest = MEMO_REST
                self.answers.clear()
                self.ids = 0
            self.asks = self.hits = 0
        return got

    def put(
        self, value: object, values: Mapping[str, object], group: DirectAtoms, slot: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``group``'s answer for ``value`` on the event ``values``, by ``slot``, kept."""
        held: list[np.ndarray] = []
        failed: list[np.ndarray] = []
        group.found(value, values, held, failed)
        got = (slot.take(joined(held)), slot.take(joined(failed)))
        size = len(got[0]) + len(got[1])
        if self.rest:  # (left idle by this ask's window)
            return got
        try:
            key = self.key(value, values)
            hash(key)
        except TypeError:
            return got
        if self.ids + size > MEMO_IDS or len(self.answers) >= MEMO_MOST:
            self.answers.clear()
            self.ids = 0
        if size <= MEMO_IDS:
            self.answers[key] = got
            self.ids += size
        return got


def _rows_by_key(
    row_at: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:attr:`Slots.first_row`, ``next_row``, ``long`` and ``empty`` for the clauses in
    ``order``, their rows starting at ``row_at``."""
    first = row_at.take(order)
    n = row_at.take(order + 1) - first
    nxt = first + (n > 1) if bool((n > 1).any()) else first
    long = n > 2
    empty = n == 0
    return first, nxt, long if bool(long.any()) else None, empty if bool(empty.any()) else None


def _slices(
    sat: np.ndarray, first: int, placed: np.ndarray, slots: np.ndarray, lo: int, hi: int
) -> None:
    """Set items ``lo:hi`` of one list: the atoms it placed as one slice, the others
    (placed before) by their slots."""
    a, b = placed.item(lo), placed.item(hi)
    sat[first + a : first + b] = True
    if hi - lo > b - a:
        sat[slots[lo - a : hi - b]] = True


def _plan(search: SearchView, parts: tuple[Part, ...]) -> list[Plan]:
    """The cuts of ``search``'s non-empty lists (GT, LT, NE) with their numbering."""
    out = []
    for right, each, (first, placed, slots) in zip(
        (None, True, False), (search.gt, search.lt, search.ne), parts, strict=True
    ):
        if len(each.ids):
            out.append((right, each.keys, each.at, first, placed, slots, len(each.ids)))
    return out


def _by_slot(eq: Mapping[Any, np.ndarray], slot: np.ndarray) -> Mapping[Any, np.ndarray]:
    """Leaf runs of atom ids as the same runs of their slots, found by the same keys."""
    if isinstance(eq, Runs):
        return Runs(eq.ints, eq.at, slot.take(eq.ids))
    runs = list(eq.values())
    at = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum([len(run) for run in runs], out=at[1:])
    ids = slot.take(np.concatenate(runs)) if runs else slot[:0].copy()
    return KeyedRuns({key: k for k, key in enumerate(eq)}, at, ids)


class KeyedRuns(Mapping[Any, np.ndarray]):
    """Runs by key end to end in one array, each read as a view when asked.  Not a dict
    of an array a key: each array is a C-heap block (its shape too), ~107K of them at
    rich 50K; let go by a fold's thread, they left the matching thread's next allocations
    ~2.5 ms of glibc's sorting of its free chunks, the first event after the fold's excess
    (docs/bench/live/README.md, live38).  Cost: a dict lookup and a slice a run asked."""

    __slots__ = ("at", "ids", "index")

    def __init__(self, index: dict[Any, int], at: np.ndarray, ids: np.ndarray) -> None:
        self.index, self.at, self.ids = index, at, ids

    def __getitem__(self, key: Any) -> np.ndarray:
        k = self.index[key]
        return self.ids[self.at[k] : self.at[k + 1]]

    def get(self, key: Any, default: Any = None) -> Any:
        """``self[key]``, or ``default``: one dict lookup, not ``Mapping.get``'s
        ``__getitem__`` under a ``try`` (an event's equal runs, one an attribute)."""
        k = self.index.get(key)
        if k is None:
            return default
        at = self.at
        return self.ids[at[k] : at[k + 1]]

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __iter__(self) -> Iterator[Any]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


def _nbytes(runs: Mapping[Any, np.ndarray]) -> int:
    if isinstance(runs, Runs | KeyedRuns):
        return int(runs.ids.nbytes + (runs.at.nbytes if isinstance(runs, KeyedRuns) else 0))
    return sum(int(a.nbytes) for a in runs.values())


#: one list numbered: the first slot of the atoms it placed, how many it placed before
#: each item (``items + 1``: item i has ``i - at[i]`` placed before it ahead), and the
#: slots of the items placed before it, in list order
Part = tuple[int, np.ndarray, np.ndarray]
#: one non-empty list's cut: its side (None GT, True LT, False NE), its keys, where each
#: key's items start, and its :data:`Part` (first slot, placed before, slots), its items
#: a direct group: its attribute, itself, the first slot of its defaults (one run) and
#: their count, their ids when not one run, the slots of its atoms true where undefined
#: and its :class:`Memo` (None where its answers are not kept)
Direct = tuple[str, DirectAtoms, int, int, np.ndarray | None, np.ndarray | None, Memo | None]
Plan = tuple[bool | None, Any, np.ndarray, int, np.ndarray, np.ndarray, int]
