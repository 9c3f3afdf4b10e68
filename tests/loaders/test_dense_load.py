"""Bulk loads of the dense workload (``bexdb gen --profile dense``: every event defines every
attribute, subscriptions of ``between`` ranges, two atoms a range, few shared), differential
against the brute-force evaluator: the python engine, the Spark engine (one store and
sharded), ``match`` and ``match_many``, after reopening and after deletes, ``check()`` after
every load and mutation.  Range ends at the edges of int64 and of doubles (±1.7e308),
``-0.0``, strict and non-strict ends, shared constants and int constants on a float
attribute (the PB+tree's column build and its fallback) are mixed in.  Small sizes; no
timing is asserted.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from loaders import python_load
from loaders.records import read_jsonl
from loaders.spark import driver
from tests.support.brute import brute
from tools.bench import gen_dense

SETTINGS = {"max_cap": 8, "min_size": 2}  # small l-nodes: wide ranges go deep in the tree


def _edge_subs(schema: dict[str, Any], rng: random.Random, n: int) -> list[str]:
    """Subscriptions on the same attributes with every operator and extreme constants."""
    names = sorted(schema["attributes"])
    is_float = schema["attributes"][names[0]]["type"] == "float"
    big = [-(2**63), 2**63 - 1, 0, 1, -1, 500, 999]
    consts: list[Any] = [*big, 0.0, -0.0, 1.7e308, -1.7e308, 2.5] if is_float else big
    ops = ["<", "<=", "=", "!=", ">=", ">"]
    out = []
    for _ in range(n):
        parts = []
        for attr in rng.sample(names, rng.randint(1, 3)):
            c = rng.choice(consts)
            if rng.random() < 0.5:
                lo, hi = sorted([c, rng.choice(consts)])
                parts.append(f"{attr} between {lo!r} and {hi!r}")
            else:
                parts.append(f"{attr} {rng.choice(ops)} {c!r}")
        out.append(" and ".join(parts))
    return out


def _workload(domain: str, seed: int) -> tuple[dict[str, Any], list[tuple[Any, str]], list[Any]]:
    # card 1000: constants repeat across subscriptions (shared atoms) as well as not
    _, schema, subs, events, _ = gen_dense.make_workload(
        160, 60, seed=seed, attributes=6, preds=3, width=0.5, domain=domain, card=1000, check=False
    )
    rng = random.Random(seed)
    subs += [(len(subs) + i, e) for i, e in enumerate(_edge_subs(schema, rng, 40))]
    subs = [(i if i % 3 else f"s{i}", e) for i, e in subs]
    names = sorted(schema["attributes"])
    edges = [{a: rng.choice([0, 999, -(2**63), 2**63 - 1]) for a in names} for _ in range(5)]
    if domain == "float":
        edges = [{a: rng.choice([0.0, -0.0, 1.7e308, -1.7e308, 2.5]) for a in names}]
    return schema, subs, events + edges


def _brute(schema: Schema, subs: list[tuple[Any, str]], ev: Any) -> list[str]:
    return sorted(json.dumps(i) for i in brute(dict(subs), schema, ev))


def _ids(matches: Any) -> list[str]:
    return sorted(json.dumps(m) for m in matches)


def _write(tmp_path: Path, schema: dict[str, Any], subs: list[tuple[Any, str]]) -> str:
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    return str(path)


def _agree(reader: Any, schema: Schema, subs: list[tuple[Any, str]], events: list[Any]) -> None:
    expected = [_brute(schema, subs, ev) for ev in events]
    assert [_ids(reader.match(ev)) for ev in events] == expected
    assert [_ids(m) for m in reader.match_many(events)] == expected
    assert sum(map(len, expected)) > 0  # the workload matches something


@pytest.mark.parametrize(("domain", "seed"), [("int", 1), ("float", 2)])
def test_python_load_matches_brute_force(tmp_path: Path, domain: str, seed: int) -> None:
    doc, subs, events = _workload(domain, seed)
    schema = Schema.from_json(doc)
    path = _write(tmp_path, doc, subs)
    summary = python_load.load(tmp_path / "store", read_jsonl(path), doc, settings=SETTINGS)
    assert summary["loaded"] == len(subs) and summary["rejected"] == 0
    with Index.open(tmp_path / "store") as idx:  # reopened
        idx.check()
        _agree(idx, schema, subs, events)
        gone = {i for i, _ in subs[::4]}
        assert all(idx.unsubscribe_many(sorted(gone, key=str)))
        idx.check()
        left = [(i, e) for i, e in subs if i not in gone]
        _agree(idx, schema, left, events)
        idx.subscribe("new", "a0 between 10 and 900 and a1 > 3")
        idx.check()
        _agree(idx, schema, [*left, ("new", "a0 between 10 and 900 and a1 > 3")], events)


@pytest.mark.spark
@pytest.mark.parametrize("domain", ["int", "float"])
def test_spark_load_plain_and_sharded_match_brute_force(
    spark: Any, tmp_path: Path, domain: str
) -> None:
    doc, subs, events = _workload(domain, 7)
    schema = Schema.from_json(doc)
    path = _write(tmp_path, doc, subs)
    for shards in (None, 3):
        target = tmp_path / f"spark-{shards}"
        summary = driver.load(
            target,
            [path],
            doc,
            spark=spark,
            settings=SETTINGS,
            progress=None,
            shards=shards,
            split_bytes=8192,
        )
        assert summary["loaded"] == len(subs)
        with open_index(target) as reader:
            _agree(reader, schema, subs, events)
    with Index.open(tmp_path / "spark-None") as idx:
        idx.check()
        gone = [i for i, _ in subs[1::5]]
        idx.unsubscribe_many(gone)
        idx.check()
        _agree(idx, schema, [(i, e) for i, e in subs if i not in set(gone)], events)
