"""The in-memory baselines (tools/bench/baselines) against the brute-force evaluator.

Each index is built from seeded random workloads -- every operator of the language, lists,
strings, undefined attributes (tests/workload.py) and BEGen's range workloads -- and must
return, for every event, exactly the subscriptions ``betree.lang.expr.evaluate`` accepts.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tests.support import workload
from tools.bench.baselines import Baseline
from tools.bench.baselines.counting import Counting
from tools.bench.baselines.opindex import OpIndex
from tools.bench.baselines.pstree import PSTBloom, PSTHash, Spaces, TooBig
from tools.bench.baselines.scan import Compiled, Scan
from tools.bench.gen import make_workload

KINDS = ("SCAN", "counting", "OpIndex", "PSTBloom", "PSTHash")


def _build(kind: str, compiled: Compiled, sample: list[dict[str, Any]]) -> Baseline:
    if kind == "SCAN":
        return Scan(compiled)
    if kind == "counting":
        return Counting(compiled)
    if kind == "OpIndex":
        return OpIndex(compiled, sample=sample)
    if kind == "PSTBloom":
        return PSTBloom(compiled, sample=sample)
    return PSTHash(compiled, sample=sample)


def _random_workload(
    seed: int, n_subs: int, n_events: int
) -> tuple[Schema, list[tuple[int, str]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    schema = Schema.from_json(workload.SCHEMA)
    subs: list[tuple[int, str]] = []
    while len(subs) < n_subs:
        text = workload.expression(rng)
        try:
            compile_expr(text, schema)
        except InvalidInput:
            continue
        subs.append((len(subs), text))
    events = [schema.validate_event(workload.event(rng)) for _ in range(n_events)]
    return schema, subs, events


def _check(
    kind: str,
    schema: Schema,
    subs: list[tuple[int, str]],
    events: list[dict[str, Any]],
    sample: list[dict[str, Any]],
) -> None:
    compiled = Compiled(schema)
    compiled.extend(subs)
    index = _build(kind, compiled, sample)
    nodes = [(ident, compile_expr(text, schema)) for ident, text in subs]
    for i, ev in enumerate(events):
        want = sorted(ident for ident, node in nodes if evaluate(node, ev))
        got = index.match(ev)
        assert len(got) == len(set(got)), f"{kind}: event {i} repeats an id"
        assert sorted(got) == want, (
            f"{kind}, event {i} {ev}: missing {sorted(set(want) - set(got))}, "
            f"extra {sorted(set(got) - set(want))}"
        )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_operator_lists_and_undefined(kind: str, seed: int) -> None:
    schema, subs, events = _random_workload(seed, 300, 150)
    _check(kind, schema, subs, events, sample=events[:40] if seed != 3 else [])


@pytest.mark.parametrize("kind", KINDS[1:])
@pytest.mark.parametrize(
    "params",
    [
        {"card": 12, "eq_share": 0.3},
        {"card": 6, "eq_share": 0.0, "zipf": 1.5},
        {"card": 200, "eq_share": 1.0, "bases": 3},
    ],
)
def test_begen_ranges(kind: str, params: dict[str, Any]) -> None:
    schema, subs, events = _begen(**params)
    _check(kind, schema, subs, events, sample=events[:30])


@functools.cache
def _begen(**params: Any) -> tuple[Schema, list[tuple[int, str]], list[dict[str, Any]]]:
    w = make_workload(subs=600, events=120, seed=5, dims=40, check=False, **params)
    schema = Schema.from_json(w.schema)
    return schema, w.subs, [schema.validate_event(e) for e in w.events]


def test_hand_written_directions() -> None:
    """The <=/>= scan directions (the OpIndex paper states one backwards) and free clauses."""
    schema = Schema.from_json(
        {"attributes": {"a": {"type": "int"}, "b": {"type": "int"}, "t": {"type": "int_list"}}}
    )
    subs = [
        ("le", "a <= 5"),
        ("ge", "a >= 5"),
        ("lt", "a < 5 and b = 1"),
        ("gt", "a > 5 and b = 1"),
        ("ne", "a != 5 and b != 2"),
        ("null", "a is null"),
        ("true", "true"),
        ("list", "3 in t and b >= 0"),
        ("nb", "a not between 2 and 8"),
    ]
    compiled = Compiled(schema)
    compiled.extend(subs)
    cases = [
        ({"a": 3, "b": 1}, {"le", "lt", "ne", "true"}),
        ({"a": 5, "b": 1}, {"le", "ge", "true"}),
        ({"a": 7, "b": 1}, {"ge", "gt", "ne", "true"}),
        ({"a": 9, "b": 2}, {"ge", "nb", "true"}),
        ({"b": 0, "t": [3]}, {"null", "true", "list"}),
        ({}, {"null", "true"}),
    ]
    for kind in KINDS:
        index = _build(kind, compiled, [])
        for ev, want in cases:
            assert set(index.match(schema.validate_event(ev))) == want, (kind, ev)


def test_spaces_cover_and_locate() -> None:
    """Predicate spaces: 2k+1 of them, and an ``in`` list is several one-space ranges."""
    from betree.lang.atoms import OrderAtom

    sp = Spaces({1, 4, 9})
    assert sp.n == 7
    assert [sp.locate(x) for x in (0, 1, 2, 4, 5.5, 9, 10)] == [0, 1, 2, 3, 4, 5, 6]
    assert sp.cover([OrderAtom("a", [(">=", 1)]), OrderAtom("a", [("<", 9)])]) == [(1, 4)]
    assert sp.cover([OrderAtom("a", [("=", 1), ("=", 9)])]) == [(1, 1), (5, 5)]
    assert sp.cover([OrderAtom("a", [("!=", 4)])]) == [(0, 2), (4, 6)]


def test_pstree_refuses_past_its_budget() -> None:
    schema, subs, _ = _begen(card=12, eq_share=0.3)
    compiled = Compiled(schema)
    compiled.extend(subs)
    for cls in (PSTBloom, PSTHash):
        with pytest.raises(TooBig, match="entries"):
            cls(compiled, max_entries=100)
