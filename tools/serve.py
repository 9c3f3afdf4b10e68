"""``bexdb serve``: the matcher service of SPEC section 7, on gunicorn.

gunicorn's master process forks ``--workers`` workers (default: one per core) that share
the listening socket; each opens the store on its own (LMDB allows many reading processes,
and serialises writers across processes with its lock, so ``PUT``/``DELETE`` from any
worker, ``bexdb subscribe`` and the service never interleave) and answers one request at a
time.  Matching is CPU-bound Python, so processes, not threads, are what scales it across
cores.

* **Connections** are kept alive (HTTP/1.1; an idle one is closed after ``--keepalive``
  seconds), and a worker answers the requests of its connections on its main thread (see
  :func:`_worker_class`).  The ``sync`` workers used before closed every connection after
  one answer: a client reconnecting for each request spent about 0.4 ms of CPU per request
  against 0.1 ms on a kept-alive connection, CPU the workers need on a machine with a core
  per worker (``bexdb bench serve`` records the client's CPU and the workers').  A busy
  worker takes no new connection; the connections it has stay with it, so the workers
  share the load by connection.  ``--timeout`` bounds a request: a worker that has not
  finished one in that time is restarted (its client's connection is closed unanswered).
* **Freshness.** Each request reads in a new LMDB snapshot, so every committed write is
  seen at once; the page cache is validated by generation, not flushed.  A store replaced
  by ``bexdb load --replace`` or ``bexdb compact`` is a new directory: a worker notices by
  the inode of the store's data file (one ``stat`` per request, about 2 µs) and reopens
  it; while the replacement is half-way (old renamed away, new not yet in) it keeps the
  old one.  A ``PUT`` or ``DELETE`` that a compaction overtakes (it waited on the writer
  lock, then found the store it had open retired: ``StoreReplaced``, nothing written) is
  redone once in the reopened store, so no acknowledged write is lost; a second
  replacement in that time answers 503.
* **Durability.** A write is committed with fsync before it is answered.
* **Memory** is bounded per worker by the decoded-page cache (``--cache-mb``); nothing
  grows per request (the body is read up to ``--max-body-mb``, else 413: answered without
  reading the body, after which gunicorn closes that connection, as it drains at most
  64 KiB of a body the application left unread).
* **Errors** become a JSON body ``{"error": ..., "column": ...}`` with a 4xx status
  (a 500 for the unexpected, logged with its traceback); no request takes a worker down.
* **SIGTERM** (gunicorn's graceful stop) closes the socket, lets each worker finish the
  request in hand (up to ``--graceful-timeout`` seconds; a request arriving meanwhile on a
  kept-alive connection, within 2 s, is answered with ``Connection: close``), then exits 0.

Subscription ids in URLs follow the command line's rule (``tools.cli.parse_id``):
``/subscriptions/5`` is the integer id 5, ``/subscriptions/s1`` the string ``"s1"``, and
``/subscriptions/%225%22`` (``"5"`` URL-encoded) the string ``"5"``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from storage.errors import BexdbError, InvalidInput, StoreDamaged, StoreReplaced

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
Answer = tuple[int, Any]  # status and a JSON-able body (bytes are sent as they are)

_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_SUBS = "/subscriptions/"
_FIRST_REQUEST_WAIT = 0.02  # seconds a worker waits for the request of a new connection


class HTTPError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


def _invalid(exc: InvalidInput) -> HTTPError:
    extra: dict[str, Any] = {}
    if exc.column is not None:
        extra["column"] = exc.column
    if exc.hint:
        extra["hint"] = exc.hint
    return HTTPError(400, exc.message, **extra)


def _identity(probes: list[str]) -> tuple[int, int] | None:
    """What names the store now: the inode of the first of ``probes`` that exists.

    ``probes`` are the store's data file and its sharded manifest, the one that named the
    store last first: a plain store costs one ``stat`` (about 2 µs), not a failed one first.
    """
    for i, probe in enumerate(probes):
        try:
            st = os.stat(probe)
        except FileNotFoundError:
            continue
        if i:
            probes.insert(0, probes.pop(i))
        return st.st_dev, st.st_ino
    return None


class Service:
    """The WSGI application of one worker: routes, the open store, reopening on replace."""

    def __init__(self, path: str, cache_bytes: int, max_body: int) -> None:
        self.path = Path(path)
        self.cache_bytes = cache_bytes
        self.max_body = max_body
        self.reader: Any = None
        self.index: Any = None  # the writable Index of a plain store; None when sharded
        self.ident: tuple[int, int] | None = None
        from loaders.shards import MANIFEST

        self.probes = [str(self.path / "data.mdb"), str(self.path / MANIFEST)]

    # -- the store -----------------------------------------------------------------------

    def current(self, reopen: bool = False) -> Any:
        """The reader of the store now at ``path``, reopened if the store was replaced.

        ``reopen``: whatever the inode says (the store open here was found retired); then
        a store that cannot be opened is a 503, not a reason to keep the old one.
        """
        ident = _identity(self.probes)
        if self.reader is not None and not reopen and (ident is None or ident == self.ident):
            return self.reader
        from betree.index import Index
        from loaders.shards import SingleReader, is_sharded, open_any

        try:
            if is_sharded(self.path):
                reader, index = open_any(self.path, cache_bytes=self.cache_bytes), None
            else:
                index = Index.open(self.path, cache_bytes=self.cache_bytes)
                reader = SingleReader(index)
        except (BexdbError, OSError) as exc:
            if self.reader is not None and not reopen:  # a replacement under way: keep it
                return self.reader
            raise HTTPError(503, f"cannot open the store: {exc}") from exc
        if self.reader is not None:
            self.reader.close()
        self.reader, self.index, self.ident = reader, index, ident
        return reader

    def figures(self) -> tuple[int, int]:
        """Subscriptions and bytes on disk, for the gauges of /metrics and /stats."""
        reader = self.current()
        indexes = reader.shards if self.index is None else [self.index]
        return len(reader), sum(i.store.size_on_disk() for i in indexes)

    # -- WSGI ----------------------------------------------------------------------------

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        from tools import metrics

        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")
        route = _SUBS + "{id}" if path.startswith(_SUBS) else path
        try:
            status, body = self.dispatch(method, path, environ)
        except HTTPError as exc:
            status, body = exc.status, exc.body
        except InvalidInput as exc:
            status, body = 400, _invalid(exc).body
        except StoreDamaged as exc:  # the request read damage: say so, no traceback
            status, body = 500, {"error": exc.message, "hint": exc.hint}
        except Exception as exc:  # a failing request never takes a worker down
            traceback.print_exc(file=sys.stderr)
            status, body = 500, {"error": f"internal error: {type(exc).__name__}: {exc}"}
        if route not in _ROUTES:
            route = "other"
        metrics.REQUESTS.labels(method, route, str(status)).inc()
        headers = [("Content-Type", "application/json")]
        if isinstance(body, bytes):
            data, headers = body, [("Content-Type", metrics.CONTENT_TYPE)]
        elif status == 204:
            data = b""
        else:
            data = json.dumps(body).encode()
        if status == 405:
            headers.append(("Allow", ", ".join(_ROUTES.get(route, ()))))
        headers.append(("Content-Length", str(len(data))))
        start_response(f"{status} {_REASONS[status]}", headers)
        return [data]

    def dispatch(self, method: str, path: str, environ: Environ) -> Answer:
        route = _SUBS + "{id}" if path.startswith(_SUBS) else path
        allowed = _ROUTES.get(route)
        if allowed is None:
            raise HTTPError(404, f"no such resource: {path}")
        if method not in allowed:
            raise HTTPError(405, f"{method} is not allowed on {route}")
        if route == "/healthz":
            return 200, {"status": "ok", "pid": os.getpid()}
        if route == "/match":
            return self.match(self._json(environ))
        if route in ("/metrics", "/stats"):
            from tools import metrics

            subs, size = self.figures()
            if route == "/metrics":
                return 200, metrics.prometheus_text(subs, size)
            return 200, metrics.as_json(subs, size)
        from tools.cli import parse_id

        ident = parse_id(path[len(_SUBS) :])
        if method == "GET":
            return self.get(ident)
        if method == "DELETE":
            return self.delete(ident)
        return self.put(ident, self._json(environ))

    def _json(self, environ: Environ) -> Any:
        """The request body as JSON, at most ``max_body`` bytes."""
        length = environ.get("CONTENT_LENGTH") or ""
        if length and int(length) > self.max_body:
            raise HTTPError(413, f"request body over {self.max_body} bytes")
        data = environ["wsgi.input"].read(int(length) if length else self.max_body + 1)
        if len(data) > self.max_body:
            raise HTTPError(413, f"request body over {self.max_body} bytes")
        try:
            return json.loads(data)
        except UnicodeDecodeError as exc:
            raise HTTPError(400, f"the body is not UTF-8: {exc.reason}") from exc
        except json.JSONDecodeError as exc:
            raise HTTPError(
                400, f"malformed JSON: {exc.msg} at column {exc.colno}", column=exc.colno
            ) from exc
        except RecursionError:
            raise HTTPError(400, "malformed JSON: nested too deeply") from None

    # -- the routes ----------------------------------------------------------------------

    def match(self, body: Any) -> Answer:
        """One event, or ``{"events": [...]}`` (one snapshot; bad events answered in place)."""
        from tools import metrics

        batch = isinstance(body, dict) and len(body) == 1 and isinstance(body.get("events"), list)
        events = body["events"] if batch else [body]
        reader = self.current()
        indexes = reader.shards if self.index is None else [self.index]
        results: list[dict[str, Any]] = []
        with reader.snapshot() as match:
            for event in events:
                try:
                    if not isinstance(event, dict):
                        raise InvalidInput("an event must be a JSON object")
                    values = reader.schema.validate_event(event)
                except InvalidInput as exc:
                    if not batch:
                        raise
                    metrics.REJECTED.inc()
                    results.append({"error": exc.message})
                    continue
                start = time.perf_counter()
                found = match(values)
                metrics.LATENCY.observe(time.perf_counter() - start)
                metrics.CANDIDATES.observe(sum(i.last_stats["candidates"] for i in indexes))
                metrics.PAGES.observe(sum(i.last_stats["pages"] for i in indexes))
                metrics.EVENTS.inc()
                metrics.MATCHES.inc(len(found))
                results.append({"matches": found})
        return 200, ({"results": results} if batch else results[0])

    def get(self, ident: Any) -> Answer:
        reader = self.current()
        for index in reader.shards if self.index is None else [self.index]:
            expr = index.expression(ident)
            if expr is not None:
                return 200, {"id": ident, "expr": expr}
        raise HTTPError(404, f"no subscription {ident!r}")

    def put(self, ident: Any, body: Any) -> Answer:
        if not isinstance(body, dict) or not isinstance(body.get("expr"), str):
            raise HTTPError(400, 'the body must be a JSON object {"expr": "..."}')
        created = self._write(lambda index: index.subscribe(ident, body["expr"]))
        return (201 if created else 200), {"id": ident, "created": created}

    def delete(self, ident: Any) -> Answer:
        if not self._write(lambda index: index.unsubscribe(ident)):
            raise HTTPError(404, f"no subscription {ident!r}")
        return 204, None

    def _write(self, write: Callable[[Any], Any]) -> Any:
        """``write(index)`` in the store at ``path``, redone once if it was replaced.

        ``StoreReplaced`` means a compaction swapped a new store in while this worker had
        the old one open, and nothing was written: the worker reopens the path and writes
        there.  Costs nothing unless it happens.
        """
        self._writable()
        try:
            return write(self.index)
        except StoreReplaced:
            self._writable(reopen=True)
        try:
            return write(self.index)
        except StoreReplaced as exc:
            raise HTTPError(503, f"{exc.message}, twice; retry", hint=exc.hint) from exc

    def _writable(self, reopen: bool = False) -> None:
        self.current(reopen)
        if self.index is None:
            raise HTTPError(
                405,
                "a sharded store (bexdb load --shards) is read-only here",
                hint="rebuild it with bexdb load, or write to a plain store",
            )


_ROUTES: dict[str, tuple[str, ...]] = {
    "/match": ("POST",),
    _SUBS + "{id}": ("GET", "PUT", "DELETE"),
    "/stats": ("GET",),
    "/healthz": ("GET",),
    "/metrics": ("GET",),
}


# -- running -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Check the store, then run gunicorn until SIGTERM/SIGINT."""
    from gunicorn.app.base import BaseApplication

    from loaders.shards import open_any

    with open_any(args.store):  # fail here, in the master, not in every worker
        pass
    options = {
        "bind": f"{args.host}:{args.port}",
        "workers": args.workers,
        "worker_class": _worker_class(),
        "keepalive": args.keepalive,
        "timeout": args.timeout,
        "graceful_timeout": args.graceful_timeout,
        "loglevel": "info" if args.verbose else "warning",
        "accesslog": "-" if args.verbose else None,
        "when_ready": _announce,
        "post_worker_init": _warm,
    }
    service_args = (args.store, args.cache_mb << 20, args.max_body_mb << 20)

    class _App(BaseApplication):  # type: ignore[misc]  # gunicorn's documented custom app
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Service:
            return Service(*service_args)

    _App().run()
    return 0


def _worker_class() -> type:
    """gunicorn's ``gthread`` worker, with each request answered on its main thread.

    ``gthread`` keeps connections alive: its main thread polls the listening socket and the
    idle connections, and hands each request to a pool thread.  With one request at a time
    per process (matching holds the GIL) the pool only adds cost: every request crosses two
    threads and a wake-up pipe, and the main thread, woken by the next request while a
    match runs, contends for the GIL (the process used 1.08 cores for one core's work).
    Measured with ``bexdb bench serve``'s client at 100,000 subscriptions, 32 connections,
    on the 2-core machine, nothing else running: one worker answered 540-550 requests/s at
    1.8 ms of server CPU each, against 470-490 at 2.2-2.3 ms with the pool thread (and
    410-450 at 2.1 ms with the ``sync`` worker, whose client paid 0.4 ms per request to
    reconnect); two workers 920-1,000 against 850-940.

    On its main thread a worker also works as a ``sync`` one does: it takes no new
    connection while it answers (so a burst of connections spreads over the workers instead
    of landing on whichever polled first), and its heartbeat waits for the request, so
    ``--timeout`` bounds a request.  The request of a new connection is awaited at most
    ``_FIRST_REQUEST_WAIT`` (it comes right behind the handshake); a silent connection is
    polled instead, so it holds up no one.

    It overrides ``ThreadWorker.enqueue_req``, an internal of gunicorn 27 (hence the lower
    bound in pyproject.toml); the service's tests run it under real gunicorn.
    """
    from concurrent.futures import Future

    from gunicorn.workers.gthread import _DEFER, ThreadWorker

    class MatcherWorker(ThreadWorker):  # type: ignore[misc]
        def enqueue_req(self, conn: Any) -> None:
            done: Future[Any] = Future()
            if not conn.data_ready and not conn.wait_for_data(_FIRST_REQUEST_WAIT):
                done.set_result(_DEFER)  # a silent new connection: polled until it speaks
            else:
                try:
                    done.set_result(self.handle(conn))
                except Exception as exc:  # handle() catches its own; closes the connection
                    done.set_exception(exc)
            self.finish_request(conn, done)

    return MatcherWorker


def _announce(server: Any) -> None:
    where = ", ".join(str(listener) for listener in server.LISTENERS)
    print(f"bexdb serve: listening on {where} ({server.num_workers} workers)", flush=True)


def _warm(worker: Any) -> None:
    worker.wsgi.current()  # open the store before the first request


def spawn(
    store: str | os.PathLike[str], *options: str, timeout: float = 60
) -> tuple[subprocess.Popen[str], str]:
    """Start ``bexdb serve STORE --port 0 OPTIONS`` as a child; return it and its base URL.

    For the tests and ``bexdb bench serve``: waits until the service listens.
    """
    argv = [sys.executable, "-m", "tools.cli", "serve", str(store), "--port", "0", *options]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("bexdb serve: listening on http://"):
        proc.kill()
        proc.wait()
        raise BexdbError(f"bexdb serve did not start (exit {proc.returncode}): {line!r}")
    return proc, line.split()[4].rstrip(",")


def main(args: argparse.Namespace) -> int:
    """``bexdb serve``: a private metrics directory for this service's workers, then run.

    Only the master removes the directory at the end: a worker is a fork that leaves
    through here too (gunicorn ends it with ``sys.exit``), and one restarted after a
    timeout or a crash must not take the directory from the workers still running.
    """
    metrics_dir = tempfile.mkdtemp(prefix="bexdb-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before prometheus_client loads
    master = os.getpid()
    try:
        return run(args)
    finally:
        if os.getpid() == master:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tools.args import positive

    p.add_argument("store")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (8765; 0 picks a free one)")
    p.add_argument(
        "--workers",
        type=positive,
        default=os.cpu_count() or 1,
        help="matcher processes (one per core)",
    )
    p.add_argument("--cache-mb", type=positive, default=256, help="page cache per worker")
    p.add_argument("--max-body-mb", type=positive, default=16, help="request body limit")
    p.add_argument(
        "--timeout",
        type=positive,
        default=120,
        help="seconds a request may run before its worker is restarted (120)",
    )
    p.add_argument(
        "--keepalive", type=positive, default=5, help="seconds an idle connection is kept (5)"
    )
    p.add_argument(
        "--graceful-timeout", type=positive, default=30, help="seconds to drain on SIGTERM"
    )
    p.add_argument("--verbose", action="store_true", help="gunicorn's info log and access log")
