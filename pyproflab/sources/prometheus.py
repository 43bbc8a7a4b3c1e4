"""Prometheus metrics: the text exposition format 0.0.4 (the HTTP API is
``prometheus_api``).

Both give rows of ``schema.METRIC_SAMPLES``: ``metric`` (the sample's own
name: ``x_bucket``/``x_sum``/``x_count`` for a histogram ``x``), ``labels`` (a
map, keys ascending, without ``__name__``; ``le`` and ``quantile`` stay
labels), ``type`` (the family's: counter gauge summary histogram untyped),
``time`` (UTC, microseconds) and ``value`` (float64; NaN and ±Inf kept
where the series can take them: ``non_finite_problem``).

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
  milliseconds since the epoch, in the years 1 to 9999 (what a datetime
  holds; Go reads any int64). A sample without one gets ``default_time``.
- ``x_sum``/``x_count`` belong to a summary ``x``, ``x_bucket``/``x_sum``/
  ``x_count`` to a histogram ``x`` (they take its type); ``le`` and
  ``quantile`` must be floats. A sample of an undeclared family is untyped.

Any other line raises ``MetricsError`` naming the source and the line number,
and so do a NaN or ±Inf in a counter, a histogram's buckets or count, a
summary's count or a Go runtime or process series (``go_*``, ``process_*``,
but for sums and quantiles), and a second sample of one series (name and
labels) at one time. Lines are read one at a time (at most ``LINE_LIMIT``
bytes) and samples yielded in batches (``iter_exposition``): memory grows
with a batch, plus 16 bytes a sample to find repeats.

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
from array import array
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

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
# Timestamps (ms) a store can give back as datetimes: years 1 to 9999. One
# outside was stored, then every reader of the series failed on it.
STAMP_MS_MIN, STAMP_MS_MAX = -62_135_596_800_000, 253_402_300_799_999


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


# Samples per table ``iter_exposition`` yields: memory is bounded by a batch.
BATCH_ROWS = 1 << 16
LINE_LIMIT = 1 << 20  # characters of one line; a longer one is refused


def non_finite_problem(name: str, ftype: str, labels: dict[str, str] | tuple) -> str | None:
    """Why NaN or ±Inf cannot be the value of sample ``name`` (of a family of
    type ``ftype``), or None where it can: a counter, a histogram's buckets and
    count, a summary's count only count up from 0, and the Go runtime's and the
    process's own series (``go_*``, ``process_*``: the GC series the lab
    reads) are always finite, except the sums and quantiles of histograms and
    summaries (client_golang writes NaN for the sum of a runtime/metrics
    histogram, which keeps none; a quantile without observations is NaN)."""
    quantile = any(k == "quantile" for k in (labels if isinstance(labels, dict) else dict(labels)))
    if ftype == "counter":
        return "a counter"
    if ftype == "histogram" and name.endswith(("_bucket", "_count")):
        return "a histogram's bucket or count"
    if ftype == "summary" and name.endswith("_count"):
        return "a summary's count"
    if ftype in ("histogram", "summary") and (name.endswith("_sum") or quantile):
        return None
    if name.startswith(("go_", "process_")):
        return "a Go runtime or process series"
    return None


def _sample(line: str, fams: _Families, default_us: int) -> tuple | None:
    """(name, labels, type, value, time_us, value token) of one line; None for
    a blank or comment line; ``ValueError`` for a malformed one."""
    cur = _Line(line)
    cur.skip_blank()
    c = cur.peek()
    if c == "":
        return None
    if c == "#":
        _comment(cur, fams)
        return None
    name = cur.match(_METRIC_NAME)
    if name is None:
        raise ValueError("invalid metric name")
    c = cur.peek()
    if c == "":
        raise ValueError(f"missing value for metric {name!r}")
    if c not in ("{", " ", "\t"):
        raise ValueError(f"invalid character {c or 'end of line'!r} after metric name {name!r}")
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
    stamp = cur.token()
    if stamp:
        if not _INT.fullmatch(stamp) or not _INT64_MIN <= int(stamp) <= _INT64_MAX:
            raise ValueError(f"expected integer as timestamp, got {stamp!r}")
        if not STAMP_MS_MIN <= int(stamp) <= STAMP_MS_MAX:
            raise ValueError(f"timestamp {stamp} is outside the years 1 to 9999")
        ts = int(stamp) * 1000
        cur.skip_blank()
        if cur.peek():
            raise ValueError(f"spurious text after timestamp: {line[cur.i :]!r}")
    if not math.isfinite(value) and (why := non_finite_problem(name, ftype, lab)):
        raise ValueError(f"{name}: {tok} is not a value {why} can take")
    return name, lab, ftype, value, ts


class _Repeats:
    """Which sample repeats the series (metric and labels) and time of an
    earlier one: one 64-bit hash and line number per sample (16 bytes each,
    however many labels), compared once at the end."""

    def __init__(self) -> None:
        self.hashes = array("q")
        self.lines = array("q")

    def add(self, name: str, labels: list[tuple[str, str]], ts: int, lineno: int) -> None:
        self.hashes.append(hash((name, tuple(labels), ts)))
        self.lines.append(lineno)

    def first(self) -> tuple[int, int] | None:
        """(line, earlier line) of the first repeated sample, or None."""
        import numpy as np

        h = np.frombuffer(self.hashes, np.int64)
        if len(h) < 2:
            return None
        order = np.argsort(h, kind="stable")
        same = np.flatnonzero(h[order][1:] == h[order][:-1])
        if not len(same):
            return None
        lines = np.frombuffer(self.lines, np.int64)
        k = same[np.argmin(lines[order][same + 1])]
        return int(lines[order][k + 1]), int(lines[order][k])

    def check(self, source: str) -> None:
        """``MetricsError`` at the first repeated sample, if any."""
        repeat = self.first()
        if repeat is not None:
            raise MetricsError(
                source,
                f"a second sample of the series and time of line {repeat[1]}",
                line=repeat[0],
            )


def iter_exposition(
    lines: Iterable[str],
    *,
    default_time: datetime,
    source: str,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.Table]:
    """Rows of ``schema.METRIC_SAMPLES`` from the lines of a Prometheus text
    exposition (0.0.4), in tables of at most ``batch_rows`` rows, read as they
    are yielded.

    ``default_time`` is the time of samples without a timestamp (the scrape
    time; a naive datetime is taken as UTC). A malformed line, a NaN or ±Inf
    where the series cannot take one (``non_finite_problem``), or a second
    sample of one series at one time raises ``MetricsError`` naming
    ``source`` and the 1-based line number (the repeat is found once the
    lines are read: a consumer storing the tables must take the error as the
    end of the input, and store none of it).
    """
    default_us = _timestamp_us(default_time)
    fams = _Families()
    repeats = _Repeats()
    cols: tuple[list, ...] = ([], [], [], [], [])
    for lineno, raw in enumerate(lines, start=1):
        row = read_line(raw, lineno, fams, default_us, source)
        if row is None:
            continue
        repeats.add(row[0], row[1], row[3], lineno)
        for col, v in zip(cols, row, strict=True):
            col.append(v)
        if len(cols[0]) >= batch_rows:
            yield _samples(cols, source)
            cols = ([], [], [], [], [])
    if cols[0]:
        yield _samples(cols, source)
    repeats.check(source)


def read_line(raw: str, lineno: int, fams: _Families, default_us: int, source: str) -> tuple | None:
    """The row (name, sorted label pairs, type, time_us, value) of line ``lineno``
    (its end of line included or not); None for a blank or comment line."""
    line = raw[:-1] if raw.endswith("\n") else raw
    line = line[:-1] if line.endswith("\r") else line
    try:
        got = _sample(line, fams, default_us)
    except ValueError as e:
        raise MetricsError(source, str(e), line=lineno) from None
    if got is None:
        return None
    name, lab, ftype, value, ts = got
    return name, sorted(lab.items()), ftype, ts, value


def _samples(cols: tuple[list, ...], source: str) -> pa.Table:
    try:
        return samples_table(*cols)
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
