"""Prometheus metrics: the text exposition format 0.0.4 and the HTTP API.

Both give rows of ``schema.METRIC_SAMPLES``: ``metric`` (the sample's own
name: ``x_bucket``/``x_sum``/``x_count`` for a histogram ``x``), ``labels`` (a
map, keys ascending, without ``__name__``; ``le`` and ``quantile`` stay
labels), ``type`` (the family's: counter gauge summary histogram untyped),
``time`` (UTC, microseconds) and ``value`` (float64; NaN and ±Inf kept).

Text format rules, as the Prometheus client library's parser applies them:

- Lines end with ``\\n`` (a ``\\r`` before it is tolerated); blank lines and
  lines whose first non-blank character is ``#`` are comments, except
  ``# HELP name text`` and ``# TYPE name type``.
- One TYPE line per family, before its first sample; one HELP line per family.
  The type is case-insensitive and one of counter gauge summary histogram untyped.
- A sample is ``name[{label="value",...}] value [timestamp]``: names match
  ``[a-zA-Z_:][a-zA-Z0-9_:]*``, label names ``[a-zA-Z_][a-zA-Z0-9_]*`` (not
  ``__name__``), no label twice; label values are quoted with escapes ``\\\\``,
  ``\\"`` and ``\\n`` only; a trailing comma inside the braces is allowed.
- Values are Go floats (``NaN``, ``+Inf``, ``-Inf`` and the other spellings
  Go's ParseFloat reads; no ``_``, no hex); timestamps are integer
  milliseconds since the epoch. A sample without one gets ``default_time``.
- ``x_sum``/``x_count`` belong to a summary ``x``, ``x_bucket``/``x_sum``/
  ``x_count`` to a histogram ``x`` (they take its type); ``le`` and
  ``quantile`` must be floats. A sample of an undeclared family is untyped.

Any other line raises ``MetricsError`` naming the source and the line number.
The HTTP client uses the standard library only.

Why not prometheus_client's parser: it is lenient where Go's expfmt (what the
services we read are scraped by) refuses. Of the 21 malformed lines in
tests/sources/test_prometheus_text.py, prometheus_client 0.26 accepts 9 (a second TYPE,
TYPE after samples, a second HELP, ``\\t`` escapes, ``le="x"``,
``quantile="p99"``, a fractional or out-of-range timestamp), and its errors
carry no line number. A test reads every committed exposition with both
parsers and requires the same samples.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyproflab import schema
from pyproflab.errors import MetricsError

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_INT = re.compile(r"[+-]?[0-9]+")
# What Go's strconv.ParseFloat reads in decimal, plus its special values.
_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)
_BLANK = " \t"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_float(token: str) -> float:
    """A sample value as Go's text parser reads it; ``ValueError`` otherwise."""
    if not _FLOAT.fullmatch(token):
        raise ValueError(token)
    low = token.lower().lstrip("+-")
    if low == "nan":
        return math.nan
    if low in ("inf", "infinity"):
        return -math.inf if token.startswith("-") else math.inf
    return float(token)


class _Families:
    """Metric families by name, resolved as the client library does: an exact
    name first, then a summary's ``_sum``/``_count``, then a histogram's
    ``_bucket``/``_sum``/``_count``."""

    def __init__(self) -> None:
        self.types: dict[str, str | None] = {}
        self.has_help: set[str] = set()

    def resolve(self, name: str) -> str:
        if name in self.types:
            return name
        for suffix in ("_sum", "_count"):
            base = name.removesuffix(suffix)
            if base != name and self.types.get(base) == "summary":
                return base
        for suffix in ("_bucket", "_sum", "_count"):
            base = name.removesuffix(suffix)
            if base != name and self.types.get(base) == "histogram":
                return base
        self.types[name] = None
        return name


class _Line:
    """A cursor over one line of text."""

    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def skip_blank(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in _BLANK:
            self.i += 1

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def match(self, rx: re.Pattern[str]) -> str | None:
        m = rx.match(self.s, self.i)
        if not m:
            return None
        self.i = m.end()
        return m.group()

    def token(self) -> str:
        """Everything up to the next blank or the end of the line."""
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in _BLANK:
            self.i += 1
        return self.s[start : self.i]

    def quoted(self) -> str:
        """A label value after its opening quote, escapes resolved."""
        out: list[str] = []
        s = self.s
        while True:
            if self.i >= len(s):
                raise ValueError("label value without closing quote")
            c = s[self.i]
            self.i += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                e = s[self.i] if self.i < len(s) else ""
                self.i += 1
                if e == "\\":
                    out.append("\\")
                elif e == '"':
                    out.append('"')
                elif e == "n":
                    out.append("\n")
                else:
                    raise ValueError(f"invalid escape sequence '\\{e}' in label value")
            else:
                out.append(c)


def _labels(cur: _Line, metric: str) -> dict[str, str]:
    """The ``{...}`` part of a sample, the cursor on its ``{``."""
    cur.i += 1
    labels: dict[str, str] = {}
    while True:
        cur.skip_blank()
        if cur.peek() == "}":
            cur.i += 1
            return labels
        name = cur.match(_LABEL_NAME)
        if name is None:
            raise ValueError(f"invalid label name for metric {metric!r}")
        if name == "__name__":
            raise ValueError("label name '__name__' is reserved")
        if name in labels:
            raise ValueError(f"duplicate label name {name!r} for metric {metric!r}")
        cur.skip_blank()
        if cur.peek() != "=":
            raise ValueError(f"expected '=' after label name {name!r}")
        cur.i += 1
        cur.skip_blank()
        if cur.peek() != '"':
            raise ValueError(f"expected '\"' at start of the value of label {name!r}")
        cur.i += 1
        labels[name] = cur.quoted()
        cur.skip_blank()
        c = cur.peek()
        if c == ",":
            cur.i += 1
        elif c != "}":
            raise ValueError(f"unexpected {c or 'end of line'!r} after the value of label {name!r}")


def _timestamp_us(default_time: datetime) -> int:
    t = default_time.replace(tzinfo=UTC) if default_time.tzinfo is None else default_time
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _table(
    metrics: list[str],
    labels: list[list[tuple[str, str]]],
    types: list[str],
    times_us: list[int],
    values: list[float],
) -> pa.Table:
    return pa.table(
        [
            pa.array(metrics, pa.string()),
            pa.array(labels, schema.METRIC_LABELS),
            pa.array(types, pa.string()),
            pa.array(times_us, pa.int64()).cast(schema.TIMESTAMP_UTC),
            pa.array(values, pa.float64()),
        ],
        schema=schema.METRIC_SAMPLES,
    )


def parse_exposition(text: str, *, default_time: datetime, source: str) -> pa.Table:
    """Rows of ``schema.METRIC_SAMPLES`` from Prometheus text exposition (0.0.4).

    ``default_time`` is the time of samples without a timestamp (the scrape
    time; a naive datetime is taken as UTC). A malformed line raises
    ``MetricsError`` naming ``source`` and the 1-based line number.
    """
    default_us = _timestamp_us(default_time)
    fams = _Families()
    metrics: list[str] = []
    labels: list[list[tuple[str, str]]] = []
    types: list[str] = []
    times: list[int] = []
    values: list[float] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        try:
            cur = _Line(line)
            cur.skip_blank()
            c = cur.peek()
            if c == "":
                continue
            if c == "#":
                _comment(cur, fams)
                continue
            name = cur.match(_METRIC_NAME)
            if name is None:
                raise ValueError("invalid metric name")
            c = cur.peek()
            if c == "":
                raise ValueError(f"missing value for metric {name!r}")
            if c not in ("{", " ", "\t"):
                raise ValueError(
                    f"invalid character {c or 'end of line'!r} after metric name {name!r}"
                )
            cur.skip_blank()
            lab = _labels(cur, name) if cur.peek() == "{" else {}
            cur.skip_blank()
            family = fams.resolve(name)
            ftype = fams.types[family]
            if ftype is None:
                ftype = fams.types[family] = "untyped"
            if ftype == "histogram" and "le" in lab:
                _check_float(lab["le"], "le")
            if ftype == "summary" and "quantile" in lab:
                _check_float(lab["quantile"], "quantile")
            tok = cur.token()
            if not tok:
                raise ValueError(f"missing value for metric {name!r}")
            try:
                value = parse_float(tok)
            except ValueError:
                raise ValueError(f"expected float as value, got {tok!r}") from None
            cur.skip_blank()
            ts = default_us
            tok = cur.token()
            if tok:
                if not _INT.fullmatch(tok) or not _INT64_MIN <= int(tok) <= _INT64_MAX:
                    raise ValueError(f"expected integer as timestamp, got {tok!r}")
                ts = int(tok) * 1000
                cur.skip_blank()
                if cur.peek():
                    raise ValueError(f"spurious text after timestamp: {line[cur.i :]!r}")
        except ValueError as e:
            raise MetricsError(source, str(e), line=lineno) from None
        metrics.append(name)
        labels.append(sorted(lab.items()))
        types.append(ftype)
        times.append(ts)
        values.append(value)
    try:
        return _table(metrics, labels, types, times, values)
    except (pa.ArrowInvalid, OverflowError) as e:
        raise MetricsError(source, f"timestamp out of range: {e}") from None


def _check_float(value: str, label: str) -> None:
    try:
        parse_float(value)
    except ValueError:
        raise ValueError(f"expected float as value for {label!r} label, got {value!r}") from None


def _comment(cur: _Line, fams: _Families) -> None:
    """A ``#`` line: HELP and TYPE are checked and recorded; others are ignored."""
    cur.i += 1
    cur.skip_blank()
    keyword = cur.token()
    if keyword not in ("HELP", "TYPE"):
        return
    cur.skip_blank()
    if not cur.peek():
        return  # "# TYPE" alone is a plain comment, as in the client library
    name = cur.match(_METRIC_NAME)
    if name is None or cur.peek() not in ("", " ", "\t"):
        raise ValueError(f"invalid metric name in {keyword} line")
    cur.skip_blank()
    family = fams.resolve(name)
    if keyword == "HELP":
        if family in fams.has_help:
            raise ValueError(f"second HELP line for metric name {name!r}")
        fams.has_help.add(family)
        _help_text(cur.s[cur.i :])
        return
    if fams.types[family] is not None:
        raise ValueError(f"second TYPE line for metric name {name!r}, or TYPE after samples")
    kind = cur.s[cur.i :].lower()
    if kind not in schema.METRIC_TYPES:
        raise ValueError(f"unknown metric type {cur.s[cur.i :]!r}")
    fams.types[family] = kind


def _help_text(text: str) -> str:
    """A HELP docstring with its escapes (``\\\\``, ``\\n``, ``\\"``) resolved."""
    out: list[str] = []
    it = iter(text)
    for c in it:
        if c != "\\":
            out.append(c)
            continue
        e = next(it, "")
        if e == "\\":
            out.append("\\")
        elif e == "n":
            out.append("\n")
        elif e == '"':  # not in 0.0.4, but the client library reads it
            out.append('"')
        else:
            raise ValueError(f"invalid escape sequence '\\{e}' in HELP text")
    return "".join(out)


def read_exposition(
    path: str | Path, *, default_time: datetime | None = None, source: str | None = None
) -> pa.Table:
    """``parse_exposition`` of a saved file; samples without a timestamp get
    ``default_time``, else the file's modification time."""
    p = Path(path)
    name = source or str(path)
    try:
        data = p.read_bytes()
        mtime = datetime.fromtimestamp(p.stat().st_mtime, UTC)
    except OSError as e:
        raise MetricsError(name, f"cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MetricsError(name, f"not UTF-8 text (byte {e.start})") from None
    return parse_exposition(text, default_time=default_time or mtime, source=name)


# --- the HTTP API --------------------------------------------------------------------

DEFAULT_TIMEOUT = 30.0
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


def _api_get(base_url: str, path: str, params: Mapping[str, str], *, timeout: float) -> Any:
    """GET ``base_url + path`` and return the ``data`` of a ``status: success`` body.

    Every failure (HTTP error, connection refused, timeout, a body that is not
    the API's JSON, ``status: error``) is one ``MetricsError`` naming the URL.
    """
    url = base_url.rstrip("/") + path + "?" + urllib.parse.urlencode(params)
    where = base_url.rstrip("/") + path
    body: bytes
    try:
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:
        # The API answers 400/422/503 with a JSON error body: prefer its message.
        try:
            body = e.read()
            err = json.loads(body)
            msg = f"{err.get('errorType', 'error')}: {err.get('error', '')}".strip()
        except (ValueError, AttributeError, OSError):
            msg = e.reason if isinstance(e.reason, str) else ""
        raise MetricsError(where, f"HTTP {e.code}: {msg}".rstrip(": ")) from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, TimeoutError):
            raise MetricsError(where, f"timed out after {timeout:g}s") from None
        raise MetricsError(
            where, f"cannot connect: {getattr(reason, 'strerror', None) or reason}"
        ) from None
    except TimeoutError:
        raise MetricsError(where, f"timed out after {timeout:g}s") from None
    except (OSError, ValueError) as e:
        raise MetricsError(where, f"request failed: {e}") from None
    try:
        doc = json.loads(body)
    except ValueError:
        raise MetricsError(where, "response is not JSON (is this a Prometheus server?)") from None
    if not isinstance(doc, dict) or "status" not in doc:
        raise MetricsError(where, "response is not a Prometheus API answer")
    if doc["status"] != "success":
        raise MetricsError(where, f"{doc.get('errorType', 'error')}: {doc.get('error', '')}")
    return doc.get("data")


def query_range(
    base_url: str,
    query: str,
    start: datetime | float,
    end: datetime | float,
    step: timedelta | float | str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    types: Mapping[str, str] | None = None,
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
        data = _api_get(base_url, "/api/v1/query_range", params, timeout=timeout)
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
                    values.append(parse_float(val))
            except (KeyError, TypeError, ValueError) as e:
                raise MetricsError(where, f"malformed series in result: {e}") from None
        if chunk_end >= t1:
            break
        chunk_start = chunk_end + dt
    return _table(metrics, labels, kinds, times, values)


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
    base_url: str, *, metrics: Iterable[str] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, str]:
    """metric family -> type, from ``/api/v1/metadata`` (types Prometheus
    learned from the scraped TYPE lines; ``unknown`` becomes ``untyped``)."""
    data = _api_get(base_url, "/api/v1/metadata", {}, timeout=timeout)
    wanted = set(metrics) if metrics is not None else None
    out: dict[str, str] = {}
    if not isinstance(data, dict):
        return out
    for name, entries in data.items():
        if wanted is not None and name not in wanted:
            continue
        for entry in entries or []:
            kind = str(entry.get("type", "")).lower()
            out[name] = kind if kind in schema.METRIC_TYPES else "untyped"
            break
    return out
