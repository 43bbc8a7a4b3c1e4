"""``pyproflab serve``'s HTTP server: pushes in, spool files out, 200 only once durable.

Rules:

- Routes: ``POST /profiling/v1/input`` (dd-trace-go), ``POST /ingest``
  (pyroscope-go), ``GET /metrics``; anything else is 404.
- A push is acknowledged (200) only after ``Spool.put`` returned: its bytes
  are written, fsynced and renamed into the spool. Every refusal answers
  with its status, closes the connection and logs one line naming the
  client and the reason: 401 (no or wrong token), 403 (token bound to
  another service), 411/413 (no length, body
  over ``max_body``, an attachment inflating past ``max_profile_bytes``),
  400 (malformed; or a profile part the ingester would refuse:
  ``check_profile``), 415 (a format that is not pprof), 503 (spool full or
  disk full, a client over its rate, or the server stopping, with
  Retry-After; or too many connections). The rate's answer is 503, not 429:
  dd-trace-go sends a push again after a 5xx, never after a 4xx (and
  pyroscope-go never does). A refused push that its SDK will not send again
  is counted in ``pyproflab_serve_dropped_total{protocol,reason}``. A refusal sent
  before the body was read drops what the client still sends of it (up to
  ``LINGER_BYTES``) before the close, so the client reads the answer.
- On SIGTERM (``run.serve``) no connection is taken any more, and the
  requests in flight finish within ``Options.drain`` seconds; a body still
  being read then is answered 503 (``shutdown``): ``drain.Drain``.
- Limits: ``max_connections`` open at once (the next is answered 503 and
  closed without a thread); each connection's idle wait plus one whole
  request within ``idle + deadline`` seconds (``guard.Reaper``).
- Why the standard library's threading server and not an asyncio/ASGI
  stack: a push's cost is its fsyncs and the decompression check, which
  block (asyncio would hand them to a thread pool anyway); the load is
  about 300 requests a second for 1,000 instances, far below what a thread
  per connection carries; and it adds no dependency. Connections are capped
  and reaped, so threads are bounded.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from pyproflab.errors import ProfileError, TooLargeError
from pyproflab.serve.drain import Drain
from pyproflab.serve.guard import RateLimit, Reaper, Tokens, retry_after
from pyproflab.serve.telemetry import CONTENT_TYPE, Telemetry
from pyproflab.sources.push import (
    DATADOG_PATH,
    MAX_TAG_VALUE,
    MAX_TAGS,
    PYROSCOPE_PATH,
    PushError,
    check_profile,
    check_size,
    parse_datadog,
    parse_pyroscope,
    push_meta,
)
from pyproflab.sources.spool import Spool, SpoolFull

log = logging.getLogger("pyproflab.serve")

#: the most of an unread body read and dropped after a refusal (``Handler._linger``)
LINGER_BYTES = 64 << 20


@dataclass
class Options:
    """The server's limits (the CLI's flags; defaults here only)."""

    host: str = "127.0.0.1"
    port: int = 4040
    max_body: int = 32 << 20
    max_profile_bytes: int = 256 << 20
    max_connections: int = 256
    client_rate: float = 20.0  # requests a second per client address
    client_burst: float = 60.0
    idle: float = 5.0
    deadline: float = 30.0
    retry_after: float = 10.0
    drain: float = 5.0  # seconds a stop gives the requests in flight
    max_tags: int = MAX_TAGS
    max_tag_value: int = MAX_TAG_VALUE
    certfile: str | None = None
    keyfile: str | None = None


class Refusal(Exception):
    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        retry: float | None = None,
        *,
        quiet: bool = False,
    ):
        super().__init__(message)
        self.status, self.reason, self.retry, self.quiet = status, reason, retry, quiet


#: the push paths and their protocols, as /metrics names them
PROTOCOLS = {DATADOG_PATH: "datadog", PYROSCOPE_PATH: "pyroscope"}

#: a Datadog agent's paths that carry no profile, answered 404 without a log
#: line: dd-trace-go posts its telemetry there every minute, from every instance
QUIET_PATHS = ("/telemetry/",)


class _Headers(http.client.HTTPMessage):
    """Request headers, parsed as headers only: email's parser, which
    http.server uses, sees a multipart Content-Type and compiles a regular
    expression for its boundary, new with every push (a millisecond each)."""

    def get_content_maintype(self) -> str:
        return "application"


class _Reader:
    """The connection's reader, noting whether the last line read ended without
    its newline: the client closed the connection inside it (``http.client``'s
    header parser takes the end of the stream as the end of the headers)."""

    def __init__(self, raw):
        self._raw = raw
        self.cut = False

    def readline(self, limit: int = -1) -> bytes:
        line = self._raw.readline(limit)
        self.cut = not line.endswith(b"\n")
        return line

    def __getattr__(self, name: str):
        return getattr(self._raw, name)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    MessageClass = _Headers
    server: PushServer
    # A wrapper delegating to the socket's reader (__getattr__), not a BufferedIOBase.
    rfile: _Reader  # type: ignore[assignment]

    def setup(self) -> None:
        super().setup()
        self.rfile = _Reader(self.rfile)
        self.server.drain.opened(self.connection)
        self.server.reaper.watch(self.connection, self.server.opts.idle + self.server.opts.deadline)
        self.connection.settimeout(self.server.opts.idle)
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass  # one line per refusal is ours (refuse); successes are counted, not logged

    def finish(self) -> None:
        self.server.reaper.forget(self.connection)
        self.server.drain.closed(self.connection)
        super().finish()

    def parse_request(self) -> bool:
        self.server.drain.begin(self.connection)  # its request line is read: in flight
        return super().parse_request()

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        finally:
            self.server.drain.end(self.connection)

    # --- answers -------------------------------------------------------------------

    def _send(self, status: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if status >= 400 or self.server.drain.stopping:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def refuse(self, r: Refusal) -> None:
        self.server.telemetry.refused.labels(r.reason).inc()
        protocol = PROTOCOLS.get(urlsplit(self.path).path)
        if protocol == "pyroscope" or (protocol == "datadog" and r.status < 500):
            # pyroscope-go sends nothing again; dd-trace-go only after a 5xx
            self.server.telemetry.dropped.labels(protocol, r.reason).inc()
        level = logging.DEBUG if r.quiet else logging.WARNING
        log.log(level, "refused %s %s: %s: %s", self.client_address[0], self.path[:80], r.reason, r)
        extra = {"Retry-After": retry_after(r.retry)} if r.retry is not None else None
        self._send(r.status, f"{r}\n".encode(), "text/plain; charset=utf-8", extra)

    # --- routes --------------------------------------------------------------------

    def _was_cut(self) -> bool:
        """A connection cut at its deadline, or closed by its client inside the
        headers: what was read of it is not a request (one line: the cut's, or
        ``closed_early``; never a refusal of the headers it lacks)."""
        if self.server.reaper.was_cut(self.connection):
            self.close_connection = True
            return True
        if self.rfile.cut and self.server.drain.stopping:  # its read side shut by the stop
            self.refuse(self._stopping())
            return True
        if self.rfile.cut:
            self.close_connection = True
            self.server.telemetry.refused.labels("closed_early").inc()
            log.warning(
                "refused %s %s: closed_early: the client closed the connection inside the headers",
                self.client_address[0],
                self.path[:80],
            )
            return True
        return False

    def do_GET(self) -> None:
        if self._was_cut():
            return
        if urlsplit(self.path).path == "/metrics":
            self._send(200, self.server.telemetry.render(), CONTENT_TYPE)
        else:
            self.refuse(Refusal(404, "not_found", "not found"))
        self._rearm()

    def do_POST(self) -> None:
        if self._was_cut():
            return
        start = time.perf_counter()
        self.body_read = False
        url = urlsplit(self.path)
        try:
            if url.path not in (DATADOG_PATH, PYROSCOPE_PATH):
                quiet = url.path.startswith(QUIET_PATHS)
                raise Refusal(404, "not_found", "not found", quiet=quiet)
            bound = self._authorize()
            body = self._body()
            push = self._parse(url, body)
            self._check(push, bound)
            self.server.spool.put(push, self.client_address[0], self.server.opts.max_tag_value)
        except Refusal as r:
            self.refuse(r)
            if not self.body_read:
                self._linger()
        except SpoolFull as e:
            self.refuse(Refusal(503, e.reason, str(e), self.server.opts.retry_after))
        else:
            t = self.server.telemetry
            t.pushes.labels(push.protocol).inc()
            t.profiles.labels(push.protocol).inc(len(push.profiles))
            self._send(200, b"{}", "application/json")
            t.ack.observe(time.perf_counter() - start)
        self._rearm()

    def _rearm(self) -> None:
        """The next request's deadline starts now (keep-alive)."""
        self.server.reaper.watch(self.connection, self.server.opts.idle + self.server.opts.deadline)

    # --- the checks, in order ------------------------------------------------------------

    def _authorize(self) -> str | None:
        srv = self.server
        ok, bound = srv.tokens.check(srv.tokens.presented(self.headers))
        if not ok:
            raise Refusal(401, "unauthorized", "missing or wrong token")
        wait = srv.rate.take(self.client_address[0])
        if wait:
            raise Refusal(503, "rate_limited", "too many requests from this client", wait)
        if srv.spool.full():
            raise Refusal(503, "spool_full", "spool is full", srv.opts.retry_after)
        return bound

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding") or self.headers.get("Content-Encoding"):
            raise Refusal(411, "no_length", "send a plain body with Content-Length")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise Refusal(411, "no_length", "Content-Length required") from None
        if length < 0 or length > self.server.opts.max_body:
            raise Refusal(
                413, "too_large", f"body of {length} bytes; the cap is {self.server.opts.max_body}"
            )
        body = self._read(length)
        self.body_read = True
        return body

    def _read(self, length: int) -> bytes:
        """``length`` bytes of body. Past the stop's bound, or ended short while
        the server stops (its read side shut by the stop), it is answered 503;
        ended short otherwise, the client went away."""
        drain, chunks, left = self.server.drain, [], length
        while left > 0:
            chunk = b"" if drain.cutting else self.rfile.read1(min(left, 1 << 20))
            if not chunk:
                if drain.stopping:
                    raise self._stopping()
                raise ConnectionResetError("client closed the connection mid-body")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _stopping(self) -> Refusal:
        msg = "the server is stopping; send it again"
        return Refusal(503, "shutdown", msg, self.server.opts.retry_after)

    def _linger(self) -> None:
        """After a refusal answered before the body was read: close our side, then
        read and drop what the client still sends (at most ``LINGER_BYTES``, within
        the connection's deadline), so it reads the answer: closing with its body
        unread resets the connection, and Go's net/http (both SDKs' client) then
        saw 'broken pipe' instead of the 413 for 8 of 10 bodies of 8 MiB, which
        dd-trace-go retries as a transport error."""
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            left = LINGER_BYTES
            while left > 0:
                chunk = self.rfile.read1(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def _parse(self, url, body: bytes):
        o = self.server.opts
        ctype = self.headers.get("Content-Type", "")
        try:
            if url.path == DATADOG_PATH:
                return parse_datadog(ctype, body, max_tags=o.max_tags)
            return parse_pyroscope(url.query, ctype, body, max_tags=o.max_tags)
        except PushError as e:
            status = 415 if e.reason == "unsupported_format" else 400
            raise Refusal(status, e.reason, str(e)) from None

    def _check(self, push, bound: str | None) -> None:
        o = self.server.opts
        if not push.profiles:
            raise Refusal(400, "malformed", "the push holds no profile")
        if bound is not None and push_meta(push, o.max_tag_value)["service"] != bound:
            raise Refusal(403, "forbidden", "this token may not push for that service")
        for att in push.attachments:
            if att.kind == "other":
                continue
            check = check_profile if att.kind == "profile" else check_size
            try:
                check(att.data, source=att.name, max_bytes=o.max_profile_bytes)
            except TooLargeError as e:
                raise Refusal(413, "bomb", str(e)) from None
            except ProfileError as e:
                raise Refusal(400, "malformed", str(e)) from None


class PushServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, opts: Options, spool: Spool, tokens: Tokens):
        self.opts, self.spool, self.tokens = opts, spool, tokens
        self.rate = RateLimit(opts.client_rate, opts.client_burst)
        self._active = 0
        self._mu = threading.Lock()
        self.drain = Drain()
        self.telemetry = Telemetry(spool, lambda: self._active, self.drain.in_flight)
        self.reaper = Reaper(on_cut=self._cut)
        self._tls = None
        if opts.certfile:
            self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                self._tls.load_cert_chain(opts.certfile, opts.keyfile)
            except OSError as e:  # missing, or not PEM (ssl.SSLError): was a traceback
                from pyproflab.errors import UsageError

                self.reaper.stop()
                pem = isinstance(e, ssl.SSLError)  # its strerror is "[SSL] PEM lib (_ssl.c:N)"
                why = "not a PEM certificate and its private key" if pem else e.strerror
                files = f"--tls-cert {opts.certfile}, --tls-key {opts.keyfile}"
                raise UsageError(f"{files}: cannot load: {why}") from None
        try:
            super().__init__((opts.host, opts.port), Handler)
        except OSError as e:  # the address is taken, or not this machine's
            from pyproflab.errors import UsageError

            self.reaper.stop()
            raise UsageError(f"--listen {opts.host}:{opts.port}: {e.strerror or e}") from None
        self._full = False
        self._sync = threading.Thread(target=self._resync_loop, daemon=True)
        self._sync.start()

    def _cut(self, peer: str) -> None:
        self.telemetry.refused.labels("deadline").inc()
        log.warning(
            "refused %s: deadline: connection cut after %gs",
            peer,
            self.opts.idle + self.opts.deadline,
        )

    def _resync_loop(self) -> None:
        while True:
            time.sleep(1.0)
            try:
                self.spool.resync()
            except OSError:
                continue

    def get_request(self):
        sock, addr = super().get_request()
        if self._tls is not None:
            sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def process_request(self, request, client_address) -> None:
        with self._mu:
            over = self._active >= self.opts.max_connections
            if not over:
                self._active += 1
        if over:
            self.telemetry.refused.labels("too_many_connections").inc()
            log.warning(
                "refused %s: too_many_connections: %d open",
                client_address[0],
                self.opts.max_connections,
            )
            self._busy(request)
            return
        super().process_request(request, client_address)

    def _busy(self, request) -> None:
        try:
            request.setblocking(False)
            if not isinstance(request, ssl.SSLSocket):
                request.send(
                    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: "
                    + retry_after(self.opts.retry_after).encode()
                    + b"\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                )
        except OSError:
            pass
        self.shutdown_request(request)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._mu:
                self._active -= 1

    def handle_error(self, request, client_address) -> None:
        # A client that went away, timed out or was cut: nothing was acknowledged.
        import sys

        err = sys.exc_info()[1]
        if isinstance(err, (OSError, ssl.SSLError, TimeoutError)):
            return
        log.exception("internal error serving %s", client_address[0])

    def server_close(self) -> None:
        self.reaper.stop()
        super().server_close()


def listen_check(host: str, tokens: Tokens) -> None:
    """Without a token, only a loopback address (UsageError otherwise)."""
    from pyproflab.errors import UsageError

    if tokens.required:
        return
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError as e:
        raise UsageError(f"--listen {host}: {e.strerror or e}") from None
    import ipaddress

    if not all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos):
        raise UsageError(
            f"--listen {host}: without --token or --tokens pyproflab serve listens on "
            "127.0.0.1 (or ::1) only"
        )
