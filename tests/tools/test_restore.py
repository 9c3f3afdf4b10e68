"""A store is restored faithfully from its export; a load's exit code says what it
published (issue 28, items 3, 7 and 9; SPEC section 11).

* ``bexdb schema STORE`` prints the schema document; ``export`` writes it as its first
  line (``{"schema": DOC}``, :mod:`loaders.header`), and ``load`` of the export, without
  ``--schema``, builds a store with the same schema and the same answers (``ip`` and
  ``fold_case`` were lost before: every ``ip`` subscription rejected);
* ``load --replace`` does not replace a store with one that rejected records unless
  ``--allow-rejects`` or ``--max-rejects`` is given (it replaced it, exit 3);
* ``load`` exits 3 when it published with rejects, 1 when it published nothing;
* ``load --engine python --shards 3`` builds a sharded store (it was refused).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from tests.support.cli import run

SCHEMA = {
    "attributes": {
        "src": {"type": "ip"},
        "city": {"type": "string", "fold_case": True},
        "n": {"type": "int"},
    }
}
CITIES = ["Berlin", "BERLIN", "paris", "Oslo"]


def subscriptions(rng: random.Random, count: int) -> list[dict[str, object]]:
    forms = [
        lambda: f'src in cidr("10.{rng.randrange(4)}.0.0/16")',
        lambda: f'src = "10.0.0.{rng.randrange(4)}"',
        lambda: f'city = "{rng.choice(CITIES)}"',
        lambda: f"n > {rng.randrange(10)}",
        lambda: f'city = "{rng.choice(CITIES)}" and not src in cidr("10.1.0.0/16")',
    ]
    return [{"id": i, "expr": rng.choice(forms)()} for i in range(count)]


def events(rng: random.Random, count: int) -> list[dict[str, object]]:
    out = []
    for _ in range(count):
        event: dict[str, object] = {"n": rng.randrange(12)}
        if rng.random() < 0.8:
            event["src"] = f"10.{rng.randrange(4)}.0.{rng.randrange(4)}"
        if rng.random() < 0.8:
            event["city"] = rng.choice(CITIES).swapcase() if rng.random() < 0.5 else "berlin"
        out.append(event)
    return out


@pytest.fixture
def built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list, list]:
    rng = random.Random(28)
    subs = subscriptions(rng, 200)
    (tmp_path / "subs.jsonl").write_text("".join(json.dumps(s) + "\n" for s in subs))
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    store = tmp_path / "store"
    argv = ["load", str(store), str(tmp_path / "subs.jsonl"), "--engine", "python"]
    assert run(capsys, *argv, "--schema", str(tmp_path / "schema.json"))[0] == 0
    return store, subs, events(rng, 60)


def answers(store: Path, evs: list[dict[str, object]]) -> list[list[object]]:
    with open_index(store) as idx:
        return [sorted(idx.match(e), key=str) for e in evs]


def brute(subs: list[dict[str, object]], evs: list[dict[str, object]]) -> list[list[object]]:
    schema = Schema.from_json(SCHEMA)
    trees = [(s["id"], compile_expr(str(s["expr"]), schema)) for s in subs]
    checked = [schema.validate_event(e) for e in evs]
    return [sorted((i for i, t in trees if evaluate(t, e)), key=str) for e in checked]


def test_schema_export_and_load_restore_the_same_store(
    built: tuple[Path, list, list], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, subs, evs = built
    code, out, _ = run(capsys, "schema", str(store))
    assert code == 0 and Schema.from_json(json.loads(out)) == Schema.from_json(SCHEMA)
    assert json.loads(out)["attributes"]["city"]["fold_case"] is True
    backup = tmp_path / "backup.jsonl"
    assert run(capsys, "export", str(store), str(backup))[0] == 0
    first = json.loads(backup.read_text().splitlines()[0])
    assert first == {"schema": json.loads(out)}
    want = answers(store, evs)
    assert want == brute(subs, evs) and any(want)
    for extra in ([], ["--shards", "3"]):
        copy = tmp_path / f"copy{len(extra)}"
        code, out, err = run(capsys, "load", str(copy), str(backup), "--engine", "python", *extra)
        assert code == 0 and json.loads(out)["loaded"] == len(subs), err
        assert answers(copy, evs) == want
        with open_index(copy) as idx:
            assert idx.schema == Schema.from_json(SCHEMA)
        assert run(capsys, "verify", str(copy))[0] == 0
        again = tmp_path / f"again{len(extra)}.jsonl"
        assert run(capsys, "export", str(copy), str(again))[0] == 0
        lines = again.read_text().splitlines()
        assert lines[0] == backup.read_text().splitlines()[0]
        assert sorted(lines[1:]) == sorted(backup.read_text().splitlines()[1:])
    # subscribe creating a store from the export takes its schema too
    code, _, err = run(capsys, "subscribe", str(tmp_path / "online"), str(backup))
    assert code == 0 and answers(tmp_path / "online", evs) == want, err
    # --replace from the same export: nothing rejected, the store is replaced (exit 0)
    code, _, err = run(capsys, "load", str(store), str(backup), "--engine", "python", "--replace")
    assert code == 0, err
    assert answers(store, evs) == want


def test_replace_keeps_the_store_when_records_are_rejected(
    built: tuple[Path, list, list], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, subs, evs = built
    want = answers(store, evs)
    bare = tmp_path / "bare.jsonl"  # records without the header: the schema is inferred
    bare.write_text("".join(json.dumps(s) + "\n" for s in subs))
    argv = ["load", str(store), str(bare), "--engine", "python", "--replace"]
    code, out, err = run(capsys, *argv)
    assert code == 1 and "--allow-rejects" in err and "records rejected" in err, (out, err)
    assert answers(store, evs) == want  # untouched
    assert run(capsys, *argv, "--max-rejects", "0")[0] == 1
    assert answers(store, evs) == want
    code, out, _ = run(capsys, *argv, "--allow-rejects")
    assert code == 3 and json.loads(out)["rejected"] > 0  # published with rejects: 3
    assert answers(store, evs) != want


def test_exit_codes_say_whether_anything_was_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = tmp_path / "subs.jsonl"
    subs.write_text('{"id": 1, "expr": "n > 1"}\n{"id": 2, "expr": "n >"}\n')
    store = tmp_path / "s"
    base = ["load", str(store), str(subs), "--engine", "python"]
    code, _, err = run(capsys, *base, "--max-rejects", "0")
    assert code == 1 and "nothing published" in err and not store.exists()
    code, out, _ = run(capsys, *base, "--max-rejects", "1")
    assert code == 3 and json.loads(out)["loaded"] == 1 and store.exists()
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    code, _, err = run(capsys, "load", str(tmp_path / "t"), str(empty), "--engine", "python")
    assert code in (0, 1)  # an empty load publishes an empty store or nothing, never 3


def test_spark_load_of_an_export_uses_its_schema(
    spark: Any, built: tuple[Path, list, list], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Spark engine reads the same header (the CLI passes it as the schema; the
    executors skip the header line as a record) and says where its records are."""
    store, subs, evs = built
    backup = tmp_path / "backup.jsonl"
    assert run(capsys, "export", str(store), str(backup))[0] == 0
    with backup.open("a") as fh:
        fh.write('{"id": "bad", "expr": "src < 3"}\n')  # a reject, at its line
    copy = tmp_path / "spark-copy"
    rejects = tmp_path / "rejects.jsonl"
    code, out, err = run(capsys, "load", str(copy), str(backup), "--rejects", str(rejects))
    assert code == 3 and json.loads(out)["loaded"] == len(subs), err
    (row,) = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert row["id"] == "bad" and row["line"] == len(subs) + 2  # header, records, this
    assert answers(copy, evs) == answers(store, evs)
    with open_index(copy) as idx:
        assert idx.schema == Schema.from_json(SCHEMA)
