"""Bottom-up construction of a PB+tree from predicates sorted by constant.

A bulk load knows every predicate of an attribute at once, so instead of inserting them
one by one (each insert re-pointing leaf items), it packs the leaves and the three lists
in key order and computes every leaf item's pointers with one merge walk: O(n) work and
each page written once.  The result satisfies every invariant of :mod:`pbtree.check`.

Cost: one pass over the sorted predicates, one page write per node.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import Any

from pbtree.keys import key_domain
from pbtree.nodes import GT, HEAD, LT, NE, REAL, TAIL, InternalNode, LeafNode, ListNode
from pbtree.tree import DEFAULT_CAPS, NS, PBTree
from storage.errors import InvalidInput
from storage.txn import WriteTxn

_SLOT = {"=": 0, ">=": 1, ">": 2, "<=": 3, "<": 4, "!=": 5}


def _chunks(n: int, cap: int, low: int) -> list[tuple[int, int]]:
    """Split ``n`` items into runs of at most ``cap`` and (unless only one) at least ``low``."""
    if n <= cap:
        return [(0, n)]
    count = -(-n // cap)
    size, extra = divmod(n, count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    assert all(end - start >= low for start, end in out)
    return out


def build(
    txn: WriteTxn,
    name: str,
    predicates: Iterable[tuple[Any, str, int]],
    *,
    leaf_cap: int | None = None,
    internal_cap: int | None = None,
    list_cap: int | None = None,
) -> PBTree:
    """Create the tree ``name`` from ``(constant, operator, id)`` sorted by constant.

    The tree must not exist yet.  Duplicate triples are harmless; constants must be of one
    domain (numbers or strings) and in ascending order.
    """
    if txn.get(NS, name.encode()) is not None:
        raise InvalidInput(f"PB+tree {name!r} already exists; bulk build needs a new one")
    caps = {**DEFAULT_CAPS, **txn.store.settings.get("pbtree", {})}
    for key, value in (
        ("leaf_cap", leaf_cap),
        ("internal_cap", internal_cap),
        ("list_cap", list_cap),
    ):
        if value is not None:
            caps[key] = value
    # group by constant: per key six sorted id runs (=, >=, >, <=, <, !=)
    keys: list[Any] = []
    runs: list[list[list[int]]] = []
    domain = None
    count = 0
    for key, group in groupby(predicates, key=lambda p: p[0]):
        d = key_domain(key)
        if domain is None:
            domain = d
        elif d != domain or (keys and not keys[-1] < key):
            raise InvalidInput(
                f"bulk build of {name!r}: constants out of order or mixed at {key!r}"
            )
        slots: list[set[int]] = [set(), set(), set(), set(), set(), set()]
        for _, op, ident in group:
            slots[_SLOT[op]].add(ident)
        keys.append(key)
        sorted_runs = [sorted(s) for s in slots]
        runs.append(sorted_runs)
        count += sum(len(r) for r in sorted_runs)

    tree = PBTree(
        txn,
        name,
        leaf_cap=caps["leaf_cap"],
        internal_cap=caps["internal_cap"],
        list_cap=caps["list_cap"],
    )
    rec = tree.record
    space = rec["space"]
    # drop the empty root leaf the constructor made; rebuild everything below the record
    txn.free(space, rec["root"])

    # -- the three lists -------------------------------------------------------------------
    list_parts = {GT: (1, 2), LT: (3, 4), NE: (5,)}
    where: dict[int, dict[Any, int]] = {}  # list kind -> key -> node page
    for kind, part_slots in list_parts.items():
        head, tail = rec["lists"][kind]
        items = [(k, [r[s] for s in part_slots]) for k, r in zip(keys, runs, strict=True)]
        items = [(k, parts) for k, parts in items if any(parts)]
        where[kind] = {}
        pages: list[int] = []
        for start, end in _chunks(len(items), rec["list_cap"], 1) if items else []:
            page = txn.alloc()
            node_runs = [part for _, parts in items[start:end] for part in parts]
            pages.append(page)
            node = ListNode(page, kind, REAL, 0, 0, [k for k, _ in items[start:end]], node_runs)
            txn.put_new(space, page, node)
            for k, _ in items[start:end]:
                where[kind][k] = page
        chain = [head, *pages, tail]
        for i, page in enumerate(chain):
            node = txn.load_mut(space, page, ListNode)
            node.prev = chain[i - 1] if i else 0
            node.next = chain[i + 1] if i + 1 < len(chain) else 0
            if page in (head, tail):
                node.sentinel = HEAD if page == head else TAIL

    # -- leaves with their pointers (one merge walk) -------------------------------------
    gt_last, ne_last = rec["lists"][GT][0], rec["lists"][NE][0]
    lt_next = [rec["lists"][LT][1]] * len(keys)
    following = rec["lists"][LT][1]
    for i in range(len(keys) - 1, -1, -1):  # LT pointer: node of the smallest LT key >= k
        following = where[LT].get(keys[i], following)
        lt_next[i] = following
    leaves: list[LeafNode] = []
    for start, end in _chunks(len(keys), rec["leaf_cap"], rec["leaf_cap"] // 2):
        leaf = LeafNode(txn.alloc())
        for i in range(start, end):
            k, r = keys[i], runs[i]
            gt_last = where[GT].get(k, gt_last)
            ne_last = where[NE].get(k, ne_last)
            leaf.insert_item(len(leaf.keys), k, gt_last, lt_next[i], ne_last)
            leaf.eq[-1] = r[0]
            leaf.bound[-1] = sorted(set(r[1]) | set(r[3]))
        leaves.append(leaf)
    for i, leaf in enumerate(leaves):
        leaf.prev = leaves[i - 1].page if i else 0
        leaf.next = leaves[i + 1].page if i + 1 < len(leaves) else 0
        txn.put_new(space, leaf.page, leaf)

    # -- internal levels ---------------------------------------------------------------
    level: list[tuple[Any, int]] = [
        (leaf.keys[0] if leaf.keys else None, leaf.page) for leaf in leaves
    ]
    height = 1
    cap = rec["internal_cap"]
    while len(level) > 1:
        parents = []
        for start, end in _chunks(len(level), cap, (cap + 1) // 2):
            children = level[start:end]
            page = txn.alloc()
            inner = InternalNode(page, [k for k, _ in children[1:]], [p for _, p in children])
            txn.put_new(space, page, inner)
            parents.append((children[0][0], page))
        level = parents
        height += 1
    rec.update(
        root=level[0][1],
        height=height,
        first=leaves[0].page,
        last=leaves[-1].page,
        domain=domain,
        count=count,
    )
    txn.put_obj(NS, name.encode(), rec)
    return PBTree(txn, name)
