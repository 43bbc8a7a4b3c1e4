"""Writing profiles into the store.

Rules:

- A batch is one transaction: every profile of it is stored, or none is
  (any exception rolls the whole batch back; the store is as it was).
- A profile is identified by ``content_hash``: the sha256 of its
  decompressed protobuf bytes, so a re-gzipped copy is the same profile.
  Storing a profile already present is a no-op reported as ``present``
  (its metadata is not changed).
- Functions, mappings, locations, stacks and label sets are keyed by
  content-derived ids (``ids``) and inserted only when new (an anti-join
  against the table), so each is stored once for the whole store.
- A profile sent without rows its worker sent before (``sent``) is stored
  only if the files it relies on were not refused; otherwise its file is
  keyed again in full (``Writer``), so a refused file's rows never enter the
  store through another profile.
- ``ingest_paths`` refuses a file it cannot read (a ``ProfileError``, a bad
  sidecar, a path that does not match the template) with a one-line
  reason and still stores the others; a refused file writes nothing.

Metadata comes, lowest priority first, from the ``defaults`` given, a
path template, and a sidecar ``FILE.json`` next to the profile.

Keying (``pyproflab.keying``: a profile, files into keyed rows in worker
processes, paths, templates, sidecars) touches no database; the names callers
take from here (``ProfileMeta``, ``FileJob``, ``expand_paths``, ...) stay here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.arrays import few_chunks, from_numpy, from_rows
from pyproflab.errors import IdCollisionError, StoreError, UsageError
from pyproflab.keying import ids
from pyproflab.keying.keys import KeyedProfile, ProfileMeta, key_profile, profile_digest
from pyproflab.keying.paths import (  # noqa: F401 (re-exported)
    DATASET_MARKER,
    PARTIAL,
    compile_template,
    expand_paths,
)
from pyproflab.keying.prepare import (  # noqa: F401 (POOL_MIN_FILES, default_workers: re-exported)
    POOL_MIN_FILES,
    FileJob,
    Trace,
    _Present,
    _Refused,
    default_workers,
    prepare_file,
    prepared,
)
from pyproflab.model import Profile
from pyproflab.store.connection import MEMORY, Store
from pyproflab.store.ingest_report import IngestReport
from pyproflab.store.queries import checkpoint, refuse_collisions

BATCH_SIZE = 64
# A batch also closes at this many bytes of keyed rows (a large profile keys to ~7 MiB).
BATCH_BYTES = 32 * 2**20
# Each worker remembers up to this many bytes of the rows it has sent (``sent``).
SENT_BYTES = BATCH_BYTES

Progress = Callable[[int, int], None]

#: Stores one execution trace file (path, metadata); set by ``store.traces``
#: when imported, so the bulk reader hands it the trace files it meets.
TRACE_WRITER: Callable[[Store, str, ProfileMeta], IngestReport] | None = None


def writer_memory(batch_bytes: int) -> int:
    """DuckDB's memory limit while ingesting: a batch's rows several times over
    (registered, anti-joined, checked for collisions, inserted), not the store."""
    return max(128 * 2**20, 4 * batch_bytes)


# --- a batch, in one transaction ---------------------------------------------------

# (store table, id column, KeyedProfile attribute) of the dedup tables, in insert order.
DEDUP_TABLES = (
    ("functions", "function_id", "functions"),
    ("mappings", "mapping_id", "mappings"),
    ("locations", "location_id", "locations"),
    ("stacks", "stack_id", "stacks"),
    ("label_sets", "label_set_id", "label_sets"),
)


def _new_rows(store: Store, table_name: str, id_col: str, tables: list[pa.Table]) -> pa.Table:
    """The rows of ``tables`` (one per profile) whose id is neither in the store
    nor earlier in the batch: ids are compared first, so only new rows are copied."""
    id_arrays = [ids.u64(t.column(id_col)) for t in tables]
    all_ids = np.concatenate(id_arrays) if id_arrays else np.zeros(0, ids.U64)
    uniq, first = np.unique(all_ids, return_index=True)
    if len(uniq):
        refuse_collisions(store, table_name, id_col, tables)
        with store.registered(_pyproflab_ids=pa.table({id_col: from_numpy(uniq, pa.uint64())})):
            fresh = store.sql(
                f"SELECT k.{id_col} FROM _pyproflab_ids k ANTI JOIN {table_name} t USING ({id_col})"
            )
        keep = np.isin(uniq, ids.u64(fresh.column(0)))
        first = np.sort(first[keep])
    bounds = np.cumsum([0] + [len(a) for a in id_arrays])
    owner = np.searchsorted(bounds, first, side="right") - 1
    pieces = [tables[o].take(from_numpy(first[owner == o] - bounds[o])) for o in np.unique(owner)]
    return few_chunks(pa.concat_tables(pieces)) if pieces else tables[0].slice(0, 0)


def _insert_new(store: Store, table_name: str, id_col: str, rows: pa.Table) -> None:
    """Insert rows whose id the table does not have yet (the anti-join again guards
    against a writer on another connection of this process)."""
    if rows.num_rows == 0:
        return
    with store.registered(_pyproflab_new=rows):
        store.execute(
            f"INSERT INTO {table_name} BY NAME SELECT n.* FROM _pyproflab_new n "
            f"ANTI JOIN {table_name} t USING ({id_col})"
        )


def _insert_samples(store: Store, samples: pa.Table) -> None:
    with store.registered(_pyproflab_samples=few_chunks(samples)):
        store.execute("INSERT INTO samples BY NAME SELECT * FROM _pyproflab_samples")


def _insert_profiles(store: Store, profiles: pa.Table) -> None:
    with store.registered(_pyproflab_profiles=profiles):
        store.execute("INSERT INTO profiles BY NAME SELECT * FROM _pyproflab_profiles")


def existing_hashes(store: Store, hashes: Sequence[str]) -> dict[str, int]:
    """content_hash -> profile_id of those already in the store."""
    if not hashes:
        return {}
    t = store.sql(
        "SELECT content_hash, profile_id FROM profiles "
        "WHERE list_contains(?::VARCHAR[], content_hash)",
        [list(hashes)],
    )
    return dict(zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True))


def store_keyed(store: Store, keyed: Sequence[KeyedProfile]) -> IngestReport:
    """Write keyed profiles in one transaction; those whose content_hash is
    present (in the store, or earlier in ``keyed``) are skipped."""
    if not keyed:
        return IngestReport()
    with store.transaction():
        return write_keyed(store, keyed)


def write_keyed(store: Store, keyed: Sequence[KeyedProfile]) -> IngestReport:
    """``store_keyed`` inside the caller's transaction (a batch that also writes
    other rows, ``store/sourced.py``)."""
    report = IngestReport()
    if not keyed:
        return report
    present = existing_hashes(store, [k.content_hash for k in keyed])
    next_id = (
        int(store.sql("SELECT coalesce(max(profile_id), 0) FROM profiles").column(0)[0].as_py()) + 1
    )
    fresh: list[KeyedProfile] = []
    for k in keyed:
        if k.content_hash in present:
            report.present += 1
            continue
        k.row["profile_id"] = next_id
        present[k.content_hash] = next_id
        report.profile_ids.append(next_id)
        next_id += 1
        fresh.append(k)
    report.new = len(fresh)
    if not fresh:
        return report
    for table_name, id_col, attr in DEDUP_TABLES:
        rows = _new_rows(store, table_name, id_col, [getattr(k, attr) for k in fresh])
        _insert_new(store, table_name, id_col, rows)
    samples = pa.table(
        [
            from_numpy(
                np.concatenate(
                    [
                        np.full(k.samples.num_rows, k.row["profile_id"], dtype=np.int64)
                        for k in fresh
                    ]
                )
            ),
            pa.chunked_array(
                [c for k in fresh for c in k.samples.column("stack_id").chunks], pa.uint64()
            ),
            pa.chunked_array(
                [c for k in fresh for c in k.samples.column("label_set_id").chunks], pa.uint64()
            ),
            pa.chunked_array(
                [c for k in fresh for c in k.samples.column("values").chunks],
                pa.list_(pa.int64()),
            ),
        ],
        schema=schema.STORE_SAMPLES,
    )
    _insert_samples(store, samples)
    profiles = from_rows([k.row for k in fresh], schema.STORE_PROFILES)
    _insert_profiles(store, profiles)
    return report


def ingest(
    store: Store,
    items: Iterable[tuple[Profile, ProfileMeta]],
    *,
    content_hashes: Sequence[str | None] | None = None,
) -> IngestReport:
    """Store a batch of (Profile, ProfileMeta) in ONE transaction: all or nothing.

    ``content_hashes`` (sha256 hex of each file's decompressed bytes) identify the
    profiles; without them a digest of the decoded content is used.
    """
    items = list(items)
    hashes = list(content_hashes) if content_hashes is not None else [None] * len(items)
    if len(hashes) != len(items):
        raise ValueError("content_hashes must have one entry per profile")
    now = datetime.now(UTC)
    keyed = [
        key_profile(p, m, h or profile_digest(p), now=now, with_content=False)
        for (p, m), h in zip(items, hashes, strict=True)
    ]
    return store_keyed(store, keyed)


def ingest_paths(
    store: Store,
    paths: Iterable[str | os.PathLike],
    defaults: ProfileMeta | None = None,
    *,
    path_template: str | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    batch_size: int = BATCH_SIZE,
    workers: int | None = None,
    batch_bytes: int = BATCH_BYTES,
) -> IngestReport:
    """Ingest profile files (files, folders, globs; exported Parquet datasets too).

    Files are read, hashed, decoded and keyed by ``workers`` processes (default:
    one per core; in this process when there are few files), a few files per
    worker in flight (``window_size``), and stored by this process one
    transaction per batch, on a thread of its own while the next batch fills
    (``BackgroundWrites``). A batch closes at ``batch_size`` profiles or once its
    keyed rows reach ``batch_bytes`` (``Batch``), whichever comes first; a
    profile is never split, so a batch holds at least one. Each worker leaves out
    of a profile the functions, locations and stacks it has already sent with
    the same bytes (``sent.SentMemory``, at most ``SENT_BYTES`` remembered), so
    the writer neither receives nor checks them again. Memory is bounded by two
    batches, the window and that memory, whatever the number or size of the files,
    and each worker holds one decompressed file at a time. ``progress(done, total)`` is
    called after every file. A file that cannot be read is refused with its
    one-line reason; the others are still stored.
    """
    from pyproflab.decode import DEFAULT_MAX_BYTES

    _check_sizes(max_bytes, batch_size, batch_bytes)
    # The store and its side files may sit in a folder walked: never inputs.
    files, datasets, refused = expand_paths(paths, defaults, path_template, store.own_files())
    from pyproflab.store.parquet import check_dataset, import_parquet

    checked = [check_dataset(d) for d in datasets]  # refused before any file is stored
    report = IngestReport(refused=list(refused))
    job = FileJob(
        defaults or ProfileMeta(),
        path_template,
        max_bytes or DEFAULT_MAX_BYTES,
        known_hash_prefixes(store),
        SENT_BYTES,
    )
    writes = BackgroundWrites(Writer(store, job, report))
    threads = _writer_threads(store, workers, len(files))
    traces: list[tuple[str, ProfileMeta]] = []
    stored = _says_how_many(report, len(files))
    with stored, store.memory_limited(writer_memory(batch_bytes)), threads, writes:
        batch = Batch(batch_size, batch_bytes)
        for done, (path, ready) in enumerate(prepared(files, job, workers), 1):
            result: KeyedProfile | _Present | _Refused | Trace | None = ready
            if isinstance(result, _Present):
                writes.wait()  # the store is the writing thread's until its batch is in
                result = _check_present(store, job, path, result, batch.items, report)
            if isinstance(result, _Refused):
                report.refused.append((path, result.reason))
            elif isinstance(result, Trace):
                traces.append((path, result.meta))
            elif isinstance(result, KeyedProfile):
                batch.add(result, path)
            if batch.full():
                writes.submit(batch)
                batch = Batch(batch_size, batch_bytes)
            if progress:
                progress(done, len(files))
        if batch.items:
            writes.submit(batch)
        writes.wait()
        if store.name != MEMORY:
            # The last changes folded into the file here, under the limit: closing
            # the store would do it after the limit is lifted (a 45 MiB peak after
            # 10,000 small profiles).
            checkpoint(store)

    for d, c in zip(datasets, checked, strict=True):
        report.add(import_parquet(store, d, c))
    _store_traces(store, traces, report)
    return report


@contextlib.contextmanager
def _says_how_many(report: IngestReport, files: int):
    """A store error while writing (a full disk), or an interrupt (Ctrl-C,
    SIGTERM: its message the count), says how many profiles were stored before
    it: earlier batches are committed, each whole."""
    try:
        yield
    except (StoreError, KeyboardInterrupt) as e:
        stored = f"{report.new} new profiles of the {files} files were stored before it"
        why = f"{e}; " if isinstance(e, StoreError) else ""
        raise type(e)(f"{why}{stored} (each batch whole): ingest again to add the rest") from None


def _check_sizes(max_bytes: int | None, batch_size: int, batch_bytes: int) -> None:
    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"max_bytes must be >= 1, not {max_bytes}")
    if batch_size < 1:
        raise StoreError(f"batch size must be at least 1 (got {batch_size})")
    if batch_bytes < 1:
        raise StoreError(f"batch bytes must be at least 1 (got {batch_bytes})")


def _store_traces(
    store: Store, traces: list[tuple[str, ProfileMeta]], report: IngestReport
) -> None:
    """Hand the trace files met to the trace writer (``TRACE_WRITER``)."""
    for path, meta in traces:
        if TRACE_WRITER is None:
            report.refused.append((path, "a Go execution trace: this program stores no traces"))
        else:
            report.add(TRACE_WRITER(store, path, meta))


def _writer_threads(
    store: Store, workers: int | None, files: int
) -> contextlib.AbstractContextManager[None]:
    """DuckDB on one thread while a worker pool takes the cores (``prepared``'s rule
    for a pool), else as it is."""
    pooled = (default_workers() if workers is None else workers) > 1 and files >= POOL_MIN_FILES
    return store.single_threaded() if pooled else contextlib.nullcontext()


@dataclass
class Batch:
    """Keyed profiles waiting for one transaction. It is full at ``max_profiles``
    profiles or once their rows (``KeyedProfile.nbytes``) reach ``max_bytes``: the
    profile that crosses the budget is the batch's last, never split off."""

    max_profiles: int
    max_bytes: int
    items: list[KeyedProfile] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    nbytes: int = 0

    def add(self, keyed: KeyedProfile, path: str) -> None:
        self.items.append(keyed)
        self.paths.append(path)
        self.nbytes += keyed.nbytes

    def full(self) -> bool:
        return len(self.items) >= self.max_profiles or self.nbytes >= self.max_bytes


@dataclass
class Writer:
    """Stores the batches of one ``ingest_paths``, remembering the files refused
    for an id collision: a trimmed profile (``KeyedProfile.relies_on``) that
    relies on one of them is keyed again in full from its file before it is
    stored, since the rows it left out were never stored, or stored as other
    content under the same id (``sent``). The files a profile relies on came
    before it, so each was stored, refused, or found present as a copy stored
    earlier in this ingest (a file stored before the ingest is never keyed, so
    never relied on; the store's lock keeps other writers out)."""

    store: Store
    job: FileJob
    report: IngestReport
    refused: set[str] = field(default_factory=set)

    def write(self, batch: Batch) -> None:
        """One transaction for the batch; on an id collision, one per profile, so
        only the profile that collides is refused."""
        items = self._whole(list(zip(batch.items, batch.paths, strict=True)))
        try:
            self.report.add(store_keyed(self.store, [k for k, _ in items]))
        except IdCollisionError:
            for item in items:
                for k, path in self._whole([item]):
                    try:
                        self.report.add(store_keyed(self.store, [k]))
                    except IdCollisionError as e:
                        self.refused.add(k.content_hash)
                        self.report.refused.append((str(k.row.get("source") or path), str(e)))

    def _whole(self, items: list[tuple[KeyedProfile, str]]) -> list[tuple[KeyedProfile, str]]:
        """The (profile, path) pairs, each profile that relies on a refused file keyed
        again in full from its file (refused if it can no longer be read)."""
        out = []
        for keyed, path in items:
            if keyed.relies_on & self.refused:
                job = replace(self.job, known=np.zeros(0, np.uint64))
                again = prepare_file(job, path, keyed.row["ingested_at"])
                if not isinstance(again, KeyedProfile):  # the file changed under us
                    self.report.refused.append((path, getattr(again, "reason", "changed")))
                    continue
                keyed = again
            out.append((keyed, path))
        return out


class BackgroundWrites:
    """Stores batches on one thread while the caller goes on reading files, so the
    workers keep decoding while a batch is written (before, they stopped once the
    files in flight were done). Rules: at most one batch is being written while
    the next one fills, so memory holds two batches, not one; ``submit`` waits
    for the batch before; the store is the thread's while a batch is written, so
    the caller ``wait``s before using it; an error of a write is raised by the
    next ``submit``, ``wait`` or the end of the ``with`` block, which always waits
    for the write under way (a batch is never left half written)."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="pyproflab-writer")
        self._pending: Future | None = None

    def submit(self, batch: Batch) -> None:
        self.wait()
        self._pending = self._thread.submit(self._write, batch)

    def _write(self, batch: Batch) -> None:
        self.writer.write(batch)
        self.writer.store.drop_cached_blocks()  # memory follows the batches, not the store

    def wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __enter__(self) -> BackgroundWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.wait()
        finally:
            self._thread.shutdown(wait=True)


def known_hash_prefixes(store: Store) -> np.ndarray:
    """The first 64 bits of every stored content hash, sorted: 8 bytes a profile,
    so workers can skip stored files without asking the database."""
    hashes = store.sql("SELECT content_hash FROM profiles").column(0).to_pylist()
    out = []
    for h in hashes:
        try:
            out.append(int(h[:16], 16))
        except (TypeError, ValueError):
            continue
    return np.sort(np.array(out, dtype=np.uint64))


def _check_present(
    store: Store,
    job: FileJob,
    path: str,
    result: _Present,
    batch: list[KeyedProfile],
    report: IngestReport,
) -> KeyedProfile | _Refused | Trace | None:
    """A file a worker skipped: counted present if its whole hash is stored (or
    waiting in the batch), else (64 bits alike by chance) prepared here."""
    if existing_hashes(store, [result.digest]) or any(
        k.content_hash == result.digest for k in batch
    ):
        report.present += 1
        return None
    out = prepare_file(replace(job, known=np.zeros(0, np.uint64)), path, datetime.now(UTC))
    assert not isinstance(out, _Present)
    return out
