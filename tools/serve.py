"""``bexdb serve``: the matcher service (README: Matcher service), on gunicorn.

gunicorn's master process forks ``--workers`` workers (default: one per core) that share
the listening socket; each opens the store on its own (LMDB allows many reading processes,
and serialises writers across processes with its lock, so ``PUT``/``DELETE`` from any
worker, ``bexdb subscribe`` and the service never interleave) and answers one request at a
time.  Matching is CPU-bound Python, so processes, not threads, are what scales it across
cores.

* **Connections** are kept alive (HTTP/1.1; an idle one is closed after ``--keepalive``
  seconds).  Each worker reads its connections without blocking on an asyncio loop and
  answers a request only once it has arrived in full (:mod:`tools.serve_worker`), so a slow
  or silent client holds up no one; a request not in full after ``--timeout`` seconds is
  answered 408.  ``--timeout`` also bounds the answering: a worker that has not finished a
  request in that time is restarted (its client's connection is closed unanswered).  A
  kept-alive connection stays with the worker that accepted it, so the workers share the
  load by connection.
* **Freshness.** Each request reads in a new LMDB snapshot, so every committed write is
  seen at once; the page cache is validated by generation, not flushed.  A store replaced
  by ``bexdb load --replace`` or ``bexdb compact`` is a new directory: a worker notices by
  the inode of the store's data file (one ``stat`` per request, about 2 µs:
  :class:`betree.stores.live.LiveIndex`) and reopens it; while the replacement is half-way (old
  renamed away, new not yet in) it keeps the old one.  A ``PUT`` or ``DELETE`` that a
  compaction overtakes (it waited on the writer lock, then found the store it had open
  retired: ``StoreReplaced``, nothing written) is redone once in the reopened store, so
  no acknowledged write is lost; a second replacement in that time answers 503.
* **Durability.** A write is committed with fsync before it is answered.  On a sharded
  store (partitioned by the load's hash) the id's shard takes it, and sharded writers are
  serialised by a lock in the store root (:mod:`betree.stores.shardwrite`).
* **Memory** is bounded per worker by the decoded-page cache (``--cache-mb``) and, per
  connection, the body being read: up to ``--max-body-mb``, else 413, answered without
  reading the rest, and that connection is closed.  Nothing grows per request.
* **Errors** become a JSON body ``{"error": ..., "column": ...}`` with a 4xx status, the
  malformed HTTP included (a bad chunk or ``Content-Length``, or both ``Content-Length``
  and ``Transfer-Encoding``: 400; headers over 64 KiB: 431; a version other than HTTP/1.0
  and 1.1: 505); a 500 only for the unexpected, logged with its traceback.
  No request takes a worker down.  ``HEAD`` is answered wherever ``GET`` is.
* **SIGTERM** (gunicorn's graceful stop) closes the socket and idle connections, lets each
  worker finish the request in hand and those being read (up to ``--graceful-timeout``
  seconds, answered with ``Connection: close``), then exits 0.
* **Access** (``--auth-file``: :mod:`tools.auth`): bearer tokens, read or write; 401 and
  403 are answered before the route is looked at (``/healthz`` stays open).  **TLS**
  (``--certfile``/``--keyfile``): gunicorn's SSL context, on the worker's asyncio loop.

Subscription ids in URLs follow the command line's rule (``tools.args.parse_id``):
``/subscriptions/5`` is the integer id 5, ``/subscriptions/s1`` the string ``"s1"``, and
``/subscriptions/%225%22`` (``"5"`` URL-encoded) the string ``"5"``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.errors import BexdbError, InvalidInput, StoreDamaged, StoreReplaced
from storage.staging import staging
from tools.auth import Tokens

Answer = tuple[int, Any]  # status and a JSON-able body (bytes are sent as they are)

_SUBS = "/subscriptions/"
#: The gunicorn worker class: an asyncio loop over h11 (:mod:`tools.serve_worker`).
WORKER = "tools.serve_worker.MatcherWorker"


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


class Service:
    """The WSGI application of one worker: routes, the open store, reopening on replace."""

    def __init__(
        self, path: str, cache_bytes: int, max_body: int, tokens: Tokens | None = None
    ) -> None:
        from betree.stores.live import LiveIndex

        self.max_body = max_body
        self.tokens = tokens
        self.live = LiveIndex(path, cache_bytes=cache_bytes)

    # -- the store -----------------------------------------------------------------------

    def current(self, reopen: bool = False) -> Any:
        """The store now at ``path``, reopened if it was replaced (:class:`LiveIndex`):
        one that cannot be opened is a 503."""
        try:
            return self.live.current(reopen)
        except (BexdbError, OSError) as exc:
            raise HTTPError(503, f"cannot open the store: {exc}") from exc

    def figures(self) -> tuple[int, int]:
        """Subscriptions and bytes on disk, for the gauges of /metrics and /stats."""
        store = self.current()
        return len(store), store.size_on_disk()

    # -- HTTP ----------------------------------------------------------------------------

    def too_large(self) -> HTTPError:
        return HTTPError(413, f"request body over {self.max_body} bytes")

    def respond(
        self,
        method: str,
        target: bytes,
        body: bytes,
        error: HTTPError | None = None,
        authorization: bytes | None = None,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """The answer to a request read in full: status, headers and body.

        ``error``: the request was refused before it was read (malformed, too large, too
        slow); it is answered and counted like any other.  ``authorization``: the
        request's ``Authorization`` header, checked when the service has tokens.
        """
        from tools import metrics

        route = "other"
        try:
            if error is not None:
                raise error
            path = _path(target)
            route = _SUBS + "{id}" if path.startswith(_SUBS) else path
            if self.tokens is not None and route != "/healthz":
                self.authorize(method, route, authorization)
            status, answer = self.dispatch(method, path, route, body, _query(target))
        except HTTPError as exc:
            status, answer = exc.status, exc.body
        except InvalidInput as exc:
            status, answer = 400, _invalid(exc).body
        except StoreDamaged as exc:  # the request read damage: say so, no traceback
            status, answer = 500, {"error": exc.message, "hint": exc.hint}
        except Exception as exc:  # a failing request never takes a worker down
            traceback.print_exc(file=sys.stderr)
            status, answer = 500, {"error": f"internal error: {type(exc).__name__}: {exc}"}
        if route not in _ROUTES:
            route = "other"
        metrics.REQUESTS.labels(method, route, str(status)).inc()
        headers = [("Content-Type", "application/json")]
        if isinstance(answer, bytes):
            data, headers = answer, [("Content-Type", metrics.CONTENT_TYPE)]
        elif status == 204:
            return status, [], b""
        else:
            data = json.dumps(answer, default=_jsonable).encode()
        if status == 405:
            headers.append(("Allow", ", ".join(_allowed(route))))
        if status == 401:
            headers.append(("WWW-Authenticate", 'Bearer realm="bexdb"'))
        headers.append(("Content-Length", str(len(data))))
        return status, headers, data

    def authorize(self, method: str, route: str, authorization: bytes | None) -> None:
        """401 without a valid bearer token, 403 for a read token asking to write: every
        method but GET and HEAD writes, except POST on the routes that only read."""
        from tools import auth

        assert self.tokens is not None
        granted = auth.role(self.tokens, authorization)
        if granted is None:
            raise HTTPError(401, "this service needs a valid token: Authorization: Bearer TOKEN")
        if granted != auth.WRITE and method not in ("GET", "HEAD") and route not in _READ_POSTS:
            raise HTTPError(403, f"this token may read, not write ({method} {route})")

    def dispatch(
        self, method: str, path: str, route: str, body: bytes, query: dict[str, str]
    ) -> Answer:
        if route not in _ROUTES:
            raise HTTPError(404, f"no such resource: {path}")
        if method not in _allowed(route):
            raise HTTPError(405, f"{method} is not allowed on {route}")
        if route == "/healthz":
            return 200, {"status": "ok", "pid": os.getpid()}
        if route == "/match":
            _only(query, "meta")
            return self.match(_json(body), _flag(query, "meta"))
        if route == "/validate":
            return self.validate(body)
        if route == "/explain":
            return self.explain(_json(body))
        if route == "/schema":
            return self.schema(_json(body) if method == "PUT" else None)
        if route == "/subscriptions" and method == "POST":
            _only(query, "atomic")
            return self.put_many(body, _flag(query, "atomic"))
        if route == "/subscriptions":
            _only(query, "after", "limit")
            after = _ident(query["after"]) if "after" in query else None
            return self.page(after, _limit(query.get("limit")))
        if route in ("/metrics", "/stats"):
            from tools import metrics

            subs, size = self.figures()
            if route == "/metrics":
                return 200, metrics.prometheus_text(subs, size)
            return 200, metrics.as_json(subs, size)
        ident = _ident(path[len(_SUBS) :])
        if method in ("GET", "HEAD"):
            return self.get(ident)
        if method == "DELETE":
            return self.delete(ident)
        return self.put(ident, _json(body))

    # -- the routes ----------------------------------------------------------------------

    def match(self, body: Any, meta: bool = False) -> Answer:
        """One event, or ``{"events": [...]}`` (one snapshot; bad events answered in place).

        A body with the key ``"events"`` is a batch, so it must have no
        other key and its value must be a list: an event with an attribute named "events"
        is sent in a batch.  ``meta`` (``?meta=true``): each match is ``{"id", "meta"}``,
        the subscription's metadata read in the snapshot matched (null where it has none).
        """
        from betree.index import event_values
        from tools import metrics

        batch = isinstance(body, dict) and "events" in body
        if batch and len(body) > 1:
            others = ", ".join(json.dumps(key) for key in body if key != "events")
            raise HTTPError(
                400,
                f'a body with "events" is a batch {{"events": [...]}} and has no other key '
                f"(it has {others})",
                hint='to match one event with an attribute "events", send {"events": [event]}',
            )
        if batch and not isinstance(body["events"], list):
            raise HTTPError(400, f'"events" must be a list of events, not {_kind(body["events"])}')
        store = self.current()
        indexes = store.indexes
        if batch:
            return 200, {"results": self._match_batch(store, body["events"], meta)}
        if meta:  # (one event as a batch: its matches and their metadata in one snapshot)
            (found,) = self._match_batch(store, [body], meta)
            if "error" in found:
                raise HTTPError(400, found["error"])
            return 200, found
        with store.snapshot() as match:  # (validated in the snapshot's schema)
            values = event_values(store.schema, body)
            start = time.perf_counter()
            found = match(values)
            metrics.LATENCY.observe(time.perf_counter() - start)
        metrics.CANDIDATES.observe(sum(i.engine.last_stats["candidates"] for i in indexes))
        metrics.PAGES.observe(sum(i.engine.last_stats["pages"] for i in indexes))
        metrics.EVENTS.inc()
        metrics.MATCHES.inc(len(found))
        return 200, {"matches": found}

    def _match_batch(self, store: Any, events: list[Any], meta: bool) -> list[dict[str, Any]]:
        """``{"events": [...]}`` through ``match_many`` (one snapshot, one pass over the
        index; ``match_many_meta`` with ``meta``); a bad event is answered in its place.
        The latency, candidates and pages histograms get each matched event's share of the
        batch (the batch's figure over its events): a batch has no per-event figures."""
        from betree.disk.metadata import loads
        from tools import metrics

        objects: dict[Any, Any] = {}

        def decoded(ident: Any, text: str | None) -> Any:
            if ident not in objects:
                objects[ident] = loads(text)
            return objects[ident]

        start = time.perf_counter()
        found = store.match_many_meta(events) if meta else store.match_many(events)
        seconds = time.perf_counter() - start
        matched = sum(not isinstance(r, InvalidInput) for r in found)
        candidates = sum(i.engine.last_stats.get("candidates", 0) for i in store.indexes)
        pages = sum(i.engine.last_stats.get("pages", 0) for i in store.indexes)
        results: list[dict[str, Any]] = []
        for result in found:
            if isinstance(result, InvalidInput):
                metrics.REJECTED.inc()
                results.append({"error": result.message})
                continue
            metrics.LATENCY.observe(seconds / matched)
            metrics.CANDIDATES.observe(candidates / matched)
            metrics.PAGES.observe(pages / matched)
            metrics.EVENTS.inc()
            metrics.MATCHES.inc(len(result))
            if meta:  # (each id's metadata decoded once for the batch)
                result = [{"id": i, "meta": decoded(i, text)} for i, text in result]
            results.append({"matches": result})
        return results

    def validate(self, body: bytes) -> Answer:
        """``POST /validate``: each record's result (:mod:`tools.validate`), nothing written."""
        from tools import validate

        results, valid = validate.check(self.current(), _records(body))
        return 200, {"results": results, "invalid": len(results) - len(valid)}

    def put_many(self, body: bytes, atomic: bool) -> Answer:
        """``POST /subscriptions``: the valid records written in one transaction (one batch
        on a sharded store), each record's result with ``created`` for those written.
        ``atomic``: one invalid record and nothing is written (400)."""
        from tools import validate

        results, valid = validate.check(self.current(), _records(body))
        rejected = len(results) - len(valid)
        if rejected and atomic:
            return 400, {
                "error": f"{rejected} of {len(results)} records are invalid: nothing was written",
                "results": results,
                "written": 0,
            }
        items = [r.item() for r in valid]
        created = self._write(lambda index: index.subscribe_many(items)) if items else []
        oks = (result for result in results if "ok" in result)
        for result, new in zip(oks, created, strict=True):
            result["created"] = new
        return 200, {"results": results, "written": len(items), "rejected": rejected}

    def page(self, after: Any, limit: int) -> Answer:
        """``GET /subscriptions``: up to ``limit`` subscriptions in id order after ``after``;
        ``next`` is the last id given when more follow (else null)."""
        found = self.current().page(after, limit + 1)
        listed = [{"id": ident, "expr": expr} for ident, expr in found[:limit]]
        more = len(found) > limit
        return 200, {"subscriptions": listed, "next": listed[-1]["id"] if more else None}

    def explain(self, body: Any) -> Answer:
        """``POST /explain`` ``{"id": ID, "event": {...}}``: ``bexdb explain --json``'s answer."""
        if not isinstance(body, dict) or set(body) != {"id", "event"}:
            raise HTTPError(400, 'the body must be a JSON object {"id": ID, "event": {...}}')
        ident, event = body["id"], body["event"]
        if isinstance(ident, bool) or not isinstance(ident, int | str):
            raise HTTPError(400, f'"id" must be a JSON integer or string, not {_kind(ident)}')
        if not isinstance(event, dict):
            raise HTTPError(400, f'"event" must be a JSON object, not {_kind(event)}')
        store = self.current()
        if store.expression(ident) is None:
            raise HTTPError(404, f"no subscription {ident!r}")
        return 200, store.explain(ident, event)

    def schema(self, change: Any) -> Answer:
        """``GET /schema``: the schema document; ``PUT /schema`` (a write) first adds
        attributes or changes hints (:mod:`betree.disk.schemaedit`): 409 naming the attribute if
        that would alter what a stored subscription means, nothing changed."""
        from betree.disk.schemaedit import SchemaConflict

        if change is None:
            return 200, self.current().schema.to_json()
        try:
            done = self._write(lambda store: store.add_to_schema(change))
        except SchemaConflict as exc:
            raise HTTPError(409, exc.message, hint=exc.hint) from exc
        return 200, {**done, "schema": self.current().schema.to_json()}

    def get(self, ident: Any) -> Answer:
        """The subscription ``{"id", "expr"}``, with ``"meta"`` if it has metadata."""
        from betree.disk import metadata

        found = self.current().record(ident)
        if found is None:
            raise HTTPError(404, f"no subscription {ident!r}")
        expr, meta = found
        answer = {"id": ident, "expr": expr}
        if meta is not None:
            answer["meta"] = metadata.loads(meta)
        return 200, answer

    def put(self, ident: Any, body: Any) -> Answer:
        """``{"expr": "...", "meta": {...}}`` (``meta`` optional: without it, the
        subscription has none, whatever it had)."""
        from betree.disk import metadata

        if not isinstance(body, dict) or not isinstance(body.get("expr"), str):
            raise HTTPError(400, 'the body must be a JSON object {"expr": "..."}')
        try:
            meta = metadata.meta_text(body["meta"]) if body.get("meta") is not None else None
        except InvalidInput as exc:
            raise HTTPError(400, f"subscription {ident!r}: {exc.message}") from None
        created = self._write(lambda index: index.subscribe(ident, body["expr"], meta))
        return (201 if created else 200), {"id": ident, "created": created}

    def delete(self, ident: Any) -> Answer:
        if not self._write(lambda index: index.unsubscribe(ident)):
            raise HTTPError(404, f"no subscription {ident!r}")
        return 204, None

    def _write(self, write: Callable[[Any], Any]) -> Any:
        """``write(index)`` in the store at ``path``, redone once if it was replaced
        (:func:`betree.stores.live.write_reopening`); a second replacement meanwhile is a 503."""
        from betree.stores.live import write_reopening

        try:
            return write_reopening(write, self._writable)
        except StoreReplaced as exc:
            raise HTTPError(503, f"{exc.message}, twice; retry", hint=exc.hint) from exc

    def _writable(self, reopen: bool = False) -> Any:
        """The store to write in, plain or sharded; a sharded one whose ids cannot be
        routed to a shard (not partitioned by bexdb's hash) is a 409."""
        store = self.current(reopen)
        if not store.writable:
            raise HTTPError(
                409,
                "the store is sharded by something other than bexdb's hash, so a write "
                "cannot know an id's shard: nothing was written",
                hint="rebuild it with bexdb load --replace --shards K",
            )
        return store


def _path(target: bytes) -> str:
    """The percent-decoded path of a request target (the query, if any, is ignored)."""
    from urllib.parse import unquote_to_bytes

    try:
        return unquote_to_bytes(target.split(b"?", 1)[0]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPError(400, f"the path is not UTF-8 once percent-decoded: {exc.reason}") from None


def _ident(text: str) -> int | str:
    """The subscription id of a path, by the command line's rule (``tools.args.parse_id``).

    An empty one (``/subscriptions/``) is refused: it is a path cut short far more often
    than the id ``""``, which ``/subscriptions/%22%22`` names.
    """
    from tools.args import parse_id

    if not text:
        raise HTTPError(
            400, "the subscription id is empty", hint='the id "" is /subscriptions/%22%22'
        )
    try:
        return parse_id(text)
    except InvalidInput as exc:  # a lone surrogate, an integer past 64 bits
        raise HTTPError(400, exc.message) from None


def _query(target: bytes) -> dict[str, str]:
    """The query parameters of a request target; one named twice is a 400."""
    from urllib.parse import parse_qsl

    _, _, text = target.partition(b"?")
    try:
        pairs = parse_qsl(text.decode("latin-1"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as exc:
        raise HTTPError(400, f"the query is not UTF-8 once percent-decoded: {exc.reason}") from None
    query: dict[str, str] = {}
    for name, value in pairs:
        if name in query:
            raise HTTPError(400, f"query parameter {name!r} is given twice")
        query[name] = value
    return query


def _only(query: dict[str, str], *names: str) -> None:
    unknown = sorted(set(query) - set(names))
    if unknown:
        raise HTTPError(
            400, f"unknown query parameter {unknown[0]!r} (this route takes {', '.join(names)})"
        )


def _flag(query: dict[str, str], name: str) -> bool:
    value = query.get(name, "false")
    if value not in ("true", "false"):
        raise HTTPError(400, f"query parameter {name!r} must be true or false, not {value!r}")
    return value == "true"


#: ``GET /subscriptions``: records per page unless ``limit`` says, and the most it may say.
PAGE, PAGE_MAX = 100, 10_000


def _limit(text: str | None) -> int:
    if text is None:
        return PAGE
    digits = text.isascii() and text.isdigit() and len(text) <= len(str(PAGE_MAX))
    if not digits or not 1 <= int(text) <= PAGE_MAX:
        raise HTTPError(400, f"limit must be an integer from 1 to {PAGE_MAX}, not {text!r}")
    return int(text)


def _records(body: bytes) -> list[bytes]:
    """The lines of a body of records (:func:`tools.validate.body_lines`); none is a 400."""
    from tools import validate

    lines = validate.body_lines(body)
    if not any(line.strip() for line in lines):
        raise HTTPError(400, "the body holds no records (one JSON object, or JSON Lines)")
    return lines


def _jsonable(value: Any) -> Any:
    """What ``json`` cannot write in an answer: a set (an event's value in ``explain``)."""
    if isinstance(value, set | frozenset):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    return str(value)


def _kind(value: Any) -> str:
    """What a JSON value is, for messages: "a number", "an object", ..."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return kinds.get(type(value), "a number")


def _reject_constant(name: str) -> Any:
    raise HTTPError(400, f"malformed JSON: {name} is not a JSON value")


def _json(data: bytes) -> Any:
    """A request body as JSON: UTF-8, standard JSON only (no NaN or Infinity)."""
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise HTTPError(400, f"the body is not UTF-8: {exc.reason}") from exc
    except json.JSONDecodeError as exc:
        raise HTTPError(
            400, f"malformed JSON: {exc.msg} at column {exc.colno}", column=exc.colno
        ) from exc
    except RecursionError:
        raise HTTPError(400, "malformed JSON: nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise HTTPError(400, f"malformed JSON: {exc}") from None


#: The routes whose POST only reads (a read token may use them).
_READ_POSTS = ("/match", "/validate", "/explain")


def _allowed(route: str) -> tuple[str, ...]:
    methods = _ROUTES.get(route, ())
    return (*methods, "HEAD") if "GET" in methods else methods


_ROUTES: dict[str, tuple[str, ...]] = {
    "/match": ("POST",),
    "/subscriptions": ("GET", "POST"),
    _SUBS + "{id}": ("GET", "PUT", "DELETE"),
    "/validate": ("POST",),
    "/explain": ("POST",),
    "/stats": ("GET",),
    "/healthz": ("GET",),
    "/metrics": ("GET",),
    "/schema": ("GET", "PUT"),
}


# -- running -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Check the store, then run gunicorn until SIGTERM/SIGINT."""
    from gunicorn.app.base import BaseApplication

    from betree.stores.sharded import open_index

    with open_index(args.store):  # fail here, in the master, not in every worker
        pass
    try:
        tls = _tls_options(args)
    except ValueError as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        return 2  # a usage error
    options = {
        "bind": f"{args.host}:{args.port}",
        "workers": args.workers,
        "worker_class": WORKER,  # named, not imported: the worker imports this module
        "keepalive": args.keepalive,
        "timeout": args.timeout,
        "graceful_timeout": args.graceful_timeout,
        "loglevel": "info" if args.verbose else "warning",
        "accesslog": "-" if args.verbose else None,
        "when_ready": _announce,
        "post_worker_init": _warm,
        # no gunicornc control socket: one shared path per user (~/.gunicorn/gunicorn.ctl)
        # that every running service would take from the last, and nothing here uses it
        "control_socket_disable": True,
        **tls,
    }
    service_args = (args.store, args.cache_mb << 20, args.max_body_mb << 20, args.auth_file)

    class _App(BaseApplication):  # type: ignore[misc]  # gunicorn's documented custom app
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Service:
            return Service(*service_args)

    _App().run()
    return 0


def _tls_options(args: argparse.Namespace) -> dict[str, str]:
    """gunicorn's ``certfile`` and ``keyfile``, both or neither, the pair loaded once here
    so that a bad one fails before any worker starts (ValueError, saying why)."""
    import ssl

    if args.certfile is None and args.keyfile is None:
        return {}
    if args.certfile is None or args.keyfile is None:
        raise ValueError("--certfile and --keyfile go together")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            args.certfile, args.keyfile
        )
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--certfile/--keyfile: cannot load them: {exc}") from None
    return {"certfile": args.certfile, "keyfile": args.keyfile}


def _announce(server: Any) -> None:
    where = ", ".join(str(listener) for listener in server.LISTENERS)
    print(f"bexdb serve: listening on {where} ({server.num_workers} workers)", flush=True)


def _warm(worker: Any) -> None:
    worker.wsgi.current()  # open the store before the first request


def spawn(
    store: str | os.PathLike[str], *options: str, timeout: float = 60, stderr: Any = None
) -> tuple[subprocess.Popen[str], str]:
    """Start ``bexdb serve STORE --port 0 OPTIONS`` as a child; return it and its base URL
    (``https://`` with ``--certfile``).  ``stderr``: where its log goes (inherited unless
    told).  For the tests and ``bexdb bench serve``: waits until the service listens.
    """
    argv = [sys.executable, "-m", "tools.cli", "serve", str(store), "--port", "0", *options]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith(
        ("bexdb serve: listening on http://", "bexdb serve: listening on https://")
    ):
        proc.kill()
        proc.wait()
        raise BexdbError(f"bexdb serve did not start (exit {proc.returncode}): {line!r}")
    return proc, line.split()[4].rstrip(",")


def main(args: argparse.Namespace) -> int:
    """``bexdb serve``: a private metrics directory for this service's workers, then run.

    The directory is a staging directory (:mod:`storage.staging`): locked while the
    service or any of its workers lives, removed by the master alone when it ends (a
    worker is a fork that leaves through here too), and swept by the next service when a
    ``kill -9`` left it behind.
    """
    with staging(Path(tempfile.gettempdir()) / "bexdb-serve", "metrics") as metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)  # before prometheus loads
        return run(args)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from tools.args import STORE_HELP, port, positive
    from tools.auth import auth_file

    p.add_argument("store", help=STORE_HELP)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=port, default=8765, help="port (8765; 0 picks a free one)")
    p.add_argument(
        "--workers",
        type=positive,
        default=os.cpu_count() or 1,
        help="matcher processes (default: one per core)",
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
    p.add_argument(
        "--auth-file",
        type=auth_file,
        metavar="F",
        help="bearer tokens, one 'TOKEN read|write' a line: without a valid one 401, a read "
        "token writing 403 (/healthz stays open); read once at start",
    )
    p.add_argument("--certfile", metavar="F", help="serve HTTPS: the certificate (PEM)")
    p.add_argument("--keyfile", metavar="F", help="serve HTTPS: the certificate's private key")
