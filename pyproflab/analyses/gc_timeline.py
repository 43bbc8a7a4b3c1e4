"""GC share over time per instance: the runtime view between consecutive scrapes.

Rules: a point is GC CPU over busy CPU (the increases of the ``go_cpu_classes``
counters between two scrapes, as ``gc_windows`` computes ``gc_cpu_fraction_busy``
over a window), placed mid-way between the scrapes; a step with a counter
reset is skipped. The instances are the selected profiles' (service and
instance: another service's instance of the same name is not one of them).
Of several label series of one metric, the fullest is used
(ties: the largest labels). A profile sits on the time axis at the middle of
its collection window, else at its time (``profile_time``).
``reports.gc_timeline`` draws both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyproflab.analyses.gc_windows import M_CPU_GC, M_CPU_IDLE, M_CPU_TOTAL
from pyproflab.store import queries
from pyproflab.store.select import Selection

Series = dict[tuple, list[tuple[datetime, float]]]


def _series(rows: list[dict[str, Any]]) -> Series:
    """(instance, metric) -> [(time, value)] of its fullest label series."""
    by: dict[tuple, dict[str, list]] = {}
    for r in rows:
        key = (r["service"], r["version"], r["instance"], r["metric"])
        by.setdefault(key, {}).setdefault(r["labels"], []).append((r["time"], r["value"]))
    out = {}
    for key, series in by.items():
        best = max(series.items(), key=lambda kv: (len(kv[1]), kv[0]))[1]
        out[key] = sorted(best)
    return out


def gc_share_series(store, sel: Selection) -> Series:
    """(service, version, instance) -> [(time, GC CPU / busy CPU)] between
    consecutive scrapes of the selection's instances (module rules)."""
    if "metric_samples" not in queries.table_names(store):
        return {}
    prof = store.profiles(sel).select(["service", "instance"]).to_pylist()
    who = {(r["service"], r["instance"]) for r in prof if r["instance"] is not None}
    if not who:
        return {}
    service = sel.service if isinstance(sel.service, str) else None
    rows = queries.instance_metric_samples(
        store, [M_CPU_GC, M_CPU_TOTAL, M_CPU_IDLE], sorted({i for _, i in who}), service
    ).to_pylist()
    # By name alone, another service's pod-0 came too: a row is a selected
    # instance's as the GC join matches them (a service when both name one).
    series = _series([r for r in rows if _selected(r["service"], r["instance"], who)])
    out: Series = {}
    for (svc, ver, ins, metric), pts in series.items():
        if metric != M_CPU_GC:
            continue
        total = dict(series.get((svc, ver, ins, M_CPU_TOTAL), []))
        idle = dict(series.get((svc, ver, ins, M_CPU_IDLE), []))
        line = []
        for (t0, g0), (t1, g1) in zip(pts, pts[1:], strict=False):
            if not all(t in total and t in idle for t in (t0, t1)):
                continue
            dg, dt, di = g1 - g0, total[t1] - total[t0], idle[t1] - idle[t0]
            if dg < 0 or dt <= 0 or di < 0 or dt - di <= 0:
                continue
            line.append((t0 + (t1 - t0) / 2, dg / (dt - di)))
        if line:
            out[(svc, ver, ins)] = line
    return out


def _selected(service: str | None, instance: str, who: set[tuple]) -> bool:
    if service is None:
        return True
    return (service, instance) in who or (None, instance) in who


def profile_time(r: dict[str, Any]) -> datetime | None:
    """Where a profile sits on a time axis: the middle of its collection window,
    else the time it was taken (files carry no window), else nowhere."""
    if r.get("window_start") is not None and r.get("window_end") is not None:
        return r["window_start"] + (r["window_end"] - r["window_start"]) / 2
    return r.get("time")
