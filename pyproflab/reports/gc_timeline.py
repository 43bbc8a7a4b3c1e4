"""The report's GC share over time: per instance, the runtime view between
consecutive scrapes as a line and the profile views of its profiles as markers,
one colour per instance.

Rules: a point of the line is GC CPU over busy CPU (the increases of the
``go_cpu_classes`` counters between two scrapes, as ``analyses.gc`` computes
``gc_cpu_fraction_busy`` over a window), placed mid-way between the scrapes;
a step with a counter reset is skipped. A profile's markers sit at the middle
of its collection window, else at its time. Instance names reach plotly only
through ``flame.plotly_text``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyproflab.reports.flame import plotly_text
from pyproflab.store import queries
from pyproflab.store.select import Selection

_CPU_GC = "go_cpu_classes_gc_total_cpu_seconds_total"
_CPU_TOTAL = "go_cpu_classes_total_cpu_seconds_total"
_CPU_IDLE = "go_cpu_classes_idle_cpu_seconds_total"


def _series(rows: list[dict[str, Any]]) -> dict[tuple, list[tuple[datetime, float]]]:
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


def gc_share_points(store, sel: Selection) -> dict[tuple, list[tuple[datetime, float]]]:
    """Runtime view between consecutive scrapes, per (service, version, instance):
    GC CPU / busy CPU (the increase of the go_cpu_classes counters, as ``gc`` computes
    ``gc_cpu_fraction_busy`` over a window). Steps with a counter reset are skipped."""
    if "metric_samples" not in queries.table_names(store):
        return {}
    inst = store.profiles(sel).select(["instance"]).column(0).to_pylist()
    inst = sorted({i for i in inst if i is not None})
    if not inst:
        return {}
    service = sel.service if isinstance(sel.service, str) else None
    rows = queries.instance_metric_samples(
        store, [_CPU_GC, _CPU_TOTAL, _CPU_IDLE], inst, service
    ).to_pylist()
    series = _series(rows)
    out: dict[tuple, list[tuple[datetime, float]]] = {}
    for (svc, ver, ins, metric), pts in series.items():
        if metric != _CPU_GC:
            continue
        total = dict(series.get((svc, ver, ins, _CPU_TOTAL), []))
        idle = dict(series.get((svc, ver, ins, _CPU_IDLE), []))
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


# One colour per instance, shared by its runtime line and its profile markers.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


def _profile_time(r: dict[str, Any]) -> datetime | None:
    """Where a profile sits on a time axis: the middle of its collection window,
    else the time it was taken (files carry no window), else nowhere."""
    if r.get("window_start") is not None and r.get("window_end") is not None:
        return r["window_start"] + (r["window_end"] - r["window_start"]) / 2
    return r.get("time")


def gc_share_figure(runtime: dict[tuple, list], marks: list[dict[str, Any]]):
    """The GC share chart: a line per instance (runtime view) and that instance's
    profile markers in the same colour."""
    import plotly.graph_objects as go

    def label(inst: Any) -> str:
        return "(no instance)" if inst is None else str(inst)

    instances = sorted({k[2] for k in runtime} | {r["instance"] for r in marks}, key=label)
    colour = {inst: _PALETTE[i % len(_PALETTE)] for i, inst in enumerate(instances)}
    fig = go.Figure()
    for key in sorted(runtime, key=lambda k: tuple(map(str, k))):
        pts, inst = runtime[key], key[2]
        name = plotly_text(f"{label(inst)} runtime")
        fig.add_trace(
            go.Scatter(
                x=[t for t, _ in pts],
                y=[100 * v for _, v in pts],
                mode="lines+markers",
                line={"color": colour[inst]},
                marker={"color": colour[inst]},
                name=name,
                legendgroup=plotly_text(label(inst)),
                hovertemplate="%{y:.1f}%<extra>" + name + "</extra>",
            )
        )
    for inst in instances:
        rs = [(t, r) for r in marks if r["instance"] == inst if (t := _profile_time(r))]
        for col, what, symbol in (
            ("profile_gc_share", "profile view", "diamond"),
            ("profile_gc_mark_share", "profile mark", "circle-open"),
        ):
            if not rs:
                continue
            name = plotly_text(f"{label(inst)} {what}")
            fig.add_trace(
                go.Scatter(
                    x=[t for t, _ in rs],
                    y=[100 * (r[col] or 0) for _, r in rs],
                    mode="markers",
                    marker={"symbol": symbol, "size": 12, "color": colour[inst]},
                    name=name,
                    legendgroup=plotly_text(label(inst)),
                    hovertemplate="%{y:.1f}%<extra>" + name + "</extra>",
                )
            )
    return fig
