"""The report's execution-trace section: what blocked, what waited for a CPU,
what stopped the world, from the selected instances' stored traces.

Rules: it runs the ``sched`` and ``stw`` trace answers over the selected
traces (the selection's service, version, instance and time apply); its
first lines are their findings, one line each: CPU starvation per starved
instance (scheduler latency, throttled periods when stored), and none for
the others; then the STW and GC line per trace, the scheduler latency over
time (p99 per window and instance) and the longest waits. A store without
any trace has no such section; a selection without traces skips it with a note.
"""

from __future__ import annotations

from markupsafe import Markup

from pyproflab.analyses.gotrace import SchedOptions
from pyproflab.analyses.gotrace_answers import answer
from pyproflab.analyses.gotrace_stw import StwOptions
from pyproflab.reports.report_sections import Section, _cmd, _flags
from pyproflab.store.select import Selection
from pyproflab.store.traces import select_traces


def _trace_selection(sel: Selection) -> Selection:
    """The selection without what only names profiles (type, ids)."""
    return Selection(
        service=sel.service,
        version=sel.version,
        instance=sel.instance,
        since=sel.since,
        until=sel.until,
        labels=sel.labels,
    )


def traces_section(store, sel: Selection, db: str) -> Section:
    s = Section(
        "traces",
        "Execution traces: scheduler latency and stop-the-world pauses",
        [
            _cmd("trace", "sched", *_flags(sel, db), "--format", "json"),
            _cmd("trace", "stw", *_flags(sel, db), "--format", "json"),
        ],
    )
    tsel = _trace_selection(sel)
    if not select_traces(store, tsel).num_rows:
        return s.skip("no execution traces stored for this selection (pyproflab ingest TRACE)")
    sched = answer("sched", store=store, selection=tsel, options=SchedOptions(window_s=1.0))
    stw = answer("stw", store=store, selection=tsel, options=StwOptions(window_s=1.0))
    s.ctx["findings"] = sched.findings or [
        "no CPU starvation: every trace's p99 scheduler "
        f"latency is under {sched.options.starved_p99_ms:g} ms"
    ]
    s.ctx["stw"] = stw.findings
    s.ctx["longest"] = Markup(_longest_html(sched.longest.to_pylist()))
    s.figures.append(("sched-p99", _p99_figure(sched.windows.to_pylist())))
    return s


def has_traces(store) -> bool:
    """Whether the store holds any execution trace (else the report leaves the section out)."""
    from pyproflab.store import queries

    return "traces" in queries.table_names(store) and bool(select_traces(store).num_rows)


def _p99_figure(windows: list[dict]):
    import plotly.graph_objects as go

    fig = go.Figure()
    for inst in sorted({w["instance"] or "" for w in windows}):
        mine = [w for w in windows if (w["instance"] or "") == inst]
        fig.add_trace(
            go.Scatter(
                x=[w["window_start"] for w in mine],
                y=[w["p99_ns"] / 1e6 for w in mine],
                mode="lines+markers",
                name=inst,
            )
        )
    fig.update_layout(
        title="Scheduler latency p99 per window",
        yaxis_title="ms",
        xaxis_title="time (UTC)",
        height=360,
    )
    return fig


def _longest_html(rows: list[dict]) -> str:
    from markupsafe import escape

    head = "<tr><th>instance</th><th>g</th><th>goroutine</th><th>waited</th><th>stack</th></tr>"
    body = "".join(
        f"<tr><td>{escape(r['instance'] or '')}</td><td>{r['g']}</td><td>{escape(r['name'])}</td>"
        f"<td>{r['wait_ns'] / 1e6:.2f} ms</td><td><code>{escape(r['stack'])}</code></td></tr>"
        for r in rows
    )
    return f"<table class='data'>{head}{body}</table>"
