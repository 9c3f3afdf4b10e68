"""What a rebuilt packed view takes over from the view it replaces: the clauses' keys and
the choice of the tree over intervals, learnt once per store instead of once per view.

Why: a fold (:class:`betree.packed.held.FlatSlot`) replaces the held view with one built
afresh, which used to learn everything again: its keys over :data:`LEARN` events matched
with the clauses' rows read whole, then :data:`LEARN` more on trial, while
:class:`betree.packed.ranging.Ranging` watched it anew and, from those unkeyed events,
built an interval matcher only to drop it.  Measured on the rich 50K store after 150
writes and a fold (``docs/bench/live/README.md``, after31): 31 events at ~2.5 ms of CPU
(~30,000 candidate clauses) instead of ~0.9 ms (~200), one of 255 ms (the discarded
intervals) and one of 17 ms (the keys chosen); a fold's view once keyed is as fast as a
fresh build of the same snapshot.  An atom's truths do not depend on the generation, so
the new view chooses its keys at once from the counts the old one learnt (an atom newer
than them counted as holding always, so chosen last), and a decision to keep the tree
carries over.  Exact: any key is one of its clause's atoms (:mod:`betree.packed.keys`),
and the tree or intervals give the same answers.  Cost: one key choice a rebuild
(rich 50K: ~17 ms), in place of the events above, made with the keys' sorted copy and
slots by a background fold in its own thread (:func:`learn_from`), not by the first
match after it (rich 50K, that match's thread CPU: 44-56 ms before, 2.6-4.3 after).
"""

from __future__ import annotations

import numpy as np

from betree.packed import keys
from betree.packed.delta import Based
from betree.packed.flat import LEARN, FlatTree
from betree.packed.ranging import Ranging


def take_over(old: FlatTree, based: Based, ranging: Ranging) -> None:
    """``based``'s view (not yet matched) takes over what ``old``, the view it replaces,
    learnt: its keys (:func:`learn_from`, if not done yet in the fold's thread) and
    ``ranging``'s choice of the tree.  A view still learning, on trial, or stripped to
    intervals on either side leaves the new one to learn for itself."""
    if _carries(old, based.view):
        ranging.carry(old, based.view)
        learn_from(old, based)


def learn_from(old: FlatTree, based: Based) -> None:
    """``based``'s view, not yet matched, keyed from ``old``'s counts as :func:`take_over`
    would, and settled (its keys sorted and its atoms slotted: what its first events
    would make).  Called by a fold in its own thread, so that the matching thread only
    swaps the view in (rich 50K: the first event after a fold took 44-56 ms of that
    thread's CPU, most of it here and in counting the view's bytes,
    :meth:`betree.packed.held.FlatSlot._fold`).  ``old`` may be matched meanwhile: a
    count or key read mid-change costs speed, never answers (any key is one of its
    clause's atoms)."""
    new = based.view
    if not _carries(old, new) or new.learnt or new.learning is not None:
        return
    key, counts = old.key, old.counts
    if key is None or counts is None:  # the keys failed their trial: none here
        new.learnt = True
        return
    held = np.full(max(based.atoms, len(counts)), LEARN, dtype=counts.dtype)
    held[: len(counts)] = counts
    key, second = keys.choose(new.rows, new.row_at, new.row_clause, held)
    new.settle(key, second)
    if old.slots is not None:  # (matched one event at a time: slotted, as old was)
        new.slotted(based.atoms, based.grouped)
    new.learnt, new.counts = True, held


def _carries(old: FlatTree, new: FlatTree) -> bool:
    """Whether ``old`` learnt what ``new`` may take over (both whole, ``old``'s keys past
    their trial or failed it)."""
    return old.ranged is None and new.ranged is None and old.learnt and old.trial is None
