"""Invariant checks of a PB+tree, reporting every violation with its page id.

Two tiers, as in BTrees' ``_check``: a walk from the root carrying key bounds (order,
separators, equal leaf depth, fill), then whole-structure facts: the leaf chain in both
directions, each list's order, links and sentinels, every leaf item's three pointers
against the paper's definitions, each id run where its predicate requires, and page
accounting (every page of the tree's space reached exactly once).

The leaves are read as arrays (:class:`~pbtree.nodes.LeafArrays`, no per-item lists) and
their facts verified in bulk: every key of the domain and ascending along the walk (one
list compared in C, or an int64 array in numpy), each leaf's first and last key within its
parent's bounds, the runs' order and the chain's links, all leaves at once.  So are the
list and pointer facts (:class:`_Lists`: each list's nodes' runs joined and checked with
numpy, every leaf item's pointers and ``bound`` run against the lists by cumulative counts
and one sort of (item, id) pairs).  Only when a bulk pass finds a fault are the leaves
decoded into per-item lists and the facts walked again item by item to name each one (the
messages do not change; a leaf's key faults are listed where the walk met the leaf).  List
keys are located among the leaf keys by ``searchsorted`` when they are int64s (a dict
otherwise).  A sound tree's check returns its ``(operator, constant, id)`` columns from the
pages it read, so that the index check compares them with the atoms without reading the
tree again.

Cost: reads and decodes every page of the tree once, bypassing the page cache so that
it sees what is on disk; O(n log n) in the number of ids, in numpy or C but for a few
Python steps per page.  A 100K dense store's 20 trees (71.5K pages): ~2 CPU s, against
~5-6 when the leaves were decoded item by item (docs/bench/dense-load, pbcheck31).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from contextlib import suppress
from itertools import chain, islice, pairwise
from operator import lt
from typing import TYPE_CHECKING, Any

import numpy as np

from pbtree.keys import Numbers, int64_array, numbers
from pbtree.nodes import (
    HEAD,
    LIST_NAMES,
    REAL,
    TAIL,
    InternalNode,
    LeafArrays,
    LeafNode,
    ListNode,
)
from pbtree.operators import GT, LIST_CODES, LT, NE, SLOT
from storage.errors import BexdbError, CheckFailed

if TYPE_CHECKING:
    from pbtree.tree import PBTree


def _sorted_unique(run: list[int]) -> bool:
    return all(a < b for a, b in pairwise(run))


def _before(a: Any, b: Any) -> bool:
    """``a < b``; False for keys that do not compare (a key of the other domain)."""
    try:
        return bool(a < b)
    except TypeError:
        return False


class _Checker:
    def __init__(self, tree: PBTree) -> None:
        self.tree = tree
        self.txn = tree.txn
        self.rec = tree.record
        self.space = self.rec["space"]
        self.errors: list[str] = []
        self.seen: dict[int, str] = {}
        self.walked: list[LeafArrays | LeafNode] = []  # the leaves, as the walk read them
        self.arrays: list[LeafArrays] = []  # those read from the snapshot (all, unless dirty)
        self.bounds: list[tuple[Any, Any, int]] = []  # per leaf: lo, hi, errors before it
        self.leaves: list[LeafNode] = []  # decoded item by item, only to name a fault
        self.runs: tuple[np.ndarray, np.ndarray] | None = None  # (item_runs)
        self.keys: tuple[list[Any], np.ndarray | None] | None = None  # (leaf_keys)

    def error(self, page: int, message: str) -> None:
        self.errors.append(f"page {page}: {message}")

    def load(self, page: int, cls: Any, role: str) -> Any:
        """Load a page once; report revisits, missing and undecodable pages."""
        if page in self.seen:
            self.error(page, f"reached twice (as {self.seen[page]} and as {role})")
            return None
        self.seen[page] = role
        try:
            return self.txn.load_uncached(self.space, page, cls)
        except BexdbError as exc:
            self.error(page, f"unreadable {role}: {exc}")
            return None

    # -- tier 1: the B+tree walk ---------------------------------------------------------

    def walk(self, page: int, lo: Any, hi: Any, depth: int, is_root: bool) -> None:
        rec = self.rec
        if depth < rec["height"]:
            node = self.load(page, InternalNode, f"internal node at depth {depth}")
            if node is None:
                return
            self.check_keys(page, node.keys, lo, hi, "separator")
            if len(node.children) != len(node.keys) + 1:
                self.error(page, f"{len(node.keys)} separators but {len(node.children)} children")
            low = 2 if is_root else (rec["internal_cap"] + 1) // 2
            if not low <= len(node.children) <= rec["internal_cap"]:
                self.error(
                    page,
                    f"{len(node.children)} children outside [{low}, {rec['internal_cap']}]",
                )
            bounds = [lo, *node.keys, hi]
            for i, child in enumerate(node.children):
                self.walk(child, bounds[i], bounds[i + 1], depth + 1, False)
            return
        leaf = self.load(page, LeafArrays, "leaf")
        if leaf is None:
            return
        if isinstance(leaf, LeafNode):  # a write transaction's dirty page, as its writer left it
            with suppress(ValueError, OverflowError):  # (else, columns of different lengths
                leaf = LeafArrays.from_fields(page, leaf.to_fields())  # say: item by item)
        self.walked.append(leaf)
        self.bounds.append((lo, hi, len(self.errors)))  # (its keys: leaf_facts)
        n = len(leaf.keys)
        if isinstance(leaf, LeafArrays):
            self.arrays.append(leaf)
            parts = max(len(leaf.offs) - 1, 0)  # (the eq and bound runs, alternating)
            columns: tuple[Any, ...] = (leaf.gtp, leaf.ltp, leaf.nep)
        else:  # (a write transaction's dirty page, as its writer left it)
            parts, columns = 2 * n, (leaf.eq, leaf.bound, leaf.gtp, leaf.ltp, leaf.nep)
        if parts != 2 * n or not all(len(column) == n for column in columns):
            self.error(page, "leaf columns differ in length")
        low = 0 if is_root else rec["leaf_cap"] // 2
        if not low <= n <= rec["leaf_cap"]:
            self.error(page, f"{n} items outside [{low}, {rec['leaf_cap']}]")

    def leaf_facts(self) -> None:
        """Every leaf's keys (of the domain, ascending, within its parent's bounds), its
        runs' order and the leaf chain: all leaves at once (the keys as one list, compared
        in C or numpy; each leaf's first and last key against its bounds); only on a fault
        are the leaves decoded item by item and checked one by one, which names it (each
        leaf's key errors where the walk would have put them)."""
        if (
            self.in_bulk()
            and self.keys_in_bulk()
            and self.links_in_bulk()
            and _runs_sorted(*self.item_runs())
        ):
            return
        self.itemize()
        found = self.errors
        for leaf, (lo, hi, mark) in reversed(list(zip(self.leaves, self.bounds, strict=True))):
            self.errors = []
            self.check_keys(leaf.page, leaf.keys, lo, hi, "key")
            found[mark:mark] = self.errors
        self.errors = found
        self.leaf_runs()
        self.chain()

    def leaf_keys(self) -> tuple[list[Any], np.ndarray | None]:
        """Every leaf key in walk order, and as an int64 array when every one is an int."""
        if self.keys is None:
            keys = list(chain.from_iterable(leaf.keys for leaf in self.walked))
            self.keys = keys, int64_array(keys)
        return self.keys

    def keys_in_bulk(self) -> bool:
        """Whether every leaf key is of the tree's domain, the keys ascend strictly along
        the walk, and each leaf's first and last keys lie within its parent's bounds (so
        all do): what :meth:`check_keys` verifies of each leaf, and the chain's key order."""
        keys, have = self.leaf_keys()
        types = {str} if self.rec["domain"] == "str" else {int, float}
        if not types.issuperset(map(type, keys)):
            return False
        if have is not None:
            if len(have) > 1 and not bool((have[1:] > have[:-1]).all()):
                return False
        elif not all(map(lt, keys, islice(keys, 1, None))):
            return False
        for leaf, (lo, hi, _) in zip(self.arrays, self.bounds, strict=True):
            if leaf.keys and (
                (lo is not None and leaf.keys[0] < lo) or (hi is not None and leaf.keys[-1] >= hi)
            ):
                return False
        return True

    def links_in_bulk(self) -> bool:
        """Whether the leaf chain links the walk's leaves both ways, first to last."""
        pages = [leaf.page for leaf in self.arrays]
        if not pages:
            return True
        return (
            self.rec["first"] == pages[0]
            and self.rec["last"] == pages[-1]
            and [leaf.prev for leaf in self.arrays] == [0, *pages[:-1]]
            and [leaf.next for leaf in self.arrays] == [*pages[1:], 0]
        )

    def in_bulk(self) -> bool:
        """Whether every leaf was read as arrays (a write transaction's dirty leaves are
        its writer's nodes: then the leaves are checked item by item)."""
        return len(self.arrays) == len(self.walked)

    def itemize(self) -> None:
        """Decode the leaves into per-item lists, for the checks that name a fault."""
        if len(self.leaves) != len(self.walked):
            self.leaves = [
                leaf.node() if isinstance(leaf, LeafArrays) else leaf for leaf in self.walked
            ]

    def leaf_runs(self) -> None:
        """Every leaf item's ``=`` and ``bound`` runs ascend strictly: all leaves' runs at
        once in numpy; the leaves are gone through item by item only when one does not, to
        name it."""
        offs, flat = self.item_runs()
        if not _runs_sorted(offs, flat):
            self.itemize()
            for leaf in self.leaves:
                self.leaf_items(leaf)

    def item_runs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every leaf item's ``=`` and ``bound`` runs, interleaved (``=`` the even ones),
        as offsets over one id array: made once, for the runs' order, the pointers' bound
        runs and the tree's columns; from the leaves' arrays, or from their per-item lists
        when those arrays are not well formed (offsets not from 0 to the ids' end, rising,
        two a key)."""
        if self.runs is None:
            self.runs = _runs_in_bulk(self.arrays) if self.in_bulk() else None
        if self.runs is None:
            self.itemize()
            runs = [
                run
                for leaf in self.leaves
                for pair in zip(leaf.eq, leaf.bound, strict=False)
                for run in pair
            ]
            offs = np.zeros(len(runs) + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, runs), np.int64, count=len(runs)), out=offs[1:])
            flat = np.fromiter(chain.from_iterable(runs), np.int64, count=int(offs[-1]))
            self.runs = offs, flat
        return self.runs

    def column(self, name: str) -> np.ndarray:
        """One pointer column of every leaf, end to end, as int64."""
        if self.leaves or not self.in_bulk():
            self.itemize()
            return _column(self.leaves, name)
        none = np.zeros(0, dtype=np.uint64)
        return np.concatenate([none, *(getattr(leaf, name) for leaf in self.arrays)]).astype(
            np.int64
        )

    def leaf_items(self, leaf: LeafNode) -> None:
        page = leaf.page
        for i in range(min(len(leaf.keys), len(leaf.eq), len(leaf.bound))):
            for name, run in (("=", leaf.eq[i]), ("bound", leaf.bound[i])):
                if not _sorted_unique(run):
                    self.error(page, f"item {leaf.keys[i]!r}: {name} ids not sorted and unique")

    def check_keys(self, page: int, keys: list[Any], lo: Any, hi: Any, what: str) -> None:
        domain = self.rec["domain"]
        for i, key in enumerate(keys):
            if (domain == "str") != isinstance(key, str):
                self.error(page, f"{what} {key!r} is not of the tree's domain {domain!r}")
                return
            if i and not _before(keys[i - 1], key):
                self.error(page, f"{what}s out of order: {keys[i - 1]!r} then {key!r}")
            if lo is not None and key < lo:
                self.error(page, f"{what} {key!r} below the bound {lo!r} from the parent")
            if hi is not None and key >= hi:
                self.error(page, f"{what} {key!r} not below the bound {hi!r} from the parent")

    # -- tier 2: whole-structure facts ---------------------------------------------------------

    def chain(self) -> None:
        """The leaf chain visits the leaves of the walk, in order, linked both ways."""
        leaves = self.leaves
        if not leaves:
            return
        if self.rec["first"] != leaves[0].page:
            self.error(leaves[0].page, f"first leaf is {self.rec['first']} in the root record")
        if self.rec["last"] != leaves[-1].page:
            self.error(leaves[-1].page, f"last leaf is {self.rec['last']} in the root record")
        for i, leaf in enumerate(leaves):
            want_prev = leaves[i - 1].page if i else 0
            want_next = leaves[i + 1].page if i + 1 < len(leaves) else 0
            if leaf.prev != want_prev:
                self.error(leaf.page, f"prev link {leaf.prev}, expected {want_prev}")
            if leaf.next != want_next:
                self.error(leaf.page, f"next link {leaf.next}, expected {want_next}")
        keys = [k for leaf in leaves for k in leaf.keys]
        for a, b in pairwise(keys):
            if not _before(a, b):
                self.error(0, f"leaf chain keys out of order: {a!r} then {b!r}")

    def list_items(self, kind: int) -> list[tuple[Any, int, list[list[int]]]]:
        """Walk one list head to tail; return its items ``(key, node page, runs)``."""
        name = LIST_NAMES[kind]
        head, tail = self.rec["lists"][kind]
        cap = self.rec["list_cap"]
        items: list[tuple[Any, int, list[list[int]]]] = []
        prev, page = 0, head
        while page:
            node = self.load(page, ListNode, f"{name} list node")
            if node is None:
                return items
            if node.list_kind != kind:
                self.error(page, f"in the {name} list but marked as {LIST_NAMES[node.list_kind]}")
            if node.prev != prev:
                self.error(page, f"{name} list: prev link {node.prev}, expected {prev}")
            want = HEAD if page == head else TAIL if page == tail else REAL
            if node.sentinel != want:
                self.error(page, f"{name} list: sentinel mark {node.sentinel}, expected {want}")
            if node.sentinel != REAL and node.keys:
                self.error(page, f"{name} list: sentinel holds {len(node.keys)} items")
            if node.sentinel == REAL and not 1 <= len(node.keys) <= cap:
                self.error(page, f"{name} list: {len(node.keys)} items outside [1, {cap}]")
            offs, _ = node.flat()
            if len(offs) != len(node.keys) * node.nparts + 1:
                self.error(page, f"{name} list: {len(offs)} offsets for {len(node.keys)} items")
                return items
            for i, key in enumerate(node.keys):
                runs = [node.run(i, part) for part in range(node.nparts)]
                if not any(runs):
                    self.error(page, f"{name} list item {key!r} holds no ids")
                if not all(_sorted_unique(run) for run in runs):
                    self.error(page, f"{name} list item {key!r}: ids not sorted and unique")
                if items and not items[-1][0] < key:
                    self.error(page, f"{name} list out of order: {items[-1][0]!r} then {key!r}")
                items.append((key, page, runs))
            if page == tail:
                if node.next:
                    self.error(page, f"{name} list: tail has a next link {node.next}")
                return items
            prev, page = page, node.next
        self.error(prev, f"{name} list ends without reaching its tail {tail}")
        return items

    def pointers(self, lists: list[list[tuple[Any, int, list[list[int]]]]]) -> None:
        """Every leaf item points where the paper defines, and holds what it must."""
        keyset = {key for leaf in self.leaves for key in leaf.keys}
        for kind, items in enumerate(lists):
            for key, page, _ in items:
                if key not in keyset:
                    self.error(page, f"{LIST_NAMES[kind]} list key {key!r} has no leaf item")
        keys = [[item[0] for item in items] for items in lists]
        pages = [[item[1] for item in items] for items in lists]
        by_key = [{item[0]: item[2] for item in items} for items in lists]
        heads = [self.rec["lists"][k][0] for k in (GT, LT, NE)]
        tail_lt = self.rec["lists"][LT][1]
        count = 0
        for leaf in self.leaves:
            for i, key in enumerate(leaf.keys):
                where = f"leaf item {key!r}"
                for kind, column in ((GT, leaf.gtp), (NE, leaf.nep)):
                    j = bisect_right(keys[kind], key)
                    want = pages[kind][j - 1] if j else heads[kind]
                    if column[i] != want:
                        self.error(
                            leaf.page,
                            f"{where}: {LIST_NAMES[kind]} pointer {column[i]}, expected {want}",
                        )
                j = bisect_left(keys[LT], key)
                want = pages[LT][j] if j < len(keys[LT]) else tail_lt
                if leaf.ltp[i] != want:
                    self.error(
                        leaf.page, f"{where}: LessThan pointer {leaf.ltp[i]}, expected {want}"
                    )
                gt_runs = by_key[GT].get(key, [[], []])
                lt_runs = by_key[LT].get(key, [[], []])
                bound = sorted(set(gt_runs[0]) | set(lt_runs[0]))
                if leaf.bound[i] != bound:
                    self.error(
                        leaf.page,
                        f"{where}: bound ids {leaf.bound[i]} but the lists hold >= / <= {bound}",
                    )
                used = leaf.eq[i] or any(key in by_key[kind] for kind in (GT, LT, NE))
                if not used:
                    self.error(leaf.page, f"{where}: no predicate uses it")
                count += len(leaf.eq[i])
        count += sum(len(run) for items in lists for _, _, runs in items for run in runs)
        if count != self.rec["count"]:
            self.error(0, f"root record counts {self.rec['count']} predicates, found {count}")

    def accounting(self) -> None:
        stored = set(self.txn.space_pages(self.space))
        for page in sorted(stored - self.seen.keys()):
            self.error(page, "orphaned: stored in the tree's space but unreachable")
        for page in sorted(self.seen.keys() - stored):
            self.error(page, f"reached as {self.seen[page]} but not stored")


def lists_in_bulk(tree: PBTree) -> bool:
    """Whether the bulk verification of the lists and pointers (:class:`_Lists`) finds them
    sound: what :func:`check_tree` trusts before walking them item by item (for tests)."""
    if not tree.exists:
        return True
    checker = _Checker(tree)
    checker.walk(checker.rec["root"], None, None, 1, True)
    return _Lists(checker).fine()


def check_tree(tree: PBTree) -> Columns:
    """Raise :class:`CheckFailed` listing every broken invariant of ``tree``; else return
    its predicates as :meth:`PBTree.predicate_columns` lists them (in another order; the
    constants an int64 array when every key is one), from the pages the check read: a
    caller comparing them with the atoms reads the tree once, not twice."""
    if not tree.exists:
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    checker = _Checker(tree)
    checker.walk(checker.rec["root"], None, None, 1, True)
    checker.leaf_facts()
    mark, seen = len(checker.errors), dict(checker.seen)
    bulk = _Lists(checker)
    if not bulk.fine():  # a fault somewhere: every list and pointer fact, one by one
        checker.errors, checker.seen = checker.errors[:mark], seen
        checker.itemize()
        lists = [checker.list_items(kind) for kind in (GT, LT, NE)]
        if not checker.errors:  # pointer facts are meaningless over a broken shape
            checker.pointers(lists)
    checker.accounting()
    if checker.errors:
        raise CheckFailed(f"PB+tree {tree.name!r}", checker.errors)
    return bulk.columns()


#: per predicate: operator code, constant, id (:meth:`PBTree.predicate_columns`)
Columns = tuple[np.ndarray, np.ndarray, np.ndarray]


class _Lists:
    """The lists and the leaves' pointers and ``bound`` runs verified in bulk.

    :meth:`fine` is True when every fact :meth:`_Checker.list_items` and
    :meth:`_Checker.pointers` check holds; else the caller takes back the pages it marked
    seen and the errors it added, and walks item by item, which names every fault.
    """

    def __init__(self, checker: _Checker) -> None:
        self.checker = checker
        # kept by a sound pass, for columns(): the leaf keys (an int64 array, when they
        # all are one, else a list), each list's items' places among them, its runs
        self.keys: Any = []
        self.found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def columns(self) -> Columns:
        """The tree's ``(operator, constant, id)`` columns, from what :meth:`fine` read:
        the leaves' ``=`` runs, then each list's runs (part by part)."""
        offs, flat = self.checker.item_runs()
        keys = self.keys
        if not isinstance(keys, np.ndarray):
            table = np.empty(len(keys), dtype=object)
            table[:] = keys
            keys = table
        eq_sizes = np.diff(offs)[0::2]
        codes = [np.full(len(eq_sizes), SLOT["="], dtype=np.int8)]
        consts, sizes = [keys], [eq_sizes]
        ids = [flat[_ranges(offs[0:-1:2], eq_sizes)]]
        for kind, (at, offsets, members) in zip((GT, LT, NE), self.found, strict=True):
            ops = LIST_CODES[kind]
            codes.append(np.tile(np.array(ops, dtype=np.int8), len(at)))
            consts.append(np.repeat(keys[at], len(ops)))
            sizes.append(np.diff(offsets))
            ids.append(members)
        per = np.concatenate(sizes)
        return (
            np.repeat(np.concatenate(codes), per),
            np.repeat(np.concatenate(consts), per),
            np.concatenate(ids),
        )

    def fine(self) -> bool:
        before = len(self.checker.errors)
        lists = []
        for kind in (GT, LT, NE):
            found = self._list(kind)
            if found is None or len(self.checker.errors) != before:
                return False
            lists.append(found)
        return self._pointers(lists)

    def _list(self, kind: int) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray] | None:
        """One list head to tail: its keys, each item's page, and per item its runs
        (``offs`` over ``ids``, ``nparts`` a item); None on any fault."""
        c = self.checker
        head, tail = c.rec["lists"][kind]
        cap = c.rec["list_cap"]
        parts = 1 if kind == NE else 2
        keys: list[Any] = []
        pages: list[int] = []
        counts: list[int] = []
        offsets: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        prev, page = 0, head
        while page:
            node = c.load(page, ListNode, f"{LIST_NAMES[kind]} list node")
            if node is None or node.list_kind != kind or node.prev != prev:
                return None
            if node.sentinel != (HEAD if page == head else TAIL if page == tail else REAL):
                return None
            n = len(node.keys)
            if (n if node.sentinel != REAL else not 1 <= n <= cap) or node.nparts != parts:
                return None
            offs, run = node.flat()
            if len(offs) != n * parts + 1:
                return None
            keys.extend(node.keys)
            pages.append(page)
            counts.append(n)
            offsets.append(offs)
            ids.append(run)
            if page == tail:
                if node.next:
                    return None
                # the nodes' runs and keys, all at once: rising, no item without ids
                joined = _joined_runs(offsets, ids)
                if joined is None or not _runs_sorted(*joined):
                    return None
                if not all(map(lt, keys, islice(keys, 1, None))):
                    return None
                if bool((np.diff(joined[0]).reshape(-1, parts).sum(axis=1) == 0).any()):
                    return None
                return keys, np.repeat(np.array(pages, dtype=np.int64), counts), *joined
            prev, page = page, node.next
        return None

    def _pointers(self, lists: list[tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]]) -> bool:
        """Every leaf item's three pointers, its ``bound`` run and use, and the count."""
        c = self.checker
        keys, have = c.leaf_keys()
        located = _locator(keys, have)
        if located is None:
            return False
        locate, self.keys = located
        self.found = []
        n = len(keys)
        used = np.zeros(n, dtype=bool)
        rows, members = [], []
        count = 0
        for kind, (lkeys, pages, offs, ids) in enumerate(lists):
            at = locate(lkeys)
            if at is None:
                return False  # a list key with no leaf item
            self.found.append((at, offs, ids))
            mark = np.zeros(n, dtype=np.int64)
            mark[at] = 1
            used[at] = True
            seen = np.cumsum(mark)  # list items with a key <= each leaf key
            head, tail = c.rec["lists"][kind]
            if kind in (GT, NE):  # the item with the biggest key <= the leaf key, or the head
                want = np.insert(pages, 0, head)[seen]
                got = c.column("gtp" if kind == GT else "nep")
            else:  # the item with the smallest key >= the leaf key, or the tail
                want = np.append(pages, tail)[seen - mark]
                got = c.column("ltp")
            if not np.array_equal(want, got):
                return False
            count += len(ids)
            if kind != NE:  # part 0 (>=, <=) of an item is in its key's bound run
                starts, stops = offs[0:-1:2], offs[1::2]
                size = stops - starts
                rows.append(np.repeat(at, size))
                members.append(ids[_ranges(starts, size)])
        offs, flat = c.item_runs()
        if len(offs) != 2 * n + 1:
            return False  # (leaf columns of different lengths: named item by item)
        sizes = np.diff(offs)
        eq_lens, bound_lens = sizes[0::2], sizes[1::2]
        used |= eq_lens > 0
        if not used.all():
            return False
        count += int(eq_lens.sum())
        if count != c.rec["count"]:
            return False
        got_ids = flat[_ranges(offs[1::2], bound_lens)]
        none = np.zeros(0, np.int64)
        pairs = np.stack([np.concatenate([none, *rows]), np.concatenate([none, *members])])
        if pairs.shape[1]:
            order = np.lexsort((pairs[1], pairs[0]))
            pairs = pairs[:, order]
            new = np.ones(pairs.shape[1], dtype=bool)
            new[1:] = (pairs[0, 1:] != pairs[0, :-1]) | (pairs[1, 1:] != pairs[1, :-1])
            pairs = pairs[:, new]
        want_rows = np.repeat(np.arange(n, dtype=np.int64), bound_lens)
        return np.array_equal(pairs[0], want_rows) and np.array_equal(pairs[1], got_ids)


def _locator(keys: list[Any], have: np.ndarray | None) -> tuple[Any, Any] | None:
    """A function of list keys to their items' places among the leaf ``keys`` (None when
    one has no item), and the keys (``have``, their int64 array when they all are one), or
    None when the leaf keys are not strictly ascending.  Keys all ints of int64 (the dense
    workloads' every tree): one array and ``searchsorted``; else a dict."""
    if have is not None and len(have) > 1 and not bool((have[1:] > have[:-1]).all()):
        return None
    known = numbers(keys) if have is None else None
    by_number = _number_locator(known) if known is not None else None
    if known is not None:  # (numbers: strictly ascending, so distinct, with no dict built)
        if not all(map(lt, keys, islice(keys, 1, None))):
            return None
        where = None
    else:
        where = None if have is not None else {k: i for i, k in enumerate(keys)}
        if where is not None and len(where) != len(keys):
            return None

    def locate(lkeys: list[Any]) -> np.ndarray | None:
        want = int64_array(lkeys) if have is not None else None
        if have is not None and want is not None:
            at = np.searchsorted(have, want)
            if len(want) and (int(at.max()) >= len(have) or bool((have[at] != want).any())):
                return None
            return at.astype(np.int64)
        placed = by_number(lkeys) if by_number is not None else None
        if placed is not None:
            return placed
        table = where if where is not None else {k: i for i, k in enumerate(keys)}
        try:
            return np.fromiter((table[k] for k in lkeys), dtype=np.int64, count=len(lkeys))
        except KeyError:
            return None

    return locate, (keys if have is None else have)


def _number_locator(have: Numbers) -> Any:
    """A function of list keys to their places among a float domain's leaf keys ``have``
    (ints and floats) by type and bits, in numpy (a dict of 100K Python floats, ~1 s a
    tree at 100K dense float); None when a key is not one of them so (the caller's dict
    decides, by Python's equality)."""
    places = np.arange(len(have), dtype=np.int64)
    sides = []
    for flag in (False, True):
        mine = have.is_float == flag
        order = np.argsort(have.bits[mine], kind="stable")
        sides.append((have.bits[mine][order], places[mine][order]))

    def locate(lkeys: list[Any]) -> np.ndarray | None:
        want = numbers(lkeys)
        if want is None:
            return None
        at = np.zeros(len(want), dtype=np.int64)
        for flag, (bits, where) in zip((False, True), sides, strict=True):
            rows = want.is_float == flag
            if not rows.any():
                continue
            if not len(bits):
                return None
            k = np.minimum(np.searchsorted(bits, want.bits[rows]), len(bits) - 1)
            if bool((bits[k] != want.bits[rows]).any()):
                return None
            at[rows] = where[k]
        return at

    return locate


def _column(leaves: list[LeafNode], name: str) -> np.ndarray:
    return np.fromiter(chain.from_iterable(getattr(leaf, name) for leaf in leaves), np.int64)


def _runs_in_bulk(leaves: list[LeafArrays]) -> tuple[np.ndarray, np.ndarray] | None:
    """The leaves' runs as :meth:`_Checker.item_runs` gives them, from their arrays, or None
    when a leaf's offsets are not ``2n + 1`` rising from 0 to its ids' end."""
    if any(len(leaf.offs) != 2 * len(leaf.keys) + 1 for leaf in leaves):
        return None
    return _joined_runs([leaf.offs for leaf in leaves], [leaf.ids for leaf in leaves])


def _joined_runs(
    offsets: list[np.ndarray], ids: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Pages' runs (each page's ``offs`` over its ``ids``) as one: offsets over the ids end
    to end (int64); None when a page's offsets do not rise from 0 to its ids' end."""
    none = np.zeros(0, dtype=np.uint32)
    offs = np.concatenate([none, *offsets]).astype(np.int64)
    lens = np.fromiter(map(len, offsets), np.int64, count=len(offsets))
    sizes = np.fromiter(map(len, ids), np.int64, count=len(ids))
    ends = np.cumsum(lens)
    starts = ends - lens
    if bool((offs[starts] != 0).any()) or bool((offs[ends - 1] != sizes).any()):
        return None
    step = np.diff(offs)
    step[starts[1:] - 1] = 0  # (from one page's last offset to the next one's first)
    if bool((step < 0).any()):
        return None
    offs += np.repeat(np.cumsum(sizes) - sizes, lens)
    keep = np.ones(len(offs), dtype=bool)
    keep[starts[1:]] = False  # (a page's first offset is the previous one's last)
    flat = np.concatenate([none, *ids]).astype(np.int64)
    return (offs[keep] if len(offsets) else np.zeros(1, dtype=np.int64)), flat


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The indices ``starts[j] .. starts[j] + sizes[j]`` for every j, concatenated."""
    offsets = np.cumsum(sizes) - sizes
    return np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - offsets, sizes)


def _runs_sorted(offs: np.ndarray, ids: np.ndarray) -> bool:
    """Whether every run ``ids[offs[k] : offs[k + 1]]`` ascends strictly."""
    if len(ids) < 2:
        return True
    rising = ids[1:] > ids[:-1]
    starts = offs[1:-1]
    starts = starts[(starts > 0) & (starts < len(ids))]
    rising[starts - 1] = True  # (a run's first id follows the previous run's last)
    return bool(rising.all())
