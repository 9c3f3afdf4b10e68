"""BE-Tree self-adjustment (BE-Tree paper, sec. 5): cost-based ranking, feedback-driven attribute
choice, and l-node recycling — with the matcher kept a reader.

**Why.**  Insertion places a clause by popularity (the p-node holding the most clauses,
the attribute most clauses constrain).  Popularity says nothing about what matching then
costs: an attribute that every event defines prunes nothing at its p-node.  Section 5
ranks nodes by what they cost and save, and rebuilds the ones that cost more than they
save.  Here, with the paper's parameters ``alpha = beta = gamma = 1``:

* ``Loss(n)``: the predicate evaluations discarded at node ``n``'s l-node per matched
  event, over the node's window of events.  A false candidate (a clause checked and not
  satisfied) discards every atom it has: the vectorised check reads them all (the
  paper's sequential evaluation stops at the first false one; counting what this
  matcher spends is what makes the rank a cost here).  Events that do not reach ``n``
  count with 0.
* ``Gain(l)``: per clause of the l-node, one predicate per attribute partitioned on its
  path (covered, or subsumed when equal to the bucket: with ``alpha_s = alpha_c = 1`` both
  count one, so the split is not computed).
* ``Rank(l) = Gain(l) - Loss(l)``; for a p-node, ``Rank = sum of the ranks below it``
  (every l-node of its subtree, deeper p-nodes included) — the recursive definition
  expanded.
* Attribute choice (the generalised rank, ``Rank(l_i) = Gain - Loss``): an attribute's
  gain is the number of clauses that would move (popularity), its loss the false
  candidates they would cost, estimated as ``clauses x rho[attr]`` where ``rho`` is the
  fraction of the clauses held in the attribute's c-directories that an event checked
  (measured, decayed by half per flush).  An attribute never measured has ``rho = 0``:
  the paper's optimistic approach (popularity first, matching feedback after).  The same
  weighting picks the p-node that takes an inserted clause.

**Recycling.**  A node's window is ``adjust_window`` matched events from its first
visit.  At its end, a p-node ranked below ``theta`` is removed with its subtree, an l-node
ranked below ``theta`` is emptied, and their clauses are re-inserted from the root under
the current ranking; the window restarts.  At most a tenth of the clauses move per flush,
p-nodes first, shallow first.  Re-insertion alone often brings an l-node's clauses back
where they were (they still belong there, and the node does not overflow), so a recycled
l-node that still exists is then *cut* as if its capacity were half an l-node
(:meth:`betree.disk.tree.BETree.cut`: a p-node on the best-ranked attribute, or a split of its
bucket, and so on down while ``max(min_size, max_cap / 2)`` clauses share a bucket;
cutting finer trades the candidates saved for more pages per event, the larger cost in
this matcher) — the root's l-node, which re-insertion cannot change, only that.
Deletion with
adjustment on also re-inserts the clauses of a p-node left with fewer than ``min_size``
(underflow, see :meth:`betree.disk.tree.BETree._after_remove`).

**Keeping the matcher a reader.**  Matching with a :class:`Collector` keeps, in process
memory, references to arrays the check built anyway, folded into per-c-node counts every
256 events.  :meth:`betree.disk.adjustment.Adjustment.flush` (``index.adjustment.flush()``)
flushes them in one short write transaction — explicitly, or every ``adjust_window`` events
when the stored setting ``adjust`` is 1 (``Engine.collecting`` collects without the setting;
``Index.close`` flushes what is left).  Counts of several processes add up; counts a process never
flushes are lost (they are a sample).  Measured on a 20K-subscription BEGen store (CPU
time, fastest of 8 passes over 1,000 events): collecting costs 2-12% per event;
without a collector the matcher is as fast as before (0.453 vs 0.457 ms).

Records (their keys in :mod:`betree.disk.catalog`):

* ``adj``  c-node page (u64) -> ``[start, visits, candidates, false, discarded,
  discarded_below]``: the node's window, opened when ``events`` was ``start``;
  ``discarded_below`` sums its whole subtree's (kept on top buckets, for p-node ranks).
  Freeing a c-node drops its record (:meth:`betree.disk.tree.BETree._free_node`).
* ``bexdb/adjust``  ``{"events": matched events flushed, "attrs": {attr: [candidates,
  exposure]}, "recycled": [p-nodes, l-nodes, clauses]}``; ``rho = candidates /
  exposure``, exposure being clauses held x events.

Cost of a flush: one walk over the c-nodes (cached pages), one get and put per touched
node and per top bucket above it, a scan of the window records, and the re-insertions
(each an ordinary insertion): 20-110 ms per flush in ``bexdb bench adapt`` (10K
subscriptions, windows of 1,200 events; results and a reading in docs/bench/adapt).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from betree.disk.catalog import ADJ, ADJUST_STATE, NS
from betree.disk.nodes import CNode
from storage import codec
from storage.errors import BexdbError, InvalidInput
from storage.txn import ReadTxn

if TYPE_CHECKING:
    from betree.disk.writer import Writer

#: Settings kept in the index's root record (``Index.open(settings=...)``,
#: :meth:`betree.disk.adjustment.Adjustment.set`): collect and flush automatically, the window
#: in matched events, the recycling threshold theta (the paper's 0).
ADJUST_DEFAULTS = {"adjust": 0, "adjust_window": 1000, "theta": 0}
DECAY = 0.5  # weight of older attribute feedback at each flush
RECYCLE_SHARE = 0.1  # most clauses re-inserted per flush, as a share of all clauses
_FIELDS = 6


class Collector:
    """Matching counts of this process since the last flush: :attr:`nodes` maps a c-node
    page to ``[visits, candidates, false candidates, discarded evaluations]``; ``events``
    counts matched events.

    Per event it only keeps references to arrays the check built anyway (every clause's
    truth and atom count) and the c-node and clause count of each page; every ``FOLD``
    events one vectorised pass over all of them updates :attr:`nodes`.  Cost per event: a
    list of page sizes and an append; per fold: a dozen numpy calls over the batch's
    clauses and one dict update per distinct c-node.
    """

    __slots__ = ("_nodes", "_raw", "events")
    FOLD = 256

    def __init__(self) -> None:
        self.events = 0
        self._nodes: dict[int, list[int]] = {}
        self._raw: list[tuple[list[int], list[int], np.ndarray, np.ndarray]] = []

    def add(self, owners: list[int], counts: list[int], lens: np.ndarray, ok: np.ndarray) -> None:
        """Keep one event's outcome: ``ok`` and ``lens`` (atoms) of every clause checked,
        the c-node (``owners``) and the clause count of each page read."""
        self._raw.append((owners, counts, lens, ok))
        if len(self._raw) >= self.FOLD:
            self._fold()

    @property
    def nodes(self) -> dict[int, list[int]]:
        self._fold()
        return self._nodes

    def _fold(self) -> None:
        """Add the kept events to :attr:`nodes` in one vectorised pass."""
        raw, self._raw = self._raw, []
        if not raw:
            return
        owners = np.fromiter((o for r in raw for o in r[0]), dtype=np.int64)
        counts = np.fromiter((c for r in raw for c in r[1]), dtype=np.intp)
        false = ~np.concatenate([r[3] for r in raw])
        discarded = np.concatenate([r[2] for r in raw]) * false
        # a page opens a visit when it is an event's first or its c-node differs
        opens = np.ones(len(owners), dtype=bool)
        opens[1:] = owners[1:] != owners[:-1]
        opens[np.cumsum([0] + [len(r[0]) for r in raw[:-1]])] = True
        pages, where = np.unique(owners, return_inverse=True)
        clause_at = np.repeat(where, counts)
        k = len(pages)
        sums = zip(
            pages.tolist(),
            np.bincount(where, weights=opens, minlength=k).tolist(),
            np.bincount(where, weights=counts, minlength=k).tolist(),
            np.bincount(clause_at, weights=false, minlength=k).tolist(),
            np.bincount(clause_at, weights=discarded, minlength=k).tolist(),
            strict=True,
        )
        nodes = self._nodes
        for page, *add in sums:
            have = nodes.setdefault(page, [0, 0, 0, 0])
            for i, x in enumerate(add):
                have[i] += int(x)


def load_state(txn: ReadTxn) -> dict[str, Any]:
    state = txn.get_obj(NS, ADJUST_STATE)
    return state if state is not None else {"events": 0, "attrs": {}, "recycled": [0, 0, 0]}


def feedback(txn: ReadTxn) -> dict[str, float]:
    """``rho`` per measured attribute: the fraction of its clauses an event checks."""
    attrs = load_state(txn)["attrs"]
    return {a: min(1.0, c / e) for a, (c, e) in attrs.items() if e > 0}


def flush(writer: Writer, collector: Collector) -> dict[str, Any]:
    """Merge ``collector`` into the store, rank the nodes whose window ended, recycle.

    Runs inside ``writer``'s transaction.  Returns a report of what it did.
    """
    t0 = time.perf_counter()
    writer.place()  # (pending clauses would be moved by a split of the root: placed first)
    txn, tree, rec = writer.txn, writer.tree, writer.rec
    state = load_state(txn)
    before = int(state["events"])
    total = before + collector.events
    window = int(rec.get("adjust_window", ADJUST_DEFAULTS["adjust_window"]))
    theta = rec.get("theta", ADJUST_DEFAULTS["theta"])

    # one walk: every live c-node, the attributes partitioned on its path, its gain
    info: dict[int, tuple[CNode, int]] = {}
    order: list[int] = []
    for node, used, _ in tree.walk():
        info[node.page] = (node, len(used))
        order.append(node.page)
    gain_below: dict[int, float] = {}
    for page in reversed(order):  # children come after their parents in a pre-order walk
        node, depth = info[page]
        g = gain_below.get(page, 0.0) + node.size * depth
        gain_below[page] = g
        if node.attr is not None:
            gain_below[node.parent] = gain_below.get(node.parent, 0.0) + g

    _attribute_feedback(state, info, collector)

    # per-node windows: this batch's counts, and the discarded evaluations of each
    # subtree added to the top buckets above it
    deltas: dict[int, list[int]] = {}
    for page, (visits, cands, false, disc) in collector.nodes.items():
        if page not in info:
            continue  # freed since it was visited
        d = deltas.setdefault(page, [0] * (_FIELDS - 1))
        d[0] += visits
        d[1] += cands
        d[2] += false
        d[3] += disc
        node = info[page][0]
        while node.attr is not None:
            if node.top:
                deltas.setdefault(node.page, [0] * (_FIELDS - 1))[4] += disc
            node = info[node.parent][0]
    for page, d in deltas.items():
        key = codec.encode_u64(page)
        r = txn.get_obj(ADJ, key) or [before] + [0] * (_FIELDS - 1)
        txn.put_obj(ADJ, key, [r[0], *(a + b for a, b in zip(r[1:], d, strict=True))])

    # ranks at the end of each window
    pnodes: list[tuple[int, int]] = []
    lnodes: list[tuple[int, int]] = []
    evaluated = 0
    for key, value in list(txn.scan(ADJ)):
        start, _, _, _, disc, below = codec.decode_value(value)
        span = total - start
        if span < window:
            continue
        page = codec.decode_u64(key)
        txn.delete(ADJ, key)  # the next visit opens a new window
        if page not in info:
            continue
        evaluated += 1
        node, depth = info[page]
        if node.top and gain_below[page] - below / span < theta:
            pnodes.append((depth, page))
        elif node.size and node.size * depth - disc / span < theta:
            lnodes.append((depth, page))

    budget = max(1, int(RECYCLE_SHARE * sum(n.size for n, _ in info.values())))
    moved = [0, 0, 0]
    for kind, todo in ((0, sorted(pnodes)), (1, sorted(lnodes))):
        for _, page in todo:
            if moved[2] >= budget:
                break
            if page in tree.freed:
                continue
            entries = (
                []
                if page == tree.root
                else tree.evict_pnode(page)
                if kind == 0
                else tree.evict(page)
            )
            tree.reinsert(entries)
            moved[kind] += 1
            moved[2] += len(entries)
            if kind == 1 and page not in tree.freed:
                tree.cut(page)  # back where it was: cut it although it does not overflow
    state["events"] = total
    state["recycled"] = [a + b for a, b in zip(state["recycled"], moved, strict=True)]
    txn.put_obj(NS, ADJUST_STATE, state)
    return {
        "events": collector.events,
        "nodes": len(deltas),
        "evaluated": evaluated,
        "recycled_pnodes": moved[0],
        "recycled_lnodes": moved[1],
        "reinserted": moved[2],
        "seconds": time.perf_counter() - t0,
    }


def _attribute_feedback(
    state: dict[str, Any], info: dict[int, tuple[CNode, int]], collector: Collector
) -> None:
    """Decay every attribute's counts, then add this batch: candidates checked in the
    attribute's c-directories, and exposure (clauses held there x events)."""
    attrs: dict[str, list[float]] = state["attrs"]
    for counts in attrs.values():
        counts[0] *= DECAY
        counts[1] *= DECAY
    if not collector.events:
        return
    held: Counter[str] = Counter()
    for node, _ in info.values():
        if node.attr is not None and node.size:
            held[node.attr] += node.size
    checked: Counter[str] = Counter()
    for page, batch in collector.nodes.items():
        found = info.get(page)
        if found is not None and found[0].attr is not None:
            checked[found[0].attr] += batch[1]
    for attr, n in held.items():
        counts = attrs.setdefault(attr, [0.0, 0.0])
        counts[0] += checked[attr]
        counts[1] += n * collector.events


def check_adjust(txn: ReadTxn, rec: dict[str, Any], attributes: set[str]) -> list[str]:
    """Violations of the adjustment records: windows of live c-nodes only, counts that
    add up, feedback on known attributes.  Cost: one read per window record."""
    errors: list[str] = []
    state = load_state(txn)
    events = state.get("events")
    if not isinstance(events, int) or events < 0:
        errors.append(f"adjustment: event count {events!r} is not a non-negative integer")
        events = 0
    for attr, counts in state.get("attrs", {}).items():
        if attr not in attributes:
            errors.append(f"adjustment: feedback on unknown attribute {attr!r}")
        if len(counts) != 2 or not all(math.isfinite(x) and x >= 0 for x in counts):
            errors.append(f"adjustment: feedback of {attr!r} is {counts!r}")
    for key, value in txn.scan(ADJ):
        page = codec.decode_u64(key)
        r = codec.decode_value(value)
        where = f"adjustment window of page {page}"
        if not isinstance(r, list) or len(r) != _FIELDS or any(x < 0 for x in r):
            errors.append(f"{where}: malformed {r!r}")
            continue
        start, visits, cands, false, disc, below = r
        if start > events:
            errors.append(f"{where}: opens at event {start}, after the {events} counted")
        if false > cands or visits > cands:
            errors.append(f"{where}: {visits} visits, {false} false of {cands} candidates")
        if disc < false:
            errors.append(f"{where}: {disc} discarded evaluations for {false} false candidates")
        try:
            node = txn.load_uncached(rec["space"], page, CNode)
        except BexdbError as exc:
            errors.append(f"{where}: not a live c-node ({exc})")
            continue
        if (below < disc) if node.top else below:  # kept on top buckets only
            errors.append(f"{where}: {below} evaluations discarded below, {disc} at the node")
    return errors


def summary(txn: ReadTxn, rec: dict[str, Any]) -> dict[str, Any]:
    """Self-adjustment settings and totals, for ``bexdb inspect``."""
    state = load_state(txn)
    pnodes, lnodes, clauses = state["recycled"]
    return {
        **{k: rec.get(k, v) for k, v in ADJUST_DEFAULTS.items()},
        "events_flushed": state["events"],
        "open_windows": txn.count(ADJ),
        "recycled": {"p_nodes": pnodes, "l_nodes": lnodes, "clauses": clauses},
        "feedback": dict(sorted(feedback(txn).items(), key=lambda kv: -kv[1])[:10]),
    }


def check_settings(options: Mapping[str, Any]) -> None:
    """Refuse self-adjustment settings out of range."""
    if options.get("adjust", 0) not in (0, 1):
        raise InvalidInput("adjust must be 0 or 1")
    if int(options.get("adjust_window", 1)) < 1:
        raise InvalidInput("adjust_window must be at least 1 event")
