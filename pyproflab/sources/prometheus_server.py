"""A Prometheus server as a source: GC metric families over a time range.

Rules:

- Each query (default: the GC families of a Go service, ``DEFAULT_GC_QUERIES``)
  is run with ``query_range`` over the request's ``[since, until]`` every
  ``step`` (``prometheus_api``); metric types come from the server's
  ``/api/v1/metadata`` unless given.
- Each series' Prometheus ``instance`` label is looked up in ``instances``
  (a value of ``str`` is our instance name; an ``InstanceInfo`` gives
  service, version and instance). A series whose label is not there keeps
  ``instance`` = the label and ``service`` = its ``job`` label, or is dropped
  when ``only_mapped``. ``service``/``version``, when given, override every
  series'.
- One ``TableItem`` of ``schema.METRIC_SAMPLES`` per (query, service, version,
  instance), its ``source`` the query's URL; ``rows`` and ``series`` count
  what the items held. Items have no key: a metric row is
  new unless the store has one with the same service, instance, metric, labels
  and time, so a re-run over the same range adds nothing.
- A failed request is the ``MetricsError`` of ``prometheus_api``: one line
  naming the URL. Nothing is fetched while a store transaction is open (the
  store takes items between requests).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from pyproflab.errors import UsageError
from pyproflab.sources.base import METRIC_SAMPLES, ItemMeta, Known, Offer, Request, TableItem

# The GC set of a Go service's /metrics (client_golang with the runtime/metrics
# GC collectors on, plus the default memstats), as one selector per family group.
DEFAULT_GC_QUERIES: tuple[str, ...] = (
    '{__name__=~"go_gc_.+"}',
    '{__name__=~"go_cpu_classes_.+"}',
    '{__name__=~"go_sched_pauses_total_.+"}',
    '{__name__=~"go_memstats_next_gc_bytes|go_memstats_last_gc_time_seconds"}',
)


@dataclass(frozen=True)
class InstanceInfo:
    """Who a Prometheus target is, in pyproflab's terms."""

    service: str | None = None
    version: str | None = None
    instance: str | None = None


@dataclass
class PrometheusSource:
    """GC metrics from a Prometheus server (see the module rules)."""

    base_url: str
    step: timedelta | float | str = "15s"
    queries: Iterable[str] = DEFAULT_GC_QUERIES
    instances: Mapping[str, InstanceInfo | str] = field(default_factory=dict)
    only_mapped: bool = False
    types: Mapping[str, str] | None = None
    timeout: float = 30.0
    max_bytes: int = 256 << 20  # the largest answer read (prometheus_api)
    service: str | None = None
    version: str | None = None
    #: what the items held: rows, and (metric, labels) series
    rows: int = 0
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=set)

    @property
    def name(self) -> str:
        from pyproflab.sources.targets import redact_url

        return f"prometheus: {redact_url(self.base_url.rstrip('/'))}"

    def offer(self, request: Request) -> Offer:
        return Offer(kinds=(METRIC_SAMPLES,))

    def items(self, request: Request, known: Known) -> Iterator[TableItem]:
        from pyproflab.sources.prometheus_api import metric_metadata, query_range

        if request.since is None:
            raise UsageError(f"{self.name}: a time range is needed (since)")
        start, end = request.since, request.until or datetime.now(UTC)
        types = self.types
        if types is None:
            types = metric_metadata(self.base_url, timeout=self.timeout, max_bytes=self.max_bytes)
        base = self.base_url.rstrip("/")
        for query in self.queries:
            got = query_range(
                self.base_url,
                query,
                start,
                end,
                self.step,
                timeout=self.timeout,
                types=types,
                max_bytes=self.max_bytes,
            )
            if got.num_rows == 0:
                continue
            names, labels = got.column("metric").to_pylist(), got.column("labels").to_pylist()
            self.series |= {(m, tuple(lab)) for m, lab in zip(names, labels, strict=True)}
            source = f"{base}/api/v1/query_range?query={urllib.parse.quote(query, safe='')}"
            yield from self._split(got, source)

    def _split(self, rows: pa.Table, source: str) -> Iterator[TableItem]:
        """One item per (service, version, instance) of the rows, in first-seen order."""
        mapping = {
            k: v if isinstance(v, InstanceInfo) else InstanceInfo(instance=v)
            for k, v in self.instances.items()
        }
        groups: dict[InstanceInfo, list[int]] = {}
        for i, pairs in enumerate(rows.column("labels").to_pylist()):
            lab = dict(pairs)
            prom_instance = lab.get("instance")
            info = mapping.get(prom_instance) if prom_instance is not None else None
            if info is None:
                if self.only_mapped:
                    continue
                info = InstanceInfo(service=lab.get("job"), instance=prom_instance)
            groups.setdefault(info, []).append(i)
        for info, where in groups.items():
            meta = ItemMeta(
                service=self.service if self.service is not None else info.service,
                version=self.version if self.version is not None else info.version,
                instance=info.instance,
                source=source,
            )
            self.rows += len(where)
            yield TableItem(METRIC_SAMPLES, rows.take(pa.array(where, pa.int64())), meta)
