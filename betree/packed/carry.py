"""What a rebuilt packed view takes over from the view it replaces: the clauses' keys and
the choice of the tree over intervals, learnt once per store instead of once per view.

Why: a fold (:class:`betree.packed.flat.FlatSlot`) replaces the held view with one built
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
(rich 50K: ~17 ms), in place of the events above.
"""

from __future__ import annotations

import numpy as np

from betree.packed import keys
from betree.packed.delta import Based
from betree.packed.flat import LEARN, FlatTree
from betree.packed.ranging import Ranging


def take_over(old: FlatTree, based: Based, ranging: Ranging) -> None:
    """``based``'s view (not yet matched) takes over what ``old``, the view it replaces,
    learnt: its keys, if they passed their trial (or their absence, if they failed it),
    and ``ranging``'s choice of the tree.  A view still learning, on trial, or stripped to
    intervals on either side leaves the new one to learn for itself."""
    new = based.view
    if old.ranged is not None or new.ranged is not None or not old.learnt:
        return
    if old.trial is not None or new.learnt or new.learning is not None:
        return
    ranging.carry(old, new)
    if old.key is None or old.counts is None:  # the keys failed their trial: none here
        new.learnt = True
        return
    counts = old.counts
    held = np.full(max(based.atoms, len(counts)), LEARN, dtype=counts.dtype)
    held[: len(counts)] = counts
    key, new.second = keys.choose(new.rows, new.row_at, new.row_clause, held)
    new.learnt, new.counts, new.key = True, held, key
