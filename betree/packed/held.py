"""Which packed view a store's matches hold, and for how long: :class:`FlatSlot`.

Why apart from the view (:mod:`betree.packed.flat`): the view is a snapshot's arrays; this
is the policy around it, against the page cache's budget.  A view is built once walking
pages has cost about as much (:data:`FLAT_AFTER` events, :data:`WALK_SECONDS`), held
whole within three quarters of the page cache's budget (the share, taken from it),
stripped to its interval matcher (:mod:`betree.packed.ranging`) or held whole past that
within :data:`LEAN_TIMES` the budget, and kept across writes by its delta, folded when due
(in the background when :attr:`FlatSlot.background` is set).

Which view is built first is decided before building (the engine's ``make``): lean from
the pages only when the tree's shape says its intervals may pay
(:func:`betree.packed.leanbuild.unbounded`), else whole (then stripped if its intervals
are cheaper after all: :func:`betree.packed.ranging.unbounded` first).  A held view grows
after it is taken (its keys' slots and numbering: rich 1M, 117 -> 246 MB a shard):
:meth:`FlatSlot.get` counts it again when one of those parts changed (a tuple of
identities an event) and, past its bound (:attr:`FlatSlot.limit`), drops it; the next
view is then built lean (or none: pages walked), never whole again.  A delta is bounded
by its fold (:mod:`betree.packed.delta`), a fold's view counted when taken.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from betree.packed import delta as delta_bounds
from betree.packed.delta import Based
from betree.packed.flat import LEAST_BYTES, FlatTree
from betree.packed.heap import return_freed_memory
from storage.cache import PageCache

#: events matched by walking pages in one generation before a view of it is built: a
#: view costs about as much as this many walks, and pays off only if the generation lasts
#: (the ski-rental rule: a store written to between every few events never builds one)
FLAT_AFTER = 64
#: seconds of walks in one generation after which a view is built however few the events
#: were: a walk that slow reads most of the store's pages, as a build does once (dense 1M,
#: 2 shards, 256 MB cache: 6.2 s a walk, 64 of them 400 s; 100K: 1 s, the build ~20 s)
WALK_SECONDS = 10.0
#: a delta due for folding is matched while a fold runs in the background
#: (:attr:`FlatSlot.background`), until it is this many times past its bound
BEHIND = 4
#: a view too big for the page cache's share is held stripped to its interval matcher
#: (:attr:`FlatSlot.lean`) within this many times the page cache's budget, charged apart
#: from it (dense 1M, 2 shards, 256 MB: ~200 MB a shard, walks 6.2 s an event), or whole
#: when its intervals are no cheaper than walks (rich 1M: walks ~170 ms an event)
LEAN_TIMES = 4


class Lean(Protocol):
    """What holds a view too big for the page cache's share as its interval matcher
    (:class:`betree.packed.ranging.Ranging`)."""

    def worth(self, clauses: int) -> bool:
        """Whether a view of ``clauses`` clauses may be worth building to try."""
        ...

    def lean(self, based: Based, limit: int) -> Based | None:
        """``based`` stripped to its interval matcher within ``limit`` bytes, or None."""
        ...


def growing(view: FlatTree) -> tuple[int, ...]:
    """What a held view grows by after it is taken, by identity (its keys, their runs and
    slots, its numbering for batches, its interval matcher): counted again on a change."""
    parts = (view.key, view.counts, view.by_key, view.slots, view.numbering, view.ranged)
    return (id(view), *map(id, parts))


class FlatSlot:
    """The view one store's matches use, if any: built once :attr:`after` events were
    matched by walking pages, and only if it fits in three quarters of the store's
    page-cache budget, then taken (:meth:`PageCache.reserve`; pages serve writes alone).

    A view survives writes (:mod:`betree.packed.delta`): a later generation gets the same base
    view with the delta caught up from the change log, until the delta is due for folding
    (then rebuilt) or the log cannot say, or a delta left over once writes stop has cost
    the events since as much as the last build (:meth:`_lingers`).  A reader of a
    generation older than the held one walks pages (the view cannot go back).

    With :attr:`background` set (builds a base view in a snapshot of its own), a fold runs
    in a thread (:meth:`_fold`, letting the interpreter lock go every :data:`PAUSE_EVERY`
    c-nodes) while matches go on with the held view and its growing delta (exact, slower);
    a delta :data:`BEHIND` times past its bound, or a log that cannot say, folds at once.

    A view too big for that share is not given up when :attr:`lean` is set (by the engine:
    :meth:`betree.packed.ranging.Ranging.lean`): stripped to its interval matcher, or built
    so from the pages (``make``: :mod:`betree.packed.leanbuild`), when cheaper an event than
    the walks were, and held if within :data:`LEAN_TIMES` the page cache's budget, charged
    apart (the pages keep their whole budget: matching reads none); else whole (``whole``)
    within as much, the share taken.  Grown past that bound after it was taken (its keys'
    slots, its numbering: :func:`growing`), a view is dropped (:meth:`_within`)."""

    def __init__(self, cache: PageCache, after: int = FLAT_AFTER) -> None:
        self.cache = cache
        self.after = after
        self._lock = threading.Lock()
        self._held: tuple[int, Based] | None = None  # (generation, its view and delta)
        self._walks = 0  # events walked since the last view
        self._walk_s = 0.0  # and the seconds they took (:meth:`walked`)
        #: the seconds of walks after which a view is built, however few the events
        self.walk_seconds = WALK_SECONDS
        #: the bytes a whole view may take from the page cache (tests shrink it)
        self.share = cache.budget - cache.budget // 4
        #: the bytes a view past the share may take (tests shrink it, as the share)
        self.limit = LEAN_TIMES * cache.budget
        self._too_big = False  # a view of this store did not fit: not built again
        #: views built (for tests and diagnostics: a fold counts one)
        self.builds = 0
        self._build_s = 0.0  # what the last view took to build
        self._quiet = 0.0  # estimated seconds the held delta has cost since the last write
        #: builds a base view in a snapshot of its own: (its generation, it); None: fold inline
        self.background: Callable[[], tuple[int, Based]] | None = None
        self._folding: threading.Thread | None = None
        self._base_gen = -1  # the generation of the held view's base
        #: strips a view too big for the share to its interval matcher (None: cannot)
        self.lean: Lean | None = None
        #: called with the view replaced and its replacement (:mod:`betree.packed.carry`)
        self.rebuilt: Callable[[FlatTree, Based], None] = lambda old, based: None
        #: a whole view grew past its bound after it was taken: the next is built lean
        #: from the pages (taken if cheaper than the walks, within the bound), never whole
        self.outgrown = False
        self._parts: tuple[int, ...] = ()  # (the held view's growing parts when counted)

    def _lingers(self, based: Based, events: int) -> bool:
        """Whether the held view's delta, left over once writes stopped, has cost the
        events since the last write as much as a new view (the ski-rental rule again:
        then it is folded; estimated at 1 µs an event per added clause and newer atom)."""
        delta = based.delta
        if not delta.clauses and not delta.removed:
            return False
        self._quiet += events * 1e-6 * (delta.clauses + len(delta.new_atoms) + 1)
        return self._quiet > self._build_s

    def held(self, gen: int) -> Based | None:
        """The view of generation ``gen`` if one is held (none is built for the asking)."""
        held = self._held
        return held[1] if held is not None and held[0] == gen else None

    def get(
        self,
        gen: int,
        make: Callable[[], Based],
        clauses: int,
        events: int = 1,
        catch_up: Callable[[Based], Based | None] | None = None,
        predicates: Callable[[], int] | None = None,
        whole: Callable[[], Based | None] | None = None,
    ) -> Based | None:
        """The view of generation ``gen`` for ``events`` more events, or None: walk the
        pages.  ``make`` builds one when it is due and its ``clauses`` and its PB+trees'
        ``predicates()`` (asked only then) may fit: an id of 4 bytes each at least, so that
        a dense store (an atom a range end: ~850 bytes a clause) is not read whole for a
        view then dropped; ``catch_up`` brings the held one to ``gen`` (None: it cannot,
        rebuild); ``whole`` builds a whole view where ``make``'s lean one was not worth
        holding (None: estimated too big)."""
        based = self.held(gen)
        if (
            based is not None
            and not self._lingers(based, events)
            and growing(based.view) == self._parts
        ):
            return based
        with self._lock:
            held = self._held
            grown = held is not None and growing(held[1].view) != self._parts
            if held is not None and grown and not self._within(held[1]):
                self.drop()  # (grown past its bound)
                held = None
            old = held[1].view if held is not None else None  # (its rebuild takes over)
            if held is not None:
                if gen < held[0]:
                    return None
                if gen > held[0]:
                    newer = catch_up(held[1]) if catch_up is not None else None
                    if newer is not None and (not newer.delta.due() or self._behind(newer)):
                        self._held, self._quiet = (gen, newer), 0.0
                        return newer
                elif not self._lingers(held[1], 0) or self._behind(held[1]):
                    return held[1]
                self.drop()  # folded: rebuilt now
                self._walks = self.after
            self._walks += events
            slow = self._walk_s >= self.walk_seconds
            if (self._walks <= self.after and not slow) or self._too_big:
                return None
            least = clauses * LEAST_BYTES  # (a dense store: an id of 4 bytes an atom too)
            fits = least <= self.share and (
                predicates is None or least + 4 * predicates() <= self.share
            )
            lean = self.lean is not None and self.lean.worth(clauses)
            if not fits and not lean:
                return None
            reserved = fits and self.cache.reserve(self.share)
            if not reserved and not lean:
                self._too_big = True
                return None
            # no page read while the view lasts: all go, memory back before the build
            self.cache.clear()
            return_freed_memory(cycles=True)
            began = time.perf_counter()
            made = make()
            lean_made = made.view.ranged is not None  # (built lean from the pages)
            based = self._fit(made, reserved)
            del made  # (not held through the whole build)
            if based is None and lean_made and whole is not None:  # (the whole, then?)
                full = whole()  # (held whole as in _fit: its intervals not tried again)
                if full is not None and full.view.nbytes <= self.limit:
                    based = full if self.cache.reserve(self.share) else None
            self._build_s = time.perf_counter() - began
            self.builds += 1
            return_freed_memory()
            if based is None:
                self._too_big = True
                return None
            if old is not None:
                self.rebuilt(old, based)
            self._held, self._base_gen, self._parts = (gen, based), gen, ()
            return based

    def _within(self, based: Based) -> bool:
        """Whether the held view, counted again (its growing parts changed), is still
        within its bound: :attr:`limit` when :attr:`lean` is set (what a take allows a
        whole view past the share, or a lean one), else the share.  Past it, a whole view
        is marked :attr:`outgrown` (with :attr:`lean`; else too big, as a lean one past
        it): the caller drops it.  Cost: one count of its bytes a change of its parts (a
        few a view; rich 1M, 2 shards of ~246 MB: 0.14 s CPU for both)."""
        view = based.view
        self._parts = growing(view)
        bound = self.share if self.lean is None else self.limit
        if view.nbytes <= bound:
            return True
        if self.lean is not None and view.ranged is None:
            self.outgrown = True
        else:
            self._too_big = True
        return False

    def _fit(self, based: Based, reserved: bool, nbytes: int | None = None) -> Based | None:
        """``based`` if its whole view fits the page cache's share (``reserved``: taken),
        else, with :attr:`lean`, stripped to the interval matcher (or built so from the
        pages) if kept within :data:`LEAN_TIMES` the cache's budget; else None.
        ``nbytes``: the view's, counted already (by a fold, in its thread)."""
        if not reserved or based.view.ranged is not None:
            fits = False
        else:  # (counting costs: rich 50K, ~50 ms for the PB+trees' arrays)
            fits = (based.view.nbytes if nbytes is None else nbytes) <= self.share
        if fits:
            return based
        if reserved:
            self.cache.release(self.share)
        slim = self.lean.lean(based, self.limit) if self.lean else None
        if slim is None and self.lean and based.view.ranged is None and not self.outgrown:
            # (its intervals no cheaper than walks: held whole, the share taken)
            nbytes = based.view.nbytes if nbytes is None else nbytes
            if nbytes <= self.limit and self.cache.reserve(self.share):
                return based
        return_freed_memory()
        return slim

    def walked(self, seconds: float) -> None:
        """Count the seconds an event (or batch) took walking pages."""
        self._walk_s += seconds

    def _behind(self, based: Based) -> bool:
        """Whether ``based`` may be matched while a fold runs in the background (one is
        started if none runs)."""
        if self.background is None or based.delta.clauses > BEHIND * delta_bounds.FOLD_CLAUSES:
            return False
        if len(based.delta.new_atoms) > BEHIND * delta_bounds.FOLD_ATOMS:
            return False
        if self._folding is None:
            self._folding = threading.Thread(target=self._fold, name="bexdb-fold", daemon=True)
            self._folding.start()
        return True

    def _fold(self) -> None:
        """The background fold (a thread), which takes its view in itself (the keys are
        chosen in ``background``, the bytes counted here), so that the matching thread
        does none of it, nor lets the replaced view go (rich 50K, the first match after a
        fold: 44-56 ms of that thread's CPU before, 2.6-4.3 ms after).  Then it gives the
        heap's free memory back to the kernel (``malloc_trim``): what the replaced view
        and the writes since the last fold held is freed here (rich 50K after 150 single
        writes: ~660 MB of the main arena, the RSS 1.53 -> 0.87 GB, for 56 ms of this
        thread's CPU; the first match after it no slower within the noise:
        docs/bench/live/README.md, live41)."""
        assert self.background is not None
        began = time.perf_counter()
        try:
            gen, based = self.background()
            nbytes = based.view.nbytes
        except Exception:  # (a store closed or replaced meanwhile): fold inline from now on
            self.background = None
            with self._lock:
                self._folding = None
            return
        with self._lock:
            old = self._held  # (the replaced view let go below: in this thread, unlocked)
            self._take_in(gen, based, nbytes)
            self._folding = None
            self._build_s = time.perf_counter() - began
        del old
        return_freed_memory()

    def _take_in(self, gen: int, based: Based, nbytes: int) -> None:
        """A view folded in the background, of ``nbytes``, becomes the held one (the caller
        holds the lock), if one is held, older than it, and it fits."""
        if self._held is None or gen <= self._base_gen:
            return
        lean = self._held[1].view.ranged is not None  # (its share not reserved: intervals)
        fitted = self._fit(based, not lean, nbytes)
        if fitted is None:
            self.background = None
            if not lean:  # (_fit gave the held view's share back)
                self.cache.reserve(self.share)
            return
        self.rebuilt(self._held[1].view, fitted)
        self._held, self._base_gen, self._quiet = (gen, fitted), gen, 0.0
        self._parts = growing(fitted.view) if fitted.view.ranged is None else ()
        self.builds += 1

    def wait(self) -> None:
        """Until no fold runs in the background (before the store closes; tests)."""
        folding = self._folding
        if folding is not None:
            folding.join()

    def held_gen(self) -> int:
        """The generation of the view held (-1: none)."""
        held = self._held
        return held[0] if held is not None else -1

    def advance(self, gen: int, catch_up: Callable[[Based], Based | None]) -> None:
        """The held view caught up to ``gen`` by ``catch_up`` (as :meth:`get` would: a delta
        due for folding is held while a fold runs in the background, started now), unless
        the log cannot say or the delta is too far past its bound: then :meth:`get` does
        it (and folds) at the next match.  Never builds a view."""
        with self._lock:
            held = self._held
            if held is None or gen <= held[0]:
                return
            newer = catch_up(held[1])
            if newer is not None and (not newer.delta.due() or self._behind(newer)):
                self._held, self._quiet = (gen, newer), 0.0

    def drop(self) -> None:
        """Forget the view, giving its share back to the page cache (a lean one took none)."""
        if self._held is not None:
            if self._held[1].view.ranged is None:
                self.cache.release(self.share)
            self._held = None
        self._walks, self._walk_s = 0, 0.0

    def describe(self) -> dict[str, Any]:
        """Whether a view is held, its generation, bytes, and its delta's added clauses
        and removed ids (for tests and diagnostics)."""
        held = self._held
        if held is None:
            return {"held": False, "gen": -1, "bytes": 0, "added": 0, "removed": 0}
        gen, based = held
        delta = based.delta
        return {
            "held": True,
            "gen": gen,
            "bytes": based.view.nbytes,
            "added": delta.clauses,
            "removed": len(delta.removed),
        }
