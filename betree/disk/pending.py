"""Deferred placement: a batch's clauses wait in the root's l-node until placed in bulk.

Why: at 1M BEGen a ``subscribe_many`` batch of 1,000 spent ~100 µs a subscription routing
its clauses down the BE-Tree, splitting and clustering the l-nodes they filled, and ~63
more committing the ~1.7 c-nodes and ~1.7 l-node pages each dirtied (docs/bench/live/
README.md, "where a batch's CPU goes"), of ~305-360 µs in all.  A batch instead writes its
subscriptions' records and appends its clauses, unrouted, to the root's l-node: the
*pending area*.  Every reader in every process already checks the root's l-node (the
page walk, ``match_many``'s pass; a packed view built from the pages, in groups: Cost
below; a view caught up from the change log matches added clauses directly, wherever
they sit), so a committed write is seen by the next match as before (SPEC section 7).
Placement moves the pending clauses into the tree later, in bulk, in
a write transaction of its own (:meth:`betree.disk.writer.Writer.place`): they are taken out
of the root's l-node and inserted as a batch's clauses always were
(:meth:`betree.disk.tree.BETree.insert_many`); the clause set, the subscription records
and the change log do not change, so readers' views stay valid across it, and a crash
before its commit leaves the pending area as it was.

Layout: the root record's ``pending_from`` (absent: no pending area) is the first
internal subscription id of the area: the clauses of subscriptions with ids from it on
are *pending*, and all lie in the root's l-node.  While the area exists every insertion
(one subscription or a batch) is deferred, so that no routed clause lands in the root
and splits it under pending ones; placement drops the key.  Self-adjustment's
re-insertions could split the root too: it does not defer, its flush places first, and
enabling it places the area.

When: a batch of :data:`DEFER_FROM` subscriptions or more defers unless the store
self-adjusts or holds fewer than :data:`DEFER_STORE` (a small tree is placed into cheaply,
from the cache, and a pending area would be much of what each event checks; at 16 shards
a batch of 1,000 gives parts of ~60: placed at once); the writer places once the root's
l-node holds :func:`bound` clauses past its capacity (:data:`PLACE_CLAUSES`, or
:data:`PLACE_SHARE` of the store's subscriptions if fewer: a reader walking pages, not
yet holding a view, pays for the whole area; counted from the root c-node's size: one
page read),
after the batch's commit
(a sharded batch: after its journal is gone, outside the read lock its readers wait on:
:mod:`betree.stores.shardwrite`); so do self-adjustment's flush (before it moves
clauses) and :meth:`betree.engine.Engine.place`.

Cost: the page walk checks a pending clause at every event, as any clause of the root;
a packed view does not: it matches the root's clauses in groups below the root
(:func:`groups`, from :func:`betree.packed.flat.build`), each group a node of one
attribute and the hull of its clauses' spans on it (the attribute of each clause's
narrowest span), so that an event checks only the groups it reaches, as it does the
tree's own buckets (BEGen: a clause's narrowest span is mostly one value of 48, on one
of 400 attributes an event defines ~15 of).  Before, ~8,000 pending clauses a shard of
1M BEGen in 2 shards raised the CPU p50 of a match 4-10% (docs/bench/live/README.md,
writes36), 16,000-32,000 a shard 40-60% (place38); grouped: see place41 there.  The
deferred batch skips routing, splits and its clauses' places: ~110 µs of CPU a
subscription instead of ~330.  Placement pays them for the whole area at once, and the
larger the area the less a clause: its costs are mostly pages (a c-node read and decoded
while routing, an l-node page and its c-node copied, changed, encoded and committed; the
clauses of an overflowing l-node re-read by its split), which the clauses an area sends
to one l-node share.  A shard of 1M BEGen has ~13,600 l-nodes: placing 8,000 clauses
cost ~150 µs a clause, 32,000 ~100, 64,000 ~85 (place38).  So the bound is set where
placement is cheap, matching paying little for the area while it waits.
``check()`` exempts pending clauses only from "no clause left where a p-node could take
it", and checks that each lies in the root's l-node and the record's facts
(:func:`check_pending`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from betree.disk import catalog, grid
from betree.disk.catalog import clause_id
from betree.disk.nodes import CNode
from betree.lang.bounded import forget_older_half
from storage.txn import ReadTxn

#: subscriptions from which a batch (a shard's part of one) defers its clauses' placement: a
#: small batch's routing is a small part of its cost (its commit's fsyncs weigh more)
DEFER_FROM = 128
#: subscriptions a store (a shard) holds before its batches defer
DEFER_STORE = 1 << 16
#: clauses past the root's capacity at which the writer places the pending area, at most
PLACE_CLAUSES = 1 << 16
#: ... and at most this share of the store's subscriptions
PLACE_SHARE = 1 / 8
#: requirements a :func:`groups` memo keeps (~150 bytes each); when full, the older half goes
MEMO_LIMIT = 1 << 18


def defers(rec: dict[str, Any], batch: int) -> bool:
    """Whether a batch of ``batch`` subscriptions into the store of root record ``rec``
    defers its clauses' placement."""
    return batch >= DEFER_FROM and int(rec["subs"]) >= DEFER_STORE


def bound(subs: int) -> float:
    """The pending clauses (past the root's capacity) at which a store of ``subs``
    subscriptions places its area."""
    return min(PLACE_CLAUSES, subs * PLACE_SHARE)


def first(rec: dict[str, Any]) -> int | None:
    """The first pending clause id (None: no pending area)."""
    start = rec.get("pending_from")
    return None if start is None else clause_id(int(start), 0)


def due(txn: ReadTxn, rec: dict[str, Any]) -> bool:
    """Whether the pending area has grown past its :func:`bound`."""
    if rec.get("pending_from") is None:
        return False
    root = txn.load(rec["space"], rec["root"], CNode)
    return bool(root.size - root.cap >= bound(int(rec["subs"])))


def check_pending(rec: dict[str, Any]) -> list[str]:
    """The root record's facts about the pending area (the clauses' own are checked with
    the tree's: :mod:`betree.checking.check`)."""
    start = rec.get("pending_from")
    if start is None:
        return []
    if not isinstance(start, int) or not 0 <= start <= int(rec["next_sid"]):
        return [f"pending area starts at {start!r}, not a subscription id up to next_sid"]
    return []


#: clauses a group of the root's clauses holds in a packed view (:func:`groups`)
GROUP = 16


class Chosen:
    """What :func:`groups` read or chose before, kept by its caller across views (ids are
    never reused, a clause's atoms never change): per atom id, its attribute and
    :func:`betree.disk.grid.requirement`; per clause id, its place (None: placeless);
    at most :data:`MEMO_LIMIT` of each (~150 bytes an entry)."""

    def __init__(self) -> None:
        self.atoms: dict[int, tuple[str, tuple[int, int] | tuple[()]]] = {}
        self.clauses: dict[int, tuple[str, int, int] | None] = {}


def groups(
    txn: ReadTxn,
    first: int,
    cids: np.ndarray,
    lens: np.ndarray,
    atoms: np.ndarray,
    types: Mapping[str, str],
    memo: Chosen,
) -> tuple[np.ndarray, list[tuple[str, int, int, int]]]:
    """The root l-node's pending clauses (ids from ``first`` on) grouped by a place each, for
    a packed view to match them as nodes below the root (:func:`betree.packed.flat.build`);
    of its clauses, ``cids`` their ids, ``lens`` their atom counts, ``atoms`` their atom
    ids end to end.  A clause's place is its attribute of the narrowest grid span
    (:func:`betree.disk.grid.combined` of its atoms' requirements); the clauses of one
    attribute, by span, go :data:`GROUP` to a group whose interval is their spans' hull.
    Exact: a clause holds only where the event defines each attribute of its places
    inside its span, so a group is reached wherever one of its clauses could hold.
    Returns a permutation of the clauses, the placeless and the placed first (they stay
    in the root, where the walk checks them too: on a store with no area the view's
    candidates are the walk's), then group by group, and each group's attribute,
    interval and clause count.  ``types``: each attribute's grid kind.  Cost: ~5 µs a
    clause the first time (a new atom's record read: ~10 µs more), ~0.3 µs after
    (``memo``)."""
    ends = np.cumsum(lens).tolist()
    ids = atoms.tolist()
    chosen: list[tuple[str, int, int, int]] = []
    placeless: list[int] = []
    known, requirements = memo.clauses, memo.atoms
    place: tuple[str, int, int] | None
    for i, cid in enumerate(cids.tolist()):
        if cid < first:
            place = None
        elif cid in known:
            place = known[cid]
        else:
            pairs = []
            for aid in ids[ends[i] - int(lens[i]) : ends[i]]:
                if aid:
                    pair = requirements.get(aid)
                    if pair is None:
                        atom = catalog.load_atom(txn, aid)
                        pair = (atom.attr, grid.requirement(types[atom.attr], atom))
                        _remember(requirements, aid, pair)
                    pairs.append(pair)
            places = grid.combined(pairs)
            place = None
            if places:
                attr, (lo, hi) = min(places.items(), key=lambda p: (p[1][1] - p[1][0], p[0]))
                place = (attr, lo, hi)
            _remember(known, cid, place)
        if place is None:
            placeless.append(i)
        else:
            chosen.append((*place, i))
    chosen.sort()
    order = placeless + [i for *_, i in chosen]
    made: list[tuple[str, int, int, int]] = []
    at = 0
    while at < len(chosen):
        attr = chosen[at][0]
        end = at + 1
        while end < len(chosen) and end - at < GROUP and chosen[end][0] == attr:
            end += 1
        part = chosen[at:end]
        made.append((attr, min(c[1] for c in part), max(c[2] for c in part), end - at))
        at = end
    return np.array(order, dtype=np.int64), made


def _remember(memo: dict[int, Any], key: int, value: Any) -> None:
    if len(memo) >= MEMO_LIMIT:
        forget_older_half(memo)
    memo[key] = value
