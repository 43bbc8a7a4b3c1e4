"""What jobs remember in the store: their runs and the drop-folder files they took.

Tables (created on first use, beside the store's own; their columns are
``schema.JOB_RUNS`` and ``schema.JOB_FILES``, their SQL in ``store/queries.py``):

- ``job_runs``: one row per run that did work. ``fingerprint`` identifies the
  analysed input (the sorted content hashes of the job's selection plus the
  GC metric counts, and the job spec's hash); ``finished_at`` is NULL while a
  run is in progress or after it was killed, in which case the next run with
  the same fingerprint resumes it under the same run id and output names.
- ``job_files``: one row per (job, file path, size, mtime) a drop source has
  handled (ingested, already present, or refused), so unchanged files are
  not read again, and a file whose profile retention dropped is not ingested
  again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection


def ensure_tables(store: Store) -> None:
    queries.create_job_tables(store)


def fingerprint(
    store: Store, selection: Selection, spec_hash: str, *, with_metrics: bool
) -> tuple[str, int]:
    """(fingerprint of the job's input, number of selected profiles)."""
    hashes, n = queries.content_digest(store, selection)
    parts = [spec_hash, hashes]
    if with_metrics:
        for table in queries.METRIC_TABLES:
            stamp = queries.metric_table_stamp(store, table)
            parts.append(f"{table}:{stamp[0]}:{stamp[1]}" if stamp else f"{table}:-")
    import hashlib

    return hashlib.sha256("|".join(parts).encode()).hexdigest(), n


def find_run(store: Store, job: str, fp: str) -> dict[str, Any] | None:
    """The latest run of ``job`` with fingerprint ``fp`` (finished or not)."""
    return queries.job_run(store, job, fp)


def last_finished(store: Store, job: str) -> dict[str, Any] | None:
    return queries.last_finished_job_run(store, job)


def start_run(store: Store, job: str, fp: str, now: datetime) -> int:
    return queries.start_job_run(store, job, fp, now)


def finish_run(
    store: Store, job: str, run_id: int, exit_code: int, summary: dict[str, Any]
) -> None:
    queries.finish_job_run(
        store,
        job,
        run_id,
        exit_code,
        json.dumps(summary, default=str, sort_keys=True),
        datetime.now(UTC),
    )


def seen_files(store: Store, job: str) -> set[tuple[str, int, int]]:
    return queries.job_files_seen(store, job)


def record_files(store: Store, job: str, rows: list[tuple[str, int, int, str]]) -> None:
    """Remember handled files (path, size, mtime_ns, status); idempotent."""
    if rows:
        queries.record_job_files(store, job, rows, datetime.now(UTC))
