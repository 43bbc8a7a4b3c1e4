"""A job's sources: each ingested on its own into the job's store.

Rules:

- ``drop``: the files of a folder not handled before (same path, size and
  mtime), and at least ``min_age_seconds`` old (a file still being written is
  left for the next run), ingested in batches of ``batch_size``, each batch
  all-or-nothing; files are recorded as handled after their batch commits.
- ``parquet``: an export of another store, imported (profiles already present
  are skipped).
- ``collect``: one collection window from the targets file's live services,
  archived beside the store unless ``archive`` says where. When every fetch
  failed (the targets refuse connections) the source failed as a whole; a
  target failing beside others that delivered is listed in the summary.
- One source failing does not stop the others; it is reported in the summary.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyproflab.errors import ProflabError, StoreError, UsageError
from pyproflab.jobs import state
from pyproflab.jobs.spec import JobSpec, SourceSpec
from pyproflab.store.connection import Store

Log = Callable[[str], None]


def run_sources(store: Store, spec: JobSpec, summary: dict[str, Any], log: Log) -> bool:
    """Ingest each source on its own, appending its report (or its error) to
    ``summary["sources"]``: a source that fails (a ProflabError or OSError) is
    logged and the others still run. A busy store is not a source's fault and
    propagates. True when a source failed."""
    source_failed = False
    for src in spec.sources:
        try:
            if src.kind == "drop":
                summary["sources"].append(_drop_source(store, spec.name, src, log))
            elif src.kind == "parquet":
                summary["sources"].append(_parquet_source(store, src))
            else:
                summary["sources"].append(_collect_source(store, src, log))
        except (ProflabError, OSError) as e:
            if isinstance(e, StoreError) and "busy" in str(e):
                raise
            source_failed = True
            summary["sources"].append({"kind": src.kind, "error": str(e)})
            log(f"{src.kind} source failed: {e}")
    return source_failed


def _drop_source(store: Store, job: str, src: SourceSpec, log: Log) -> dict[str, Any]:
    from pyproflab.store.ingest import ProfileMeta, expand_paths, ingest_paths

    if not src.path or not os.path.isdir(src.path):
        raise UsageError(f"drop folder {src.path} does not exist")
    files, _, _ = expand_paths([src.path])
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
    defaults = ProfileMeta(
        service=src.service, version=src.version, instance=src.instance, labels=dict(src.labels)
    )
    for start in range(0, len(todo), src.batch_size):
        chunk = todo[start : start + src.batch_size]
        rep = ingest_paths(
            store,
            [c[0] for c in chunk],
            defaults,
            path_template=src.path_template,
            batch_size=src.batch_size,
        )
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
    return out


def _parquet_source(store: Store, src: SourceSpec) -> dict[str, Any]:
    from pyproflab.store.parquet import import_parquet

    rep = import_parquet(store, src.path or "")
    return {"kind": "parquet", "path": src.path, "new": rep.new, "present": rep.present}


def _collect_source(store: Store, src: SourceSpec, log: Log) -> dict[str, Any]:
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
        "errors": rep.errors(),
    }
