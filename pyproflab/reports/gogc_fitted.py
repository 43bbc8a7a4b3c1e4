"""Renderings of ``gogc_model.FittedAdvice``: text, JSON, CSV, HTML, a figure.

Rules: text starts with where each input came from and over how many
cycles, then one row per setting (``*`` current, ``>`` recommended) with each
prediction as ``point [low–high]``, then the recommendation (with the
GOMEMLIMIT it needs) and the notes. JSON holds the same; CSV is the table.
Heaps in MiB, CPU in cores, shares in percent. HTML escapes every string.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from pyproflab.reports.formatting import plotly_text

MiB = float(1 << 20)


def _mib(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return "unbounded" if math.isinf(v) else f"{v / MiB:.0f}"


def _iv(r: dict[str, Any], key: str, fmt) -> str:
    return f"{fmt(r[key])} [{fmt(r[key + '_lo'])}–{fmt(r[key + '_hi'])}]"


def _pct(v: Any) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, float) and math.isfinite(v) else ""


def _num(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) and math.isfinite(v) else ""


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
    mark = ">" if r["recommended"] else ("*" if r["current"] else "")
    return [
        mark,
        r["gogc_label"],
        "off" if r["memory_limit_bytes"] is None else _mib(r["memory_limit_bytes"]) + "MiB",
        r["status"],
        _iv(r, "goal", _mib),
        _iv(r, "peak_memory", _mib),
        _iv(r, "cycles_per_min", lambda v: f"{v:.1f}" if math.isfinite(v) else ""),
        _iv(r, "gc_share", _pct),
        _iv(r, "gc_cores", _num),
    ]


def source_lines(advice) -> list[str]:
    obs = advice.observation
    bound = "CPU-bound (saturated)" if obs.saturated else "not CPU-bound"
    lines = [
        f"Observed: GOGC={'off' if obs.gogc is None else f'{obs.gogc:g}'}, limit "
        f"{'off' if obs.memory_limit is None else _mib(obs.memory_limit) + 'MiB'}, "
        f"GOMAXPROCS {obs.procs:g}, {bound}",
        "Inputs from:",
    ]
    lines += [f"  {k}: {v}" for k, v in sorted(obs.provenance.items())]
    return lines


def recommendation_line(advice) -> str:
    rec = advice.recommendation
    if rec is None:
        return "No recommendation."
    lim = rec["memory_limit_bytes"]
    with_lim = f" with GOMEMLIMIT={_mib(lim)}MiB" if lim is not None else " (no memory limit)"
    return (
        f"Recommendation: GOGC={rec['gogc_label']}{with_lim}: GC share "
        f"{_iv(rec, 'gc_share', _pct)}, peak memory {_iv(rec, 'peak_memory', _mib)} MiB "
        f"(chosen on the upper bound; usable budget {_mib(advice.usable_bytes)} MiB)"
    )


def render_text(advice) -> str:
    from pyproflab.reports.gogc import _grid

    lines = [
        "GOGC / GOMEMLIMIT advice (fitted model; intervals [low–high])",
        *source_lines(advice),
        "",
    ]
    lines += _grid(HEAD, [_cells(r) for r in advice.rows()], {0, 1, 2, 3})
    lines += ["  (* current, > recommended)", "", recommendation_line(advice)]
    if advice.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in advice.notes]
    return "\n".join(lines) + "\n"


def _plain(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def render_json(advice) -> str:
    obs = advice.observation
    doc = {
        "model": "fitted",
        "observed": {
            "gogc": obs.gogc,
            "memory_limit_bytes": obs.memory_limit,
            "gomaxprocs": obs.procs,
            "saturated": obs.saturated,
            "cycles": obs.cycles,
            "instances": obs.instances,
            "source": obs.source,
            "provenance": obs.provenance,
        },
        "budget_bytes": _plain(advice.budget_bytes),
        "usable_bytes": _plain(advice.usable_bytes),
        "recommendation": (
            {k: _plain(v) for k, v in advice.recommendation.items()}
            if advice.recommendation
            else None
        ),
        "predictions": [{k: _plain(v) for k, v in r.items()} for r in advice.rows()],
        "notes": advice.notes,
    }
    return json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n"


def render_csv(advice) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = advice.table.column_names
    w.writerow(cols)
    for r in advice.rows():
        w.writerow(["" if (v := _plain(r[c])) is None else v for c in cols])
    return buf.getvalue()


def render_html_div(advice) -> str:
    esc = html.escape
    parts = [
        '<div class="pyproflab-gogc">',
        "<pre>" + esc("\n".join(source_lines(advice))) + "</pre>",
        "<table><thead><tr>",
        *[f"<th>{esc(h)}</th>" for h in HEAD],
        "</tr></thead><tbody>",
    ]
    for r in advice.rows():
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _cells(r)) + "</tr>")
    parts += ["</tbody></table>", f"<p>{esc(recommendation_line(advice))}</p>"]
    if advice.notes:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in advice.notes) + "</ul>")
    return "".join(parts) + "</div>"


def fitted_figure(advice):
    """Two panels: left, each observed cycle's marked heap and goal beside the
    model's fit at the observed setting; right, predicted GC CPU share against
    peak memory per candidate with the intervals as error bars (the
    recommendation starred, the usable budget dashed)."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("Observed cycles vs fit", "Predicted trade-off")
    )
    _observed_panel(fig, advice)
    _tradeoff_panel(fig, advice)
    rec = advice.recommendation
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
    if advice.usable_bytes is not None:
        fig.add_vline(x=advice.usable_bytes / MiB, line_dash="dash", row=1, col=2)
    fig.update_xaxes(title_text="cycle", row=1, col=1)
    fig.update_yaxes(title_text="MiB", row=1, col=1)
    fig.update_xaxes(title_text="peak memory (MiB)", row=1, col=2)
    fig.update_yaxes(title_text="GC CPU share (%)", row=1, col=2)
    return fig


def _observed_panel(fig, advice) -> None:
    """Left panel: each observed cycle's marked heap and goal (MiB), and the fitted
    ones at the observed setting as dotted lines across the cycles."""
    obs = advice.observation
    xs = list(range(len(obs.samples)))
    for key, name in (("marked", "marked heap"), ("goal", "heap goal")):
        fig.add_scatter(
            x=xs,
            y=[s[key] / MiB for s in obs.samples],
            mode="markers",
            name=f"observed {name}",
            row=1,
            col=1,
        )
    cur = next((r for r in advice.rows() if r["current"]), None)
    if cur is not None:
        for key, name in (("marked", "fitted marked heap"), ("goal", "fitted goal")):
            fig.add_scatter(
                x=[0, max(xs[-1], 1)],
                y=[cur[key] / MiB] * 2,
                mode="lines",
                name=name,
                line={"dash": "dot"},
                row=1,
                col=1,
            )


def _tradeoff_panel(fig, advice) -> None:
    """Right panel: one series per memory limit, GC CPU share (%) against peak
    memory (MiB) per candidate GOGC, intervals as asymmetric error bars;
    candidates with unbounded peak memory (no GC) are left out."""
    for lim in dict.fromkeys(r["memory_limit_bytes"] for r in advice.rows()):
        rows = [
            r
            for r in advice.rows()
            if r["memory_limit_bytes"] == lim and math.isfinite(r["peak_memory"])
        ]
        if not rows:
            continue
        fig.add_scatter(
            x=[r["peak_memory"] / MiB for r in rows],
            y=[100 * r["gc_share"] for r in rows],
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [(r["peak_memory_hi"] - r["peak_memory"]) / MiB for r in rows],
                "arrayminus": [(r["peak_memory"] - r["peak_memory_lo"]) / MiB for r in rows],
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [100 * (r["gc_share_hi"] - r["gc_share"]) for r in rows],
                "arrayminus": [100 * (r["gc_share"] - r["gc_share_lo"]) for r in rows],
            },
            text=[plotly_text(r["gogc_label"]) for r in rows],
            mode="markers+text",
            textposition="top center",
            name=f"limit {'off' if lim is None else _mib(lim) + 'MiB'}",
            row=1,
            col=2,
        )
