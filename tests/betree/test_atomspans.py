"""``AtomSpans.places``: every clause's places from its atom ids and the atoms' store keys,
against ``Engine.places`` of the clause (what the batch build of a Spark load relied on
before it computed them itself) on random workloads over every type, the literals at the
ends of every domain, and conjunctions of several pieces on one attribute."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from betree.disk.atomspans import SKIP, AtomSpans
from betree.index import Index
from storage import codec
from storage.errors import InvalidInput
from tests.support import edges
from tests.support.workload import SCHEMA, expression
from tools.bench import gen_dense


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
    sizes, attr, lo, hi = spans.places(np.array(lens), np.array(atoms))
    assert len(sizes) == len(clauses)
    ends = np.cumsum(sizes).tolist()
    for clause, size, end in zip(clauses, sizes.tolist(), ends, strict=True):
        rows = range(end - size, end)
        got = [(spans.names[attr[r]], (int(lo[r]), int(hi[r]))) for r in rows]
        assert got == list(idx.engine.places(clause).items()), clause
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
