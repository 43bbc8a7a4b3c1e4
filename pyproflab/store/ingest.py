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
- ``ingest_paths`` refuses a file it cannot read (a ``ProfileError``, a bad
  sidecar, a path that does not match the template) with a one-line
  reason and still stores the others; a refused file writes nothing.

Metadata comes, lowest priority first, from the ``defaults`` given, a
path template, and a sidecar ``FILE.json`` next to the profile.

Keying one profile (no database) is ``keys.py``; which files a path names and
the metadata of its template and sidecar, ``paths.py``. Their names callers
take from here stay importable here (``ProfileMeta``, ``key_profile``,
``expand_paths``, ``compile_template``, ``DATASET_MARKER``, ``PARTIAL``).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.errors import IdCollisionError, ProfileError, StoreError, UsageError
from pyproflab.model import Profile
from pyproflab.store import ids
from pyproflab.store.connection import Store
from pyproflab.store.ingest_report import DATASET_MARKER, PARTIAL, IngestReport  # noqa: F401
from pyproflab.store.keys import KeyedProfile, ProfileMeta, key_profile, profile_digest
from pyproflab.store.paths import (  # noqa: F401 (compile_template: re-exported)
    PathTemplate,
    compile_template,
    expand_paths,
    sidecar_meta,
    template_meta,
)
from pyproflab.store.queries import refuse_collisions

BATCH_SIZE = 64
# A batch also closes at this many bytes of keyed rows (a large profile keys to ~7 MiB).
BATCH_BYTES = 32 * 2**20

Progress = Callable[[int, int], None]


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
    id_arrays = [ids._u64(t.column(id_col)) for t in tables]
    all_ids = np.concatenate(id_arrays) if id_arrays else np.zeros(0, ids.U64)
    uniq, first = np.unique(all_ids, return_index=True)
    if len(uniq):
        refuse_collisions(store, table_name, id_col, tables)
        with store.registered(_pyproflab_ids=pa.table({id_col: pa.array(uniq, pa.uint64())})):
            fresh = store.sql(
                f"SELECT k.{id_col} FROM _pyproflab_ids k ANTI JOIN {table_name} t USING ({id_col})"
            )
        keep = np.isin(uniq, ids._u64(fresh.column(0)))
        first = np.sort(first[keep])
    bounds = np.cumsum([0] + [len(a) for a in id_arrays])
    owner = np.searchsorted(bounds, first, side="right") - 1
    pieces = [tables[o].take(pa.array(first[owner == o] - bounds[o])) for o in np.unique(owner)]
    return pa.concat_tables(pieces) if pieces else tables[0].schema.empty_table()


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
    with store.registered(_pyproflab_samples=samples):
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
    report = IngestReport()
    if not keyed:
        return report
    with store.transaction():
        present = existing_hashes(store, [k.content_hash for k in keyed])
        next_id = (
            int(store.sql("SELECT coalesce(max(profile_id), 0) FROM profiles").column(0)[0].as_py())
            + 1
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
                pa.array(
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
        profiles = pa.Table.from_pylist([k.row for k in fresh], schema=schema.STORE_PROFILES)
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
        key_profile(p, m, h or profile_digest(p), now=now)
        for (p, m), h in zip(items, hashes, strict=True)
    ]
    return store_keyed(store, keyed)


def _read_raw(path: str, max_bytes: int) -> tuple[bytes | bytearray, str]:
    """The decompressed protobuf bytes of a file and their sha256 (ProfileError if unreadable)."""
    from pyproflab.decode.pprof import decompress
    from pyproflab.errors import NotAProfileError, TooLargeError

    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise TooLargeError(path, f"file is larger than the cap of {max_bytes} bytes")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise NotAProfileError(path, f"cannot read: {e.strerror or e}") from None
    raw = decompress(data, source=path, max_bytes=max_bytes)
    return raw, hashlib.sha256(raw).hexdigest()


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
    transaction per batch. A batch closes at ``batch_size`` profiles or once its
    keyed rows reach ``batch_bytes`` (``Batch``), whichever comes first; a
    profile is never split, so a batch holds at least one. Memory is bounded by
    the batch and the window, whatever the number or size of the files, and each
    worker holds one decompressed file at a time. ``progress(done, total)`` is
    called after every file. A file that cannot be read is refused with its
    one-line reason; the others are still stored.
    """
    from pyproflab.decode import DEFAULT_MAX_BYTES

    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"max_bytes must be >= 1, not {max_bytes}")
    if batch_size < 1:
        raise StoreError(f"batch size must be at least 1 (got {batch_size})")
    if batch_bytes < 1:
        raise StoreError(f"batch bytes must be at least 1 (got {batch_bytes})")
    files, datasets, refused = expand_paths(paths)
    report = IngestReport(refused=list(refused))
    job = FileJob(
        defaults or ProfileMeta(),
        path_template,
        max_bytes or DEFAULT_MAX_BYTES,
        known_hash_prefixes(store),
    )
    with store.memory_limited(writer_memory(batch_bytes)):
        batch = Batch(batch_size, batch_bytes)
        for done, (path, prepared) in enumerate(_prepared(files, job, workers), 1):
            result: KeyedProfile | _Present | _Refused | None = prepared
            if isinstance(result, _Present):
                result = _check_present(store, job, path, result, batch.items, report)
            if isinstance(result, _Refused):
                report.refused.append((path, result.reason))
            elif isinstance(result, KeyedProfile):
                batch.add(result)
            if batch.full():
                _store_batch(store, batch.items, report)
                batch = Batch(batch_size, batch_bytes)
            if progress:
                progress(done, len(files))
        if batch.items:
            _store_batch(store, batch.items, report)

    for d in datasets:
        from pyproflab.store.parquet import import_parquet

        report.add(import_parquet(store, d))
    return report


@dataclass
class Batch:
    """Keyed profiles waiting for one transaction. It is full at ``max_profiles``
    profiles or once their rows (``KeyedProfile.nbytes``) reach ``max_bytes``: the
    profile that crosses the budget is the batch's last, never split off."""

    max_profiles: int
    max_bytes: int
    items: list[KeyedProfile] = field(default_factory=list)
    nbytes: int = 0

    def add(self, keyed: KeyedProfile) -> None:
        self.items.append(keyed)
        self.nbytes += keyed.nbytes

    def full(self) -> bool:
        return len(self.items) >= self.max_profiles or self.nbytes >= self.max_bytes


def _store_batch(store: Store, batch: list[KeyedProfile], report: IngestReport) -> None:
    """One transaction for the batch; on an id collision, one per profile, so only
    the profile that collides is refused."""
    try:
        report.add(store_keyed(store, batch))
    except IdCollisionError:
        for k in batch:
            try:
                report.add(store_keyed(store, [k]))
            except IdCollisionError as e:
                report.refused.append((str(k.row.get("source") or k.content_hash), str(e)))


# --- preparing one file (in a worker process) ------------------------------------------


@dataclass(frozen=True)
class FileJob:
    """What turning a file into keyed rows needs (sent once to each worker)."""

    defaults: ProfileMeta
    path_template: str | None
    max_bytes: int
    known: np.ndarray  # sorted first 64 bits of the store's content hashes


@dataclass
class _Present:
    """The file's content hash may be stored already: it was not decoded."""

    digest: str


@dataclass
class _Refused:
    reason: str


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


def _maybe_known(known: np.ndarray, digest: str) -> bool:
    if not len(known):
        return False
    prefix = np.uint64(int(digest[:16], 16))
    pos = int(np.searchsorted(known, prefix))
    return pos < len(known) and known[pos] == prefix


def prepare_file(job: FileJob, path: str, now: datetime) -> KeyedProfile | _Present | _Refused:
    """Read, hash, decode and key one file (pure: no database). A file whose hash
    may be stored already is not decoded; the writer checks the whole hash."""
    from pyproflab.decode import decode_bytes

    try:
        meta, hint = _file_meta(job, path)
        raw, digest = _read_raw(path, job.max_bytes)
        if _maybe_known(job.known, digest):
            return _Present(digest)
        profile = decode_bytes(raw, source=path, max_bytes=job.max_bytes)
        del raw  # the decompressed bytes go before keying allocates
        return key_profile(profile, meta, digest, type_hint=hint, now=now)
    except ProfileError as e:
        return _Refused(e.problem)
    except (StoreError, ValueError) as e:
        return _Refused(str(e))


def _file_meta(job: FileJob, path: str) -> tuple[ProfileMeta, str | None]:
    """Metadata of one file: defaults, then its path template, then its sidecar."""
    meta = job.defaults.updated({"source": os.path.abspath(path)})
    hint = None
    if job.path_template is not None:
        tm = template_meta(_compiled(job.path_template), path)
        if tm is None:
            raise ValueError(f"path does not match the template {job.path_template!r}")
        meta, hint = meta.updated(tm[0]), tm[1]
    side = sidecar_meta(path)
    if side is not None:
        meta = meta.updated(side)
    return meta, hint


@functools.lru_cache(maxsize=8)
def _compiled(template: str) -> PathTemplate:
    return compile_template(template)


def _check_present(
    store: Store,
    job: FileJob,
    path: str,
    result: _Present,
    batch: list[KeyedProfile],
    report: IngestReport,
) -> KeyedProfile | _Refused | None:
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


# --- the worker pool ---------------------------------------------------------------------

# Below this many files a pool costs more to start than it saves.
POOL_MIN_FILES = 8

_JOB: FileJob | None = None


def _init_worker(job: FileJob) -> None:
    global _JOB
    _JOB = job


def _prepare_in_worker(path: str, now: datetime) -> KeyedProfile | _Present | _Refused:
    assert _JOB is not None
    return prepare_file(_JOB, path, now)


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def window_size(workers: int) -> int:
    """Files in flight with a pool: two per worker keep each busy while the writer
    takes results in order, one more covers a slow file; not tied to the batch."""
    return 3 * workers


def _prepared(
    files: list[str], job: FileJob, workers: int | None
) -> Iterator[tuple[str, KeyedProfile | _Present | _Refused]]:
    """(path, prepared result) for every file, in order. With a pool, at most
    ``window_size(workers)`` files are in flight, so results waiting for the
    writer stay bounded."""
    now = datetime.now(UTC)
    workers = default_workers() if workers is None else workers
    if workers <= 1 or len(files) < POOL_MIN_FILES:
        for path in files:
            yield path, prepare_file(job, path, now)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: workers do not inherit this process's DuckDB connection or threads.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pyproflab.store.ingest"])
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(job,))
    try:
        pending: deque = deque()
        todo = iter(files)
        for path in itertools.islice(todo, window_size(workers)):
            pending.append((path, pool.submit(_prepare_in_worker, path, now)))
        while pending:
            path, future = pending.popleft()
            result = future.result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(_prepare_in_worker, nxt, now)))
            yield path, result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
