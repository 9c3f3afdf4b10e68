"""Crashes and concurrency with real processes: kill -9 writers, readers beside a writer.

* A writer killed in the middle of a ``subscribe_many`` batch leaves exactly the batches it
  committed: the store opens, ``bexdb verify`` passes, matches equal the brute-force answer.
* ``bexdb compact`` (plain and ``--rebuild``) killed at any moment leaves the store whole,
  the old one or the new one, with the same subscriptions.
* Readers beside a writer, in lockstep with it, see exactly the state before a commit
  while the commit is held open and exactly the state after it once committed.
* ``bexdb compact`` (plain and ``--rebuild``) beside live writers, a process of the Python
  API and ``bexdb subscribe`` runs: every write acknowledged is in the store afterwards;
  a writer that had the old store open is refused (``StoreReplaced``) and reopens it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from itertools import chain
from pathlib import Path
from typing import Any

import pytest

from betree.disk.catalog import root_record
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from tests.support.brute import brute
from tests.support.workload import SCHEMA, build_hashed, event, expression
from tests.support.writers import BATCH, batches, small_batch
from tools.cli import main

#: One schema object for the whole file: the brute force remembers truths per schema object
#: (tests/support/brute.py), and every check after a kill asks about the same subscriptions.
SCHEMA_ = Schema.from_json(SCHEMA)

WRITER = """
import sys
from betree.index import Index
from tests.support.writers import batches
from tests.support.workload import SCHEMA
store, seed, n, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with Index.open(store, schema=SCHEMA) as idx:
    for k, batch in enumerate(batches(seed, n)[first:], first):
        idx.subscribe_many(batch)
        print(k, flush=True)
"""


def start(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_store_holds(store: Path, subs: dict[Any, str], seed: int, events: int = 30) -> None:
    """``verify`` passes and matches equal the brute force over ``subs``."""
    assert main(["verify", str(store)]) == 0
    schema = SCHEMA_
    rng = random.Random(seed)
    with Index.open(store, readonly=True) as idx:
        assert dict(idx.subscriptions()) == subs
        for _ in range(events):
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


PLACER = """
import sys, time
from betree.disk import pending
from betree.stores.sharded import open_index
from storage.txn import WriteTxn
from tests.support.writers import batches
pending.PLACE_CLAUSES = pending.PLACE_SHARE = 1 << 60  # placed below, by hand
pending.DEFER_FROM, pending.DEFER_STORE = 1, 0
store, seed, n, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
stop = int(sys.argv[5])  # the placement's step at which to wait for the kill (0: none)
steps, placing = 0, False

def counted(name):  # a page changed, made or freed, or a commit: one step of the placement
    real = getattr(WriteTxn, name)
    def step(self, *args):
        global steps
        if placing:
            steps += 1
            if steps == stop:
                print("inside", flush=True)
                time.sleep(3600)  # (killed here)
        return real(self, *args)
    setattr(WriteTxn, name, step)

for name in ("load_mut", "put_new", "free", "commit"):
    counted(name)
with open_index(store, readonly=False) as idx:
    for batch in batches(seed, n)[first:]:
        idx.subscribe_many(batch)
    print("placing", flush=True)
    placing = True
    for shard in idx.indexes:
        shard.engine.place()
    placing = False
    print("placed", steps, flush=True)
"""


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_placement_killed_at_any_moment_leaves_the_store_whole(
    tmp_path: Path, sharded: bool
) -> None:
    """kill -9 of a writer placing its pending areas (betree.disk.pending), at a step of
    the placement drawn at random (a page changed, made or freed, or a shard's commit,
    each counted: no timing): each shard's area is placed whole or not at all,
    ``check()`` holds, answers equal the brute force, and the next writer adds to what was
    left and places it all."""
    store = tmp_path / "store"
    if sharded:
        build_hashed(store, {})
    else:
        Index.open(store, schema=SCHEMA).close()
    seed, rng = 4, random.Random(4)
    every = batches(seed, 16)
    steps, hits, left = 0, 0, 0
    for attempt in range(8):  # 2 batches an attempt; the first one runs to its end
        stop = rng.randint(1, steps) if attempt else 0
        argv = (str(store), str(seed), str(2 * attempt + 2), str(2 * attempt), str(stop))
        proc = start("-c", PLACER, *argv)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "placing\n", proc.stderr.read() if proc.stderr else ""
        line = proc.stdout.readline()
        done = line.startswith("placed")
        if done and not attempt:
            steps = int(line.split()[1])
        elif line == "inside\n":
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert done or line == "inside\n", proc.stderr.read() if proc.stderr else ""
        hits += not done
        subs = dict(chain.from_iterable(every[: 2 * attempt + 2]))
        with open_index(store, readonly=False) as idx:
            idx.check()  # (a torn placement: clauses missing, twice, or homes astray)
            assert dict(idx.subscriptions()) == subs
            for _ in range(15):
                ev = event(rng)
                assert set(idx.match(ev)) == brute(subs, SCHEMA_, ev), f"attempt {attempt}"
            for shard in idx.indexes:
                with shard.store.read() as txn:
                    left += root_record(txn).get("pending_from") is not None and not done
    # (each later placement has at least the first one's steps: every stop falls inside)
    assert steps > 10 and hits == 7 and left >= 1, (steps, hits, left)


#: A writer that stops inside each commit, its pages and records put but the LMDB
#: transaction not yet committed: it prints ``open K`` and waits for a line on stdin, then
#: commits and prints ``K``.
PAUSING_WRITER = """
import sys
from betree.index import Index
from storage.txn import WriteTxn
from tests.support.writers import batches
from tests.support.workload import SCHEMA
store, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
commit = WriteTxn.commit
k = 0

class Paused:  # the LMDB transaction, held open at its commit until the test says
    def __init__(self, txn):
        self.txn = txn
    def __getattr__(self, name):
        return getattr(self.txn, name)
    def commit(self):
        print("open", k, flush=True)
        sys.stdin.readline()
        self.txn.commit()

def paused_commit(self):
    self._txn = Paused(self._txn)
    commit(self)

WriteTxn.commit = paused_commit
with Index.open(store, schema=SCHEMA) as idx:
    for k, batch in enumerate(batches(seed, n)[1:], 1):
        idx.subscribe_many(batch)
        print(k, flush=True)
"""

#: A reader matching its events in one snapshot each time it reads a line: the pages
#: (``walk``), or a packed view caught up across commits and matched by intervals.
READER = """
import json, math, random, sys
from betree.index import Index
from tests.support.workload import event
store, seed, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)
events = [event(rng) for _ in range(20)]
with Index.open(store, readonly=True) as idx:
    if how == "view":
        idx.engine.flat.after = idx.engine.ranging.after = 0
        idx.engine.ranging.margin = math.inf
    for _ in sys.stdin:
        with idx.snapshot() as match:
            answers = [sorted(map(str, match(idx.schema.validate_event(e)))) for e in events]
        many = [sorted(map(str, r)) for r in idx.match_many(events)]
        ranged = bool(idx.engine.ranging.describe()["intervals"])
        print(json.dumps([answers, many, ranged]), flush=True)
"""


def _line(proc: subprocess.Popen[str], say: str | None = None) -> str:
    """``say`` to a child (if given), then its next line of output."""
    assert proc.stdin is not None and proc.stdout is not None
    if say is not None:
        proc.stdin.write(say + "\n")
        proc.stdin.flush()
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    return line.strip()


def test_readers_beside_a_writer_see_whole_commits(tmp_path: Path) -> None:
    """In lockstep: while each commit is held open (its pages written, the LMDB
    transaction not committed) both readers see the state before it, exactly, and once
    it is committed the state after it, exactly: by ``match`` in one snapshot and by
    ``match_many``, one reader walking pages, the other on a view caught up commit by
    commit, matched by intervals; every reader keeps its caches across the commits."""
    store = tmp_path / "store"
    seed, n = 9, 6
    every = batches(seed, n)
    with Index.open(store, schema=SCHEMA) as idx:
        idx.subscribe_many(every[0])
    schema = SCHEMA_
    states = [dict(chain.from_iterable(every[: k + 1])) for k in range(n)]
    readers, events = {}, {}
    for seed_r, how in ((21, "walk"), (22, "view")):
        readers[how] = start("-c", READER, str(store), str(seed_r), how)
        rng = random.Random(seed_r)
        events[how] = [event(rng) for _ in range(20)]

    def expect(state: int) -> None:
        for how, proc in readers.items():
            want = [sorted(map(str, brute(states[state], schema, ev))) for ev in events[how]]
            answers, many, ranged = json.loads(_line(proc, "go"))
            assert ranged == (how == "view")
            assert answers == want, f"{how}: a snapshot other than state {state}"
            assert many == want, f"{how}: a batch other than state {state}"

    writer = start("-c", PAUSING_WRITER, str(store), str(seed), str(n))
    try:
        expect(0)
        for k in range(1, n):
            assert _line(writer) == f"open {k}"
            expect(k - 1)  # the commit held open: not seen
            assert _line(writer, "commit") == str(k)
            expect(k)
        assert writer.wait(60) == 0
    finally:
        for proc in (writer, *readers.values()):
            proc.kill()
            proc.communicate()


LOOP_WRITER = """
import os, sys, time
from betree.index import Index
from storage.errors import StoreReplaced
from tests.support.writers import small_batch
store, stop = sys.argv[1], sys.argv[2]
k = 0
idx = Index.open(store)
try:
    while not os.path.exists(stop):
        try:
            idx.subscribe_many(small_batch(k))
        except StoreReplaced:
            print("replaced", flush=True)
            idx.close()
            idx = Index.open(store)
            continue
        print(k, flush=True)
        k += 1
        time.sleep(0.01)  # a writer, not a CPU hog beside the compactions
finally:
    idx.close()
"""


class Lines:
    """The lines of a child's stdout, collected by a thread as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.strip())

    def commits(self) -> int:
        return sum(line != "replaced" for line in self.lines)

    def wait_for(self, n: int, proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 60
        while self.commits() < n:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the writer stopped committing"
            time.sleep(0.01)


def cli_subscribers(store: Path, tmp: Path, stop: threading.Event, runs: list[Any]) -> None:
    """``bexdb subscribe`` runs one after another until ``stop``: (ids, exit code, stderr)."""
    k = 0
    while not stop.is_set():
        rng = random.Random(1000 + k)
        subs = [(f"c{k}-{j}", expression(rng)) for j in range(10)]
        lines = tmp / f"cli-{k}.jsonl"
        lines.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
        proc = start("-m", "tools.cli", "subscribe", str(store), str(lines))
        _, err = proc.communicate(timeout=120)
        runs.append((dict(subs), proc.returncode, err))
        k += 1
        stop.wait(0.5)  # a core left to the compactions


@pytest.mark.parametrize("rebuild", [False, True])
def test_compact_beside_writers_loses_no_commit(tmp_path: Path, rebuild: bool) -> None:
    store, stop = tmp_path / "store", tmp_path / "stop"
    rng = random.Random(11)
    subs = {f"s{i}": expression(rng) for i in range(200)}
    with Index.open(store, schema=SCHEMA) as idx:
        idx.subscribe_many(subs.items())
    writer = start("-c", LOOP_WRITER, str(store), str(stop))
    lines = Lines(writer)
    runs: list[Any] = []
    stop_cli = threading.Event()
    cli = threading.Thread(target=cli_subscribers, args=(store, tmp_path, stop_cli, runs))
    cli.start()
    compactions = 3
    try:
        for _ in range(compactions):
            lines.wait_for(lines.commits() + 3, writer)  # writes between compactions
            argv = ["-m", "tools.cli", "compact", str(store), *(["--rebuild"] if rebuild else [])]
            proc = start(*argv)
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        lines.wait_for(lines.commits() + 3, writer)  # and after the last, in the new store
    finally:
        stop.touch()
        stop_cli.set()
        cli.join()
        writer.wait(60)
        lines.thread.join()
    assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    committed = [int(line) for line in lines.lines if line != "replaced"]
    assert committed == list(range(len(committed)))
    # the writer always had the store open: each compaction refused it exactly once
    assert lines.lines.count("replaced") == compactions
    for k in committed:
        subs.update(small_batch(k))
    for added, code, err in runs:  # a CLI run either wrote or said why not: never lost
        if code == 0:
            subs.update(added)
        else:
            assert code == 1 and "was replaced (compacted) while open" in err, err
    assert any(code == 0 for _, code, _ in runs)
    assert_store_holds(store, subs, 12, events=5)
