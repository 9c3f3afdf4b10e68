"""Schema evolution (SPEC section 11, betree.disk.schemaedit): attributes added and hints changed
on a live store, plain and sharded, through the library, ``bexdb schema --add`` and
``PUT /schema``; every change that would alter what a stored subscription means refused
with nothing changed; processes that opened the store before the change see it from their
next snapshot; answers equal the brute-force evaluator's throughout (real LMDB, real
processes, real HTTP on loopback)."""

from __future__ import annotations

import fcntl
import http.client
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from betree.disk.catalog import put_root, root_record
from betree.disk.schemaedit import SchemaConflict, add_to_schema
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores import shardwrite
from betree.stores.sharded import ShardedIndex, open_index, shard_name, verify
from storage.errors import CheckFailed, InvalidInput
from tests.support.brute import brute
from tests.support.http import request as call
from tests.support.workload import SCHEMA, build_hashed, event, expression
from tools.serve import spawn

ROOT = Path(__file__).resolve().parents[2]
#: attributes the tests add: one of each kind the grid cuts differently
ADDED = {
    "k": {"type": "int", "min": -100, "max": 100},
    "t": {"type": "string", "fold_case": True},
    "g": {"type": "float"},
    "tl": {"type": "string_list"},
}
#: every refused change, with the attribute its message must name
REFUSED: list[tuple[Any, str]] = [
    ({"attributes": {"i": {"type": "float", "min": 0, "max": 20}}}, '"i": type'),
    ({"attributes": {"s": {"type": "string", "fold_case": True}}}, '"s": fold_case'),
    ({"attributes": {"j": {"type": "int", "allow_undefined": False}}}, '"j": allow_undefined'),
    ({"attributes": {"new": {"type": "int", "allow_undefined": False}}}, '"new"'),
    ({"attributes": {"il": {"type": "string_list"}}}, '"il": type'),
]
#: malformed change documents (refused before the store is looked at)
MALFORMED: list[Any] = [
    {"attributes": {"k": {"type": "int", "hint": 3}}},
    {"attributes": {"k": {"type": "decimal"}}},
    {"attributes": {"k": {"type": "int", "min": 5, "max": 1}}},
    {"attrs": {}},
    [1, 2],
]


def added_atom(rng: random.Random) -> str:
    """One atom on an added attribute."""
    return rng.choice(
        [
            f"k {rng.choice(['<', '>=', '=', '<>'])} {rng.randint(-150, 150)}",
            f"k between {rng.randint(-150, 0)} and {rng.randint(0, 150)}",
            f't = "{rng.choice(["Ab", "aB", "é", "x"])}"',
            f'starts_with(t, "{rng.choice(["a", "A", "x"])}")',
            f"g > {rng.choice(['-1.7976931348623157e308', '-0.0', '0.5', '1e9'])}",
            f'"{rng.choice(["a", "b"])}" in tl',
            "k is null",
            "t is not null",
        ]
    )


def mixed(rng: random.Random) -> str:
    """An expression over the old and the added attributes."""
    parts = [expression(rng), added_atom(rng)]
    rng.shuffle(parts)
    return f"({parts[0]}) {rng.choice(['and', 'or'])} ({parts[1]})"


def mixed_event(rng: random.Random) -> dict[str, Any]:
    ev = event(rng)
    if rng.random() < 0.8:
        ev["k"] = rng.choice([rng.randint(-150, 150), -(2**63), 2**63 - 1])
    if rng.random() < 0.7:
        ev["t"] = rng.choice(["AB", "ab", "É", "x", "", "Xy"])
    if rng.random() < 0.6:
        ev["g"] = rng.choice([-1.7976931348623157e308, 1.7976931348623157e308, -0.0, 0.75, 2e9])
    if rng.random() < 0.6:
        ev["tl"] = [rng.choice(["a", "b", "c"]) for _ in range(rng.randint(0, 3))]
    return ev


def agree(store: Any, model: dict[Any, str], rng: random.Random, n: int = 25) -> None:
    schema = store.schema
    for _ in range(n):
        ev = mixed_event(rng)
        assert set(store.match(ev)) == brute(model, schema, ev), ev
    events = [mixed_event(rng) for _ in range(n)]
    for ev, found in zip(events, store.match_many(events), strict=True):
        assert set(found) == brute(model, schema, ev), ev


def stored_state(index: Index) -> tuple[Any, Any, Any]:
    with index.store.read() as txn:
        rec = root_record(txn)
        return (
            index.engine.refresh_schema().to_json(),
            rec.get("schema_version"),
            rec.get("former_hints"),
        )


def test_added_attributes_are_subscribed_and_matched_as_brute_force(tmp_path: Path) -> None:
    rng = random.Random(11)
    model = {n: expression(rng) for n in range(120)}
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 4}) as idx:
        idx.subscribe_many(model.items())
        with pytest.raises(InvalidInput, match="k"):
            idx.subscribe("early", "k > 1")  # not an attribute yet
        done = add_to_schema(idx, {"attributes": ADDED})
        assert done == {"added": list(ADDED), "hints": []}
        assert Schema.from_json({"attributes": {**SCHEMA["attributes"], **ADDED}}) == idx.schema
        new = {f"n{n}": mixed(rng) for n in range(150)}
        idx.subscribe_many(new.items())
        model.update(new)
        idx.check()
        agree(idx, model, rng)
        for ident in list(model)[::4]:
            assert idx.unsubscribe(ident)
            del model[ident]
        idx.check()
        # an unchanged restatement of the schema is no change at all
        assert add_to_schema(idx, idx.schema.to_json()) == {"added": [], "hints": []}
    with open_index(tmp_path / "s") as store:  # reopened: the change is stored
        store.check()
        agree(store, model, rng)
        assert "t" in store.schema.attributes


def test_every_refused_change_names_the_attribute_and_changes_nothing(tmp_path: Path) -> None:
    rng = random.Random(12)
    model = {n: expression(rng) for n in range(60)}
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe_many(model.items())
        add_to_schema(idx, {"attributes": {"user.age": {"type": "int"}}})
        before = stored_state(idx)
        refused = [*REFUSED, ({"attributes": {"user": {"type": "string"}}}, '"user"')]
        for doc, named in refused:
            with pytest.raises(SchemaConflict) as caught:
                add_to_schema(idx, doc)
            assert named in caught.value.message, caught.value.message
            assert stored_state(idx) == before
        for doc in MALFORMED:
            with pytest.raises(InvalidInput) as bad:
                add_to_schema(idx, doc)
            assert not isinstance(bad.value, SchemaConflict)
            assert stored_state(idx) == before
        # a change with one refused attribute writes none of the others
        with pytest.raises(SchemaConflict):
            add_to_schema(
                idx, {"attributes": {"k": {"type": "int"}, **REFUSED[0][0]["attributes"]}}
            )
        assert stored_state(idx) == before
        idx.check()
        agree(idx, model, rng)


@pytest.mark.parametrize("seed", [1, 2])
def test_hints_changed_on_a_populated_store_keep_answers_exact(tmp_path: Path, seed: int) -> None:
    """p-nodes on ``i``, ``j`` and ``f`` made under one set of hints, then hints narrowed,
    widened, shifted and removed between writes: each new p-node takes the hints of its
    time, the old keep theirs; answers equal brute force and ``check()`` holds after every
    step, also reopened."""
    rng = random.Random(seed)
    model: dict[Any, str] = {}
    path = tmp_path / "s"
    ranges = [(0, 20), (5, 6), (-(2**63), 2**63 - 1), (100, 10**6), None, (-3, 40)]
    with Index.open(path, schema=SCHEMA, settings={"max_cap": 3, "min_size": 1}) as idx:
        for step, hint in enumerate(ranges):
            batch = {f"{step}-{n}": expression(rng) for n in range(50)}
            idx.subscribe_many(batch.items())
            model.update(batch)
            for ident in rng.sample(sorted(model, key=str), 10):
                idx.unsubscribe(ident)
                del model[ident]
            bounds = {} if hint is None else {"min": hint[0], "max": hint[1]}
            fbounds = {} if hint is None else {"min": hint[0] / 4, "max": hint[1] / 4 + 0.5}
            done = add_to_schema(
                idx,
                {
                    "attributes": {
                        "i": {"type": "int", **bounds},
                        "j": {"type": "int", **bounds},
                        "f": {"type": "float", **fbounds},
                    }
                },
            )
            assert set(done["hints"]) <= {"i", "j", "f"} and not done["added"]
            idx.check()
            agree(idx, model, rng, 15)
        pnodes = idx.stats()[0][1]["betree"]["p_nodes"]
        assert pnodes > 3, "the workload made too few p-nodes to test hints on"
        with idx.store.read() as txn:
            former = root_record(txn)["former_hints"]
        assert {"i", "j", "f"} <= set(former)
    with open_index(path) as store:
        store.check()
        agree(store, model, rng)


def test_check_holds_top_buckets_to_the_hints_they_were_made_under(tmp_path: Path) -> None:
    """Without the ranges kept in ``former_hints``, a p-node made before a hint change is a
    violation: the check is no weaker for allowing them."""
    rng = random.Random(3)
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 2, "min_size": 1}) as idx:
        idx.subscribe_many((n, f"i = {rng.randint(0, 20)}") for n in range(60))
        add_to_schema(idx, {"attributes": {"i": {"type": "int", "min": 1000, "max": 2000}}})
        idx.check()
        with idx.store.write() as txn:
            rec = root_record(txn)
            del rec["former_hints"]
            put_root(txn, rec)
        with pytest.raises(CheckFailed, match=r"bucket .*'i', True"):
            idx.check()


CHILD = """
import json, sys
from betree.index import Index
idx = Index.open(sys.argv[1])
print(json.dumps(sorted(idx.schema.attributes)), flush=True)
for line in sys.stdin:
    ev = json.loads(line)
    first = sorted(idx.match(ev), key=str)  # validated in the new schema: k and t seen
    idx.subscribe("child", 'k = 7 and t = "x"')
    found = [first, sorted(idx.match(ev), key=str), sorted(idx.schema.attributes)]
    print(json.dumps(found), flush=True)
"""


def test_a_process_open_before_the_change_sees_it_from_its_next_snapshot(tmp_path: Path) -> None:
    """An Index opened in another process before ``bexdb schema --add`` (a third process)
    validates, compiles and matches with the added attributes, without reopening."""
    path = tmp_path / "s"
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many([(1, "i = 1"), (2, "i = 2")])
    env = {"PYTHONPATH": str(ROOT), "PATH": ""}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        assert "k" not in json.loads(child.stdout.readline())
        change = tmp_path / "add.json"
        change.write_text(json.dumps({"attributes": ADDED}))
        done = bexdb("schema", str(path), "--add", str(change))
        assert done.returncode == 0, done.stderr
        records = tmp_path / "subs.jsonl"
        records.write_text(json.dumps({"id": "p", "expr": "k = 7"}) + "\n")
        assert bexdb("subscribe", str(path), str(records)).returncode == 0
        child.stdin.write(json.dumps({"i": 1, "k": 7, "t": "X"}) + "\n")
        child.stdin.flush()
        first, then, attributes = json.loads(child.stdout.readline())
        assert first == [1, "p"] and then == [1, "child", "p"] and "k" in attributes
    finally:
        child.kill()
        child.wait(30)
    assert verify(path)["subscriptions"] == 4


def bexdb(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.parametrize("kind", ["plain", "sharded"])
def test_the_command_prints_adds_and_refuses_with_exit_2(tmp_path: Path, kind: str) -> None:
    rng = random.Random(13)
    model = {n: expression(rng) for n in range(80)}
    path = str(tmp_path / "s")
    if kind == "plain":
        with Index.open(path, schema=SCHEMA) as idx:
            idx.subscribe_many(model.items())
    else:
        path = build_hashed(tmp_path / "sh", model, 3)
    shown = bexdb("schema", path)
    assert shown.returncode == 0 and json.loads(shown.stdout) == Schema.from_json(SCHEMA).to_json()
    change = tmp_path / "change.json"
    for doc, named in REFUSED:
        change.write_text(json.dumps(doc))
        done = bexdb("schema", path, "--add", str(change))
        assert done.returncode == 2 and named in done.stderr, done.stderr
        assert "not changed" in done.stderr
    for text in ['{"attributes": {', "\ufeff[]", json.dumps(MALFORMED[0])]:
        change.write_text(text)
        done = bexdb("schema", path, "--add", str(change))
        assert done.returncode == 2 and "change.json" in done.stderr, done.stderr
    assert json.loads(bexdb("schema", path).stdout) == Schema.from_json(SCHEMA).to_json()
    change.write_text(json.dumps({"attributes": {**ADDED, "i": {"type": "int", "max": 9}}}))
    done = bexdb("schema", path, "--add", str(change))
    assert done.returncode == 0, done.stderr
    assert "added k, t, g, tl; hints changed: i" in done.stderr
    assert json.loads(done.stdout)["attributes"]["i"] == {"type": "int", "max": 9}
    new = {f"n{n}": mixed(rng) for n in range(60)}
    with open_index(path, readonly=False) as store:
        store.subscribe_many(new.items())
    model.update(new)
    assert verify(path)["subscriptions"] == len(model)
    with open_index(path) as store:
        agree(store, model, rng)


def test_a_sharded_change_left_half_applied_is_completed_on_open(tmp_path: Path) -> None:
    """A crash simulated with the module's own steps (journal written, one shard changed):
    the next open changes the others; every shard then has the same schema."""
    rng = random.Random(14)
    model = {n: expression(rng) for n in range(60)}
    root = Path(build_hashed(tmp_path / "sh", model, 3))
    new = Schema.from_json({"attributes": {**SCHEMA["attributes"], **ADDED}})
    parts = {i: [["schema", new.to_json()]] for i in range(3)}
    shardwrite.write_journal(root, "schema-1", parts)
    with Index.open(root / shard_name(1)) as idx:
        shardwrite.apply_part(idx, "schema-1", parts[1])
    with pytest.raises(CheckFailed, match="schema differs"):
        verify(root)  # verify reads the shards as they are, journal and all
    with open_index(root) as store:  # any open completes it
        assert all(index.schema == new for index in store.indexes)
    assert not shardwrite.has_journal(root)
    verify(root)


def test_a_sharded_open_during_a_change_waits_for_every_shard(tmp_path: Path) -> None:
    """A store opened while a change is applied shard by shard (its writer holding the read
    lock, one shard changed) waits and sees every shard changed: it does not read the
    shards half-way and report them as differing (a service worker booting beside a
    ``PUT /schema`` did, and the service stopped)."""
    rng = random.Random(15)
    model = {n: expression(rng) for n in range(30)}
    root = Path(build_hashed(tmp_path / "sh", model, 3))
    new = Schema.from_json({"attributes": {**SCHEMA["attributes"], **ADDED}})
    parts = {i: [["schema", new.to_json()]] for i in range(3)}
    opened: list[Any] = []

    def open_it() -> None:
        try:
            opened.append(open_index(root))
        except Exception as exc:  # the answer is checked below
            opened.append(exc)

    with shardwrite.locked(root, shardwrite.READ_LOCK, fcntl.LOCK_EX):
        with Index.open(root / shard_name(0)) as idx:
            shardwrite.apply_part(idx, "schema-1", parts[0])
        opener = threading.Thread(target=open_it)
        opener.start()
        opener.join(0.5)
        assert opener.is_alive(), f"opened during the change: {opened}"
        for i in (1, 2):
            with Index.open(root / shard_name(i)) as idx:
                shardwrite.apply_part(idx, "schema-1", parts[i])
    opener.join(60)
    assert len(opened) == 1 and isinstance(opened[0], ShardedIndex), opened
    with opened[0] as store:
        assert all(index.schema == new for index in store.indexes)
    verify(root)


KILLED = """
import json, sys
from betree.stores.sharded import open_index
with open_index(sys.argv[1], readonly=False) as store:
    for k in range(10_000):
        hint = {"min": -k, "max": k} if k % 3 else {}
        doc = {f"a{k}": {"type": "int"}, "i": {"type": "int", **hint}}
        store.add_to_schema({"attributes": doc})
        print(k, flush=True)
"""


def test_sharded_changes_killed_at_random_moments_are_whole(tmp_path: Path) -> None:
    """kill -9 of a process changing a sharded store's schema over and over: after each,
    the next open leaves every shard with the same schema, holding every acknowledged
    change, and verify passes."""
    rng = random.Random(15)
    model = {n: expression(rng) for n in range(40)}
    root = Path(build_hashed(tmp_path / "sh", model, 3))
    env = {"PYTHONPATH": str(ROOT), "PATH": ""}
    acked = -1
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED, str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # one change made
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err
        with open_index(root) as store:
            assert isinstance(store, ShardedIndex)
            schemas = [index.schema for index in store.indexes]
            assert all(s == schemas[0] for s in schemas)
            for line in out.split():
                acked = max(acked, int(line))
            assert f"a{acked}" in schemas[0].attributes  # (a later, unacknowledged one may be)
            agree(store, model, rng, 5)
        verify(root)
    assert acked >= 0


@pytest.mark.parametrize("kind", ["plain", "sharded"])
def test_put_schema_over_http_seen_by_every_worker(tmp_path: Path, kind: str) -> None:
    """``PUT /schema`` on a service with two workers (each opened the store before):
    409 for each refused change and 400 for a malformed body, nothing changed; then the
    change, after which subscriptions on the added attributes are written and matched (by
    whichever worker answers) as brute force."""
    rng = random.Random(16)
    model: dict[Any, str] = {n: expression(rng) for n in range(80)}
    path = str(tmp_path / "s")
    if kind == "plain":
        with Index.open(path, schema=SCHEMA) as idx:
            idx.subscribe_many(model.items())
    else:
        path = build_hashed(tmp_path / "sh", model, 3)
    proc, url = spawn(path, "--workers", "2")
    try:
        for _ in range(4):  # both workers hold the store open
            assert call(url, "POST", "/match", {"i": 1})[0] == 200
        status, shown = call(url, "GET", "/schema")
        assert status == 200 and shown == Schema.from_json(SCHEMA).to_json()
        for doc, named in REFUSED:
            status, answer = call(url, "PUT", "/schema", doc)
            assert status == 409 and named in answer["error"], answer
        for body in [b"{", b"", json.dumps(MALFORMED[0]).encode()]:
            status, answer = call(url, "PUT", "/schema", body)
            assert status == 400, answer
        assert call(url, "GET", "/schema")[1] == shown
        status, answer = call(url, "PUT", "/schema", {"attributes": ADDED})
        assert status == 200 and answer["added"] == list(ADDED), answer
        assert answer["schema"]["attributes"]["t"] == {"type": "string", "fold_case": True}
        for n in range(6):  # first requests of the worker that did not change it
            records = b"".join(
                json.dumps({"id": f"b{n}-{m}", "expr": mixed(rng)}).encode() + b"\n"
                for m in range(3)
            )
            status, answer = call(url, "POST", "/validate", records)
            assert status == 200 and answer["invalid"] == 0, answer
            status, answer = call(url, "POST", "/subscriptions?atomic=true", records)
            assert status == 200 and answer["written"] == 3, answer
            model.update((r["id"], r["expr"]) for r in map(json.loads, records.splitlines()))
        new = {f"n{n}": mixed(rng) for n in range(30)}
        for ident, expr in new.items():
            status, answer = call(url, "PUT", f"/subscriptions/{ident}", {"expr": expr})
            assert status == 201, answer
        model.update(new)
        schema = Schema.from_json(call(url, "GET", "/schema")[1])
        for _ in range(30):
            ev = mixed_event(rng)
            status, answer = call(url, "POST", "/match", ev)
            assert status == 200 and set(answer["matches"]) == brute(model, schema, ev), ev
        events = [mixed_event(rng) for _ in range(20)]
        status, answer = call(url, "POST", "/match", {"events": events})
        for ev, result in zip(events, answer["results"], strict=True):
            assert set(result["matches"]) == brute(model, schema, ev)
    finally:
        proc.terminate()
        proc.wait(60)
    assert verify(path)["subscriptions"] == len(model)


def test_put_schema_is_a_write_for_access_control(tmp_path: Path) -> None:
    """With ``--auth-file``, ``PUT /schema`` needs a write token (403 for a read one, 401
    without), ``GET /schema`` a read one; nothing changed by the refused ones."""
    path = tmp_path / "s"
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe(1, "i = 1")
    tokens = tmp_path / "tokens"
    tokens.write_text("reader-token-1 read\nwriter-token-1 write\n")
    proc, url = spawn(path, "--workers", "1", "--auth-file", str(tokens))
    change = json.dumps({"attributes": {"k": {"type": "int"}}}).encode()
    try:
        where = urlsplit(url)

        def ask(method: str, token: str | None, body: bytes | None = None) -> int:
            conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            conn.request(method, "/schema", body=body, headers=headers)
            status = conn.getresponse().status
            conn.close()
            return status

        assert ask("PUT", None, change) == 401
        assert ask("PUT", "reader-token-1", change) == 403
        assert ask("GET", "reader-token-1") == 200
        with Index.open(path, readonly=True) as idx:
            assert "k" not in idx.schema.attributes
        assert ask("PUT", "writer-token-1", change) == 200
    finally:
        proc.terminate()
        proc.wait(60)
    with Index.open(path) as idx:
        assert "k" in idx.schema.attributes
