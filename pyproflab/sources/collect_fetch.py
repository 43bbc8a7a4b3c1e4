"""The fetches and scrapes of one collection window, run on the pool's threads
(``sources/collect.py`` schedules them; its module rules say what they do).

``fetch_profile`` GETs one profile with retries and decodes it before anything
is kept (an execution trace: checks its header); ``scrape`` GETs one target's
/metrics once and parses it. Neither raises: a failure is the one-line
``error`` of the result.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyproflab.errors import MetricsError, ProfileError
from pyproflab.sources.collect_report import FetchResult
from pyproflab.sources.http import FetchError, backoff_delay, http_get
from pyproflab.sources.http import shown as _shown
from pyproflab.sources.targets import Target, redact_url

if TYPE_CHECKING:
    import pyarrow as pa

    from pyproflab.model import Profile

# type -> (endpoint under /debug/pprof/, windowed with ?seconds=N)
ENDPOINTS: dict[str, tuple[str, bool]] = {
    "cpu": ("profile", True),
    "heap": ("heap", False),
    "allocs": ("allocs", True),
    "goroutine": ("goroutine", False),
    "mutex": ("mutex", True),
    "block": ("block", True),
    "trace": ("trace", True),
}


@dataclass
class Fetched:
    """A decoded body, ready for the archive and the store (built on a pool thread)."""

    result: FetchResult
    target: Target
    profile: Profile | None = None
    gz: bytes | None = None


def _profile_url(target: Target, profile_type: str, seconds: int) -> str:
    endpoint, windowed = ENDPOINTS[profile_type]
    query = f"?seconds={seconds}" if windowed else ""
    return f"{target.url}/debug/pprof/{endpoint}{query}"


def fetch_profile(
    target: Target,
    profile_type: str,
    *,
    seconds: int,
    timeout: float,
    retries: int,
    backoff: float,
    stop: threading.Event,
) -> Fetched:
    from pyproflab.decode import decode_bytes, decompress

    url = _profile_url(target, profile_type, seconds)
    result = FetchResult(target.name, profile_type, redact_url(url))
    windowed = ENDPOINTS[profile_type][1]
    # A windowed request answers only after `seconds`: give it that on top.
    sock_timeout = timeout + (seconds if windowed else 0)
    for attempt in range(1, retries + 2):
        result.attempts = attempt
        try:
            auth = target.authorization()
        except LookupError as e:
            result.error = str(e)
            return Fetched(result, target)
        start = datetime.now(UTC)
        try:
            body = http_get(
                url,
                authorization=auth,
                timeout=sock_timeout,
                deadline=time.monotonic() + sock_timeout,
                other_hosts=target.allow_redirects_to_other_hosts,
            )
        except FetchError as e:
            result.error = str(e)
            if e.transient and attempt <= retries and not stop.is_set():
                if stop.wait(backoff_delay(attempt, backoff)):
                    break
                continue
            if attempt > 1:
                result.error += f" (after {attempt} attempts)"
            elif e.status in (401, 403) and not e.redirected:
                # Name the variable, never its value.
                result.error += (
                    f" (check the value of ${target.auth_env})"
                    if target.auth_env
                    else " (the target has no auth_env)"
                )
            return Fetched(result, target)
        end = datetime.now(UTC)
        result.window_start, result.window_end, result.size = start, end, len(body)
        if profile_type == "trace":
            return _trace_body(result, target, body, url)
        try:
            raw = decompress(body, source=result.url)
            profile = decode_bytes(raw, source=result.url)
        except ProfileError as e:
            result.error = f"{e.problem} from {_shown(url)}"
            return Fetched(result, target)
        result.content_hash = hashlib.sha256(raw).hexdigest()
        # The archive holds gzip (.pb.gz): Go's bytes as sent, else gzipped here.
        gz = body if body[:2] == b"\x1f\x8b" else gzip.compress(raw, mtime=0)
        result.error = None
        return Fetched(result, target, profile, gz)
    result.error = (result.error or "stopped") + " (interrupted)"
    return Fetched(result, target)


def _trace_body(result: FetchResult, target: Target, body: bytes, url: str) -> Fetched:
    """A fetched execution trace: kept as sent when its header says it is one."""
    from pyproflab.decode.gotrace import trace_version

    if trace_version(body[:16]) is None:
        result.error = f"not a Go execution trace from {_shown(url)}"
        return Fetched(result, target)
    result.content_hash = hashlib.sha256(body).hexdigest()
    result.error = None
    return Fetched(result, target, None, body)


@dataclass
class Scraped:
    target: Target
    url: str
    when: datetime
    table: pa.Table | None = None
    error: str | None = None


def scrape(target: Target, *, timeout: float) -> Scraped:
    from pyproflab.sources.prometheus_scan import parse_exposition

    url = f"{target.url}/metrics"
    shown = redact_url(url)
    when = datetime.now(UTC)
    try:
        auth = target.authorization()
        body = http_get(
            url,
            authorization=auth,
            timeout=timeout,
            deadline=time.monotonic() + timeout,
            other_hosts=target.allow_redirects_to_other_hosts,
        )
    except LookupError as e:
        return Scraped(target, shown, when, error=str(e))
    except FetchError as e:
        return Scraped(target, shown, when, error=str(e))
    try:
        text = body.decode("utf-8")
        table = parse_exposition(text, default_time=when, source=shown)
    except MetricsError as e:
        at = f"line {e.line}: " if e.line is not None else ""
        return Scraped(
            target, shown, when, error=f"not a Prometheus exposition from {shown} ({at}{e.problem})"
        )
    except (UnicodeDecodeError, ValueError) as e:
        return Scraped(
            target,
            shown,
            when,
            error=f"not a Prometheus exposition from {shown} ({type(e).__name__})",
        )
    return Scraped(target, shown, when, table=table)
