"""Per-commit state a reader derives from a snapshot, kept across commits per attribute.

Why: matching needs, per snapshot, every PB+tree's root record and every attribute's
direct atoms grouped for testing (:class:`betree.matching.direct.DirectAtoms`).  Rebuilt from
scratch on every commit, that was 1.1 s of a 1.5 s match after a write at 50K rich rules.
Here each attribute's record is kept with the bytes it was decoded from: a commit
re-decodes (and rebuilds the ``DirectAtoms`` of) only the attributes whose record bytes
changed, and the others keep the very objects they had.  Cost per commit: one scan of
the two namespaces (a record an attribute) and one bytes comparison a record, plus the
decoding of what changed: a write costs in proportion to the attributes it touched.

A changed direct record is decoded whole (one record an attribute: 4 MB, 31K atoms, for
``user.interests`` at 50K rich rules), but its atoms are made again only where new: each
atom kept is taken back when its id's stored tuple is the one it was made from (a list
comparison, ~0.2 µs, against ~3-20 µs for a rich atom, made by
:func:`betree.lang.atoms.stored_atom`: its stored form trusted once checked canonical, its
values' keys shared); the attribute's :class:`DirectAtoms` is then built from them.

One :class:`Records` an engine, shared by its matching thread and its background folds
(:func:`betree.packed.flat.fresh_base`), under a lock: a fold takes back the atoms the
view it replaces was built from, and the process holds one decoded copy of the records
(two, one each, left ~0.5M more objects after the first fold at 50K rich rules, and every
store matched in the process ran ~1.2x slower).  What one thread read is validated by
the other by its bytes (a record) and stored tuple (an atom), as any other snapshot's.

A read runs with the cyclic collector paused (:func:`betree.disk.writer.gc_paused`: one
pass over the young generations at its end): decoding makes no cycles, and the collector's
passes over the heap it grows were half of a first read (rich 50K, the 18 direct records:
~1,600 passes, 2.3-2.6 s of thread CPU against 1.1-1.3 s paused; the first event of a fresh
open 2.2-2.5 s against 2.7-3.2, rich 100K 4.5-4.9 s against 5.0-6.4:
docs/bench/live/README.md, fold43).  The pause is process-wide (a fold reads in its own
thread): the matching thread collects nothing meanwhile, which costs it nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from betree.disk import catalog
from betree.disk.writer import gc_paused
from betree.lang.atoms import Atom, stored_atom
from betree.matching.direct import DirectAtoms
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import StoreDamaged
from storage.txn import ReadTxn


@dataclass
class Snapshot:
    """What a reader derives once per committed generation: the root record, whether
    matching collects statistics for self-adjustment, and (once a match on the pages needs
    them: a held view does not) each PB+tree's record and each attribute's direct atoms."""

    rec: dict[str, Any]  #: the root record (:mod:`betree.disk.catalog`)
    next_atom: int  #: the atom ids in use are below it
    collect: bool  #: statistics collected (the store's ``adjust`` on, and writable)
    #: whether ``trees`` and ``grouped`` were read (:meth:`Records.read`; else empty)
    complete: bool = False
    trees: dict[str, dict[str, Any]] = field(default_factory=dict)  #: PB+tree records
    grouped: dict[str, DirectAtoms] = field(default_factory=dict)  #: direct atoms

    def with_records(self, records: Records, txn: ReadTxn) -> None:
        """Read the per-attribute records of ``txn`` (the snapshot's), checked against the
        lists of the root record."""
        trees, grouped = records.read(txn)
        listed = {"pbtrees": list(trees), "direct": list(grouped)}
        if listed != self.rec.get("attributes"):
            raise StoreDamaged(
                f"the per-attribute records found ({listed}) are not those the root record "
                f"lists ({self.rec.get('attributes')})"
            )
        self.trees, self.grouped, self.complete = trees, grouped, True


class Records:
    """The decoded per-attribute records of the last snapshot read, by their bytes.

    ``attribute(key, what)`` names the attribute a record's key stands for (raising
    :class:`StoreDamaged` for one that names none).
    """

    def __init__(self, attribute: Callable[[bytes, str], str]) -> None:
        self.attribute = attribute
        self._lock = threading.Lock()  # (a fold's read and the matching thread's)
        self._trees: dict[str, tuple[bytes, dict[str, Any]]] = {}
        self._direct: dict[str, tuple[bytes, DirectAtoms]] = {}
        #: per attribute, its direct atoms by id with the stored tuple each was made from
        self._atoms: dict[str, dict[int, tuple[list[Any], Atom]]] = {}
        #: attributes decoded again by the last :meth:`read` (for tests and diagnostics)
        self.decoded: list[str] = []

    def read(self, txn: ReadTxn) -> tuple[dict[str, dict[str, Any]], dict[str, DirectAtoms]]:
        """The PB+tree records and the grouped direct atoms of ``txn``'s snapshot, by
        attribute (an unchanged attribute's: the objects read before)."""
        with self._lock, gc_paused():
            return self._read(txn)

    def _read(self, txn: ReadTxn) -> tuple[dict[str, dict[str, Any]], dict[str, DirectAtoms]]:
        self.decoded = []
        trees: dict[str, tuple[bytes, dict[str, Any]]] = {}
        for key, value in txn.scan(PBTREE_NS):
            name = self.attribute(key, "PB+tree")
            kept = self._trees.get(name)
            if kept is None or kept[0] != value:
                kept = (bytes(value), codec.decode_value(value))
                self.decoded.append(name)
            trees[name] = kept
        direct: dict[str, tuple[bytes, DirectAtoms]] = {}
        made: dict[str, dict[int, tuple[list[Any], Atom]]] = {}
        for key, value in txn.scan(catalog.DIRECT):
            name = self.attribute(key, "direct atoms")
            kept_atoms = self._direct.get(name)
            if kept_atoms is None or kept_atoms[0] != value:
                made[name] = self._made(name, codec.decode_value(value))
                atoms = [(aid, atom) for aid, (_, atom) in made[name].items()]
                kept_atoms = (bytes(value), DirectAtoms(atoms))
                self.decoded.append(name)
            else:
                made[name] = self._atoms[name]
            direct[name] = kept_atoms
        self._trees, self._direct, self._atoms = trees, direct, made
        return (
            {name: rec for name, (_, rec) in trees.items()},
            {name: grouped for name, (_, grouped) in direct.items()},
        )

    def _made(self, name: str, listed: list[Any]) -> dict[int, tuple[list[Any], Atom]]:
        """The atoms of ``name``'s decoded direct record ``[[id, tuple], ...]`` by id,
        those kept from the same stored tuple taken back (module docstring)."""
        kept = self._atoms.get(name, {})
        out: dict[int, tuple[list[Any], Atom]] = {}
        keys: dict[object, tuple[int, object]] = {}  # (the atoms' values' keys, shared)
        for aid, t in listed:
            old = kept.get(aid)
            if old is None or old[0] != t:
                atom = stored_atom(t, keys)
                if atom.attr != name:
                    raise StoreDamaged(f"the direct atoms of {name!r} name another attribute")
                old = (t, atom)
            out[aid] = old
        return out
