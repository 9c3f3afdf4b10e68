"""Bottom-up construction of a PB+tree from predicates sorted by constant.

A bulk load knows every predicate of an attribute at once, so instead of inserting them
one by one (each insert re-pointing leaf items), it packs the leaves and the three lists
in key order and computes every leaf item's pointers with one merge walk: O(n) work and
each page written once.  The result satisfies every invariant of :mod:`pbtree.check`.

The predicates are held as columns (per predicate its key's number, its operator's slot and
its id; one sort puts every key's runs end to end, CSR) and each page is packed from slices
of them and handed to the transaction encoded (:meth:`WriteTxn.put_packed`): no Python
object per key or per id.  A tree of distinct constants (the dense workload's ranges: one
key a predicate) held six sets and six lists a key, ~1.7 KB, before.

Leaves are built 3/4 full (:func:`_leaf_fill`), not full: online inserts into a
batch-built tree then fill a leaf's slack before splitting it.  Built full, nearly every
first insert into a leaf split it (a new leaf, its neighbour's link, the parent: ~2.6 leaves
made dirty an insert on dense 100K); 3/4 full made dense online writes ~0.7x as costly, the
dense store ~3% smaller, and the build and matching no slower
(``docs/bench/live/README.md``, dwrite49b).

Cost: one sort of the predicates, a few numpy calls per page, one page write per node.
Memory: ~40 bytes a predicate, and the pages' bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import Any

import numpy as np

from pbtree.keys import key_domain
from pbtree.nodes import HEAD, REAL, TAIL, InternalNode, LeafNode, ListNode
from pbtree.operators import GT, LIST_CODES, LT, NE, SLOT
from pbtree.tree import DEFAULT_CAPS, NS, PBTree
from storage.codec import pack_u64
from storage.errors import InvalidInput
from storage.txn import WriteTxn

_SLOTS = len(SLOT)
_EQ, _GE, _LE = SLOT["="], SLOT[">="], SLOT["<="]


def _leaf_fill(cap: int) -> int:
    """Items a bulk-built leaf holds: 3/4 of ``cap``, so that online inserts into a
    batch-built tree fill a leaf's slack before they split it."""
    return max(cap * 3 // 4, cap // 2)


def _chunks(n: int, cap: int, low: int, fill: int | None = None) -> list[tuple[int, int]]:
    """Split ``n`` items into runs of at most ``cap`` and (unless only one) at least ``low``,
    as near ``fill`` items each as ``low`` allows (``fill`` defaults to ``cap``: full runs)."""
    fill = cap if fill is None else fill
    if n <= fill:
        return [(0, n)]
    count = max(min(-(-n // fill), n // max(low, 1)), -(-n // cap))
    size, extra = divmod(n, count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append((start, end))
        start = end
    assert all(low <= end - start <= cap for start, end in out)
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
    keys: list[Any] = []
    kid: list[int] = []
    slot: list[int] = []
    ids: list[int] = []
    domain = None
    for key, group in groupby(predicates, key=lambda p: p[0]):
        d = key_domain(key)
        if domain is None:
            domain = d
        elif d != domain or (keys and not keys[-1] < key):
            raise InvalidInput(
                f"bulk build of {name!r}: constants out of order or mixed at {key!r}"
            )
        before = len(ids)
        for _, op, ident in group:
            slot.append(SLOT[op])
            ids.append(ident)
        kid.extend([len(keys)] * (len(ids) - before))
        keys.append(key)
    caps = {"leaf_cap": leaf_cap, "internal_cap": internal_cap, "list_cap": list_cap}
    return build_columns(
        txn,
        name,
        keys,
        np.array(kid, dtype=np.int64),
        np.array(slot, dtype=np.int64),
        np.array(ids, dtype=np.int64),
        domain,
        caps,
    )


def build_columns(
    txn: WriteTxn,
    name: str,
    keys: Sequence[Any],
    kid: np.ndarray,
    slot: np.ndarray,
    ids: np.ndarray,
    domain: str | None,
    caps: dict[str, int | None] | None = None,
) -> PBTree:
    """Create the tree ``name`` from its distinct constants ``keys`` (ascending, of one
    ``domain``, checked by the caller) and per predicate the number of its constant in
    ``keys``, its operator's code (:data:`pbtree.operators.SLOT`) and its id (any order;
    duplicates harmless).
    ``caps``: node capacities (None: the store's)."""
    if txn.get(NS, name.encode()) is not None:
        raise InvalidInput(f"PB+tree {name!r} already exists; bulk build needs a new one")
    settings = {**DEFAULT_CAPS, **txn.store.settings.get("pbtree", {})}
    settings.update({k: v for k, v in (caps or {}).items() if v is not None})
    n = len(keys)
    order = np.lexsort((ids, slot, kid))
    kid, slot, ids = kid[order], slot[order], ids[order]
    if len(ids):  # duplicate triples: one
        keep = np.concatenate(
            ([True], (kid[1:] != kid[:-1]) | (slot[1:] != slot[:-1]) | (ids[1:] != ids[:-1]))
        )
        kid, slot, ids = kid[keep], slot[keep], ids[keep]
    # per key six sorted id runs (=, >=, >, <=, <, !=), end to end: key k's run of slot s is
    # ids[offs[6k + s] : offs[6k + s + 1]]
    offs = np.zeros(n * _SLOTS + 1, dtype=np.int64)
    np.cumsum(np.bincount(kid * _SLOTS + slot, minlength=n * _SLOTS), out=offs[1:])
    ids32 = ids.astype(np.uint32)

    tree = PBTree(
        txn,
        name,
        leaf_cap=settings["leaf_cap"],
        internal_cap=settings["internal_cap"],
        list_cap=settings["list_cap"],
    )
    rec = tree.record
    space = rec["space"]
    # drop the empty root leaf the constructor made; rebuild everything below the record
    txn.free(space, rec["root"])
    where = {
        kind: _write_list(txn, space, rec, kind, codes[0], codes[-1], keys, offs, ids32)
        for kind, codes in LIST_CODES.items()
    }
    leaves = _write_leaves(txn, space, rec, keys, kid, slot, ids, offs, where)
    level: list[tuple[Any, int]] = [(keys[a] if b > a else None, page) for (a, b), page in leaves]
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
        first=leaves[0][1],
        last=leaves[-1][1],
        domain=domain,
        count=len(ids),
    )
    txn.put_obj(NS, name.encode(), rec)
    return PBTree(txn, name)


def _write_list(
    txn: WriteTxn,
    space: int,
    rec: dict[str, Any],
    kind: int,
    first: int,
    last: int,
    keys: Sequence[Any],
    offs: np.ndarray,
    ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One list (its items: the keys with a run in slots ``first..last``, which are its
    parts) in nodes of at most ``list_cap`` items, linked between its sentinels.  Returns
    its items' key numbers and each one's node page."""
    head, tail = rec["lists"][kind]
    every = np.arange(len(keys), dtype=np.int64) * _SLOTS
    items = np.flatnonzero(offs[every + last + 1] > offs[every + first])
    nparts = last - first + 1
    bounds = offs[(items * _SLOTS)[:, None] + np.arange(first, last + 2)]  # (items, parts+1)
    sizes = (bounds[:, 1:] - bounds[:, :-1]).ravel()
    part_offs = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=part_offs[1:])
    spans = bounds[:, -1] - bounds[:, 0]
    gathered = ids[_rows(bounds[:, 0], spans)]
    chunks = _chunks(len(items), rec["list_cap"], 1) if len(items) else []
    pages = [txn.alloc() for _ in chunks]
    chain = [head, *pages, tail]
    item_keys = [keys[k] for k in items.tolist()]
    for j, (a, b) in enumerate(chunks):
        po = part_offs[a * nparts : b * nparts + 1]
        fields = [
            kind,
            REAL,
            chain[j],
            chain[j + 2],
            item_keys[a:b],
            (po - po[0]).astype(np.uint32).tobytes(),
            gathered[po[0] : po[-1]].tobytes(),
        ]
        txn.put_packed(space, pages[j], ListNode.KIND, fields)
    for i, page in ((0, head), (len(chain) - 1, tail)):
        node = txn.load_mut(space, page, ListNode)
        node.prev = chain[i - 1] if i else 0
        node.next = chain[i + 1] if i + 1 < len(chain) else 0
        node.sentinel = HEAD if page == head else TAIL
    node_of = np.repeat(np.array(pages, dtype=np.int64), [b - a for a, b in chunks])
    return items, node_of


def _write_leaves(
    txn: WriteTxn,
    space: int,
    rec: dict[str, Any],
    keys: Sequence[Any],
    kid: np.ndarray,
    slot: np.ndarray,
    ids: np.ndarray,
    offs: np.ndarray,
    where: dict[int, tuple[np.ndarray, np.ndarray]],
) -> list[tuple[tuple[int, int], int]]:
    """The leaf level: per key its ``=`` run and its bound run (``>=`` and ``<=`` ids,
    united), and its three pointers from one search of each list's items.  Returns each
    leaf's key range and page, in order."""
    n = len(keys)
    every = np.arange(n, dtype=np.int64)
    gtp = _pointer(where[GT], every, "right", rec["lists"][GT][0])
    nep = _pointer(where[NE], every, "right", rec["lists"][NE][0])
    ltp = _pointer(where[LT], every, "left", rec["lists"][LT][1])
    bound = (slot == _GE) | (slot == _LE)
    bk, bi = kid[bound], ids[bound]
    o = np.lexsort((bi, bk))
    bk, bi = bk[o], bi[o]
    if len(bk):
        keep = np.concatenate(([True], (bk[1:] != bk[:-1]) | (bi[1:] != bi[:-1])))
        bk, bi = bk[keep], bi[keep]
    eq = slot == _EQ
    part = np.concatenate((kid[eq] * 2, bk * 2 + 1))  # item k: part 2k its =, 2k+1 its bound
    o = np.argsort(part, kind="stable")  # each part's ids stay ascending
    pids = np.concatenate((ids[eq], bi))[o].astype(np.uint32)
    poffs = np.zeros(2 * n + 1, dtype=np.int64)
    np.cumsum(np.bincount(part, minlength=2 * n), out=poffs[1:])
    chunks = _chunks(n, rec["leaf_cap"], rec["leaf_cap"] // 2, _leaf_fill(rec["leaf_cap"]))
    pages = [txn.alloc() for _ in chunks]
    for j, (a, b) in enumerate(chunks):
        po = poffs[2 * a : 2 * b + 1]
        fields = [
            pages[j - 1] if j else 0,
            pages[j + 1] if j + 1 < len(pages) else 0,
            list(keys[a:b]),
            (po - po[0]).astype(np.uint32).tobytes(),
            pids[po[0] : po[-1]].tobytes(),
            pack_u64(gtp[a:b]),
            pack_u64(ltp[a:b]),
            pack_u64(nep[a:b]),
        ]
        txn.put_packed(space, pages[j], LeafNode.KIND, fields)
    return list(zip(chunks, pages, strict=True))


def _pointer(
    items: tuple[np.ndarray, np.ndarray], keys: np.ndarray, side: str, default: int
) -> np.ndarray:
    """Per key number, the node of the list item with the greatest key <= it (``right``)
    or the least key >= it (``left``); ``default`` (a sentinel) where there is none."""
    numbers, node_of = items
    at = np.searchsorted(numbers, keys, side=side)  # type: ignore[call-overload]
    if side == "right":
        at = at - 1
    inside = (at >= 0) & (at < len(numbers))
    if not len(numbers):
        return np.full(len(keys), default, dtype=np.int64)
    return np.where(inside, node_of[np.clip(at, 0, len(numbers) - 1)], default)


def _rows(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions ``starts[j] .. starts[j] + sizes[j]`` for every j, end to end."""
    offsets = np.cumsum(sizes) - sizes
    return np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(starts - offsets, sizes)
