"""A job's sources: each ingested on its own into the job's store.

Rules:

- ``drop``: the files of a folder not handled before (same path, size and
  mtime), and at least ``min_age_seconds`` old (a file still being written is
  left for the next run), ingested in batches of ``batch_size``, each batch
  all-or-nothing; files are recorded as handled after their batch commits. A
  refused file beside stored ones is listed in the summary; when every new
  file was refused the source failed as a whole.
- ``parquet``: an export of another store, imported (profiles already present
  are skipped).
- ``collect``: one collection window from the targets file's live services,
  archived beside the store unless ``archive`` says where. When every fetch
  failed (the targets refuse connections) the source failed as a whole; a
  target failing beside others that delivered is listed in the summary.
- ``datadog``, ``pyroscope``, ``parca``: what the service holds since
  ``since`` ago (incremental: what an earlier run stored is not fetched
  again); a refused profile is listed, the others are stored.
- One source failing does not stop the others; it is reported in the summary.

Each kind is a row of ``source_kinds.KINDS`` (its keys, their types and
ranges) naming its runner here; every runner stores through the source
interface (``store.sourced.ingest_source``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyproflab.errors import ProflabError, StoreError, UsageError
from pyproflab.jobs import state
from pyproflab.jobs.source_kinds import KINDS, SourceSpec
from pyproflab.jobs.spec import JobSpec
from pyproflab.store.connection import Store

Log = Callable[[str], None]


def run_sources(store: Store, spec: JobSpec, summary: dict[str, Any], log: Log) -> bool:
    """Ingest each source on its own, by its kind's runner (``source_kinds.KINDS``),
    appending its report (or its error) to ``summary["sources"]``: a source
    that fails (a ProflabError or OSError) is logged and the others still run.
    A busy store is not a source's fault and propagates. True when a source
    failed."""
    source_failed = False
    for src in spec.sources:
        runner = globals()[KINDS[src.kind].runner]
        try:
            summary["sources"].append(runner(store, spec.name, src, log))
        except (ProflabError, OSError) as e:
            if isinstance(e, StoreError) and "busy" in str(e):
                raise
            source_failed = True
            summary["sources"].append({"kind": src.kind, "error": str(e)})
            log(f"{src.kind} source failed: {e}")
    return source_failed


def drop_source(store: Store, job: str, src: SourceSpec, log: Log) -> dict[str, Any]:
    from pyproflab.sources.base import ItemMeta
    from pyproflab.sources.local import FileSource
    from pyproflab.store.ingest import expand_paths
    from pyproflab.store.sourced import ingest_source

    if not src.path or not os.path.isdir(src.path):
        what = "is not a folder" if src.path and os.path.exists(src.path) else "does not exist"
        raise UsageError(f"drop folder {src.path} {what}")
    files, _, _ = expand_paths([src.path], skip=store.own_files())  # a store kept in it too
    seen = state.seen_files(store, job)
    now = time.time()
    todo: list[tuple[str, int, int]] = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            continue  # gone since the listing
        key = (os.path.abspath(f), st.st_size, st.st_mtime_ns)
        if key in seen or now - st.st_mtime < src.min_age_seconds:
            continue
        todo.append(key)
    out: dict[str, Any] = {
        "kind": "drop",
        "path": src.path,
        "files": len(todo),
        "new": 0,
        "present": 0,
        "refused": [],
    }
    defaults = ItemMeta(
        service=src.service, version=src.version, instance=src.instance, labels=dict(src.labels)
    )
    for start in range(0, len(todo), src.batch_size):
        chunk = todo[start : start + src.batch_size]
        source = FileSource([c[0] for c in chunk], defaults, path_template=src.path_template)
        rep = ingest_source(store, source, batch_size=src.batch_size)
        out["new"] += rep.new
        out["present"] += rep.present
        refused = {os.path.abspath(p): why for p, why in rep.refused}
        for p, why in rep.refused:
            out["refused"].append({"path": p, "why": why})
            log(f"refused {p}: {why}")
        # Recorded after the batch committed: a kill in between only means the
        # files are read again next time and found present.
        state.record_files(
            store, job, [(p, s, m, "refused" if p in refused else "ingested") for p, s, m in chunk]
        )
    if todo and len(out["refused"]) == len(todo):
        # Nothing new was usable: the source failed as a whole (as a collect whose
        # every fetch failed). Its files are handled: the next run does not fail on them.
        first = out["refused"][0]
        raise ProflabError(
            f"drop: every new file was refused ({len(todo)}); first: {first['path']}: "
            f"{first['why']}"
        )
    return out


def parquet_source(store: Store, job: str, src: SourceSpec, log: Log) -> dict[str, Any]:
    from pyproflab.sources.local import DatasetSource
    from pyproflab.store.sourced import ingest_source

    rep = ingest_source(store, DatasetSource(src.path))
    return {"kind": "parquet", "path": src.path, "new": rep.new, "present": rep.present}


def collect_source(store: Store, job: str, src: SourceSpec, log: Log) -> dict[str, Any]:
    from pyproflab.collect import COLLECT_TYPES, collect
    from pyproflab.sources.targets import load_targets, parse_types

    targets = load_targets(src.targets or "")
    try:
        types = parse_types(src.types) if src.types else list(COLLECT_TYPES)
    except ValueError as e:
        raise UsageError(str(e)) from None
    archive = Path(src.archive) if src.archive else Path(store.name).parent / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    try:
        rep = collect(
            store,
            targets,
            seconds=src.seconds,
            types=types,
            archive_dir=archive,
            metrics_interval=src.metrics_interval or None,
            timeout=src.timeout,
            retries=src.retries,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    for line in rep.errors():
        log(f"collect: {line}")
    if rep.failed and not (rep.new or rep.present):
        # Nothing came from any target: the source failed as a whole.
        first = rep.errors()[0] if rep.errors() else "no profile collected"
        raise ProflabError(f"collect: every fetch failed ({rep.failed}); first: {first}")
    return {
        "kind": "collect",
        "targets": src.targets,
        "new": rep.new,
        "present": rep.present,
        "failed": rep.failed,
        "targets_skipped": sum(1 for t in rep.targets if t.error),
        "scrapes_failed": rep.scrapes_failed,
        "errors": rep.errors(),
    }


def pull_source(store: Store, job: str, src: SourceSpec, log: Log) -> dict[str, Any]:
    """A Datadog, Pyroscope or Parca source: what it holds since ``since`` ago
    (incremental: what an earlier run stored is not fetched again)."""
    from datetime import UTC, datetime

    from pyproflab.sources.base import Request, SourceError
    from pyproflab.sources.http import Retries
    from pyproflab.sources.pull import PullOptions, pull_source
    from pyproflab.store.select import parse_duration, parse_time
    from pyproflab.store.sourced import ingest_source

    values = dict(src.options)
    if "step" in values:
        values["step"] = parse_duration(values["step"]).total_seconds()
    options = PullOptions(
        timeout=src.timeout,
        max_bytes=src.max_mib << 20,
        retries=Retries(retries=src.retries),
        on_retry=lambda line: log(f"{src.kind}: {line}"),
    )
    source = pull_source(src.kind, values, options)
    request = Request(since=parse_time(src.since), until=datetime.now(UTC))
    rep = ingest_source(store, source, request, batch_size=src.batch_size)
    for what, why in rep.refused:
        log(f"refused {what}: {why}")
    failed = rep.failed_whole()
    if failed:  # as the pull command: the source failed as a whole (exit 2)
        raise SourceError(source.name, failed)
    return {
        "kind": src.kind,
        "source": source.name,
        "new": rep.new,
        "present": rep.present,
        "refused": [{"what": w, "why": y} for w, y in rep.refused],
    }
