"""Merge many profile files on every core, equal to ``merge`` of them in order.

Rules:

- The files are cut into contiguous chunks, one per worker, in the order given.
  Each worker reads its chunk one file at a time (one decoded profile in memory
  at once) and merges it; this process merges the chunks' results in order.
- That is pprof's merge of the files because the merge numbers every table in
  order of first use and adds values: a chunk's result holds its samples,
  locations, functions and mappings in their order of first use, so merging
  the results meets every key in the order merging the files does.
- It holds only where merging changes no value, so a chunk is merged only when
  all its profiles have the same sample types (distinct names), the same period
  type, and no negative value (a sum that cancels out is dropped, which a chunk
  cannot decide alone). Otherwise, or when the chunks differ from each other,
  the files are read again and merged one by one here (``merge``'s rules).
- The header (time, duration, period, comments, defaults) is pprof's over every
  file's header, not over the chunks' (pprof's choice of time is not
  associative when some profiles have none).
- ``prepare(label, profile) -> (profile or None, info)`` runs on every file in
  the worker before it is merged (pgo strips there); None leaves a file out of
  the merge. The infos come back in file order. ``prepare`` must be a
  module-level function (it is sent to the workers by name).
- A file that cannot be read: the result holds the first error in file order
  (as reading the files one by one meets it) and the infos of the files before.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from pyproflab.analyses._arrays import to_np
from pyproflab.analyses.merge import _header, _Merger, merge
from pyproflab.arrays import list_parts
from pyproflab.decode import DEFAULT_MAX_BYTES, read_profile
from pyproflab.errors import ProfileError, ProflabError
from pyproflab.model import Profile

Prepare = Callable[[str, Profile], tuple[Profile | None, Any]]

# Below this many files per worker, starting the workers costs more than they save.
MIN_FILES_PER_WORKER = 4

_HEADER_FIELDS = (
    "sample_types",
    "period_type",
    "period",
    "time_nanos",
    "duration_nanos",
    "comments",
    "drop_frames",
    "keep_frames",
    "default_sample_type",
    "doc_url",
)


@dataclasses.dataclass
class MergedFiles:
    """The merged profile (None when no file was left to merge or one could not be
    read), prepare's infos, and the first unreadable file's error."""

    profile: Profile | None
    infos: list[Any]
    error: ProflabError | None = None


@dataclasses.dataclass
class _Chunk:
    merged: Profile | None
    headers: list[dict]
    infos: list[Any]
    mixed: bool = False  # the chunk cannot be merged alone (see the module rules)
    error: tuple[type, tuple] | None = None  # the first unreadable file's error


def merge_files(
    paths: Sequence[str],
    *,
    prepare: Prepare | None = None,
    workers: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> MergedFiles:
    """The files merged as ``merge`` merges them in order (see the module rules)."""
    paths = [os.fspath(p) for p in paths]
    workers = _workers(len(paths), workers)
    if workers <= 1:
        chunks = [_merge_chunk(paths, prepare, max_bytes)]
    else:
        chunks = _in_pool(_cut(paths, workers), prepare, max_bytes, workers)
    infos = []
    for c in chunks:
        infos += c.infos
        if c.error is not None:
            cls, args = c.error
            return MergedFiles(None, infos, cls(*args))
    headers = [h for c in chunks for h in c.headers]
    parts = [c.merged for c in chunks if c.merged is not None]
    if any(c.mixed for c in chunks) or not _same_kind(headers):
        return MergedFiles(_one_by_one(paths, prepare, max_bytes), infos)
    if not parts:
        return MergedFiles(None, infos)
    merged = parts[0] if len(parts) == 1 else merge(parts)
    header = _header([SimpleNamespace(**h) for h in headers])  # type: ignore[misc]
    return MergedFiles(dataclasses.replace(merged, **header), infos)


def _workers(n_files: int, workers: int | None) -> int:
    if workers is None:
        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:
            workers = os.cpu_count() or 1
    return max(1, min(workers, n_files // MIN_FILES_PER_WORKER))


def _cut(paths: list[str], n: int) -> list[list[str]]:
    """``n`` contiguous chunks of nearly equal length, in order."""
    bounds = np.linspace(0, len(paths), n + 1).round().astype(int)
    return [paths[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _in_pool(
    chunks: list[list[str]], prepare: Prepare | None, max_bytes: int, workers: int
) -> list[_Chunk]:
    """Chunk 0 here, the others in worker processes, results in order."""
    from concurrent.futures import ProcessPoolExecutor

    from pyproflab import forkserver

    # forkserver: workers inherit neither this process's threads nor its open stores.
    ctx = forkserver.context(["pyproflab.analyses.merge_files"])
    with ProcessPoolExecutor(workers - 1, mp_context=ctx) as pool:
        futures = [pool.submit(_merge_chunk, c, prepare, max_bytes) for c in chunks[1:]]
        first = _merge_chunk(chunks[0], prepare, max_bytes)
        return [first, *(f.result() for f in futures)]


def _merge_chunk(paths: list[str], prepare: Prepare | None, max_bytes: int) -> _Chunk:
    """The chunk's files read and merged one at a time; stops at the first
    unreadable file, and stops merging at the first profile of another kind."""
    out = _Chunk(None, [], [])
    merger: _Merger | None = None
    first: Profile | None = None
    for path in paths:
        try:
            read = read_profile(path, max_bytes=max_bytes)
        except ProflabError as e:
            out.error = _portable(e)
            break
        prof: Profile | None = read
        info = None
        if prepare is not None:
            prof, info = prepare(path, read)
        out.infos.append(info)
        if prof is None or out.mixed:
            continue
        out.headers.append({f: getattr(prof, f) for f in _HEADER_FIELDS})
        if first is None:
            first, merger = prof, _Merger(len(prof.sample_types))
        if not _mergeable(first, prof):
            out.mixed, merger = True, None
            continue
        assert merger is not None
        merger.add(prof)
        del prof  # one decoded profile at a time
    if merger is not None and first is not None and not out.mixed:
        out.merged = merger.result(_header([first]))
    return out


def _mergeable(first: Profile, p: Profile) -> bool:
    """Whether ``p`` merges with ``first`` with no value changed (see the rules)."""
    names = [t.type for t in p.sample_types]
    if p.sample_types != first.sample_types or p.period_type != first.period_type:
        return False
    if len(set(names)) != len(names) or not names:
        return False
    _, flat = list_parts(p.samples.column("values"))
    vals = to_np(flat, np.int64)
    return not (len(vals) and int(vals.min()) < 0)


def _same_kind(headers: list[dict]) -> bool:
    return all(
        h["sample_types"] == headers[0]["sample_types"]
        and h["period_type"] == headers[0]["period_type"]
        for h in headers
    )


def _one_by_one(paths: list[str], prepare: Prepare | None, max_bytes: int) -> Profile | None:
    """The files read again here and merged with ``merge`` (every rule of it)."""
    profiles = []
    for path in paths:
        read = read_profile(path, max_bytes=max_bytes)
        prof: Profile | None = read
        if prepare is not None:
            prof, _ = prepare(path, read)
        if prof is not None:
            profiles.append(prof)
    return merge(profiles) if profiles else None


def _portable(e: ProflabError) -> tuple[type, tuple]:
    """An error as (class, arguments), rebuilt in the caller's process (a
    ProfileError's arguments are its source and problem, not its message)."""
    if isinstance(e, ProfileError):
        return type(e), (e.source, e.problem)
    return type(e), (str(e),)
