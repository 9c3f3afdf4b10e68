"""``bexdb serve`` against hostile and malformed clients, over raw sockets (issue 13).

A real service (``tools.serve.spawn``) with one worker, and clients written at the socket
level: slow headers, partial bodies, a slowloris trickling a byte a second, connections
that never send anything or never read their answers, half-closed sockets, a hundred held
open at once, while ``/healthz`` and ``/match`` latency are measured against an idle
baseline.  Then every request that is the client's fault (malformed HTTP, JSON, ids,
batches, sizes, methods, paths) must get its 4xx with a JSON ``{"error"}``, never a 500,
and leave the worker up.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import statistics
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from betree.index import Index
from tests.support.workload import SCHEMA, event, expression
from tools.serve import spawn

Answer = tuple[int, dict[str, str], Any]
CHUNKED = b"POST /match HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "store"
    rng = random.Random(21)
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many((i, expression(rng)) for i in range(300))
    return path


def address(url: str) -> tuple[str, int]:
    where = urlsplit(url)
    assert where.hostname is not None and where.port is not None
    return where.hostname, where.port


def connect(url: str, rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect(address(url))
    return sock


class _Stream:
    """A socket's bytes through one buffer, kept between answers.

    ``http.client.HTTPResponse`` reads through a buffer of its own that it drops when the
    answer is read, losing any pipelined answer that came in the same read.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.fp = sock.makefile("rb")

    def makefile(self, mode: str) -> _Stream:
        return self

    def readline(self, limit: int = -1) -> bytes:
        return self.fp.readline(limit)

    def read(self, n: int = -1) -> bytes:
        return self.fp.read(n)

    def readinto(self, buffer: Any) -> int | None:
        return self.fp.readinto(buffer)

    def close(self) -> None:
        pass


_streams: weakref.WeakKeyDictionary[socket.socket, _Stream] = weakref.WeakKeyDictionary()


def read_answer(sock: socket.socket, method: str = "GET") -> Answer:
    """One HTTP answer from ``sock``: status, headers (lower-case names), decoded body."""
    stream = _streams.setdefault(sock, _Stream(sock))
    resp = http.client.HTTPResponse(stream, method=method)  # type: ignore[arg-type]
    resp.begin()
    raw = resp.read()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    body: Any = raw
    if headers.get("content-type", "").startswith("application/json") and raw:
        body = json.loads(raw)
    return resp.status, headers, body


def exchange(url: str, raw: bytes, *, half_close: bool = False, method: str = "GET") -> Answer:
    """Send ``raw`` bytes on a new connection (then shut our side if asked); read one answer."""
    with connect(url) as sock:
        sock.sendall(raw)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        return read_answer(sock, method)


def request(method: str, path: str, body: bytes = b"", *extra: str) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: test", *extra]
    if body or method in ("POST", "PUT"):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


# -- slow and hostile clients ------------------------------------------------------------


@pytest.fixture(scope="module")
def patient(store: Path) -> Iterator[str]:
    """One worker, with deadlines far beyond the test (held connections stay held)."""
    proc, url = spawn(store, "--workers", "1", "--timeout", "60", "--keepalive", "60")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(60)


def latencies(url: str, rounds: int) -> dict[str, list[float]]:
    """Seconds per ``GET /healthz`` and per ``POST /match``, on one kept-alive connection."""
    rng = random.Random(4)
    bodies = [json.dumps(event(rng)).encode() for _ in range(rounds)]
    seconds: dict[str, list[float]] = {"healthz": [], "match": []}
    with connect(url) as sock:
        for body in bodies:
            for name, raw, method in [
                ("healthz", request("GET", "/healthz"), "GET"),
                ("match", request("POST", "/match", body), "POST"),
            ]:
                start = time.perf_counter()
                sock.sendall(raw)
                status, _, _ = read_answer(sock, method)
                seconds[name].append(time.perf_counter() - start)
                assert status == 200
    return seconds


def test_slow_and_hostile_clients_hold_up_no_one(patient: str) -> None:
    url = patient
    latencies(url, 10)  # warm the worker's cache
    idle = latencies(url, 40)
    held: list[socket.socket] = []
    trickled: list[socket.socket] = []
    stop = threading.Event()
    try:
        for _ in range(25):  # headers begun, never finished
            sock = connect(url)
            sock.sendall(b"POST /match HTTP/1.1\r\nHost: x\r\n")
            held.append(sock)
        for _ in range(25):  # a body announced, one byte of it sent
            sock = connect(url)
            sock.sendall(b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            held.append(sock)
        for _ in range(25):  # never a byte
            held.append(connect(url))
        for _ in range(15):  # a slowloris: one byte a second each
            sock = connect(url)
            trickled.append(sock)
        for _ in range(10):  # many requests pipelined, the answers never read
            sock = connect(url, rcvbuf=4096)
            sock.sendall(request("GET", "/subscriptions/1") * 300)
            held.append(sock)
        wire = request("POST", "/match", json.dumps({"i": 3}).encode())

        def trickle() -> None:
            at = 0
            while not stop.wait(1.0) and at < len(wire):
                for sock in trickled:
                    sock.send(wire[at : at + 1])
                at += 1

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        time.sleep(0.5)  # the pipelined requests are answered (into full buffers)
        hostile = latencies(url, 40)
        for sock in held[:50]:  # every slow client is still connected, waiting
            sock.settimeout(0)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
    finally:
        stop.set()
        for sock in held + trickled:
            sock.close()
    for name in ("healthz", "match"):
        before, during = statistics.median(idle[name]), statistics.median(hostile[name])
        print(f"{name}: median {before * 1e3:.2f} ms idle, {during * 1e3:.2f} ms with 100 held")
        # generous: the machine is shared; a stalled worker would take the whole --timeout
        assert during < before + 0.05, (name, before, during)
        assert max(hostile[name]) < 2.0, (name, max(hostile[name]))


def test_half_closed_clients_get_their_answer(patient: str) -> None:
    url = patient
    # a whole request, then our side shut: answered, then closed
    status, _, body = exchange(url, request("GET", "/healthz"), half_close=True)
    assert status == 200 and body["status"] == "ok"
    # half a body, then our side shut: the request can never complete
    raw = b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
    status, headers, body = exchange(url, raw, half_close=True)
    assert status == 400 and "error" in body and headers["connection"] == "close"
    # a chunked body without its terminating chunk, then our side shut
    status, _, body = exchange(url, CHUNKED + b"2\r\n{}\r\n", half_close=True)
    assert status == 400 and "error" in body
    # nothing sent, our side shut: closed without an answer
    with connect(url) as sock:
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""


# -- deadlines ---------------------------------------------------------------------------


def test_idle_and_unfinished_connections_are_ended(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # where gunicorn would put a control socket
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    proc, url = spawn(store, "--workers", "1", "--timeout", "2", "--keepalive", "1")
    try:
        silent = connect(url)
        partial = connect(url)
        sent = time.monotonic()
        partial.sendall(b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        kept = connect(url)
        kept.sendall(request("GET", "/healthz"))
        assert read_answer(kept)[0] == 200
        began = time.monotonic()
        assert silent.recv(100) == b""  # closed after --keepalive, unanswered
        assert kept.recv(100) == b""  # idle after an answer: the same
        assert time.monotonic() - began < 5
        status, headers, body = read_answer(partial)  # not in full after --timeout: 408
        assert status == 408 and "did not arrive in 2 s" in body["error"], body
        assert time.monotonic() - sent >= 2  # (gunicorn hands its workers half the timeout)
        assert headers["connection"] == "close"
        assert time.monotonic() - began < 8
        for sock in (silent, partial, kept):
            sock.close()
        assert list(tmp_path.iterdir()) == []  # no control socket left for others to take
    finally:
        proc.terminate()
        proc.wait(60)


# -- the client's faults are 4xx, with a JSON error ----------------------------------------


def test_client_faults_are_4xx_with_a_json_error(patient: str) -> None:
    url = patient
    _, _, health = exchange(url, request("GET", "/healthz"))
    deep = b"[" * 100_000 + b"]" * 100_000
    event_json = json.dumps({"i": 3}).encode()
    cases: list[tuple[str, bytes, int, str]] = [
        # (what, raw request, status, a word of the error)
        (
            "lone surrogate id",
            request("PUT", "/subscriptions/%22%5Cud800%22", b'{"expr": "i = 1"}'),
            400,
            "Unicode",
        ),
        ("lone surrogate id, GET", request("GET", "/subscriptions/%22%5Cud800%22"), 400, "id"),
        ("non-UTF-8 path", request("GET", "/subscriptions/%ff"), 400, "UTF-8"),
        ("id of 5,000 digits", request("GET", "/subscriptions/" + "9" * 5000), 400, "id"),
        (
            "bad chunk size",
            CHUNKED + b"zz\r\n{}\r\n0\r\n\r\n",
            400,
            "HTTP",
        ),
        ("events not a list", request("POST", "/match", b'{"events": 5}'), 400, "list"),
        (
            "events beside other keys",
            request("POST", "/match", b'{"events": [{"i": 1}], "a2": 4}'),
            400,
            '"a2"',
        ),
        ("invalid JSON", request("POST", "/match", b'{"i": 3,'), 400, "column"),
        ("non-UTF-8 body", request("POST", "/match", b'{"s": "\xff"}'), 400, "UTF-8"),
        ("JSON nested 100,000 deep", request("POST", "/match", deep), 400, "deeply"),
        ("NaN", request("POST", "/match", b'{"f": NaN}'), 400, "NaN"),
        ("Infinity", request("POST", "/match", b'{"f": -Infinity}'), 400, "Infinity"),
        (
            "NaN beside an expression",
            request("PUT", "/subscriptions/nan", b'{"expr": "i = 1", "x": NaN}'),
            400,
            "NaN",
        ),
        (
            "a number past the digit limit",
            request("POST", "/match", b'{"j": ' + b"1" * 5000 + b"}"),
            400,
            "JSON",
        ),
        (
            "huge Content-Length",
            b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
            413,
            "over",
        ),
        (
            "bad Content-Length",
            b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n{}",
            400,
            "Content-Length",
        ),
        (
            "two Content-Lengths",
            b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            400,
            "HTTP",
        ),
        ("unknown method", request("BREW", "/healthz"), 405, "BREW"),
        ("PATCH", request("PATCH", "/subscriptions/1", b"{}"), 405, "PATCH"),
        ("bad path", request("GET", "/nowhere"), 404, "/nowhere"),
        ("bad path, POST", request("POST", "/match/more", event_json), 404, "no such"),
        ("garbage request line", b"HELLO\r\n\r\n", 400, "HTTP"),
        (
            "headers of 1 MB",
            request("GET", "/healthz", b"", "X-Big: " + "a" * (1 << 20)),
            431,
            "64 KiB",
        ),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "HTTP/2.0"),
    ]
    for what, raw, status, word in cases:
        got, headers, body = exchange(url, raw)
        assert got == status, (what, got, body)
        assert isinstance(body, dict) and isinstance(body.get("error"), str), (what, body)
        assert word in body["error"], (what, body)
        assert headers["content-type"] == "application/json"
    # 405 names what is allowed
    assert exchange(url, request("BREW", "/healthz"))[1]["allow"] == "GET, HEAD"
    allow = exchange(url, request("PATCH", "/subscriptions/1"))[1]["allow"]
    assert allow == "GET, PUT, DELETE, HEAD"
    # JSON errors name the column
    assert exchange(url, request("POST", "/match", b'{"i": 3,'))[2]["column"] == 9
    # nothing was written by the refused writes
    assert exchange(url, request("GET", "/subscriptions/nan"))[0] == 404
    # a batch is an object whose only key is "events"
    status, _, body = exchange(url, request("POST", "/match", b'{"events": [{"i": 1}, 2]}'))
    assert status == 200 and "matches" in body["results"][0] and "error" in body["results"][1]
    # the worker lived through it all
    assert exchange(url, request("GET", "/healthz"))[2]["pid"] == health["pid"]


def test_head_expect_and_keep_alive_after_errors(patient: str) -> None:
    url = patient
    with connect(url) as sock:
        sock.sendall(request("HEAD", "/healthz"))
        status, headers, body = read_answer(sock, "HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0
        sock.sendall(request("HEAD", "/subscriptions/1"))
        assert read_answer(sock, "HEAD")[0] == 200
        # an error that leaves the request whole keeps the connection
        sock.sendall(request("POST", "/match", b'{"events": 5}'))
        assert read_answer(sock, "POST")[0] == 400
        # Expect: 100-continue is answered before the body is sent
        sock.sendall(
            b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\nExpect: 100-continue\r\n\r\n"
        )
        stream = _streams.setdefault(sock, _Stream(sock))
        assert stream.readline().startswith(b"HTTP/1.1 100 ") and stream.readline() == b"\r\n"
        sock.sendall(b'{"i": 3}')
        status, _, body = read_answer(sock, "POST")
        assert status == 200 and "matches" in body
        # pipelined requests are answered in order
        sock.sendall(request("GET", "/healthz") + request("GET", "/subscriptions/nosuch"))
        assert read_answer(sock)[0] == 200
        assert read_answer(sock)[0] == 404


# -- issue 28, defect 8 --------------------------------------------------------------------


def test_headers_over_64_kib_in_one_read_are_431(patient: str) -> None:
    # 70,000 bytes of headers in many lines, sent at once: h11's own limit sees only a
    # block still incomplete, so a block that arrives whole in one or two reads passed
    lines = [f"X-Pad-{i}: " + "a" * 990 for i in range(70)]
    status, headers, body = exchange(patient, request("GET", "/healthz", b"", *lines))
    assert status == 431 and "64 KiB" in body["error"]
    assert headers["connection"] == "close"
    # just under the limit is answered
    lines = [f"X-Pad-{i}: " + "a" * 990 for i in range(60)]
    assert exchange(patient, request("GET", "/healthz", b"", *lines))[0] == 200


def test_content_length_beside_chunked_is_400(patient: str) -> None:
    # a client framing by Content-Length while h11 reads chunks waited forever
    raw = (
        b"POST /match HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + json.dumps({"i": 3}).encode()
    )
    status, headers, body = exchange(patient, raw)
    assert status == 400 and "Transfer-Encoding" in body["error"]
    assert headers["connection"] == "close"


def test_http_versions_other_than_1_x_are_505(patient: str) -> None:
    for version in ("2.0", "3.0", "0.9"):
        raw = f"GET /healthz HTTP/{version}\r\nHost: x\r\n\r\n".encode()
        status, _, body = exchange(patient, raw)
        assert status == 505 and version in body["error"], (version, status, body)
    for version in ("1.0", "1.1"):
        raw = f"GET /healthz HTTP/{version}\r\nHost: x\r\n\r\n".encode()
        assert exchange(patient, raw)[0] == 200


def test_the_empty_id_in_a_path_is_400(patient: str) -> None:
    for method in ("PUT", "GET", "DELETE"):
        status, _, body = exchange(
            patient, request(method, "/subscriptions/", b'{"expr": "i = 1"}'), method=method
        )
        assert status == 400 and "empty" in body["error"], (method, status, body)
    # nothing was created; the explicit JSON form still names the id "" (load takes it)
    assert exchange(patient, request("GET", "/subscriptions/%22%22"))[0] == 404
