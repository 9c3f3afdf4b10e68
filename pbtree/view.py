"""A PB+tree of one snapshot as sorted arrays: a search in three bisections.

:meth:`pbtree.tree.PBTree.collect` descends the tree and walks the three lists page by
page (~7 page visits, ~20 µs an attribute).  A matcher that keeps a snapshot for many
events (:mod:`betree.packed.flat`) reads each list end to end once instead: its keys ascending
(one Python list, for exact comparison of ints past 2**53 and of strings), its ids end to
end and where each key's ids start.  Then the ids that hold for a value are

* GreaterThan items with a key below it: a prefix of the GT ids;
* LessThan items with a key above it: a suffix of the LT ids;
* Inequality items with another key: the NE ids less one key's run;
* the leaf item equal to it: its ``eq`` and ``bound`` ids (a dict by key);

the same id runs :meth:`~pbtree.tree.PBTree.collect` returns (tests compare them).
Memory: the ids (4 bytes each) and keys; building reads every page once.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from pbtree.keys import int64_array, key_domain
from pbtree.nodes import TAIL, LeafRuns, ListNode
from pbtree.operators import GT, LT, NE
from storage.errors import InvalidInput
from storage.txn import ReadTxn

#: the span of a narrow tree's keys in one list (:attr:`SearchView.narrow`)
NARROW = 1 << 32
#: the most int64 leaf keys kept as a dict (more: :class:`Runs`)
RUNS_DICT = 4096


def _narrow(keys: np.ndarray | None) -> bool:
    """Int64 keys, ascending, less than :data:`NARROW` - 2 apart, with room for one less
    than the first and one more than the last in int64."""
    if keys is None:
        return False
    if not len(keys):
        return True
    first, last = int(keys[0]), int(keys[-1])
    return first > -(1 << 63) and last < (1 << 63) - 1 and last - first < NARROW - 2


def ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``concatenate([arange(a, b) for a, b in zip(lo, hi)])`` in O(1) numpy calls."""
    lens = hi - lo
    total = int(lens.sum())
    if not total:
        return np.empty(0, dtype=np.int64)
    shift = np.repeat(lo - (np.cumsum(lens) - lens), lens)
    shift += np.arange(total, dtype=np.int64)
    return shift


def uniq(keys: np.ndarray, first: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=first, return_counts=True)`` of 1-D ints: the
    distinct keys ascending, (``first``) the least position of each in ``keys`` (else
    empty), and their counts, by one sort.  numpy 2.4.6's ``unique`` took 23 ms on 100K
    int64 (one sort and a mask: 0.8 ms), ~60 µs an event of rich 100K's batches."""
    if first:
        order = np.argsort(keys)
        ordered = keys[order]
    else:
        ordered = np.sort(keys)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))[: len(keys)]
    counts = np.diff(np.append(starts, len(keys)))
    index = np.minimum.reduceat(order, starts) if first and len(starts) else starts[:0]
    return ordered[starts], index, counts


def distinct(ids: np.ndarray) -> bool:
    """Whether no id repeats (one ``bincount``: ids are dense atom numbers)."""
    return len(ids) < 2 or int(np.bincount(ids).max()) == 1


class _List:
    """One list end to end: ``keys`` ascending, item i's ids ``ids[at[i]:at[i + 1]]``;
    ``distinct`` whether no id appears twice (an atom ``a < 3 or a < 9`` can); ``ints``
    the keys as an int64 array when every one is an int64 (None otherwise), so that a
    batch's int values find their cuts in one ``searchsorted``, exactly."""

    __slots__ = ("at", "distinct", "ids", "ints", "keys")

    def __init__(self, keys: Sequence[Any], at: np.ndarray, ids: np.ndarray) -> None:
        self.at = at
        self.ids = ids
        self.distinct = distinct(ids)
        self.ints = int64_array(keys) if not isinstance(keys, IntKeys) else keys.ints
        many = self.ints is not None and len(keys) > RUNS_DICT
        self.keys: Sequence[Any] = IntKeys(self.ints) if many else keys  # type: ignore[arg-type]

    @classmethod
    def read(cls, txn: ReadTxn, space: int, head: int) -> _List:
        """The list whose head sentinel is page ``head``, read end to end."""
        keys: list[Any] = []
        starts: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        base = 0
        page = txn.load_uncached(space, head, ListNode).next
        while page:
            node = txn.load_uncached(space, page, ListNode)
            if node.sentinel == TAIL:
                break
            offs, run = node.flat()
            keys.extend(node.keys)
            starts.append(offs[: -1 : node.nparts] + base)
            ids.append(run)
            base += len(run)
            page = node.next
        at = np.append(np.concatenate(starts) if starts else [], base).astype(np.int64)
        return cls(keys, at, np.concatenate(ids) if ids else np.empty(0, dtype=np.uint32))

    @classmethod
    def merged(cls, lists: Sequence[_List], bases: Sequence[int]) -> _List:
        """Several lists as one, keys merged in order (equal keys side by side), the ids
        of list k offset by ``bases[k]``."""
        order = list(
            heapq.merge(
                *[[(key, k, i) for i, key in enumerate(lst.keys)] for k, lst in enumerate(lists)]
            )
        )
        first = np.cumsum([0] + [len(lst.keys) for lst in lists])  # list k's first item
        shift = np.cumsum([0] + [len(lst.ids) for lst in lists])  # and first id
        lo = np.concatenate([lst.at[:-1] + s for lst, s in zip(lists, shift, strict=False)])
        hi = np.concatenate([lst.at[1:] + s for lst, s in zip(lists, shift, strict=False)])
        item = np.array([first[k] + i for _, k, i in order], dtype=np.int64)
        ids = np.concatenate(
            [lst.ids + np.uint32(b) for lst, b in zip(lists, bases, strict=True)]
            + [np.empty(0, dtype=np.uint32)]
        )
        lo, hi = lo[item], hi[item]
        at = np.zeros(len(item) + 1, dtype=np.int64)
        np.cumsum(hi - lo, out=at[1:])
        return cls([key for key, _, _ in order], at, ids[ranges(lo, hi)])


class IntKeys(Sequence[int]):
    """A list's int64 keys read off their array as Python ints (exact in a bisection
    against floats): a long list of ints without ~36 bytes of objects a key.  Only lists of
    more than :data:`RUNS_DICT` keys use it; :func:`_cut` searches them in one
    ``searchsorted`` (a ``bisect`` through items read one by one measured ~24x slower than
    on a list, on a loaded machine)."""

    __slots__ = ("ints",)

    def __init__(self, ints: np.ndarray) -> None:
        self.ints = ints

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.ints[i].tolist()
        return int(self.ints[i])

    def __len__(self) -> int:
        return len(self.ints)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ints.tolist())


def _cut(keys: Sequence[Any], value: Any, right: bool) -> int:
    """``bisect_right(keys, value)`` if ``right`` else ``bisect_left``: for :class:`IntKeys`
    one ``searchsorted`` of the int that parts the same keys (``x < 2.5`` as ``x < 3``).
    (``type`` tested, not ``isinstance``: against a ``Sequence`` subclass that goes
    through the ABC machinery, ~1 µs a call, four calls an attribute of every event.)"""
    if type(keys) is not IntKeys:
        return (bisect_right if right else bisect_left)(keys, value)
    if isinstance(value, float):
        if math.isinf(value):
            return len(keys) if value > 0 else 0
        value = math.floor(value) if right else math.ceil(value)
    if value >= 1 << 63:
        return len(keys)
    if value < -(1 << 63):
        return 0
    return int(np.searchsorted(keys.ints, value, side="right" if right else "left"))


class Runs(Mapping[Any, np.ndarray]):
    """A tree's leaf runs by key when every key is an int64, read off the arrays end to
    end: what a dict of one array view a key holds, without ~170 bytes a key (a dense
    range workload has a leaf key an atom).  Cost: a lookup is one ``searchsorted``,
    measured ~11x a dict's (11.6 against 1.07 µs on a loaded machine), so only trees of
    more than :data:`RUNS_DICT` keys use it."""

    __slots__ = ("at", "ids", "ints")

    def __init__(self, ints: np.ndarray, at: np.ndarray, ids: np.ndarray) -> None:
        self.ints, self.at, self.ids = ints, at, ids

    def _find(self, key: Any) -> int:
        """The index of ``key`` (equal as a dict would find it: ``2.0`` is ``2``), or -1."""
        if type(key) is float and key.is_integer():
            key = int(key)
        if type(key) is not int or not -(1 << 63) <= key < 1 << 63:
            return -1
        k = int(np.searchsorted(self.ints, key))
        return k if k < len(self.ints) and int(self.ints[k]) == key else -1

    def __getitem__(self, key: Any) -> np.ndarray:
        k = self._find(key)
        if k < 0:
            raise KeyError(key)
        return self.ids[self.at[k] : self.at[k + 1]]

    def __contains__(self, key: object) -> bool:
        return self._find(key) >= 0

    def __iter__(self) -> Iterator[Any]:
        return iter(self.ints.tolist())

    def __len__(self) -> int:
        return len(self.ints)


class SearchView:
    """The search side of one PB+tree in one snapshot (see the module docstring)."""

    __slots__ = (
        "domain",
        "eq",
        "eq_at",
        "eq_distinct",
        "eq_ids",
        "eq_ints",
        "gt",
        "lt",
        "name",
        "narrow",
        "ne",
    )

    def __init__(self, txn: ReadTxn, name: str, record: dict[str, Any]) -> None:
        self.name = name
        self.domain = record["domain"]
        space, lists = record["space"], record["lists"]
        self.gt, self.lt, self.ne = (_List.read(txn, space, lists[k][0]) for k in (GT, LT, NE))
        self.eq: Mapping[Any, np.ndarray] = {}
        keys: list[Any] = []
        starts: list[np.ndarray] = []
        ids: list[np.ndarray] = [np.empty(0, dtype=np.uint32)]
        both = False  # an atom both = and >= one key: its id once (np.unique)
        base = 0
        page = record["first"] if self.domain is not None else 0
        while page:  # the leaves in key order, their runs end to end (a run a key)
            leaf = txn.load_uncached(space, page, LeafRuns)
            offs = leaf.offs.astype(np.int64)
            starts.append(offs[:-1:2] + base)
            both = both or bool(((offs[1::2] > offs[:-1:2]) & (offs[2::2] > offs[1::2])).any())
            keys.extend(leaf.keys)
            ids.append(leaf.ids)
            base += len(leaf.ids)
            page = leaf.next
        at = np.append(np.concatenate(starts) if starts else [], base).astype(np.int64)
        self._index_runs(keys, at, np.concatenate(ids), both)

    def _index_runs(
        self, keys: Sequence[Any] | np.ndarray, at: np.ndarray, ids: np.ndarray, both: bool
    ) -> None:
        """The leaf runs, key k's ``ids[at[k]:at[k + 1]]`` (a key listed twice, from two
        shards, has its runs joined in order), indexed as :meth:`_index_eq` does: in numpy
        when every key is an int64 and no run holds an id twice (a dense range workload has
        a leaf key an atom), else through a dict of runs."""
        ints: np.ndarray | None = keys if isinstance(keys, np.ndarray) else int64_array(keys)
        if ints is None or both:
            eq: dict[Any, np.ndarray] = {}
            for k, key in enumerate(keys):
                run = ids[at[k] : at[k + 1]]
                had = eq.get(key)
                eq[key] = run if had is None else np.concatenate([had, run])
            self.eq = {key: np.unique(run) for key, run in eq.items()} if both else eq
            self._index_eq()
            return
        if len(ints) > 1 and not bool((ints[1:] > ints[:-1]).all()):
            order = np.argsort(ints, kind="stable")
            ints, lo, hi = ints[order], at[:-1][order], at[1:][order]
            ids = ids[ranges(lo, hi)]
            ends = np.cumsum(hi - lo)
            first = np.flatnonzero(np.concatenate([[True], ints[1:] != ints[:-1]]))
            ints, at = ints[first], np.append(np.append(0, ends)[first], ends[-1])
        at = at - at[0]
        self.eq_distinct = distinct(ids)
        self.eq_ints: np.ndarray | None = ints
        self.eq_at, self.eq_ids = at, ids
        if len(ints) > RUNS_DICT:
            self.eq = Runs(ints, at, ids)
        else:
            self.eq = {key: ids[at[k] : at[k + 1]] for k, key in enumerate(ints.tolist())}
        self._set_narrow()

    def _index_eq(self) -> None:
        """Whether no id sits under two keys (an atom ``a in (1, 2)`` does; never twice
        under one); and, when every key is an int64, the runs end to end for a batch's
        int path (:mod:`betree.packed.flatbatch`): keys ascending, where each key's ids start,
        the ids (the dict's runs become views of them: no second copy)."""
        keys = list(self.eq)
        ints = int64_array(keys)
        runs = list(self.eq.values())
        if ints is not None:
            order = np.argsort(ints, kind="stable").tolist()
            keys, runs = [keys[i] for i in order], [runs[i] for i in order]
            ints = ints[order]
        at = np.zeros(len(runs) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in runs], out=at[1:])
        ids = np.concatenate([np.empty(0, dtype=np.uint32), *runs])
        self.eq_distinct = distinct(ids)
        self.eq_ints = ints
        self.eq_at, self.eq_ids = (at, ids) if ints is not None else (at[:1], ids[:0])
        if ints is not None and len(keys) > RUNS_DICT:
            self.eq = Runs(ints, at, ids)
        elif ints is not None:
            self.eq = {key: ids[at[k] : at[k + 1]] for k, key in enumerate(keys)}
        self._set_narrow()

    def _set_narrow(self) -> None:
        #: every key an int64 and each list's keys less than :data:`NARROW` apart: a batch
        #: searches this tree with the others of its kind in one array
        self.narrow = self.domain == "num" and all(
            _narrow(keys) for keys in (self.gt.ints, self.lt.ints, self.ne.ints, self.eq_ints)
        )

    @property
    def nbytes(self) -> int:
        """Memory of the id arrays (keys not counted: Python objects, ~30 bytes each)."""
        runs = (self.gt, self.lt, self.ne)
        ints = sum(int(r.ints.nbytes) for r in runs if r.ints is not None)
        if self.eq_ints is None:  # (the dict's runs are arrays of their own)
            eq = sum(int(a.nbytes) for a in self.eq.values())
        else:  # (the dict's runs are views of these)
            eq = self.eq_ids.nbytes + self.eq_at.nbytes + self.eq_ints.nbytes
        return ints + sum(int(r.ids.nbytes + r.at.nbytes) for r in runs) + int(eq)

    def collect(self, value: Any) -> list[np.ndarray]:
        """The id runs that hold for ``value`` (as :meth:`PBTree.collect`)."""
        if self.domain is None:
            return []
        if key_domain(value) != self.domain:
            raise InvalidInput(f"PB+tree {self.name!r} cannot compare {value!r} to its keys")
        chunks: list[np.ndarray] = []
        eq = self.eq.get(value)
        if eq is not None:
            chunks.append(eq)
        gt, lt, ne = self.gt, self.lt, self.ne
        chunks.append(gt.ids[: gt.at[_cut(gt.keys, value, False)]])
        chunks.append(lt.ids[lt.at[_cut(lt.keys, value, True)] :])
        j, k = _cut(ne.keys, value, False), _cut(ne.keys, value, True)
        if j < k:  # (several items of one key in a merged view)
            chunks.append(ne.ids[: ne.at[j]])
            chunks.append(ne.ids[ne.at[k] :])
        else:
            chunks.append(ne.ids)
        return chunks

    def spans(self, value: Any) -> tuple[np.ndarray | None, list[tuple[int, int, int]]]:
        """:meth:`collect` as the leaf run equal to ``value`` (None: no such key) and the
        slices ``(k, lo, hi)`` of list k (0: GT, 1: LT, 2: NE) whose ids hold: the same
        cuts (kept apart: a list of slices a call measured 1-4 µs slower an attribute on
        BEGen), for a matcher that numbers each list's atoms consecutively and sets
        these as slices (:mod:`betree.packed.slots`)."""
        if self.domain is None:
            return None, []
        if key_domain(value) != self.domain:
            raise InvalidInput(f"PB+tree {self.name!r} cannot compare {value!r} to its keys")
        gt, lt, ne = self.gt, self.lt, self.ne
        cuts = []  # (an empty list has none: rich rules, half the bisections an event)
        if len(gt.ids):
            cuts.append((0, 0, int(gt.at[_cut(gt.keys, value, False)])))
        if len(lt.ids):
            cuts.append((1, int(lt.at[_cut(lt.keys, value, True)]), len(lt.ids)))
        if len(ne.ids):
            j, k = _cut(ne.keys, value, False), _cut(ne.keys, value, True)
            if j < k:  # (several items of one key in a merged view)
                cuts.append((2, 0, int(ne.at[j])))
                cuts.append((2, int(ne.at[k]), len(ne.ids)))
            else:
                cuts.append((2, 0, len(ne.ids)))
        return self.eq.get(value), cuts

    @classmethod
    def merged(cls, views: Sequence[SearchView], bases: Sequence[int]) -> SearchView:
        """One view of several PB+trees on one attribute (the shards of a store), the ids
        of view k offset by ``bases[k]``: a search of it finds what searching each finds."""
        out = cls.__new__(cls)
        out.name = views[0].name
        # one schema type, one domain (an empty tree has none)
        out.domain = next((v.domain for v in views if v.domain is not None), None)
        out.gt, out.lt, out.ne = (
            _List.merged([getattr(v, part) for v in views], bases) for part in ("gt", "lt", "ne")
        )
        each = [v.eq_ints for v in views if v.eq_ints is not None]
        if len(each) == len(views):  # the runs end to end, in numpy
            shift = np.cumsum([0] + [len(v.eq_ids) for v in views])
            ints = np.concatenate([*each, np.zeros(0, dtype=np.int64)])
            at = np.append(
                np.concatenate([v.eq_at[:-1] + s for v, s in zip(views, shift[:-1], strict=True)]),
                shift[-1],
            )
            ids = np.concatenate(
                [v.eq_ids + np.uint32(b) for v, b in zip(views, bases, strict=True)]
                + [np.empty(0, dtype=np.uint32)]
            )
            out._index_runs(ints, at.astype(np.int64), ids, False)
            return out
        eq: dict[Any, np.ndarray] = {}
        for view, base in zip(views, bases, strict=True):
            for key, ids in view.eq.items():
                ids = ids + np.uint32(base)
                had = eq.get(key)
                eq[key] = ids if had is None else np.concatenate([had, ids])
        out.eq = eq
        out._index_eq()
        return out
