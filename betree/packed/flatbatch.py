"""A batch of events matched on packed views, 64 events a machine word (issue 16 §2).

One event on a packed view (:mod:`betree.packed.flat`) is a few dozen numpy calls on small
arrays (~0.25 ms at 100K subscriptions), most of it the calls' own overhead.  A batch
shares the calls: every truth is kept for 64 events at once as the bits of a ``uint64``
(the batch's events in shape order, so that one word's events reach much the same nodes,
a large shape in words of its own: :func:`arrange`), and each step is one numpy call over
the batch:

* **satisfied atoms**, ``words x atoms``: per attribute, the batch's distinct values in
  order, each with the bits of its events.  A GreaterThan item holds for the values above
  its key, a suffix of them, so its bits are a suffix-OR of the values' bits (the items
  between two values' cuts in the list share one); a LessThan item's are a prefix-OR; an
  Inequality item's the events defining the attribute less those of its own key; an
  equality run's its value's bits.  A list's bits are ORed in a word at a time
  (:func:`_or_planes`); a list holding an atom twice (several entries) ORs its rows
  through a sort, and the equality runs of an ``in`` atom's keys each apart.  The
  int attributes whose PB+trees are narrow (:attr:`pbtree.view.SearchView.narrow`: int64
  keys less than 2**32 apart in each list) are searched all at once
  (:mod:`betree.packed.batchints`).  On a plain store's view the atoms are numbered list
  by list (:mod:`betree.packed.numbering`): a list's bits are then one slice.
* **reached nodes**, ``words x nodes``: a node's bucket holds the events whose coordinate
  on its attribute lies in it, a range of the batch's sorted coordinates read off a
  prefix-XOR (each event defines an attribute once); a node is reached by those events of
  its bucket that reach its parent: one AND a depth of the tree.
* **rows**, per word and shard: the rows of the nodes the word reaches, each row's 8 atom
  words ANDed with its node's (where the words reach most rows, its clause's most
  selective atom first, the rows where it holds for no event never read: :func:`_keys`);
  a clause's rows ANDed together.  The bits left are the
  matching (clause, event) pairs, read off in event order (:func:`by_event`).  Where a
  word's live rows are many (rich rules), over every clause of the view instead, each
  subscription the OR of its clauses' bits (:mod:`betree.packed.subbits`).
* **results**: each event's ids are a slice of the word's; as lists (``match_many``), the
  ids of a word's held clauses become Python objects once and the word's lists share them
  where the clauses hold for several of its events (:func:`_results`).

Cost: phase 1 is linear in the atoms of the attributes the batch defines (not in its
events), the nodes one pass per attribute and depth, the rows those each word reaches;
the per-event Python left is validation (measured figures: docs/bench/README.md).
Memory: the two bit matrices, capped at :data:`SAT_BYTES` (a batch is split into fewer
words past it: at 10M BEGen subscriptions, 1M atoms, passes of 8 words); the truths' one
lent from kept buffers (:mod:`betree.packed.scratch`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from betree.disk import grid
from betree.disk.nodes import id_array
from betree.matching.direct import DirectAtoms
from betree.packed import scratch, subbits
from betree.packed.batchints import Found, search_ints
from betree.packed.delta import Delta
from betree.packed.flat import FlatTree
from betree.packed.numbering import Numbered, Plane, word_planes
from betree.packed.reach import Nodes
from pbtree.keys import int64_array, key_domain
from pbtree.view import SearchView, ranges, uniq
from storage.errors import InvalidInput

#: batches of fewer events are matched one by one on the view: a batch costs a pass per
#: attribute it defines (~25 ms for BEGen's 250, 100K subscriptions), which 64 events
#: matched one by one there (0.25 ms each) do not repay
LEAST = 128
#: the most bytes of the ``atoms x words`` truth matrix: a batch needing more is matched
#: in parts of fewer words (64 events each)
SAT_BYTES = 64 << 20
#: the share of set bits from which :func:`by_event` transposes (below it, it sorts)
DENSE = 0.05
#: the events a word's clause holds for, on average, past which the word's lists share
#: one Python object a clause (:func:`_results`)
SHARED = 4
#: half a word: a shape of this many events starts a word of its own (:func:`arrange`)
HALF = 32
#: the share of a view's rows one word's live rows are, from which :func:`_rows` ANDs the
#: rows into clauses and ORs the clauses into subscriptions over every clause of the
#: view (:func:`betree.packed.subbits.held`) rather than over the held rows (sorting
#: the pairs)
DENSE_ROWS = 0.1
#: the share of the rows some word reaches that the words reach on average, from which
#: each row's most selective atom is tested first (:func:`_keys`)
KEYED = 0.25
_ONES = np.uint64((1 << 64) - 1)
_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))  # bit i of a word


class Shard(NamedTuple):
    """One packed view among those matched together (a plain store has one)."""

    view: FlatTree
    direct: Mapping[str, DirectAtoms]  # its direct atoms by attribute
    nodes: int  # its first node in the whole's node arrays
    atoms: int  # its first atom in the whole's atom numbering
    size: int  # the atom ids it numbers
    #: what was written since its view's snapshot (:mod:`betree.packed.delta`), applied
    #: from the batch's truths: removed clauses dropped, added ones ANDed 64 events a word
    delta: Delta | None = None
    #: its atoms numbered list by list (:mod:`betree.packed.numbering`; a plain store's
    #: view): the truths' columns by slot, a list's bits one slice
    numbered: Numbered | None = None


class Whole(Nodes, Protocol):
    """The node arrays and searches matched at once (a view, or the shards' joined)."""

    searches: dict[str, SearchView]


def words_for(events: int, atoms: int) -> int:
    """How many words of 64 events one pass takes, within :data:`SAT_BYTES`."""
    return max(1, min((events + 63) // 64, SAT_BYTES // (8 * max(atoms, 1))))


class Column(NamedTuple):
    """One attribute's values in a batch: the events defining it, in batch order, and the
    words they lie in (in shape order an attribute's events fill few of the batch's words,
    and its bits are computed for those only)."""

    values: list[Any]
    events: np.ndarray  # int64: their slots (:class:`Layout`)
    coords: np.ndarray  # uint64 grid coordinates (betree.disk.grid)
    words: np.ndarray  # the words holding its events, ascending
    rows: np.ndarray  # each event's own bit, as a row over ``words``
    at: list[int]  # their positions in the batch


def columns(
    batch: Sequence[Mapping[str, object]], kinds: Mapping[str, str], where: Layout
) -> dict[str, Column]:
    """The batch's values by attribute (``kinds``: each attribute's grid kind; ``where``
    the events' slots)."""
    found: dict[str, tuple[list[Any], list[int]]] = {}
    for e, event in enumerate(batch):
        for attr, value in event.items():
            got = found.get(attr)
            if got is None:
                got = found[attr] = ([], [])
            got[0].append(value)
            got[1].append(e)
    out = {}
    for attr, (values, events) in found.items():
        at = where.slots[events]  # ascending
        word = at >> 6
        words = np.unique(word)  # (a few dozen, sorted: cheap)
        rows = np.zeros((len(at), len(words)), dtype=np.uint64)
        rows[np.arange(len(at)), np.searchsorted(words, word)] = _BIT[at & 63]
        out[attr] = Column(values, at, grid.coords(kinds[attr], values), words, rows, events)
    return out


class Layout(NamedTuple):
    """Where a batch's events sit in its words: event i at bit ``slots[i]`` (ascending;
    the bits between are no event's), ``present`` the words' bits of events."""

    slots: np.ndarray  # int64
    present: np.ndarray  # uint64, one a word

    @property
    def words(self) -> int:
        return len(self.present)

    @classmethod
    def of(cls, slots: np.ndarray) -> Layout:
        present = np.zeros(int(slots[-1] >> 6) + 1 if len(slots) else 0, dtype=np.uint64)
        np.bitwise_or.at(present, slots >> 6, _BIT[slots & 63])
        return cls(slots, present)

    @classmethod
    def packed(cls, events: int) -> Layout:
        """``events`` events side by side."""
        return cls.of(np.arange(events, dtype=np.int64))


def arrange(batch: Sequence[Mapping[str, object]]) -> tuple[list[int], np.ndarray]:
    """The batch's events in shape order (:func:`betree.matching.batch.shape_order`) and each one's
    slot: side by side, except that a shape of at least :data:`HALF` events starts a word
    of its own when the word being filled holds at least as many (so every word is at least
    half full: at most twice the words).  A word's events then reach the nodes of one shape
    where they can: on 1,024 BEGen events (25 shapes of 30–55 events) at 100K subscriptions,
    25 words reaching 167K rows in all against 16 words reaching 255K."""
    shapes = [tuple(sorted(event)) for event in batch]
    order = sorted(range(len(batch)), key=shapes.__getitem__)
    ordered = [shapes[e] for e in order]
    n = len(order)
    firsts = [0] + [i for i in range(1, n) if ordered[i] != ordered[i - 1]]
    bounds = np.array([*firsts, n], dtype=np.int64)
    sizes = bounds[1:] - bounds[:-1]
    starts = []
    at = 0
    for size in sizes.tolist():
        if size >= HALF and at & 63 >= HALF:
            at = (at | 63) + 1
        starts.append(at)
        at += size
    shift = np.array(starts, dtype=np.int64) - bounds[:-1]
    return order, np.repeat(shift, sizes) + np.arange(n, dtype=np.int64)


def match(
    whole: Whole,
    shards: Sequence[Shard],
    batch: Sequence[Mapping[str, object]],
    kinds: Mapping[str, str],
    lists: bool = False,
) -> tuple[list[Any], int]:
    """Per event of ``batch`` (validated values; ``kinds`` each attribute's grid kind), the
    external ids it matches, each once (as :func:`betree.disk.nodes.id_array` gives them, or as
    a list when ``lists``); and the (clause, event) candidates, each clause times the
    events reaching its node."""
    atoms = shards[-1].atoms + shards[-1].size
    order, slots = arrange(batch)
    step = 64 * words_for(int(slots[-1]) + 1 if len(slots) else 0, atoms)  # slots a pass
    found: list[Any] = []
    candidates = 0
    i = 0
    while i < len(batch):
        base = int(slots[i]) & ~63  # (a pass starts at a word)
        end = int(np.searchsorted(slots, base + step))
        part = [batch[e] for e in order[i:end]]
        got, n = _match(whole, shards, part, Layout.of(slots[i:end] - base), kinds, lists)
        found += got
        candidates += n
        i = end
    out = list(found)
    for e, ids in zip(order, found, strict=True):
        out[e] = ids
    return out, candidates


def _match(
    whole: Whole,
    shards: Sequence[Shard],
    batch: Sequence[Mapping[str, object]],
    where: Layout,
    kinds: Mapping[str, str],
    lists: bool,
) -> tuple[list[Any], int]:
    cols = columns(batch, kinds, where)
    atoms = shards[-1].atoms + shards[-1].size
    with scratch.zeroed(where.words, atoms, SAT_BYTES) as sat:
        satisfied(whole.searches, shards, batch, cols, where, sat)
        return _matched(whole, shards, batch, where, cols, sat, lists)


def _matched(
    whole: Whole,
    shards: Sequence[Shard],
    batch: Sequence[Mapping[str, object]],
    where: Layout,
    cols: Mapping[str, Column],
    sat: np.ndarray,
    lists: bool,
) -> tuple[list[Any], int]:
    reach = reached(whole, cols, where)
    counts = np.bitwise_count(reach).sum(axis=0, dtype=np.int64)
    candidates = 0
    for shard in shards:
        view, at = shard.view, shard.nodes
        clauses = np.diff(view.clause_at)
        candidates += int(counts[at : at + len(clauses)] @ clauses)
    found: list[Any] = []
    word = where.slots >> 6
    cuts = np.searchsorted(word, np.arange(where.words + 1)).tolist()
    bits = (where.slots & 63).tolist()
    keys = [_keys(shard, reach, sat) for shard in shards]
    gone = [None if s.delta is None else s.delta.gone(s.view.exts) for s in shards]
    for k in range(where.words):
        got = [
            g
            for g in (
                _rows(s, reach[k], sat[k], key, out)
                for s, key, out in zip(shards, keys, gone, strict=True)
            )
            if g is not None
        ]
        found += _results(got, bits[cuts[k] : cuts[k + 1]], lists)
    for shard in shards:  # (after every shard's base answer, as delta.settle gives them)
        if shard.delta is not None and shard.delta.added:
            own = sat[:, shard.atoms : shard.atoms + shard.size]
            if shard.numbered is not None:  # (the delta reads its atoms by id)
                own = own.take(shard.numbered.slot, axis=1)
            extra = shard.delta.batch_hits(own, batch, where.slots)
            pairs = zip(found, extra, strict=True)
            if lists:
                found = [ids + more.tolist() for ids, more in pairs]
            else:
                found = [np.concatenate([ids, more]) for ids, more in pairs]
    return found, candidates


def _results(
    got: list[tuple[np.ndarray, np.ndarray, np.ndarray]], bits: list[int], lists: bool
) -> list[Any]:
    """The ids of the events at ``bits`` of one word, from its shards' :func:`_rows`:
    arrays, or lists (``lists``).  Where a word's clauses hold for :data:`SHARED` of its
    events or more on average, a list's ids are Python objects made once a clause and
    shared by the word's lists (at 100K BEGen subscriptions a word's 64 events hold ~68K
    ids of ~9K clauses: that many fewer objects made, each ~25 ns in a batch's fresh
    memory); where fewer, gathering the shared objects (out of the cache) costs more than
    making one per id (at 10M, 200 events of mixed shapes, ~2 events a clause: 10% more)."""
    cuts = []
    for ids, pairs, bounds in got:
        if lists and ids.dtype != object and len(pairs) >= SHARED * len(ids):
            ids = ids.astype(object)
        cuts.append((ids.take(pairs), bounds.tolist()))
    # (each shard's ids in event order: an event's are one slice a shard)
    if len(cuts) == 1:
        ids, at = cuts[0]
        found = [ids[at[b] : at[b + 1]] for b in bits]
    else:  # (int64 slices stay int64, made Python ints by tolist: no object array first)
        empty = id_array([])
        found = [
            np.concatenate([empty] + [ids[at[b] : at[b + 1]] for ids, at in cuts]) for b in bits
        ]
    return [ids.tolist() for ids in found] if lists else found


#: atoms' bits in some words found by :func:`_search`, no atom twice: (the words, the atom
#: ids or a slice of them, their bits: ``words x atoms``, or one a word for all the atoms)
_Plane = Plane


def satisfied(
    searches: Mapping[str, SearchView],
    shards: Sequence[Shard],
    batch: Sequence[Mapping[str, object]],
    cols: Mapping[str, Column],
    where: Layout,
    sat: np.ndarray | None = None,
) -> np.ndarray:
    """The ``words x atoms`` truths of every atom for the batch's events (into ``sat``,
    zeroed, where given: :mod:`betree.packed.scratch`)."""
    atoms = shards[-1].atoms + shards[-1].size
    if sat is None:
        sat = np.zeros((where.words, atoms), dtype=np.uint64)
    lists: dict[str, list[Found]] = {}
    planes: list[_Plane] = []
    ints: list[tuple[SearchView, np.ndarray, np.ndarray]] = []
    numbered = shards[0].numbered if len(shards) == 1 else None
    for attr, col in cols.items():
        search = searches.get(attr)
        if search is None or search.domain is None:
            continue
        numbers = int64_array(col.values) if search.narrow else None
        if numbers is not None:
            ints.append((search, col.events, numbers))
        else:
            _search(search, attr, col, atoms, lists, planes, numbered)
    if ints:
        slot = None if numbered is None else numbered.slot
        search_ints(ints, atoms, where.words, lists, slot)
    flat = sat.reshape(-1)
    for kind in ("eq", "gt", "lt", "ne"):  # one list kind of every attribute: one OR
        parts = lists.get(kind, [])
        if not parts:
            continue
        cells = np.concatenate([c for c, _, _ in parts])
        rows = np.concatenate([r for _, r, _ in parts])
        if all(p[2] for p in parts):
            flat[cells] |= rows
        elif kind == "eq":
            # an atom under several keys holds for other events under each (one value an
            # event; never twice under one key): their OR is their sum, added while the
            # matrix is still empty
            np.add.at(flat, cells, rows)
        else:
            _or_into(flat, cells, rows)
    _or_planes(sat, planes)
    sat[:, [shard.atoms for shard in shards]] = where.present[:, None]  # atom 0
    _direct(sat, shards, batch, cols, where)
    return sat


def _direct(
    sat: np.ndarray,
    shards: Sequence[Shard],
    batch: Sequence[Mapping[str, object]],
    cols: Mapping[str, Column],
    where: Layout,
) -> None:
    """The direct atoms' bits (:mod:`betree.matching.direct`, a batch at once: as
    :func:`betree.matching.direct.found_batch` finds them, each attribute's values and
    events read off its column, not from the batch's (event, attribute) pairs again):
    each attribute's defaults ORed into the words of the events that define it, its
    ``undefined`` atoms into the others', then the other hits set and the failing defaults
    cleared (a default is never among the hits).  Long list postings give their atoms'
    bits as rows over the column's words (:meth:`betree.matching.direct.DirectAtoms.found_words`):
    ORed with the defaults' planes, the failing ones cleared after them.
    The defaults and ``undefined`` atoms are planes (:func:`_or_planes`) of the words
    holding their events: ~30 against ~15 µs an event at 100K rich subscriptions as a
    fancy OR of every (word, atom) cell.  A shard numbered (:class:`Shard`) has its ids
    by slot, each attribute's defaults one slice."""
    planes: list[_Plane] = []
    clears: list[_Plane] = []  # (failing defaults found as rows over words)
    held: list[np.ndarray] = []
    failed: list[np.ndarray] = []
    held_at: list[np.ndarray] = []  # (slots)
    failed_at: list[np.ndarray] = []
    for shard in shards:
        base, numbered = shard.atoms, shard.numbered
        for attr, group in shard.direct.items():
            col = cols.get(attr)
            mask = np.zeros(where.words, dtype=np.uint64)
            if col is not None:
                slots = col.events
                (on, on_at, off, off_at), words_of = group.found_words(
                    col.values, [batch[e] for e in col.at], col.rows
                )
                for aids, bits, hit in words_of:
                    got = word_planes(numbered, attr, col.words, aids, bits, hit, base)
                    (planes if hit else clears).extend(got)
                if numbered is not None:
                    on, off = numbered.slot.take(on), numbered.slot.take(off)
                held.append(on + base)
                held_at.append(slots[on_at])
                failed.append(off + base)
                failed_at.append(slots[off_at])
                np.bitwise_or.at(mask, slots >> 6, _BIT[slots & 63])
                if len(group.default):
                    words = np.flatnonzero(mask)
                    ids = group.default.ids
                    at = ids + base if numbered is None else numbered.default(attr, ids)
                    planes.append((words, at, mask[words]))
            if group.undefined and (col is None or len(col.at) < len(batch)):
                undefined = np.array(group.undefined, dtype=np.int64)
                undefined = undefined + base if numbered is None else numbered.slot[undefined]
                rest = where.present & ~mask
                words = np.flatnonzero(rest)
                planes.append((words, undefined, rest[words]))
    _or_planes(sat, planes)
    for words, cleared, rows in clears:  # (after the defaults' planes)
        if isinstance(cleared, slice):  # (one run: every word at once)
            sat[words, cleared] &= ~rows
            continue
        for word, row in zip(words.tolist(), rows, strict=True):
            sat[word, cleared] &= ~row
    if held:
        _set_bits(sat, np.concatenate(held), np.concatenate(held_at), True)
    if failed:
        _set_bits(sat, np.concatenate(failed), np.concatenate(failed_at), False)


def _set_bits(sat: np.ndarray, atoms: np.ndarray, slots: np.ndarray, on: bool) -> None:
    """Each (atom, slot) pair's bit of ``sat`` set (``on``) or cleared: the pairs grouped
    by their bit in the word (a radix sort of bytes), and then one fancy OR or AND a bit,
    whose cells may repeat only as the same pair (writing the same word).  At 100K rich
    subscriptions a batch of 1,024 holds ~1.1M direct (atom, event) pairs: ~100 µs an
    event as a ``np.bitwise_or.at``."""
    flat = sat.reshape(-1)
    cells = (slots >> 6) * sat.shape[1] + atoms
    bit = (slots & 63).astype(np.uint8)
    order = np.argsort(bit, kind="stable")
    cells = cells[order]
    cuts = np.concatenate(([0], np.cumsum(np.bincount(bit, minlength=64)))).tolist()
    for b in range(64):
        part = cells[cuts[b] : cuts[b + 1]]
        if len(part):
            if on:
                flat[part] |= _BIT[b]
            else:
                flat[part] &= ~_BIT[b]


def _search(
    view: SearchView,
    attr: str,
    col: Column,
    atoms: int,
    lists: dict[str, list[Found]],
    planes: list[_Plane],
    numbered: Numbered | None = None,
) -> None:
    """The bits of every atom of ``view`` (``attr``'s) for the events of ``col`` (as
    :meth:`SearchView.collect` finds them one value at a time): each list's, ``words x
    items``, added to ``planes`` (:func:`_or_planes`), or to ``lists`` by list kind where
    an atom repeats in the list; where an atom sits under several equality keys (an ``in``
    of many values), each value's run's cells in its words to ``lists`` (summed into the
    empty matrix: :func:`satisfied`; rich 100K, ~1.7M cells a batch, were ~800 planes
    ORed a word at a time).  With ``numbered``, by slot (a list's items a slice where
    consecutive)."""
    gt, lt, ne, words = view.gt, view.lt, view.ne, col.words
    part = {"gt": (0, gt.ids), "lt": (1, lt.ids), "ne": (2, ne.ids)}

    def add(kind: str, lo: int, hi: int, rows: np.ndarray, distinct: bool) -> None:
        k, every = part[kind]
        ids = every[lo:hi] if numbered is None else numbered.items(attr, k, lo, hi)
        if distinct:
            planes.append((words, ids, rows))
            return
        cells = (words * atoms)[:, None] + np.asarray(ids)[None, :].astype(np.int64)
        lists.setdefault(kind, []).append((cells.ravel(), rows.ravel(), False))

    def runs_of(ids: np.ndarray) -> np.ndarray:
        return ids if numbered is None else numbered.slot.take(ids)

    order, starts, distinct, sorted_ints = _distinct(col)
    for value in distinct[:1] if sorted_ints is not None else distinct:  # (ints: one domain)
        if key_domain(value) != view.domain:
            raise InvalidInput(f"PB+tree {view.name!r} cannot compare {value!r} to its keys")
    bits = np.bitwise_or.reduceat(col.rows[order], starts, axis=0)  # each value's events
    left = _cuts(gt, distinct, sorted_ints, "left")
    # GreaterThan: item positions below a value's cut hold for it, and cuts ascend
    # (the positions from one value's cut to the next hold for that value and those past it)
    cut = gt.at[np.concatenate(([0], left))]
    if cut[-1]:
        suffix = np.bitwise_or.accumulate(bits[::-1], axis=0)[::-1]
        rows = np.repeat(suffix.T, np.diff(cut), axis=1)
        add("gt", 0, int(cut[-1]), rows, gt.distinct)
    # LessThan: positions at or past a value's cut hold for it
    cut = lt.at[np.concatenate((_cuts(lt, distinct, sorted_ints, "right"), [-1]))]
    prefix = np.bitwise_or.accumulate(bits, axis=0)
    if cut[0] < len(lt.ids):
        rows = np.repeat(prefix.T, np.diff(cut), axis=1)
        add("lt", int(cut[0]), len(lt.ids), rows, lt.distinct)
    # Inequality: every event defining the attribute, less those of the item's own key
    if len(ne.ids):
        defined = prefix[-1]
        table = np.vstack([defined & ~bits, defined[None, :]])
        pick = np.full(len(ne.ids), len(distinct), dtype=np.int64)
        j = _cuts(ne, distinct, sorted_ints, "left")
        k = _cuts(ne, distinct, sorted_ints, "right")
        own = np.flatnonzero(j < k)
        if len(own):
            lo, hi = ne.at[j[own]], ne.at[k[own]]
            pick[ranges(lo, hi)] = np.repeat(own, hi - lo)
        add("ne", 0, len(ne.ids), table.T[:, pick], ne.distinct)
    # equality (and the bounds of >= and <=): a value's own run
    eq = view.eq
    runs = [(i, eq[v]) for i, v in enumerate(distinct) if v in eq]
    if runs and view.eq_distinct:
        ids = runs_of(np.concatenate([r for _, r in runs]))
        which = np.repeat([i for i, _ in runs], [len(r) for _, r in runs])
        planes.append((words, ids, bits.T[:, which]))
    elif runs:  # (an atom under several keys: each run's cells in its value's words)
        sizes = np.array([len(r) for _, r in runs], dtype=np.int64)
        ids = runs_of(np.concatenate([r for _, r in runs]))
        own = bits[[i for i, _ in runs]]  # (each run's value's bits, by word)
        which, word = np.nonzero(own != 0)
        size = sizes[which]
        lo = (np.cumsum(sizes) - sizes)[which]
        cells = np.repeat(words[word] * atoms, size) + ids[ranges(lo, lo + size)]
        lists.setdefault("eq", []).append((cells, np.repeat(own[which, word], size), False))


def _distinct(col: Column) -> tuple[Any, Any, list[Any], np.ndarray | None]:
    """A column's values in order: the order of its events, where each distinct value's
    run starts, the distinct values, and (values all ints of int64) those as int64, sorted
    with numpy."""
    values = col.values
    ints = int64_array(values)
    if ints is not None:
        order = np.argsort(ints, kind="stable")
        ints = ints[order]
        starts = np.flatnonzero(np.concatenate(([True], ints[1:] != ints[:-1])))
        return order, starts, ints[starts].tolist(), ints[starts]
    by_value = sorted(range(len(values)), key=values.__getitem__)
    values = [values[i] for i in by_value]
    runs = [0] + [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    return by_value, runs, [values[i] for i in runs], None


def _cuts(items: Any, distinct: list[Any], ints: np.ndarray | None, side: str) -> np.ndarray:
    """Where each distinct value falls among a list's keys (``bisect_left`` or
    ``bisect_right``): one ``searchsorted`` when both are int64, exact as a bisection."""
    if ints is not None and items.ints is not None:
        return np.searchsorted(items.ints, ints, side=side).astype(np.int64)  # type: ignore[call-overload]
    find = bisect_left if side == "left" else bisect_right
    return np.array([find(items.keys, v) for v in distinct], dtype=np.int64)


def _or_planes(sat: np.ndarray, planes: list[_Plane]) -> None:
    """Each plane's bits ORed into its atoms a word at a time: one word's row of the
    matrix is contiguous and within the cache, where one fancy OR of every (word, atom)
    cell strides across all the words (400K range items of 16 words: 130 against 450 ms).
    A plane of consecutive columns (a slice: :mod:`betree.packed.numbering`) is one OR of all its
    words."""
    for words, ids, rows in planes:
        if isinstance(ids, slice):  # (consecutive columns: every word at once)
            sat[words, ids] |= rows if rows.ndim == 2 else rows[:, None]
            continue
        for word, row in zip(words.tolist(), rows, strict=True):
            sat[word, ids] |= row


def _or_into(flat: np.ndarray, cells: np.ndarray, values: np.ndarray) -> None:
    """``flat[cells] |= values`` where a cell may repeat (a fancy OR would keep only one
    of its values): the values of one cell are ORed together first."""
    order = np.argsort(cells)
    cells = cells[order]
    starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
    flat[cells[starts]] |= np.bitwise_or.reduceat(values[order], starts)


def reached(whole: Nodes, cols: Mapping[str, Column], where: Layout) -> np.ndarray:
    """The ``words x nodes`` bits of the events reaching each node (as
    :func:`betree.packed.reach.reach` finds them one event at a time)."""
    index = whole.attrs
    nodes_n = len(whole.node_attr)
    within = np.zeros((where.words, nodes_n), dtype=np.uint64)
    order, bounds = whole.by_attr
    root = len(index)
    within[:, order[bounds[root] : bounds[root + 1]]] = where.present[:, None]
    flat = within.reshape(-1)
    for attr, col in cols.items():
        i = index.get(attr)
        nodes = None if i is None else order[bounds[i] : bounds[i + 1]]
        if nodes is None or not len(nodes):
            continue
        sort = np.argsort(col.coords, kind="stable")
        x = col.coords[sort]
        prefix = np.zeros((len(x) + 1, len(col.words)), dtype=np.uint64)
        np.bitwise_xor.accumulate(col.rows[sort], out=prefix[1:])
        lo = np.searchsorted(x, whole.node_lo[nodes], side="left")
        hi = np.searchsorted(x, whole.node_hi[nodes], side="right")
        cells = col.words[None, :] * nodes_n + nodes[:, None]
        flat[cells.ravel()] = (prefix[hi] ^ prefix[lo]).ravel()
    for nodes, parents in whole.levels:
        within[:, nodes] &= within[:, parents]
    return within


def by_event(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The set bits of ``words`` (one uint64 a held row, bit i event i) as (row, event)
    pairs in event order: each pair's row, and where each event's pairs start (65).

    Where at least :data:`DENSE` of the bits are set, the words' bytes are transposed
    (8 x rows) and unpacked along that axis (64 x rows, one row per event): one ``nonzero``
    yields the pairs in event order.  Where fewer, only the nonzero bytes are unpacked and
    the pairs sorted by event (a radix sort of bytes).  Measured with ``match_many_arrays``,
    every word one way: at 100K and 1M BEGen subscriptions, batches of 1,024 (10–20% of the
    bits set), transposing 19,814 and 5,184 events/s against 17,861 and 3,630 sorting; at
    10M, 1,024 events 552 against 393, but 200 events of mixed shapes (2–5% set, ~170K rows
    a word and shard) 159 transposing against 176 sorting."""
    n = len(words)
    if int(np.bitwise_count(words).sum(dtype=np.int64)) >= DENSE * 64 * n:
        octets = np.ascontiguousarray(words.astype("<u8").view(np.uint8).reshape(-1, 8).T)
        pairs = np.flatnonzero(np.unpackbits(octets, axis=0, bitorder="little").view(bool))
        bounds = np.searchsorted(pairs, np.arange(0, 65 * n, n))  # each event's first pair
        pairs -= np.repeat(np.arange(0, 64 * n, n), np.diff(bounds))  # each pair's row
        return pairs, bounds
    octets = words.astype("<u8").view(np.uint8)
    # (numpy's nonzero over bools: ~4x faster than over the bytes themselves, rich 100K)
    live = np.flatnonzero(octets != 0)
    set_bits = np.flatnonzero(np.unpackbits(octets[live], bitorder="little").view(bool))
    at = set_bits >> 3  # each pair's live byte
    event = ((live & 7) << 3).astype(np.uint8)[at] | (set_bits & 7).astype(np.uint8)
    order = np.argsort(event, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(event, minlength=64))))
    return (live >> 3)[at[order]], bounds


class Keyed(NamedTuple):
    """A shard's rows to test for a batch, each with its atom tested first (:func:`_keys`)."""

    rows: np.ndarray  # the rows some word reaches whose key holds for some event, ascending
    key: np.ndarray  # each one's key atom (by slot where the shard is numbered)
    at: np.ndarray  # each node's first position in ``rows`` (and their end): ``nodes + 1``


def _keys(shard: Shard, reach: np.ndarray, sat: np.ndarray) -> Keyed | None:
    """Each row's atom holding for the fewest of the batch's events, among the rows some
    word reaches (``reach``: ``words x nodes``, ``sat``: ``words x atoms``), the rows of a
    clause keyed by the clause's rarest atom (a clause of two rows holds where both do: the
    AND of a row with the other's atom is the clause's): :func:`_rows` tests it first and
    the row's other atoms only where it holds, and never reads the rows whose key holds for
    no event of the batch.  None where the words reach on average under :data:`KEYED` of
    those rows.

    Rich events (few of a shape in a batch) reach nearly every row from every word: at
    100K rich subscriptions, 1,024 events, each of 16 words ~204K of ~275K rows, whose 8
    atoms gathered for each word were ~100 µs of an event's ~190 in the rows step (with
    the keys: 140 against 195 µs, 31 against 36 at 20K).  Keyed by clause, 32% of the rows
    are never read (their key holds for no event) and (row, word) pairs live after the
    key 529K a batch against 615K, rows held 189K against 380K (rows step ~95 -> ~70 µs an
    event).  BEGen's words (a shape or two each) reach 5% of the rows some word reaches:
    there the keys cost more than they save (20 against 15.5 µs an event at 100K)."""
    view = shard.view
    local = reach[:, shard.nodes : shard.nodes + len(view.node_attr)]
    nodes = np.flatnonzero(np.bitwise_or.reduce(local, axis=0))
    sizes = view.node_row[nodes + 1] - view.node_row[nodes]
    if int((local[:, nodes] != 0).sum(dtype=np.int64, axis=0) @ sizes) < (
        KEYED * len(local) * int(sizes.sum())
    ):
        return None
    rows = ranges(view.node_row[nodes], view.node_row[nodes + 1])
    if not len(rows):
        return None
    own = sat[:, shard.atoms : shard.atoms + shard.size]
    held = np.bitwise_count(own).sum(axis=0, dtype=np.int32)  # each atom's events
    # each row's least (events << 32 | atom), atom-major: one gather and a contiguous
    # reduce, not an ``argmin`` along rows of 8 and three gathers
    atoms = np.ascontiguousarray(_atoms(shard).take(rows, axis=0).T, dtype=np.int64)
    packed = (held.astype(np.int64) << 32).take(atoms)
    packed |= atoms
    packed = np.minimum.reduce(packed, axis=0)
    if view.row_clause is not None:  # (a clause's rows are adjacent, in one node)
        clause = view.row_clause.take(rows)
        starts = np.flatnonzero(np.concatenate(([True], clause[1:] != clause[:-1])))
        size = np.diff(np.append(starts, len(rows)))
        packed = np.repeat(np.minimum.reduceat(packed, starts), size)
    key, least = packed & 0xFFFFFFFF, packed >> 32
    some = np.flatnonzero(least != 0)
    rows = rows[some]
    return Keyed(rows, key[some], np.searchsorted(rows, view.node_row))


def _atoms(shard: Shard) -> np.ndarray:
    """A shard's rows (``rows x 8`` atoms), by slot where it is numbered."""
    return shard.view.rows if shard.numbered is None else shard.numbered.rows


def _rows(
    shard: Shard,
    reach: np.ndarray,
    truths: np.ndarray,
    key: Keyed | None,
    gone: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """What one shard matches for the events of one word (``reach`` the word's bits of
    the whole's nodes, ``truths`` of the whole's atoms, ``key`` each reached row's atom
    tested first: :func:`_keys`; ``gone``: its view's clauses removed since, never held):
    the external ids of the clauses held for some event, the (clause, event) pairs as
    positions in those, in event order, and where each event's pairs start (65 entries)."""
    view = shard.view
    local = reach[shard.nodes : shard.nodes + len(view.node_attr)]
    nodes = np.flatnonzero(local != 0)
    if not len(nodes):
        return None
    own = truths[shard.atoms : shard.atoms + shard.size]
    if key is None:
        lo, hi = view.node_row[nodes], view.node_row[nodes + 1]
        rows = ranges(lo, hi)
        mask = np.repeat(local[nodes], hi - lo)
        # (the 8 atoms of the rows gathered atom-major: the AND is then of contiguous rows)
        mask &= np.bitwise_and.reduce(own.take(_atoms(shard).take(rows, axis=0).T), axis=0)
    else:
        lo, hi = key.at[nodes], key.at[nodes + 1]
        at = ranges(lo, hi)
        mask = np.repeat(local[nodes], hi - lo)
        mask &= own.take(key.key[at])
        live = np.flatnonzero(mask != 0)  # (rich 100K: ~70% of the word's keyed rows)
        rows, mask = key.rows[at[live]], mask[live]
        mask &= np.bitwise_and.reduce(own.take(_atoms(shard).take(rows, axis=0).T), axis=0)
    if len(rows) >= DENSE_ROWS * len(view.rows):  # (each subscription once, in order)
        clause, bits = subbits.held(view, rows, mask, gone)
        if not len(clause):
            return None
        return view.exts[clause], *by_event(bits)
    held = np.flatnonzero(mask != 0)  # (the rows whose atoms all hold for some event)
    bits, clause = mask[held], rows[held]
    if view.row_clause is not None and len(held):
        # a clause holds where all its rows hold: the held rows of a clause are adjacent
        # (its rows are, in one node), ANDed by one ``reduceat`` and kept where all held
        clause = view.row_clause.take(clause)
        starts = np.flatnonzero(np.concatenate(([True], clause[1:] != clause[:-1])))
        bits = np.bitwise_and.reduceat(bits, starts)
        count = np.diff(np.append(starts, len(clause)))
        clause = clause[starts]
        whole = count == view.row_at.take(clause + 1) - view.row_at.take(clause)
        bits, clause = bits[whole], clause[whole]
    if gone is not None:
        kept = ~gone.take(clause)
        bits, clause = bits[kept], clause[kept]
    kept = bits != 0
    bits, clause = bits[kept], clause[kept]
    if not len(clause):
        return None
    pairs, bounds = by_event(bits)
    if view.sids is None:
        return view.exts[clause], pairs, bounds
    # a subscription with several clauses: once an event, an event's in subscription
    # order as one event's match gives them (subscription numbers are under 2**48)
    event = np.repeat(np.arange(64, dtype=np.uint64), np.diff(bounds))
    _, once, _ = uniq(event << np.uint64(57) | view.sids[clause[pairs]], first=True)
    counts = np.bincount(event[once].astype(np.int64), minlength=64)
    return view.exts[clause], pairs[once], np.concatenate(([0], np.cumsum(counts)))
