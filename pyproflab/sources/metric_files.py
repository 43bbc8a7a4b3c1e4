"""GC metrics from files, as a source: Prometheus text expositions and gctrace logs.

Rules:

- ``MetricFileSource`` reads each file with its format's reader
  (``prometheus.read_exposition``: samples without a timestamp get
  ``default_time``, else the file's modification time;
  ``gctrace.read_gctrace``: cycles get ``process_start + seconds`` when
  ``process_start`` is given) and yields one ``TableItem`` per file, its
  ``source`` the file's absolute path and its service, version and instance
  the ones given.
- A file the reader refuses raises its one-line ``MetricsError`` (the caller
  stores nothing of a run that fails, by taking every item in one batch).
  ``lenient`` (gctrace only): lines split by other output are skipped and
  collected in ``skipped`` instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pyproflab.errors import MetricsError, UsageError
from pyproflab.sources.base import (
    GC_CYCLES,
    METRIC_SAMPLES,
    ItemMeta,
    Known,
    Offer,
    Request,
    TableItem,
)

FORMATS = ("prom", "gctrace")


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
        from pyproflab.sources.gctrace import read_gctrace
        from pyproflab.sources.prometheus import read_exposition

        for path in self.paths:
            if not os.path.isfile(path):
                raise UsageError(f"{path}: no such file")
            if self.format == "prom":
                table = read_exposition(path, default_time=self.default_time, source=path)
                kind = METRIC_SAMPLES
            else:
                errors = self.skipped if self.lenient else None
                table = read_gctrace(
                    path, process_start=self.process_start, source=path, errors=errors
                )
                kind = GC_CYCLES
            self.rows += table.num_rows
            if "run" in table.schema.names:
                self.runs |= {(path, r) for r in table.column("run").to_pylist()}
            meta = ItemMeta(
                service=self.meta.service,
                version=self.meta.version,
                instance=self.meta.instance,
                source=os.path.abspath(path),
            )
            yield TableItem(kind, table, meta)
