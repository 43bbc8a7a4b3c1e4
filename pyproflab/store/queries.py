"""The store's own SQL: every read (and the deletes of retention) that modules
above the store need, as functions with bound parameters.

The convention (issue 16): SQL lives in ``pyproflab/store``. A module above the
store asks a question by calling a function here (or a method of ``Store`` or
``Selection``) and gets an Arrow table or plain values back; it never writes SQL
and never pastes a fragment into one. Values are bound (``?``), never formatted;
only identifiers the store itself defines (its table and column names, from
constants here) are formatted in. Long queries may live as ``.sql`` files in
``store/sql`` loaded with ``connection.load_sql``. Selections compile to complete
queries (``Selection.query``) used as subqueries here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import few_chunks
from pyproflab.errors import IdCollisionError
from pyproflab.store import tables
from pyproflab.store.connection import Store
from pyproflab.store.select import TAKEN_AT, Selection

#: The tables of GC metrics (``tables.METRICS``); an adopted store may lack them.
METRIC_TABLES = tuple(t.name for t in tables.METRICS)

# --- the store's tables ------------------------------------------------------------


def table_names(store: Store) -> set[str]:
    """The tables of the store's own database and schema (the one place this is asked)."""
    t = store.sql(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = current_schema()"
    )
    return set(t.column(0).to_pylist())


def column_names(store: Store, table: str) -> set[str]:
    """The columns the store's table ``table`` has (an older store may lack
    those added since: ``tables.ADDED``)."""
    t = store.sql(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
        "AND database_name = current_database() AND schema_name = current_schema()",
        [table],
    )
    return set(t.column(0).to_pylist())


def row_counts(store: Store) -> dict[str, int]:
    """Rows of every store table (``tables.ALL``) the store has, by name."""
    names = [t.name for t in tables.ALL if t.name in table_names(store)]
    row = store.sql("SELECT " + ", ".join(f"(SELECT count(*) FROM {n})" for n in names))
    return {n: int(row.column(i)[0].as_py()) for i, n in enumerate(names)}


def holds_data(store: Store) -> bool:
    """Whether the store holds any profile, metric, GC cycle or trace row. Its
    bookkeeping (``store_meta``, job runs, remembered source items) is not data."""
    data = [t for t in tables.CORE + tables.METRICS + tables.TRACES if t.name != "store_meta"]
    return any(row_counts(store).get(t.name) for t in data)


# --- ingest ------------------------------------------------------------------------


def profile_id_of(store: Store, content_hash: str) -> int | None:
    """The id of the stored profile with this content hash; None when there is none."""
    t = store.sql("SELECT profile_id FROM profiles WHERE content_hash = ?", [content_hash])
    return int(t.column(0)[0].as_py()) if t.num_rows else None


def refuse_collisions(store: Store, table_name: str, id_col: str, tables: list[pa.Table]) -> None:
    """Raise ``IdCollisionError`` when one id names two different contents, in the
    batch or between the batch and the store: every hit is checked column by
    column, so a forged id can never take over a stored row."""
    with store.registered(_pyproflab_rows=few_chunks(pa.concat_tables(tables))):
        clash = store.sql(
            f"SELECT {id_col} FROM (SELECT DISTINCT * FROM (SELECT * FROM _pyproflab_rows "
            f"UNION ALL BY NAME SELECT t.* FROM {table_name} t "
            f"SEMI JOIN _pyproflab_rows USING ({id_col}))) "
            f"GROUP BY {id_col} HAVING count(*) > 1 ORDER BY {id_col} LIMIT 1"
        )
    if clash.num_rows:
        raise IdCollisionError(
            f"content id collision: {table_name} id {clash.column(0)[0].as_py():#018x} "
            "names different content in this profile and in the store; refused"
        )


# --- selections --------------------------------------------------------------------


def selected_profiles(store: Store, selection: Selection | None = None) -> pa.Table:
    """The selected profiles' metadata rows, by profile_id."""
    return store.sql(*(selection or Selection()).query())


def versions(store: Store, selection: Selection, profile_type: str | None) -> pa.Table:
    """One row per (service, version) of the selection's versioned profiles (of
    ``profile_type`` when given), with its first profile: ``first_id`` (the
    smallest profile_id, the first ingested), ``first_ingested_at`` (that
    profile's ingest), ``first_taken`` (the earliest time a profile was taken,
    ``TAKEN_AT``) and ``first_duration_nanos`` (that profile's duration)."""
    ids, params = selection.query("p.profile_id", order_by=None)
    of_type = ""
    if profile_type:
        of_type, params = " AND p.profile_type = ?", [*params, profile_type]
    return store.sql(
        "SELECT p.service, p.version, min(p.profile_id) AS first_id, "
        "arg_min(p.ingested_at, p.profile_id) AS first_ingested_at, "
        f"min({TAKEN_AT}) AS first_taken, "
        f"arg_min(p.duration_nanos, ({TAKEN_AT}, p.profile_id)) AS first_duration_nanos "
        f"FROM profiles p WHERE p.profile_id IN ({ids}){of_type} "
        "AND p.version IS NOT NULL GROUP BY p.service, p.version "
        "ORDER BY p.service NULLS FIRST, first_id",
        params,
    )


# --- retention ---------------------------------------------------------------------

# (table, id column, the ids still referenced), children after parents.
_ORPHANS = (
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
_TAKEN_BEFORE = f"SELECT p.profile_id FROM profiles p WHERE {TAKEN_AT} < ?"


def _count(store: Store, query: str, params: list | None = None) -> int:
    return int(store.sql(query, params).column(0)[0].as_py())


def count_profiles_taken_before(store: Store, cutoff: datetime) -> int:
    return _count(store, f"SELECT count(*) FROM ({_TAKEN_BEFORE})", [cutoff])


def taken_after(store: Store, profile_ids: list[int], cutoff: datetime) -> tuple[int, Any]:
    """(how many of ``profile_ids`` were taken after ``cutoff``, the latest time)."""
    row = store.sql(
        f"SELECT count(*), max({TAKEN_AT}) FROM profiles p "
        f"WHERE list_contains(?::BIGINT[], p.profile_id) AND {TAKEN_AT} > ?",
        [profile_ids, cutoff],
    ).to_pylist()[0]
    n, latest = row.values()
    return int(n), latest


def count_metric_rows_before(store: Store, table: str, cutoff: datetime) -> int:
    """Rows of the GC metric table ``table`` (one of ``METRIC_TABLES``) before ``cutoff``."""
    assert table in METRIC_TABLES, table
    return _count(store, f"SELECT count(*) FROM {table} WHERE time < ?", [cutoff])


def delete_profiles_taken_before(store: Store, cutoff: datetime) -> tuple[int, dict[str, int]]:
    """Delete the profiles taken before ``cutoff``, their samples, and every stack,
    label set, location, function and mapping no profile uses any more; return
    (samples deleted, orphans deleted per table). Call inside a transaction."""
    samples = _count(
        store, f"SELECT count(*) FROM samples WHERE profile_id IN ({_TAKEN_BEFORE})", [cutoff]
    )
    store.execute(f"DELETE FROM samples WHERE profile_id IN ({_TAKEN_BEFORE})", [cutoff])
    store.execute(f"DELETE FROM profiles AS p WHERE {TAKEN_AT} < ?", [cutoff])
    orphans = {}
    for table, col, used in _ORPHANS:
        n = _count(store, f"SELECT count(*) FROM {table} WHERE {col} NOT IN ({used})")
        if n:
            store.execute(f"DELETE FROM {table} WHERE {col} NOT IN ({used})")
        orphans[table] = n
    return samples, orphans


def delete_metric_rows_before(store: Store, table: str, cutoff: datetime) -> None:
    assert table in METRIC_TABLES, table
    store.execute(f"DELETE FROM {table} WHERE time < ?", [cutoff])


#: The tables holding rows of stored traces, by trace_id (``traces`` itself last).
TRACE_TABLES = (*(f"trace_{name}" for name in schema.STORE_TRACE_TABLES), "traces")


def count_traces_taken_before(store: Store, cutoff: datetime) -> int:
    """Stored traces whose first event is before ``cutoff`` (0 where the store has none)."""
    if "traces" not in table_names(store):
        return 0
    return _count(store, "SELECT count(*) FROM traces WHERE time < ?", [cutoff])


def delete_traces_taken_before(store: Store, cutoff: datetime) -> None:
    """Delete the traces whose first event is before ``cutoff`` and every trace_*
    row of theirs. Their blocking profiles carry that time, so
    ``delete_profiles_taken_before`` with the same cutoff takes those. Call inside
    a transaction."""
    have = table_names(store)
    old = "SELECT trace_id FROM traces WHERE time < ?"
    for table in TRACE_TABLES:
        if table in have:
            store.execute(f"DELETE FROM {table} WHERE trace_id IN ({old})", [cutoff])


def database_bytes(store: Store) -> int | None:
    """Bytes the database file uses (None for an in-memory store)."""
    try:
        t = store.sql("SELECT total_blocks, free_blocks, block_size FROM pragma_database_size()")
        total, free, size = (t.column(i)[0].as_py() for i in range(3))
        return int((total - free) * size)
    except Exception:  # an in-memory store, or an older DuckDB: not worth failing for
        return None


def checkpoint(store: Store) -> None:
    """Make free blocks reusable (and truncate a tail of them)."""
    store.execute("CHECKPOINT")


# --- GC (analyses/gc.py) -----------------------------------------------------------


def profile_windows(store: Store, selection: Selection | None = None) -> pa.Table:
    """The selected profiles with the window each covers (``w_start``, ``w_end``):
    the collection window when known, else from the profile's time and duration.
    In the order the data fixes (time taken, service, instance, type, content),
    not by profile id: ingest order must not reach a report's rows."""
    return store.sql(
        *(selection or Selection()).query(
            "p.profile_id, p.service, p.version, p.instance, p.profile_type, "
            "coalesce(p.window_start, p.time) AS w_start, "
            "coalesce(p.window_end, coalesce(p.window_start, p.time) "
            "         + to_microseconds(p.duration_nanos // 1000)) AS w_end",
            order_by=f"{TAKEN_AT}, p.service NULLS FIRST, p.instance NULLS FIRST, "
            "p.profile_type, p.content_hash",
        )
    )


# Rows of the window's instance (and service, when both name one), over alias m.
_SAME_INSTANCE = (
    "m.instance = w.instance AND (w.service IS NULL OR m.service IS NULL OR m.service = w.service)"
)


def window_metric_samples(store: Store, windows: pa.Table, metrics: list[str]) -> pa.Table:
    """(key, metric, labels, t in epoch microseconds, value) of the ``metrics`` scraped
    from each window's instance inside it. ``windows``: key, service, instance,
    w_start, w_end."""
    with store.registered(gc_windows=windows):
        return store.sql(
            "SELECT w.key, m.metric, m.labels, epoch_us(m.time) AS t, m.value "
            f"FROM gc_windows w JOIN metric_samples m ON {_SAME_INSTANCE} "
            "AND m.time >= w.w_start AND m.time <= w.w_end "
            "WHERE list_contains(?::VARCHAR[], m.metric) ORDER BY w.key, m.metric, t",
            [metrics],
        )


def window_metric_settings(store: Store, windows: pa.Table, metrics: list[str]) -> pa.Table:
    """(key, metric, value): each metric's last value up to each window's end."""
    with store.registered(gc_windows=windows):
        return store.sql(
            "SELECT w.key, m.metric, arg_max(m.value, m.time) AS value "
            f"FROM gc_windows w JOIN metric_samples m ON {_SAME_INSTANCE} "
            "AND m.time <= w.w_end "
            "WHERE list_contains(?::VARCHAR[], m.metric) GROUP BY w.key, m.metric",
            [metrics],
        )


def window_gc_cycles(store: Store, windows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Per window: (key, n, live, goal) of the gctrace cycles inside it (each cycle
    once), and the keys of the windows whose instance has any gctrace rows."""
    with store.registered(gc_windows=windows):
        cycles = store.sql(
            "SELECT key, count(*) AS n, avg(heap_live_mb) AS live, avg(heap_goal_mb) AS goal "
            "FROM (SELECT DISTINCT w.key, m.gc_num, m.seconds, m.heap_live_mb, m.heap_goal_mb "
            f"      FROM gc_windows w JOIN gc_cycles m ON {_SAME_INSTANCE} "
            "      AND m.time >= w.w_start AND m.time <= w.w_end) GROUP BY key"
        )
        logged = store.sql(
            "SELECT w.key FROM gc_windows w "
            f"WHERE EXISTS (SELECT 1 FROM gc_cycles m WHERE {_SAME_INSTANCE})"
        )
    return cycles, logged


def instance_metric_samples(
    store: Store, metrics: list[str], instances: list[str], service: str | None
) -> pa.Table:
    """(service, version, instance, metric, labels as text, time, value) of the
    ``metrics`` scraped from ``instances`` (of ``service``, or of none, when given)."""
    service_is = " AND (service IS NULL OR service = ?)" if service is not None else ""
    params: list[Any] = [metrics, instances, *([service] if service is not None else [])]
    return store.sql(
        "SELECT service, version, instance, metric, CAST(labels AS VARCHAR) AS labels, time, "
        "value FROM metric_samples WHERE list_contains(?::VARCHAR[], metric) "
        f"AND list_contains(?::VARCHAR[], instance){service_is}",
        params,
    )


# --- PGO (analyses/pgo.py) ---------------------------------------------------------


def value_sums(store: Store, index: pa.Table) -> pa.Table:
    """(profile_id, v): per profile of ``index`` (profile_id, idx), the sum over its
    samples of value number ``idx`` (1-based)."""
    with store.registered(pgo_idx=index):
        return store.sql(
            'SELECT s.profile_id, sum(list_extract(s."values", t.idx))::BIGINT AS v '
            "FROM samples s JOIN pgo_idx t ON t.profile_id = s.profile_id GROUP BY 1"
        )


# --- jobs (jobs/state.py) ----------------------------------------------------------


def create_job_tables(store: Store) -> None:
    """The jobs' tables (``tables.JOBS``), when missing."""
    store.execute(tables.ddl(tables.JOBS))


def content_digest(store: Store, selection: Selection) -> tuple[str, int]:
    """(sha256 of the selected profiles' sorted content hashes, their number)."""
    t = store.sql(
        *selection.query(
            "coalesce(sha256(string_agg(content_hash, ',' ORDER BY content_hash)), ''), count(*)",
            order_by=None,
        )
    )
    return t.column(0)[0].as_py(), int(t.column(1)[0].as_py())


def metric_table_stamp(store: Store, table: str) -> tuple[int, str | None] | None:
    """(rows, latest time as text) of a GC metric table; None when it is absent."""
    assert table in METRIC_TABLES, table
    if table not in table_names(store):
        return None
    r = store.sql(f"SELECT count(*), max(time)::VARCHAR FROM {table}")
    return r.column(0)[0].as_py(), r.column(1)[0].as_py()


def metric_table_rows(store: Store) -> dict[str, int]:
    """Rows of each GC metric table the store has."""
    present = table_names(store)
    return {t: _count(store, f"SELECT count(*) FROM {t}") for t in METRIC_TABLES if t in present}


def _first(t: pa.Table) -> dict[str, Any] | None:
    rows = t.to_pylist()
    return rows[0] if rows else None


def job_run(store: Store, job: str, fp: str) -> dict[str, Any] | None:
    """The latest run of ``job`` with fingerprint ``fp`` (finished or not)."""
    return _first(
        store.sql(
            "SELECT run_id, started_at, finished_at, exit_code, summary FROM job_runs "
            "WHERE job = ? AND fingerprint = ? ORDER BY run_id DESC LIMIT 1",
            [job, fp],
        )
    )


def last_finished_job_run(store: Store, job: str) -> dict[str, Any] | None:
    return _first(
        store.sql(
            "SELECT run_id, fingerprint, finished_at, exit_code FROM job_runs "
            "WHERE job = ? AND finished_at IS NOT NULL ORDER BY run_id DESC LIMIT 1",
            [job],
        )
    )


def start_job_run(store: Store, job: str, fp: str, now: datetime) -> int:
    """A new run of ``job`` (the next run id), not finished."""
    with store.transaction():
        run_id = _count(
            store, "SELECT coalesce(max(run_id), 0) + 1 FROM job_runs WHERE job = ?", [job]
        )
        store.execute(
            "INSERT INTO job_runs (job, run_id, fingerprint, started_at) VALUES (?, ?, ?, ?)",
            [job, run_id, fp, now],
        )
    return run_id


def finish_job_run(
    store: Store, job: str, run_id: int, exit_code: int, summary: str, now: datetime
) -> None:
    store.execute(
        "UPDATE job_runs SET finished_at = ?, exit_code = ?, summary = ? "
        "WHERE job = ? AND run_id = ?",
        [now, exit_code, summary, job, run_id],
    )


def job_files_seen(store: Store, job: str) -> set[tuple[str, int, int]]:
    t = store.sql("SELECT path, size, mtime_ns FROM job_files WHERE job = ?", [job])
    return set(
        zip(t.column(0).to_pylist(), t.column(1).to_pylist(), t.column(2).to_pylist(), strict=True)
    )


def record_job_files(
    store: Store, job: str, rows: list[tuple[str, int, int, str]], now: datetime
) -> None:
    """Remember handled files (path, size, mtime_ns, status); idempotent."""
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


# --- what sources delivered (store/sourced.py) ----------------------------------------


def create_source_tables(store: Store) -> None:
    """The sources' table (``tables.SOURCES``), when missing."""
    store.execute(tables.ddl(tables.SOURCES))


def known_source_items(store: Store, source: str, items: list[str]) -> set[str]:
    """Those of ``items`` that ``source`` delivered before (none without the table)."""
    if not items or "source_items" not in table_names(store):
        return set()
    t = store.sql(
        "SELECT item FROM source_items WHERE source = ? AND list_contains(?::VARCHAR[], item)",
        [source, items],
    )
    return set(t.column(0).to_pylist())


def record_source_items(
    store: Store, source: str, rows: list[tuple[str, str | None, str]], now: datetime
) -> None:
    """Remember delivered items (key, content_hash, status); the caller holds the
    transaction (the batch's), so the keys commit with the rows they brought."""
    if not rows:
        return
    table = pa.table(
        {
            "source": [source] * len(rows),
            "item": [r[0] for r in rows],
            "content_hash": [r[1] for r in rows],
            "status": [r[2] for r in rows],
            "stored_at": [now] * len(rows),
        },
        schema=schema.SOURCE_ITEMS,
    )
    with store.registered(_pyproflab_source_items=table):
        store.execute(
            "INSERT INTO source_items BY NAME SELECT * FROM _pyproflab_source_items "
            "ON CONFLICT DO NOTHING"
        )
