"""The command line at its edges (issue 13): refused writes create nothing, all-or-nothing
deletes, usage errors, the public import, and what users read (help, explain, pipes).

Runs ``tools.cli.main`` in-process on real stores, and real subprocesses where the
process itself is the subject (a closed pipe, argparse's exit).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from betree.index import Index
from storage import ShardedStore, StoreError, open_store
from tests.support.cli import run, write_lines
from tests.support.schemas import BOOKS as SCHEMA
from tests.support.workload import build_sharded


def _entries(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    subs = {i: f"i = {i}" for i in range(10)}
    return Path(build_sharded(tmp_path / "sh", subs))


def test_writes_to_a_sharded_store_not_split_by_the_hash_are_refused_and_create_nothing(
    sharded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _entries(sharded)
    new = write_lines(tmp_path / "new.jsonl", [{"id": 100, "expr": "i = 100"}])
    code, out, err = run(capsys, "subscribe", str(sharded), new)
    assert code == 1 and out == "" and "is a sharded store" in err and "takes no writes" in err
    assert "hash" in err  # build_sharded splits by parity: an id's shard cannot be known
    code, out, err = run(capsys, "unsubscribe", str(sharded), "1")
    assert code == 1 and "is a sharded store" in err and "no subscription" not in err
    assert _entries(sharded) == before  # no data.mdb or lock.mdb beside the manifest
    with pytest.raises(ShardedStore, match="open_index"):
        Index.open(sharded)
    with pytest.raises(ShardedStore):
        Index.open(sharded, schema={"attributes": {"i": {"type": "int"}}})
    with pytest.raises(ShardedStore):
        open_store(sharded)
    assert _entries(sharded) == before
    events = write_lines(tmp_path / "e.jsonl", [{"i": 1}, {"i": 100}])
    code, out, _ = run(capsys, "match", str(sharded), events)  # still read, still whole
    assert code == 0 and [json.loads(x) for x in out.splitlines()] == [
        {"matches": [1]},
        {"matches": []},
    ]


def test_commands_on_a_directory_without_a_store_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    absent = tmp_path / "absent"
    for where in (empty, absent):
        code, _, err = run(capsys, "unsubscribe", str(where), "1")
        assert code == 1 and f"no store at {where}" in err
        code, _, err = run(capsys, "adjust", str(where), "--off")
        assert code == 1 and "no store at" in err
        with pytest.raises(StoreError, match="no store at"):
            Index.open(where)
        bad = write_lines(tmp_path / "bad.jsonl", [{"id": 1, "expr": "i = 1 and"}])
        code, out, err = run(capsys, "subscribe", str(where), bad)
        assert code == 3 and out == "" and "subscription 1" in err
        ok_then_bad = write_lines(
            tmp_path / "mixed.jsonl",
            [{"id": 1, "expr": "i = 1"}, {"id": 2, "expr": 'i = "text"'}],
        )
        code, _, err = run(
            capsys, "subscribe", str(where), ok_then_bad, "--schema", _schema(tmp_path)
        )
        assert code == 3 and "subscription 2" in err
    assert _entries(empty) == [] and not absent.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left
    good = write_lines(tmp_path / "good.jsonl", [{"id": 1, "expr": "i = 1"}])
    for where in (empty, absent):  # a successful first write does create the store
        code, out, _ = run(capsys, "subscribe", str(where), good)
        assert code == 0 and out == "subscribed 1 (1 new, 0 replaced)\n"
        code, out, _ = run(capsys, "match", str(where), write_lines(tmp_path / "e", [{"i": 1}]))
        assert code == 0 and json.loads(out) == {"matches": [1]}
        assert run(capsys, "verify", str(where))[0] == 0


def _schema(tmp_path: Path) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"attributes": {"i": {"type": "int"}}}))
    return str(path)


def test_unsubscribe_is_all_or_nothing_in_the_api(tmp_path: Path) -> None:
    from storage import InvalidInput

    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe_many([("s1", "price = 1"), ("s2", "price = 2")])
        with pytest.raises(InvalidInput, match="no subscription 'nosuch'"):
            idx.unsubscribe_many(["s1", "nosuch"], strict=True)
        assert len(idx) == 2 and idx.match({"price": 1}) == ["s1"]
        assert idx.unsubscribe_many(["s1", "nosuch"]) == [True, False]  # not strict: per id
        assert len(idx) == 1
        idx.check()


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "S", "--port", "99999"],
        ["serve", "S", "--port", "-1"],
        ["gen", "OUT", "--dims", "0"],
        ["gen", "OUT", "--card", "1"],
        ["gen", "OUT", "--eq-share", "1.5"],
        ["gen", "OUT", "--target-rate", "0"],
        ["load", "S", "in.jsonl", "--max-rejects", "-1"],
    ],
)
def test_bad_options_are_usage_errors(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / a) if a in ("S", "OUT", "in.jsonl") else a for a in argv]
    with pytest.raises(SystemExit) as exc:
        run(capsys, *argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument" in err and "Traceback" not in err
    assert _entries(tmp_path) == []


def test_public_import_of_the_index() -> None:
    code = "from betree import Index; print(Index.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "betree.index\n"


def test_help_speaks_to_users(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "--help")
    out = capsys.readouterr().out
    assert "publish/subscribe" in out and "exit codes" in out
    assert "main(argv)" not in out and "lmdb.tool" not in out


def test_explain_shows_json_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s"
    schema = {"attributes": {"price": {"type": "int"}, "sizes": {"type": "int_list"}}}
    with Index.open(store, schema=schema) as idx:
        idx.subscribe("s1", "price = 1 and 3 in sizes")
    code, out, _ = run(capsys, "explain", str(store), '"s1"', '{"sizes": [3]}')
    assert code == 0
    assert 'subscription "s1" does not match' in out
    assert "(saw null)" in out and "(saw [3])" in out
    assert "None" not in out and "(3,)" not in out


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Index.open(store, schema=SCHEMA) as idx:
        idx.subscribe_many([(i, f"price = {i}") for i in range(50)])
    events = tmp_path / "e.jsonl"
    events.write_text("".join(json.dumps({"price": i % 50}) + "\n" for i in range(20_000)))
    for argv in (["inspect", str(store)], ["match", str(store), str(events)]):
        script = [sys.executable, "-m", "tools.cli", *argv]
        proc = subprocess.Popen(script, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()  # as `| head -1` does
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
        assert first and err == b""


def test_load_progress_rate_and_time_left() -> None:
    """The progress line: no rate over the first instant (it printed 4.7e12/s), and a time
    left that counts down between task ends instead of rising."""
    from loaders.spark.jobs import Progress

    stage = SimpleNamespace(numCompletedTasks=0, numTasks=4)
    finish: dict[tuple[str, int], float] = {}
    line = Progress._line("compile", stage, 0.001, 0.001, 4_755_000, finish)
    assert "/s" not in line and "records" not in line
    stage.numCompletedTasks = 1
    first = Progress._line("compile", stage, 100.0, 100.0, 250_000, finish)
    assert "250,000 records, 2,500/s" in first and "~300 s left" in first
    later = Progress._line("compile", stage, 160.0, 160.0, 250_000, finish)
    assert "~240 s left" in later  # counts down while no task ends


def test_ids_and_events_on_the_command_line_that_cannot_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from storage import InvalidInput

    store = tmp_path / "s"
    with Index.open(store, schema=SCHEMA) as idx:
        idx.subscribe("[[", "price = 1")
        idx.subscribe_many([("007", "price = 1"), ("-00", "price = 1")])
        with pytest.raises(InvalidInput, match=r"lone surrogate \\ud800 at character 2"):
            idx.subscribe("a\ud800", "price = 1")
    deep = "[" * 5_000
    code, _, err = run(capsys, "unsubscribe", str(store), deep)  # the text itself is the id
    assert code == 3 and "no subscription" in err and "Traceback" not in err
    code, _, err = run(capsys, "unsubscribe", str(store), '"\\ud800"')
    assert code == 3 and "lone surrogate" in err
    assert run(capsys, "unsubscribe", str(store), "[[")[0] == 0  # not JSON: the text
    # digits that are no JSON integer (leading zeros): the text, not "out of range"
    assert run(capsys, "unsubscribe", str(store), "007", "-00")[0] == 0
    code, _, err = run(capsys, "unsubscribe", str(store), "9" * 5_000)  # past Python's limit
    assert code == 3 and "outside the signed 64-bit range" in err
    code, _, err = run(capsys, "explain", str(store), "1", deep)
    assert code == 3 and "nested too deeply" in err
    code, _, err = run(capsys, "explain", str(store), "1", "{")
    assert code == 3 and "the event: malformed JSON" in err
