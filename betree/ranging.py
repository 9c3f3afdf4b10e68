"""When to match by intervals (:mod:`betree.intervals`) instead of the BE-Tree: by cost.

The BE-Tree prunes clauses whose ranges are narrow; on wide ranges it reaches half of all
clauses, and phase 1 marks most atoms, for every event.  The interval matcher costs about
one OR of a bitset an attribute whatever the ranges.  :class:`Ranging` watches the first
:data:`OBSERVE` events matched on a snapshot's packed view(s) through the tree (the
candidate clauses each checked, a row of :data:`betree.flat.WIDTH` atom truths), and
builds the interval matcher only when its estimated work an event
(:meth:`betree.intervals.Intervals.cost`: bitset words, bucket ends, unbounded clauses) is
under :data:`MARGIN` times the tree's; once built it checks the estimate again with the
exact shape and keeps the tree if it lost.  The choice lasts while the views do (a write
drops a view: the next snapshot is watched afresh).

Cost: nothing on a snapshot that keeps the tree (one comparison an event while
watching); building, a few numpy passes over the clauses' atoms and one bitset row at a
time (~1 s for 1M clauses).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from betree.flat import WIDTH
from betree.flatbatch import Shard
from betree.intervals import Intervals

#: events matched on the tree before choosing
OBSERVE = 16
#: the interval matcher is chosen when its estimated work is under this share of the tree's
MARGIN = 0.5


class Ranging:
    """The choice for one store's views (a plain store's one, or a sharded store's all)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: list[object] = []
        self._events = 0
        self._candidates = 0
        self._chosen: Intervals | None = None
        self._decided = False

    def chosen(self, shards: Sequence[Shard], kinds: Mapping[str, str]) -> Intervals | None:
        """The interval matcher for these views if it is the cheaper, else None (then
        match on the tree and :meth:`observe` what it cost)."""
        views = [s.view for s in shards]
        if len(views) != len(self._views) or any(
            a is not b for a, b in zip(views, self._views, strict=True)
        ):
            with self._lock:
                self._views, self._events, self._candidates = views, 0, 0
                self._chosen, self._decided = None, False
        if self._decided or self._events < OBSERVE:
            return self._chosen
        with self._lock:
            if not self._decided:
                self._decide(shards, kinds)
        return self._chosen

    def observe(self, events: int, candidates: int) -> None:
        """Count ``events`` matched on the tree, checking ``candidates`` clauses."""
        self._events += events
        self._candidates += candidates

    def _decide(self, shards: Sequence[Shard], kinds: Mapping[str, str]) -> None:
        tree = self._candidates / max(self._events, 1) * WIDTH
        clauses = sum(len(s.view.exts) for s in shards)
        attrs = {a for s in shards for a in s.view.searches if kinds.get(a) in ("int", "float")}
        self._decided = True
        if len(attrs) * (clauses + 63) // 64 >= MARGIN * tree:  # the bitsets alone lose
            return
        built = Intervals(shards, kinds)
        if built.cost() < MARGIN * tree:
            self._chosen = built

    def describe(self) -> dict[str, object]:
        """The choice, for tests and diagnostics."""
        chosen = self._chosen
        return {
            "decided": self._decided,
            "events": self._events,
            "intervals": chosen is not None,
            "bytes": chosen.nbytes if chosen is not None else 0,
        }
