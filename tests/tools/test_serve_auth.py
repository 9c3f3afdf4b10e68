"""``bexdb serve --auth-file`` and ``--certfile/--keyfile``, over real sockets.

Bearer tokens: 401 without a valid one (whatever is wrong with it), 403 for a read token
writing (nothing written), every verb open to a write token, ``/healthz`` open to all; no
token in the service's logs (read back from its stdout and stderr, with ``--verbose``).
TLS: a certificate made here by ``openssl`` (skipped only without it), a client that
trusts it talks HTTPS (kept-alive, with tokens), one that does not is refused, and plain
HTTP on the port gets no answer, and clients that never begin a handshake hold up no one.
"""

from __future__ import annotations

import http.client
import json
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from betree.index import Index
from tests.support.workload import SCHEMA
from tools.serve import spawn

READ_TOKEN = "r-" + secrets.token_urlsafe(24)
WRITE_TOKEN = "w-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "store"
    with Index.open(path, schema=SCHEMA) as idx:
        idx.subscribe_many([(1, "i = 1"), ("s2", "i = 2 or j = 2")])
    return path


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text(f"# who may do what\n{READ_TOKEN} read\n\n  {WRITE_TOKEN}   write\n")
    return path


def call(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    *,
    scheme: str = "Bearer",
    context: ssl.SSLContext | None = None,
) -> tuple[int, Any, dict[str, str]]:
    where = urlsplit(url)
    conn: http.client.HTTPConnection
    if where.scheme == "https":
        conn = http.client.HTTPSConnection(where.hostname, where.port, timeout=60, context=context)
    else:
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    headers = {} if token is None else {"Authorization": f"{scheme} {token}"}
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    return resp.status, json.loads(raw) if raw else None, dict(resp.getheaders())


def bexdb_serve(*argv: str) -> subprocess.CompletedProcess[str]:
    """``bexdb serve`` that is expected to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "serve", *argv, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_tokens_read_and_write_and_never_logged(store: Path, tokens: Path, tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        proc, url = spawn(
            store, "--workers", "1", "--verbose", "--auth-file", str(tokens), stderr=err
        )
    try:
        # no token, or not a valid one: 401 on every route but /healthz
        for token, scheme in [
            (None, "Bearer"),
            ("nope", "Bearer"),
            (READ_TOKEN[:-1], "Bearer"),
            (READ_TOKEN + "x", "Bearer"),
            (READ_TOKEN, "Basic"),
            ("", "Bearer"),
        ]:
            for method, path, body in [
                ("GET", "/subscriptions/1", None),
                ("POST", "/match", {"i": 1}),
                ("PUT", "/subscriptions/9", {"expr": "i = 9"}),
                ("GET", "/metrics", None),
                ("GET", "/nowhere", None),
            ]:
                status, answer, headers = call(url, method, path, body, token, scheme=scheme)
                assert status == 401 and "token" in answer["error"], (token, method, path)
                assert headers["WWW-Authenticate"].startswith("Bearer")
        assert call(url, "GET", "/healthz")[0] == 200
        # a read token reads, and may not write: 403, nothing written
        for method, path, body in [
            ("GET", "/subscriptions/1", None),
            ("GET", "/subscriptions", None),
            ("POST", "/match", {"i": 2}),
            ("POST", "/validate", {"id": 3, "expr": "i = 3"}),
            ("POST", "/explain", {"id": 1, "event": {"i": 1}}),
            ("GET", "/stats", None),
        ]:
            assert call(url, method, path, body, READ_TOKEN)[0] == 200, path
        assert call(url, "POST", "/match", {"i": 2}, READ_TOKEN, scheme="bearer")[0] == 200
        for method, path, body in [
            ("PUT", "/subscriptions/9", {"expr": "i = 9"}),
            ("DELETE", "/subscriptions/1", None),
            ("POST", "/subscriptions", {"id": 9, "expr": "i = 9"}),
        ]:
            status, answer, _ = call(url, method, path, body, READ_TOKEN)
            assert status == 403 and "read, not write" in answer["error"], (method, path)
        listed = call(url, "GET", "/subscriptions", None, READ_TOKEN)[1]["subscriptions"]
        assert [r["id"] for r in listed] == [1, "s2"]
        # a write token does everything
        assert call(url, "PUT", "/subscriptions/9", {"expr": "i = 9"}, WRITE_TOKEN)[0] == 201
        assert call(url, "POST", "/match", {"i": 9}, WRITE_TOKEN)[1] == {"matches": [9]}
        body = {"id": 10, "expr": "i = 10"}
        assert call(url, "POST", "/subscriptions", body, WRITE_TOKEN)[1]["written"] == 1
        assert call(url, "DELETE", "/subscriptions/9", None, WRITE_TOKEN)[0] == 204
        assert call(url, "DELETE", "/subscriptions/10", None, WRITE_TOKEN)[0] == 204
    finally:
        proc.terminate()
        proc.wait(60)
    assert proc.stdout is not None
    logged = proc.stdout.read() + log.read_text()
    assert '"PUT /subscriptions/9" 403' in logged and '"PUT /subscriptions/9" 201' in logged
    assert READ_TOKEN not in logged and WRITE_TOKEN not in logged
    assert READ_TOKEN[:-1] not in logged


def test_bad_auth_files_are_usage_errors(store: Path, tmp_path: Path) -> None:
    secret = "s-" + secrets.token_urlsafe(16)
    for text, word in [
        (f"{secret} readonly\n", "line 1: expected TOKEN read|write"),
        (f"# x\n{secret}\n", "line 2"),
        (f"{secret} read\n{secret} write\n", "two roles"),
        ("# nothing\n\n", "no tokens"),
        (f"{secret}\u00e9 read\n", "printable ASCII"),
    ]:
        path = tmp_path / "tokens"
        path.write_text(text)
        done = bexdb_serve(str(store), "--auth-file", str(path))
        assert done.returncode == 2 and word in done.stderr, (text, done.stderr)
        assert secret not in done.stderr + done.stdout
    done = bexdb_serve(str(store), "--auth-file", str(tmp_path / "missing"))
    assert done.returncode == 2 and "cannot read" in done.stderr


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A self-signed certificate for 127.0.0.1 and its key, made by ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a test certificate with")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2"),
            *("-subj", "/CN=bexdb test", "-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    yield cert, key


def test_tls(store: Path, tokens: Path, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    proc, url = spawn(
        store,
        *("--workers", "1", "--auth-file", str(tokens)),
        *("--certfile", str(cert), "--keyfile", str(key)),
    )
    try:
        assert url.startswith("https://127.0.0.1:")
        trusting = ssl.create_default_context(cafile=str(cert))
        status, answer, _ = call(url, "POST", "/match", {"i": 1}, READ_TOKEN, context=trusting)
        assert (status, answer) == (200, {"matches": [1]})
        assert call(url, "POST", "/match", {"i": 1}, None, context=trusting)[0] == 401
        # kept alive over TLS
        where = urlsplit(url)
        conn = http.client.HTTPSConnection(where.hostname, where.port, context=trusting)
        for _ in range(3):
            conn.request("GET", "/healthz")
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["status"] == "ok"
        conn.close()
        # clients that connect and never begin a handshake hold up no one
        assert where.hostname is not None and where.port is not None
        silent = [socket.create_connection((where.hostname, where.port)) for _ in range(10)]
        try:
            status, answer, _ = call(url, "POST", "/match", {"i": 2}, READ_TOKEN, context=trusting)
            assert (status, answer) == (200, {"matches": ["s2"]})
        finally:
            for raw in silent:
                raw.close()
        # a client that does not trust the certificate is refused by its own check
        with pytest.raises(ssl.SSLCertVerificationError):
            call(url, "GET", "/healthz", context=ssl.create_default_context())
        # plain HTTP on the TLS port: no HTTP answer
        with socket.create_connection((where.hostname, where.port), timeout=30) as raw:
            raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                got = raw.recv(100)
            except ConnectionResetError:
                got = b""
            assert not got.startswith(b"HTTP/1.1 200")
        assert call(url, "GET", "/healthz", context=trusting)[0] == 200  # the worker lives on
    finally:
        proc.terminate()
        proc.wait(60)


def test_tls_options_are_checked_at_start(
    store: Path, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, key = certificate
    done = bexdb_serve(str(store), "--certfile", str(cert))
    assert done.returncode == 2 and "go together" in done.stderr
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    done = bexdb_serve(str(store), "--certfile", str(bad), "--keyfile", str(key))
    assert done.returncode == 2 and "cannot load" in done.stderr
