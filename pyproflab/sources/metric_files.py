"""GC metrics from files, as a source: Prometheus text expositions and gctrace logs.

Rules:

- ``MetricFileSource`` reads each file with its format's streaming reader
  (``prometheus_scan.iter_exposition_file``: samples without a timestamp get
  ``default_time``, else the file's modification time;
  ``gctrace.iter_gctrace_file``: cycles get ``process_start + seconds`` when
  ``process_start`` is given), a thread ahead of the caller
  (``sources.ahead.read_ahead``), and yields one ``TableItem`` per batch of
  rows, its ``source`` the file's absolute path and its service, version and
  instance the ones given. Memory holds a few batches, whatever the size of
  the files.
- Every path is checked to be a regular file before any is read
  (``UsageError``; a FIFO would block the reader).
- A file the reader refuses raises its one-line ``MetricsError``, naming the
  file and the line (``store.sourced.stream_source`` then stores nothing of
  the run); so does a file holding nothing of its format (a wrong file or
  ``--format``: nothing to store is not a success). ``lenient`` (gctrace
  only): lines split by other output are skipped and collected in
  ``skipped`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from pyproflab.errors import MetricsError, UsageError
from pyproflab.sources.ahead import read_ahead
from pyproflab.sources.base import (
    GC_CYCLES,
    METRIC_SAMPLES,
    ItemMeta,
    Known,
    Offer,
    Request,
    TableItem,
)

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("prom", "gctrace")
_NOTHING = {
    "prom": "no metric sample in it (Prometheus text has lines 'NAME{LABELS} VALUE')",
    "gctrace": "no gctrace line in it (a GODEBUG=gctrace=1 log has lines 'gc N @Ts P%: ...')",
}


def _special_file(path: str) -> str | None:
    """What the reader refuses a path that exists but is not a file for, or None."""
    from pyproflab.decode.inputs import open_input

    try:
        open_input(path).close()
    except OSError as e:
        return e.strerror
    return None


@dataclass
class MetricFileSource:
    """Prometheus text (``format`` "prom") or gctrace logs ("gctrace"); see the rules."""

    paths: Sequence[str]
    format: str
    meta: ItemMeta = field(default_factory=ItemMeta)
    default_time: datetime | None = None
    process_start: datetime | None = None
    lenient: bool = False
    skipped: list[MetricsError] = field(default_factory=list)
    #: what the items held: rows, and the (file, process run) pairs of gctrace logs
    rows: int = 0
    runs: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise UsageError(f"format must be one of {', '.join(FORMATS)}, not {self.format!r}")

    @property
    def name(self) -> str:
        shown = ", ".join(list(self.paths)[:3]) + (" ..." if len(self.paths) > 3 else "")
        return f"{self.format} files: {shown}"

    def offer(self, request: Request) -> Offer:
        kind = METRIC_SAMPLES if self.format == "prom" else GC_CYCLES
        return Offer(kinds=(kind,), items=len(self.paths))

    def items(self, request: Request, known: Known) -> Iterator[TableItem]:
        for path in self.paths:
            if not os.path.isfile(path):
                what = os.path.exists(path) and _special_file(path) or "no such file"
                raise UsageError(f"{path}: {what}")
        for path in self.paths:
            meta = ItemMeta(
                service=self.meta.service,
                version=self.meta.version,
                instance=self.meta.instance,
                source=os.path.abspath(path),
            )
            kind = METRIC_SAMPLES if self.format == "prom" else GC_CYCLES
            before = self.rows
            for table in read_ahead(self._tables(path)):
                self.rows += table.num_rows
                if "run" in table.schema.names:
                    self.runs |= {(meta.source or path, r) for r in set(table["run"].to_pylist())}
                yield TableItem(kind, table, meta)
            if self.rows == before:
                raise MetricsError(path, _NOTHING[self.format])

    def _tables(self, path: str) -> Iterator[pa.Table]:
        from pyproflab.sources.gctrace import iter_gctrace_file
        from pyproflab.sources.prometheus_scan import iter_exposition_file

        if self.format == "prom":
            return iter_exposition_file(path, default_time=self.default_time, source=path)
        errors = self.skipped if self.lenient else None
        return iter_gctrace_file(path, process_start=self.process_start, source=path, errors=errors)
