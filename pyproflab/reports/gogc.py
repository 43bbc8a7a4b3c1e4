"""Renderings of ``analyses.gogc.GogcResult``: text, JSON, CSV, HTML and a figure.

Renderers of the one interface (``pyproflab.display``; ``registry`` names
them per format). Rules: text starts with what was observed (GOMAXPROCS, CPU-bound or not,
each observed setting with its cycles, runs and measured figures), where
each input came from, and the container's limits; then one row per setting
(``*`` current, ``o`` observed, ``>`` recommended, before either when the
recommendation is a setting already running) with each prediction as
``point [low–high]``; then the recommendation (with the GOMEMLIMIT it needs;
"keep it" when it is the current setting),
the canary plan, the findings and the notes. JSON holds the same; CSV is the
table. Heaps in MiB, CPU in cores, shares in percent. HTML escapes every
string. Figures: the observed samples per setting against the fit, and the
trade-off with the intervals as error bars.
"""

from __future__ import annotations

import html
import math
from typing import Any

from pyproflab.reports.formatting import csv_cell, json_text, plotly_text, text_name

MiB = float(1 << 20)


def _mib(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return "unbounded" if math.isinf(v) else f"{v / MiB:.0f}"


def _pct(v: Any) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, float) and math.isfinite(v) else ""


def _num(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) and math.isfinite(v) else ""


def _per_min(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, float) and math.isfinite(v) else ""


def _iv(r: dict[str, Any], key: str, fmt) -> str:
    return f"{fmt(r[key])} [{fmt(r[key + '_lo'])}–{fmt(r[key + '_hi'])}]"


def _label(g: Any, lim: Any) -> str:
    out = f"GOGC={'off' if g is None else f'{g:g}'}"
    return out + (f" with GOMEMLIMIT={_mib(lim)}MiB" if lim is not None else "")


HEAD = [
    "",
    "GOGC",
    "limit",
    "status",
    "heap goal MiB",
    "peak mem MiB",
    "GC/min",
    "GC share",
    "GC cores",
]


def _cells(r: dict[str, Any]) -> list[str]:
    # ">" beside "*" or "o": the recommendation is a setting already running
    seen = "*" if r["current"] else ("o" if r["observed"] else "")
    mark = (">" if r["recommended"] else "") + seen
    return [
        mark,
        r["gogc_label"],
        "off" if r["memory_limit_bytes"] is None else _mib(r["memory_limit_bytes"]) + "MiB",
        r["status"],
        _iv(r, "goal", _mib),
        _iv(r, "peak_memory", _mib),
        _iv(r, "cycles_per_min", _per_min),
        _iv(r, "gc_share", _pct),
        _iv(r, "gc_cores", _num),
    ]


def _grid(head: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(head)] + [line(r) for r in rows]


def observed_lines(result) -> list[str]:
    """What was observed: the process, each setting's figures, and the inputs' sources."""
    obs, m = result.observation, result.model
    bound = "CPU-bound (saturated)" if m.fit.params.saturated else "not CPU-bound"
    cur = obs.current
    lines = [
        f"Observed: GOMAXPROCS {obs.procs:g}, {bound}; current {_label(*cur)}",
        "Observed settings (the model is fitted on all of them):",
    ]
    for sf in m.fit.observed:
        f = sf.figures
        lines.append(
            f"  {_label(*sf.setting)}: {sf.cycles} cycles, {sf.runs} run(s); goal "
            f"{_mib(f['goal'])} MiB, marked {_mib(f['marked'])} MiB, {f['cycles_per_min']:.1f} "
            f"GC/min, GC {f['gc_cores']:.2f} cores"
        )
    lines.append("Inputs from:")
    lines += [f"  {k}: {v}" for k, v in sorted(obs.provenance.items())]
    return lines


def recommendation_line(result) -> str:
    rec = result.recommendation
    if rec is None:
        return "No recommendation."
    how = f" ({result.budget_source})" if result.budget_source else ""
    keep = " (the current setting: keep it)" if rec["current"] else ""
    return (
        f"Recommendation: {_label(rec['gogc'], rec['memory_limit_bytes'])}{keep}: GC share "
        f"{_iv(rec, 'gc_share', _pct)}, peak memory {_iv(rec, 'peak_memory', _mib)} MiB "
        f"(chosen on the upper bound; usable budget {_mib(result.usable_bytes)} MiB{how})"
    )


def _duration(minutes: float) -> str:
    """Seconds under a minute (30 cycles at 700 a minute read 'about 0 min')."""
    if minutes < 1:
        return f"{max(1, round(60 * minutes))} s"
    return f"{minutes:.0f} min"


def canary_line(result) -> str | None:
    c = result.canary
    if c is None:
        return None
    when = f", about {_duration(c['minutes'])}" if math.isfinite(c["minutes"]) else ""
    widths = "; ".join(
        f"{k.replace('_', ' ')} ±{50 * c['width_now'][k]:.0f}% -> ±{50 * c['width_after'][k]:.0f}%"
        for k in ("gc_share", "peak_memory", "cycles_per_min")
        if math.isfinite(c["width_now"][k])
    )
    return (
        f"Canary ({c['why']}): run {_label(*c['setting'])} on one instance (or one window) "
        f"for {c['cycles']} GC cycles{when}, then run gogc again with its cycles stored: it "
        f"refits on every setting seen, the canary's too. Intervals at that setting: {widths}"
    )


def render_text(result) -> str:
    lines = ["GOGC / GOMEMLIMIT advice (intervals [low–high])", *observed_lines(result), ""]
    lines += _grid(HEAD, [_cells(r) for r in result.rows()], {0, 1, 2, 3})
    lines += ["  (* current, o observed, > recommended: >* keeps the current setting)", ""]
    lines.append(recommendation_line(result))
    if (c := canary_line(result)) is not None:
        lines.append(c)
    if result.findings:
        lines += ["", "Container:"] + [f"  - {text_name(x)}" for x in result.findings]
    if result.notes:
        lines += ["", "Notes:"] + [f"  - {text_name(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


# The observed settings' figures the JSON document gives.
FIGURES = ("goal", "marked", "cycles_per_min", "gc_cores", "process_cores")


def render_json(result) -> str:
    obs, fit = result.observation, result.model.fit
    doc = {
        "observed": {
            "gomaxprocs": obs.procs,
            "saturated": fit.params.saturated,
            "current": {"gogc": obs.current[0], "memory_limit_bytes": obs.current[1]},
            "settings": [
                {
                    "gogc": sf.setting[0],
                    "memory_limit_bytes": sf.setting[1],
                    "cycles": sf.cycles,
                    "runs": sf.runs,
                    "figures": {k: sf.figures[k] for k in FIGURES},
                }
                for sf in fit.observed
            ],
            "source": obs.source,
            "provenance": obs.provenance,
        },
        "terms": {
            t.name: {
                "point": t.point,
                "lo": t.lo,
                "hi": t.hi,
                "identified": t.identified,
                "how": t.how,
            }
            for t in fit.terms.values()
        },
        "budget_bytes": result.budget_bytes,
        "budget_source": result.budget_source,
        "usable_bytes": result.usable_bytes,
        "recommendation": result.recommendation,
        "canary": result.canary,
        "predictions": result.rows(),
        "findings": result.findings,
        "notes": result.notes,
    }
    return json_text(doc)


def render_csv(result) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = result.table.column_names
    w.writerow(cols)
    for r in result.rows():
        w.writerow([csv_cell(r[c]) for c in cols])
    return buf.getvalue()


def render_gogc_html(result) -> str:
    """The result as an HTML ``div`` (every string escaped)."""
    esc = html.escape
    parts = [
        '<div class="pyproflab-gogc">',
        "<pre>" + esc("\n".join(observed_lines(result))) + "</pre>",
        "<table><thead><tr>",
        *[f"<th>{esc(h)}</th>" for h in HEAD],
        "</tr></thead><tbody>",
    ]
    for r in result.rows():
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _cells(r)) + "</tr>")
    parts += ["</tbody></table>", f"<p>{esc(recommendation_line(result))}</p>"]
    if (c := canary_line(result)) is not None:
        parts.append(f"<p>{esc(c)}</p>")
    extra = [*result.findings, *result.notes]
    if extra:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in extra) + "</ul>")
    return "".join(parts) + "</div>"


def gogc_figure(result):
    """Two panels: left, each observed sample's marked heap and goal per
    setting beside the fit at that setting; right, predicted GC CPU share
    against peak memory per candidate with the intervals as error bars (the
    recommendation starred, the usable budget dashed)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("Observed vs fit", "Predicted trade-off"))
    _observed_panel(fig, result)
    _tradeoff_panel(fig, result)
    rec = result.recommendation
    if rec is not None:
        fig.add_scatter(
            x=[rec["peak_memory"] / MiB],
            y=[100 * rec["gc_share"]],
            mode="markers",
            marker={"symbol": "star", "size": 16},
            name="recommended",
            row=1,
            col=2,
        )
    if result.usable_bytes is not None:
        fig.add_vline(x=result.usable_bytes / MiB, line_dash="dash", row=1, col=2)
    fig.update_xaxes(title_text="sample (by setting)", row=1, col=1)
    fig.update_yaxes(title_text="MiB", row=1, col=1)
    fig.update_xaxes(title_text="peak memory (MiB)", row=1, col=2)
    fig.update_yaxes(title_text="GC CPU share (%)", row=1, col=2)
    return fig


def _observed_panel(fig, result) -> None:
    """Left: each observed sample's marked heap and goal (MiB), setting after
    setting, and the fitted ones at each observed setting as dotted lines."""
    x0 = 0
    rows = {(r["gogc"], r["memory_limit_bytes"]): r for r in result.rows()}
    for setting, ss in result.observation.settings.items():
        label = plotly_text(_label(*setting))
        xs = list(range(x0, x0 + len(ss)))
        for key, name in (("marked", "marked heap"), ("goal", "heap goal")):
            fig.add_scatter(
                x=xs,
                y=[s[key] / MiB for s in ss],
                mode="markers",
                name=f"{label}: {name}",
                row=1,
                col=1,
            )
        fitted = rows.get(setting)
        if fitted is not None:
            for key in ("marked", "goal"):
                fig.add_scatter(
                    x=[xs[0], xs[-1]],
                    y=[fitted[key] / MiB] * 2,
                    mode="lines",
                    line={"dash": "dot"},
                    name=f"{label}: fitted {key}",
                    row=1,
                    col=1,
                )
        x0 += len(ss) + 1


def _tradeoff_panel(fig, result) -> None:
    """Right: one series per memory limit, GC CPU share (%) against peak memory
    (MiB) per GOGC, intervals as asymmetric error bars; unbounded ones left out."""
    rows = result.rows()
    for lim in dict.fromkeys(r["memory_limit_bytes"] for r in rows):
        rs = [r for r in rows if r["memory_limit_bytes"] == lim and math.isfinite(r["peak_memory"])]
        if not rs:
            continue
        fig.add_scatter(
            x=[r["peak_memory"] / MiB for r in rs],
            y=[100 * r["gc_share"] for r in rs],
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [(r["peak_memory_hi"] - r["peak_memory"]) / MiB for r in rs],
                "arrayminus": [(r["peak_memory"] - r["peak_memory_lo"]) / MiB for r in rs],
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [100 * (r["gc_share_hi"] - r["gc_share"]) for r in rs],
                "arrayminus": [100 * (r["gc_share"] - r["gc_share_lo"]) for r in rs],
            },
            text=[plotly_text(r["gogc_label"]) for r in rs],
            mode="markers+text",
            textposition="top center",
            name=f"limit {'off' if lim is None else _mib(lim) + 'MiB'}",
            row=1,
            col=2,
        )
