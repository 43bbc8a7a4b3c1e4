"""Readers of GC metrics from outside the pprof format.

- ``prometheus``: the Prometheus text exposition format (0.0.4), and
  ``prometheus_api``: the Prometheus HTTP API (``/api/v1/query_range``), both
  as ``schema.METRIC_SAMPLES``.
- ``gctrace``: ``GODEBUG=gctrace=1`` log lines, as ``schema.GC_CYCLES``.

Like ``decode``, this layer only reads and returns Arrow tables; storing them
is ``pyproflab.store.metrics``. Errors are ``MetricsError`` naming the source
(and the line).
"""

from __future__ import annotations

from pyproflab.sources.gctrace import parse_gctrace, read_gctrace
from pyproflab.sources.prometheus_api import metric_metadata, query_range
from pyproflab.sources.prometheus_scan import parse_exposition, read_exposition

__all__ = [
    "metric_metadata",
    "parse_exposition",
    "parse_gctrace",
    "query_range",
    "read_exposition",
    "read_gctrace",
]
