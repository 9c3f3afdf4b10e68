"""``bexdb serve``: a real gunicorn service on loopback, driven over HTTP.

Matches are compared with the brute-force evaluator; writes from the service and from the
command line beside it are seen without a restart; a store replaced by a bulk load is picked
up; writes answered while ``bexdb compact`` runs beside the service are all kept; every
malformed request gets its documented 4xx; connections are kept alive through
errors; SIGTERM drains the request in hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger
from prometheus_client.parser import text_string_to_metric_families

from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import shard_for
from tests.support.brute import brute
from tests.support.http import call
from tests.support.workload import SCHEMA, build_hashed, build_sharded, event, expression
from tools.cli import main
from tools.serve import spawn
from tools.serve_worker import MatcherWorker


@pytest.fixture(scope="module")
def subs() -> dict[Any, str]:
    rng = random.Random(7)
    return {(i if i % 2 else f"s{i}"): expression(rng) for i in range(300)}


@pytest.fixture()
def store(tmp_path: Path, subs: dict[Any, str]) -> Path:
    path = tmp_path / "store"
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many(subs.items())
    return path


@pytest.fixture()
def server(store: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, url = spawn(store, "--workers", "2", "--max-body-mb", "1")
    try:
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(60)


def test_match_agrees_with_brute_force(server: tuple[Any, str], subs: dict[Any, str]) -> None:
    _, url = server
    schema = Schema.from_json(SCHEMA)
    rng = random.Random(3)
    events = [event(rng) for _ in range(120)]
    for ev in events[:60]:
        status, body, _ = call(url, "POST", "/match", ev)
        assert status == 200
        assert len(body["matches"]) == len(set(body["matches"]))
        assert set(body["matches"]) == brute(subs, schema, ev), ev
    status, body, _ = call(url, "POST", "/match", {"events": events[60:]})
    assert status == 200
    assert [set(r["matches"]) for r in body["results"]] == [
        brute(subs, schema, ev) for ev in events[60:]
    ]


def test_subscriptions_crud_seen_by_every_worker(server: tuple[Any, str]) -> None:
    _, url = server
    assert call(url, "PUT", "/subscriptions/new", {"expr": "i = 99"})[0] == 201
    assert call(url, "PUT", "/subscriptions/new", {"expr": "i = 98"})[0] == 200
    assert call(url, "GET", "/subscriptions/new")[:2] == (200, {"id": "new", "expr": "i = 98"})
    for _ in range(8):  # each request may land on either worker
        assert "new" in call(url, "POST", "/match", {"i": 98})[1]["matches"]
    # 5 and "5" are distinct ids: a bare number is the integer, a JSON string the string
    assert call(url, "PUT", "/subscriptions/5000", {"expr": "i = 97"})[0] == 201
    assert call(url, "PUT", "/subscriptions/%225000%22", {"expr": "j = 97"})[0] == 201
    assert call(url, "GET", "/subscriptions/5000")[1] == {"id": 5000, "expr": "i = 97"}
    assert call(url, "GET", "/subscriptions/%225000%22")[1] == {"id": "5000", "expr": "j = 97"}
    found = call(url, "POST", "/match", {"i": 97, "j": 97})[1]["matches"]
    assert 5000 in found and "5000" in found
    status, body, _ = call(url, "DELETE", "/subscriptions/new")
    assert (status, body) == (204, "")
    assert call(url, "DELETE", "/subscriptions/new")[0] == 404
    assert call(url, "GET", "/subscriptions/new")[0] == 404
    for _ in range(8):
        assert "new" not in call(url, "POST", "/match", {"i": 98})[1]["matches"]


def workers(proc: subprocess.Popen[str], expect: int) -> set[int]:
    """The worker pids of a service, once ``expect`` of them run (they boot after it listens)."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    for _ in range(300):
        pids = set(map(int, children.read_text().split()))
        if len(pids) >= expect:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"{len(pids)} workers, expected {expect}")


def test_connections_are_kept_alive_through_errors(server: tuple[Any, str]) -> None:
    _, url = server
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    pid = json.loads(resp.read())["pid"]
    sock = conn.sock
    assert sock is not None and resp.getheader("Connection") != "close"
    for body, status in [(b'{"i": 3,', 400), (b'{"i": "three"}', 400), (b'{"i": 3}', 200)]:
        conn.request("POST", "/match", body)
        resp = conn.getresponse()
        assert resp.status == status and json.loads(resp.read())
    conn.request("GET", "/healthz")
    assert json.loads(conn.getresponse().read())["pid"] == pid  # the same worker answered
    assert conn.sock is sock, "the connection was not kept"
    # a body over the limit is answered unread; gunicorn then closes the connection (it
    # drains at most 64 KiB of what the application left), and the next one is served
    conn.request("POST", "/match", b"[" + b"1," * 600_000 + b"1]")
    resp = conn.getresponse()
    assert resp.status == 413 and "error" in json.loads(resp.read())
    conn.close()
    assert call(url, "GET", "/healthz")[0] == 200


def test_bad_requests_get_4xx_and_leave_workers_up(server: tuple[Any, str]) -> None:
    proc, url = server
    pids = workers(proc, 2)
    status, body, _ = call(url, "POST", "/match", b'{"i": 3,')
    assert status == 400 and body["column"] == 9 and "malformed JSON" in body["error"]
    status, body, _ = call(url, "POST", "/match", {"i": "three"})
    assert status == 400 and '"i"' in body["error"]
    assert call(url, "POST", "/match", [1, 2])[0] == 400
    assert call(url, "POST", "/match", {"f": float("nan")})[0] == 400
    assert call(url, "POST", "/match", b"\xff\xfe")[0] == 400
    status, body, _ = call(url, "POST", "/match", b"[" * 100_000)
    assert status == 400 and "nested too deeply" in body["error"]
    status, body, _ = call(url, "POST", "/match", {"events": [{"i": 1}, {"i": 1.5}, 7]})
    assert status == 200
    assert "matches" in body["results"][0]
    assert [set(r) for r in body["results"][1:]] == [{"error"}, {"error"}]
    status, body, _ = call(url, "PUT", "/subscriptions/x", {"expr": "i = "})
    assert status == 400 and body["column"] == 5
    assert call(url, "PUT", "/subscriptions/x", {"expr": 'i = "a"'})[0] == 400
    assert call(url, "PUT", "/subscriptions/x", {"exp": "i = 1"})[0] == 400
    assert call(url, "PUT", "/subscriptions/x", b"i = 1")[0] == 400
    assert call(url, "GET", "/subscriptions/x")[0] == 404  # nothing was written
    assert call(url, "POST", "/match", b"[" + b"1," * 600_000 + b"1]")[0] == 413
    assert call(url, "GET", "/nowhere")[0] == 404
    status, _, headers = call(url, "GET", "/match")
    assert status == 405 and headers["Allow"] == "POST"
    assert call(url, "POST", "/subscriptions/x", {"expr": "i = 1"})[0] == 405
    assert workers(proc, 2) == pids, "a worker was replaced"
    assert {call(url, "GET", "/healthz")[1]["pid"] for _ in range(10)} <= pids


def test_writes_and_replacement_beside_the_service(
    server: tuple[Any, str], store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = server
    (tmp_path / "more.jsonl").write_text(json.dumps({"id": "cli", "expr": "j = 1234"}) + "\n")
    assert main(["subscribe", str(store), str(tmp_path / "more.jsonl")]) == 0
    for _ in range(6):
        assert "cli" in call(url, "POST", "/match", {"j": 1234})[1]["matches"]
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    (tmp_path / "fresh.jsonl").write_text(json.dumps({"id": "fresh", "expr": "j = 1234"}) + "\n")
    fresh = ["load", str(store), str(tmp_path / "fresh.jsonl"), "--schema", str(schema)]
    assert main([*fresh, "--engine", "python", "--replace"]) == 0
    capsys.readouterr()
    for _ in range(6):
        assert call(url, "POST", "/match", {"j": 1234})[1]["matches"] == ["fresh"]
    assert call(url, "GET", "/stats")[1]["bexdb_subscriptions"] == 1
    assert call(url, "PUT", "/subscriptions/after", {"expr": "j = 1234"})[0] == 201
    assert main(["compact", str(store), "--rebuild"]) == 0  # swapped in under the service
    for _ in range(6):
        assert sorted(call(url, "POST", "/match", {"j": 1234})[1]["matches"]) == ["after", "fresh"]
    with Index.open(store, readonly=True) as idx:  # written into the new store
        assert sorted(idx.match({"j": 1234})) == ["after", "fresh"]


def test_writes_beside_compactions_are_all_kept(
    server: tuple[Any, str], store: Path, subs: dict[Any, str]
) -> None:
    _, url = server
    kept = dict(subs)
    failed: list[Any] = []
    done = {"put": 0, "delete": 0}
    stop = threading.Event()

    def putter() -> None:  # PUTs, and a match now and then, on either worker
        k = 0
        while not stop.is_set():
            status, body, _ = call(url, "PUT", f"/subscriptions/p{k}", {"expr": f"j = {k}"})
            if status == 201:
                kept[f"p{k}"] = f"j = {k}"
                done["put"] += 1
            else:
                failed.append(("PUT", status, body))
            if k % 10 == 0 and call(url, "POST", "/match", {"j": k})[0] != 200:
                failed.append(("match", k))
            k += 1

    def deleter() -> None:
        for ident in list(subs)[:150]:
            if stop.is_set():
                return
            status, body, _ = call(url, "DELETE", f"/subscriptions/{ident}")
            if status == 204:
                del kept[ident]
                done["delete"] += 1
            else:
                failed.append(("DELETE", ident, status, body))
            time.sleep(0.02)  # spread over the compactions

    threads = [threading.Thread(target=putter), threading.Thread(target=deleter)]
    for thread in threads:
        thread.start()

    def wait_for_puts(n: int) -> None:
        deadline = time.monotonic() + 60
        while done["put"] < n and not failed:
            assert time.monotonic() < deadline, "PUTs stopped being answered"
            time.sleep(0.01)

    try:
        for rebuild in (False, True, False):
            wait_for_puts(done["put"] + 5)
            argv = ["-m", "tools.cli", "compact", str(store), *(["--rebuild"] if rebuild else [])]
            proc = subprocess.run(
                [sys.executable, *argv], capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 0, proc.stderr
        wait_for_puts(done["put"] + 5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failed
    assert done["delete"] > 0
    with Index.open(store, readonly=True) as idx:
        assert dict(idx.subscriptions()) == kept
    assert main(["verify", str(store)]) == 0


def test_metrics_and_stats(server: tuple[Any, str], subs: dict[Any, str]) -> None:
    _, url = server
    rng = random.Random(5)
    events = [event(rng) for _ in range(20)]
    matched = sum(len(call(url, "POST", "/match", ev)[1]["matches"]) for ev in events[:10])
    body = call(url, "POST", "/match", {"events": [*events[10:], {"i": "bad"}]})[1]
    matched += sum(len(r.get("matches", ())) for r in body["results"])
    status, text, headers = call(url, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    value = {s.name: s.value for f in families.values() for s in f.samples if not s.labels}
    assert value["bexdb_events_matched_total"] == 20
    assert value["bexdb_events_rejected_total"] == 1
    assert value["bexdb_matches_returned_total"] == matched
    assert value["bexdb_match_seconds_count"] == 20
    assert value["bexdb_event_candidates_count"] == 20
    assert value["bexdb_event_pages_count"] == 20
    assert value["bexdb_subscriptions"] == len(subs)
    assert value["bexdb_store_bytes"] > 0
    requests = {
        (s.labels["route"], s.labels["code"]): s.value for s in families["bexdb_requests"].samples
    }
    assert requests[("/match", "200")] == 11
    stats = call(url, "GET", "/stats")[1]
    assert stats["bexdb_events_matched"] == 20
    assert stats["bexdb_match_seconds"]["count"] == 20
    assert stats["bexdb_subscriptions"] == len(subs)
    assert call(url, "GET", "/healthz")[1]["status"] == "ok"


def metrics_dirs(tmp: Path) -> dict[int, bool]:
    """The services' metrics directories in ``tmp``: owner pid -> whether it lives."""
    from storage.staging import found

    return {
        int(str(s.owner["pid"])): s.live for s in found(tmp / "bexdb-serve") if s.kind == "metrics"
    }


def test_sigterm_drains_the_request_in_hand(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM lets the request in hand finish, then the service ends and its metrics
    directory goes with it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the children's temporary directory
    proc, url = spawn(store, "--workers", "1")
    assert metrics_dirs(tmp_path) == {proc.pid: True}
    where = urlsplit(url)
    idle = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    idle.request("GET", "/healthz")  # a kept-alive connection left idle: it does not hold
    assert idle.getresponse().read()  # up the stop
    rng = random.Random(11)
    events = [event(rng) for _ in range(30_000)]
    answer: list[Any] = []

    def big_batch() -> None:
        answer.append(call(url, "POST", "/match", {"events": events}))

    thread = threading.Thread(target=big_batch)
    thread.start()
    time.sleep(0.5)  # the batch is being matched (it takes seconds)
    assert thread.is_alive(), "the batch was answered before SIGTERM: make it larger"
    proc.send_signal(signal.SIGTERM)
    thread.join(60)
    assert proc.wait(60) == 0
    idle.close()
    status, body, _ = answer[0]
    assert status == 200 and len(body["results"]) == len(events)
    with pytest.raises(ConnectionRefusedError):
        call(url, "GET", "/healthz")
    assert metrics_dirs(tmp_path) == {}


def test_a_sigterm_taken_while_the_worker_boots_stops_it() -> None:
    """A SIGTERM that reaches a worker after gunicorn set its handlers and before the
    worker's loop took SIGTERM over (while it opens the store) only clears ``alive``
    (gunicorn's handler): the loop stops on it at once, rather than serving on until the
    master's graceful timeout kills it (a teardown of this file took 30.2 s)."""
    cfg = Config()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    worker = MatcherWorker(0, os.getppid(), [listener], None, 30, cfg, Logger(cfg))
    worker.alive = False  # what gunicorn's handle_exit does
    handler = signal.getsignal(signal.SIGTERM)
    try:
        asyncio.run(asyncio.wait_for(worker.serve(), 10))  # TimeoutError: it served on
    finally:
        signal.signal(signal.SIGTERM, handler)
        listener.close()
        worker.tmp.close()


def test_a_metrics_directory_left_by_kill_9_is_swept_by_the_next_service(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kill -9`` of the master and its workers leaves the metrics directory (nothing runs
    to remove it): the next service removes it as it starts."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # the children's temporary directory

    def dirs() -> dict[int, bool]:
        return metrics_dirs(tmp)

    killed, url = spawn(store, "--workers", "2")
    call(url, "POST", "/match", {"events": [{"i": 1}]})
    workers(killed, 2)
    os.kill(killed.pid, signal.SIGSTOP)  # the master forks no worker after the list below
    for pid in [killed.pid, *_descendants(killed.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    killed.wait(60)
    deadline = time.monotonic() + 30  # the workers' deaths are not waited for
    while dirs() != {killed.pid: False} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dirs() == {killed.pid: False}  # left behind, unlocked

    proc, url = spawn(store, "--workers", "1")
    try:
        assert dirs() == {proc.pid: True}  # the stale one swept at the start
    finally:
        proc.terminate()
        proc.wait(60)
    assert dirs() == {}


def test_timeout_restarts_a_worker_stuck_in_a_request(store: Path) -> None:
    proc, url = spawn(store, "--workers", "1", "--timeout", "1")
    try:
        before = workers(proc, 1)
        rng = random.Random(12)
        events = [event(rng) for _ in range(120_000)]  # several seconds of matching
        began = time.monotonic()
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            call(url, "POST", "/match", {"events": events})
        assert time.monotonic() - began < 10
        for _ in range(100):  # gunicorn starts a new worker
            if workers(proc, 1) - before:
                break
            time.sleep(0.1)
        assert call(url, "GET", "/healthz")[1]["pid"] not in before
        # the metrics directory outlived the worker: the new one counts, and /metrics sums
        assert call(url, "POST", "/match", {"i": 1})[0] == 200
        assert call(url, "GET", "/stats")[1]["bexdb_events_matched"] >= 1
    finally:
        proc.terminate()
        proc.wait(60)


def test_bench_serve_runs_and_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "serve", "--subs", "400", "--events", "30", "--requests", "120"]
    assert main([*argv, "--concurrency", "4", "--workers", "1", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["answers_agree"] and [r["errors"] for r in results["rows"]] == [0, 0]
    assert (tmp_path / "serve.png").stat().st_size > 0
    assert "| serve | 1 | 120 | 0 |" in capsys.readouterr().out


def test_a_sharded_store_not_split_by_the_hash_is_served_read_only(tmp_path: Path) -> None:
    rng = random.Random(8)
    subs = {i: expression(rng) for i in range(200)}
    root = build_sharded(tmp_path / "sharded", subs)
    before = sorted(p.name for p in Path(root).iterdir())
    proc, url = spawn(root, "--workers", "1")
    try:
        schema = Schema.from_json(SCHEMA)
        for ev in [event(rng) for _ in range(30)]:
            assert set(call(url, "POST", "/match", ev)[1]["matches"]) == brute(subs, schema, ev)
        assert call(url, "GET", "/subscriptions/7")[1] == {"id": 7, "expr": subs[7]}
        assert call(url, "GET", "/subscriptions/700")[0] == 404
        # writes are refused, clearly, and create nothing (no data.mdb beside the manifest)
        for method, path, body in [
            ("PUT", "/subscriptions/7", {"expr": "i = 1"}),
            ("PUT", "/subscriptions/new", {"expr": "i = 1"}),
            ("DELETE", "/subscriptions/7", None),
            ("DELETE", "/subscriptions/700", None),
        ]:
            status, answer, _ = call(url, method, path, body)
            assert status == 409 and "sharded" in answer["error"], (method, path, answer)
            assert "hash" in answer["error"] and answer["hint"]
        assert call(url, "GET", "/subscriptions/7")[1] == {"id": 7, "expr": subs[7]}
        assert call(url, "GET", "/subscriptions/new")[0] == 404
        assert call(url, "GET", "/stats")[1]["bexdb_subscriptions"] == 200
        assert sorted(p.name for p in Path(root).iterdir()) == before
    finally:
        proc.terminate()
        proc.wait(60)


def test_a_hash_sharded_store_takes_writes(tmp_path: Path) -> None:
    """PUT and DELETE on a store sharded by the load's hash: each id in its shard, seen by
    every worker, the same statuses as on a plain store."""
    from betree.stores.sharded import open_index, verify

    rng = random.Random(9)
    subs: dict[Any, str] = {i: expression(rng) for i in range(120)}
    root = build_hashed(tmp_path / "sharded", subs, 3)
    proc, url = spawn(root, "--workers", "2")
    try:
        schema = Schema.from_json(SCHEMA)
        for k in range(40):
            ident: Any = k * 7 if k % 2 else f"n{k}"
            expr = expression(rng)
            status, answer, _ = call(url, "PUT", f"/subscriptions/{ident}", {"expr": expr})
            assert status == (200 if ident in subs else 201), answer
            subs[ident] = expr
        for ident in [7, 14, "n2", 3]:
            assert call(url, "DELETE", f"/subscriptions/{ident}")[0] == 204
            del subs[ident]
        assert call(url, "DELETE", "/subscriptions/7")[0] == 404
        assert call(url, "PUT", "/subscriptions/9", {"expr": "i = "})[0] == 400
        for _ in range(4):  # both workers, whichever answers
            assert call(url, "GET", "/subscriptions/n4")[1] == {"id": "n4", "expr": subs["n4"]}
            assert call(url, "GET", "/subscriptions/7")[0] == 404
        for ev in [event(rng) for _ in range(30)]:
            assert set(call(url, "POST", "/match", ev)[1]["matches"]) == brute(subs, schema, ev)
        assert call(url, "GET", "/stats")[1]["bexdb_subscriptions"] == len(subs)
    finally:
        proc.terminate()
        proc.wait(60)
    verify(root)
    with open_index(root) as store:
        assert dict(store.subscriptions()) == subs
        for i, index in enumerate(store.indexes):
            assert all(shard_for(store, ident) == i for ident, _ in index.subscriptions())


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (the service's workers), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


@pytest.mark.parametrize("seed", [1, 2])
def test_kill_9_of_a_service_writing_a_sharded_store_loses_no_acknowledged_write(
    tmp_path: Path, seed: int
) -> None:
    """PUTs and DELETEs from two clients, then SIGKILL of the master and every worker at a
    random moment: each acknowledged write is in the store, in its hash's shard."""
    from betree.stores.sharded import open_index, verify

    rng = random.Random(seed)
    subs: dict[Any, str] = {f"o{i}": expression(rng) for i in range(60)}
    root = build_hashed(tmp_path / "sharded", subs, 3)
    proc, url = spawn(root, "--workers", "2")
    acked: dict[Any, str | None] = {}  # id -> expression, or None: deleted
    sent: set[Any] = set()
    stop = threading.Event()

    def client(name: str) -> None:
        k = 0
        while not stop.is_set():
            ident, expr = f"{name}{k}", f"i = {k % 50}"
            sent.add(ident)
            try:
                if call(url, "PUT", f"/subscriptions/{ident}", {"expr": expr})[0] == 201:
                    acked[ident] = expr
                victim = f"o{k}"
                if k < 60 and call(url, "DELETE", f"/subscriptions/{victim}")[0] == 204:
                    acked[victim] = None
            except (OSError, http.client.HTTPException):
                return  # the service is gone
            k += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(acked) < rng.randint(20, 80) and time.monotonic() < deadline:
        time.sleep(0.005)
    for pid in [proc.pid, *_descendants(proc.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(60)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert len(acked) >= 20, "the service acknowledged too little to test anything"
    verify(root)
    with open_index(root) as store:
        held = dict(store.subscriptions())
        for ident, expr in acked.items():
            assert held.get(ident) == expr, ident
        assert set(held) <= set(subs) | sent  # nothing from nowhere
        for i, index in enumerate(store.indexes):
            assert all(shard_for(store, ident) == i for ident, _ in index.subscriptions())
        store.check()
