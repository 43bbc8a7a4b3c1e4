"""Writing GC metrics into the store: ``metric_samples`` and ``gc_cycles``.

Rules:

- Each call is one transaction: every row of it is stored, or none is.
- Idempotent: a ``metric_samples`` row is new unless a row with the same
  (service, instance, metric, labels, time) is stored; a ``gc_cycles`` row
  unless one with the same (service, instance, source, run, gc_num) is: the
  same line of the same process run of the same log
  (``sources.gctrace_runs``). Services match when both name one (``_same``):
  two services' pod-0 are two instances, a row without a service is the row
  given again with one. Rows without a ``run`` column (made before runs
  existed) get their runs computed per (service, instance, source), in row
  order. Re-ingesting adds nothing, and
  duplicates inside one batch are stored once (the first wins); a streamed
  input (``StreamedRows``) holding two values of one metric sample's key, or
  a key stored with another figure (a sample's value, a cycle's time), is
  refused whole. ``instance`` may be null; null equals null here.
- The functions return the number of rows added.
- No network here: a Prometheus server is a source
  (``sources/prometheus_server.py``), stored through ``store/sourced.py``.

Tables are ``schema.STORE_METRIC_SAMPLES`` and ``schema.STORE_GC_CYCLES`` (DDL:
``tables.py``); rows arrive as ``schema.METRIC_SAMPLES`` and ``schema.GC_CYCLES``
(``pyproflab.sources``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyproflab import schema
from pyproflab.errors import StoreError
from pyproflab.sources.gctrace_runs import with_runs
from pyproflab.store import tables
from pyproflab.store.connection import Store
from pyproflab.store.driver_errors import first_line


def _conform(table: pa.Table, target: pa.Schema, what: str) -> pa.Table:
    try:
        return table.select(target.names).cast(target)
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise StoreError(
            f"{what}: table does not have the expected schema: {str(e).splitlines()[0]}"
        ) from None


def _with_meta(
    table: pa.Table,
    store_schema: pa.Schema,
    *,
    service: str | None,
    version: str | None,
    instance: str | None,
    source: str | None,
) -> pa.Table:
    n = table.num_rows
    cols = {
        "service": pa.array([service] * n, pa.string()),
        "version": pa.array([version] * n, pa.string()),
        "instance": pa.array([instance] * n, pa.string()),
        "source": pa.array([source] * n, pa.string()),
    }
    return pa.table(
        [cols[f.name] if f.name in cols else table.column(f.name) for f in store_schema],
        schema=store_schema,
    )


def _unique(rows: pa.Table, key: Sequence[str]) -> bool:
    """Whether no two rows share ``key`` (Arrow's hash grouping; a key with a map
    column, which it cannot group, counts as maybe not)."""
    if any(pa.types.is_map(rows.schema.field(k).type) for k in key):
        return False
    return rows.select(list(key)).group_by(list(key)).aggregate([]).num_rows == rows.num_rows


def _same(key: Sequence[str]) -> str:
    """SQL: stored row ``m`` and new row ``n`` have the same ``key``, null equal to
    null; a service only when both name one. Two services' pod-0 are two instances,
    and a row stored without a service is the one given again with it, as the GC
    joins match them (``queries._SAME_INSTANCE``)."""
    return " AND ".join(
        '(m."service" IS NULL OR n."service" IS NULL OR m."service" = n."service")'
        if k == "service"
        else f'm."{k}" IS NOT DISTINCT FROM n."{k}"'
        for k in key
    )


def _insert_new(store: Store, rows: pa.Table, table: str, key: Sequence[str]) -> int:
    """Insert the rows of ``rows`` whose ``key`` is neither stored nor earlier in
    ``rows``, in their order; the caller holds the transaction. Returns the
    rows added (the INSERT's own count)."""
    if rows.num_rows == 0:
        return 0
    batch = rows.append_column("_pyproflab_row", pa.array(range(rows.num_rows), pa.int64()))
    with store.registered(_pyproflab_batch=batch):
        return _insert_from(
            store, "_pyproflab_batch", rows.schema.names, table, key, _unique(rows, key)
        )


def _insert_from(
    store: Store, source: str, names: Sequence[str], table: str, key: Sequence[str], unique: bool
) -> int:
    """``_insert_new`` of the rows of relation ``source`` (``names`` and a
    ``_pyproflab_row`` giving their order); ``unique``: no two share ``key``."""
    cols = ", ".join(f'"{c}"' for c in names)
    on = _same(key)
    part = ", ".join(f'"{k}"' for k in key)
    # A log's own cycles have distinct keys: the window over the batch only
    # when they may not (it was most of the insert's time).
    first = (
        source
        if unique
        else f"(SELECT * FROM {source} QUALIFY row_number() OVER "
        f"(PARTITION BY {part} ORDER BY _pyproflab_row) = 1)"
    )
    added = store.sql(
        f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {first} n "
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} m WHERE {on}) ORDER BY _pyproflab_row"
    )
    return int(added.column(0)[0].as_py())


METRIC_KEY = tables.BY_NAME["metric_samples"].key
GC_KEY = tables.BY_NAME["gc_cycles"].key


def ingest_metric_samples(
    store: Store,
    table: pa.Table,
    *,
    service: str | None,
    version: str | None,
    instance: str | None,
    source: str | None,
) -> int:
    """Store ``schema.METRIC_SAMPLES`` rows of one instance in ``metric_samples``;
    returns the number of rows added (see the module rules)."""
    rows = _with_meta(
        _conform(table, schema.METRIC_SAMPLES, source or "metric samples"),
        schema.STORE_METRIC_SAMPLES,
        service=service,
        version=version,
        instance=instance,
        source=source,
    )
    with store.transaction():
        return _insert_new(store, rows, "metric_samples", METRIC_KEY)


def ingest_metric_rows(store: Store, rows: pa.Table) -> int:
    """Store ``schema.STORE_METRIC_SAMPLES`` rows (who and where already in
    each row, several instances at once) in one transaction; returns rows added."""
    rows = _conform(rows, schema.STORE_METRIC_SAMPLES, "metric samples")
    with store.transaction():
        return _insert_new(store, rows, "metric_samples", METRIC_KEY)


def ingest_gc_cycles(
    store: Store,
    table: pa.Table,
    *,
    service: str | None,
    version: str | None,
    instance: str | None,
    source: str,
) -> int:
    """Store ``schema.GC_CYCLES`` rows of one gctrace log in ``gc_cycles``;
    returns the number of rows added (see the module rules)."""
    if not source:
        raise StoreError("gc cycles: a source (the log's name) is required")
    rows = _with_meta(
        _conform(with_runs(table), schema.GC_CYCLES, source),
        schema.STORE_GC_CYCLES,
        service=service,
        version=version,
        instance=instance,
        source=source,
    )
    with store.transaction():
        return _insert_new(store, rows, "gc_cycles", GC_KEY)


def ingest_gc_rows(store: Store, rows: pa.Table) -> int:
    """Store ``schema.STORE_GC_CYCLES`` rows (several logs or instances at once)
    in one transaction; returns rows added."""
    rows = _conform(
        with_runs(rows, ("service", "instance", "source")), schema.STORE_GC_CYCLES, "gc cycles"
    )
    if rows.column("source").null_count:
        raise StoreError("gc cycles: every row needs a source (the log's name)")
    with store.transaction():
        return _insert_new(store, rows, "gc_cycles", GC_KEY)


def write_rows(store: Store, rows: pa.Table) -> int:
    """Store ``STORE_METRIC_SAMPLES`` or ``STORE_GC_CYCLES`` rows (``with_meta``'s)
    inside the caller's transaction (a source's batch, ``store/sourced.py``);
    returns the rows added."""
    rows, table, key = _store_rows(rows)
    return _insert_new(store, rows, table, key)


def _store_rows(rows: pa.Table) -> tuple[pa.Table, str, Sequence[str]]:
    """``with_meta``'s rows as their table's (runs computed), the table and its key."""
    if "gc_num" in rows.schema.names:
        rows = _conform(
            with_runs(rows, ("service", "instance", "source")), schema.STORE_GC_CYCLES, "gc cycles"
        )
        if rows.column("source").null_count:
            raise StoreError("gc cycles: every row needs a source (the log's name)")
        return rows, "gc_cycles", GC_KEY
    return (
        _conform(rows, schema.STORE_METRIC_SAMPLES, "metric samples"),
        "metric_samples",
        METRIC_KEY,
    )


# DuckDB's memory limit while a ``StreamedRows`` ingest writes.
WRITER_MEMORY = 256 << 20


class StreamedRows:
    """GC rows (``with_meta``'s) stored as they are read, all in one transaction:
    every row of the input, or none when it fails part-way (a bad line at the
    end of a 2-million-cycle log). Memory holds one batch. The store is opened
    (``open_store()``) only once ``batch_rows`` rows are waiting, or at
    ``finish()``: an input refused within its first batch leaves no store.

    Batches are appended to a Parquet file per table in a temporary folder
    (removed on every way out), without checks; ``finish()`` inserts its new
    rows in one statement (``_insert_from``: one anti-join with the stored
    rows). Checked batch by batch, each insert joined the whole table so far
    (a 4.5-million-sample exposition: 0.7 s, growing to 2.2 s, a batch of
    65,536 rows). Staged in a TEMP table of the transaction instead, DuckDB
    held the stage in memory past its limit (1.5 GiB for that exposition);
    read back from Parquet, the one insert spills under ``WRITER_MEMORY``.

    A stage that cannot be written (a full TMPDIR) is one ``StoreError`` naming
    its file, and nothing is stored.

    Use as a context manager; ``finish()`` commits and returns the rows added."""

    def __init__(self, open_store: Callable[[], Store], batch_rows: int = 1 << 16):
        self._open = open_store
        self._batch_rows = batch_rows
        self._waiting: list[pa.Table] = []
        self._n = 0
        self._stack = ExitStack()
        self._store: Store | None = None
        self._folder: str | None = None
        #: target table -> [its columns, its key, rows staged, its Parquet writer]
        self._staged: dict[str, list] = {}
        self.rows = 0
        self.added = 0

    def add(self, rows: pa.Table) -> None:
        self._waiting.append(rows)
        self._n += rows.num_rows
        self.rows += rows.num_rows
        if self._n >= self._batch_rows:
            self._flush()

    def _flush(self) -> None:
        if self._store is None:
            self._store = self._stack.enter_context(self._open())
            # DuckDB caches what it writes up to its limit (80% of RAM): bounded
            # here, a 2-million-row ingest holds a batch, not the table.
            self._stack.enter_context(self._store.memory_limited(WRITER_MEMORY))
            self._stack.enter_context(self._store.transaction())
            self._folder = self._stack.enter_context(
                tempfile.TemporaryDirectory(prefix="pyproflab-stage-")
            )
        with _staging(self._folder):
            for t in self._waiting:
                self._stage(*_store_rows(t))
        self._waiting, self._n = [], 0

    def _stage(self, rows: pa.Table, table: str, key: Sequence[str]) -> None:
        if table not in self._staged:
            assert self._folder is not None
            path = os.path.join(self._folder, f"{table}.parquet")
            schema_ = rows.schema.append(pa.field("_pyproflab_row", pa.int64()))
            writer = self._stack.enter_context(pq.ParquetWriter(path, schema_))
            self._staged[table] = [rows.schema.names, key, 0, writer]
        names, _, n, writer = self._staged[table]
        writer.write_table(
            rows.append_column("_pyproflab_row", pa.array(range(n, n + rows.num_rows), pa.int64()))
        )
        self._staged[table][2] = n + rows.num_rows

    def finish(self) -> int:
        """Store what is waiting and commit; the rows added."""
        self._flush()
        store = self._store
        assert store is not None and self._folder is not None
        for table, (names, key, _, writer) in self._staged.items():
            with _staging(self._folder):
                writer.close()
            path = os.path.join(self._folder, f"{table}.parquet").replace("'", "''")
            # No hive partitioning: a folder of TMPDIR named KEY=VALUE is no partition.
            stage = f"read_parquet('{path}', hive_partitioning = false)"
            part = ", ".join(f'"{k}"' for k in key)
            repeats = (
                store.sql(
                    f"SELECT count(*) FROM (SELECT 1 FROM {stage} GROUP BY {part} "
                    "HAVING count(*) > 1 LIMIT 1)"
                )
                .column(0)[0]
                .as_py()
            )
            if repeats and table == "metric_samples":
                _refuse_two_values(store, stage, part)
            _refuse_restated(store, stage, table, key)
            self.added += _insert_from(store, stage, names, table, key, unique=not repeats)
        self._stack.close()
        return self.added

    def __enter__(self) -> StreamedRows:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.__exit__(exc_type, exc, tb)  # rolls back when the input failed


@contextmanager
def _staging(folder: str | None) -> Iterator[None]:
    """A stage's failed write (a full TMPDIR) as one line naming the folder: pyarrow's
    OSError names no file, and left alone it was a traceback."""
    try:
        yield
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else first_line(e)
        raise StoreError(f"{folder}: cannot stage rows under TMPDIR: {why}") from None


def _refuse_two_values(store: Store, stage: str, part: str) -> None:
    """Refuse an input holding two values of one series at one time: stored as
    a repeat, the second was dropped as "already present" (two snapshots
    given one time, ``ingest-gc A.prom B.prom --time T``, lost B's values)."""
    clash = store.sql(
        f"SELECT metric, instance, time FROM {stage} GROUP BY {part} "
        "HAVING count(DISTINCT value) > 1 LIMIT 1"
    ).to_pylist()
    if clash:
        c = clash[0]
        at = f"{c['time']:%Y-%m-%dT%H:%M:%S%z}"
        raise StoreError(
            f"{c['metric']} of instance {c['instance']} has two values at {at}"
            " in this input (samples without a timestamp of several files took one time?); "
            "nothing stored"
        )


# The figure a stored row's key stands for: given again different, it is not
# "already present" (a snapshot given the time of another, a log re-dated).
_FIGURE = {"metric_samples": "value", "gc_cycles": "time"}


def _refuse_restated(store: Store, stage: str, table: str, key: Sequence[str]) -> None:
    """Refuse an input restating a stored row's key with another figure: counted
    "already present", the new figure was dropped and the old one kept."""
    fig = _FIGURE[table]
    on = _same(key)
    what = (
        "n.metric || ' at ' || strftime(n.time, '%Y-%m-%dT%H:%M:%S%z')"
        if table == "metric_samples"
        else "n.source || ' gc ' || n.gc_num"
    )
    clash = store.sql(
        f"SELECT {what} AS what, n.instance, m.{fig} AS was, n.{fig} AS now FROM {stage} n "
        f"JOIN {table} m ON {on} WHERE m.{fig} IS DISTINCT FROM n.{fig} LIMIT 1"
    ).to_pylist()
    if clash:
        c = clash[0]
        raise StoreError(
            f"{c['what']} of instance {c['instance']}: the store holds {fig} {c['was']} "
            f"where this input says {c['now']}; nothing stored (one of them is misdated"
            " or misnamed)"
        )


def with_meta(
    table: pa.Table,
    *,
    service: str | None,
    version: str | None,
    instance: str | None,
    source: str | None,
) -> pa.Table:
    """A ``METRIC_SAMPLES`` or ``GC_CYCLES`` table as its store rows
    (``STORE_METRIC_SAMPLES`` / ``STORE_GC_CYCLES``), the given values in every row."""
    if "gc_num" in table.schema.names:
        table = with_runs(table)
        base, target = schema.GC_CYCLES, schema.STORE_GC_CYCLES
    else:
        base, target = schema.METRIC_SAMPLES, schema.STORE_METRIC_SAMPLES
    return _with_meta(
        _conform(table, base, source or "rows"),
        target,
        service=service,
        version=version,
        instance=instance,
        source=source,
    )


# --- reading GC rows back (the GOGC model's inputs) -----------------------------------


def _has_table(store: Store, table: str) -> bool:
    from pyproflab.store.queries import table_names

    return table in table_names(store)


def _where(service: Any, version: Any, instance: Any) -> tuple[str, list]:
    """Conditions on service, version and instance: each a value or a list of them."""
    conds, params = ["TRUE"], []
    for col, val in (("service", service), ("version", version), ("instance", instance)):
        if val is None:
            continue
        vals = [val] if isinstance(val, str) else list(val)
        # col is one of three fixed names, never user text
        conds.append(f"{col} IN ({', '.join('?' for _ in vals)})")
        params += vals
    return " AND ".join(conds), params


def gc_cycle_rows(
    store: Store,
    *,
    service: str | None = None,
    version: str | None = None,
    instance: str | None = None,
) -> pa.Table:
    """The stored gctrace cycles (``schema.STORE_GC_CYCLES``) of a service,
    version and/or instance, ordered by instance, log, run and cycle; empty
    when none. A store written before runs existed, opened read-only, has
    no ``run`` column: its rows read as run 1."""
    if not _has_table(store, "gc_cycles"):
        return schema.STORE_GC_CYCLES.empty_table()
    where, params = _where(service, version, instance)
    from pyproflab.store.queries import column_names

    cols = tables.select_list("gc_cycles", column_names(store, "gc_cycles"))
    rows = store.sql(
        f"SELECT {cols} FROM gc_cycles WHERE {where} ORDER BY instance, source, run, gc_num",
        params,
    )
    return rows.cast(schema.STORE_GC_CYCLES)


def metric_sample_rows(
    store: Store,
    metrics: Sequence[str],
    *,
    service: str | None = None,
    version: str | None = None,
    instance: str | None = None,
) -> pa.Table:
    """Stored samples (``schema.STORE_METRIC_SAMPLES``) of the named metrics for a
    service, version and/or instance, ordered by instance and time; empty when none."""
    if not _has_table(store, "metric_samples") or not metrics:
        return schema.STORE_METRIC_SAMPLES.empty_table()
    where, params = _where(service, version, instance)
    cols = ", ".join(f.name for f in schema.STORE_METRIC_SAMPLES)
    marks = ", ".join("?" for _ in metrics)
    rows = store.sql(
        f"SELECT {cols} FROM metric_samples WHERE {where} AND metric IN ({marks}) "
        "ORDER BY instance, time",
        [*params, *metrics],
    )
    return rows.cast(schema.STORE_METRIC_SAMPLES)
