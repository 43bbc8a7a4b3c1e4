"""GC share over time (``analyses.gc_timeline``): whose scrapes a selection shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from support.store_helpers import make_profile

from pyproflab import schema
from pyproflab.analyses.gc_timeline import gc_share_series
from pyproflab.analyses.gc_windows import M_CPU_GC, M_CPU_IDLE, M_CPU_TOTAL
from pyproflab.store import Selection, Store
from pyproflab.store.ingest import ProfileMeta, ingest
from pyproflab.store.metrics import ingest_metric_rows

T0 = datetime(2026, 11, 1, 10, tzinfo=UTC)


def _scrapes(service: str, instance: str, gc_share: float) -> list[dict]:
    """Three scrapes 10 s apart: 1 CPU-second busy per second, ``gc_share`` of it GC."""
    rows = []
    for k in range(3):
        for metric, value in ((M_CPU_TOTAL, 20.0 * k), (M_CPU_IDLE, 10.0 * k)):
            rows.append((metric, value))
        rows.append((M_CPU_GC, 10.0 * k * gc_share))
    return [
        {
            "service": service,
            "version": "v1",
            "instance": instance,
            "metric": metric,
            "labels": [],
            "type": "counter",
            "time": T0 + timedelta(seconds=10 * (i // 3)),
            "value": value,
            "source": "test",
        }
        for i, (metric, value) in enumerate(rows)
    ]


def test_an_instance_of_another_service_with_the_same_name_is_not_shown() -> None:
    # Services api and db both run pod-0. The series were read by instance name alone
    # when the selection named no one service, so a selection of api's profiles (by
    # version) also drew db/pod-0's GC share (0.5) in the report's GC-over-time chart.
    with Store.open(":memory:") as store:
        profiles = [
            (make_profile([(["main.f"], [1, 1])], time_nanos=int(T0.timestamp()) * 10**9),
             ProfileMeta(service=svc, version=ver, instance="pod-0"))
            for svc, ver in (("api", "v1"), ("db", "v9"))
        ]  # fmt: skip
        ingest(store, profiles, content_hashes=["a", "b"])
        rows = _scrapes("api", "pod-0", 0.1) + _scrapes("db", "pod-0", 0.5)
        ingest_metric_rows(store, pa.Table.from_pylist(rows, schema.STORE_METRIC_SAMPLES))
        got = gc_share_series(store, Selection(version="v1"))
        both = gc_share_series(store, Selection())
    assert sorted(got) == [("api", "v1", "pod-0")]
    assert [round(v, 6) for _, v in got[("api", "v1", "pod-0")]] == [0.1, 0.1]
    assert sorted(both) == [("api", "v1", "pod-0"), ("db", "v1", "pod-0")]
