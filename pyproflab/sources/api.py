"""The HTTP client of the pull sources (Datadog, Pyroscope, Parca): bounded, retried,
one line per failure, no secret anywhere.

Rules:

- Every request goes through ``sources.http.http_request``: a deadline of
  ``timeout`` seconds for the whole exchange (connect, headers, the last byte),
  a cap of ``max_bytes`` on the body, redirects to the same host only, no
  proxy. A slow body is cut at the deadline; a short one (the connection
  closed early) is an error, never half a body.
- Transient failures (connection refused or reset, timeouts, short bodies,
  HTTP 408, 429 and 5xx) are retried with backoff (``http.retrying``),
  honouring the server's Retry-After; others fail at once.
- The API's base URL is ``http://`` or ``https://`` with a host and holds no
  credentials (``targets.check_url``): secrets never come from a URL, so none
  is shown or stored with the source's name, nor sent as a Basic value. The
  refusal's advice (``url_advice``) names where credentials go instead, as
  the caller spells it (a job's ``auth_env``, the pull command's --auth-env).
- ``secrets()`` gives the headers holding credentials (read from the
  environment when a request is made); they go to the API's own URL only,
  never to a redirect, and are never written: errors name the source, the
  method and the path (no query, no header).
- A reply whose content type is not one the caller accepts (a proxy's HTML
  login page instead of JSON or pprof) is an error, not retried.
- A failure is an ``ApiError``: a ``SourceError`` whose line is
  ``SOURCE: METHOD PATH: reason``; ``transient`` and ``status`` say what
  happened, so a source can skip one item and go on.
- An HTTP error's reason ends with what its body says (``body_reason``): an
  API says there why it refused (a bad key, a bad query, a quota), in JSON
  (``message``, ``error``, ``errors``, ``detail`` or ``title``, as Connect,
  Datadog and JSON:API put it) or text (the first line; an HTML page says
  nothing the status does not). At most ``REASON_CHARS`` characters, control
  and format characters dropped (a body is the server's, not ours to print
  raw), and any secret the request sent replaced by ``***``.
- ``on_retry`` (the CLI: a line on stderr) is told of each retry.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyproflab.sources.base import SourceError
from pyproflab.sources.http import FetchError, Reply, Retries, http_request, retrying

JSON = ("application/json",)
REASON_CHARS = 200
# Where JSON error bodies put their reason, first found first.
REASON_KEYS = ("message", "error", "errors", "detail", "title", "error_description")
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 256 << 20

OnRetry = Callable[[str], None]


class ApiError(SourceError):
    """One request of a source failed (after its retries)."""

    def __init__(self, source: str, problem: str, *, transient: bool, status: int | None):
        super().__init__(source, problem)
        self.transient = transient
        self.status = status


@dataclass
class Api:
    """Requests to one service's API (see the module rules)."""

    source: str
    base_url: str
    secrets: Callable[[], Mapping[str, str]] = dict
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES
    retries: Retries = field(default_factory=Retries)
    on_retry: OnRetry | None = None
    requests: int = 0
    #: where credentials go instead of the URL, as the caller names it
    url_advice: str | None = None

    def __post_init__(self) -> None:
        from pyproflab.sources.targets import AUTH_ENV_ADVICE, check_url

        advice = self.url_advice or AUTH_ENV_ADVICE
        try:
            self.base_url = check_url(self.base_url, "the server's URL", advice)
        except ValueError as e:
            raise SourceError(self.source, str(e)) from None

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        body: Any = None,
        accept: Sequence[str] = JSON,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """One request (JSON ``body`` when given), retried; the whole reply."""
        url = self.base_url.rstrip("/") + path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        data = None if body is None else json.dumps(body).encode()
        sent = {"Accept": ", ".join(accept), **self.headers, **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        where = f"{method} {path}"

        def once() -> Reply:
            self.requests += 1
            return http_request(
                method,
                url,
                headers=sent,
                secret_headers=self._secrets(),
                body=data,
                timeout=self.timeout,
                deadline=time.monotonic() + self.timeout,
                max_bytes=self.max_bytes,
            )

        def told(attempt: int, e: FetchError, wait: float) -> None:
            if self.on_retry is not None:
                said = f"{where}: {e}{self._reason(e)}"
                self.on_retry(f"{self.source}: {said}; retry {attempt} in {wait:.1f} s")

        try:
            reply = retrying(once, self.retries, on_retry=told)
        except FetchError as e:
            raise ApiError(
                self.source,
                f"{where}: {e}{self._reason(e)}",
                transient=e.transient,
                status=e.status,
            ) from None
        if accept and reply.content_type not in accept:
            got = reply.content_type or "no content type"
            raise ApiError(
                self.source,
                f"{where}: expected {' or '.join(accept)}, got {got}",
                transient=False,
                status=reply.status,
            )
        return reply

    def json(self, method: str, path: str, **kw: Any) -> Any:
        """The JSON document a request answers (see ``call``)."""
        reply = self.call(method, path, **kw)
        try:
            return json.loads(reply.body)
        except (ValueError, RecursionError):  # RecursionError: nested past the limit
            raise ApiError(
                self.source, f"{method} {path}: the reply is not JSON", transient=False, status=200
            ) from None

    def _reason(self, e: FetchError) -> str:
        """``: REASON`` from an HTTP error's body, secrets hidden; empty without one."""
        if e.status is None:
            return ""
        # "Bearer T": T alone too.
        hidden = [p for v in self._secrets().values() for p in (v, *v.split()[1:])]
        reason = body_reason(e.body, hidden)
        return f": {reason}" if reason else ""

    def _secrets(self) -> dict[str, str]:
        try:
            return dict(self.secrets())
        except LookupError as e:
            raise SourceError(self.source, str(e).strip("'\"")) from None


def env_secret(name: str, what: str) -> str:
    """The value of environment variable ``name`` (stripped), read now; ``LookupError``
    naming the variable (never a value) when it is unset or empty."""
    import os

    value = os.environ.get(name, "").strip()
    if not value:
        raise LookupError(f"environment variable {name} ({what}) is not set")
    return value


def body_reason(body: bytes, secrets: Sequence[str] = ()) -> str:
    """The reason an HTTP error's body gives, one line, each of ``secrets`` (of
    4 characters or more) shown as ``***`` (see the module rules); "" if none."""
    import unicodedata

    text = body.decode("utf-8", "replace").strip()
    try:
        found = _json_reason(json.loads(text)) if text.startswith(("{", "[")) else None
    except (ValueError, RecursionError):
        found = None
    if found is None:
        found = "" if text[:1] == "<" else next((ln for ln in text.splitlines() if ln.strip()), "")
    # Whitespace (newlines, tabs) becomes spaces; other control and format
    # characters (escapes, bidi overrides) are dropped.
    drop = ("Cc", "Cf")
    kept = (" " if c.isspace() else c for c in found)
    line = " ".join("".join(c for c in kept if unicodedata.category(c) not in drop).split())
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            line = line.replace(secret, "***")
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def _json_reason(doc: Any, depth: int = 0) -> str | None:
    """The first string under ``REASON_KEYS`` (or a list's first item), a few levels down."""
    if isinstance(doc, str):
        return doc if doc.strip() else None
    if depth > 3:
        return None
    if isinstance(doc, list):
        return next(filter(None, (_json_reason(x, depth + 1) for x in doc[:3])), None)
    if isinstance(doc, dict):
        for key in REASON_KEYS:
            found = _json_reason(doc.get(key), depth + 1)
            if found:
                return found
    return None
