"""The report's GC share over time: per instance, the runtime view
(``analyses.gc_timeline.gc_share_series``) as a line and the profile views of
its profiles as markers, one colour per instance. Instance names reach plotly
only through ``formatting.plotly_text``.
"""

from __future__ import annotations

from typing import Any

from pyproflab.reports.formatting import plotly_text

# The trace's name is looked up by plotly, never spliced into the template: an
# instance named "i-%{y}" would be read as a template variable.
_HOVER = "%{y:.1f}%<extra>%{fullData.name}</extra>"

# One colour per instance, shared by its runtime line and its profile markers.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


def gc_share_figure(runtime: dict[tuple, list], marks: list[dict[str, Any]]):
    """The GC share chart: a line per instance (runtime view) and that instance's
    profile markers (``marks``: the ``gc`` profile rows, each with its place on
    the time axis as ``at``, None for none) in the same colour."""
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
                hovertemplate=_HOVER,
            )
        )
    for inst in instances:
        rs = [(r["at"], r) for r in marks if r["instance"] == inst and r["at"]]
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
                    hovertemplate=_HOVER,
                )
            )
    return fig
