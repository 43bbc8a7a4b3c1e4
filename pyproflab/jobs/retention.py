"""Retention: drop old profiles and everything only they referenced, then reclaim space.

Rules:

- A profile is old when the time it was taken (``select.TAKEN_AT``) is before
  ``now - max_age_days``. Its samples and profile row go, and then every
  stack, location, function, mapping and label set no remaining row refers
  to (mappings also stay while a profile names them as its main mapping).
- All deletes are one transaction: a kill leaves the store as before or as
  after, never with samples pointing at missing stacks.
- A stored execution trace taken before the cutoff goes with every trace_* row
  of its own; its blocking profiles carry its time, so they go with the profiles.
- GC metrics (``metric_samples``, ``gc_cycles``) older than the cutoff go too
  when asked; gctrace cycles without a time (no ``--process-start``, or a
  log's later process runs) are never older than anything, and stay.
- Space: DuckDB reuses the blocks freed by a ``CHECKPOINT``; the file itself
  shrinks only as far as free blocks sit at its end (DuckDB 2.0 has no
  VACUUM that rewrites a file). Nothing is checkpointed when nothing was
  deleted, so a run with nothing to drop changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyproflab.store import queries
from pyproflab.store.connection import Store


@dataclass
class RetentionReport:
    cutoff: datetime | None = None
    profiles: int = 0
    samples: int = 0
    traces: int = 0
    orphans: dict[str, int] = field(default_factory=dict)
    metric_rows: int = 0
    bytes_before: int | None = None
    bytes_after: int | None = None

    @property
    def changed(self) -> bool:
        return bool(self.profiles or self.traces or self.metric_rows or any(self.orphans.values()))

    def to_dict(self) -> dict:
        return {
            "cutoff": self.cutoff.isoformat() if self.cutoff else None,
            "profiles": self.profiles,
            "samples": self.samples,
            "traces": self.traces,
            "orphans": self.orphans,
            "metric_rows": self.metric_rows,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }


def apply_retention(
    store: Store, max_age_days: float, *, metrics: bool = True, now: datetime | None = None
) -> RetentionReport:
    """Drop profiles and traces older than ``max_age_days`` and the rows only they used."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=max_age_days)
    report = RetentionReport(cutoff=cutoff)
    n_old = queries.count_profiles_taken_before(store, cutoff)
    n_traces = queries.count_traces_taken_before(store, cutoff)
    tables = queries.table_names(store)
    metric_tables = [t for t in queries.METRIC_TABLES if metrics and t in tables]
    n_metrics = sum(queries.count_metric_rows_before(store, t, cutoff) for t in metric_tables)
    if n_old == 0 and n_traces == 0 and n_metrics == 0:
        return report
    report.bytes_before = queries.database_bytes(store)
    with store.transaction():
        if n_traces:
            queries.delete_traces_taken_before(store, cutoff)
            report.traces = n_traces
        if n_old:
            report.samples, report.orphans = queries.delete_profiles_taken_before(store, cutoff)
            report.profiles = n_old
        for t in metric_tables:
            queries.delete_metric_rows_before(store, t, cutoff)
        report.metric_rows = n_metrics
    # Free blocks become reusable (and a tail of them is truncated) at a checkpoint.
    queries.checkpoint(store)
    report.bytes_after = queries.database_bytes(store)
    return report
