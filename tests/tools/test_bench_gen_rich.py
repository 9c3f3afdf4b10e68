"""``bexdb gen --profile rich`` (tools.bench.gen_rich): the files, every form of the language
present, subscriptions true on their base, determinism, the measured match rate in band."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from tools.bench import gen, gen_cli, gen_rich

FORMS = [
    " between ", " >= ", " < ", " in (", " = ", " one of (", " none of (", " all of (",
    " in user.audiences", " like ", " matches ", "starts_with(", "ends_with(", "contains(",
    "in cidr(", "geo_within_radius(", "page.category", "segment_within(", "segment_before(",
    "within_frequency_cap(", " or ", "not (", " is null", "user.premium",
]  # fmt: skip


def test_every_form_appears_and_parses() -> None:
    schema, subs, events, _ = gen_rich.make(3000, 50, check=False, seed=3)
    s = Schema.from_json(schema)
    text = "\n".join(t for _, t in subs)
    missing = [f for f in FORMS if f not in text]
    assert not missing
    for _, t in subs[:300]:
        compile_expr(t, s)
    for e in events:
        s.validate_event(e)
    assert any("user" not in e or "coupon" not in e["user"] for e in events)  # absent attributes


def test_a_subscription_holds_on_its_base() -> None:
    p = gen_rich.params(seed=5)
    s = Schema.from_json(gen_rich.SCHEMA)
    for i in range(200):
        text = gen_rich.subscription(p, i, 1)  # one base: base 0
        assert evaluate(compile_expr(text, s), s.validate_event(gen_rich.make_base(5, 0))), text


def test_deterministic_and_prefix_stable() -> None:
    a = gen.make_workload(subs=400, events=20, profile="rich", seed=9, check=False)
    b = gen.make_workload(subs=200, events=20, profile="rich", seed=9, check=False)
    assert a.subs[:200] == b.subs and a.events == b.events
    c = gen.make_workload(subs=200, events=20, profile="rich", seed=10, check=False)
    assert c.subs != b.subs


@pytest.mark.parametrize("target", [0.002, 0.01])
def test_measured_rate_is_near_the_target(target: float) -> None:
    *_, summary = gen_rich.make(1500, 80, seed=2, target_rate=target)
    assert 0.0001 <= summary["sample_rate"] <= 0.02
    assert target / 4 <= summary["sample_rate"] <= target * 4, summary


def test_cli_writes_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(tmp_path), "--profile", "rich", "--subs", "300", "--events", "10"]
    parser = argparse.ArgumentParser()
    gen_cli.add_arguments(parser)
    assert gen_cli.main(parser.parse_args(argv)) == 0
    assert "profile rich: 300 subscriptions" in capsys.readouterr().out
    lines = (tmp_path / "subs.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 300 and json.loads(lines[0])["id"] == 0
    assert len((tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()) == 10
    Schema.from_json(json.loads((tmp_path / "schema.json").read_text()))
