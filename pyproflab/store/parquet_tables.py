"""The dataset's tables beyond the profile tables: checked and imported.

Rules (the layout and the export are ``store.parquet``'s):

- Every store table other than the profile tables is written whole, as
  ``T.parquet``, and counted in the marker. Import refuses, in one line, a
  table whose files hold other than its count of rows, or one this pyproflab
  does not know.
- A table imported by key (GC metrics, drop-folder files and source items)
  adds, in the file's order, the rows whose key (``tables.Table.row_key``) the
  store lacks (null equals null), so a dataset read back and exported again
  holds the same files. ``job_runs`` is exported but not imported
  (``NOT_IMPORTED``): a job's runs belong to the store that ran them.
- Traces, like profiles, have ids the store assigns: a trace is new unless
  the store has one with its ``content_hash``; a new one takes the next
  ``trace_id``, its ``trace_*`` rows follow it under that id, in their order,
  and its ``profile_ids`` name the same profiles here (by content hash).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from pyproflab import schema
from pyproflab.errors import StoreError
from pyproflab.store import tables
from pyproflab.store.connection import Store

METRIC_TABLES = tuple(t.name for t in tables.METRICS)
TRACE_TABLES = tuple(f"trace_{name}" for name in schema.STORE_TRACE_TABLES)
READ_PARQUET = "read_parquet(?, hive_partitioning = false, union_by_name = true)"
# One whole table's file, with its row numbers. Never hive partitioning: DuckDB
# would take a folder above the dataset named KEY=VALUE (``g=5/``) for a
# partition and give every row that value in column KEY.
READ_FILE = "read_parquet(?, hive_partitioning = false, file_row_number = true)"
# Imported, another store's runs made a job here with the same spec say
# "unchanged since run 1 ..., nothing written" of outputs never written here
# (and resume its unfinished runs). Its drop files and source items do come:
# their profiles come with them, so they need not be read again.
NOT_IMPORTED = ("job_runs",)


def pq_rows(files: list[str]) -> int:
    """Rows of Parquet files, from their footers."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def verify_counts(
    d: Path, marker: dict, profile_tables: tuple[str, ...], not_exported: tuple[str, ...]
) -> list[str]:
    """Refuse a dataset whose files hold other than the marker's count of rows of
    a table, or a table this pyproflab does not know; the tables beyond the
    profile tables, to import."""
    counts = marker.get("counts")
    if not isinstance(counts, dict):
        raise StoreError(f"{d}: the dataset marker counts no tables (a partial or foreign dataset)")
    whole = [t for t in counts if t not in profile_tables]
    for t in whole:
        if t not in tables.BY_NAME or t in not_exported:
            raise StoreError(f"{d}: table {t} is not one this pyproflab imports; refused")
    for table, want in sorted(counts.items()):
        files = (
            sorted(str(p) for p in (d / table).rglob("*.parquet"))
            if table in ("profiles", "samples")
            else []
        )
        path = d / f"{table}.parquet"
        files = files or ([str(path)] if path.is_file() else [])
        try:
            got = pq_rows(files)
        except (OSError, ValueError, pa.ArrowException) as e:
            raise StoreError(f"{d}: {table} cannot be read ({e})") from None
        if got != want:
            raise StoreError(
                f"{d}: {table} holds {got} rows, the dataset marker says {want}; refused"
            )
    return whole


def import_tables(
    store: Store, d: Path, names: list[str], profile_files: list[str]
) -> tuple[int, int]:
    """Import the tables ``names`` of dataset ``d`` inside the caller's
    transaction (module rules); the GC metric rows and the traces added."""
    metric_rows = traces = 0
    for table in names:
        if table in TRACE_TABLES or table in NOT_IMPORTED:
            continue  # with their traces; not at all
        if table == "traces":
            children = [t for t in names if t in TRACE_TABLES]
            traces = _import_traces(store, d, children, profile_files)
            continue
        added = _import_by_key(store, d, table)
        if table in METRIC_TABLES:
            metric_rows += added
    return metric_rows, traces


def _import_by_key(store: Store, d: Path, table: str) -> int:
    """Insert the rows of ``table.parquet`` whose key the store lacks (the
    first of equal keys in the file), in the file's order; returns the rows
    added."""
    t = tables.BY_NAME[table]
    store.execute(t.ddl())  # job and source tables exist only once used
    cols = ", ".join(f'"{c}"' for c in t.columns.names)
    key = t.row_key
    part = ", ".join(f'"{k}"' for k in key)
    on = " AND ".join(f'm."{k}" IS NOT DISTINCT FROM n."{k}"' for k in key)
    # Without the file's row numbers the window returned rows in the order of a
    # hash of their key, and a dataset read back exported its rows reordered.
    first = f"row_number() OVER (PARTITION BY {part} ORDER BY file_row_number) = 1"
    added = store.sql(
        f"INSERT INTO {table} ({cols}) SELECT {cols} FROM ("
        f"  SELECT * FROM {READ_FILE} QUALIFY {first}"
        f") n WHERE NOT EXISTS (SELECT 1 FROM {table} m WHERE {on}) ORDER BY n.file_row_number",
        [[str(d / f"{table}.parquet")]],
    )
    return int(added.column(0)[0].as_py())


def _profile_ids(store: Store, profile_files: list[str]) -> dict[int, int]:
    """Each of the dataset's profile ids -> the id of the same profile here."""
    if not profile_files:
        return {}
    t = store.sql(
        f"SELECT n.profile_id AS old_id, p.profile_id AS new_id FROM {READ_PARQUET} n "
        "JOIN profiles p USING (content_hash)",
        [profile_files],
    )
    return dict(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))


def _import_traces(store: Store, d: Path, children: list[str], profile_files: list[str]) -> int:
    """The dataset's traces the store lacks, under new trace ids, with their rows
    of the ``children`` tables (module rules); how many."""
    import pyarrow.parquet as pq

    store.execute(tables.ddl(tables.TRACES))
    rows = pq.read_table(d / "traces.parquet")
    have = set(store.sql("SELECT content_hash FROM traces").column(0).to_pylist())
    keep = [h not in have for h in rows.column("content_hash").to_pylist()]
    rows = rows.filter(pa.array(keep, pa.bool_()))
    if rows.num_rows == 0:
        return 0
    base = int(store.sql("SELECT coalesce(max(trace_id), 0) FROM traces").column(0)[0].as_py())
    old = rows.column("trace_id").to_pylist()
    new = list(range(base + 1, base + 1 + len(old)))
    profiles = _profile_ids(store, profile_files)
    mapped = [
        [profiles[i] for i in ids if i in profiles]
        for ids in rows.column("profile_ids").to_pylist()
    ]
    rows = rows.set_column(rows.schema.get_field_index("trace_id"), "trace_id", pa.array(new))
    i = rows.schema.get_field_index("profile_ids")
    rows = rows.set_column(i, "profile_ids", pa.array(mapped, pa.list_(pa.int64())))
    idmap = pa.table({"old_id": pa.array(old, pa.int64()), "new_id": pa.array(new, pa.int64())})
    with store.registered(_pyproflab_traces=rows, _pyproflab_trace_ids=idmap):
        store.execute("INSERT INTO traces BY NAME SELECT * FROM _pyproflab_traces")
        for table in children:
            cols = [f.name for f in tables.BY_NAME[table].columns if f.name != "trace_id"]
            names = ", ".join(f'n."{c}"' for c in cols)
            targets = ", ".join(f'"{c}"' for c in cols)
            store.execute(
                f'INSERT INTO {table} ("trace_id", {targets}) '
                f"SELECT m.new_id, {names} FROM "
                f"{READ_FILE} n "
                "JOIN _pyproflab_trace_ids m ON m.old_id = n.trace_id ORDER BY n.file_row_number",
                [[str(d / f"{table}.parquet")]],
            )
    return rows.num_rows
