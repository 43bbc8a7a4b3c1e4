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
- ``run`` numbers the process runs of the log (1, 2, ...): a restart, or
  another process writing to the same stream, starts another run
  (``gctrace_runs``). A cycle is keyed by (run, gc number).
- ``time`` is ``process_start + seconds`` when ``process_start`` is given
  (the runtime counts from its own initialisation, a few ms after exec). It
  dates run 1 only: a later run is another process, started at a time the
  log does not say, so its ``time`` is null.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from pyproflab import schema
from pyproflab.errors import MetricsError
from pyproflab.sources.gctrace_runs import RunSplitter

_F = r"([0-9]+(?:\.[0-9]+)?)"
_N = r"([0-9]+)"

# "Begins like a gctrace line": ``gc N @``, or ``gc N`` glued to other text or
# ending the line (a split line: ``gc 2round 0 done``); ``gc 5 items`` is not one.
_START = re.compile(r"gc [0-9]+(?: @|[^ 0-9]|$)")
_LINE = re.compile(
    rf"gc {_N} @{_F}s {_N}%(?: \([^()]*\))*: "
    rf"{_F}\+{_F}\+{_F} ms clock, "
    rf"{_F}\+{_F}/{_F}/{_F}\+{_F} ms cpu, "
    rf"{_N}->{_N}->{_N} MB, {_N} MB goal, "
    rf"(?:{_N} MB stacks, {_N} MB globals, )?"
    rf"{_N} P( \(forced\))?[ \t]*"
)

# GC_CYCLES columns filled from the regex groups, in group order (time is
# computed; forced is the last group).
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


# Rows per table ``iter_gctrace`` yields: memory is bounded by a batch, not the log.
BATCH_ROWS = 1 << 16


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
    appended to it and skipped instead of raising.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    start = None
    if process_start is not None:
        start = (
            process_start.replace(tzinfo=UTC)
            if process_start.tzinfo is None
            else process_start.astimezone(UTC)
        )
    runs = RunSplitter()
    cols = _empty_columns()
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n").lstrip(" \t")
        if not _START.match(line):
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            shown = line if len(line) <= 120 else line[:117] + "..."
            err = MetricsError(source, f"malformed gctrace line: {shown!r}", line=lineno)
            if errors is None:
                raise err
            errors.append(err)
            continue
        groups = m.groups()
        for name, g in zip(_GROUP_COLS, groups[:-1], strict=True):
            if g is None:
                cols[name].append(None)
            else:
                cols[name].append(float(g) if name in _FLOAT_COLS else int(g))
        cols["forced"].append(groups[-1] is not None)
        run = runs.run_of(**{name: cols[name][-1] for name in RunSplitter.COLUMNS})
        cols["run"].append(run)
        secs = cols["seconds"][-1]
        cols["time"].append(None if start is None or run != 1 else start + timedelta(seconds=secs))
        if len(cols["run"]) >= batch_rows:
            yield _table(cols, source)
            cols = _empty_columns()
    if cols["run"]:
        yield _table(cols, source)


def _empty_columns() -> dict[str, list]:
    return {name: [] for name in schema.GC_CYCLES.names}


def _table(cols: dict[str, list], source: str) -> pa.Table:
    try:
        return pa.table(
            [pa.array(cols[f.name], f.type) for f in schema.GC_CYCLES], schema=schema.GC_CYCLES
        )
    except (pa.ArrowInvalid, OverflowError) as e:
        raise MetricsError(source, f"value out of range: {e}") from None


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


def read_gctrace(
    path: str | Path,
    *,
    process_start: datetime | None = None,
    source: str | None = None,
    errors: list[MetricsError] | None = None,
) -> pa.Table:
    """``parse_gctrace`` of a log file (undecodable bytes are replaced: logs
    mix in program output)."""
    name = source or str(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_gctrace(f, source=name, process_start=process_start, errors=errors)
    except OSError as e:
        raise MetricsError(name, f"cannot read: {e.strerror or e}") from None
