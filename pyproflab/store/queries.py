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

import pyarrow as pa

from pyproflab.errors import IdCollisionError
from pyproflab.store.connection import Store

# --- the store's tables ------------------------------------------------------------


def table_names(store: Store) -> set[str]:
    """The tables of the store's own database and schema (the one place this is asked)."""
    t = store.sql(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = current_schema()"
    )
    return set(t.column(0).to_pylist())


# --- ingest ------------------------------------------------------------------------


def refuse_collisions(store: Store, table_name: str, id_col: str, tables: list[pa.Table]) -> None:
    """Raise ``IdCollisionError`` when one id names two different contents, in the
    batch or between the batch and the store: every hit is checked column by
    column, so a forged id can never take over a stored row."""
    with store.registered(_pyproflab_rows=pa.concat_tables(tables)):
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
