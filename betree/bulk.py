"""Batch construction of a whole index from a complete set of compiled subscriptions.

The paper's BE-B: when every subscription is known in advance, attribute statistics come
from the whole set, and the tree is built top-down in one pass — the fixed point the
dynamic insertion rules (Alg. 3-6) converge to, without moving any clause twice: at each
c-node the most popular unused attribute (present in at least ``min_size`` clauses) gets
a p-node while the l-node would overflow; each c-directory bucket splits in halves while
it overflows (forced split), and a bucket whose own clauses still overflow is partitioned.
PB+trees are built bottom-up (:mod:`pbtree.bulk`) and the catalog written in key order.

Cost: O(clauses x depth) Python work for the tree, O(atoms log atoms) for the PB+trees;
every page written once.  Memory: the compiled set (about 0.5 KB per subscription).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from betree.grid import halves
from betree.index import NS, Index, clause_id
from betree.nodes import CNode, Entry
from betree.normal import Atom, Clause, OrderAtom
from betree.tree import BETree, Places
from pbtree.bulk import build as build_pbtree
from storage import codec
from storage.errors import InvalidInput
from storage.store import WriteTxn

Compiled = tuple[Any, str, list[Clause]]  # (external id, expression, clauses)


def build_index(index: Index, subscriptions: Sequence[Compiled]) -> dict[str, int]:
    """Fill the empty ``index`` with compiled ``subscriptions`` (distinct ids); one commit."""
    batch = Batch(index)
    for ident, expr, clauses in subscriptions:
        batch.add(ident, expr, clauses)
    return batch.build()


class Batch:
    """Compiled subscriptions gathered for one batch build, interned as they arrive.

    Keeps per subscription only its id, text and atom ids, and per clause its places
    (whose spans are shared per atom): a loader holding a million subscriptions needs
    about 1 KB each, not the several KB of their atom objects.
    """

    def __init__(self, index: Index) -> None:
        self.index = index
        self.atoms: dict[Atom, int] = {}
        self.subs: list[tuple[Any, str, list[list[int]]]] = []
        self.places: list[Places] = []

    def __len__(self) -> int:
        return len(self.subs)

    def add(self, ident: Any, expr: str, clauses: Sequence[Clause]) -> None:
        atoms = self.atoms
        self.subs.append(
            (
                ident,
                expr,
                [[atoms.setdefault(a, len(atoms) + 1) for a in c] or [0] for c in clauses],
            )
        )
        self.places.extend(self.index.places(clause) for clause in clauses)

    def build(self) -> dict[str, int]:
        """Write everything into the (empty) index; one commit."""
        atoms = {aid: atom for atom, aid in self.atoms.items()}
        return build_from_parts(self.index, self.subs, self.places, atoms)


def build_from_parts(
    index: Index,
    subs: Sequence[tuple[Any, str, list[list[int]]]],
    places: Sequence[Places],
    atoms: dict[int, Atom],
) -> dict[str, int]:
    """Fill the empty ``index`` from interned parts; one commit.

    ``subs`` are ``(external id, expression, clauses as atom ids)`` with distinct ids,
    internal ids given by position; ``places`` holds :meth:`Index.places` of every clause
    in order; ``atoms`` maps every atom id used (dense from 1; 0 is the true atom) to its
    atom.  For loaders that intern and compute places elsewhere (in Spark executors).
    """
    with index.store.write() as txn:
        rec = txn.get_obj(NS, b"index")
        if rec["subs"] or rec["next_sid"]:
            raise InvalidInput("a batch build needs an empty index")
        refs: Counter[int] = Counter()
        entries: list[Entry] = []
        for sid, (ident, expr, clause_ids) in enumerate(subs):
            for k, ids in enumerate(clause_ids):
                refs.update(a for a in ids if a)
                entries.append((clause_id(sid, k), ident, ids))
            key = codec.encode_u64(sid)
            txn.put_obj(b"sub", key, [ident, expr, clause_ids])
            txn.put(b"ext", codec.encode_id(ident), key)
        if len(places) != len(entries):
            raise InvalidInput(f"{len(places)} places given for {len(entries)} clauses")
        _write_atoms(txn, atoms, refs)
        builder = _Builder(txn, rec, index)
        builder.fill(rec["root"], list(range(len(entries))), entries, places, frozenset())
        next_atom = max(atoms, default=0) + 1
        rec.update(next_sid=len(subs), next_atom=next_atom, subs=len(subs))
        txn.put_obj(NS, b"index", rec)
    return {"subscriptions": len(subs), "clauses": len(entries), "atoms": len(atoms)}


def _write_atoms(txn: WriteTxn, atoms: dict[int, Atom], refs: Counter[int]) -> None:
    """Atom catalog, direct-test lists, and one bottom-up PB+tree per attribute."""
    order: dict[str, list[tuple[Any, str, int]]] = {}
    direct: dict[str, list[list[Any]]] = {}
    for aid, atom in sorted(atoms.items()):
        key = codec.encode_value(atom.as_tuple())
        txn.put_obj(b"atom", key, [aid, refs[aid]])
        txn.put(b"aid", codec.encode_u64(aid), key)
        if isinstance(atom, OrderAtom):
            order.setdefault(atom.attr, []).extend((c, op, aid) for op, c in atom.entries)
        else:
            direct.setdefault(atom.attr, []).append([aid, list(atom.as_tuple())])
    for attr, predicates in order.items():
        predicates.sort(key=lambda p: p[0])
        build_pbtree(txn, attr, predicates)
    for attr, listed in direct.items():
        txn.put_obj(b"direct", attr.encode(), listed)


class _Builder:
    """Top-down construction of the BE-Tree below an empty root."""

    def __init__(self, txn: WriteTxn, rec: dict[str, Any], index: Index) -> None:
        self.txn = txn
        self.tree = BETree(txn, rec, moved=self._home)
        self.space = rec["space"]
        self.max_cap = rec["max_cap"]
        self.min_size = rec["min_size"]
        self.index = index

    def _home(self, cid: int, page: int) -> None:
        self.txn.put(b"home", codec.encode_u64(cid), codec.encode_u64(page))

    def _store(self, page: int, idx: list[int], entries: list[Entry]) -> None:
        chosen = [entries[i] for i in idx]
        self.tree._append(page, chosen)
        self.tree._record_move(chosen, page)
        size = len(idx)
        cap = -(-size // self.max_cap) * self.max_cap if size else self.max_cap
        self.txn.load_mut(self.space, page, CNode).cap = cap

    def fill(
        self,
        page: int,
        idx: list[int],
        entries: list[Entry],
        places: Sequence[Places],
        used: frozenset[str],
    ) -> None:
        """SpacePartitioning of one c-node over the clauses ``idx`` it receives."""
        remaining = idx
        while len(remaining) > self.max_cap:
            node = self.txn.load(self.space, page, CNode)
            taken = used | set(node.pmap)
            counts = Counter(a for i in remaining for a in places[i] if a not in taken)
            eligible = [(n, a) for a, n in counts.items() if n >= self.min_size]
            if not eligible:
                break  # an extended l-node
            _, attr = max(eligible)
            moving = [i for i in remaining if attr in places[i]]
            remaining = [i for i in remaining if attr not in places[i]]
            lo, hi = self.index._hints[attr]
            top = self.txn.alloc()
            self.txn.put_new(self.space, top, CNode(top, attr, True, lo, hi, page, self.max_cap))
            node = self.txn.load_mut(self.space, page, CNode)
            node.add_pnode(attr, top)
            node.add_score(attr, len(moving))
            self.cluster(top, moving, entries, places, used | {attr})
        self._store(page, remaining, entries)

    def cluster(
        self,
        page: int,
        idx: list[int],
        entries: list[Entry],
        places: Sequence[Places],
        used: frozenset[str],
    ) -> None:
        """SpaceClustering of one bucket: halve while it overflows, then partition."""
        bucket = self.txn.load(self.space, page, CNode)
        if len(idx) <= self.max_cap or bucket.atomic:
            self.fill(page, idx, entries, places, used)
            return
        attr = bucket.attr
        assert attr is not None
        (llo, lhi), (rlo, rhi) = halves(bucket.lo, bucket.hi)
        sides: tuple[list[int], list[int], list[int]] = ([], [], [])
        for i in idx:
            lo, hi = places[i][attr]
            sides[0 if llo <= lo and hi <= lhi else 1 if rlo <= lo and hi <= rhi else 2].append(i)
        left, right = self.txn.alloc(), self.txn.alloc()
        self.txn.put_new(self.space, left, CNode(left, attr, False, llo, lhi, page, self.max_cap))
        self.txn.put_new(self.space, right, CNode(right, attr, False, rlo, rhi, page, self.max_cap))
        node = self.txn.load_mut(self.space, page, CNode)
        node.left, node.right = left, right
        self.cluster(left, sides[0], entries, places, used)
        self.cluster(right, sides[1], entries, places, used)
        self.fill(page, sides[2], entries, places, used)
