"""Prometheus metrics: the text exposition format 0.0.4 (the HTTP API is
``prometheus_api``).

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

Why not prometheus_client's parser: it is lenient where Go's expfmt (what the
services we read are scraped by) refuses. Of the 21 malformed lines in
tests/sources/test_prometheus_text.py, prometheus_client 0.26 accepts 9 (a second TYPE,
TYPE after samples, a second HELP, ``\\t`` escapes, ``le="x"``,
``quantile="p99"``, a fractional or out-of-range timestamp), and its errors
carry no line number. A test reads every committed exposition with both
parsers and requires the same samples.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from pathlib import Path

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


def samples_table(
    metrics: list[str],
    labels: list[list[tuple[str, str]]],
    types: list[str],
    times_us: list[int],
    values: list[float],
) -> pa.Table:
    """A ``schema.METRIC_SAMPLES`` table from its columns (times in microseconds)."""
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
        return samples_table(metrics, labels, types, times, values)
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
