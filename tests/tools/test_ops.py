"""``bexdb explain``, ``inspect`` and ``compact`` on real stores."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from betree.index import Index
from tests.support.workload import SCHEMA, build_sharded, event, expression
from tools.cli import main


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "s")
    rng = random.Random(3)
    with Index.open(path, schema=SCHEMA, settings={"max_cap": 4, "min_size": 2}) as idx:
        for start in range(0, 300, 30):  # many commits: free pages to reclaim
            idx.subscribe_many([(i, expression(rng)) for i in range(start, start + 30)])
        idx.unsubscribe_many(range(0, 300, 3))
    return path


def test_explain(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Index.open(store, schema=None) as idx:
        idx.subscribe("x", "i between 3 and 5 and s = 'ab'")
    assert main(["explain", store, '"x"', '{"i": 4, "s": "b"}']) == 0
    out = capsys.readouterr().out
    assert "does not match" in out and "true   i >= 3 (saw 4)" in out
    assert 'false  s = "ab" (saw "b")' in out
    assert main(["explain", store, '"x"', '{"i": 4, "s": "ab"}', "--json"]) == 0
    why = json.loads(capsys.readouterr().out)
    assert why["matches"] and why["clauses"][0]["reached"]
    assert main(["explain", store, '"nope"', "{}"]) == 3
    assert main(["explain", store, '"x"', "[1]"]) == 3


def test_inspect(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", store, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["subscriptions"] == 200
    assert stats["clauses"] >= 150 and stats["betree"]["c_nodes"] >= 1
    assert stats["store"]["free_pages"] > 0
    bins = [int(label.split()[-1]) for label in stats["betree"]["l_node_sizes"]]
    assert len(bins) >= 2 and bins == sorted(bins)  # the histogram in size order
    assert set(stats["pages"]) <= {
        "betree.cnode",
        "betree.lnode",
        "pbtree.internal",
        "pbtree.leaf",
        "pbtree.list",
    }
    assert main(["inspect", store]) == 0
    assert "subscriptions 200" in capsys.readouterr().out
    assert stats["with_meta"] == 0
    with Index.open(store, schema=None) as idx:  # metadata counted; a replacement drops it
        idx.subscribe_many([("m1", "i = 1", {"k": 1}), ("m2", "i = 2", {"k": 2})])
        idx.subscribe("m2", "i = 3")
    assert main(["inspect", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["with_meta"] == 1
    assert main(["inspect", store]) == 0
    assert "with metadata 1" in capsys.readouterr().out


@pytest.mark.parametrize("rebuild", [False, True])
def test_compact_keeps_answers(
    store: str, rebuild: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(9)
    events = [event(rng) for _ in range(40)]
    with Index.open(store, readonly=True) as idx:
        before = [sorted(map(str, idx.match(e))) for e in events]
        size = idx.store.size_on_disk()
    assert main(["compact", store, *(["--rebuild"] if rebuild else [])]) == 0
    assert "compacted" in capsys.readouterr().out
    with Index.open(store, readonly=True) as idx:
        assert [sorted(map(str, idx.match(e))) for e in events] == before
        assert idx.store.size_on_disk() < size
        idx.check()
        assert len(idx) == 200
    assert not [p for p in Path(store).parent.iterdir() if p.name.startswith(".")]


def test_subscribe_redoes_a_write_overtaken_by_a_compaction(store: str, tmp_path: Path) -> None:
    """``bexdb subscribe`` opened the store, then a compaction replaced it: it reopens."""
    from storage.swap import swap_in

    (tmp_path / "late.jsonl").write_text(json.dumps({"id": "late", "expr": "i = 7"}) + "\n")
    data = os.path.realpath(os.path.join(store, "data.mdb"))
    argv = [sys.executable, "-m", "tools.cli", "subscribe", store, str(tmp_path / "late.jsonl")]
    with Index.open(store) as idx, idx.store.replacing() as view:  # compact's steps, by hand
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        fds = Path(f"/proc/{proc.pid}/fd")
        for _ in range(600):  # until it has the old store open (then it waits on the lock)
            if data in _open_files(fds):
                break
            assert proc.poll() is None
            time.sleep(0.01)
        else:
            raise AssertionError("bexdb subscribe never opened the store")
        idx.store.copy_compact(tmp_path / "new", txn=view)
        swap_in(tmp_path / "new", Path(store))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "subscribed 1 (1 new, 0 replaced)\n"
    with Index.open(store, readonly=True) as idx:  # written into the new store
        assert idx.expression("late") == "i = 7" and len(idx) == 201


def _open_files(fds: Path) -> set[str]:
    """The files a process has open (an fd may close while it is listed: skipped)."""
    found = set()
    for fd in fds.iterdir():
        with contextlib.suppress(FileNotFoundError):
            found.add(os.readlink(fd))
    return found


@pytest.fixture
def sharded(tmp_path: Path) -> tuple[str, dict[int, str]]:
    rng = random.Random(4)
    subs = {i: expression(rng) for i in range(200)}
    return build_sharded(tmp_path / "sharded", subs), subs


def test_ops_on_a_sharded_store(
    sharded: tuple[str, dict[int, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, subs = sharded
    assert main(["explain", root, "7", "{}", "--json"]) == 0
    why = json.loads(capsys.readouterr().out)
    assert why["shard"] == "shard-0001" and why["expression"] == subs[7]
    assert main(["explain", root, "1000", "{}"]) == 3
    assert main(["inspect", root, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["subscriptions"] == 200 and [s["subscriptions"] for s in doc["shards"]] == [100] * 2
    assert main(["inspect", root]) == 0
    assert "== 2 shards: subscriptions 200" in capsys.readouterr().out
    rng = random.Random(6)
    events = [json.dumps(event(rng)) for _ in range(30)]
    (Path(root).parent / "events.jsonl").write_text("\n".join(events) + "\n")
    assert main(["match", root, str(Path(root).parent / "events.jsonl")]) == 0
    before = capsys.readouterr().out
    assert main(["compact", root, "--rebuild"]) == 0
    out = capsys.readouterr().out
    assert "compacted shard shard-0000" in out and "compacted shard shard-0001" in out
    assert main(["verify", root]) == 0
    assert capsys.readouterr().out == "ok (2 shards)\n"
    assert main(["match", root, str(Path(root).parent / "events.jsonl")]) == 0

    def answers(text: str) -> list[set[int]]:
        return [set(json.loads(line)["matches"]) for line in text.splitlines()]

    assert answers(capsys.readouterr().out) == answers(before)
