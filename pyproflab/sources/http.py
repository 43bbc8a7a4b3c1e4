"""One bounded HTTP GET for collect: a total deadline, a size cap, whole bodies only.

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
  credentials or query, never a header; ``transient`` says whether a retry
  may help (connection refused or reset, timeout, HTTP 408/429/5xx).

httpx does the HTTP (h11 checks framing and Content-Length for us); this
module adds the deadline, the cap and the redirect policy.
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urljoin, urlsplit

import httpx

from pyproflab.sources.targets import redact_url

USER_AGENT = "pyproflab-collect"
MAX_BODY = 512 << 20
MAX_REDIRECTS = 5


class FetchError(Exception):
    """One failed request: ``message`` is one line, ``transient`` says whether to retry."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        status: int | None = None,
        redirected: bool = False,
    ):
        super().__init__(message)
        self.transient = transient
        self.status = status
        self.redirected = redirected


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
    deadline = time.monotonic() + timeout if deadline is None else deadline
    first = url
    client = _client()
    for hop in range(MAX_REDIRECTS + 1):
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if hop == 0 and authorization is not None:
            headers["Authorization"] = authorization
        location = _get_once(client, url, headers, timeout, deadline, max_bytes, hop > 0)
        if isinstance(location, bytes):
            return location
        nxt = urljoin(url, location)
        if urlsplit(nxt).scheme not in ("http", "https"):
            raise FetchError(f"redirect to a non-HTTP URL from {shown(url)}", transient=False)
        if not other_hosts and _origin(nxt) != _origin(first):
            raise FetchError(
                f"redirected from {shown(url)} to another host ({shown(nxt)}); refused "
                "(set allow_redirects_to_other_hosts on the target to follow it)",
                transient=False,
            )
        url = nxt
    raise FetchError(f"more than {MAX_REDIRECTS} redirects from {shown(first)}", transient=False)


def _get_once(
    client: httpx.Client,
    url: str,
    headers: dict[str, str],
    timeout: float,
    deadline: float,
    max_bytes: int,
    redirected: bool,
) -> bytes | str:
    """The body of one response, or the Location of a redirect."""
    where = shown(url)
    late = FetchError(f"timed out after {timeout:g} s waiting for {where}", transient=True)
    if time.monotonic() >= deadline:
        raise late
    expired = threading.Event()
    try:
        with client.stream("GET", url, headers=headers, timeout=httpx.Timeout(timeout)) as resp:
            # The watchdog: closing the stream makes a blocked read return.
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), _expire, (resp, expired))
            timer.daemon = True
            timer.start()
            try:
                return _read(resp, where, max_bytes, redirected, late, expired)
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
) -> bytes | str:
    code = resp.status_code
    if code in (301, 302, 303, 307, 308) and resp.headers.get("location"):
        return resp.headers["location"]
    if code >= 400:
        transient = code in (408, 429) or code >= 500
        msg = f"HTTP {code} from {where}"
        if redirected and code in (401, 403):
            msg += " after a redirect (no token is sent to a redirect)"
        raise FetchError(msg, transient=transient, status=code, redirected=redirected)
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
    return b"".join(chunks)


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
