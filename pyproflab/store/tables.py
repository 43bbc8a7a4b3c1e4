"""The store's tables and their DDL, derived from the Arrow schemas.

Rules: each table is defined once, as an Arrow schema in ``pyproflab.schema``
(the shape ingest builds and readers get back). Its ``CREATE TABLE`` statement
is derived here: every field becomes a column of the matching DuckDB type
(``ARROW_TO_DUCKDB``), a non-nullable field is ``NOT NULL``, and the only things
added are what Arrow cannot say: keys, defaults, and NOT NULL where the
store refuses a null its Arrow shape admits (``Table.column_sql``,
``Table.primary_key``). Views and macros stay in ``sql/macros.sql``.

Five groups, created at different times: ``CORE`` with a new store,
``METRICS`` and ``TRACES`` on every writable open when missing (a store made
before they existed gets them, and the columns added since: ``UPGRADES``),
``JOBS`` by the first job that runs, ``SOURCES`` by the first ingest of a
source whose items have keys (``store/sourced.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from pyproflab import schema

_SCALARS: dict[pa.DataType, str] = {
    pa.int8(): "TINYINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.uint64(): "UBIGINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.string(): "VARCHAR",
    schema.TIMESTAMP_UTC: "TIMESTAMPTZ",
}


def _ident(name: str) -> str:
    """A quoted identifier (``values``, ``type``, ``key`` are SQL words)."""
    return '"' + name.replace('"', '""') + '"'


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB type of an Arrow type used in a store table; ``TypeError`` for
    any other (a new type must be added here on purpose)."""
    if t in _SCALARS:
        return _SCALARS[t]
    if pa.types.is_list(t):
        return duckdb_type(t.value_type) + "[]"
    if pa.types.is_map(t):
        return f"MAP({duckdb_type(t.key_type)}, {duckdb_type(t.item_type)})"
    if pa.types.is_struct(t):
        fields = ", ".join(f"{_ident(f.name)} {duckdb_type(f.type)}" for f in t)
        return f"STRUCT({fields})"
    raise TypeError(f"no DuckDB type for Arrow {t}")


@dataclass(frozen=True)
class Table:
    """A store table: its name, its columns (an Arrow schema from
    ``pyproflab.schema``), and the SQL Arrow cannot express."""

    name: str
    columns: pa.Schema
    #: extra SQL after a column's type: PRIMARY KEY, UNIQUE, DEFAULT ...
    column_sql: Mapping[str, str] = field(default_factory=dict)
    #: a primary key over several columns
    primary_key: tuple[str, ...] = ()
    #: the columns that identify a row when rows are added to it (ingest,
    #: import): a row is present when a stored row has the same values, null
    #: equal to null; the primary key when empty
    key: tuple[str, ...] = ()

    @property
    def row_key(self) -> tuple[str, ...]:
        """``key``, else the primary key (of several columns or one), else
        every column (a row is present when an equal row is stored)."""
        if self.key or self.primary_key:
            return self.key or self.primary_key
        single = tuple(c for c, sql in self.column_sql.items() if "PRIMARY KEY" in sql)
        return single or tuple(self.columns.names)

    def ddl(self) -> str:
        """``CREATE TABLE IF NOT EXISTS`` for this table."""
        unknown = set(self.column_sql) - set(self.columns.names)
        assert not unknown, f"{self.name}: no column {sorted(unknown)}"
        lines = []
        for f in self.columns:
            parts = [_ident(f.name), duckdb_type(f.type)]
            if not f.nullable:
                parts.append("NOT NULL")
            if f.name in self.column_sql:
                parts.append(self.column_sql[f.name])
            lines.append("    " + " ".join(parts))
        if self.primary_key:
            lines.append(f"    PRIMARY KEY ({', '.join(map(_ident, self.primary_key))})")
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n" + ",\n".join(lines) + "\n);\n"


CORE: tuple[Table, ...] = (
    Table("store_meta", schema.STORE_META, {"key": "PRIMARY KEY"}),
    Table(
        "profiles",
        schema.STORE_PROFILES,
        {"profile_id": "PRIMARY KEY", "content_hash": "UNIQUE", "main_mapping_id": "DEFAULT 0"},
    ),
    Table("samples", schema.STORE_SAMPLES),
    Table("stacks", schema.STORE_STACKS),
    Table("locations", schema.STORE_LOCATIONS),
    Table("functions", schema.STORE_FUNCTIONS),
    Table("mappings", schema.STORE_MAPPINGS),
    Table("label_sets", schema.STORE_LABEL_SETS),
)

METRICS: tuple[Table, ...] = (
    Table(
        "metric_samples",
        schema.STORE_METRIC_SAMPLES,
        key=("service", "instance", "metric", "labels", "time"),
    ),
    # source may be null in Arrow rows: ingest_gc_rows refuses them with its own message.
    Table(
        "gc_cycles",
        schema.STORE_GC_CYCLES,
        {"source": "NOT NULL"},
        key=("service", "instance", "source", "run", "gc_num"),
    ),
)

# Go execution traces: one row per trace, and its tables keyed by trace_id;
# created, as METRICS, on every writable open when missing.
TRACES: tuple[Table, ...] = (
    Table("traces", schema.STORE_TRACES, {"trace_id": "PRIMARY KEY", "content_hash": "UNIQUE"}),
    *(Table(f"trace_{name}", s) for name, s in schema.STORE_TRACE_TABLES.items()),
)

# Columns added to a table after stores were made with it: (table, column) ->
# the value (SQL) its existing rows take. A writable open adds them
# (``UPGRADES``); a read-only open of an older store reads them as that value
# (``select_list``).
ADDED: dict[tuple[str, str], str] = {
    # gctrace cycles stored before runs existed were keyed without them, so
    # their log's later runs were dropped: the rows kept are each run 1.
    ("gc_cycles", "run"): "1",
}

JOBS: tuple[Table, ...] = (
    Table("job_runs", schema.JOB_RUNS, primary_key=("job", "run_id")),
    Table("job_files", schema.JOB_FILES, primary_key=("job", "path", "size", "mtime_ns")),
)

SOURCES: tuple[Table, ...] = (
    Table("source_items", schema.SOURCE_ITEMS, primary_key=("source", "item")),
)

ALL: tuple[Table, ...] = CORE + METRICS + TRACES + JOBS + SOURCES
BY_NAME: dict[str, Table] = {t.name: t for t in ALL}

#: ``ALTER TABLE`` statements adding the ``ADDED`` columns (run on every writable open).
UPGRADES: tuple[str, ...] = tuple(
    f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS {_ident(c)} "
    f"{duckdb_type(BY_NAME[t].columns.field(c).type)} DEFAULT {v}"
    for (t, c), v in ADDED.items()
)


def select_list(table: str, have: set[str]) -> str:
    """The columns of ``table`` for a SELECT from a store whose table has the
    columns ``have``: an ``ADDED`` column it lacks reads as its value."""
    return ", ".join(
        f"{ADDED[table, f.name]} AS {_ident(f.name)}"
        if f.name not in have and (table, f.name) in ADDED
        else _ident(f.name)
        for f in BY_NAME[table].columns
    )


def ddl(tables: tuple[Table, ...] = ALL) -> str:
    """The ``CREATE TABLE`` statements of ``tables`` (all of them by default), as
    one script: what a new store runs, and a readable listing of the schema."""
    return "\n".join(t.ddl() for t in tables)
