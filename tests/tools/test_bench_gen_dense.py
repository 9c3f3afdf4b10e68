"""The dense workload generator (``bexdb gen --profile dense``).

Ranges are read back from the expression texts through the parser, and match rates are computed
with the reference evaluator (:func:`betree.lang.expr.evaluate`), never with the generator's own
numpy model.  No timing is asserted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from betree.lang.expr import And, Between, Node, evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.bench import gen, gen_cli, gen_dense


def _ranges(node: Node) -> list[Between]:
    kids = node.children if isinstance(node, And) else (node,)
    assert all(isinstance(k, Between) and not k.negated for k in kids)
    return list(kids)  # type: ignore[arg-type]


def _read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_generate_writes_the_dense_shape(tmp_path: Path) -> None:
    summary = gen.generate(tmp_path, subs=900, events=60, seed=5, profile="dense")
    schema = Schema.from_json(json.loads((tmp_path / "schema.json").read_text()))
    names = [f"a{d}" for d in range(20)]
    assert sorted(schema.attributes) == sorted(names)
    assert {(s.type, s.min, s.max) for s in schema.attributes.values()} == {("int", 0, 999_999)}
    subs = _read_jsonl(tmp_path / "subs.jsonl")
    assert [s["id"] for s in subs] == list(range(900))
    used = set()
    for s in subs:
        ranges = _ranges(compile_expr(s["expr"], schema))
        assert len(ranges) == 10 and len({r.attr for r in ranges}) == 10
        for r in ranges:
            assert r.lo >= 0 and r.hi <= 999_999 and r.hi - r.lo + 1 == 400_000
            used.add(r.attr)
    assert used == set(names)
    events = _read_jsonl(tmp_path / "events.jsonl")
    assert len(events) == 60
    for e in events:
        assert sorted(e) == sorted(names)  # every event defines every attribute
        schema.validate_event(e)
    assert summary["profile"] == "dense" and summary["sample"] == [900, 60]
    assert "dense" in gen_cli.format_summary(summary)


def test_deterministic_by_seed_and_prefix_stable() -> None:
    a = gen.make_workload(subs=700, events=30, seed=3, profile="dense", check=False)
    b = gen.make_workload(subs=700, events=30, seed=3, profile="dense", check=False)
    assert a.subs == b.subs and a.events == b.events
    c = gen.make_workload(subs=700, events=30, seed=4, profile="dense", check=False)
    assert not set(a.subs) & set(c.subs) and a.events != c.events
    small = gen.make_workload(subs=200, events=30, seed=3, profile="dense", check=False)
    assert small.subs == a.subs[:200]
    big = gen_dense.make_workload(70_000, 1, seed=3, check=False)[2]  # crosses a chunk
    assert big[:700] == a.subs and len(set(t for _, t in big)) == 70_000


@pytest.mark.parametrize("domain", ["int", "float"])
def test_knobs_are_honored(domain: str) -> None:
    w = gen.make_workload(
        subs=400,
        events=40,
        seed=2,
        profile="dense",
        attributes=7,
        preds=3,
        width=0.25,
        domain=domain,
        card=1000,
        check=False,
    )
    schema = Schema.from_json(w.schema)
    assert {s.type for s in schema.attributes.values()} == {domain}
    assert len(schema.attributes) == 7
    for _, text in w.subs:
        for r in _ranges(compile_expr(text, schema)):
            assert type(r.lo) is (int if domain == "int" else float)
            assert 0 <= r.lo <= r.hi <= 1000
            if domain == "int":
                assert r.hi - r.lo + 1 == 250
            else:
                assert r.hi - r.lo == pytest.approx(250.0)
        assert len(_ranges(compile_expr(text, schema))) == 3
    assert all(len(e) == 7 for e in w.events)
    assert all(type(v) is (int if domain == "int" else float) for e in w.events for v in e.values())


def test_placement_normal_crowds_the_middle() -> None:
    def mid_share(placement: str) -> float:
        w = gen_dense.make_workload(3000, 1, seed=1, placement=placement, card=1000, check=False)
        schema = Schema.from_json(w[1])
        centres = [(r.lo + r.hi) / 2 for _, t in w[2] for r in _ranges(compile_expr(t, schema))]
        return sum(400 <= c < 600 for c in centres) / len(centres)

    # uniform lo over [0, 600]: centres uniform over [200, 800], a third in the middle 200
    assert 0.30 < mid_share("uniform") < 0.37
    assert mid_share("normal") > 0.5


def test_match_rate_by_the_reference_evaluator() -> None:
    # width 0.6, 4 ranges: 0.6 ** 4 = 13% with uniform placement
    w = gen.make_workload(
        subs=300, events=80, seed=9, profile="dense", preds=4, width=0.6, card=500
    )
    schema = Schema.from_json(w.schema)
    nodes = [compile_expr(t, schema) for _, t in w.subs]
    hits = sum(evaluate(n, schema.validate_event(e)) for e in w.events for n in nodes)
    rate = hits / (len(nodes) * len(w.events))
    assert 0.09 < rate < 0.17
    assert w.summary["brute_rate"] == pytest.approx(rate)  # the same 300 x 80 sample
    assert w.summary["expected_rate"] == pytest.approx(0.6**4)


def test_default_rate_is_in_the_realistic_band() -> None:
    w = gen_dense.make_workload(4000, 400, seed=1)
    assert 5e-5 < w[4]["sample_rate"] < 5e-4  # 0.4 ** 10 = 1.05e-4


@pytest.mark.parametrize(
    ("knobs", "word"),
    [
        ({"preds": 21}, "--preds"),
        ({"preds": 0}, "--preds"),
        ({"width": 0.0}, "--width"),
        ({"width": 1.5}, "--width"),
        ({"domain": "str"}, "--domain"),
        ({"placement": "zipf"}, "--placement"),
        ({"card": 1}, "--card"),
        ({"zipf": 1.0}, "no knob"),
    ],
)
def test_bad_knobs_are_named(knobs: dict[str, Any], word: str) -> None:
    with pytest.raises(InvalidInput, match=word):
        gen_dense.make_workload(10, 1, **knobs)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    gen_cli.add_arguments(parser)
    argv = f"{tmp_path} --profile dense --subs 50 --events 5 --attributes 5 --preds 2"
    args = parser.parse_args([*argv.split(), "--width", "0.5", "--domain", "float"])
    assert gen_cli.main(args) == 0
    assert "5 float attributes" in capsys.readouterr().out
    events = _read_jsonl(tmp_path / "events.jsonl")
    assert all(len(e) == 5 and all(isinstance(v, float) for v in e.values()) for e in events)
    with pytest.raises(SystemExit):
        parser.parse_args([str(tmp_path), "--profile", "dense", "--width", "2"])
