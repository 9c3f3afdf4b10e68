"""The gunicorn worker of ``bexdb serve``: requests read without blocking, answered in turn.

One asyncio loop per worker process owns every connection the worker accepted.  Bytes are
read as they come and fed to h11 (a sans-IO HTTP/1.1 parser); only once a request is in
full, headers and body, does the worker answer it, synchronously on the loop: matching is
CPU-bound Python that holds the GIL, so one request at a time per process is all a core
can do anyway.  A client that sends half a request and waits, trickles a byte a second,
never sends anything or never reads its answers therefore holds only its own connection
(its socket and at most ``--max-body-mb`` of buffered body), never the worker.

Limits on a connection, checked once per heartbeat (about a second), so no timer is set
per request:

* idle (no byte of a next request yet): closed after ``--keepalive`` seconds;
* a request begun but not in full after ``--timeout`` seconds: answered 408 and closed;
* a body over ``--max-body-mb`` (by its ``Content-Length``, or as chunks arrive): 413 at
  once, unread.  After any answer that ends a connection early (400, 408, 413) the worker
  shuts its side and discards what the client still sends for up to ``_LINGER`` seconds
  before closing, so the client reads the answer instead of a reset.

The heartbeat (gunicorn's ``notify``) runs on the loop too: while a request is answered
it cannot, so a request that runs past ``--timeout`` gets the worker restarted by
gunicorn's master, as with gunicorn's own workers.  SIGABRT and SIGINT/SIGQUIT keep
gunicorn's handlers, which raise ``SystemExit`` in the middle of a match; SIGTERM is
handled on the loop (one taken while the worker booted, by gunicorn's handler, too): stop
accepting, close idle connections, let each connection finish the request it is reading
(answered with ``Connection: close``), then exit, within ``--graceful-timeout``.

Cost per request on a kept-alive connection: h11's parsing and framing, a few tens of µs
of CPU (``bexdb bench serve`` measures the whole; docs/bench/serve/README.md).  A worker
accepts one connection per wake-up and none while it answers, so a burst of connections
spreads over the workers; a client pipelining requests gets ``_BURST`` answers at a time,
then waits its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import ssl
import time
from http import HTTPStatus
from typing import Any

import h11
from gunicorn.sock import ssl_context
from gunicorn.workers.base import Worker

from tools.serve import HTTPError, Service

_LINGER = 2.0  # seconds an ended connection discards what the client still sends
_HEADERS_MAX = 64 << 10  # bytes of request line and headers
_BURST = 8  # requests answered in a row on one connection before the others get a turn


def _head_too_large() -> HTTPError:
    return HTTPError(431, f"request line and headers over {_HEADERS_MAX >> 10} KiB")


class _Connection(asyncio.Protocol):
    """One client connection: h11 state, the request being read, its deadline."""

    def __init__(self, worker: MatcherWorker) -> None:
        self.worker = worker
        self.service: Service = worker.wsgi
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=_HEADERS_MAX)
        self.transport: asyncio.Transport | None = None
        self.request: h11.Request | None = None
        self.body: list[bytes] = []
        self.size = 0
        self.reading = False  # a byte of the next request has come
        self.deadline = time.monotonic() + worker.cfg.keepalive
        self.lingering = False
        self.write_paused = False
        self.closed = False

    # -- asyncio -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.worker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.worker.connections.discard(self)
        self.body = []

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return
        if not self.reading:
            self.reading = True
            self.deadline = time.monotonic() + self.worker.request_timeout
        self.http.receive_data(data)
        self.process()

    def eof_received(self) -> bool:
        if self.lingering:
            self.close()
            return False
        self.http.receive_data(b"")
        self.process()
        if self.lingering:  # answered an incomplete request: the client has sent all
            self.close()
        # keep the transport: an answer may still be written (not over TLS, whose
        # transport closes once the client's side has, whatever this returns)
        return self.worker.tls is None

    def pause_writing(self) -> None:  # the client does not read its answers
        self.write_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.carry_on()

    def carry_on(self) -> None:
        """Read and answer again, after a pause for writing or a turn given up."""
        transport = self.transport
        if not self.write_paused and transport is not None and not transport.is_closing():
            transport.resume_reading()
            self.process()

    # -- HTTP ----------------------------------------------------------------------------

    def process(self) -> None:
        """Handle the events h11 has, answering each request once it is in full.

        After ``_BURST`` answers in a row (a client pipelining requests) the connection
        stops reading and waits its turn behind the other connections and the heartbeat.
        """
        http = self.http
        answered = 0
        while not (self.write_paused or self.lingering or self.closed):
            if answered == _BURST:
                assert self.transport is not None
                self.transport.pause_reading()
                asyncio.get_running_loop().call_soon(self.carry_on)
                return
            try:
                event = http.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                if status == 431:  # h11's own limit, while a head is incomplete
                    self.refuse(_head_too_large())
                else:
                    self.refuse(HTTPError(status, f"malformed HTTP request: {exc}"))
                return
            if isinstance(event, h11.Data):
                self.size += len(event.data)
                if self.size > self.service.max_body:
                    self.refuse(self.service.too_large())
                    return
                self.body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.answer()
                answered += 1
            elif isinstance(event, h11.Request):
                self.begin(event)
            elif event is h11.NEED_DATA or event is h11.PAUSED:
                return
            else:  # ConnectionClosed
                self.close()
                return

    def begin(self, request: h11.Request) -> None:
        self.request, self.body, self.size = request, [], 0
        refusal = self.refusal(request)
        if refusal is not None:
            self.refuse(refusal)
            return
        if self.http.they_are_waiting_for_100_continue:
            self.write(self.http.send(h11.InformationalResponse(status_code=100, headers=[])))

    def refusal(self, request: h11.Request) -> HTTPError | None:
        """Why a request whose head h11 took is refused before its body is read, or None.

        h11 limits a head only while it is incomplete, so a whole head of any size that
        arrives in one read passes it: its size is counted here again (from the parsed
        head: the request line and each ``name: value`` line).  ``Content-Length`` beside
        ``Transfer-Encoding`` is refused and the connection closed (RFC 9112 6.3 lets a
        server refuse it, a smuggling attempt as often as not; and a client that frames by
        the length waited forever on h11 reading chunks), and HTTP versions other than 1.0
        and 1.1, which h11 parses as if they were 1.1.
        """
        if request.http_version not in (b"1.0", b"1.1"):
            version = request.http_version.decode("latin-1")
            return HTTPError(505, f"HTTP/{version} is not supported: HTTP/1.1 or 1.0 only")
        size = len(request.method) + len(request.target) + 12  # "M T HTTP/1.1" CR LF
        names: set[bytes] = set()
        for name, value in request.headers.raw_items():
            size += len(name) + len(value) + 4
            names.add(name.lower())
        if size + 2 > _HEADERS_MAX:
            return _head_too_large()
        if b"content-length" in names and b"transfer-encoding" in names:
            return HTTPError(
                400, "malformed HTTP request: both Content-Length and Transfer-Encoding"
            )
        for name, value in request.headers:
            if name == b"content-length" and int(value) > self.service.max_body:
                return self.service.too_large()
        return None

    def answer(self) -> None:
        request = self.request
        assert request is not None
        stopping = not self.worker.alive
        method = request.method.decode("latin-1")
        start = time.perf_counter()
        authorization = next((v for n, v in request.headers if n == b"authorization"), None)
        status, headers, data = self.service.respond(
            method, request.target, b"".join(self.body), authorization=authorization
        )
        self.request, self.body = None, []
        if self.worker.access_log:
            self.log_access(method, request.target, status, len(data), start)
        self.send(status, headers, data, close=stopping, head=request.method == b"HEAD")
        if self.http.our_state is h11.MUST_CLOSE:
            self.close()
            return
        self.http.start_next_cycle()
        self.reading = bool(self.http.trailing_data[0])
        self.deadline = time.monotonic() + (
            self.worker.request_timeout if self.reading else self.worker.cfg.keepalive
        )

    def log_access(self, method: str, target: bytes, status: int, size: int, start: float) -> None:
        """One line of ``--verbose``'s access log: client, request, status, bytes, time."""
        assert self.transport is not None
        peer = self.transport.get_extra_info("peername") or ("-",)
        ms = (time.perf_counter() - start) * 1000
        path = target.decode("latin-1")
        self.worker.log.access_log.info(f'{peer[0]} "{method} {path}" {status} {size} {ms:.2f}ms')

    def refuse(self, error: HTTPError) -> None:
        """Answer ``error`` and end the connection, whatever is left of the request."""
        if self.http.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            method, target = (
                (self.request.method.decode("latin-1"), self.request.target)
                if self.request is not None
                else ("-", b"")
            )
            status, headers, data = self.service.respond(method, target, b"", error)
            self.send(status, headers, data, close=True)
        self.linger()

    def send(
        self,
        status: int,
        headers: list[tuple[str, str]],
        data: bytes,
        *,
        close: bool,
        head: bool = False,
    ) -> None:
        if close:
            headers = [*headers, ("Connection", "close")]
        http = self.http
        try:
            reason = HTTPStatus(status).phrase.encode()
            out = http.send(h11.Response(status_code=status, headers=headers, reason=reason))
            if data and not head:
                out += http.send(h11.Data(data=data))
            out += http.send(h11.EndOfMessage())
        except h11.LocalProtocolError:  # the client's request forbids a body (HEAD, 204)
            http.send_failed()
            self.close()
            return
        self.write(out)

    def write(self, data: bytes | None) -> None:
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    # -- ending --------------------------------------------------------------------------

    def linger(self) -> None:
        """Shut our side, then discard the client's bytes for ``_LINGER`` s, then close."""
        self.lingering = True
        self.deadline = time.monotonic() + _LINGER
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.write_paused or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        transport.resume_reading()

    def close(self) -> None:
        """Close once what was written is sent (given ``_LINGER`` s, then dropped)."""
        self.closed = True
        self.deadline = time.monotonic() + _LINGER
        if self.transport is not None:
            self.transport.close()

    def expire(self, now: float) -> None:
        """Called each heartbeat: end a connection past its deadline."""
        if now < self.deadline:
            return
        if self.closed or self.write_paused:  # a client that does not read what it is sent
            if self.transport is not None:
                self.transport.abort()
        elif self.lingering or not self.reading:
            self.close()
        else:
            late = f"the request did not arrive in {self.worker.request_timeout} s"
            self.refuse(HTTPError(408, late))

    def stop(self) -> None:
        """Graceful stop: an idle connection closes now, a request in reading finishes."""
        if not self.reading or self.lingering:
            self.close()


class MatcherWorker(Worker):  # type: ignore[misc]  # gunicorn's documented worker base
    """A gunicorn worker running one asyncio loop; see the module docstring."""

    alive: bool  # gunicorn's: cleared by its SIGTERM handler, before the loop's is set

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[_Connection] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.opening: set[asyncio.Task[Any]] = set()  # connections being set up
        self.access_log = bool(self.cfg.accesslog)  # --verbose
        self.tls: ssl.SSLContext | None = None
        #: ``--timeout``: the seconds a request (or a TLS handshake) has to arrive in full
        #: (gunicorn's ``self.timeout`` is half of it: its workers notify twice a timeout)
        self.request_timeout = self.cfg.timeout

    def run(self) -> None:
        if self.cfg.is_ssl:  # --certfile/--keyfile: gunicorn's context, HTTP/1.1 only
            self.tls = ssl_context(self.cfg)
            self.tls.set_alpn_protocols(["http/1.1"])
        asyncio.run(self.serve())

    async def serve(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stopped.set)
        if not self.alive:  # a SIGTERM taken while booting, by gunicorn's handler
            stopped.set()
        for listener in self.sockets:
            listener.setblocking(False)
            loop.add_reader(listener.fileno(), self.accept, listener)
        beat = min(1.0, self.timeout / 4)
        while not stopped.is_set():
            self.heartbeat()
            if self.ppid != os.getppid():
                break  # the master died: do not serve on, orphaned
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), beat)
        self.alive = False
        for listener in self.sockets:
            loop.remove_reader(listener.fileno())
        for conn in list(self.connections):
            conn.stop()
        limit = time.monotonic() + self.cfg.graceful_timeout
        while self.connections and time.monotonic() < limit:
            self.heartbeat()
            await asyncio.sleep(min(beat, 0.1))
        for conn in list(self.connections):
            conn.close()
        await asyncio.sleep(0)  # let the transports close

    def heartbeat(self) -> None:
        self.notify()
        now = time.monotonic()
        for conn in list(self.connections):
            conn.expire(now)

    def accept(self, listener: Any) -> None:
        """Take one waiting connection (another worker may take the next)."""
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:  # out of file descriptors: stop accepting for a moment
            if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                raise
            self.log.warning("accept failed (%s); pausing for 1 s", exc)
            assert self.loop is not None
            self.loop.remove_reader(listener.fileno())
            self.loop.call_later(
                1.0, self.loop.add_reader, listener.fileno(), self.accept, listener
            )
            return
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        assert self.loop is not None
        tls: dict[str, Any] = {}
        if self.tls is not None:  # a handshake is given the time a request is (408's)
            tls = {"ssl": self.tls, "ssl_handshake_timeout": self.request_timeout}
        task = self.loop.create_task(
            self.loop.connect_accepted_socket(lambda: _Connection(self), sock, **tls)
        )
        self.opening.add(task)
        task.add_done_callback(self.opened)

    def opened(self, task: asyncio.Task[Any]) -> None:
        """A connection set up, or not: a failed TLS handshake (a client that does not
        trust the certificate, plain HTTP on an HTTPS port) is the client's affair, one
        line of gunicorn's debug log rather than an unretrieved task's traceback."""
        self.opening.discard(task)
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            self.log.debug("connection not set up: %s", failure)
