"""Crashes and concurrency with real processes: kill -9 writers, readers beside a writer.

* A writer killed in the middle of a ``subscribe_many`` batch leaves exactly the batches it
  committed: the store opens, ``bexdb verify`` passes, matches equal the brute-force answer.
* ``bexdb compact`` (plain and ``--rebuild``) killed at any moment leaves the store whole,
  the old one or the new one, with the same subscriptions.
* Readers matching while a writer commits see one committed state per snapshot: every
  answer equals the brute-force answer for some committed state, never a mix.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from itertools import chain
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.schema import Schema
from tests.test_index_differential import brute
from tests.workload import SCHEMA, event, expression
from tools.cli import main

BATCH = 300


def batches(seed: int, n: int) -> list[list[tuple[str, str]]]:
    """The writer's batches, reproducible here and in the child process."""
    rng = random.Random(seed)
    return [[(f"b{k}-{j}", expression(rng)) for j in range(BATCH)] for k in range(n)]


WRITER = """
import sys
from betree.index import Index
from tests.test_reliability import batches
from tests.workload import SCHEMA
store, seed, n, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with Index.open(store, schema=SCHEMA) as idx:
    for k, batch in enumerate(batches(seed, n)[first:], first):
        idx.subscribe_many(batch)
        print(k, flush=True)
"""


def start(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def assert_store_holds(store: Path, subs: dict[Any, str], seed: int) -> None:
    """``verify`` passes and matches equal the brute force over ``subs``."""
    assert main(["verify", str(store)]) == 0
    schema = Schema.from_json(SCHEMA)
    rng = random.Random(seed)
    with Index.open(store, readonly=True) as idx:
        assert dict(idx.subscriptions()) == subs
        for _ in range(30):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, schema, ev)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_writer_killed_mid_batch_keeps_committed_batches(tmp_path: Path, seed: int) -> None:
    store = tmp_path / "store"
    n = 12
    stop_after = random.Random(seed).randint(1, 6)  # batches seen committed before the kill
    proc = start("-c", WRITER, str(store), str(seed), str(n), "0")
    assert proc.stdout is not None
    done = -1
    for line in proc.stdout:
        done = int(line)
        if done + 1 >= stop_after:
            break
    time.sleep(random.Random(seed).random() * 0.2)  # somewhere inside a later batch
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    with Index.open(store, readonly=True) as idx:
        present = {ident for ident, _ in idx.subscriptions()}
    committed = len(present) // BATCH
    assert committed >= done + 1 and len(present) == committed * BATCH, "a torn batch"
    assert committed < n, "the kill came too late to test anything"
    every = batches(seed, n)
    assert_store_holds(store, dict(chain.from_iterable(every[:committed])), seed)


@pytest.mark.parametrize("rebuild", [False, True])
def test_compact_killed_at_any_moment_leaves_the_store_whole(
    tmp_path: Path, rebuild: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    rng = random.Random(5)
    subs = {f"s{i}": expression(rng) for i in range(3000)}
    with Index.open(store, schema=SCHEMA) as idx:
        for i in range(0, len(subs), 500):
            idx.subscribe_many(list(subs.items())[i : i + 500])
    argv = ["-m", "tools.cli", "compact", str(store), *(["--rebuild"] if rebuild else [])]
    began = time.perf_counter()
    full = start(*argv)
    assert full.wait(300) == 0, full.stderr.read() if full.stderr else ""
    took = time.perf_counter() - began
    for k in range(6):  # kill at spread-out moments of a compaction's run
        proc = start(*argv)
        time.sleep(took * (k + 0.5) / 6)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_store_holds(store, subs, k)
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "store"]
    assert all(name.startswith(".store.") for name in leftovers), leftovers
    capsys.readouterr()


READER = """
import json, random, sys
from betree.index import Index
from tests.workload import event
store, seed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
events = [event(rng) for _ in range(20)]
with Index.open(store, readonly=True) as idx:
    for _ in range(rounds):
        with idx.store.read() as txn:
            answers = [sorted(map(str, idx.match_validated(txn, idx.schema.validate_event(e))))
                       for e in events]
        print(json.dumps(answers), flush=True)
"""


def test_readers_beside_a_writer_see_whole_commits(tmp_path: Path) -> None:
    store = tmp_path / "store"
    seed, n = 9, 8
    every = batches(seed, n)
    with Index.open(store, schema=SCHEMA) as idx:
        idx.subscribe_many(every[0])
    writer = start("-c", WRITER, str(store), str(seed), str(n), "1")
    readers = [start("-c", READER, str(store), str(s), "300") for s in (21, 22)]
    schema = Schema.from_json(SCHEMA)
    states = [dict(chain.from_iterable(every[: k + 1])) for k in range(n)]
    assert writer.wait(300) == 0
    seen = set()
    for seed_r, proc in zip((21, 22), readers, strict=True):
        rng = random.Random(seed_r)
        events = [event(rng) for _ in range(20)]
        expected = [
            [sorted(map(str, brute(state, schema, ev))) for ev in events] for state in states
        ]
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        for line in out.splitlines():
            answers = json.loads(line)
            assert answers in expected, "a snapshot mixing two commits"
            seen.add(expected.index(answers))
    assert len(seen) >= 2, f"the readers saw only states {seen}: no commit happened meanwhile"
