"""The one owner of a DuckDB connection to a pyproflab store.

Rules: every connection gets the same session settings right after
connecting (``SESSION_SETTINGS``: UTC times, no Python replacement scans, so a
query can only see store tables and Arrow tables registered on purpose); the
tables come from ``tables.py`` (derived from ``pyproflab.schema``), views and
macros from ``sql/macros.sql``; values reach SQL
only as bound parameters; a DuckDB error leaves this module as a
``StoreError`` naming the store, exactly once, here at the boundary.

Concurrency (DuckDB 2.0, measured): a process opening the file read-write
holds DuckDB's exclusive file lock, so while it is open a second process can
open it neither read-write nor read-only; several read-only processes may
share it, and they keep writers out. On top of that a writable open of a
file takes the store lock (``lock.StoreLock``, ``<store>.lock``) first, so a
second writer is told who holds the store and since when. Any open blocked
by another process raises ``StoreError("... store is busy (held by pid N
since T ...)")`` at once, or after polling up to ``wait`` seconds.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from pyproflab.errors import StoreError
from pyproflab.store import tables
from pyproflab.store.driver_errors import duckdb_holder, first_line, interrupted, store_error
from pyproflab.store.lock import StoreLock, busy_error, read_holder, store_files

if TYPE_CHECKING:
    from pyproflab.model import Profile
    from pyproflab.store.select import Selection

# 2: location and stack ids are blake2b of their content (version 1's were a
# reversible hash a crafted profile could steer onto another row's id).
SCHEMA_VERSION = 2
MEMORY = ":memory:"
# Room left above what DuckDB cannot evict when drop_cached_blocks lowers its
# limit: the statements that follow (the one putting the limit back first)
# allocate a few KiB each, and must not find the pool full. More room keeps
# more cached: at 16 MiB the writer's peak RSS over 10,000 small profiles was
# 1.14x that over 1,000 (bench fleet-10k), at 4 MiB 1.09x, at 1 MiB 1.05x.
EVICTION_ROOM = 4 << 20

# Applied to every connection, ours or adopted. Replacement scans are off so a
# Python variable that happens to share a table's name can never be read by
# accident; Arrow tables reach SQL through ``Store.registered`` only.
SESSION_SETTINGS: tuple[str, ...] = (
    "SET TimeZone = 'UTC'",
    "SET python_enable_replacements = false",
)


def load_sql(name: str) -> str:
    """The text of ``pyproflab/store/sql/<name>``."""
    return resources.files("pyproflab.store").joinpath("sql", name).read_text(encoding="utf-8")


def to_arrow(rel: Any) -> pa.Table:
    """An Arrow table from a DuckDB relation (or ``None`` for a statement without rows)."""
    if rel is None:
        return pa.table({})
    if hasattr(rel, "to_arrow_table"):  # DuckDB >= 1.4
        return rel.to_arrow_table()
    return rel.arrow()


_DUCKDB_PID = re.compile(r"\(PID (\d+)\)")


def _connect(name: str, read_only: bool, deadline: float, wait: float) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``, retried until ``deadline`` while another process holds
    DuckDB's file lock (a writer, or readers keeping a writer out)."""
    while True:
        try:
            return duckdb.connect(name, read_only=read_only)
        except duckdb.Error as e:
            msg = first_line(e)
            if "not a valid DuckDB database" in msg:
                raise StoreError(f"{name}: not a DuckDB store") from e
            if "different configuration than existing" in msg:  # one process, two modes
                mode = "read-write" if read_only else "read-only"
                raise StoreError(
                    f"{name}: already open {mode} in this process (another Lab or Store): "
                    "use that one, or close() it first"
                ) from e
            if "lock" not in msg.lower():
                raise store_error(name, "cannot open store", e) from e
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            # DuckDB names the process holding the file; the lock file says more
            # about it when it is a pyproflab writer.
            m = _DUCKDB_PID.search(str(e))
            pid = m.group(1) if m else "?"
            holder = read_holder(name) if read_only else None
            if not holder or str(holder.get("pid")) != pid:
                holder = {"pid": pid, "command": f"{duckdb_holder(name, read_only)} in DuckDB"}
            raise busy_error(name, waited=wait, holder=holder) from e


class Store:
    """A pyproflab store: one DuckDB connection plus the schema on it.

    Open with ``Store.open(path)`` or adopt a connection with
    ``Store.from_connection(con)``; use as a context manager or call ``close()``.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        name: str,
        owned: bool,
        read_only: bool = False,
        lock: StoreLock | None = None,
    ):
        self.con = con
        self.name = name
        # One statement at a time: ingest's writer thread shares the connection,
        # and its drop_cached_blocks lowers the memory limit for a moment, which
        # another thread's statement must not run under (an Out of Memory at 1 MiB).
        self._use = threading.RLock()
        self.read_only = read_only
        self._owned = owned
        self._closed = False
        self.lock = lock  # the writer lock of a file store opened read-write

    # --- opening -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike = "pyproflab.duckdb",
        *,
        read_only: bool = False,
        create: bool = True,
        wait: float = 0.0,
    ) -> Store:
        """Open the store at ``path`` (``":memory:"`` for a throw-away one).

        A missing file is created unless ``read_only`` or ``create=False``; a
        file that is not a DuckDB database, or a database without the
        pyproflab schema opened read-only, raises ``StoreError``. A store busy
        in another process raises ``StoreError`` at once, or once ``wait``
        seconds have passed (see the module docstring).
        """
        name = str(path)
        memory = name == MEMORY
        if memory and read_only:
            raise StoreError(f"{name}: an in-memory store cannot be opened read-only")
        if not memory:
            p = Path(name)
            if p.is_dir():
                raise StoreError(f"{name}: is a directory, not a store")
            if not p.exists():
                if read_only or not create:
                    raise StoreError(f"{name}: no such store")
                if not p.parent.exists():
                    raise StoreError(f"{name}: folder {p.parent} does not exist")
        deadline = time.monotonic() + max(0.0, wait)
        lock = None
        if not memory and not read_only:
            lock = StoreLock(name).acquire(wait=max(0.0, wait))
        try:
            con = _connect(name, read_only, deadline, wait)
            store = cls(con, name=name, owned=True, read_only=read_only, lock=lock)
            try:
                store._setup()
            except BaseException:
                con.close()
                raise
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return store

    @classmethod
    def from_connection(cls, con: duckdb.DuckDBPyConnection) -> Store:
        """Adopt an open DuckDB connection (a notebook's): apply the session
        settings and create the schema if it is missing. ``close()`` leaves it open."""
        store = cls(con, name="<connection>", owned=False)
        store._setup()
        return store

    def _setup(self) -> None:
        with self._translate("cannot set up session"):
            for stmt in SESSION_SETTINGS:
                self._run(stmt)
            has_meta = self._run(
                "SELECT count(*) FROM duckdb_tables() "
                "WHERE table_name = 'store_meta' AND schema_name = current_schema() "
                "AND database_name = current_database()"
            )[0][0]
        if not has_meta:
            if self.read_only:
                raise StoreError(f"{self.name}: not a pyproflab store (no store_meta table)")
            self._create_schema()
        version = self._schema_version()
        if version is None or version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.name}: store schema version {version} is not supported "
                f"(this pyproflab reads version {SCHEMA_VERSION})"
            )
        if version < SCHEMA_VERSION:
            self._upgrade_empty(version)
        if not self.read_only:
            # Views and macros are recreated on every writable open, so a store
            # written by an older release gets the current definitions.
            with self._translate("cannot create views"):
                # GC metric and trace tables (IF NOT EXISTS)
                self._run(tables.ddl(tables.METRICS + tables.TRACES))
                for stmt in tables.UPGRADES:
                    self._run(stmt)
                self._run(load_sql("macros.sql"))

    def _create_schema(self) -> None:
        with self._translate("cannot create schema"):
            self._run("BEGIN TRANSACTION")
            try:
                self._run(tables.ddl(tables.CORE))
                self._run(
                    "INSERT INTO store_meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
                    [str(SCHEMA_VERSION)],
                )
                self._run("COMMIT")
            except BaseException:
                self._run("ROLLBACK")
                raise

    def _upgrade_empty(self, version: int) -> None:
        """An older store is upgraded only when it holds no profiles: its
        content ids were computed another way and would not dedup with new ones."""
        with self._translate("cannot read profiles"):
            n = self._run("SELECT count(*) FROM profiles")[0][0]
        if n:
            raise StoreError(
                f"{self.name}: store schema version {version} uses older content ids; "
                "ingest its profiles into a new store"
            )
        if self.read_only:
            return
        with self._translate("cannot upgrade store_meta"):
            self._run(
                "UPDATE store_meta SET value = ? WHERE key = 'schema_version'",
                [str(SCHEMA_VERSION)],
            )

    def _schema_version(self) -> int | None:
        with self._translate("cannot read store_meta"):
            rows = self._run("SELECT value FROM store_meta WHERE key = 'schema_version'")
        row = rows[0] if rows else None
        try:
            return int(row[0]) if row else None
        except ValueError:
            return None

    # --- plumbing ------------------------------------------------------------

    def _run(self, query: str, params: Any = None) -> list[tuple]:
        """Execute and fetch every row (DuckDB wants each result finished before the next)."""
        with self._use:
            cur = self.con.execute(query, params) if params is not None else self.con.execute(query)
            return cur.fetchall()

    @contextmanager
    def _translate(self, what: str) -> Iterator[None]:
        """Turn DuckDB errors into one-line StoreErrors naming the store, and
        DuckDB's report of Ctrl-C into KeyboardInterrupt: an interrupt is neither a
        store's error (a report would skip a section) nor a bug."""
        try:
            yield
        except (duckdb.Error, RuntimeError) as e:
            if interrupted(e):
                raise KeyboardInterrupt from e
            if not isinstance(e, duckdb.Error):
                raise
            raise store_error(self.name, what, e) from e

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.name}: store is closed")

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pa.Table:
        """Run one SQL statement and return its rows as Arrow (bind values with ``?`` or
        ``$name``; never format values into ``query``)."""
        self._check_open()
        with self._use, self._translate("query failed"):
            rel = self.con.sql(query, params=params) if params is not None else self.con.sql(query)
            return to_arrow(rel)

    def execute(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        """Run a statement for its effect."""
        self._check_open()
        with self._translate("statement failed"):
            self._run(query, params)

    @contextmanager
    def registered(self, **tables: pa.Table | pa.RecordBatch) -> Iterator[None]:
        """Make Arrow tables (or batches) visible to SQL under the given names for a block."""
        self._check_open()
        with self._translate("cannot register table"):
            for name, table in tables.items():
                self.con.register(name, table)
        try:
            yield
        finally:
            for name in tables:
                try:
                    self.con.unregister(name)
                except duckdb.Error:
                    pass

    def _memory_limit(self) -> str:
        with self._translate("cannot read memory_limit"):
            return str(self._run("SELECT current_setting('memory_limit')")[0][0])

    @contextmanager
    def memory_limited(self, nbytes: int) -> Iterator[None]:
        """DuckDB's memory limit set to ``nbytes`` for a block, then put back.

        DuckDB keeps the blocks a writer has stored cached until its limit (80% of
        RAM by default), so a long ingest grows with the store, not with its
        batches; under a limit it drops them (they are on disk). An in-memory
        store holds its data in that memory, so it is left as it is.
        """
        if self.name == MEMORY:
            yield
            return
        before = self._memory_limit()
        # SET takes no bound parameters: both values are DuckDB's or a whole number.
        self.execute(f"SET memory_limit = '{max(1, int(nbytes) >> 10)}KiB'")
        try:
            yield
        finally:
            self._restore_memory_limit(before)

    @contextmanager
    def single_threaded(self) -> Iterator[None]:
        """DuckDB on one thread for a block, then as it was: while worker processes
        take every core, its other threads only wait for CPU, and the waiting costs
        CPU (1,000 large profiles on 2 workers: the writer's CPU 14.3 to 10.8 ms a
        profile, peak RSS 340 to 300 MiB)."""
        before = self._run("SELECT current_setting('threads')")[0][0]
        self.execute("SET threads = 1")
        try:
            yield
        finally:
            # SET takes no bound parameters: the value is DuckDB's own whole number.
            self.execute(f"SET threads = {int(before)}")

    def _restore_memory_limit(self, before: str) -> None:
        """Put back the memory limit ``before`` (as ``_memory_limit`` showed it).
        RESET restores DuckDB's default exactly; a limit set by hand is shown
        rounded (0.1 GiB), so it comes back as shown."""
        self.execute("RESET memory_limit")
        if self._memory_limit() != before:
            self.execute("SET memory_limit = '{}'".format(before.replace("'", "''")))

    def drop_cached_blocks(self) -> None:
        """Let DuckDB drop the blocks it keeps cached, outside a transaction.

        Under ``memory_limited`` the cache still grows to the limit as the store
        grows, so an ingest of 10,000 small profiles ended 23% above one of 1,000
        (the writer's peak RSS). Lowering the limit evicts every table block it
        can (they are on disk); what DuckDB cannot drop stays (the error that
        says so is expected). The limit is then put back as it was.

        The lowered limit is what DuckDB holds besides cached table blocks plus
        ``EVICTION_ROOM``, never less: every statement allocates, and at a limit
        below what cannot be evicted the one that puts the limit back fails too,
        leaving the connection unable to run anything (1 MiB once did: 'Out of
        Memory Error: failed to allocate data of size 2.0 KiB (1.0 MiB/1.0 MiB
        used)', about one ingest in a hundred).
        """
        if self.name == MEMORY:
            return
        with self._use:
            before = self._memory_limit()
            low = self._unevictable_bytes() + EVICTION_ROOM
            try:
                self.con.execute(f"SET memory_limit = '{low >> 10}KiB'")
            except duckdb.Error:
                pass
            finally:
                self._restore_memory_limit(before)

    def _unevictable_bytes(self) -> int:
        """The bytes DuckDB holds in memory other than cached table blocks."""
        with self._translate("cannot read memory use"):
            rows = self._run(
                "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()"
                " WHERE tag <> 'BASE_TABLE'"
            )
        return int(rows[0][0])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: commit at the end of the block, roll back on any exception."""
        self._check_open()
        if self.read_only:
            raise StoreError(f"{self.name}: store is open read-only")
        with self._translate("cannot begin transaction"):
            self._run("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            try:
                self._run("ROLLBACK")
            except duckdb.Error:
                pass
            raise
        with self._translate("cannot commit"):
            self._run("COMMIT")

    # --- questions -----------------------------------------------------------

    def profiles(self, selection: Selection | None = None) -> pa.Table:
        """The selected profiles' metadata rows, by profile_id."""
        from pyproflab.store.select import Selection

        return self.sql(*(selection or Selection()).query())

    def merged_profile(
        self, selection: Selection | None = None, *, sample_types: Sequence[str] | None = None
    ) -> Profile:
        """One profile merging every selected profile by pprof's rules (see ``merge``)."""
        from pyproflab.store.merge import merged_profile

        return merged_profile(self, selection, sample_types=sample_types)

    def profile(self, profile_id: int) -> Profile:
        """One stored profile back, samples in file order (ids renumbered 1..n)."""
        from pyproflab.store.merge import stored_profile

        return stored_profile(self, profile_id)

    def counts(self) -> dict[str, int]:
        """Row count of every store table."""
        names = (
            "profiles",
            "samples",
            "stacks",
            "locations",
            "functions",
            "mappings",
            "label_sets",
        )
        row = self.sql("SELECT " + ", ".join(f"(SELECT count(*) FROM {n})" for n in names))
        return {n: int(row.column(i)[0].as_py()) for i, n in enumerate(names)}

    def own_files(self) -> tuple[str, ...]:
        """The paths this store keeps on disk, so that an ingest walking a folder
        that holds them never takes them for inputs: the DuckDB file, its
        write-ahead log (``.wal``), DuckDB's spill folder (``.tmp``, its default
        ``temp_directory``) and the writer lock (``.lock``). None for an
        in-memory or adopted store: there is no name of ours to go by."""
        if self.name == MEMORY or not self._owned:
            return ()
        return store_files(self.name)

    # --- life ----------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (an adopted connection is left open)."""
        if self._closed:
            return
        self._closed = True
        if self._owned:
            try:
                self.con.close()
            except duckdb.Error:
                pass
        if self.lock is not None:
            self.lock.release()  # after the close: DuckDB has checkpointed by now

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "closed" if self._closed else "read-only" if self.read_only else "read-write"
        return f"Store({self.name!r}, {mode})"
