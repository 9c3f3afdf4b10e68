"""A batch-built index answers exactly like the brute-force evaluator and passes check()."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from betree.disk.bulk import Batch, build_index
from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from storage.errors import InvalidInput
from tests.support.workload import SCHEMA, event, expression


@pytest.mark.parametrize("settings", [{"max_cap": 3, "min_size": 2}, {}])
def test_batch_build_is_exact(tmp_path: Path, settings: dict[str, int]) -> None:
    rng = random.Random(5)
    subs = {rng.choice([i, f"s{i}"]): expression(rng) for i in range(400)}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings=settings) as idx:
        compiled = [
            (ident, expr, idx.engine.compiler().compile(ident, expr))
            for ident, expr in subs.items()
        ]
        summary = build_index(idx, compiled)
        assert summary["subscriptions"] == len(subs)
        idx.check()
        for _ in range(60):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e in subs.items() if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want
        # the built index keeps working online
        victims = rng.sample(sorted(subs, key=str), 100)
        idx.unsubscribe_many(victims)
        for ident in victims:
            del subs[ident]
        idx.subscribe_many([("new", "i > 3"), (victims[0], "j < 5")])
        subs.update({"new": "i > 3", victims[0]: "j < 5"})
        idx.check()
        for _ in range(30):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e in subs.items() if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want
        with pytest.raises(InvalidInput, match="empty index"):
            build_index(idx, compiled[:1])


def test_batch_interns_equal_atoms_once(tmp_path: Path) -> None:
    """An atom reached through the conjunct memo, the parser (under ``or``/``not``) and after
    the compile caches were dropped (a new object) is one atom of the catalog; floats,
    strings and lists beside them; the build checks and matches like the evaluator."""
    subs = {
        1: "i between 3 and 9",
        2: "i >= 3 and j = 4",
        3: "(i >= 3 and i <= 9) or s = 'x'",
        4: "not (i < 3) and s = 'x'",
        5: "f >= 1.5 and f >= 1.5 and s >= 'x'",
        6: "j in (1, 2) and s = 'x'",
        7: "i >= 3",
    }
    rng = random.Random(3)
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        batch = Batch(idx)
        for n, (ident, expr) in enumerate(subs.items()):
            if n % 3 == 2:
                idx.engine.drop_compile_caches()
            batch.add(ident, expr, idx.engine.compiler().compile(ident, expr))
        # i >= 3, i <= 9, j = 4, s = 'x', i undefined, f >= 1.5, s >= 'x', j in (1, 2)
        assert batch.build()["atoms"] == 8
        idx.check()
        for _ in range(200):
            ev = event(rng)
            values = idx.schema.validate_event(ev)
            want = {i for i, e in subs.items() if evaluate(compile_expr(e, idx.schema), values)}
            assert set(idx.match(ev)) == want
