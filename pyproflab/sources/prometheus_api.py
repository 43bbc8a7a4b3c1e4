"""Prometheus metrics from a server's HTTP API (``/api/v1/query_range``,
``/api/v1/metadata``), as ``schema.METRIC_SAMPLES`` rows like the text format's
(``prometheus``): values are read as Go floats, labels keep ``instance`` and
``job``. Requests are ``sources.http``'s (a deadline for the whole exchange,
a cap on the answer, ``max_bytes``); every failure is one ``MetricsError``
naming the URL.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from pyproflab import schema
from pyproflab.errors import MetricsError
from pyproflab.sources.http import FetchError, http_request, shown
from pyproflab.sources.prometheus import non_finite_problem, parse_float, samples_table

DEFAULT_TIMEOUT = 30.0
# The largest answer read: a range query's JSON takes about 30 bytes a point.
DEFAULT_MAX_BYTES = 256 << 20
# Prometheus refuses a query_range of more than 11,000 points per series.
MAX_POINTS = 11_000


def _seconds(value: datetime | float | int) -> float:
    if isinstance(value, datetime):
        t = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        return t.timestamp()
    return float(value)


def _step_seconds(step: timedelta | float | int | str) -> float:
    if isinstance(step, timedelta):
        return step.total_seconds()
    if isinstance(step, str):
        m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?", step.strip())
        if not m:
            raise MetricsError("query_range", f"bad step {step!r} (e.g. 15s, 1m, 0.5)")
        scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[m.group(2)]
        return float(m.group(1)) * scale
    return float(step)


def _api_get(
    base_url: str, path: str, params: Mapping[str, str], *, timeout: float, max_bytes: int
) -> Any:
    """GET ``base_url + path`` and return the ``data`` of a ``status: success`` body.

    The request is ``sources.http``'s: ``timeout`` bounds the whole exchange and
    a body over ``max_bytes`` is refused, so a server cannot hold us or fill
    memory. Every failure (HTTP error, connection refused, timeout, a body
    that is not the API's JSON, ``status: error``, ``warnings``: data the
    server could not read, so a partial answer) is one ``MetricsError``
    naming the URL; an HTTP error gives the API's own explanation when its
    body has one.
    """
    url = base_url.rstrip("/") + path + "?" + urllib.parse.urlencode(params)
    where = base_url.rstrip("/") + path
    try:
        reply = http_request(
            "GET", url, headers={"Accept": "application/json"}, timeout=timeout, max_bytes=max_bytes
        )
    except FetchError as e:
        raise MetricsError(where, _failure(e, url, max_bytes)) from None
    try:
        doc = json.loads(reply.body)
    except (ValueError, RecursionError):  # RecursionError: nested past the limit
        raise MetricsError(where, "response is not JSON (is this a Prometheus server?)") from None
    if not isinstance(doc, dict) or "status" not in doc:
        raise MetricsError(where, "response is not a Prometheus API answer")
    if doc["status"] != "success":
        raise MetricsError(where, f"{doc.get('errorType', 'error')}: {doc.get('error', '')}")
    # Warnings: part of the data could not be read (a failed remote read, a
    # store down), the rest is in ``data``; ``infos`` are hints about the query.
    if warnings := doc.get("warnings"):
        said = "; ".join(" ".join(str(w).split()) for w in warnings)
        raise MetricsError(where, f"the answer may be incomplete, the server warns: {said}")
    return doc.get("data")


def _failure(e: FetchError, url: str, max_bytes: int) -> str:
    """What went wrong, in one line after the URL (so without it again): the
    API's errorType and error for an HTTP error that has them (Prometheus
    answers 400, 422 and 503 so)."""
    if e.status is None:
        text = str(e).replace(shown(url), "the server")
        if text.startswith("body larger than"):
            return f"answer larger than {max_bytes >> 20} MiB: narrow the window or the query"
        return text
    try:
        err = json.loads(e.body)
        msg = f"{err.get('errorType', 'error')}: {err.get('error', '')}".strip()
    except (ValueError, AttributeError, RecursionError):
        msg = ""
    return f"HTTP {e.status}: {' '.join(msg.split())}".rstrip(": ")


def query_range(
    base_url: str,
    query: str,
    start: datetime | float,
    end: datetime | float,
    step: timedelta | float | str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    types: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> pa.Table:
    """Rows of ``schema.METRIC_SAMPLES`` for a PromQL range query.

    ``start``/``end`` are datetimes (naive = UTC) or Unix seconds; ``step`` a
    timedelta, seconds, or ``15s``/``1m``. Windows of more than ``MAX_POINTS``
    steps are split into several requests. ``labels`` are the series' labels
    (``instance`` and ``job`` included) without ``__name__``; ``metric`` is
    ``__name__``, or the query text for an expression without one. ``type``
    comes from ``types`` (metric -> type, e.g. ``metric_metadata``; a family's
    ``_bucket``/``_sum``/``_count`` take the family's), else ``untyped``.
    Errors are one-line ``MetricsError``.
    """
    t0, t1, dt = _seconds(start), _seconds(end), _step_seconds(step)
    if dt <= 0:
        raise MetricsError("query_range", "step must be positive")
    if t1 < t0:
        raise MetricsError("query_range", "end is before start")
    metrics: list[str] = []
    labels: list[list[tuple[str, str]]] = []
    kinds: list[str] = []
    times: list[int] = []
    values: list[float] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...], int]] = set()
    chunk_start = t0
    while True:
        chunk_end = min(t1, chunk_start + dt * (MAX_POINTS - 1))
        params = {
            "query": query,
            "start": repr(chunk_start),
            "end": repr(chunk_end),
            "step": repr(dt),
        }
        data = _api_get(
            base_url, "/api/v1/query_range", params, timeout=timeout, max_bytes=max_bytes
        )
        where = base_url.rstrip("/") + "/api/v1/query_range"
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise MetricsError(where, "expected a matrix result")
        for series in data.get("result") or []:
            try:
                lab = dict(series["metric"])
                name = lab.pop("__name__", None) or query
                pairs = tuple(sorted(lab.items()))
                kind = _type_of(name, types)
                for ts, val in series["values"]:
                    us = round(float(ts) * 1e6)
                    key = (name, pairs, us)
                    if key in seen:  # chunk edges repeat one point
                        continue
                    seen.add(key)
                    metrics.append(name)
                    labels.append(list(pairs))
                    kinds.append(kind)
                    times.append(us)
                    value = parse_float(val)
                    if not math.isfinite(value) and (why := non_finite_problem(name, kind, pairs)):
                        raise MetricsError(where, f"{name}: {val} is not a value {why} can take")
                    values.append(value)
            except (KeyError, TypeError, ValueError) as e:
                raise MetricsError(where, f"malformed series in result: {e}") from None
        if chunk_end >= t1:
            break
        chunk_start = chunk_end + dt
    return samples_table(metrics, labels, kinds, times, values)


def _type_of(name: str, types: Mapping[str, str] | None) -> str:
    if not types:
        return "untyped"
    if name in types:
        return types[name]
    for suffix, kinds in (
        ("_bucket", ("histogram",)),
        ("_sum", ("histogram", "summary")),
        ("_count", ("histogram", "summary")),
    ):
        base = name.removesuffix(suffix)
        if base != name and types.get(base) in kinds:
            return types[base]
    return "untyped"


def metric_metadata(
    base_url: str,
    *,
    metrics: Iterable[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> dict[str, str]:
    """metric family -> type, from ``/api/v1/metadata`` (types Prometheus
    learned from the scraped TYPE lines; ``unknown`` becomes ``untyped``)."""
    data = _api_get(base_url, "/api/v1/metadata", {}, timeout=timeout, max_bytes=max_bytes)
    wanted = set(metrics) if metrics is not None else None
    out: dict[str, str] = {}
    if not isinstance(data, dict):
        return out
    for name, entries in data.items():
        if wanted is not None and name not in wanted:
            continue
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            where = base_url.rstrip("/") + "/api/v1/metadata"
            raise MetricsError(where, f"malformed metadata of {name!r}: not a list of objects")
        for entry in entries:
            kind = str(entry.get("type", "")).lower()
            out[name] = kind if kind in schema.METRIC_TYPES else "untyped"
            break
    return out
