"""The BEGen workload generator (``bexdb gen``).

Match rates are computed here with the reference evaluator (:func:`betree.lang.expr.evaluate`),
never with the index or the generator's own numpy model.  No timing is asserted.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.lang.expr import And, Node, evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.bench import gen, gen_cli


def _read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _atoms(node: Node) -> int:
    return len(node.children) if isinstance(node, And) else 1


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("begen")
    summary = gen.generate(out, subs=1500, events=120, seed=11)
    return out, summary


def test_generate_writes_valid_files(written: tuple[Path, dict[str, Any]]) -> None:
    out, summary = written
    schema = Schema.from_json(json.loads((out / "schema.json").read_text()))
    assert sorted(schema.attributes, key=lambda a: int(a[1:])) == [f"a{d}" for d in range(400)]
    assert {(s.type, s.min, s.max) for s in schema.attributes.values()} == {("int", 0, 47)}

    subs = _read_jsonl(out / "subs.jsonl")
    assert [s["id"] for s in subs] == list(range(1500))  # ids 0..n-1, so unique
    counts = set()
    for s in subs:
        assert set(s) == {"id", "expr"}
        node = compile_expr(s["expr"], schema)  # raises on any type or syntax error
        counts.add(_atoms(node))
    assert counts <= set(range(5, 10))
    assert len(counts) >= 4  # k is spread over 5..9

    events = _read_jsonl(out / "events.jsonl")
    assert len(events) == 120
    keys = set()
    for e in events:
        assert len(e) == 15
        assert schema.validate_event(e) == e
        keys.add(tuple(sorted(e.items())))
    assert len(keys) == len(events), "events repeat"
    assert summary["subs"] == 1500 and summary["events"] == 120


def test_match_rate_is_plausible_by_brute_force(written: tuple[Path, dict[str, Any]]) -> None:
    out, summary = written
    schema = Schema.from_json(json.loads((out / "schema.json").read_text()))
    nodes = [compile_expr(s["expr"], schema) for s in _read_jsonl(out / "subs.jsonl")[:800]]
    events = [schema.validate_event(e) for e in _read_jsonl(out / "events.jsonl")[:60]]
    hits = sum(evaluate(node, e) for node in nodes for e in events)
    rate = hits / (len(nodes) * len(events))
    assert 0.002 <= rate <= 0.05, rate
    # the reported rates are measured, and near the 1% target
    assert 0.002 <= summary["brute_rate"] <= 0.05
    assert abs(summary["calibration_rate"] - 0.01) < 0.002


def test_every_subscription_holds_for_its_base_event() -> None:
    g = gen.BEGen(gen.Params(subs=400, seed=5, zipf=1.0))
    schema = Schema.from_json(g.p.schema())
    subs = list(g.subscriptions(400))
    d, _ = next(g.sub_chunks(400))
    base_events = gen.event_dicts(g.bases.attrs, g.bases.values)
    for (ident, text), b in zip(subs, d.base.tolist(), strict=True):
        node = compile_expr(text, schema)
        assert evaluate(node, base_events[b]), (ident, text, base_events[b])


@pytest.fixture()
def small_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration sample a tenth of the size, for the tests that assert no match rate
    (the calibration was most of their time: 0.6-3.4 s a workload)."""
    monkeypatch.setattr(gen, "CALIB_SUBS", gen.CALIB_SUBS // 10)
    monkeypatch.setattr(gen, "CALIB_EVENTS", gen.CALIB_EVENTS // 10)


@pytest.mark.usefixtures("small_calibration")
def test_deterministic_for_a_seed_and_prefix_stable() -> None:
    a = gen.make_workload(subs=700, events=30, seed=3, check=False)
    b = gen.make_workload(subs=700, events=30, seed=3, check=False)
    assert a.subs == b.subs and a.events == b.events
    c = gen.make_workload(subs=700, events=30, seed=4, check=False)
    assert c.subs != a.subs and c.events != a.events
    small = gen.make_workload(subs=200, events=10, seed=3, check=False)
    assert small.subs == a.subs[:200]
    assert small.events == a.events[:10]


@pytest.mark.usefixtures("small_calibration")
def test_events_stay_distinct_when_repeats_are_likely() -> None:
    w = gen.make_workload(subs=50, events=300, seed=2, bases=1, card=3, check=False)
    keys = {tuple(sorted(e.items())) for e in w.events}
    assert len(keys) == 300


@pytest.mark.usefixtures("small_calibration")
def test_eq_share_and_zipf() -> None:
    eq = gen.make_workload(subs=300, events=5, seed=1, eq_share=1.0, check=False)
    for _, text in eq.subs:
        assert all(" = " in p for p in text.split(" and ")), text
    skewed = gen.make_workload(subs=2000, events=5, seed=1, zipf=1.5, check=False)
    uniform = gen.make_workload(subs=2000, events=5, seed=1, check=False)

    def low_share(w: gen.Workload) -> float:
        attrs = [int(a) for _, t in w.subs for a in re.findall(r"\ba(\d+)\b", t)]
        return float(np.mean(np.array(attrs) < 40))

    assert low_share(skewed) > 0.3 > 0.2 > low_share(uniform)


def test_unreachable_target_is_reported_not_hidden() -> None:
    w = gen.make_workload(subs=100, events=20, seed=1, bases=2000, check=False)
    _, hi = w.summary["calibration_bounds"]
    assert hi < 0.01
    assert w.summary["scale"] == 1.0
    assert "WARNING" in gen_cli.format_summary(w.summary)


def test_cli_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    gen_cli.add_arguments(parser)
    args = parser.parse_args([str(tmp_path), "--subs", "200", "--events", "20", "--seed", "9"])
    assert gen_cli.main(args) == 0
    assert "measured match rate" in capsys.readouterr().out
    assert len(_read_jsonl(tmp_path / "subs.jsonl")) == 200


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(InvalidInput):
        gen.make_workload(subs=10, events=1, dims=10)
    with pytest.raises(InvalidInput):
        gen.make_workload(subs=10, events=1, eq_share=1.5)


def test_dense_events_keep_large_values() -> None:
    """Values above int16's range survive (an int16 matrix wrapped them)."""
    p = gen.Params(dims=4, card=100_000)
    attrs = np.array([[0, 2], [1, 3]])
    values = np.array([[40_000, 99_999], [7, 65_536]])
    out = gen.dense(p, attrs, values)
    assert out.tolist() == [[40_000, -1, 99_999, -1], [-1, 7, -1, 65_536]]


def test_the_wide_profile_repeats_few_predicates(tmp_path: Path) -> None:
    """``--profile wide``: the same calibrated match rate over 480 values per attribute,
    with several times as many distinct conjunct texts as ``begen``."""
    distinct = {}
    for profile in ("begen", "wide"):
        summary = gen.generate(tmp_path / profile, subs=20_000, events=200, profile=profile)
        assert summary["params"]["card"] == gen.profile_card(profile)
        assert abs(summary["brute_rate"] - 0.01) < 0.006  # the reference evaluator's count
        schema = json.loads((tmp_path / profile / "schema.json").read_text())
        assert schema["attributes"]["a0"]["max"] == gen.profile_card(profile) - 1
        texts = [d["expr"] for d in _read_jsonl(tmp_path / profile / "subs.jsonl")]
        distinct[profile] = len({p for text in texts for p in re.split(r" and (?=a)", text)})
    assert distinct["wide"] > 2.5 * distinct["begen"]  # 2.9x at 20K, 4.7x at 200K
    parser = argparse.ArgumentParser()
    gen_cli.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "c"), "--profile", "wide", "--card", "60"])
    args.subs, args.events = 300, 10
    assert gen_cli.main(args) == 0
    assert json.loads((tmp_path / "c" / "schema.json").read_text())["attributes"]["a1"]["max"] == 59
