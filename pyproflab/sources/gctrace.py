"""``GODEBUG=gctrace=1`` logs: one ``schema.GC_CYCLES`` row per GC cycle.

The Go runtime (``runtime/mgc.go``, ``gcMarkTermination``) prints, at the end
of each cycle::

    gc 12 @3.456s 4%: 0.021+1.2+0.034 ms clock, 0.085+0.31/1.1/2.0+0.13 ms cpu,
        7->8->3 MB, 8 MB goal, 0 MB stacks, 0 MB globals, 4 P (forced)

(one line). Fields, in order: the cycle number; seconds since the runtime
started (3 decimals); the cumulative GC CPU percentage since start (an
integer); clock time of sweep termination (STW), concurrent mark and mark
termination (STW); CPU time of sweep termination, mark assists, background
(dedicated + fractional) mark workers, idle mark workers and mark termination
(all milliseconds); the heap at GC start, at GC end, and marked live; the
heap goal; scanned stacks and globals; GOMAXPROCS; ``(forced)`` when
``runtime.GC()`` asked for the cycle.

Rules:

- Sizes are MiB as printed: the runtime shifts bytes right by 20
  (``heap0>>20``), so each is ``floor(bytes / 2**20)`` and the true value lies
  in ``[mb, mb + 1) MiB``. Compare byte counts with ``mb == bytes >> 20``.
- ``stacks``/``globals`` appeared in Go 1.21's format; older logs give null.
  Annotations in parentheses after the percentage (Go 1.26's
  ``(checking for goroutine leaks)``) are accepted and ignored.
- Every other line (program output, ``GC forced`` lines from the periodic
  forced GC, ``scvg``/scavenger lines, gctrace=2 details) is skipped. A line
  that begins like a gctrace line (``gc N @``) but does not parse raises
  ``MetricsError`` naming the source and the 1-based line number -- unless
  the caller passes an ``errors`` list, which then collects those errors and
  the line is skipped. Why: the runtime prints its line piece by piece, so a
  program writing to stderr at the same moment can split it (``gc 4 @0.007s
  round 5 done``); such a cycle is lost, and the caller can count the losses.
- Every value must lie in its field's range (``LIMITS``: what the runtime
  can print, or what no process reaches: ``0 P``, a 5,000-digit size, a
  phase of 10^400 ms, a run of 10^24 s are refused) -- such a line is
  refused naming the source, the line and the field, even where malformed
  lines are skipped (a split line is program output; an absurd value is not).
  A NUL byte anywhere is binary data, not a log: the file is refused. Lines
  are read at most ``LINE_LIMIT`` characters at a time, and rows are yielded
  in batches (``iter_gctrace``), so memory does not grow with the log.
- ``run`` numbers the process runs of the log (1, 2, ...): a restart, or
  another process writing to the same stream, starts another run
  (``gctrace_runs``). A cycle is keyed by (run, gc number).
- ``time`` is ``process_start + seconds`` when ``process_start`` is given
  (the runtime counts from its own initialisation, a few ms after exec). It
  dates run 1 only: a later run is another process, started at a time the
  log does not say, so its ``time`` is null.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyproflab import schema
from pyproflab.decode.inputs import open_input
from pyproflab.errors import MetricsError
from pyproflab.sources.gctrace_runs import RunSplitter

# GC_CYCLES columns filled from the line, in order (time and run are computed).
_FLOAT_COLS = {
    "seconds",
    "clock_sweep_term_ms",
    "clock_mark_ms",
    "clock_mark_term_ms",
    "cpu_sweep_term_ms",
    "cpu_assist_ms",
    "cpu_background_ms",
    "cpu_idle_ms",
    "cpu_mark_term_ms",
}
_GROUP_COLS = [
    "gc_num",
    "seconds",
    "cpu_pct",
    "clock_sweep_term_ms",
    "clock_mark_ms",
    "clock_mark_term_ms",
    "cpu_sweep_term_ms",
    "cpu_assist_ms",
    "cpu_background_ms",
    "cpu_idle_ms",
    "cpu_mark_term_ms",
    "heap_start_mb",
    "heap_end_mb",
    "heap_live_mb",
    "heap_goal_mb",
    "stacks_mb",
    "globals_mb",
    "procs",
]


def _g(name: str) -> str:
    return f"(?P<{name}>[0-9]+(?:\\.[0-9]+)?)" if name in _FLOAT_COLS else f"(?P<{name}>[0-9]+)"


# "Begins like a gctrace line": ``gc N @``, or ``gc N`` glued to other text or
# ending the line (a split line: ``gc 2round 0 done``); ``gc 5 items`` is not one.
_START = re.compile(r"gc [0-9]+(?: @|[^ 0-9]|$)")
# One line, in the syntax both Python's re and RE2 (Arrow's extract_regex) read.
_LINE = re.compile(
    "^gc {} @{}s {}%(?: \\([^()]*\\))*: {}\\+{}\\+{} ms clock, {}\\+{}/{}/{}\\+{} ms cpu, "
    "{}->{}->{} MB, {} MB goal, (?:{} MB stacks, {} MB globals, )?{} P"
    "(?P<forced> \\(forced\\))?[ \\t]*$".format(*map(_g, _GROUP_COLS))
)

# Rows per table ``iter_gctrace`` yields: memory is bounded by a batch, not the log.
BATCH_ROWS = 1 << 16
# Characters read of a line at once: a gctrace line has about 200; the rest of
# a longer line (program output, binary data) is read in pieces and skipped.
LINE_LIMIT = 1 << 16
# Byte order marks and the encoding each file is read in: Windows shells write
# redirected output with one (PowerShell 5 in UTF-16, whose NUL bytes would
# read as binary data); the mark itself is not part of the first line.
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
# The last microsecond of year 9999, since the epoch (Python's datetime.max).
_MAX_US = 253_402_300_799_999_999

# The range of each field: what the runtime can print (sizes are a uint64
# shifted right by 20, the cycle count a uint32, a percentage of the CPU
# time), or what no process reaches (a phase of 11 days, a run of a
# century). A value outside (or of more digits than its type holds) refuses
# the line.
_MS = (0.0, 1e9)
_MB = (0, 2**44 - 1)
LIMITS: dict[str, tuple[float, float]] = {
    "gc_num": (1, 2**32 - 1),
    "seconds": (0.0, 3.2e9),
    "cpu_pct": (0, 100),
    **{c: _MS for c in _FLOAT_COLS - {"seconds"}},
    **{c: _MB for c in ("heap_start_mb", "heap_end_mb", "heap_live_mb", "heap_goal_mb")},
    "stacks_mb": _MB,
    "globals_mb": _MB,
    "procs": (1, 1 << 20),
}


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _field(m: pa.StructArray, name: str) -> tuple[pa.Array, np.ndarray | None, str]:
    """One field of the matched lines as numbers, the rows where it is out of
    range (None: none is), and the reason's text with a placeholder for the
    value. The common case, every value in range, takes four array passes."""
    text = m.field(name)
    if name in ("stacks_mb", "globals_mb"):  # older logs print neither
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
    digits = 24 if name in _FLOAT_COLS else 18
    typ = pa.float64() if name in _FLOAT_COLS else pa.int64()
    lo, hi = LIMITS[name]
    why = f"{name} {{}} out of range ({_num(lo)} to {_num(hi)})"
    longest = pc.max(pc.utf8_length(text)).as_py()
    long = None
    if longest is not None and longest > digits:
        long = pc.fill_null(pc.greater(pc.utf8_length(text), digits), False)
        text = pc.if_else(long, "0", text)
    values = pc.cast(text, typ)
    span = pc.min_max(values).as_py()
    if long is None and (span["min"] is None or lo <= span["min"] and span["max"] <= hi):
        return values, None, why
    outside = pc.fill_null(pc.or_(pc.less(values, lo), pc.greater(values, hi)), False)
    bad = outside if long is None else pc.or_(long, outside)
    return values, bad.to_numpy(zero_copy_only=False), why


def _shown(text: str) -> str:
    return text if len(text) <= 24 else text[:12] + f"... ({len(text)} digits)"


def _parse_batch(
    lines: pa.Array,
    linenos: np.ndarray,
    source: str,
    errors: list[MetricsError] | None,
    runs: RunSplitter,
    start_us: int | None,
) -> pa.Table:
    """``GC_CYCLES`` rows of lines that begin like gctrace lines (module rules),
    every line matched and checked at once (Arrow's RE2 and compute kernels)."""
    m = pc.extract_regex(lines, _LINE.pattern)
    ok = m.is_valid().to_numpy(zero_copy_only=False)
    valid = np.flatnonzero(ok)
    m = m.filter(pa.array(ok))
    cols: dict[str, pa.Array] = {}
    first: tuple[int, str] | None = None  # (row, problem) of the first value out of range
    for name in _GROUP_COLS:
        cols[name], bad, why = _field(m, name)
        if bad is not None and bad.any():
            row = int(valid[np.argmax(bad)])
            if first is None or row < first[0]:
                value = m.field(name)[int(np.argmax(bad))].as_py()
                first = (row, why.format(_shown(value)))
    malformed = [int(i) for i in np.flatnonzero(~ok) if first is None or i < first[0]]
    if malformed and (errors is None or first is None):
        for i in malformed:
            text = lines[i].as_py()
            shown = text if len(text) <= 120 else text[:117] + "..."
            err = MetricsError(source, f"malformed gctrace line: {shown!r}", line=int(linenos[i]))
            if errors is None:
                raise err
            errors.append(err)
    if first is not None:  # never skipped: a whole line with an absurd value
        raise MetricsError(source, f"gctrace line {first[1]}", line=int(linenos[first[0]]))
    cols["forced"] = pc.not_equal(m.field("forced"), "")
    phases = ("clock_sweep_term_ms", "clock_mark_ms", "clock_mark_term_ms")
    secs = cols["seconds"].to_numpy()
    end = secs + sum(cols[c].to_numpy() for c in phases) / 1e3
    run = runs.assign({**{c: cols[c].to_numpy() for c in RunSplitter.COLUMNS}, "end": end})
    cols["run"] = pa.array(run, pa.int64())
    cols["time"] = _times(secs, run, start_us, linenos[valid], source)
    return pa.table([cols[f.name] for f in schema.GC_CYCLES], schema=schema.GC_CYCLES)


def _times(
    secs: np.ndarray, run: np.ndarray, start_us: int | None, linenos: np.ndarray, source: str
) -> pa.Array:
    """``time`` of each row: the process start + its seconds for run 1, else null."""
    if start_us is None:
        return pa.nulls(len(secs), schema.TIMESTAMP_UTC)
    us = start_us + np.round(secs * 1e6).astype(np.int64)
    late = (run == 1) & (us > _MAX_US)
    if late.any():
        line = int(linenos[int(np.argmax(late))])
        raise MetricsError(source, "process start + seconds is past year 9999", line=line)
    return pa.array(us, pa.int64(), mask=run != 1).cast(schema.TIMESTAMP_UTC)


class _Reader:
    """The state of one log being read: its runs, the malformed lines skipped,
    the process start."""

    def __init__(self, source: str, process_start: datetime | None, errors, batch_rows: int):
        self.source, self.errors, self.batch_rows = source, errors, batch_rows
        self.start_us = None
        if process_start is not None:
            t = process_start if process_start.tzinfo else process_start.replace(tzinfo=UTC)
            delta = t - datetime(1970, 1, 1, tzinfo=UTC)
            self.start_us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        self.runs = RunSplitter()

    def tables(self, raw: list[str], first: int) -> Iterator[pa.Table]:
        """The rows of lines ``raw`` (the first is line ``first``), a batch at a time."""
        for k in range(0, len(raw), self.batch_rows):
            part = pa.array(raw[k : k + self.batch_rows], pa.string())
            nul = pc.match_substring(part, "\x00").to_numpy(zero_copy_only=False)
            if nul.any():
                line = first + k + int(np.argmax(nul))
                raise MetricsError(
                    self.source, "binary data (a NUL byte): not a gctrace log", line=line
                )
            text = pc.utf8_ltrim(pc.utf8_rtrim(part, characters="\r\n"), characters=" \t")
            begins = pc.match_substring_regex(text, _START.pattern)
            rows = np.flatnonzero(begins.to_numpy(zero_copy_only=False))
            if len(rows):
                lines = text.filter(begins)
                linenos = rows + first + k
                t = _parse_batch(lines, linenos, self.source, self.errors, self.runs, self.start_us)
                if t.num_rows:
                    yield t


def iter_gctrace(
    lines: Iterable[str] | str,
    *,
    source: str,
    process_start: datetime | None = None,
    errors: list[MetricsError] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.Table]:
    """``schema.GC_CYCLES`` rows of gctrace log lines (see the module rules), in
    tables of at most ``batch_rows`` rows, read as they are yielded.

    ``lines`` is any iterable of lines (a file, ``str.splitlines()``) or one
    string. ``process_start`` (naive = UTC) fills ``time`` of run 1; without
    it ``time`` is null. With ``errors`` given, malformed gctrace lines are
    appended to it and skipped instead of raising (a line split by other
    output); a whole line with a value out of range, or a NUL byte (binary
    data, not a log), is always refused.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    reader = _Reader(source, process_start, errors, batch_rows)
    raw: list[str] = []
    first = 1
    for line in lines:
        raw.append(line)
        if len(raw) >= batch_rows:
            yield from reader.tables(raw, first)
            first += len(raw)
            raw = []
    yield from reader.tables(raw, first)


def parse_gctrace(
    lines: Iterable[str] | str,
    *,
    source: str,
    process_start: datetime | None = None,
    errors: list[MetricsError] | None = None,
) -> pa.Table:
    """``iter_gctrace`` as one table (``schema.GC_CYCLES``; empty when the
    lines hold no cycle)."""
    tables = list(iter_gctrace(lines, source=source, process_start=process_start, errors=errors))
    return pa.concat_tables(tables) if tables else schema.GC_CYCLES.empty_table()


def _blocks(f: TextIO, source: str, batch_rows: int) -> Iterator[list[str]]:
    """The lines of a text file (without their newline), at most ``batch_rows``
    a list, read in large blocks: a line longer than ``LINE_LIMIT`` keeps only
    its start, so memory is bounded whatever the file holds; a NUL byte
    anywhere refuses it (binary data, not a log)."""
    carry, lineno = "", 1  # the start of the line the last block ended in
    while block := f.read(LINE_LIMIT * 32):
        if "\x00" in block:
            at = lineno + block[: block.index("\x00")].count("\n")
            raise MetricsError(source, "binary data (a NUL byte): not a gctrace log", line=at)
        parts = block.split("\n")
        carry = (carry + parts[0][:LINE_LIMIT])[:LINE_LIMIT]
        if len(parts) == 1:
            continue  # no newline yet: the line goes on
        lines = [carry, *parts[1:-1]]
        carry = parts[-1][:LINE_LIMIT]
        for k in range(0, len(lines), batch_rows):
            yield lines[k : k + batch_rows]
        lineno += len(lines)
    if carry:
        yield [carry]


def iter_gctrace_file(
    path: str | Path,
    *,
    process_start: datetime | None = None,
    source: str | None = None,
    errors: list[MetricsError] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.Table]:
    """``iter_gctrace`` of a log file, read as the tables are taken (in UTF-8,
    or as its byte order mark says; undecodable bytes are replaced: logs mix
    in program output)."""
    name = source or str(path)
    reader = _Reader(name, process_start, errors, batch_rows)
    try:
        with open_input(path) as raw:
            encoding = next((e for bom, e in _BOMS if raw.peek(3).startswith(bom)), "utf-8")
            f = io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline="\n")
            first = 1
            for lines in _blocks(f, name, batch_rows):
                yield from reader.tables(lines, first)
                first += len(lines)
    except OSError as e:
        raise MetricsError(name, f"cannot read: {e.strerror or e}") from None


def read_gctrace(
    path: str | Path,
    *,
    process_start: datetime | None = None,
    source: str | None = None,
    errors: list[MetricsError] | None = None,
) -> pa.Table:
    """``iter_gctrace_file`` as one table."""
    tables = list(
        iter_gctrace_file(path, process_start=process_start, source=source, errors=errors)
    )
    return pa.concat_tables(tables) if tables else schema.GC_CYCLES.empty_table()
