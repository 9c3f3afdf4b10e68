"""Writes to sharded stores (betree.stores.shardwrite): routing by the load's hash, batches all or
nothing across shards, also under kill -9 (real processes, real LMDB), and recovery of a
batch a writer left half-applied."""

from __future__ import annotations

import gc
import json
import random
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from betree.disk import pending
from betree.disk.catalog import root_record
from betree.index import Index
from betree.stores import shardwrite
from betree.stores.live import delete_subscriptions, write_subscriptions
from betree.stores.sharded import (
    ShardedIndex,
    open_index,
    shard_for,
    shard_name,
    shard_of,
    verify,
)
from storage.codec import encode_id
from storage.errors import (
    CheckFailed,
    InvalidInput,
    ShardedStore,
    StoreError,
    StoreReplaced,
)
from tests.support.brute import brute
from tests.support.workload import build_hashed, build_sharded, event, expression

SHARDS = 3
ROOT = Path(__file__).resolve().parents[2]


def check_model(root: Path, model: dict[Any, str], rng: random.Random) -> None:
    """The store holds exactly ``model``, each id in its shard, and matches as brute force."""
    assert verify(root)["subscriptions"] == len(model)
    with open_index(root) as store:
        assert isinstance(store, ShardedIndex)
        assert dict(store.subscriptions()) == model and len(store) == len(model)
        for i, index in enumerate(store.indexes):
            for ident, _ in index.subscriptions():
                assert shard_for(store, ident) == i
        store.check()
        schema = store.schema
        for ev in [event(rng) for _ in range(10)]:
            assert set(store.match(ev)) == brute(model, schema, ev)
    assert not shardwrite.has_journal(root)


def _waiting(index: Index) -> bool:
    with index.store.read() as txn:
        return root_record(txn).get("pending_from") is not None


def test_random_batches_against_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(16)
    model: dict[Any, str] = {(i if i % 2 else f"s{i}"): expression(rng) for i in range(60)}
    root = Path(build_hashed(tmp_path / "sh", model, SHARDS))
    seen: set[bool] = set()  # whether a shard had clauses pending, after each step
    monkeypatch.setattr(pending, "DEFER_FROM", 1)
    monkeypatch.setattr(pending, "DEFER_STORE", 0)
    monkeypatch.setattr(pending, "PLACE_SHARE", 1 << 60)
    for step in range(12):
        # every other step, each batch's shards place their pending clauses once committed
        monkeypatch.setattr(pending, "PLACE_CLAUSES", -(1 << 30) if step % 4 < 2 else 1 << 30)
        with open_index(root, readonly=False) as store:
            assert store.writable
            ids = list(model) + [rng.randrange(1000) for _ in range(5)]
            if step % 3 == 2:
                gone = rng.sample(sorted(model, key=str), rng.randint(1, 8))
                found = store.unsubscribe_many(gone)
                assert found == [True] * len(gone)
                for ident in gone:
                    del model[ident]
                assert store.unsubscribe(10_000) is False
            else:
                items = [(rng.choice(ids), expression(rng)) for _ in range(rng.randint(1, 25))]
                created = store.subscribe_many(items)
                expect = []
                for ident, expr in items:
                    expect.append(ident not in model)
                    model[ident] = expr
                assert created == expect
            with pytest.raises(InvalidInput, match="no subscription 99999"):
                store.unsubscribe_many([next(iter(model)), 99999], strict=True)
            with pytest.raises(InvalidInput, match="subscription 'bad'"):
                store.subscribe_many([(1, "i = 1"), ("bad", "i = ")])
            seen.add(any(_waiting(index) for index in store.indexes))
        check_model(root, model, rng)
    assert seen == {False, True}, "never a placement, or never a clause pending"
    # a replaced id leaves no copy elsewhere; the counts verify takes are the shards' own
    assert verify(root)["shards"] == SHARDS


def test_cli_and_live_writes_on_a_sharded_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.cli import run, write_lines

    rng = random.Random(3)
    model: dict[Any, str] = {i: f"i = {i % 20}" for i in range(20)}
    root = Path(build_hashed(tmp_path / "sh", model, SHARDS))
    lines = [{"id": i, "expr": f"i = {i % 7}"} for i in range(15, 40)]
    code, out, err = run(capsys, "subscribe", str(root), write_lines(tmp_path / "s.jsonl", lines))
    assert code == 0 and "25 (20 new, 5 replaced)" in out, err
    model.update({d["id"]: d["expr"] for d in lines})
    code, out, err = run(capsys, "unsubscribe", str(root), "1", "2", "777")
    assert code == 3 and "777" in err  # all or nothing: none deleted
    code, out, err = run(capsys, "unsubscribe", str(root), "1", "2")
    assert code == 0, err
    del model[1], model[2]
    assert write_subscriptions(root, [("x", 's = "a"')]) == [True]
    delete_subscriptions(root, ["x"])
    check_model(root, model, rng)
    code, out, err = run(capsys, "verify", str(root))
    assert code == 0 and f"ok ({SHARDS} shards)" in out
    for command in (["compact", str(root)], ["compact", "--rebuild", str(root)]):
        assert run(capsys, *command)[0] == 0
    assert write_subscriptions(root, [(1, "i = 1")]) == [True]
    model[1] = "i = 1"
    check_model(root, model, rng)
    code, out, _ = run(capsys, "explain", str(root), "1", json.dumps({"i": 1}))
    assert code == 0 and "shard" in out
    code, out, _ = run(capsys, "export", str(root))
    assert code == 0 and {
        (d["id"], d["expr"]) for d in map(json.loads, out.splitlines()[1:])
    } == set(model.items())
    assert run(capsys, "inspect", str(root))[0] == 0
    assert run(capsys, "adjust", str(root), "--now")[0] == 0
    check_model(root, model, rng)


def test_writes_to_a_store_not_split_by_the_hash_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.cli import run, write_lines

    root = Path(build_sharded(tmp_path / "sh", {i: f"i = {i}" for i in range(10)}))
    before = sorted(p.name for p in root.iterdir())
    new = write_lines(tmp_path / "new.jsonl", [{"id": 100, "expr": "i = 100"}])
    code, out, err = run(capsys, "subscribe", str(root), new)
    assert code == 1 and out == "" and "takes no writes" in err and "hash" in err
    code, out, err = run(capsys, "unsubscribe", str(root), "1")
    assert code == 1 and "takes no writes" in err
    with open_index(root, readonly=False) as store:
        assert not store.writable
        with pytest.raises(ShardedStore, match="hash"):
            store.subscribe(100, "i = 1")
    assert sorted(p.name for p in root.iterdir()) == before
    verify(root)


def test_verify_finds_an_id_in_the_wrong_shard_and_a_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.cli import run

    root = Path(build_hashed(tmp_path / "sh", {i: f"i = {i % 20}" for i in range(30)}, SHARDS))
    with open_index(root) as store:
        wrong = (shard_for(store, 5) + 1) % SHARDS  # type: ignore[operator]
    with Index.open(root / shard_name(wrong)) as idx:
        idx.subscribe(5, "i = 5")
    with pytest.raises(CheckFailed, match="belongs in"):
        verify(root)
    code, out, err = run(capsys, "verify", str(root))
    assert code == 4 and "belongs in" in out + err
    # a manifest naming two shards' directories the other way round: each id is said to
    # belong in the directory the manifest routes it to, not the one it is in
    doc = json.loads((root / "manifest.json").read_text())
    entries = doc["shards"]
    entries[0]["path"], entries[1]["path"] = entries[1]["path"], entries[0]["path"]
    (root / "manifest.json").write_text(json.dumps(doc))
    code, out, err = run(capsys, "verify", str(root))
    said = [line for line in (out + err).splitlines() if "belongs in" in line]
    assert code == 4 and said
    assert not [
        line for line in said if line.split(":")[0].strip(" -") in line.split("belongs in")[1]
    ]
    root2 = Path(build_hashed(tmp_path / "sh2", {1: "i = 1"}, SHARDS))
    shardwrite.write_journal(root2, "b1", {0: []})
    code, out, _ = run(capsys, "verify", str(root2))
    assert code == 0 and "journal" in out


def test_shards_listed_out_of_order_are_refused_at_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two shard directories swapped in the manifest: opening refuses (a write or a lookup
    by id would go to the shard the hash names, which holds the other shard's ids),
    naming the shards; the order restored, the store opens and writes as before."""
    from tests.support.cli import run, write_lines

    model = {i: f"i = {i % 7}" for i in range(40)}
    root = Path(build_hashed(tmp_path / "sh", model, SHARDS))
    path = root / "manifest.json"
    good = path.read_text()
    doc = json.loads(good)
    doc["shards"][0]["path"], doc["shards"][2]["path"] = (
        doc["shards"][2]["path"],
        doc["shards"][0]["path"],
    )
    path.write_text(json.dumps(doc))
    for readonly in (True, False):
        with pytest.raises(StoreError, match="out of order") as info:
            open_index(root, readonly=readonly)
        assert shard_name(0) in str(info.value) and shard_name(2) in str(info.value)
    new = write_lines(tmp_path / "new.jsonl", [{"id": 100, "expr": "i = 100"}])
    code, out, err = run(capsys, "subscribe", str(root), new)
    assert code != 0 and out == "" and "out of order" in err
    path.write_text(good)
    with open_index(root, readonly=False) as store:
        assert store.subscribe(1000, "i = 3")
    model[1000] = "i = 3"
    check_model(root, model, random.Random(4))


def test_a_batch_left_half_applied_is_completed_on_open(tmp_path: Path) -> None:
    """A crash simulated with the module's own steps: journal written, one shard applied."""
    rng = random.Random(5)
    model: dict[Any, str] = {i: expression(rng) for i in range(40)}
    root = Path(build_hashed(tmp_path / "sh", model, SHARDS))
    with open_index(root) as store:
        route = partial(shard_for, store)
        gone = [i for i in range(40) if route(i) == 0][:2] + [
            i for i in range(40) if route(i) == 1
        ][:2]
    ops: list[list[Any]] = [["put", i, expression(rng)] for i in range(100, 130)]
    ops += [["delete", i] for i in gone]
    parts: dict[int, list[list[Any]]] = {}
    for op in ops:
        parts.setdefault(route(op[1]), []).append(op)  # type: ignore[arg-type]
    assert len(parts) == SHARDS
    shardwrite.write_journal(root, "batch-1", parts)
    with Index.open(root / shard_name(1)) as idx:  # only shard 1 got it before the "crash"
        shardwrite.apply_part(idx, "batch-1", parts[1])
    for op in ops:
        if op[0] == "put":
            model[op[1]] = op[2]
        else:
            del model[op[1]]
    with open_index(root) as store:  # a read-only open completes it
        assert dict(store.subscriptions()) == model
        assert [shardwrite.applied_batch(i) for i in store.indexes] == ["batch-1"] * SHARDS
    check_model(root, model, rng)
    # a journal whose batch every shard already has is just removed; a torn temporary ignored
    shardwrite.write_journal(root, "batch-1", parts)
    (root / (shardwrite.JOURNAL + ".tmp")).write_text("{")
    with open_index(root, readonly=False) as store:
        assert store.subscribe(1000, "i = 1") is True
    model[1000] = "i = 1"
    assert not (root / (shardwrite.JOURNAL + ".tmp")).exists()
    check_model(root, model, rng)


WRITER = """
import json, random, sys
from betree.disk import pending
from betree.stores.sharded import open_index
from tests.support.workload import expression
root, seed = sys.argv[1], int(sys.argv[2])
if sys.argv[3:] == ["placing"]:  # each part's clauses pending, placed after its commit
    pending.DEFER_FROM, pending.DEFER_STORE, pending.PLACE_CLAUSES = 1, 0, -(1 << 30)
rng = random.Random(seed)
with open_index(root, readonly=False) as store:
    k = 0
    while True:
        k += 1
        ids = [f"{k}-{j}" for j in range(6)]
        store.subscribe_many([(i, f"i = {k % 20}") for i in ids])
        print(json.dumps(["put", k]), flush=True)
        if k % 3 == 0:
            store.unsubscribe_many([f"{k - 1}-{j}" for j in range(6)], strict=True)
            print(json.dumps(["del", k - 1]), flush=True)
"""


@pytest.mark.parametrize("mode", ["", "placing"], ids=["placed", "placing"])
def test_writer_killed_at_random_moments_leaves_whole_batches(tmp_path: Path, mode: str) -> None:
    """kill -9 of a process writing six-id batches (spread over the shards) at random
    moments, many times; after each: every batch wholly present or wholly absent, every
    acknowledged one as acknowledged, verify passes.  ``placing``: each shard's part
    deferred and placed after its commit, before the journal goes (betree.disk.pending)."""
    root = Path(build_hashed(tmp_path / "sh", {}, SHARDS))
    rng = random.Random(9)
    acked_puts: set[int] = set()
    acked_dels: set[int] = set()
    import os

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    deadline = time.monotonic() + 60
    rounds = 0
    while rounds < 12 and time.monotonic() < deadline:
        rounds += 1
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(rounds), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        # killed after a drawn count of acknowledgements (so every round has some, however
        # busy the machine), then a drawn moment: mid-batch, mid-placement or between
        seen = [proc.stdout.readline() for _ in range(rng.randint(1, 4))]
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err
        for line in seen + out.splitlines():
            kind, k = json.loads(line)
            (acked_puts if kind == "put" else acked_dels).add((rounds, k))
        with open_index(root) as store:  # completes a batch left half-applied
            held = dict(store.subscriptions())
        batches: dict[str, set[str]] = {}
        for ident in held:
            batches.setdefault(str(ident).rsplit("-", 1)[0], set()).add(str(ident))
        for key, members in batches.items():
            assert len(members) == 6, (key, members)  # whole or absent
        # this round's acknowledged batches: present unless an acknowledged delete took it
        mine = {k for r, k in acked_puts if r == rounds}
        gone = {k for r, k in acked_dels if r == rounds}
        for k in mine - gone:
            # absent only if its delete (after batch k + 1) committed before the kill
            may_go = (k + 1) % 3 == 0 and k + 1 in mine
            assert f"{k}" in batches or may_go, k
        for k in gone:
            assert f"{k}" not in batches, k
        verify(root)
        # the next round starts over with ids of its own: clear this round's
        with open_index(root, readonly=False) as store:
            store.unsubscribe_many(list(held))
    assert rounds >= 5 and len(acked_puts) > rounds


def test_readers_never_see_a_batch_half_applied(tmp_path: Path) -> None:
    """A reader matching while another process writes six-id batches over the shards sees
    each batch whole or not at all in every snapshot (the read lock of step 4)."""
    import os

    root = Path(build_hashed(tmp_path / "sh", {}, SHARDS))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        seen = 0
        with open_index(root) as store:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                found: dict[str, int] = {}
                for ident in store.match({"i": 0}) + [
                    m for v in range(1, 20) for m in store.match({"i": v})
                ]:
                    key = str(ident).rsplit("-", 1)[0]
                    found[key] = found.get(key, 0) + 1
                seen += len(found)
                assert all(n == 6 for n in found.values()), found
                batched: dict[str, int] = {}  # match_many: one snapshot per call as well
                for ids in store.match_many([{"i": v} for v in range(20)]):
                    assert not isinstance(ids, Exception)
                    for ident in ids:
                        key = str(ident).rsplit("-", 1)[0]
                        batched[key] = batched.get(key, 0) + 1
                assert all(n == 6 for n in batched.values()), batched
            with store.snapshot() as match:  # one snapshot over every value
                counts: dict[str, int] = {}
                for v in range(20):
                    for ident in match({"i": v}):
                        key = str(ident).rsplit("-", 1)[0]
                        counts[key] = counts.get(key, 0) + 1
                assert all(n == 6 for n in counts.values()), counts
        assert seen > 10
    finally:
        proc.kill()
        proc.wait(30)


def test_only_a_batch_of_several_shards_waits_for_readers(tmp_path: Path) -> None:
    """While a snapshot is being begun (the shared read lock held), a write whose ids fall
    in one shard commits (its one transaction is whole by itself: readers need not wait
    out its fsync), and a batch over several shards waits, then lands whole."""
    rng = random.Random(21)
    root = Path(build_hashed(tmp_path / "sh", {}, SHARDS))
    ids = [f"x{n}" for n in range(40)]
    one = [i for i in ids if shard_of(encode_id(i), SHARDS) == 0][:3]
    several = [f"y{n}" for n in range(6)]
    assert len(one) == 3 and len({shard_of(encode_id(i), SHARDS) for i in several}) > 1
    model = {i: expression(rng) for i in one + several}
    done: list[Any] = []
    with open_index(root, readonly=False) as store:

        def write(batch: list[str]) -> None:
            try:
                done.append(store.subscribe_many([(i, model[i], None) for i in batch]))
            except Exception as exc:  # checked below
                done.append(exc)

        with shardwrite.reading(root):
            writer = threading.Thread(target=write, args=(one,))
            writer.start()
            writer.join(60)
            assert not writer.is_alive() and done == [[True] * 3], done
            writer = threading.Thread(target=write, args=(several,))
            writer.start()
            writer.join(0.5)
            assert writer.is_alive() and len(done) == 1, done
        writer.join(60)
        assert done[1] == [True] * 6, done
    check_model(root, model, rng)


@pytest.mark.parametrize(("before", "after"), [(1, 1), (3, 1), (3, 2)])
def test_a_writer_of_a_store_replaced_by_a_load_writes_into_the_new_one(
    tmp_path: Path, before: int, after: int
) -> None:
    """``load --replace`` turns the old store's writers away (StoreReplaced, nothing
    written) instead of letting them commit into a store nobody reads again; a live writer
    redoes its write in the new store.  ``before``/``after``: shards (1: a plain store)."""
    from betree.stores.live import LiveIndex
    from tests.support.cli import write_lines
    from tests.support.workload import SCHEMA

    old = {i: f"i = {i % 5}" for i in range(12)}
    root = tmp_path / "st"
    if before == 1:
        with Index.open(root, schema=SCHEMA) as idx:
            idx.subscribe_many(list(old.items()))
    else:
        build_hashed(root, old, before)
    fresh = [{"id": f"n{i}", "expr": f"i = {i % 3}"} for i in range(9)]
    subs = write_lines(tmp_path / "new.jsonl", fresh)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    with LiveIndex(root) as live:
        writer = live.current()  # opened before the load, as a server's is
        args = ["load", str(root), subs, "--schema", str(schema), "--replace", "--engine"]
        args += ["spark", "--shards", str(after)] if after > 1 else ["python"]
        proc = subprocess.run([sys.executable, "-m", "tools.cli", *args], capture_output=True)
        assert proc.returncode == 0, proc.stderr
        with pytest.raises(StoreReplaced):
            writer.subscribe("lost?", "i = 1")
        assert live.write(lambda idx: idx.subscribe_many([("kept", "i = 1")])) == [True]
    with open_index(root) as store:
        assert dict(store.subscriptions()) == {
            **{d["id"]: d["expr"] for d in fresh},
            "kept": "i = 1",
        }
        store.check()


def test_generations_follow_writes_and_compaction(tmp_path: Path) -> None:
    """``generations()`` of a reader kept open while another process writes: each shard's
    grows with the writes routed to it, and after a compaction (new data files) it is that
    of the new shards, as a fresh open sees them (what ``bexdb stream`` reports)."""
    model: dict[Any, str] = {i: f"i = {i % 20}" for i in range(30)}
    root = Path(build_hashed(tmp_path / "sh", model, SHARDS))

    def other(code: str) -> str:  # in another process (py-lmdb: one environment a path)
        prelude = "import json, sys; from betree.stores.sharded import open_index; "
        prelude += "from betree.stores.live import write_subscriptions; from tools import cli; "
        done = subprocess.run(
            [sys.executable, "-c", prelude + code, str(root)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
        return done.stdout

    items = [[f"g{k}", "i = 1"] for k in range(12)]
    with open_index(root) as reader:
        before = reader.generations()
        assert len(before) == SHARDS
        other(f"write_subscriptions(sys.argv[1], [tuple(x) for x in {items!r}])")
        touched = {shard_for(reader, ident) for ident, _ in items}
        after = reader.generations()
        for i in range(SHARDS):
            assert (after[i] > before[i]) == (i in touched), (before, after)
        other(
            "cli.main(['compact', sys.argv[1]]); write_subscriptions(sys.argv[1], [('z', 'i = 2')])"
        )
        fresh = json.loads(other("print(json.dumps(open_index(sys.argv[1]).generations()))"))
        assert list(reader.generations()) == fresh != list(after)


def test_a_batch_across_shards_pays_one_young_pass_and_is_whole(tmp_path: Path) -> None:
    """The collector is paused once for a sharded batch (compiling and every shard's part):
    one young pass at its end, not one a shard as well (each counts towards a full pass).
    The batch itself: ids repeated in it (the last wins), replacing stored ones, at the ends
    of the id domain, in every shard; and one failing validation midway writes nothing."""
    rng = random.Random(33)
    model: dict[Any, str] = {(i if i % 2 else f"s{i}"): expression(rng) for i in range(40)}
    root = Path(build_hashed(tmp_path / "sh", model, SHARDS))
    ends: list[Any] = [-(2**63), 2**63 - 1, 0, "", "é" * 300, "\U0001f600"]
    items: list[tuple[Any, str]] = [(ident, expression(rng)) for ident in ends]
    items += [(1, expression(rng)), ("s2", expression(rng))]  # replaces stored ones
    items += [(ends[0], expression(rng)), (7, expression(rng)), (7, expression(rng))]
    items += [(1000 + k, expression(rng)) for k in range(40)]
    passes: list[int] = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    with open_index(root, readonly=False) as store:
        assert len({shard_for(store, ident) for ident, _ in items}) == SHARDS
        before = dict(store.subscriptions())
        bad = [*items[:20], ("bad", "i between 3 and"), *items[20:]]
        gc.callbacks.append(counted)
        try:
            with pytest.raises(InvalidInput, match="subscription 'bad'"):
                store.subscribe_many(bad)
            assert gc.isenabled() and dict(store.subscriptions()) == before
            passes.clear()
            created = store.subscribe_many(items)
        finally:
            gc.callbacks.remove(counted)
        assert gc.isenabled()
        assert passes == [1], passes  # the batch's one young pass
    expect = []
    for ident, expr in items:
        expect.append(ident not in model)
        model[ident] = expr
    assert created == expect
    check_model(root, model, rng)
