"""Storing Go execution traces: one ``traces`` row, its ``trace_*`` tables and
its four blocking profiles, all or nothing.

Rules:

- A trace is keyed as profiles are: service, version, instance, labels, and
  time (its first event's wall clock: the trace's own clock snapshot, Go
  1.25+; else the collection window's start; else the file's mtime). Its id
  is its content: a file whose sha256 is stored already is skipped.
- Everything is written in ONE transaction: the tables batch by batch as the
  helper streams them, then the blocking profiles, then the ``traces`` row.
  Memory is bounded by the batch and ``WRITER_MEMORY`` (DuckDB's limit while
  it writes), not by the trace. A trace the helper cannot read to its
  end leaves nothing behind.
- The blocking profiles (``trace-net``, ``trace-sync``, ``trace-syscall``,
  ``trace-sched``) are stored as profiles, with the trace's time and duration,
  so top, flame graphs, regressions and merge work on them unchanged. Their
  content hash is the trace's with the kind, so each trace has its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import from_rows
from pyproflab.decode import decode_bytes
from pyproflab.decode.gotrace import BATCH_ROWS, check_trace_file, meta_of, trace_parts
from pyproflab.errors import TraceError, UsageError
from pyproflab.gohelper import GoUnavailableError
from pyproflab.keying.keys import ProfileMeta, key_profile
from pyproflab.model import nanos_of_time
from pyproflab.sources.base import Outcome, TraceItem
from pyproflab.store import ingest, queries, sourced
from pyproflab.store.connection import Store
from pyproflab.store.ingest import write_keyed
from pyproflab.store.ingest_report import IngestReport
from pyproflab.store.select import Selection
from pyproflab.store.sourced import profile_meta

PROFILE_TYPE = {k: f"trace-{k}" for k in ("net", "sync", "syscall", "sched")}
# DuckDB's memory while a trace is stored: the transaction's rows go to the
# file past it, so a large trace costs its batches, not its size.
WRITER_MEMORY = 256 << 20


@dataclass
class TraceIngest:
    """What storing one trace did: ``trace_id`` (the stored one's when present)."""

    path: str
    trace_id: int
    present: bool = False
    rows: dict[str, int] = field(default_factory=dict)
    profile_ids: list[int] = field(default_factory=list)


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def stored_trace_id(store: Store, content_hash: str) -> int | None:
    """The trace_id of a stored trace with this content, or None."""
    t = store.sql("SELECT trace_id FROM traces WHERE content_hash = ?", [content_hash])
    return int(t.column(0)[0].as_py()) if t.num_rows else None


def _insert_batch(store: Store, name: str, trace_id: int, batch: pa.RecordBatch) -> None:
    # The trace_id column is DuckDB's constant: one built in Arrow cost a Python
    # list of the batch's length (and pyarrow's import of pandas to read it).
    with store.registered(_pyproflab_trace_rows=batch):
        store.execute(
            f"INSERT INTO trace_{name} BY NAME "
            "SELECT ?::BIGINT AS trace_id, * FROM _pyproflab_trace_rows",
            [trace_id],
        )


def ingest_trace(
    store: Store,
    path: str | os.PathLike,
    meta: ProfileMeta | None = None,
    *,
    batch_rows: int = BATCH_ROWS,
) -> TraceIngest:
    """Store one trace file (module rules); ``TraceError`` when it cannot be read."""
    meta = meta or ProfileMeta()
    name = str(path)
    minor = check_trace_file(path)
    digest = file_sha256(path)
    present = stored_trace_id(store, digest)
    if present is not None:
        return TraceIngest(name, present, present=True)
    # One DuckDB thread: the helper parses on the other core while DuckDB inserts
    # (a second DuckDB thread only waited for a core: 3.6 to 3.0 s of CPU for the
    # 3.7 million transitions of a 20 MB trace).
    with store.memory_limited(WRITER_MEMORY), store.single_threaded(), store.transaction():
        trace_id = int(store.sql("SELECT coalesce(max(trace_id), 0) + 1 FROM traces")[0][0].as_py())
        out = TraceIngest(name, trace_id)
        profiles: dict[str, bytes] = {}
        meta_rows = None
        for part in trace_parts(path, batch_rows=batch_rows, needed_by="ingesting a trace"):
            if part.batch is None:
                profiles[part.name] = part.data
            elif part.name == "meta":
                meta_rows = pa.Table.from_batches([part.batch])
            elif part.name in schema.TRACE_TABLES:
                _insert_batch(store, part.name, trace_id, part.batch)
                out.rows[part.name] = out.rows.get(part.name, 0) + part.batch.num_rows
        tmeta = meta_of(minor, meta_rows)
        start = _start_time(path, meta, tmeta.wall_start_ns)
        out.profile_ids = _store_profiles(store, profiles, digest, meta, start, tmeta.duration_ns)
        row = {
            "trace_id": trace_id,
            "content_hash": digest,
            "service": meta.service,
            "version": meta.version,
            "instance": meta.instance,
            "labels": list(meta.labels.items()) or None,
            "time": start,
            "duration_ns": tmeta.duration_ns,
            "go_version": tmeta.go_version,
            "events": tmeta.events,
            "generations": tmeta.generations,
            "bytes": Path(path).stat().st_size,
            "window_start": meta.window_start,
            "window_end": meta.window_end,
            "source": meta.source or name,
            "ingested_at": datetime.now(UTC),
            "profile_ids": out.profile_ids,
        }
        # from_rows: pyarrow's from_pylist imports pandas (43 MiB) for one row.
        with store.registered(_pyproflab_trace=from_rows([row], schema.STORE_TRACES)):
            store.execute("INSERT INTO traces BY NAME SELECT * FROM _pyproflab_trace")
    return out


def _start_time(path: str | os.PathLike, meta: ProfileMeta, wall_ns: int | None) -> datetime:
    if wall_ns is not None:
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=wall_ns // 1000)
    if meta.window_start is not None:
        return meta.window_start
    return datetime.fromtimestamp(Path(path).stat().st_mtime, UTC)


def _store_profiles(
    store: Store,
    profiles: dict[str, bytes],
    digest: str,
    meta: ProfileMeta,
    start: datetime,
    duration_ns: int,
) -> list[int]:
    """Store the blocking profiles in the open transaction; their ids in kind order."""
    now = datetime.now(UTC)
    keyed = []
    for kind, data in sorted(profiles.items(), key=lambda kv: list(PROFILE_TYPE).index(kv[0])):
        p = decode_bytes(data, source=f"{meta.source or 'trace'} ({kind})")
        p = dataclasses.replace(p, time_nanos=nanos_of_time(start), duration_nanos=duration_ns)
        m = dataclasses.replace(meta, profile_type=PROFILE_TYPE[kind], labels=dict(meta.labels))
        h = hashlib.sha256(f"{digest}:{kind}".encode()).hexdigest()
        keyed.append(key_profile(p, m, h, now=now, with_content=False))
    report = write_keyed(store, keyed)
    return report.profile_ids


def write_trace_file(store: Store, path: str, meta: ProfileMeta) -> IngestReport:
    """One trace file as an ingest report: stored (its profiles new), present,
    or refused with its one line (the bulk file reader's ``TRACE_WRITER``)."""
    report = IngestReport()
    try:
        done = ingest_trace(store, path, meta)
    except (TraceError, GoUnavailableError) as e:
        report.refused.append((path, e.problem if isinstance(e, TraceError) else str(e)))
        return report
    if done.present:
        report.present += 1
    else:
        report.traces += 1
        report.new += len(done.profile_ids)
        report.profile_ids += done.profile_ids
    return report


def write_trace_items(store: Store, items: list[TraceItem]) -> IngestReport:
    """Store a source's trace items (``sourced.WRITERS``): files as they are,
    bytes through a temporary file the helper reads; each item's outcome set."""
    report = IngestReport()
    for item in items:
        meta = profile_meta(item.meta)
        if item.path is not None:
            one = write_trace_file(store, item.path, meta)
        else:
            with tempfile.TemporaryDirectory(prefix="pyproflab-trace-") as d:
                tmp = os.path.join(d, "trace.out")
                Path(tmp).write_bytes(item.data or b"")
                one = write_trace_file(store, tmp, replace(meta, source=item.what))
                one.refused = [(item.what, why) for _, why in one.refused]
        if one.refused:
            item.outcome = Outcome("refused", reason=one.refused[0][1])
        else:
            item.outcome = Outcome("present" if one.present else "new")
        report.add(one)
    return report


ingest.TRACE_WRITER = write_trace_file
sourced.WRITERS[TraceItem] = write_trace_items


TRACE_KEYS = "p.trace_id, p.service, p.version, p.instance, p.time, p.duration_ns, p.source"


def select_traces(store: Store, selection: Selection | None = None) -> pa.Table:
    """The selected traces' key rows (``TRACE_KEYS``), by trace_id. The selection's
    service, version, instance, since/until (on the trace's time) and labels
    apply; a profile type or profile ids do not name traces and are refused."""
    sel = selection or Selection()
    if sel.profile_type is not None or sel.profile_ids is not None:
        raise UsageError("traces are selected by service, version, instance, time and labels")
    where, params = sel.where()
    return store.sql(f"SELECT {TRACE_KEYS} FROM traces p WHERE {where} ORDER BY p.trace_id", params)


def trace_tables(store: Store, trace_ids: list[int], names: list[str]) -> dict[str, pa.Table]:
    """The trace_NAME tables' rows of these traces, each by trace_id then in stored order."""
    out = {}
    for name in names:
        if name not in schema.TRACE_TABLES:
            raise ValueError(f"no trace table {name!r}")
        out[name] = store.sql(
            f"SELECT * FROM trace_{name} WHERE list_contains(?::BIGINT[], trace_id)", [trace_ids]
        )
    return out


def window_gctrace(store: Store, windows: pa.Table) -> pa.Table:
    """(key, gc_num, time, stw_ms, mark_ms, heap_goal_mb) of the gctrace cycles of
    each window's instance inside it (``windows``: key, service, instance,
    w_start, w_end); stw_ms is the two stop-the-world phases' wall clock."""
    if "gc_cycles" not in queries.table_names(store):
        return pa.table({"key": pa.array([], pa.int64())})
    with store.registered(gc_windows=windows):
        return store.sql(
            "SELECT DISTINCT w.key, m.gc_num, m.time, "
            "m.clock_sweep_term_ms + m.clock_mark_term_ms AS stw_ms, m.clock_mark_ms AS mark_ms, "
            "m.heap_goal_mb FROM gc_windows w JOIN gc_cycles m ON m.instance = w.instance "
            "AND (w.service IS NULL OR m.service IS NULL OR m.service = w.service) "
            "AND m.time >= w.w_start AND m.time < w.w_end ORDER BY w.key, m.time"
        )


def window_counter_deltas(store: Store, windows: pa.Table, metrics: list[str]) -> pa.Table:
    """(key, metric, delta): last minus first sample of each counter scraped from
    each window's instance within it (e.g. cgroup throttled periods)."""
    with store.registered(gc_windows=windows):
        return store.sql(
            "SELECT w.key, m.metric, max(m.value) - min(m.value) AS delta "
            "FROM gc_windows w JOIN metric_samples m ON m.instance = w.instance "
            "AND m.time >= w.w_start AND m.time <= w.w_end "
            "WHERE list_contains(?::VARCHAR[], m.metric) GROUP BY w.key, m.metric",
            [metrics],
        )
