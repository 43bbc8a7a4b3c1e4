"""Turning profile files into keyed rows, in worker processes (pure: no database).

Rules: a file is read, hashed (sha256 of its decompressed bytes), decoded and
keyed by one worker, which holds one decompressed file at a time; a file whose
hash the store may hold already (its first 64 bits are among ``FileJob.known``)
is not decoded, and the writer checks the whole hash. A file that cannot be
read is a one-line reason (``_Refused``), never an exception. Results come back
in file order, at most ``window_size`` files in flight. Each worker (or the one
process, without a pool) trims what it has already sent from later files
(``sent.SentMemory``); ``ingest`` stores what comes back.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from pyproflab import forkserver
from pyproflab.decode.gotrace import HEADER_BYTES, trace_version
from pyproflab.decode.inputs import open_input
from pyproflab.errors import ProfileError, StoreError
from pyproflab.keying.keys import KeyedProfile, ProfileMeta, key_profile
from pyproflab.keying.paths import PathTemplate, compile_template, sidecar_meta, template_meta
from pyproflab.keying.sent import SentMemory


def _read_raw(path: str, max_bytes: int) -> tuple[bytes | bytearray, str]:
    """The decompressed protobuf bytes of a file and their sha256 (ProfileError if unreadable)."""
    from pyproflab.decode.pprof import decompress
    from pyproflab.errors import NotAProfileError, TooLargeError

    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise TooLargeError(path, f"file is larger than the cap of {max_bytes} bytes")
        with open_input(path) as f:
            head = f.read(HEADER_BYTES)
            if trace_version(head) is not None:
                raise _TraceFile()  # never read whole: the trace writer streams it
            data = head + f.read()
    except OSError as e:
        raise NotAProfileError(path, f"cannot read: {e.strerror or e}") from None
    raw = decompress(data, source=path, max_bytes=max_bytes)
    return raw, hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class FileJob:
    """What turning a file into keyed rows needs (sent once to each worker)."""

    defaults: ProfileMeta
    path_template: str | None
    max_bytes: int
    known: np.ndarray  # sorted first 64 bits of the store's content hashes
    #: bytes of rows each worker remembers having sent (``sent.SentMemory``); 0: none
    sent_bytes: int = 0


@dataclass
class _Present:
    """The file's content hash may be stored already: it was not decoded."""

    digest: str


@dataclass
class _Refused:
    reason: str


@dataclass
class Trace:
    """The file is a Go execution trace (by its header): stored by the trace
    writer (``ingest.TRACE_WRITER``) with the metadata it would have had."""

    meta: ProfileMeta


class _TraceFile(Exception):
    """Raised by ``_read_raw`` on a trace header."""


def _maybe_known(known: np.ndarray, digest: str) -> bool:
    if not len(known):
        return False
    prefix = np.uint64(int(digest[:16], 16))
    pos = int(np.searchsorted(known, prefix))
    return pos < len(known) and known[pos] == prefix


def prepare_file(
    job: FileJob, path: str, now: datetime
) -> KeyedProfile | _Present | _Refused | Trace:
    """Read, hash, decode and key one file (pure: no database). A file whose hash
    may be stored already is not decoded; the writer checks the whole hash."""
    from pyproflab.decode import decode_bytes

    try:
        meta, hint = _file_meta(job, path)
        try:
            raw, digest = _read_raw(path, job.max_bytes)
        except _TraceFile:
            return Trace(meta)
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


# --- the worker pool ---------------------------------------------------------------------

POOL_MIN_FILES = forkserver.POOL_MIN_FILES

Prepared = KeyedProfile | _Present | _Refused | Trace

_JOB: FileJob | None = None
_SENT: SentMemory | None = None


def _init_worker(job: FileJob) -> None:
    global _JOB, _SENT
    _JOB, _SENT = job, SentMemory(job.sent_bytes)
    _keep_freed_memory()


#: glibc's mallopt parameters (malloc.h) and the values a worker sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_AT = 32 << 20  # glibc's own largest dynamic threshold (64-bit)
_TRIM_AT = 256 << 20


def _keep_freed_memory() -> bool:
    """Let a worker's heap keep up to ``_TRIM_AT`` of freed memory for the next file.

    Each file's arrays (tens of MiB) are freed when it is done; glibc returned that
    top of the heap to the kernel each time, and the next file faulted every page
    in again, zeroed (a tenth of a worker's CPU was page faults). Blocks from
    ``_MMAP_AT`` up (a gzip bomb's buffer) are still mapped and unmapped on their
    own, so what a worker keeps is at most what a normal file used. glibc only; a
    no-op elsewhere (False)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    # mallopt returns 1 when glibc took the value.
    return mallopt(_M_MMAP_THRESHOLD, _MMAP_AT) == 1 and mallopt(_M_TRIM_THRESHOLD, _TRIM_AT) == 1


def _prepare_in_worker(path: str, now: datetime) -> Prepared:
    assert _JOB is not None and _SENT is not None
    return _trimmed(_SENT, prepare_file(_JOB, path, now))


def _trimmed(sent: SentMemory, result: Prepared) -> Prepared:
    """A keyed profile without the rows this process sent before (``sent``)."""
    return sent.trim(result) if isinstance(result, KeyedProfile) else result


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


def prepared(files: list[str], job: FileJob, workers: int | None) -> Iterator[tuple[str, Prepared]]:
    """(path, prepared result) for every file, in order. With a pool, at most
    ``window_size(workers)`` files are in flight, so results waiting for the
    writer stay bounded."""
    now = datetime.now(UTC)
    workers = default_workers() if workers is None else workers
    if workers <= 1 or len(files) < POOL_MIN_FILES:
        sent = SentMemory(job.sent_bytes)
        for path in files:
            yield path, _trimmed(sent, prepare_file(job, path, now))
        return
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: workers do not inherit this process's DuckDB connection or threads.
    ctx = forkserver.context(forkserver.INGEST_PRELOAD)
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
