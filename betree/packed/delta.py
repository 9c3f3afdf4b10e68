"""Packed views that survive writes: a base view of an older snapshot plus what changed.

Why: a packed view (:mod:`betree.packed.flat`) describes one snapshot and costs the whole store
to build (every page read: ~0.3 s at 100K, ~1.2 s a shard at 10M).  Dropped on every
commit, a store written to once a second would spend its time rebuilding, or walk pages
(30-50x slower an event).  Instead a reader keeps its view as a *base* and catches up on
the commits since from the change log (:mod:`betree.disk.changelog`):

* **removed**: the external ids whose base subscription was deleted or replaced since;
  the base view's answers are masked by them (a set lookup per id found);
* **added**: the subscriptions added since and still present, with their clauses' atom
  ids, matched directly, without the tree: a clause holds iff all its atoms hold, and the
  BE-Tree only prunes clauses that cannot (the differential tests check it).  An atom
  older than the base has its truth in the base's phase 1 (its PB+tree entries and
  direct tests were in the base: atom ids are never reused, so an atom alive now and
  older than the base was alive in it); a newer one is tested by ``Atom.holds``.

The answer is exactly a fresh view's: the base's clauses less the removed, plus the added.
Catching up reads one log entry per commit (and each new atom's record once), and
copies the delta (O(its size); a delta is immutable once made, so that readers of an
older generation keep theirs).  Matching adds one ``reduceat`` over the added clauses'
atoms and one ``holds`` call per new atom of an attribute the event defines (~0.2 µs).

A write of a few subscriptions catches its own process's view up at once
(:meth:`betree.engine.Engine.caught_up`: the next match pays none of it, ~0.2 ms at 100K);
other processes, and larger writes, catch up at their next match, taking the atoms their
own writes made from memory (:class:`betree.disk.writer.Memo`).

Folding: when the delta passes :data:`FOLD_CLAUSES` added clauses or :data:`FOLD_ATOMS`
new atoms, a new base is built in a background thread while matches go on with the
growing delta, or at once if it runs 4x past these (:class:`betree.packed.held.FlatSlot`).
A log that no longer reaches back to the base (:data:`betree.disk.changelog.KEEP` commits), or
a snapshot whose subscription counters disagree with the base's plus the log (a batch
build), also means a rebuild: the log is an optimisation, the pages are the truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from betree.disk import changelog
from betree.disk.catalog import SubId, load_atom
from betree.disk.nodes import id_array
from betree.lang.atoms import Atom
from storage.txn import ReadTxn

if TYPE_CHECKING:
    from betree.matching.direct import DirectAtoms
    from betree.packed.flat import FlatTree

#: added clauses past which the delta is folded into a new base.  Measured at 100K BEGen:
#: a view costs B ~ 1.9 s to build, a delta ~0.8 µs an event per added clause; with a
#: clause a write and a match a write, folding every K clauses costs B/K + 0.8 µs K/2 an
#: event, least at K = sqrt(2B / 0.8 µs) ~ 2,200 (~1.7 ms an event amortized, most of it
#: in the 1 match in K that folds: the p99, not the p50)
FOLD_CLAUSES = 2048
#: atoms newer than the base past which the delta is folded (each tested per event)
FOLD_ATOMS = 1024

_EMPTY = np.empty(0, dtype=np.int64)
_BIT = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))  # bit i of a word


class Delta:
    """What was written between a base snapshot and a later one (module docstring).

    Added clauses are packed as they come: ``clause_sub`` (each clause's subscription, a
    position in ``exts``/``alive``), ``starts`` (each clause's first atom) and ``flat``
    (the atoms: a base atom by its id, a newer one as ``base_atoms`` + its position in
    ``new_atoms``).  An added subscription removed later is marked dead in ``alive``.
    Catching up copies these (O(the delta), in C but for the Python lists) and packs the
    new entries only.
    """

    __slots__ = (
        "_direct",
        "_gone",
        "_removed_ints",
        "alive",
        "atoms",
        "base_atoms",
        "by_attr",
        "clause_sub",
        "clauses",
        "exts",
        "flat",
        "ids",
        "new_atoms",
        "new_ids",
        "newer",
        "newer_at",
        "next_sid",
        "older",
        "removed",
        "seq",
        "starts",
        "subs",
        "undefined",
        "where",
    )

    def __init__(self, seq: int, next_sid: int, subs: int, base_atoms: int) -> None:
        self.seq = seq  #: the next log entry to read
        self.next_sid = next_sid
        self.subs = subs
        self.base_atoms = base_atoms  #: atoms with smaller ids are the base's
        self.removed: frozenset[SubId] = frozenset()  #: external ids masked in the base
        self.where: dict[int, int] = {}  #: live added sid -> its position in ``exts``
        self.exts: list[SubId] = []
        #: ``exts`` as one array (:func:`betree.disk.nodes.id_array`), kept up by the
        #: catch-up: an event's hits are one ``take`` of it, not a list made into an array
        self.ids = id_array([])
        self.alive = np.zeros(0, dtype=bool)
        self.clause_sub = _EMPTY
        self.starts = _EMPTY
        self.flat = _EMPTY
        #: ``flat`` with each newer atom as atom 0, the positions of the newer atoms in
        #: ``flat`` and theirs in ``new_atoms``: an event's truths of the added clauses'
        #: atoms are one ``take`` of its phase 1 and one of its newer atoms' truths, not a
        #: copy of the whole phase 1 (~300 KB at 100K BEGen) extended by them
        self.older = _EMPTY
        self.newer = _EMPTY
        self.newer_at = _EMPTY
        self.new_ids: dict[int, int] = {}  #: newer atom id -> its position in new_atoms
        self.new_atoms: list[Atom] = []
        #: positions in ``new_atoms`` by attribute (an atom of an attribute an event leaves
        #: undefined is not tested: false, or true for the ``undefined`` test's)
        self.by_attr: dict[str, list[int]] = {}
        self.undefined: list[int] = []  #: positions of the atoms true on undefined
        #: atoms of the added clauses read so far, by id: the newer ones when caught up,
        #: older ones for a batch (grows only: shared between versions)
        self.atoms: dict[int, Atom] = {}
        self.clauses = 0  #: live added clauses
        #: :meth:`direct`'s atoms: each position in ``flat`` as an index into them, which
        #: are true without a test, their positions by attribute, the atoms (made once)
        self._direct: (
            tuple[np.ndarray, np.ndarray, dict[str, list[int]], list[Atom | None]] | None
        ) = None
        #: the int ones of ``removed`` as a sorted array (made once)
        self._removed_ints: np.ndarray | None = None
        self._gone: tuple[np.ndarray, np.ndarray] | None = None  #: :meth:`gone`'s (exts, it)

    @classmethod
    def empty(cls, rec: Mapping[str, Any]) -> Delta:
        """No change since the snapshot whose root record is ``rec``."""
        return cls(int(rec.get("log_next", 0)), rec["next_sid"], rec["subs"], rec["next_atom"])

    @property
    def added(self) -> bool:
        """Whether some subscription was added since the base and is still here."""
        return bool(self.where)

    def advance(
        self,
        txn: ReadTxn,
        rec: Mapping[str, Any],
        known: Mapping[int, Atom] | None = None,
        logged: Mapping[int, changelog.Change] | None = None,
    ) -> Delta | None:
        """This delta caught up to ``txn``'s snapshot (root record ``rec``), or None when
        the log cannot say (entries dropped, counters that disagree: rebuild).  ``known``:
        atoms by id that this process's writes committed (not read again)."""
        known = known if known is not None else {}
        end = int(rec.get("log_next", 0))
        if end < self.seq:
            return None
        out = Delta(end, self.next_sid, self.subs, self.base_atoms)
        removed = set(self.removed)
        where = dict(self.where)
        alive = self.alive.copy()
        exts = list(self.exts)
        new_ids = dict(self.new_ids)
        new_atoms = list(self.new_atoms)
        by_attr = dict(self.by_attr)  # (lists copied once extended: older deltas keep theirs)
        undefined = list(self.undefined)
        copied: set[str] = set()
        atoms = out.atoms = self.atoms
        pending: dict[int, tuple[SubId, list[list[int]]]] = {}  # added by these entries
        dead: list[int] = []
        for seq in range(self.seq, end):
            found = logged.get(seq) if logged else None
            if found is None:
                found = changelog.entry(txn, seq)
            if found is None:
                return None
            fleeting = {sid for sid, _, _ in found[1]} & {sid for sid, _ in found[0]}
            for sid, ident in found[0]:  # (a sid added and removed in one commit: neither)
                at = where.pop(sid, None)
                if at is not None:
                    dead.append(at)
                elif sid not in fleeting and pending.pop(sid, None) is None:
                    removed.add(ident)
                out.subs -= 1
            for sid, ident, clauses in found[1]:
                if sid not in fleeting:
                    pending[sid] = (ident, clauses)
                out.next_sid = max(out.next_sid, sid + 1)
                out.subs += 1
        if out.next_sid != rec["next_sid"] or out.subs != rec["subs"]:
            return None
        subs: list[int] = []
        lens: list[int] = []
        flat: list[int] = []
        base = self.base_atoms
        for sid, (ident, clauses) in pending.items():  # present in this snapshot: its atoms too
            where[sid] = len(exts)
            for ids in clauses:
                subs.append(len(exts))
                lens.append(len(ids))
                for aid in ids:
                    if aid >= base:  # (an older atom is loaded only for a batch: direct)
                        at = new_ids.get(aid)
                        if at is None:
                            at = new_ids[aid] = len(new_atoms)
                            atom = atoms.get(aid)
                            if atom is None:
                                atom = known.get(aid)
                            atom = atom if atom is not None else load_atom(txn, aid)
                            new_atoms.append(atom)
                            atoms[aid] = atom
                            if atom.attr not in copied:
                                copied.add(atom.attr)
                                by_attr[atom.attr] = list(by_attr.get(atom.attr, ()))
                            by_attr[atom.attr].append(at)
                            if not atom.requires_defined:
                                undefined.append(at)
                        aid = base + at
                    flat.append(aid)
            exts.append(ident)
        alive = np.concatenate([alive, np.ones(len(exts) - len(alive), dtype=bool)])
        if dead:
            alive[dead] = False
        # (the few entries of a commit in Python, one array each: ~25 numpy calls on a
        # handful of items measured ~85 µs a single-subscription catch-up at 100K BEGen)
        at = len(self.flat)
        starts: list[int] = []
        for n in lens:
            starts.append(at)
            at += n
        fresh = [k for k, aid in enumerate(flat) if aid >= base]
        out.starts = _grown(self.starts, starts)
        out.flat = _grown(self.flat, flat)
        out.older = _grown(self.older, [0 if aid >= base else aid for aid in flat])
        out.newer = _grown(self.newer, [k + len(self.flat) for k in fresh])
        out.newer_at = _grown(self.newer_at, [flat[k] - base for k in fresh])
        out.clause_sub = _grown(self.clause_sub, subs)
        out.removed, out.where, out.alive, out.exts = frozenset(removed), where, alive, exts
        more = id_array(exts[len(self.exts) :])
        out.ids = np.concatenate([self.ids, more]) if len(more) else self.ids
        out.new_ids, out.new_atoms = new_ids, new_atoms
        out.by_attr, out.undefined = by_attr, undefined
        out.clauses = int(np.count_nonzero(alive[out.clause_sub]))
        return out

    def due(self) -> bool:
        """Whether it is worth folding into a new base."""
        return self.clauses > FOLD_CLAUSES or len(self.new_atoms) > FOLD_ATOMS

    def mask(self, found: np.ndarray) -> np.ndarray:
        """A base view's answer less the subscriptions removed since."""
        if not self.removed or not len(found):
            return found
        return found[~self._removed_at(found)]

    def _removed_at(self, found: np.ndarray) -> np.ndarray:
        """Which of the external ids ``found`` were removed since the base."""
        if found.dtype == np.int64:  # in numpy: an event finds ~1,000 ids at 100K BEGen
            if self._removed_ints is None:
                some = [x for x in self.removed if type(x) is int and -(2**63) <= x < 2**63]
                self._removed_ints = np.unique(np.array(some, dtype=np.int64))
            ints = self._removed_ints
            if not len(ints):
                return np.zeros(len(found), dtype=bool)
            # (one search, not ``isin``: ~5x less at ~1,000 ids found and a few removed)
            at = ints.searchsorted(found)
            np.minimum(at, len(ints) - 1, out=at)
            return ints.take(at) == found  # type: ignore[no-any-return]
        removed = self.removed
        return np.fromiter((x in removed for x in found.tolist()), bool, len(found))

    def gone(self, exts: np.ndarray) -> np.ndarray | None:
        """Which of a base view's clauses (their external ids ``exts``) are removed, or
        None if none is (made once a delta and view: O(the view's clauses), ~1 ms at 100K)."""
        if not self.removed:
            return None
        if self._gone is None or self._gone[0] is not exts:
            self._gone = (exts, self._removed_at(exts))
        return self._gone[1]

    def batch_hits(
        self, sat: np.ndarray, batch: Sequence[Mapping[str, object]], slots: np.ndarray
    ) -> list[np.ndarray]:
        """The added subscriptions each event of a batch satisfies, from the batch's
        phase-1 truths ``sat`` (``words x base atoms``, bit ``slots[i]`` event i: as
        :mod:`betree.packed.flatbatch` keeps them), its newer atoms tested once an event
        and attribute as :meth:`added_hits` does: a clause's truths are one AND of its
        atoms' words for 64 events, not a test an atom and event (:meth:`direct`)."""
        n = len(batch)
        if not self.where or not len(self.starts):
            return [_EMPTY] * n
        base, new_n = self.base_atoms, len(self.new_atoms)
        words = len(sat)
        bit = _BIT[slots & 63]
        flat = self.flat
        fresh = flat >= base
        gathered = np.empty((words, len(flat)), dtype=np.uint64)
        old = np.flatnonzero(~fresh)
        gathered[:, old] = sat[:, flat[old]]
        if new_n:
            truth = np.zeros((n, new_n), dtype=bool)
            truth[:, self.undefined] = True
            atoms, by_attr = self.new_atoms, self.by_attr
            defining: dict[str, list[int]] = {}  # the events defining each atom's attribute
            for e, values in enumerate(batch):
                for attr in values:
                    if attr in by_attr:
                        defining.setdefault(attr, []).append(e)
            for attr, events in defining.items():  # (an atom's truths one store: ~20x fewer)
                those = [batch[e] for e in events]
                for k in by_attr[attr]:
                    test = atoms[k].holds
                    truth[events, k] = [test(values) for values in those]
            new = np.zeros((words, new_n), dtype=np.uint64)
            np.bitwise_or.at(new, slots >> 6, np.where(truth, bit[:, None], np.uint64(0)))
            newer = np.flatnonzero(fresh)
            gathered[:, newer] = new[:, flat[newer] - base]
        ok = np.bitwise_and.reduceat(gathered, self.starts, axis=1)  # words x clauses
        ok[:, ~self.alive[self.clause_sub]] = 0
        word, clause = np.nonzero(ok)
        if not len(word):
            return [_EMPTY] * n
        octets = ok[word, clause].astype("<u8").view(np.uint8).reshape(-1, 8)
        pair, b = np.nonzero(np.unpackbits(octets, axis=1, bitorder="little"))
        event = np.searchsorted(slots, word[pair] * 64 + b)  # each hit's event
        subs = len(self.exts)
        key = np.unique(event * subs + self.clause_sub[clause[pair]])  # an event's once
        ids = self.ids[key % subs]
        cuts = np.searchsorted(key // subs, np.arange(n + 1)).tolist()
        return [ids[cuts[i] : cuts[i + 1]] for i in range(n)]

    def matched(
        self,
        found: np.ndarray,
        sat: np.ndarray,
        values: Mapping[str, object],
        slot: np.ndarray | None = None,
    ) -> np.ndarray:
        """The whole answer from a base view's ``found`` and its phase-1 truths ``sat``
        (by the base's atom ids, or by ``slot[atom id]``: :mod:`betree.packed.slots`) for
        the event ``values``."""
        found = self.mask(found)
        extra = self.added_hits(sat, values, slot)
        return np.concatenate([found, extra]) if len(extra) else found

    def added_hits(
        self, sat: np.ndarray, values: Mapping[str, object], slot: np.ndarray | None = None
    ) -> np.ndarray:
        """The added subscriptions an event satisfies, given the base's phase-1 truths
        (by atom id, or by ``slot[atom id]``)."""
        if not self.where:
            return _EMPTY
        older = self.older if slot is None else slot.take(self.older)
        truth = sat.take(older)  # (a newer atom read as atom 0 here, set below)
        if self.new_atoms:
            new = newer_truths(self.new_atoms, self.by_attr, self.undefined, values)
            truth[self.newer] = new.take(self.newer_at)
        return self._hits(truth)

    def direct(self, values: Mapping[str, object], txn: ReadTxn) -> np.ndarray:
        """The added subscriptions an event satisfies, every atom of an attribute the event
        defines tested by ``holds`` (no phase 1 at hand: a batch; the atoms older than the
        base read in ``txn`` once)."""
        if self._direct is None:
            uniq = np.unique(self.flat)
            base, atoms = self.base_atoms, self.atoms
            lens = np.diff(np.append(self.starts, len(self.flat)))
            live = np.unique(self.flat[np.repeat(self.alive[self.clause_sub], lens)])
            for a in live[(live > 0) & (live < base)].tolist():  # (a dead clause's: maybe gone)
                if a not in atoms:
                    atoms[a] = load_atom(txn, a)
            tests = [atoms.get(a) if a < base else self.new_atoms[a - base] for a in uniq]
            by_attr: dict[str, list[int]] = {}
            true = np.zeros(len(tests), dtype=bool)  # atom 0, dead clauses', the undefined test
            for k, t in enumerate(tests):
                if t is None or not t.requires_defined:
                    true[k] = True
                if t is not None:
                    by_attr.setdefault(t.attr, []).append(k)
            self._direct = (np.searchsorted(uniq, self.flat), true, by_attr, tests)
        local, true, by_attr, tests = self._direct
        truth = true.copy()
        for attr in values:
            at = by_attr.get(attr)
            if at is not None:
                truth[at] = [tests[k].holds(values) for k in at]  # type: ignore[union-attr]
        return self._hits(truth[local])

    def _hits(self, truth: np.ndarray) -> np.ndarray:
        """The external ids of the live added subscriptions whose clauses all hold:
        ``truth`` by position in ``flat``."""
        return live_hits(truth, self.starts, self.clause_sub, self.alive, self.ids)


def _grown(have: np.ndarray, more: list[int]) -> np.ndarray:
    """``have`` (int64) with ``more`` after it; ``have`` itself if there is none (a delta's
    arrays are never written once made: older versions share them)."""
    return np.concatenate([have, np.array(more, dtype=np.int64)]) if more else have


def newer_truths(
    atoms: Sequence[Atom],
    by_attr: Mapping[str, list[int]],
    undefined: list[int],
    values: Mapping[str, object],
) -> np.ndarray:
    """The truths of a delta's newer ``atoms`` for an event: each of an attribute it
    defines tested by ``holds``, the ``undefined`` positions true when it leaves theirs."""
    new = np.zeros(len(atoms), dtype=bool)
    new[undefined] = True
    for attr in values:  # (an event defines a few of the attributes: 15 of 400 BEGen)
        at = by_attr.get(attr)
        if at is not None:
            new[at] = [atoms[k].holds(values) for k in at]
    return new


def live_hits(
    truth: np.ndarray,
    starts: np.ndarray,
    clause_sub: np.ndarray,
    alive: np.ndarray,
    ids: np.ndarray,
) -> np.ndarray:
    """The external ids (of ``ids``, by subscription) of the live added subscriptions
    whose clauses all hold: ``truth`` of each clause's atoms in clause order, a clause's
    first at ``starts``."""
    ok = np.logical_and.reduceat(truth, starts)
    hit = np.zeros(len(alive), dtype=bool)
    hit[clause_sub[ok]] = True  # a subscription once, however many clauses hold
    hit &= alive
    return ids[hit]


def settle(
    found: Sequence[np.ndarray],
    deltas: Sequence[Delta],
    batch: Sequence[Mapping[str, object]],
    txns: Sequence[ReadTxn],
) -> list[np.ndarray]:
    """A batch's answers on base views (one array an event) brought to the deltas'
    snapshots: masked by every delta's removed ids (the views' ids are disjoint: shards
    hold disjoint ids) and joined by every delta's added subscriptions that hold, their
    atoms tested directly (the batch's phase 1 is not at hand: matched by intervals, or
    one by one; on the tree :meth:`Delta.batch_hits` does it from the batch's bitsets)."""
    live = [(d, txn) for d, txn in zip(deltas, txns, strict=True) if d.removed or d.added]
    if not live:
        return list(found)
    out = []
    for ids, values in zip(found, batch, strict=True):
        for delta, _ in live:
            ids = delta.mask(ids)
        extra = [delta.direct(values, txn) for delta, txn in live if delta.added]
        out.append(np.concatenate([ids, *extra]) if extra else ids)
    return out


@dataclass(frozen=True)
class Based:
    """A base view, the base snapshot's direct atoms and atom count, and the delta that
    brings it to the reader's snapshot."""

    view: FlatTree
    grouped: Mapping[str, DirectAtoms]
    atoms: int
    delta: Delta
