"""``bexdb bench hem``'s conversion of a dense workload into its driver's input (HEM itself
is not needed: the tests never build or run it).

The written ranges and events are read back and evaluated by a brute-force loop, which must
give the reference evaluator's answers on the original texts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.bench import gen, gen_dense, hem


def test_convert_keeps_every_range_and_value(tmp_path: Path) -> None:
    gen_dense.generate(tmp_path, subs=300, events=40, seed=9, preds=3, width=0.6, card=1000)
    out = tmp_path / "hem"
    out.mkdir()
    shape = hem.convert(tmp_path, out, events=30)
    assert shape == {"subscriptions": 300, "events": 30, "attributes": 20, "domain": 1000}
    subs_lines = (out / "hem_subs.txt").read_text().split("\n")
    assert subs_lines[0] == "300 20 1000"
    ranges = []
    for line in subs_lines[1:301]:
        k, *cells = map(int, line.split())
        assert len(cells) == 3 * k
        ranges.append([cells[i : i + 3] for i in range(0, len(cells), 3)])
    event_lines = (out / "hem_events.txt").read_text().split("\n")
    assert event_lines[0] == "30 20"
    values = [list(map(int, line.split())) for line in event_lines[1:31]]
    schema = Schema.from_json(json.loads((tmp_path / "schema.json").read_text()))
    texts = [json.loads(x)["expr"] for x in (tmp_path / "subs.jsonl").read_text().splitlines()]
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()][:30]
    nodes = [compile_expr(t, schema) for t in texts]
    hits = 0
    for event, row in zip(events, values, strict=True):
        checked = schema.validate_event(event)
        for node, rs in zip(nodes, ranges, strict=True):
            mine = all(lo <= row[a] <= hi for a, lo, hi in rs)
            assert mine == evaluate(node, checked)
            hits += mine
    assert hits  # (the seed gives matches: the comparison is not all False)


def test_convert_refuses_other_workloads(tmp_path: Path) -> None:
    gen.generate(tmp_path, subs=20, events=5, seed=1, profile="dense")
    with open(tmp_path / "subs.jsonl", "a") as fh:
        fh.write(json.dumps({"id": "x", "expr": "a1 > 5 and a2 between 1 and 3"}) + "\n")
    with pytest.raises(InvalidInput, match="'x' is not between ranges"):
        hem.convert(tmp_path, tmp_path, events=5)
    (tmp_path / "schema.json").write_text(json.dumps({"attributes": {"a0": {"type": "float"}}}))
    with pytest.raises(InvalidInput, match="every attribute must be an int"):
        hem.convert(tmp_path, tmp_path, events=5)


@pytest.mark.parametrize("cache_mb", [1, 64])
def test_run_bexdb_counts_what_brute_force_matches(tmp_path: Path, cache_mb: int) -> None:
    """bexdb's side of the bench, on a tiny page cache and a larger one (which bounds the
    packed view): the counts it reports are brute force's."""
    from betree.index import Index

    gen_dense.generate(tmp_path, subs=400, events=120, seed=4, preds=4, width=0.5, card=500)
    schema = Schema.from_json(json.loads((tmp_path / "schema.json").read_text()))
    records = [json.loads(x) for x in (tmp_path / "subs.jsonl").read_text().splitlines()]
    with Index.open(tmp_path / "store", schema=schema) as idx:
        idx.subscribe_many((r["id"], r["expr"]) for r in records)
    ours = hem.run_bexdb(str(tmp_path / "store"), tmp_path, 100, 32, cache_mb)
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()][:100]
    nodes = [compile_expr(r["expr"], schema) for r in records]
    expected = [
        sum(evaluate(n, checked) for n in nodes) for checked in map(schema.validate_event, events)
    ]
    assert ours["matches"] == expected and any(expected)
    assert ours["first_pass_ms_per_event"] > 0 and ours["warm_ms"]["mean"] > 0
    # the thread's CPU time beside the wall time (no timing is asserted)
    assert ours["warm_cpu_ms"].keys() == ours["warm_ms"].keys() == {"mean", "p50", "p99"}
    assert all(isinstance(v, float) and v >= 0 for v in ours["warm_cpu_ms"].values())
    assert ours["batched_events_per_cpu_s"] > 0
