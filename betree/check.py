"""Invariant checks of an index: the BE-Tree, its catalog, and every PB+tree.

BE-Tree facts (seed 000): every clause in the smallest bucket that encloses it (its
place on the bucket's attribute lies in the bucket and in neither child); the c-node of
a non-atomic leaf bucket never partitioned; each attribute partitioned at most once on a
path; no clause left in an l-node while a p-node there could take it; bucket geometry
(children halve their parent; a top bucket spans the hint range); parent links; l-node
sizes and page chains; p-node scores equal the clauses below them; page accounting.

Catalog facts: every subscription's clauses are stored exactly once, at the c-node their
``home`` record names, with the atoms their record lists; atom reference counts equal
their uses; every order atom's entries are in its PB+tree and every PB+tree id is a live
atom; direct atoms are listed under their attribute.

Cost: reads every page and record once, bypassing the page cache.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from betree import grid
from betree.nodes import CNode, LNodePage
from betree.normal import OrderAtom, atom_from_tuple
from betree.tree import BETree
from pbtree import PBTree
from pbtree.tree import NS as PBTREE_NS
from storage import codec
from storage.errors import BexdbError, CheckFailed
from storage.store import ReadTxn

if TYPE_CHECKING:
    from betree.index import Index


def check_index(index: Index, txn: ReadTxn) -> None:
    """Raise :class:`CheckFailed` listing every broken invariant of ``index``."""
    errors: list[str] = []
    rec = txn.get_obj(b"bexdb", b"index")
    subs = {codec.decode_u64(key): codec.decode_value(value) for key, value in txn.scan(b"sub")}
    atoms = {
        codec.decode_u64(key): atom_from_tuple(codec.decode_value(value))
        for key, value in txn.scan(b"aid")
    }
    places = {
        (sid << 16 | k): index.places(tuple(atoms[a] for a in ids if a and a in atoms))
        for sid, sub in subs.items()
        for k, ids in enumerate(sub[2])
    }
    found = _check_tree(index, txn, rec, places, errors)
    _check_catalog(index, txn, rec, subs, found, errors)
    for name in (key.decode() for key, _ in txn.scan(PBTREE_NS)):
        try:
            PBTree(txn, name).check()
        except CheckFailed as exc:
            errors.extend(f"PB+tree {name!r}: {v}" for v in exc.violations)
    if errors:
        raise CheckFailed("index", errors)


def _check_tree(
    index: Index,
    txn: ReadTxn,
    rec: dict[str, Any],
    places: dict[int, dict[str, tuple[int, int]]],
    errors: list[str],
) -> dict[int, tuple[int, Any, list[int]]]:
    """Walk the BE-Tree; return clause id -> (home page, external id, atom ids)."""
    space = rec["space"]
    tree = BETree(txn, rec)
    seen: set[int] = set()
    found: dict[int, tuple[int, Any, list[int]]] = {}

    def err(page: int, message: str) -> None:
        errors.append(f"page {page}: {message}")

    def load(page: int, cls: Any, role: str) -> Any:
        if page in seen:
            err(page, f"reached twice (again as {role})")
            return None
        seen.add(page)
        try:
            return txn.load_uncached(space, page, cls)
        except BexdbError as exc:
            err(page, f"unreadable {role}: {exc}")
            return None

    def subtree(page: int, parent: int, used: frozenset[str], expect: tuple[Any, ...]) -> int:
        """Check one c-node and everything below it; return the clauses below it."""
        node: CNode | None = load(page, CNode, "c-node")
        if node is None:
            return 0
        attr, top, lo, hi = expect
        if (node.attr, node.top, node.lo, node.hi) != (attr, top, lo, hi):
            err(page, f"bucket {(node.attr, node.top, node.lo, node.hi)}, expected {expect}")
        if node.parent != parent:
            err(page, f"parent link {node.parent}, expected {parent}")
        if node.pdir and node.is_leaf and not node.atomic and node.attr is not None:
            err(page, "the c-node of a non-atomic leaf bucket is partitioned")
        if node.cap < index_max_cap or node.cap % index_max_cap:
            err(page, f"l-node capacity {node.cap} is not a multiple of max_cap")
        below = _check_lnode(node, used)
        if node.left or node.right:
            if node.atomic:
                err(page, "an atomic bucket has children")
            (llo, lhi), (rlo, rhi) = grid.halves(node.lo, node.hi)
            below += subtree(node.left, page, used, (node.attr, False, llo, lhi))
            below += subtree(node.right, page, used, (node.attr, False, rlo, rhi))
        for pattr, ptop, score in node.pdir:
            if pattr in used:
                err(page, f"attribute {pattr!r} partitioned twice on one path")
            hint = index._hints.get(pattr)
            if hint is None:
                err(page, f"p-node on unknown attribute {pattr!r}")
                continue
            n = subtree(ptop, page, used | {pattr}, (pattr, True, *hint))
            if n != score:
                err(page, f"p-node {pattr!r} scores {score}, but {n} clauses lie below it")
            below += n
        return below

    def _check_lnode(node: CNode, used: frozenset[str]) -> int:
        count = 0
        cur = node.lnode
        while cur:
            lpage: LNodePage | None = load(cur, LNodePage, "l-node page")
            if lpage is None:
                break
            clauses = lpage.clauses()
            if not clauses:
                err(cur, "empty l-node page left in a chain")
            for cid, ext, ids in clauses:
                if not ids:
                    err(cur, f"clause {cid} has no atoms (atom 0 stands for none)")
                if cid in found:
                    err(cur, f"clause {cid} stored twice (also at c-node {found[cid][0]})")
                found[cid] = (node.page, ext, ids)
                place = places.get(cid)
                if place is None:
                    err(cur, f"clause {cid} of {ext!r} belongs to no subscription")
                    continue
                _check_place(node, cid, place, used)
            count += len(clauses)
            cur = lpage.next
        if count != node.size:
            err(node.page, f"l-node size {node.size}, but its pages hold {count} clauses")
        return count

    def _check_place(
        node: CNode, cid: int, place: dict[str, tuple[int, int]], used: frozenset[str]
    ) -> None:
        if node.attr is not None:
            span = place.get(node.attr)
            if span is None:
                err(node.page, f"clause {cid} is not constrained on {node.attr!r}")
                return
            if not node.encloses(*span):
                err(node.page, f"clause {cid} span {span} lies outside the bucket")
            if node.left:
                for child in (node.left, node.right):
                    c = txn.load_uncached(space, child, CNode)
                    if c.lo <= span[0] and span[1] <= c.hi:
                        err(node.page, f"clause {cid} belongs in the smaller bucket {child}")
        for pattr in node.pmap:
            if pattr in place and pattr not in used:
                err(node.page, f"clause {cid} stays although p-node {pattr!r} could take it")

    index_max_cap = rec["max_cap"]
    subtree(rec["root"], 0, frozenset(), (None, False, 0, 0))
    stored = set(txn.space_pages(space))
    for page in sorted(stored - seen):
        err(page, "orphaned: stored in the BE-Tree's space but unreachable")
    for page in sorted(seen - stored):
        err(page, "reached but not stored")
    del tree
    return found


def _check_catalog(
    index: Index,
    txn: ReadTxn,
    rec: dict[str, Any],
    subs: dict[int, list[Any]],
    found: dict[int, tuple[int, Any, list[int]]],
    errors: list[str],
) -> None:
    if rec["subs"] != len(subs):
        errors.append(f"root record counts {rec['subs']} subscriptions, found {len(subs)}")
    uses: Counter[int] = Counter()
    expected: set[int] = set()
    for sid, (ext, _, clauses) in subs.items():
        ext_sid = txn.get(b"ext", codec.encode_id(ext))
        if ext_sid is None or codec.decode_u64(ext_sid) != sid:
            errors.append(f"subscription {ext!r}: id map does not lead to internal id {sid}")
        if sid >= rec["next_sid"]:
            errors.append(f"subscription {ext!r}: internal id {sid} beyond the counter")
        for k, ids in enumerate(clauses):
            cid = sid << 16 | k
            expected.add(cid)
            uses.update(a for a in ids if a)
            where = found.get(cid)
            if where is None:
                errors.append(f"subscription {ext!r}: clause {k} is not in the BE-Tree")
                continue
            home = txn.get(b"home", codec.encode_u64(cid))
            if home is None or codec.decode_u64(home) != where[0]:
                errors.append(f"subscription {ext!r}: clause {k} home record is wrong")
            if where[1] != ext or where[2] != ids:
                errors.append(f"subscription {ext!r}: clause {k} stored as {where[1:]}")
    for cid in sorted(found.keys() - expected):
        errors.append(f"clause {cid} in the BE-Tree belongs to no subscription")
    if txn.count(b"ext") != len(subs):
        errors.append(f"{txn.count(b'ext')} id map records for {len(subs)} subscriptions")
    if txn.count(b"home") != len(expected):
        errors.append(f"{txn.count(b'home')} home records for {len(expected)} clauses")
    live: dict[int, Any] = {}
    for key, value in txn.scan(b"atom"):
        aid, refs = codec.decode_value(value)
        live[aid] = atom_from_tuple(codec.decode_value(key))
        if refs != uses[aid]:
            errors.append(f"atom {aid} ({live[aid]}) counts {refs} uses, found {uses[aid]}")
        if txn.get(b"aid", codec.encode_u64(aid)) != key:
            errors.append(f"atom {aid}: reverse record missing or wrong")
        if aid >= rec["next_atom"]:
            errors.append(f"atom {aid} beyond the counter")
    for aid in sorted(uses.keys() - live.keys()):
        errors.append(f"atom {aid} is used but not in the catalog")
    entries: dict[str, set[tuple[str, Any, int]]] = {}
    direct: set[int] = set()
    for aid, atom in live.items():
        if isinstance(atom, OrderAtom):
            for op, const in atom.entries:
                entries.setdefault(atom.attr, set()).add((op, const, aid))
        else:
            direct.add(aid)
    listed = {
        aid
        for key, value in txn.scan(b"direct")
        for aid, t in codec.decode_value(value)
        if atom_from_tuple(t) == live.get(aid) and atom_from_tuple(t).attr == key.decode()
    }
    if listed != direct:
        errors.append(f"direct atom lists differ from the catalog: {sorted(listed ^ direct)}")
    for name in {key.decode() for key, _ in txn.scan(PBTREE_NS)} | entries.keys():
        have = set(PBTree(txn, name).predicates())
        want = entries.get(name, set())
        for op, const, aid in sorted(want - have, key=repr)[:20]:
            errors.append(f"PB+tree {name!r} lacks atom {aid}'s entry {op} {const!r}")
        for op, const, aid in sorted(have - want, key=repr)[:20]:
            errors.append(f"PB+tree {name!r} holds {op} {const!r} for atom {aid}, no atom has it")
