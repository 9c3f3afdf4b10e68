"""The Spark bulk load (``loaders.spark``) on one shared local Spark session.

Differential: a Spark-loaded store (plain or sharded) answers every event as a store built
by online ``subscribe`` of the same subscriptions, and the brute-force evaluator; the Spark
engine's rejects equal the single-process engine's, line for line, across many input splits
and two files.  Parquet and CSV inputs; schema inference; failures that publish nothing.
Small data throughout: the whole file runs in about a minute (most of it Spark's start).
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.schema import InferenceError, Schema
from betree.stores.sharded import (
    open_index,
    read_manifest,
    shard_for,
    shard_name,
    shard_of,
    verify,
)
from loaders import python_load
from loaders.records import TooManyRejects, read_jsonl
from loaders.spark import driver
from loaders.spark.compile import compile_partition, compiler
from loaders.spark.extract import JSONL
from loaders.spark.results import RUNS
from loaders.spark.runfiles import read_runs
from storage.errors import BexdbError, InvalidInput
from tests.support.brute import brute
from tests.support.workload import SCHEMA, event, expression

pytestmark = pytest.mark.spark
SETTINGS = {"max_cap": 4, "min_size": 2}  # small l-nodes: a deep tree from few subscriptions


def ids_of(matches: list[Any]) -> list[str]:
    return sorted(json.dumps(m) for m in matches)


def write_jsonl(path: Path, docs: list[Any]) -> str:
    path.write_text("".join((d if isinstance(d, str) else json.dumps(d)) + "\n" for d in docs))
    return str(path)


def workload(seed: int, n: int) -> list[tuple[Any, str]]:
    rng = random.Random(seed)
    return [(i if i % 2 else f"s{i}", expression(rng)) for i in range(n)]


def leftovers(target: Path) -> list[str]:
    """The target, and any staging directory a load left beside it."""
    return [
        p for p in os.listdir(target.parent) if p == target.name or p.startswith(f".{target.name}.")
    ]


def load(spark: Any, target: Path, inputs: list[str], schema: Any = SCHEMA, **kw: Any) -> Any:
    kw.setdefault("settings", SETTINGS)
    kw.setdefault("progress", None)
    return driver.load(target, inputs, schema, spark=spark, **kw)


def test_matches_online_subscribe_and_brute_force(spark: Any, tmp_path: Path) -> None:
    subs = workload(11, 500)
    subs += [(1001, "i = 5"), ("1001", "not (i = 5)")]  # distinct ids
    path = write_jsonl(tmp_path / "subs.jsonl", [{"id": i, "expr": e} for i, e in subs])
    rejects = io.StringIO()
    summary = load(spark, tmp_path / "spark", [path], rejects=rejects, split_bytes=8192)
    schema = Schema.from_json(SCHEMA)
    with Index.open(tmp_path / "online", schema=SCHEMA, settings=SETTINGS) as online:
        good = []
        for ident, expr in subs:
            try:
                online.engine.compiler().compile(ident, expr)
            except InvalidInput:
                continue
            good.append((ident, expr))
        online.subscribe_many(good)
        assert summary["loaded"] == len(good) and summary["rejected"] == len(subs) - len(good)
        assert len(rejects.getvalue().splitlines()) == summary["rejected"]
        rng = random.Random(12)
        with Index.open(tmp_path / "spark", readonly=True) as bulk:
            bulk.check()
            assert len(bulk) == len(good)
            assert bulk.expression("s0") == subs[0][1]
            for _ in range(300):
                ev = event(rng)
                got = bulk.match(ev)
                assert len(got) == len(set(got))
                assert ids_of(got) == ids_of(online.match(ev)), ev
                assert ids_of(got) == ids_of(list(brute(dict(good), schema, ev))), ev


def test_sharded_store_matches_and_cli(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.cli import main

    subs = workload(21, 300)
    path = write_jsonl(tmp_path / "subs.jsonl", [{"id": i, "expr": e} for i, e in subs])
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(json.dumps(SCHEMA))
    store = tmp_path / "sharded"
    argv = ["load", str(store), path, "--schema", str(schema_path), "--shards", "2"]
    assert main(argv) == 0  # the CLI picks up the active session
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert f"done: {len(subs)} loaded" in err
    manifest = read_manifest(store)
    assert [s["path"] for s in manifest["shards"]] == ["shard-0000", "shard-0001"]
    assert all(s["subscriptions"] > 0 for s in manifest["shards"])
    assert manifest["subscriptions"] == summary["loaded"] == len(subs)
    assert verify(store) == {"shards": 2, "subscriptions": len(subs)}
    rng = random.Random(22)
    events = [event(rng) for _ in range(200)]
    with Index.open(tmp_path / "online", schema=SCHEMA) as online:
        online.subscribe_many(subs)
        expected = [ids_of(online.match(ev)) for ev in events]
    with open_index(store) as reader:
        assert len(reader) == len(subs)
        assert [ids_of(reader.match(ev)) for ev in events] == expected
    events_path = write_jsonl(tmp_path / "events.jsonl", [*events, "{nope"])
    code = main(["match", str(store), events_path])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 3 and "malformed JSON" in lines[-1]["error"]
    assert [ids_of(line["matches"]) for line in lines[:-1]] == expected
    assert main(["verify", str(store)]) == 0
    assert "ok (2 shards)" in capsys.readouterr().out
    with Index.open(store / "shard-0001") as shard:  # damage one shard
        with shard.store.write() as txn:
            txn.delete(b"home", (0).to_bytes(8, "big"))
        shard.subscribe("extra", "i > 1")
    assert main(["verify", str(store)]) == 4
    err = capsys.readouterr().err
    assert "shard-0001: " in err and "belongs in shard-0000" in err  # "extra" is shard 0's


def test_a_spark_sharded_store_takes_writes(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Writes to a store sharded by the Spark load: each id in the shard the load's hash
    names, all or nothing, and the store verifies and matches as an online-built one."""
    from tools.cli import main

    subs = dict(workload(31, 200))
    path = write_jsonl(tmp_path / "subs.jsonl", [{"id": i, "expr": e} for i, e in subs.items()])
    store = tmp_path / "sharded"
    assert load(spark, store, [path], shards=3)["loaded"] == len(subs)
    rng = random.Random(32)
    more = [{"id": f"n{k}" if k % 2 else k, "expr": expression(rng)} for k in range(0, 60)]
    assert main(["subscribe", str(store), write_jsonl(tmp_path / "more.jsonl", more)]) == 0
    subs.update({d["id"]: d["expr"] for d in more})
    assert main(["unsubscribe", str(store), "1", "n3", "s0"]) == 0
    for ident in (1, "n3", "s0"):
        del subs[ident]
    with open_index(store, readonly=False) as writer:
        assert writer.subscribe("late", "i = 3") is True
        subs["late"] = "i = 3"
    capsys.readouterr()
    assert main(["verify", str(store)]) == 0
    assert "ok (3 shards)" in capsys.readouterr().out
    events = [event(rng) for _ in range(100)]
    with Index.open(tmp_path / "online", schema=SCHEMA) as online:
        online.subscribe_many(list(subs.items()))
        expected = [ids_of(online.match(ev)) for ev in events]
    with open_index(store) as reader:
        assert dict(reader.subscriptions()) == subs
        assert [ids_of(reader.match(ev)) for ev in events] == expected
        for i, index in enumerate(reader.indexes):
            assert all(shard_for(reader, ident) == i for ident, _ in index.subscriptions())


BAD_FIRST = [
    {"id": 1, "expr": "i > 10"},
    {"id": 2, "expr": "i >"},  # syntax
    "",  # blank lines count as lines
    {"id": 3, "expr": 's = "x"'},
    {"id": 3, "expr": 's = "y"'},  # duplicate: both occurrences rejected
    "{broken",  # malformed JSON
    {"id": 4, "expr": "nope > 1"},  # unknown attribute
    {"id": 5, "expr": "s > 1"},  # type error
    {"id": 1.5, "expr": "i > 1"},  # bad id
    {"id": 6},  # no expr
    {"id": "3", "expr": "b"},  # "3" is not 3
]


def test_rejects_equal_the_python_engine(spark: Any, tmp_path: Path) -> None:
    """Same rejects, line for line, over many splits and two files; same answers."""
    rng = random.Random(31)
    first = [*BAD_FIRST, *({"id": f"a{k}", "expr": expression(rng)} for k in range(300))]
    first.insert(200, {"id": 7, "expr": "i between 1 and"})
    first.insert(250, {"id": "a7", "expr": "j = 1"})  # duplicates a7 further up
    second = [{"id": f"b{k}", "expr": expression(rng)} for k in range(200)]
    second[150] = {"id": 3, "expr": "i = 3"}  # duplicates 3 of the first file
    second[199] = "[1, 2]"  # not an object
    inputs = [
        write_jsonl(tmp_path / "first.jsonl", first),
        write_jsonl(tmp_path / "second.jsonl", second),
    ]
    theirs, ours = io.StringIO(), io.StringIO()
    records = [r for path in inputs for r in read_jsonl(path)]
    expected = python_load.load(
        tmp_path / "python", records, SCHEMA, rejects=theirs, settings=SETTINGS, progress=None
    )
    got = load(spark, tmp_path / "spark", inputs, rejects=ours, split_bytes=2048, shards=2)
    assert got["loaded"] == expected["loaded"] and got["rejected"] == expected["rejected"]
    rows = [json.loads(line) for line in ours.getvalue().splitlines()]
    assert rows == [json.loads(line) for line in theirs.getvalue().splitlines()]
    assert [(r["line"], r["id"]) for r in rows[:8]] == [
        (2, 2),
        (4, 3),
        (5, 3),
        (6, None),
        (7, 4),
        (8, 5),
        (9, 1.5),
        (10, 6),
    ]
    assert "duplicate id 3" in rows[1]["error"] and "malformed JSON" in rows[3]["error"]
    assert "nope" in rows[4]["error"]
    assert rows[-1] == {"line": 200, "id": None, "error": rows[-1]["error"]}
    events = [event(rng) for _ in range(150)]
    with Index.open(tmp_path / "python", readonly=True) as py, open_index(tmp_path / "spark") as sp:
        for ev in events:
            assert ids_of(sp.match(ev)) == ids_of(py.match(ev))
        assert len(sp) == len(py)


def test_parquet_and_csv(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table(
            {
                "id": pa.array([10, 11, None, 12, 13], pa.int64()),
                "expr": ["f > 1", None, "i = 1", "i >", 'sl one of ("a", "b")'],
                "other": [1, 2, 3, 4, 5],
            }
        ),
        tmp_path / "subs.parquet",
    )
    with open(tmp_path / "subs.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "expr"])
        writer.writerows(
            [
                ["1", "i > 3"],
                ["s2", 's in ("a", "b,c")'],
                ["3", ""],  # empty: no expr
                ["4", "i >"],
                ['"5"', "j = 5"],  # a JSON string id: "5"
                ["1", "i < 3"],  # duplicates row 1
                ["6"],  # a short row
            ]
        )
    rejects = io.StringIO()
    inputs = [str(tmp_path / "subs.parquet"), str(tmp_path / "subs.csv")]
    summary = load(spark, tmp_path / "store", inputs, rejects=rejects)
    rows = [json.loads(line) for line in rejects.getvalue().splitlines()]
    assert [(r["line"], r["id"]) for r in rows] == [
        (2, 11),
        (3, None),
        (4, 12),
        (1, 1),
        (3, 3),
        (4, 4),
        (6, 1),
        (7, 6),
    ]
    assert rows[0]["error"] == 'the row has no value in column "expr"'
    assert rows[1]["error"] == 'the row has no value in column "id"'
    assert "duplicate id 1" in rows[6]["error"]
    assert summary["loaded"] == 4
    with Index.open(tmp_path / "store", readonly=True) as idx:
        assert ids_of(idx.match({"f": 2.0, "j": 5, "s": "b,c"})) == ids_of([10, "5", "s2"])
        assert idx.match({"sl": ["b"]}) == [13]
        assert idx.expression("5") == "j = 5" and idx.expression(5) is None


def test_schema_inference(spark: Any, tmp_path: Path) -> None:
    subs = [
        {"id": 1, "expr": 'price > 3 and genre = "x"'},
        {"id": 2, "expr": "price > 2.5 or hardcover"},
        {"id": 3, "expr": 'tags one of ("a")'},
        {"id": 4, "expr": "tags is empty and price >"},  # does not parse: no evidence
        {"id": 5, "expr": "sizes = 3"},  # a duplicate: its evidence (a scalar) does not count
        {"id": 5, "expr": "3 in sizes"},
        {"id": 6, "expr": "3 in sizes"},
    ]
    path = write_jsonl(tmp_path / "subs.jsonl", subs)
    load(spark, tmp_path / "store", [path], None)
    records = list(read_jsonl(path))
    good = [(r.id, r.expr) for r in records if r.id != 5]
    with Index.open(tmp_path / "store", readonly=True) as idx:
        assert idx.schema == Schema.infer(good)
        assert idx.schema.attributes["price"].type == "float"
    bad = write_jsonl(
        tmp_path / "bad.jsonl",
        [*subs, {"id": 7, "expr": 'price = "cheap"'}, {"id": 8, "expr": "color is null"}],
    )
    with pytest.raises(InferenceError) as caught:
        load(spark, tmp_path / "bad", [bad], None)
    records = list(read_jsonl(bad))
    with pytest.raises(InferenceError) as expected:
        Schema.infer((r.id, r.expr) for r in records if r.id != 5)
    assert caught.value.message == expected.value.message
    assert caught.value.problems == expected.value.problems
    assert not (tmp_path / "bad").exists()


def test_failed_loads_publish_nothing(spark: Any, tmp_path: Path) -> None:
    subs = [{"id": i, "expr": f"i > {i}"} for i in range(40)] + [{"id": 99, "expr": "i >"}]
    path = write_jsonl(tmp_path / "subs.jsonl", subs)
    target = tmp_path / "store"
    rejects = io.StringIO()
    with pytest.raises(TooManyRejects, match="max-rejects"):
        load(spark, target, [path], rejects=rejects, max_rejects=0, shards=2)
    assert json.loads(rejects.getvalue())["id"] == 99  # the rejects are still reported
    assert leftovers(target) == []
    with pytest.raises(BexdbError, match="injected failure"):
        load(spark, target, [path], fail_at="build", shards=2)
    assert leftovers(target) == []
    with pytest.raises(RuntimeError, match="injected failure"):
        load(spark, target, [path], fail_at="publish")
    assert leftovers(target) == []
    assert load(spark, target, [path])["loaded"] == 40
    with pytest.raises(BexdbError, match="--replace"):
        load(spark, target, [path])
    again = write_jsonl(tmp_path / "again.jsonl", [{"id": "new", "expr": "i > 0"}])
    assert load(spark, target, [again], replace=True, shards=3)["loaded"] == 1
    assert leftovers(target) == ["store"]
    with open_index(target) as reader:
        assert reader.match({"i": 50}) == ["new"]


def test_compile_transform_keeps_its_compiler_per_schema(tmp_path: Path) -> None:
    """The compile transform (run here in-process, as a reused Spark worker runs it task
    after task) keeps one compiling index per (schema, settings), its scratch store already
    gone; its output is the online compiler's, for one schema and then another."""
    import pyarrow as pa

    from storage import codec

    def run(schema: dict[str, Any], texts: list[str]) -> list[Any]:
        """Each record's clauses as lists of atom keys, or None."""
        batch = pa.RecordBatch.from_pydict(
            {
                "arg": [0] * len(texts),
                "path": ["p"] * len(texts),
                "block": [0] * len(texts),
                "kind": [JSONL] * len(texts),
                "text": [json.dumps({"id": k, "expr": t}) for k, t in enumerate(texts)],
            }
        )
        runs = tmp_path / f"runs-{next(tasks)}"
        for name in ("atoms", shard_name(0), shard_name(1)):
            (runs / name).mkdir(parents=True)
        out = pa.Table.from_batches(
            list(compile_partition([batch], schema, runs=str(runs), shards=2))
        )
        files = out.filter(pa.compute.equal(out["kind"], RUNS))
        if len(texts) > 100:
            assert sorted(files["pos"].to_pylist()) == [0, 1]  # both shards got records
        for shard, path in zip(files["pos"].to_pylist(), files["path"].to_pylist(), strict=True):
            for k in read_runs([path])[0]["key"].to_pylist():
                assert shard_of(k, 2) == shard
        table, atom_keys = read_runs(files["path"].to_pylist())
        found = {}
        for row in table.to_pylist():
            if row["cerror"] is not None:
                found[row["id"]] = None
                continue
            clauses, atoms = [], iter(row["atoms"])
            for n in row["lens"]:
                ids = [next(atoms) for _ in range(n)]
                clauses.append([atom_keys[i - 1].as_py() for i in ids if i])
            found[row["id"]] = clauses
        return [found[str(k)] for k in range(len(texts))]

    tasks = iter(range(100))
    rng = random.Random(5)
    texts = [expression(rng) for _ in range(200)] + ["i = 1 and j between 2 and 4"] * 3
    other = {"attributes": {"i": {"type": "float"}, "j": {"type": "int"}}}
    with (
        Index.open(tmp_path / "a", schema=SCHEMA) as a,
        Index.open(tmp_path / "b", schema=other) as b,
    ):
        for schema, idx, batch in ((SCHEMA, a, texts), (other, b, texts[-3:]), (SCHEMA, a, texts)):
            for _ in range(2):  # the second task finds the compiler and its memo warm
                got = run(schema, batch)
                assert compiler(schema, None) is compiler(schema, None)  # kept warm
                for k, (text, packed) in enumerate(zip(batch, got, strict=True)):
                    try:
                        clauses = idx.engine.compiler().compile(k, text)
                    except InvalidInput:
                        assert packed is None
                        continue
                    keys = [[codec.encode_value(atom.as_tuple()) for atom in c] for c in clauses]
                    assert packed == keys, text


def test_domain_edges(spark: Any, tmp_path: Path) -> None:
    """Literals at the ends of every domain (issue 13): empty grid intervals past both ends
    of int, float and string domains build, verify and match on Spark too, with the
    invalid ones rejected per record."""
    from tests.support.edges import EDGE_SCHEMA, EVENTS, INVALID_EXPRESSIONS, edge_atoms

    schema = Schema.from_json(EDGE_SCHEMA)
    subs = dict(enumerate(edge_atoms()))
    bad = {f"bad{k}": e for k, e in enumerate(INVALID_EXPRESSIONS)}
    docs = [{"id": i, "expr": e} for i, e in [*subs.items(), *bad.items()]]
    path = write_jsonl(tmp_path / "subs.jsonl", docs)
    summary = load(spark, tmp_path / "spark", [path], EDGE_SCHEMA, split_bytes=16384)
    assert (summary["loaded"], summary["rejected"]) == (len(subs), len(bad))
    assert verify(tmp_path / "spark") == {"shards": 0, "subscriptions": len(subs)}
    with Index.open(tmp_path / "spark", readonly=True) as store:
        for ev in EVENTS:
            assert ids_of(store.match(ev)) == ids_of(list(brute(subs, schema, ev))), ev
