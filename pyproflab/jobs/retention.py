"""Retention: drop old profiles and everything only they referenced, then reclaim space.

Rules:

- A profile is old when the time it was taken (``select.TAKEN_AT``) is before
  ``now - max_age_days``. Its samples and profile row go, and then every
  stack, location, function, mapping and label set no remaining row refers
  to (mappings also stay while a profile names them as its main mapping).
- All deletes are one transaction: a kill leaves the store as before or as
  after, never with samples pointing at missing stacks.
- GC metrics (``metric_samples``, ``gc_cycles``) older than the cutoff go too
  when asked.
- Space: DuckDB reuses the blocks freed by a ``CHECKPOINT``; the file itself
  shrinks only as far as free blocks sit at its end (DuckDB 2.0 has no
  VACUUM that rewrites a file). Nothing is checkpointed when nothing was
  deleted, so a run with nothing to drop changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyproflab.store.connection import Store
from pyproflab.store.select import TAKEN_AT

# (table, id column, SQL of the ids still referenced), children after parents.
ORPHANS = (
    ("stacks", "stack_id", "SELECT DISTINCT stack_id FROM samples"),
    ("label_sets", "label_set_id", "SELECT DISTINCT label_set_id FROM samples"),
    ("locations", "location_id", "SELECT DISTINCT unnest(location_ids) FROM stacks"),
    (
        "functions",
        "function_id",
        "SELECT DISTINCT u.l.function_id FROM (SELECT unnest(lines) AS l FROM locations) u",
    ),
    (
        "mappings",
        "mapping_id",
        "SELECT mapping_id FROM locations UNION SELECT main_mapping_id FROM profiles",
    ),
)


@dataclass
class RetentionReport:
    cutoff: datetime | None = None
    profiles: int = 0
    samples: int = 0
    orphans: dict[str, int] = field(default_factory=dict)
    metric_rows: int = 0
    bytes_before: int | None = None
    bytes_after: int | None = None

    @property
    def changed(self) -> bool:
        return bool(self.profiles or self.metric_rows or any(self.orphans.values()))

    def to_dict(self) -> dict:
        return {
            "cutoff": self.cutoff.isoformat() if self.cutoff else None,
            "profiles": self.profiles,
            "samples": self.samples,
            "orphans": self.orphans,
            "metric_rows": self.metric_rows,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }


def _count(store: Store, query: str, params: list | None = None) -> int:
    return int(store.sql(query, params).column(0)[0].as_py())


def _tables(store: Store) -> set[str]:
    t = store.sql(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = "
        "current_database() AND schema_name = current_schema()"
    )
    return set(t.column(0).to_pylist())


def _db_bytes(store: Store) -> int | None:
    try:
        t = store.sql("SELECT total_blocks, free_blocks, block_size FROM pragma_database_size()")
        total, free, size = (t.column(i)[0].as_py() for i in range(3))
        return int((total - free) * size)
    except Exception:  # an in-memory store, or an older DuckDB: not worth failing for
        return None


def apply_retention(
    store: Store, max_age_days: float, *, metrics: bool = True, now: datetime | None = None
) -> RetentionReport:
    """Drop profiles older than ``max_age_days`` and the rows only they used."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=max_age_days)
    report = RetentionReport(cutoff=cutoff)
    old = f"SELECT p.profile_id FROM profiles p WHERE {TAKEN_AT} < ?"
    n_old = _count(store, f"SELECT count(*) FROM ({old})", [cutoff])
    tables = _tables(store)
    metric_tables = [t for t in ("metric_samples", "gc_cycles") if metrics and t in tables]
    n_metrics = sum(
        _count(store, f"SELECT count(*) FROM {t} WHERE time < ?", [cutoff]) for t in metric_tables
    )
    if n_old == 0 and n_metrics == 0:
        return report
    report.bytes_before = _db_bytes(store)
    with store.transaction():
        if n_old:
            report.samples = _count(
                store, f"SELECT count(*) FROM samples WHERE profile_id IN ({old})", [cutoff]
            )
            store.execute(f"DELETE FROM samples WHERE profile_id IN ({old})", [cutoff])
            store.execute(f"DELETE FROM profiles AS p WHERE {TAKEN_AT} < ?", [cutoff])
            report.profiles = n_old
            for table, col, used in ORPHANS:
                n = _count(store, f"SELECT count(*) FROM {table} WHERE {col} NOT IN ({used})")
                if n:
                    store.execute(f"DELETE FROM {table} WHERE {col} NOT IN ({used})")
                report.orphans[table] = n
        for t in metric_tables:
            store.execute(f"DELETE FROM {t} WHERE time < ?", [cutoff])
        report.metric_rows = n_metrics
    # Free blocks become reusable (and a tail of them is truncated) at a checkpoint.
    store.execute("CHECKPOINT")
    report.bytes_after = _db_bytes(store)
    return report
