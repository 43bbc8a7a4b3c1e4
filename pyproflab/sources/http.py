"""One bounded HTTP request for every network source: a total deadline, a size cap,
whole bodies only, and retries with backoff.

Rules:

- ``deadline`` (``time.monotonic()``) bounds the whole request: connecting,
  every redirect, the headers and the last byte of the body. A watchdog
  closes the connection when it passes, so a server trickling one byte at a
  time is cut at the deadline, not after its last byte.
- The body is read raw (``Accept-Encoding: identity``); one larger than
  ``max_bytes`` (by its Content-Length, or as it arrives) is refused, and one
  shorter than its Content-Length (the connection closed early) is an error,
  never half a body.
- Redirects (at most ``MAX_REDIRECTS``) are followed only to the same host
  and port unless ``other_hosts`` is set. The Authorization value goes to the
  first URL only, never to a redirect; an HTTP 401 or 403 that comes after a
  redirect says so (``FetchError.redirected``), so it is not blamed on a
  token that was never sent there.
- No proxies: collect talks to the services directly.
- Every failure is a ``FetchError``: one line naming the URL without
  credentials or query, never a header (an HTTP error keeps the first
  ``ERROR_BODY_BYTES`` of its body apart, for the caller to read an API's
  explanation from); ``transient`` says whether a retry
  may help (connection refused or reset, timeout, HTTP 408/429/5xx), and
  ``retry_after`` holds the seconds an HTTP 429 or 503 asked to wait
  (``Retry-After``, in seconds or as an HTTP date).
- ``secret_headers`` (API keys) go, like the Authorization value, to the
  first URL only and are written nowhere.
- ``retrying`` calls a request again after a transient failure, up to
  ``Retries.retries`` times, waiting ``backoff_delay`` or the Retry-After the
  server asked for, whichever is longer; a Retry-After longer than
  ``Retries.max_wait`` is not waited for: the failure is reported at once.

httpx does the HTTP (h11 checks framing and Content-Length for us); this
module adds the deadline, the cap and the redirect policy.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

import httpx

from pyproflab.sources.targets import redact_url

USER_AGENT = "pyproflab-collect"
MAX_BODY = 512 << 20
MAX_REDIRECTS = 5
# What an HTTP error's body is read of: APIs explain there (Prometheus' JSON
# errorType and error), in far less.
ERROR_BODY_BYTES = 64 << 10
DEFAULT_BACKOFF = 0.5
BACKOFF_CAP = 8.0

T = TypeVar("T")


class FetchError(Exception):
    """One failed request: ``message`` is one line, ``transient`` says whether to retry."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        status: int | None = None,
        redirected: bool = False,
        retry_after: float | None = None,
        body: bytes = b"",
    ):
        super().__init__(message)
        self.transient = transient
        self.status = status
        self.redirected = redirected
        self.retry_after = retry_after
        self.body = body  # an HTTP error's body, its first ERROR_BODY_BYTES


@dataclass(frozen=True)
class Reply:
    """A whole response: status, content type (lower case, without parameters), body."""

    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True)
class Retries:
    """How a transient failure is retried (see the module rules)."""

    retries: int = 3
    backoff: float = DEFAULT_BACKOFF
    max_wait: float = 60.0


def backoff_delay(attempt: int, base: float) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): exponential, capped,
    with "equal jitter" so that many clients retrying at once spread out."""
    d = min(BACKOFF_CAP, base * 2 ** (attempt - 1))
    return d / 2 + random.uniform(0, d / 2)


def retrying(
    call: Callable[[], T],
    retries: Retries,
    *,
    stop: threading.Event | None = None,
    on_retry: Callable[[int, FetchError, float], None] | None = None,
) -> T:
    """``call()``, called again after each transient ``FetchError`` (module rules).
    The last failure is raised with " (after N attempts)" when there were several;
    ``on_retry(attempt, error, wait)`` is told before each wait."""
    attempt = 1
    while True:
        try:
            return call()
        except FetchError as e:
            wait = max(backoff_delay(attempt, retries.backoff), e.retry_after or 0.0)
            if e.retry_after is not None and e.retry_after > retries.max_wait:
                e.args = (f"{e} (asked to retry after {e.retry_after:g} s; not waiting)",)
                raise
            if not e.transient or attempt > retries.retries or (stop and stop.is_set()):
                if attempt > 1:
                    e.args = (f"{e} (after {attempt} attempts)",)
                raise
            if on_retry is not None:
                on_retry(attempt, e, wait)
            if stop is not None:
                if stop.wait(wait):
                    raise
            else:
                time.sleep(wait)
            attempt += 1


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The seconds a Retry-After header asks for (a number, or an HTTP date); None
    when absent or unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def shown(url: str) -> str:
    """A URL as error lines show it: no credentials, no query."""
    return redact_url(url).split("?", 1)[0]


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urlsplit(url)
    port = u.port or {"http": 80, "https": 443}.get(u.scheme)
    return u.scheme, (u.hostname or "").lower(), port


_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()


def _client() -> httpx.Client:
    """One client for the process (thread-safe; its TLS context is built once)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = httpx.Client(follow_redirects=False, trust_env=False)
        return _CLIENT


def http_get(
    url: str,
    *,
    authorization: str | None,
    timeout: float,
    deadline: float | None = None,
    max_bytes: int = MAX_BODY,
    other_hosts: bool = False,
) -> bytes:
    """GET ``url`` and return the whole body (see the module's rules).

    ``timeout`` bounds each wait (connect, each read); ``deadline`` the total.
    """
    secret = {"Authorization": authorization} if authorization is not None else None
    reply = http_request(
        "GET",
        url,
        secret_headers=secret,
        timeout=timeout,
        deadline=deadline,
        max_bytes=max_bytes,
        other_hosts=other_hosts,
    )
    return reply.body


def http_request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    secret_headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    timeout: float,
    deadline: float | None = None,
    max_bytes: int = MAX_BODY,
    other_hosts: bool = False,
) -> Reply:
    """One request and its whole response (see the module's rules): ``headers`` go
    to every hop, ``secret_headers`` to the first URL only. A 307/308 redirect
    repeats the method and body; 301/302/303 follow with a GET."""
    deadline = time.monotonic() + timeout if deadline is None else deadline
    first = url
    client = _client()
    for hop in range(MAX_REDIRECTS + 1):
        sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})}
        if hop == 0 and secret_headers:
            sent.update(secret_headers)
        call = _Call(method, url, sent, body, timeout, deadline, max_bytes, hop > 0)
        got = _once(client, call)
        if isinstance(got, Reply):
            return got
        status, location = got
        nxt = urljoin(url, location)
        if urlsplit(nxt).scheme not in ("http", "https"):
            raise FetchError(f"redirect to a non-HTTP URL from {shown(url)}", transient=False)
        if not other_hosts and _origin(nxt) != _origin(first):
            raise FetchError(
                f"redirected from {shown(url)} to another host ({shown(nxt)}); refused "
                "(set allow_redirects_to_other_hosts on the target to follow it)",
                transient=False,
            )
        if status in (301, 302, 303):
            method, body = "GET", None
        url = nxt
    raise FetchError(f"more than {MAX_REDIRECTS} redirects from {shown(first)}", transient=False)


@dataclass(frozen=True)
class _Call:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    timeout: float
    deadline: float
    max_bytes: int
    redirected: bool


def _once(client: httpx.Client, call: _Call) -> Reply | tuple[int, str]:
    """The response to one request, or (status, Location) of a redirect."""
    where = shown(call.url)
    late = FetchError(f"timed out after {call.timeout:g} s waiting for {where}", transient=True)
    if time.monotonic() >= call.deadline:
        raise late
    expired = threading.Event()
    try:
        with client.stream(
            call.method,
            call.url,
            headers=call.headers,
            content=call.body,
            timeout=httpx.Timeout(call.timeout),
        ) as resp:
            # The watchdog: closing the stream makes a blocked read return.
            wait = max(0.0, call.deadline - time.monotonic())
            timer = threading.Timer(wait, _expire, (resp, expired))
            timer.daemon = True
            timer.start()
            try:
                return _read(resp, where, call.max_bytes, call.redirected, late, expired)
            finally:
                timer.cancel()
    except FetchError:
        raise
    except httpx.TimeoutException:
        raise late from None
    except (httpx.HTTPError, OSError) as e:
        if expired.is_set():
            raise late from None
        raise FetchError(_network_reason(e, where), transient=_is_transient(e)) from None


def _expire(resp: httpx.Response, expired: threading.Event) -> None:
    """Cut the connection under a blocked read: shutdown wakes a thread waiting
    in recv (closing the socket alone does not, on Linux)."""
    expired.set()
    try:
        stream = resp.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # noqa: BLE001, S110 - the reader reports the failure
        pass


def _read(
    resp: httpx.Response,
    where: str,
    max_bytes: int,
    redirected: bool,
    late: FetchError,
    expired: threading.Event,
) -> Reply | tuple[int, str]:
    code = resp.status_code
    if code in (301, 302, 303, 307, 308) and resp.headers.get("location"):
        return code, resp.headers["location"]
    if code >= 400:
        transient = code in (408, 429) or code >= 500
        msg = f"HTTP {code} from {where}"
        if redirected and code in (401, 403):
            msg += " after a redirect (no token is sent to a redirect)"
        wait = retry_after_seconds(resp.headers.get("retry-after")) if transient else None
        raise FetchError(
            msg,
            transient=transient,
            status=code,
            redirected=redirected,
            retry_after=wait,
            body=_error_body(resp, expired),
        )
    declared = resp.headers.get("content-length")
    length = int(declared) if declared and declared.isdigit() else None
    if length is not None and length > max_bytes:
        raise FetchError(f"body larger than {max_bytes} bytes from {where}", transient=False)
    chunks: list[bytes] = []
    total = 0
    for chunk in resp.iter_raw(1 << 16):
        if expired.is_set():
            raise late
        total += len(chunk)
        if total > max_bytes:
            raise FetchError(f"body larger than {max_bytes} bytes from {where}", transient=False)
        chunks.append(chunk)
    if expired.is_set():
        raise late
    if length is not None and total != length:
        raise FetchError(
            f"short body from {where} ({total} of {length} bytes; the connection closed early)",
            transient=True,
        )
    kind = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return Reply(code, kind, b"".join(chunks))


def _error_body(resp: httpx.Response, expired: threading.Event) -> bytes:
    """The first ERROR_BODY_BYTES of an error reply's body; what cannot be read
    (the deadline, a connection closed) is left out: the status is the error."""
    got = b""
    try:
        for chunk in resp.iter_raw(1 << 14):
            if expired.is_set():
                break
            got += chunk
            if len(got) >= ERROR_BODY_BYTES:
                break
    except (httpx.HTTPError, OSError):
        pass
    return got[:ERROR_BODY_BYTES]


def _is_transient(e: BaseException) -> bool:
    # A host name that does not resolve will not resolve on a retry either.
    return not _network_reason(e, "").startswith("cannot resolve")


def _network_reason(e: BaseException, where: str) -> str:
    text = str(e)
    if isinstance(e, httpx.ConnectError):
        if "refused" in text.lower():
            return f"connection refused by {where}"
        if any(w in text.lower() for w in ("name resolution", "not known", "nodename")):
            return f"cannot resolve the host of {where}"
        return f"cannot connect to {where}"
    if isinstance(e, httpx.RemoteProtocolError):
        if "peer closed connection without sending complete message body" in text:
            return f"short body from {where} (the connection closed early)"
        if "Server disconnected" in text or "without sending" in text:
            return f"connection closed by {where}"
        return f"bad HTTP response from {where} (RemoteProtocolError)"
    if isinstance(e, httpx.ReadError | httpx.WriteError) or isinstance(e, ConnectionResetError):
        return f"connection closed by {where}"
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror.lower()} ({where})"
    # Never str(e) of a request error beyond these: it could name headers.
    return f"{type(e).__name__} from {where}"
