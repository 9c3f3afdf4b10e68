"""``AtomSpans.places``: every clause's places from its atom ids and the atoms' store keys,
against ``Engine.places`` of the clause (what the batch build of a Spark load relied on
before it computed them itself) on random workloads over every type, the literals at the
ends of every domain, conjunctions of several pieces on one attribute, and rich rules
(whose string and test atoms are spanned from their keys, not built); the build's spans
(``keep=False``: no entries held; ``own``: test atoms read from their keys' bytes) are the
same."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.disk import grid
from betree.disk.atomspans import SKIP, AtomSpans
from betree.index import Index
from betree.lang.atoms import Atom, OrderAtom
from storage import codec
from storage.errors import InvalidInput
from tests.support import edges
from tests.support.workload import SCHEMA, expression
from tools.bench import gen_dense, gen_rich


def same_places(idx: Index, texts: list[str]) -> int:
    """Compile ``texts``, intern their atoms by store key as a load does, and compare;
    returns the clauses compared."""
    clauses: list[Any] = []
    for k, text in enumerate(texts):
        try:
            clauses.extend(idx.engine.compiler().compile(k, text))
        except InvalidInput:
            continue
    keys: dict[bytes, int] = {}
    lens, atoms = [], []
    for clause in clauses:
        ids = [keys.setdefault(codec.encode_value(a.as_tuple()), len(keys) + 1) for a in clause]
        lens.append(len(ids) or 1)
        atoms.extend(ids or [0])
    spans = AtomSpans(idx.schema, {aid: key for key, aid in keys.items()})
    bare = AtomSpans(idx.schema, {aid: key for key, aid in keys.items()}, keep=False)
    # (the build's: its own keys' tests read from their bytes)
    own = AtomSpans(idx.schema, {aid: key for key, aid in keys.items()}, keep=False, own=True)
    kept = AtomSpans(idx.schema, {aid: key for key, aid in keys.items()}, own=True)
    assert kept.attr_of == spans.attr_of  # (the tests read from bytes kept as decoded ones are)
    for built in (bare, own):
        assert built.names == spans.names and not built.entries and not built.attr_of
        for mine, theirs in ((built.attr, spans.attr), (built.lo, spans.lo), (built.hi, spans.hi)):
            assert np.array_equal(mine, theirs)
    sizes, attr, lo, hi = spans.places(np.array(lens), np.array(atoms))
    assert len(sizes) == len(clauses)
    ends = np.cumsum(sizes).tolist()
    for clause, size, end in zip(clauses, sizes.tolist(), ends, strict=True):
        rows = range(end - size, end)
        got = [(spans.names[attr[r]], (int(lo[r]), int(hi[r]))) for r in rows]
        assert got == list(idx.engine.places(clause).items()), clause
    for step in (1, 3, 17):  # (runs of whole clauses: the same rows, joined)
        parts = list(spans.places_in_steps(np.array(lens), np.array(atoms), step))
        assert len(parts) > 1 or len(clauses) < 2
        assert sum(len(p[0]) for p in parts) == len(clauses)
        for mine, theirs in zip((sizes, attr, lo, hi), zip(*parts, strict=True), strict=True):
            assert np.array_equal(mine, np.concatenate(theirs))
    return len(clauses)


def test_places_of_random_workloads(tmp_path: Path) -> None:
    rng = random.Random(11)
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        texts = [expression(rng) for _ in range(1500)]
        assert same_places(idx, texts) > 1500


def test_places_at_the_ends_of_the_domains(tmp_path: Path) -> None:
    """Every edge atom alone and two at a time on one attribute or two (empty
    intersections, exclusive bounds at the ends of int64, ``in`` lists of ends)."""
    rng = random.Random(3)
    atoms = edges.edge_atoms()
    texts = atoms + [f"{rng.choice(atoms)} and {rng.choice(atoms)}" for _ in range(2000)]
    with Index.open(tmp_path / "s", schema=edges.EDGE_SCHEMA) as idx:
        assert same_places(idx, texts) > len(atoms)


def test_atoms_that_place_nothing(tmp_path: Path) -> None:
    """The true atom, ``is null`` and unknown ids have no rank and give no rows."""
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        (clause,) = idx.engine.compiler().compile(1, "i is null")
        key = codec.encode_value(clause[0].as_tuple())
        spans = AtomSpans(idx.schema, {1: key})
        assert spans.of(np.array([0, 1, 2, -1])).tolist() == [SKIP] * 4
        sizes, attr, lo, hi = spans.places(np.array([1, 1]), np.array([0, 1]))
        assert sizes.tolist() == [0, 0] and len(attr) == len(lo) == len(hi) == 0


def test_places_of_dense_ranges(tmp_path: Path) -> None:
    """The dense workload's one-comparison atoms (spanned in numpy), int and float, with
    strict and non-strict bounds, ``=``, and constants of either type on a float attribute."""
    rng = random.Random(5)
    for domain in ("int", "float"):
        _, schema, subs, _, _ = gen_dense.make_workload(
            400, 1, seed=3, attributes=8, preds=4, domain=domain, card=1000, check=False
        )
        consts: list[Any] = [0, 1, -1, 999, 2**62, -(2**62)]
        if domain == "float":
            consts += [0.5, -0.0, 1.7e308, -1.7e308, 2.0]
        ops = ["<", "<=", "=", ">=", ">"]
        texts = [t for _, t in subs] + [
            f"a{rng.randrange(8)} {rng.choice(ops)} {rng.choice(consts)!r}" for _ in range(500)
        ]
        with Index.open(tmp_path / domain, schema=schema) as idx:
            assert same_places(idx, texts) == len(texts)


def test_places_of_rich_rules(tmp_path: Path) -> None:
    """Rich ad-targeting rules (in-lists and ranges of strings, tests of every kind, spanned
    from their keys without building the atoms) on two seeds, against ``Engine.places``."""
    for seed in (3, 17):
        schema_doc, subs, _, _ = gen_rich.make(600, 1, check=False, seed=seed)
        with Index.open(tmp_path / f"s{seed}", schema=schema_doc) as idx:
            assert same_places(idx, [text for _, text in subs]) > 600


def test_keys_spanned_as_their_atoms(tmp_path: Path) -> None:
    """Every key of rich rules and of the edge atoms: its attribute, entries and span as
    the atom built from it gives them (``grid.atom_span``); a key of a test that no kind
    names, or of an atom on no attribute of the schema, is built (and refused) as before."""
    schema_doc, subs, _, _ = gen_rich.make(400, 1, check=False, seed=29)
    for name, schema, texts in (
        ("rich", schema_doc, [text for _, text in subs]),
        ("edges", edges.EDGE_SCHEMA, edges.edge_atoms()),
    ):
        with Index.open(tmp_path / name, schema=schema) as idx:
            kinds = {a: grid.kind_of(spec.type) for a, spec in idx.schema.attributes.items()}
            atoms: dict[bytes, Atom] = {}
            for k, text in enumerate(texts):
                try:
                    clauses = idx.engine.compiler().compile(k, text)
                except InvalidInput:
                    continue
                for atom in (a for clause in clauses for a in clause):
                    atoms[codec.encode_value(atom.as_tuple())] = atom
            by_id = dict(enumerate(atoms.items(), start=1))
            spans = AtomSpans(idx.schema, {aid: key for aid, (key, _) in by_id.items()})
            for aid, (_, atom) in by_id.items():
                if aid in spans.attr_of:  # (else read as columns: test_places_of_dense_ranges)
                    assert spans.attr_of[aid] == atom.attr
                    held = spans.entries.get(aid)
                    want = atom.entries if isinstance(atom, OrderAtom) else None
                    assert (held is None) == (want is None)
                    assert want is None or list(map(list, held)) == list(map(list, want))
                if atom.attr in kinds and atom.requires_defined:
                    got = (int(spans.lo[aid]), int(spans.hi[aid]))
                    assert got == grid.hull([grid.atom_span(kinds[atom.attr], atom)]), atom
                else:
                    assert int(spans.attr[aid]) == SKIP
    with Index.open(tmp_path / "rich") as idx:
        odd = codec.encode_value(["test", "device.os", "no_such_test", None])
        with pytest.raises(ValueError, match="unknown test"):
            AtomSpans(idx.schema, {1: odd})
