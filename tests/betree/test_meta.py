"""Subscription metadata (SPEC section 11, "Metadata"; docs/meta.md) through every path a
record takes: ``Index.subscribe``, ``bexdb subscribe``, ``PUT`` and ``POST
/subscriptions``, both load engines (a small real local Spark load included), ``export ->
load``, sharded writes (the journal), ``compact --rebuild``; returned by ``GET
/subscriptions/{id}``, ``export``, ``bexdb match --with-meta`` and ``POST
/match?meta=true``, those two compared with the brute-force evaluator joined with the
model's metadata.

Values that must come back exactly: Unicode of every plane, integers past 64 bits, -0.0
and the ends of the doubles, nesting to the bound; the size bound at 64 KiB exactly and
one byte over; a replacement without metadata drops it, a delete removes it; ``check()``
after each step and after reopening; damage (a record whose subscription is gone, a value
that is not an object) reported by ``bexdb verify``.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from betree.disk import catalog
from betree.disk.metadata import MAX_BYTES, MAX_NESTING
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index, shard_for
from betree.stores.shardwrite import write_journal
from loaders import python_load
from loaders.records import read_jsonl
from loaders.spark import driver
from storage.codec import encode_id
from storage.errors import CheckFailed, InvalidInput
from tests.support.brute import brute
from tests.support.cli import run, write_lines
from tests.support.http import request
from tests.support.workload import SCHEMA, build_hashed, event, expression
from tools.serve import spawn

#: Values metadata must keep exactly (compared through ``canon``: 1 is not 1.0, -0.0 not 0).
TRICKY: list[Any] = [
    0,
    -0.0,
    2**63 - 1,
    -(2**63),
    2**64,
    -(10**40),
    1.7976931348623157e308,
    5e-324,
    0.1,
    "",
    "é",
    "中文",  # plane 0
    "😀𝄞",  # plane 1
    "\U00020000",  # plane 2
    "\U000e0041",  # plane 14
    "\U0010ffff",  # plane 16
    '\u2028\x00\x1f"\\',
    True,
    None,
    [],
    {},
]
SCHEMA_OBJ = Schema.from_json(SCHEMA)
LONG = "long-" + "é" * 700  # an id key past LMDB's key size: stored apart (storage.txn)


def lines_of(text: str) -> list[str]:
    """JSON Lines split at "\n" only (metadata may hold U+2028, which ``splitlines`` cuts at)."""
    return text.split("\n")[:-1]


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def random_meta(rng: random.Random) -> dict[str, Any] | None:
    """None (no metadata) a third of the time, else an object of tricky values, nested."""
    if rng.random() < 1 / 3:
        return None
    meta: dict[str, Any] = {
        rng.choice(["k", "ключ", "🔑", ""]) + str(j): rng.choice(TRICKY)
        for j in range(rng.randint(0, 4))
    }
    if rng.random() < 0.3:
        meta["nested"] = {"list": [rng.choice(TRICKY) for _ in range(3)], "x": {"y": [[1]]}}
    return meta


def nested(depth: int) -> dict[str, Any]:
    """An object nested ``depth`` deep (itself 1)."""
    out: dict[str, Any] = {}
    for _ in range(depth - 1):
        out = {"a": out}
    return out


def sized(size: int) -> dict[str, Any]:
    """An object whose compact UTF-8 JSON is exactly ``size`` bytes (two-byte characters)."""
    room = size - len('{"k":""}')
    return {"k": "é" * (room // 2) + "a" * (room % 2)}


def workload(seed: int, n: int) -> dict[Any, tuple[str, dict[str, Any] | None]]:
    rng = random.Random(seed)
    return {(i if i % 3 else f"s{i}"): (expression(rng), random_meta(rng)) for i in range(n)}


def records(model: dict[Any, tuple[str, Any]]) -> list[dict[str, Any]]:
    """The model as subscription records (``meta`` only where there is one)."""
    out = []
    for ident, (expr, meta) in model.items():
        rec: dict[str, Any] = {"id": ident, "expr": expr}
        if meta is not None:
            rec["meta"] = meta
        out.append(rec)
    return out


def stored(path: str | Path) -> dict[Any, tuple[str, str | None]]:
    """Every subscription of a store with its metadata (canonical), checked first."""
    with open_index(path) as store:
        store.check()
        return {i: (e, None if m is None else canon(json.loads(m))) for i, e, m in store.records()}


def expected(model: dict[Any, tuple[str, Any]]) -> dict[Any, tuple[str, str | None]]:
    return {i: (e, None if m is None else canon(m)) for i, (e, m) in model.items()}


def joined(model: dict[Any, tuple[str, Any]], ev: dict[str, Any]) -> dict[str, Any]:
    """The brute-force matches of ``ev`` with the model's metadata, keyed by ``canon(id)``."""
    subs = {i: e for i, (e, _) in model.items()}
    return {canon(i): canon(model[i][1]) for i in brute(subs, SCHEMA_OBJ, ev)}


def as_found(matches: list[dict[str, Any]]) -> dict[str, Any]:
    assert all(set(m) == {"id", "meta"} for m in matches), matches
    found = {canon(m["id"]): canon(m["meta"]) for m in matches}
    assert len(found) == len(matches)  # each id once
    return found


# -- the index ------------------------------------------------------------------------------


def test_index_keeps_replaces_and_drops_metadata(tmp_path: Path) -> None:
    """Seeded steps against a model: subscribe with or without metadata, replace, delete;
    check() after each, the records compared exactly; then reopened."""
    rng = random.Random(11)
    path = tmp_path / "store"
    model: dict[Any, tuple[str, Any]] = {}
    with Index.open(path, schema=SCHEMA) as idx:
        assert list(idx.records()) == []
        for step in range(120):
            ident = rng.choice([*range(15), "a", "é", "😀", 2**63 - 1, -(2**63), LONG])
            if rng.random() < 0.2 and model:
                gone = rng.choice(list(model))
                assert idx.unsubscribe(gone)
                del model[gone]
                with idx.store.read() as txn:  # the record went with it
                    assert txn.get(catalog.META, encode_id(gone)) is None
            else:
                expr, meta = expression(rng), random_meta(rng)
                idx.subscribe(ident, expr, meta)
                model[ident] = (expr, meta)
            if step % 10 == 0:
                idx.check()
            for i in rng.sample(list(model), min(3, len(model))):
                found = idx.record(i)
                assert found is not None and found[0] == model[i][0]
                assert (found[1] is None) == (model[i][1] is None)
                if found[1] is not None:
                    assert canon(json.loads(found[1])) == canon(model[i][1])
        idx.check()
        with idx.store.read() as txn:  # only subscriptions with metadata have a record
            assert txn.count(catalog.META) == sum(m is not None for _, m in model.values())
        assert idx.record("absent") is None
    assert stored(path) == expected(model)
    with Index.open(path) as idx:  # reopened
        idx.check()
        idx.subscribe(1, "i = 1", {"v": 1})
        idx.subscribe(1, "i = 2")  # a replacement without metadata drops it
        assert idx.record(1) == ("i = 2", None)
        idx.subscribe(1, "i = 3", {"v": 2})
        idx.subscribe(1, "i = 3", {"w": [2**70]})  # with other metadata: the new one
        assert idx.record(1) == ("i = 3", '{"w":[1180591620717411303424]}')
        idx.check()


def test_values_come_back_exactly(tmp_path: Path) -> None:
    with Index.open(tmp_path / "store", schema=SCHEMA) as idx:
        for n, value in enumerate(TRICKY):
            idx.subscribe(n, "i = 1", {"v": value, "also": [value, {"in": value}]})
        idx.subscribe("deep", "i = 1", nested(MAX_NESTING))
        idx.check()
        for n, value in enumerate(TRICKY):
            found = idx.record(n)
            assert found is not None and found[1] is not None
            doc = json.loads(found[1])
            assert canon(doc) == canon({"v": value, "also": [value, {"in": value}]})
            assert type(doc["v"]) is type(value)
        deep = idx.record("deep")
        assert deep is not None and canon(json.loads(deep[1] or "")) == canon(nested(MAX_NESTING))


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ([1, 2], "meta must be a JSON object, not an array"),
        ("text", "meta must be a JSON object, not a string"),
        (3, "meta must be a JSON object, not a number"),
        (True, "meta must be a JSON object, not a boolean"),
        ({"x": float("nan")}, "meta holds a value JSON cannot show"),
        ({"x": float("inf")}, "meta holds a value JSON cannot show"),
        ({"x": {1, 2}}, "meta holds a value that is not JSON"),
        ({"x": "\ud800"}, "meta holds a lone surrogate \\ud800"),
        (nested(MAX_NESTING + 1), f"meta is nested deeper than {MAX_NESTING} levels"),
        (sized(MAX_BYTES + 1), "meta is 65,537 bytes of JSON, more than the 65,536 allowed"),
    ],
)
def test_unstorable_metadata_is_refused_naming_the_subscription(
    tmp_path: Path, meta: Any, reason: str
) -> None:
    with Index.open(tmp_path / "store", schema=SCHEMA) as idx:
        idx.subscribe(1, "i = 1", {"kept": True})
        with pytest.raises(InvalidInput) as exc:
            idx.subscribe_many([(2, "i = 2"), ("bad", "i = 3", meta), (1, "i = 4")])
        assert exc.value.message.startswith(f"subscription 'bad': {reason}")
        assert len(idx) == 1 and idx.record(1) == ("i = 1", '{"kept":true}')  # nothing written
        idx.check()


def test_bound_is_64_kib_of_utf8_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exact, over = sized(MAX_BYTES), sized(MAX_BYTES + 1)
    assert len(json.dumps(exact, ensure_ascii=False, separators=(",", ":")).encode()) == MAX_BYTES
    store = str(tmp_path / "store")
    good = write_lines(tmp_path / "good.jsonl", [{"id": 1, "expr": "i = 1", "meta": exact}])
    assert run(capsys, "subscribe", store, good, "--schema", write_schema(tmp_path))[0] == 0
    bad = write_lines(
        tmp_path / "bad.jsonl",
        [{"id": 2, "expr": "i = 2"}, {"id": 3, "expr": "i = 3", "meta": over}],
    )
    code, _, err = run(capsys, "subscribe", store, bad)
    assert code == 3
    assert "line 2: meta is 65,537 bytes of JSON, more than the 65,536 allowed" in err
    assert "nothing was subscribed" in err
    assert stored(store) == {1: ("i = 1", canon(exact))}
    # a load rejects the record alone, naming its line
    rejects = tmp_path / "rejects.jsonl"
    code, _, _ = run(
        capsys, "load", str(tmp_path / "loaded"), bad, "--engine", "python",
        "--schema", write_schema(tmp_path), "--rejects", str(rejects),
    )  # fmt: skip
    assert code == 3
    rows = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert rows == [{"line": 2, "id": 3, "error": rows[0]["error"]}]
    assert rows[0]["error"].startswith("meta is 65,537 bytes")
    assert stored(tmp_path / "loaded") == {2: ("i = 2", None)}


def test_record_lines_with_bad_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each refused with its line's reason; ``null`` is no metadata; a record nested to the
    line's bound keeps it."""
    lines = [
        {"id": 1, "expr": "i = 1", "meta": None},
        {"id": 2, "expr": "i = 1", "meta": "{}"},
        '{"id": 3, "expr": "i = 1", "meta": {"x": "\\ud800"}}',
        '{"id": 4, "expr": "i = 1", "meta": {"x": NaN}}',
        {"id": 5, "expr": "i = 1", "meta": nested(MAX_NESTING)},
        {"id": 6, "expr": "i = 1", "meta": nested(MAX_NESTING + 1)},
        {"id": 7, "expr": "i = 1", "meta": [{}]},
    ]
    path = write_lines(tmp_path / "in.jsonl", lines)
    found = {r.line: r for r in read_jsonl(path)}
    assert found[1].error is None and found[1].meta is None
    assert found[2].error == "meta must be a JSON object, not a string"
    assert found[3].error == "meta holds a lone surrogate \\ud800 (not valid Unicode)"
    assert found[4].error is not None and "JSON cannot show" in found[4].error
    assert found[5].error is None and json.loads(found[5].meta or "") == nested(MAX_NESTING)
    assert found[6].error == "malformed JSON: nested too deeply (more than 128 levels)"
    assert found[7].error == "meta must be a JSON object, not an array"


def test_a_store_without_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A store written as before metadata existed (no ``meta`` record at all) reads as it
    did: export without ``"meta"``, ``--with-meta`` answers null beside each id."""
    path = str(tmp_path / "store")
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many([(1, "i = 1"), ("a", "i < 5"), (LONG, "i > 0")])
        with idx.store.read() as txn:
            assert not catalog.has_metas(txn)
    assert stored(path) == {1: ("i = 1", None), "a": ("i < 5", None), LONG: ("i > 0", None)}
    code, out, _ = run(capsys, "export", path)
    assert code == 0 and all("meta" not in json.loads(line) for line in lines_of(out)[1:])
    events = write_lines(tmp_path / "events.jsonl", [{"i": 1}])
    code, out, _ = run(capsys, "match", path, events, "--with-meta", "--jobs", "1")
    assert code == 0
    assert as_found(json.loads(out)["matches"]) == {canon(i): "null" for i in (1, "a", LONG)}


# -- damage ---------------------------------------------------------------------------------


def write_schema(tmp_path: Path) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return str(path)


def test_verify_reports_damaged_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store"
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many([(1, "i = 1", {"a": 1}), ("s", "i = 2", {"b": 2}), (3, "i = 3")])
        idx.check()
        with idx.store.write() as txn:
            txn.put_obj(catalog.META, encode_id("gone"), '{"left":"behind"}')
            txn.put_obj(catalog.META, encode_id(1), "[1, 2]")
            txn.put_obj(catalog.META, encode_id("s"), 42)
        with pytest.raises(CheckFailed) as exc:
            idx.check()
    found = exc.value.violations
    assert "metadata of 'gone': no such subscription" in " ".join(found)
    assert "metadata of 1: not the JSON text of an object" in found
    assert "metadata of 's': not the JSON text of an object" in found
    assert len(found) == 3
    code, out, err = run(capsys, "verify", str(path))
    assert code == 4
    assert "metadata of 'gone'" in out + err and "metadata of 1" in out + err
    with Index.open(path) as idx, idx.store.write() as txn:  # repaired: the check passes
        txn.delete(catalog.META, encode_id("gone"))
        txn.put_obj(catalog.META, encode_id(1), '{"a":1}')
        txn.put_obj(catalog.META, encode_id("s"), '{"b":2}')
    assert run(capsys, "verify", str(path))[0] == 0


# -- export -> load, both engines, plain and sharded ----------------------------------------


def filled(path: Path, kind: str, model: dict[Any, tuple[str, Any]]) -> str:
    """A store at ``path``, plain or (``kind`` "sharded") three hashed shards written through
    the sharded writer, holding ``model``'s subscriptions with their metadata; its path."""
    items = [(i, e, m) for i, (e, m) in model.items()]
    if kind == "plain":
        with Index.open(str(path), schema=SCHEMA) as idx:
            idx.subscribe_many(items)
        return str(path)
    sharded = build_hashed(path, {}, 3)
    with open_index(sharded, readonly=False) as store:
        store.subscribe_many(items)
    return sharded


@pytest.fixture(params=["plain", "sharded"])
def source(request: Any, tmp_path: Path) -> Iterator[tuple[str, dict[Any, tuple[str, Any]]]]:
    """A store of 90 subscriptions, two thirds with metadata; its path and model.  Sharded:
    written through the sharded writer (its journal: a batch spans shards)."""
    model = workload(28, 90)
    path = filled(tmp_path / "source", request.param, model)
    yield path, model


def test_export_load_round_trip_python_engine(
    source: tuple[str, dict[Any, tuple[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, model = source
    assert stored(path) == expected(model)
    out = tmp_path / "export.jsonl"
    assert run(capsys, "export", path, str(out))[0] == 0
    lines = lines_of(out.read_text(encoding="utf-8"))
    assert len(lines) == len(model) + 1  # the schema header, then a record a subscription
    for line in lines[1:]:
        doc = json.loads(line)
        has = model[doc["id"]][1] is not None
        assert set(doc) == ({"id", "expr", "meta"} if has else {"id", "expr"})
    for shards in ([], ["--shards", "2"]):
        target = str(tmp_path / f"loaded{len(shards)}")
        assert run(capsys, "load", target, str(out), "--engine", "python", *shards)[0] == 0
        assert stored(target) == expected(model)
        again = tmp_path / "again.jsonl"
        assert run(capsys, "export", target, str(again))[0] == 0
        assert sorted(lines_of(again.read_text(encoding="utf-8"))) == sorted(lines)
        assert run(capsys, "verify", target)[0] == 0


def test_spark_load_carries_metadata(spark: Any, tmp_path: Path) -> None:
    """A small real local Spark load of an export (plain and 2 shards) equals the model;
    Parquet's and CSV's ``meta`` column (JSON text) too, a bad one rejected naming it; the
    rejects of a JSON Lines input equal the single-process engine's."""
    model = workload(29, 60)
    lines: list[Any] = records(model)
    lines.insert(10, {"id": "big", "expr": "i = 1", "meta": sized(MAX_BYTES + 1)})
    lines.insert(20, {"id": "arr", "expr": "i = 1", "meta": []})
    lines.append({"id": "exact", "expr": "i = 1", "meta": sized(MAX_BYTES)})
    path = write_lines(tmp_path / "subs.jsonl", lines)
    want = {**expected(model), "exact": ("i = 1", canon(sized(MAX_BYTES)))}
    theirs = io.StringIO()
    python_load.load(tmp_path / "python", list(read_jsonl(path)), SCHEMA, rejects=theirs)
    for shards in (None, 2):
        ours = io.StringIO()
        target = tmp_path / f"spark{shards}"
        summary = driver.load(
            target, [path], SCHEMA, spark=spark, shards=shards, rejects=ours, split_bytes=4096
        )
        assert summary["rejected"] == 2
        assert ours.getvalue().splitlines() == theirs.getvalue().splitlines()
        assert stored(target) == want
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 2, 3, 4], pa.int64()),
                "expr": ["i = 1", "i = 2", "i = 3", "i = 4"],
                "meta": ['{"n": 18446744073709551616, "s": "😀"}', None, "{not json", "[]"],
            }
        ),
        tmp_path / "subs.parquet",
    )
    (tmp_path / "subs.csv").write_text(
        'id,expr,meta\n5,i = 5,"{""a"": [1, 2.5, -0.0]}"\n6,i = 6,\n', encoding="utf-8"
    )
    rejects = io.StringIO()
    inputs = [str(tmp_path / "subs.parquet"), str(tmp_path / "subs.csv")]
    summary = driver.load(tmp_path / "columns", inputs, SCHEMA, spark=spark, rejects=rejects)
    rows = [json.loads(line) for line in rejects.getvalue().splitlines()]
    assert [(r["line"], r["id"]) for r in rows] == [(3, 3), (4, 4)]
    assert rows[0]["error"].startswith('column "meta": malformed JSON')
    assert rows[1]["error"] == "meta must be a JSON object, not an array"
    assert summary["loaded"] == 4
    assert stored(tmp_path / "columns") == {
        1: ("i = 1", canon({"n": 2**64, "s": "😀"})),
        2: ("i = 2", None),
        5: ("i = 5", canon({"a": [1, 2.5, -0.0]})),
        6: ("i = 6", None),
    }


# -- sharded writes and compaction ------------------------------------------------------------


def test_sharded_writes_and_journals(tmp_path: Path) -> None:
    """Batches across shards carry metadata; a replacement without it drops it, a delete
    removes it; a killed writer's journal is redone with its metadata, and a journal of
    the format from before (puts of three items) still reads."""
    path = build_hashed(tmp_path / "sharded", {}, 3)
    model = workload(30, 40)
    with open_index(path, readonly=False) as store:
        store.subscribe_many([(i, e, m) for i, (e, m) in model.items()])
        store.check()
        some = [i for i, (_, m) in model.items() if m is not None][:5]
        store.subscribe_many([(i, "i = 7") for i in some[:3]])
        store.unsubscribe_many(some[3:])
        for i in some[:3]:
            model[i] = ("i = 7", None)
            assert store.record(i) == ("i = 7", None)
        for i in some[3:]:
            del model[i]
            assert store.record(i) is None
        store.check()
        route = partial(shard_for, store)
    assert stored(path) == expected(model)
    # a killed writer's batch: the journal alone, nothing applied; the next open redoes it
    ops = {
        "new": ["put", "new", "i = 9", '{"from":"journal","n":36893488147419103232}'],
        "old": ["put", "old", "i = 10"],  # as journals before metadata wrote a put
    }
    parts: dict[int, list[Any]] = {}
    for ident, op in ops.items():
        shard = route(ident)
        assert shard is not None
        parts.setdefault(shard, []).append(op)
    write_journal(Path(path), "batch-28", parts)
    model["new"] = ("i = 9", {"from": "journal", "n": 2**65})
    model["old"] = ("i = 10", None)
    assert stored(path) == expected(model)


@pytest.mark.parametrize("kind", ["plain", "sharded"])
def test_compact_rebuild_keeps_metadata(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = workload(31, 50)
    if kind == "plain":
        path = str(tmp_path / "store")
        with Index.open(path, schema=SCHEMA) as idx:
            for ident, (expr, meta) in model.items():
                idx.subscribe(ident, expr, meta)
    else:
        path = build_hashed(tmp_path / "sharded", {}, 2)
        with open_index(path, readonly=False) as store:
            for ident, (expr, meta) in model.items():
                store.subscribe(ident, expr, meta)
    for options in ([], ["--rebuild"]):
        assert run(capsys, "compact", path, *options)[0] == 0
        assert stored(path) == expected(model)


# -- match --with-meta and POST /match?meta=true against the brute force -----------------------


@pytest.mark.parametrize("kind", ["plain", "sharded"])
def test_match_with_meta_against_brute_force(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = workload(32, 150)
    rng = random.Random(32)
    path = filled(tmp_path / kind, kind, model)
    with open_index(path, readonly=False) as store:  # replacements and deletes, then reopened
        for ident in rng.sample(list(model), 30):
            if rng.random() < 0.5:
                store.unsubscribe(ident)
                del model[ident]
            else:
                model[ident] = (expression(rng), random_meta(rng))
                store.subscribe(ident, *model[ident])
        store.check()
    events = [event(rng) for _ in range(200)]
    lines: list[Any] = [*events[:100], "not json", [1], *events[100:]]
    inputs = write_lines(tmp_path / "events.jsonl", lines)
    code, out, _ = run(capsys, "match", path, inputs, "--with-meta", "--jobs", "1")
    assert code == 3  # the two bad lines
    results = [json.loads(line) for line in lines_of(out)]
    assert len(results) == len(lines)
    assert "error" in results[100] and "error" in results[101]
    good = results[:100] + results[102:]
    hits = 0
    for ev, result in zip(events, good, strict=True):
        assert as_found(result["matches"]) == joined(model, ev)
        hits += len(result["matches"])
    assert hits > 100  # the workload matches
    code, plain, _ = run(capsys, "match", path, inputs, "--jobs", "1")
    for with_meta, line in zip(results, lines_of(plain), strict=True):
        without = json.loads(line)
        if "matches" in without:  # the same ids, in the same order
            assert [m["id"] for m in with_meta["matches"]] == without["matches"]
    assert run(capsys, "match", path, inputs, "--with-meta", "--engine", "spark")[0] == 2


def test_match_with_meta_in_worker_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--jobs 2`` on a bulk input (full batches go to worker processes): the same lines."""
    model = workload(33, 60)
    path = str(tmp_path / "store")
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many([(i, e, m) for i, (e, m) in model.items()])
    rng = random.Random(33)
    events = [event(rng) for _ in range(2100)]
    inputs = write_lines(tmp_path / "events.jsonl", events)
    code, out, _ = run(capsys, "match", path, inputs, "--with-meta", "--jobs", "2")
    assert code == 0
    results = [json.loads(line) for line in lines_of(out)]
    for ev, result in zip(events, results, strict=True):
        assert as_found(result["matches"]) == joined(model, ev)
    assert run(capsys, "match", path, inputs, "--with-meta", "--jobs", "1")[1] == out


@pytest.fixture(params=["plain", "sharded"])
def served(request: Any, tmp_path: Path) -> Iterator[tuple[str, str, dict[Any, Any]]]:
    model = workload(34, 80)
    path = filled(tmp_path / request.param, request.param, model)
    proc, url = spawn(path, "--workers", "1")
    try:
        yield path, url, model
    finally:
        proc.terminate()
        proc.wait(60)
    assert stored(path) == expected(model)  # the model kept up with every write


def test_service_metadata(served: tuple[str, str, dict[Any, Any]]) -> None:
    _, url, model = served
    rng = random.Random(35)
    for ident, (expr, meta) in list(model.items())[:10]:  # GET
        status, doc = request(url, "GET", f"/subscriptions/{json.dumps(ident)}")
        assert status == 200
        shown = {"id": ident, "expr": expr} | ({} if meta is None else {"meta": meta})
        assert canon(doc) == canon(shown)
    meta = {"owner": "ann", "n": 2**80, "u": "\U0010ffff😀", "f": -0.0, "deep": nested(20)}
    assert request(url, "PUT", "/subscriptions/p1", {"expr": "i = 1", "meta": meta})[0] == 201
    model["p1"] = ("i = 1", meta)
    status, doc = request(url, "GET", "/subscriptions/p1")
    assert status == 200 and canon(doc["meta"]) == canon(meta)
    assert request(url, "PUT", "/subscriptions/p1", {"expr": "i = 2"})[0] == 200
    model["p1"] = ("i = 2", None)
    assert request(url, "GET", "/subscriptions/p1")[1] == {"id": "p1", "expr": "i = 2"}
    status, doc = request(url, "PUT", "/subscriptions/p2", {"expr": "i = 1", "meta": [1]})
    assert status == 400
    assert doc["error"] == "subscription 'p2': meta must be a JSON object, not an array"
    status, doc = request(
        url, "PUT", "/subscriptions/p2", {"expr": "i = 1", "meta": sized(MAX_BYTES + 1)}
    )
    assert status == 400 and "65,537 bytes" in doc["error"]
    assert request(url, "GET", "/subscriptions/p2")[0] == 404
    # POST /subscriptions: JSON Lines, one bad record answered in its place
    bulk = [
        {"id": "b1", "expr": "i = 3", "meta": {"k": [2**64, "é"]}},
        {"id": "b2", "expr": "i = 3", "meta": "no"},
        {"id": "b3", "expr": "i = 4"},
        {"id": "b4", "expr": "i = 5", "meta": sized(MAX_BYTES)},
    ]
    body = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in bulk)
    status, doc = request(url, "POST", "/validate", body)  # writes nothing
    assert status == 200 and doc["invalid"] == 1
    assert doc["results"][1]["error"] == "meta must be a JSON object, not a string"
    status, doc = request(url, "POST", "/subscriptions?atomic=true", body)
    assert status == 400 and doc["written"] == 0
    status, doc = request(url, "POST", "/subscriptions", body)
    assert status == 200 and doc["written"] == 3 and doc["rejected"] == 1
    assert doc["results"][1]["error"] == "meta must be a JSON object, not a string"
    for r in bulk[:1] + bulk[2:]:
        model[r["id"]] = (r["expr"], r.get("meta"))
    victim = next(i for i, (_, m) in model.items() if m is not None)
    assert request(url, "DELETE", f"/subscriptions/{json.dumps(victim)}")[0] == 204
    del model[victim]
    # POST /match?meta=true, one event and batches, against the brute force
    events = [event(rng) for _ in range(60)]
    for ev in events[:20]:
        status, doc = request(url, "POST", "/match?meta=true", ev)
        assert status == 200 and as_found(doc["matches"]) == joined(model, ev)
        status, plain = request(url, "POST", "/match?meta=false", ev)
        assert status == 200 and sorted(map(canon, plain["matches"])) == sorted(
            canon(m["id"]) for m in doc["matches"]
        )
    status, doc = request(url, "POST", "/match?meta=true", {"events": [*events, [1], {"i": "x"}]})
    assert status == 200
    results = doc["results"]
    assert "error" in results[-1] and "error" in results[-2]
    for ev, result in zip(events, results[:-2], strict=True):
        assert as_found(result["matches"]) == joined(model, ev)
    assert request(url, "POST", "/match?meta=true", {"i": "x"})[0] == 400
    assert request(url, "POST", "/match?meta=yes", events[0])[0] == 400
    assert request(url, "POST", "/match?other=1", events[0])[0] == 400
