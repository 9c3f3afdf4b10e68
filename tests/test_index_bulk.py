"""A batch-built index answers exactly like the brute-force evaluator and passes check()."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from betree.bulk import build_index
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
        compiled = [(ident, expr, idx.compile(ident, expr)) for ident, expr in subs.items()]
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
