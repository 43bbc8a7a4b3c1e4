"""Collect profiles and /metrics from live Go services (``net/http/pprof``) into a store.

The collection itself is the source ``sources.collect.CollectSource`` (its
rules: what is fetched, when, with which limits, retries and credentials);
this module stores what it yields through the store's one entry point
(``store.sourced.ingest_source``), one transaction per profile or scrape, in
arrival order, and returns the source's report with each fetch's outcome.
A store that cannot be written stops the collection with its one-line error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyproflab.sources.collect import (  # noqa: F401 (the collect API, importable here)
    DEFAULT_CONCURRENCY,
    DEFAULT_METRICS_INTERVAL,
    DEFAULT_RETRIES,
    DEFAULT_SECONDS,
    DEFAULT_TIMEOUT,
    ENDPOINTS,
    CollectSource,
    Progress,
)
from pyproflab.sources.collect_report import (  # noqa: F401
    CollectReport,
    FetchResult,
    ScrapeStats,
    TargetReport,
    archive_body,
    archive_path,
)
from pyproflab.sources.http import DEFAULT_BACKOFF, backoff_delay  # noqa: F401
from pyproflab.sources.targets import COLLECT_TYPES, Target

if TYPE_CHECKING:
    from pyproflab.store.connection import Store


def collect(
    store: Store,
    targets: Sequence[Target],
    *,
    seconds: int = DEFAULT_SECONDS,
    types: Sequence[str] = COLLECT_TYPES,
    archive_dir: str | os.PathLike,
    metrics_interval: float | None = DEFAULT_METRICS_INTERVAL,
    timeout: float = DEFAULT_TIMEOUT,
    retries: int = DEFAULT_RETRIES,
    concurrency: int = DEFAULT_CONCURRENCY,
    backoff: float = DEFAULT_BACKOFF,
    progress: Progress | None = None,
) -> CollectReport:
    """Collect one window from every target into ``store`` and ``archive_dir``.

    ``types`` applies to targets without their own ``types``. A
    ``metrics_interval`` of ``None`` or ``0`` turns scraping off. Failures are
    in the report, never raised; only bad arguments raise ``ValueError``.
    """
    import pyproflab.store.traces  # noqa: F401 (registers the store's writer of traces)
    from pyproflab.store.sourced import ingest_source

    source = CollectSource(
        targets,
        archive_dir=archive_dir,
        seconds=seconds,
        types=types,
        metrics_interval=metrics_interval,
        timeout=timeout,
        retries=retries,
        concurrency=concurrency,
        backoff=backoff,
        progress=progress,
    )
    ingest_source(store, source, batch_size=1)
    return source.report
