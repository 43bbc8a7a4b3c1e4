"""One profile from a URL, as ``go tool pprof http://host:port/debug/pprof/profile`` reads it.

Rules:

- The URL is fetched with ``sources.http.http_get`` (collect's bounded GET:
  no proxy, same-host redirects, whole bodies only). ``seconds`` (pprof's
  -seconds) is set as the query's ``seconds`` parameter, and the deadline is
  that plus 60 s.
- The body is capped at ``max_bytes``; a non-200 answer, a network error, a
  timeout or a larger body is a one-line ``SourceError`` naming the URL
  without its credentials or query.
- The item's ``source`` is the URL without credentials (its query kept).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

from pyproflab.decode.pprof import DEFAULT_MAX_BYTES
from pyproflab.sources.base import (
    PROFILES,
    ItemMeta,
    Known,
    Offer,
    ProfileItem,
    Request,
    SourceError,
)
from pyproflab.sources.http import FetchError, http_get, shown
from pyproflab.sources.targets import redact_url


def with_seconds(url: str, seconds: float | None) -> str:
    """``url`` with its ``seconds`` query parameter set (pprof's -seconds)."""
    if seconds is None:
        return url
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query)
    query = [(k, v) for k, v in query if k != "seconds"] + [("seconds", f"{seconds:g}")]
    return parts._replace(query=urllib.parse.urlencode(query)).geturl()


@dataclass
class UrlSource:
    """The profile one URL serves (see the module rules)."""

    url: str
    seconds: float | None = None
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def name(self) -> str:
        return shown(self.url)

    def offer(self, request: Request) -> Offer:
        return Offer(kinds=(PROFILES,), items=1)

    def items(self, request: Request, known: Known) -> Iterator[ProfileItem]:
        url = with_seconds(self.url, self.seconds)
        timeout = (self.seconds or 0) + 60
        try:
            data = http_get(url, authorization=None, timeout=timeout, max_bytes=self.max_bytes)
        except FetchError as e:
            raise SourceError(self.name, f"GET: {e}") from None
        yield ProfileItem(ItemMeta(source=redact_url(url)), data=data)
