"""The sections of ``pyproflab report`` as the page shows them: one function per
section turns what ``workflows.report`` found into what its template shows
(``ctx``) and its figures. The rules they follow are ``html_report``'s.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from pyproflab.display import render
from pyproflab.reports.formatting import plotly_text

# Text for the offline page never points at Python: the rows a table cuts are
# behind the section's command.
_MORE = "the command below gives every row"

Figures = list[tuple[str, Any]]  # (name, plotly figure or FlameGraph)


def fleet(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    return found, []


def top(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    return {"table": _top_table(found["top"])}, []


def _top_table(result) -> Markup:
    """A top table, after the line naming the ``go tool pprof`` command it equals on
    the merged profiles (its rows and its "Dropped"/"Showing" lines are pprof's)."""
    from markupsafe import escape

    from pyproflab.reports.top import pprof_command

    said = Markup("<p>As <code>{}</code> on the merged profiles.</p>").format(
        escape(pprof_command(result))
    )
    return said + Markup(render(result, "html", more=_MORE))


def flame(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    return {}, list(found.get("graphs", []))


def regressions(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    from pyproflab.reports.regressions import figure_caption

    result = found["regressions"]
    figures = [("regressions-top", result.figure_top(n=15)), ("regressions-flame", found["flame"])]
    metric = result.rank_by if result.rank_by in ("flat", "cum") else "flat"
    ctx = {
        "base": found["base"],
        "new": found["new"],
        "caption": figure_caption(result, metric),
        "table": Markup(render(result, "html", top=15, more=_MORE)),
    }
    return ctx, figures


def gc(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    from pyproflab.reports.gc_timeline import gc_share_figure

    fig = gc_share_figure(found["runtime"], found["marks"])
    fig.update_layout(
        title="GC CPU share over time",
        yaxis_title="% of busy CPU",
        xaxis_title="time (UTC)",
        height=420,
    )
    return {"table": Markup(render(found["gc"], "html", python=False))}, [("gc-share", fig)]


def traces(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    import plotly.graph_objects as go
    from markupsafe import escape

    sched, stw = found["sched"], found["stw"]
    limit = sched.options.starved_p99_ms
    ctx = {
        "findings": sched.findings
        or [f"no CPU starvation: every trace's p99 scheduler latency is under {limit:g} ms"],
        "stw": stw.findings,
        "sync": _top_table(found["sync"]) if "sync" in found else "",
        "longest": Markup(
            "<table class='data'><tr><th>instance</th><th>g</th><th>goroutine</th>"
            "<th>waited</th><th>made runnable at</th></tr>"
            + "".join(
                f"<tr><td>{escape(r['instance'] or '')}</td><td>{r['g']}</td>"
                f"<td>{escape(r['name'])}</td><td>{r['wait_ns'] / 1e6:.2f} ms</td>"
                f"<td><code>{escape(r['stack'])}</code></td></tr>"
                for r in sched.longest.to_pylist()
            )
            + "</table>"
        ),
    }
    fig = go.Figure()
    windows = sched.windows.to_pylist()
    for inst in sorted({w["instance"] or "" for w in windows}):
        mine = [w for w in windows if (w["instance"] or "") == inst]
        fig.add_trace(
            go.Scatter(
                x=[w["window_start"] for w in mine],
                y=[w["p99_ns"] / 1e6 for w in mine],
                mode="lines+markers",
                name=plotly_text(inst),
            )
        )
    fig.update_layout(
        title="Scheduler latency p99 per window",
        yaxis_title="ms",
        xaxis_title="time (UTC)",
        height=360,
    )
    return ctx, [("sched-p99", fig)]


def gogc(found: dict[str, Any]) -> tuple[dict[str, Any], Figures]:
    from pyproflab.reports.gogc import recommendation_line

    result = found["gogc"]
    ctx = {
        "recommendation": recommendation_line(result),
        "table": Markup(render(result, "html")),
    }
    return ctx, [("gogc-curve", result.figure())]


def pgo(found: dict[str, Any], edges: int = 15) -> tuple[dict[str, Any], Figures]:
    import plotly.graph_objects as go

    result = found["pgo"]
    hot = result.edges.edges[:edges][::-1]  # plotly draws the first bar at the bottom
    names = [plotly_text(f"{e.caller} -> {e.callee} (+{e.offset})") for e in hot]
    fig = go.Figure(
        go.Bar(
            x=[e.share for e in hot],
            y=list(range(len(hot))),
            orientation="h",
            marker={"color": ["#d62728" if e.hot else "#7f7f7f" for e in hot]},
            hovertext=[
                f"{n}<br>weight {e.weight}, {e.share:.2f}%" for n, e in zip(names, hot, strict=True)
            ],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        title=f"Top {len(hot)} call edges by weight (red: inside the compiler's 99% hot cutoff)",
        xaxis_title="share of edge weight (%)",
        yaxis={"tickvals": list(range(len(hot))), "ticktext": names},
        height=max(300, 26 * len(hot) + 120),
        margin={"l": 420},
    )
    ctx = {
        "inputs": len(result.inputs),
        "edges": len(result.edges),
        "hot": len(result.edges.hot),
        "table": Markup(render(result, "html", edges=edges)),
    }
    return ctx, [("pgo-edges", fig)]
