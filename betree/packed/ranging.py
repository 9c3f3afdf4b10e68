"""When to match by intervals (:mod:`betree.packed.intervals`) instead of the BE-Tree: by cost.

The BE-Tree prunes clauses whose ranges are narrow; on wide ranges it reaches half of all
clauses, and phase 1 marks most atoms, for every event.  The interval matcher costs about
one OR of a bitset an attribute whatever the ranges.  :class:`Ranging` watches the first
:data:`OBSERVE` events matched on a snapshot's packed view(s) through the tree (the
candidate clauses each checked, a row of :data:`betree.packed.flat.WIDTH` atom truths), and
builds the interval matcher only when its estimated work an event
(:meth:`betree.packed.intervals.Intervals.cost`: bitset words, bucket ends, unbounded clauses) is
under :data:`MARGIN` times the tree's; once built it checks the estimate again with the
exact shape and keeps the tree if it lost.  The choice lasts while the views do (a write
drops a view: the next snapshot is watched afresh).  A view too big to hold whole
(:class:`betree.packed.held.FlatSlot`) is offered to :meth:`Ranging.lean` instead: its
interval matcher is compared with the page walks watched (:meth:`Ranging.walked`) and, if
cheaper, the view is stripped to it and matched by it for as long as it is held.

Cost: nothing on a snapshot that keeps the tree (one comparison an event while
watching); building, a few numpy passes over the clauses' atoms and one bitset row at a
time (measured with its first event: 1.8 s for 20K dense clauses on a loaded machine).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from betree.disk.nodes import listed
from betree.packed.bounds import atom_intervals
from betree.packed.delta import Based, Delta
from betree.packed.flat import WIDTH, FlatTree
from betree.packed.flatbatch import Shard
from betree.packed.heap import return_freed_memory
from betree.packed.intervals import Intervals, parts
from betree.packed.joined import Joined

#: an event's grid coordinates (:meth:`betree.engine.Engine.coords`)
Coords = Callable[[Mapping[str, object]], dict[str, int]]

#: events matched on the tree before choosing
OBSERVE = 16
#: the interval matcher is chosen when its estimated work is under this share of the tree's
MARGIN = 0.5


class Ranging:
    """The choice for one store's views (a plain store's one, or a sharded store's all)."""

    def __init__(self, kinds: Mapping[str, str]) -> None:
        self.kinds = kinds  # each attribute's grid kind
        self._lock = threading.Lock()
        self._views: list[FlatTree] = []
        self._events = 0
        self._candidates = 0
        self._chosen: Intervals | None = None
        self._decided = False
        self._walks = [0, 0]  # events matched by walking pages, and their candidates
        #: events watched before choosing, and the share of the tree's estimated work
        #: under which intervals are chosen (tests: 0 and ``math.inf``: always intervals)
        self.after = OBSERVE
        self.margin = MARGIN

    def match(
        self,
        shards: Sequence[Shard],
        batch: Sequence[Mapping[str, object]],
        tree: Callable[[], tuple[list[Any], int]],
        lists: bool = False,
    ) -> tuple[list[Any], int]:
        """Each validated event's ids (arrays, or lists when ``lists``) and the candidate
        clauses checked: by intervals when chosen for these views, else by ``tree`` (which
        answers in the same form), whose cost is then counted."""
        chosen = self.chosen(shards)
        if chosen is not None:
            found, candidates = chosen.match(batch)
            return listed(found, lists), candidates
        found, candidates = tree()
        self.observe(len(batch), candidates)
        return found, candidates

    def match_joined(
        self,
        joined: Joined,
        batch: Sequence[Mapping[str, object]],
        coords: Coords,
        deltas: Sequence[Delta] = (),
    ) -> tuple[list[np.ndarray], bool]:
        """:meth:`match` on a sharded store's joined views, the tree event by event
        (:meth:`betree.packed.joined.Joined.match`; ``coords``: an event's grid coordinates),
        and whether each shard's delta of ``deltas`` was applied: on the tree, from its
        phase 1 (older atoms not tested again); not by intervals (then
        :func:`betree.packed.delta.settle` does)."""
        applied = []

        def tree() -> tuple[list[Any], int]:
            found, candidates = [], 0
            for values in batch:
                got = joined.match_slotted(values, self.kinds, deltas)
                if got is None:  # (some shard's keys not settled yet)
                    got = joined.match(coords(values), values, deltas)
                found.append(got)
                candidates += joined.candidates
            applied.append(True)
            return found, candidates

        found = self.match(joined.shards(), batch, tree)[0]
        return found, bool(applied)

    def chosen(self, shards: Sequence[Shard]) -> Intervals | None:
        """The interval matcher for these views if it is the cheaper, else None (then
        match on the tree and :meth:`observe` what it cost)."""
        views = [s.view for s in shards]
        if len(views) != len(self._views) or any(
            a is not b for a, b in zip(views, self._views, strict=True)
        ):
            ranged = views[0].ranged if len(views) == 1 else None  # (a stripped view's own)
            with self._lock:
                self._views, self._events, self._candidates = views, 0, 0
                self._chosen = ranged if isinstance(ranged, Intervals) else None
                self._decided = self._chosen is not None
        if self._decided or self._events < self.after:
            return self._chosen
        with self._lock:
            if not self._decided:
                self._decide(shards, self.kinds)
        return self._chosen

    def carry(self, old: FlatTree, new: FlatTree) -> None:
        """``new``, the view rebuilt to replace ``old`` (a fold: the same subscriptions but
        the few written since), keeps the tree where it was chosen for ``old``, unwatched
        (:mod:`betree.packed.carry`); intervals chosen for ``old`` are chosen afresh."""
        with self._lock:
            if self._decided and self._chosen is None and any(v is old for v in self._views):
                self._views = [new if v is old else v for v in self._views]

    def observe(self, events: int, candidates: int) -> None:
        """Count ``events`` matched on the tree, checking ``candidates`` clauses."""
        self._events += events
        self._candidates += candidates

    def _decide(self, shards: Sequence[Shard], kinds: Mapping[str, str]) -> None:
        self._decided = True
        if self.margin == math.inf:
            self._chosen = Intervals(parts(shards), kinds)
            return_freed_memory()
            return
        tree = self._candidates / max(self._events, 1) * WIDTH
        clauses = sum(len(s.view.exts) for s in shards)
        attrs = {a for s in shards for a in s.view.searches if kinds.get(a) in ("int", "float")}
        if _words(len(attrs), clauses) >= self.margin * tree:  # the bitsets alone lose
            return
        built = Intervals(parts(shards), kinds)
        if built.cost() < self.margin * tree:
            self._chosen = built
        return_freed_memory()  # (the build's temporaries, not kept by the allocator)

    def walked(self, events: int, candidates: int) -> None:
        """Count ``events`` matched by walking pages, checking ``candidates`` clauses."""
        self._walks[0] += events
        self._walks[1] += candidates

    def worth(self, clauses: int, unbounded: int = 0) -> bool:
        """Whether the bitsets alone of ``clauses`` clauses over the schema's int and float
        attributes (at most), and a row each for ``unbounded`` of them (no interval:
        candidates for every event, as :meth:`Intervals.cost` counts them), would cost
        under :attr:`margin` times the walks: checked before a view too big to hold whole
        is built to try :meth:`lean` (BEGen 10M of 16 shards at the default cache: 400
        attributes, no view built; rich 1M, ~40% of a shard's clauses unbounded)."""
        attrs = sum(1 for kind in self.kinds.values() if kind in ("int", "float"))
        return _words(attrs, clauses) + unbounded * WIDTH < self._budget()

    def _budget(self) -> float:
        """The work an event under which intervals replace the walks: :attr:`margin` times
        the walks' (their candidate clauses a row each, as the tree's is counted)."""
        if self.margin == math.inf:  # (tests: always intervals)
            return math.inf
        events, candidates = self._walks
        return self.margin * candidates / max(events, 1) * WIDTH

    def lean(self, based: Based, limit: int) -> Based | None:
        """``based`` with its view stripped to the interval matcher built from it
        (:meth:`betree.packed.flat.FlatTree.strip`; :meth:`chosen` takes it from there),
        or already so built from the pages (:mod:`betree.packed.leanbuild`): for a view
        too big to hold whole (:class:`betree.packed.held.FlatSlot`), when the matcher's
        estimated work an event is under :meth:`_budget` and what is kept takes at most
        ``limit`` bytes; else None (walk pages)."""
        view = based.view
        budget = self._budget()
        built = view.ranged
        if not isinstance(built, Intervals):
            attrs = {a for a in view.searches if self.kinds.get(a) in ("int", "float")}
            least = _words(len(attrs), len(view.exts))  # (then a row each unbounded clause)
            if least >= budget or least + unbounded(based, self.kinds) * WIDTH >= budget:
                return None
            shard = Shard(view, based.grouped, 0, 0, based.atoms)
            built = Intervals(parts([shard]), self.kinds)
        if built.cost() >= budget:
            return None
        if view.ranged is None:
            view.strip(built, built.searched)
        return based if view.nbytes <= limit else None

    def describe(self) -> dict[str, object]:
        """The choice, for tests and diagnostics."""
        chosen = self._chosen
        return {
            "decided": self._decided,
            "events": self._events,
            "intervals": chosen is not None,
            "bytes": chosen.nbytes if chosen is not None else 0,
        }


def unbounded(based: Based, kinds: Mapping[str, str]) -> int:
    """The clauses of ``based``'s whole view that no interval bounds, as
    :attr:`Intervals.unbounded` counts them (a row each an event: a bound of the matcher's
    cost, known before building it): each int or float attribute's interval atoms
    (:func:`betree.packed.bounds.atom_intervals`) marked, each clause's rows tested.
    Memory: a bool an atom and one a row of atoms."""
    view = based.view
    ranged = np.zeros(max(based.atoms, int(view.rows.max(initial=0)) + 1), dtype=bool)
    for name, search in view.searches.items():
        if kinds.get(name) in ("int", "float"):
            ranged[atom_intervals(search, kinds[name])[0]] = True
    hit = ranged[view.rows].any(axis=1)
    if view.row_clause is not None:  # (a clause of more than one row)
        hit = np.bincount(view.row_clause, weights=hit, minlength=len(view.exts)) > 0
    return len(view.exts) - int(np.count_nonzero(hit))


def _words(attrs: int, clauses: int) -> int:
    """The bitset words an event ORs at least: one row of ``clauses`` bits an attribute."""
    return attrs * (clauses + 63) // 64
