"""The server's own metrics, on ``/metrics`` through prometheus_client.

- ``pyproflab_serve_pushes_total{protocol}`` and
  ``pyproflab_serve_profiles_received_total{protocol}``: acknowledged pushes
  and the profile attachments in them;
- ``pyproflab_serve_refused_total{reason}``: requests refused, by reason
  (unauthorized, forbidden, rate_limited, too_many_connections, deadline,
  closed_early,
  too_large, bomb, malformed, unsupported_format, spool_full, disk, shutdown, ...);
- ``pyproflab_serve_dropped_total{protocol,reason}``: the refused pushes
  their SDK drops, never sending them again: pyroscope-go's, whatever the
  answer; dd-trace-go's answered other than 5xx (after a 5xx it sends the
  push once more);
- ``pyproflab_serve_ack_seconds``: from the request's first byte read to its
  acknowledgement (a histogram);
- ``pyproflab_serve_spool_files``, ``pyproflab_serve_spool_bytes`` and
  ``pyproflab_serve_ingest_lag_seconds`` (the age of the oldest file waiting):
  read from the spool folder at each scrape, so they are right whichever
  process ingests;
- ``pyproflab_serve_connections``: open connections;
  ``pyproflab_serve_requests_in_flight``: requests read and not yet answered
  (what a stop waits for).

The registry is the server's own, not prometheus_client's global one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from pyproflab.sources.spool import Spool

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _SpoolCollector:
    def __init__(self, spool: Spool, connections: Callable[[], int], in_flight: Callable[[], int]):
        self.spool = spool
        self.connections = connections
        self.in_flight = in_flight

    def collect(self):
        files, size, oldest = self.spool.depth()
        lag = (time.time_ns() - oldest) / 1e9 if oldest is not None else 0.0
        yield GaugeMetricFamily(
            "pyproflab_serve_spool_files", "spool files waiting for the store", files
        )
        yield GaugeMetricFamily("pyproflab_serve_spool_bytes", "bytes of spool files waiting", size)
        yield GaugeMetricFamily(
            "pyproflab_serve_ingest_lag_seconds",
            "age of the oldest spool file waiting for the store",
            max(lag, 0.0),
        )
        yield GaugeMetricFamily(
            "pyproflab_serve_connections", "open client connections", self.connections()
        )
        yield GaugeMetricFamily(
            "pyproflab_serve_requests_in_flight",
            "requests read and not yet answered",
            self.in_flight(),
        )


class Telemetry:
    def __init__(
        self,
        spool: Spool,
        connections: Callable[[], int],
        in_flight: Callable[[], int],
    ):
        self.registry = CollectorRegistry(auto_describe=True)
        self.pushes = Counter(
            "pyproflab_serve_pushes", "acknowledged pushes", ["protocol"], registry=self.registry
        )
        self.profiles = Counter(
            "pyproflab_serve_profiles_received",
            "profiles in acknowledged pushes",
            ["protocol"],
            registry=self.registry,
        )
        self.refused = Counter(
            "pyproflab_serve_refused", "refused requests", ["reason"], registry=self.registry
        )
        self.dropped = Counter(
            "pyproflab_serve_dropped",
            "refused pushes their SDK does not send again",
            ["protocol", "reason"],
            registry=self.registry,
        )
        self.ack = Histogram(
            "pyproflab_serve_ack_seconds",
            "seconds from reading a push to acknowledging it",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.registry.register(_SpoolCollector(spool, connections, in_flight))

    def render(self) -> bytes:
        return generate_latest(self.registry)
