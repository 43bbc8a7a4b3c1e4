"""Reading every block of a store's tables once, so that a writing command finds
a damaged file before it commits anything (issue 35, finding 8).

Rules:

- DuckDB checks a block's checksum only when it reads that block, so a command
  that never reads the damaged block (``ingest-gc`` reads and writes the GC
  tables only) would commit into a damaged file and exit 0.
- ``verify(store)`` reads every value of every column of every table of the
  store (the XOR of their hashes: each data block and string block is read,
  and its checksum checked, by DuckDB itself), under a memory limit of
  ``MEMORY`` (the blocks read are not kept). A block that fails its checksum
  is one ``StoreIOError`` naming the store. It is what the writing commands
  (ingest, ingest-gc, import, pull, collect, job) do right after opening.
- What it does not read: free blocks (nothing refers to them) and the blocks of
  an index (an insert into an indexed table reads them itself). Metadata
  blocks are read when the store opens.
- An in-memory store has no file: nothing to verify.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyproflab.errors import StoreIOError

if TYPE_CHECKING:
    from pyproflab.store.connection import Store

MEMORY = 128 << 20


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def verify(store: Store) -> None:
    """Read every block of the store's tables (see the module rules)."""
    from pyproflab.store.connection import MEMORY as IN_MEMORY

    if store.name == IN_MEMORY:
        return
    columns = store.sql(
        "SELECT table_name, column_name FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema() "
        "AND table_oid IN (SELECT table_oid FROM duckdb_tables()) "
        "ORDER BY table_name, column_index"
    ).to_pylist()
    tables: dict[str, list[str]] = {}
    for row in columns:
        tables.setdefault(row["table_name"], []).append(row["column_name"])
    try:
        with store.memory_limited(MEMORY):
            for table, names in tables.items():
                hashes = ", ".join(f"bit_xor(hash({_quoted(c)}))" for c in names)
                store.sql(f"SELECT {hashes} FROM {_quoted(table)}")
    except StoreIOError as e:
        cause = e.__cause__
        detail = str(cause).strip().splitlines()[0] if cause is not None else str(e)
        raise StoreIOError(
            f"{store.name}: damaged, nothing written (a block failed when read "
            f"before writing): {detail}"
        ) from None
