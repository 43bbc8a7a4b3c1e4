"""What jobs remember in the store: their runs and the drop-folder files they took.

Tables (created on first use, beside the store's own):

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

from pyproflab.store.connection import Store
from pyproflab.store.select import Selection

DDL = """
CREATE TABLE IF NOT EXISTS job_runs (
    job          VARCHAR NOT NULL,
    run_id       BIGINT NOT NULL,
    fingerprint  VARCHAR NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    exit_code    INTEGER,
    summary      VARCHAR,
    PRIMARY KEY (job, run_id)
);
CREATE TABLE IF NOT EXISTS job_files (
    job          VARCHAR NOT NULL,
    path         VARCHAR NOT NULL,
    size         BIGINT NOT NULL,
    mtime_ns     BIGINT NOT NULL,
    status       VARCHAR NOT NULL,
    seen_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job, path, size, mtime_ns)
);
"""


def ensure_tables(store: Store) -> None:
    store.execute(DDL)


def fingerprint(
    store: Store, selection: Selection, spec_hash: str, *, with_metrics: bool
) -> tuple[str, int]:
    """(fingerprint of the job's input, number of selected profiles)."""
    where, params = selection.where()
    t = store.sql(
        "SELECT coalesce(sha256(string_agg(content_hash, ',' ORDER BY content_hash)), ''), "
        f"count(*) FROM profiles p WHERE {where}",
        params,
    )
    hashes, n = t.column(0)[0].as_py(), int(t.column(1)[0].as_py())
    parts = [spec_hash, hashes]
    if with_metrics:
        for table in ("metric_samples", "gc_cycles"):
            try:
                r = store.sql(f"SELECT count(*), max(time)::VARCHAR FROM {table}")
                parts.append(f"{table}:{r.column(0)[0].as_py()}:{r.column(1)[0].as_py()}")
            except Exception:  # table absent in an adopted store
                parts.append(f"{table}:-")
    import hashlib

    return hashlib.sha256("|".join(parts).encode()).hexdigest(), n


def find_run(store: Store, job: str, fp: str) -> dict[str, Any] | None:
    """The latest run of ``job`` with fingerprint ``fp`` (finished or not)."""
    t = store.sql(
        "SELECT run_id, started_at, finished_at, exit_code, summary FROM job_runs "
        "WHERE job = ? AND fingerprint = ? ORDER BY run_id DESC LIMIT 1",
        [job, fp],
    )
    rows = t.to_pylist()
    return rows[0] if rows else None


def last_finished(store: Store, job: str) -> dict[str, Any] | None:
    t = store.sql(
        "SELECT run_id, fingerprint, finished_at, exit_code FROM job_runs "
        "WHERE job = ? AND finished_at IS NOT NULL ORDER BY run_id DESC LIMIT 1",
        [job],
    )
    rows = t.to_pylist()
    return rows[0] if rows else None


def start_run(store: Store, job: str, fp: str, now: datetime) -> int:
    with store.transaction():
        run_id = int(
            store.sql("SELECT coalesce(max(run_id), 0) + 1 FROM job_runs WHERE job = ?", [job])
            .column(0)[0]
            .as_py()
        )
        store.execute(
            "INSERT INTO job_runs (job, run_id, fingerprint, started_at) VALUES (?, ?, ?, ?)",
            [job, run_id, fp, now],
        )
    return run_id


def finish_run(
    store: Store, job: str, run_id: int, exit_code: int, summary: dict[str, Any]
) -> None:
    store.execute(
        "UPDATE job_runs SET finished_at = ?, exit_code = ?, summary = ? "
        "WHERE job = ? AND run_id = ?",
        [datetime.now(UTC), exit_code, json.dumps(summary, default=str), job, run_id],
    )


def seen_files(store: Store, job: str) -> set[tuple[str, int, int]]:
    t = store.sql("SELECT path, size, mtime_ns FROM job_files WHERE job = ?", [job])
    return set(
        zip(t.column(0).to_pylist(), t.column(1).to_pylist(), t.column(2).to_pylist(), strict=True)
    )


def record_files(store: Store, job: str, rows: list[tuple[str, int, int, str]]) -> None:
    """Remember handled files (path, size, mtime_ns, status); idempotent."""
    if not rows:
        return
    import pyarrow as pa

    now = datetime.now(UTC)
    table = pa.table(
        {
            "job": [job] * len(rows),
            "path": [r[0] for r in rows],
            "size": [r[1] for r in rows],
            "mtime_ns": [r[2] for r in rows],
            "status": [r[3] for r in rows],
            "seen_at": [now] * len(rows),
        }
    )
    with store.transaction(), store.registered(_pyproflab_job_files=table):
        store.execute(
            "INSERT INTO job_files BY NAME SELECT * FROM _pyproflab_job_files "
            "ON CONFLICT DO NOTHING"
        )
