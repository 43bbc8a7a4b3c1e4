"""Renderings of ``GogcResult``: text, JSON, CSV, HTML and a plotly figure.

Rules: text shows the inputs, one row per setting (``*`` current, ``>``
recommended), the recommendation with its memory cost, then the notes. JSON
has the inputs, the budget, the current and recommended rows and every
prediction (infinite or undefined numbers as null, with ``status`` saying
why). CSV is the predictions table. Heaps print in MiB, or as multiples of
the current marked heap ``H`` when its size is unknown; CPU in cores, or as
multiples of the current process CPU ``P``. HTML and the figure escape every
user-given string (plotly renders HTML in its text).
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from pyproflab.reports.formatting import plotly_text

MiB = float(1 << 20)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _heap(v: Any, known: bool) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and math.isinf(v):
        return "unbounded"
    return f"{v / MiB:.1f}MiB" if known else f"{v:.2f}H"


def _cpu(v: Any, known: bool) -> str:
    if not _finite(v):
        return ""
    return f"{v:.3f}" if known else f"{v:.3f}P"


def _pct(v: Any) -> str:
    return f"{100 * v:.1f}%" if _finite(v) else ""


def _x(v: Any) -> str:
    return f"{v:.2f}x" if _finite(v) else ""


def _num(v: Any, digits: int = 2) -> str:
    return f"{v:.{digits}f}" if _finite(v) else ""


def _limit(v: Any, known: bool) -> str:
    return "off" if v is None else _heap(v, known)


def _grid(head: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    from pyproflab.reports.formatting import grid

    return grid(head, rows, "".join("l" if i in left else "r" for i in range(len(head))))


HEAD = [
    "",
    "GOGC",
    "limit",
    "by",
    "marked",
    "heap goal",
    "peak mem",
    "heap x",
    "GC/min",
    "GC cores",
    "GC share",
    "GC x",
    "fits",
    "status",
]


def _row_cells(r: dict[str, Any], hk: bool, ck: bool) -> list[str]:
    mark = ">" if r["recommended"] else ("*" if r["current"] else "")
    fits = "" if r["within_budget"] is None else ("yes" if r["within_budget"] else "no")
    return [
        mark,
        r["gogc_label"],
        _limit(r["memory_limit_bytes"], hk),
        r["governed_by"],
        _heap(r["live_heap_bytes"], hk),
        _heap(r["heap_goal_bytes"], hk),
        _heap(r["peak_memory_bytes"], hk),
        _x(r["heap_ratio"]),
        _num(r["gc_cycles_per_min"]),
        _cpu(r["gc_cpu_cores"], ck),
        _pct(r["gc_cpu_share"]),
        _x(r["gc_cpu_ratio"]),
        fits,
        r["status"],
    ]


def input_lines(result) -> list[str]:
    i = result.inputs
    hk, ck = i.heap_known, i.cpu_known
    rate = f"{i.alloc_bytes_per_sec / MiB:.1f}MiB/s" if hk else f"{i.alloc_bytes_per_sec:.3g}H/s"
    per_byte = i.gc_cpu_seconds_per_byte * (MiB if hk else 1.0)
    unit = "MiB" if hk else "H"
    cpu_unit = "core-s" if ck else "P·s"
    from pyproflab.analyses.gogc import true_live

    return [
        f"inputs ({i.source}): marked heap {_heap(i.live_heap_bytes, hk)} "
        f"(truly live {_heap(true_live(i), hk)}), roots {_heap(i.roots_bytes, hk)}, "
        f"allocation {rate}",
        f"  GC cost per cycle {i.gc_cpu_fixed_seconds:.4g} {cpu_unit} + {per_byte:.4g} "
        f"{cpu_unit}/{unit} of scan work; non-GC CPU {_cpu(i.non_gc_cpu_cores, ck)}",
        f"  current GOGC {'off' if i.gogc is None else f'{i.gogc:g}'}, memory limit "
        f"{_limit(i.memory_limit_bytes, hk)}; mark-time allocation ratio "
        f"{i.mark_alloc_ratio:.3g}",
    ]


def recommendation_line(result) -> str:
    rec = result.recommendation
    if rec is None:
        return "No recommendation."
    hk, ck = result.inputs.heap_known, result.inputs.cpu_known
    cur = result.current
    cost = rec["memory_cost_bytes"]
    sign = "+" if cost >= 0 else "-"
    limit = rec["memory_limit_bytes"]
    if limit is None and rec.get("paired_memory_limit_bytes") is not None:
        limit = rec["paired_memory_limit_bytes"]
    return (
        f"Recommendation: GOGC={rec['gogc_label']}, memory limit "
        f"{_limit(limit, hk)}: GC CPU {_pct(cur['gc_cpu_share'])} -> "
        f"{_pct(rec['gc_cpu_share'])} of process CPU (saves "
        f"{_cpu(rec['gc_cpu_saved_cores'], ck)} cores), peak memory "
        f"{_heap(cur['peak_memory_bytes'], hk)} -> {_heap(rec['peak_memory_bytes'], hk)} "
        f"({sign}{_heap(abs(cost), hk)}, {_x(rec['memory_cost_ratio'])} current)."
    )


def render_text(result) -> str:
    hk, ck = result.inputs.heap_known, result.inputs.cpu_known
    lines = [f"GOGC / GOMEMLIMIT trade-off (model: {result.model})", *input_lines(result)]
    if result.budget_bytes is not None:
        lines.append(
            f"  budget {result.budget_label}, usable after headroom "
            f"{_heap(result.budget_bytes, hk)}"
        )
    lines.append("")
    rows = [_row_cells(r, hk, ck) for r in result.predictions.to_pylist()]
    lines += _grid(HEAD, rows, {0, 3, 12, 13})
    lines += [
        "  (* current, > recommended; heap x and GC x against the current setting)",
        "",
        recommendation_line(result),
    ]
    if result.notes:
        lines += ["", "Notes:"] + [f"  - {n}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _record(d: dict[str, Any] | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {k: (_plain(v) if not isinstance(v, list) else v) for k, v in d.items()}


def render_json(result) -> str:
    doc = {
        "model": result.model,
        "inputs": _record(result.inputs_dict()),
        "budget": result.budget_label,
        "budget_usable_bytes": _plain(result.budget_bytes),
        "current": _record(result.current),
        "recommendation": _record(result.recommendation),
        "predictions": [_record(r) for r in result.predictions.to_pylist()],
        "notes": list(result.notes),
    }
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False, sort_keys=True) + "\n"


def render_csv(result) -> str:
    import csv
    import io

    t = result.predictions
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.column_names)
    for row in t.to_pylist():
        w.writerow(["" if (v := _plain(row[c])) is None else v for c in t.column_names])
    return buf.getvalue()


def render_gogc_html(result) -> str:
    """A ``<div>``: inputs, the table, the recommendation and notes (all escaped)."""
    esc = html.escape
    hk, ck = result.inputs.heap_known, result.inputs.cpu_known
    parts = [
        '<div class="pyproflab-gogc">',
        "<pre>" + esc("\n".join(input_lines(result))) + "</pre>",
        "<table><thead><tr>",
        *[f"<th>{esc(h)}</th>" for h in HEAD],
        "</tr></thead><tbody>",
    ]
    for r in result.predictions.to_pylist():
        parts.append(
            "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _row_cells(r, hk, ck)) + "</tr>"
        )
    parts.append("</tbody></table>")
    parts.append(f"<p>{esc(recommendation_line(result))}</p>")
    if result.notes:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in result.notes) + "</ul>")
    parts.append("</div>")
    return "".join(parts)


def gogc_figure(result):
    """Predicted GC CPU share against peak memory, one line per memory limit, with the
    current point, the recommendation and the budget. Unbounded settings are left out."""
    import plotly.graph_objects as go

    esc = plotly_text
    hk, ck = result.inputs.heap_known, result.inputs.cpu_known
    scale = MiB if hk else 1.0
    xunit = "MiB" if hk else "× current marked heap"
    rows = [
        r
        for r in result.predictions.to_pylist()
        if _finite(r["peak_memory_bytes"]) and _finite(r["gc_cpu_share"])
    ]
    fig = go.Figure()
    by_limit: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_limit.setdefault(r["memory_limit_bytes"], []).append(r)

    def hover(r: dict[str, Any]) -> str:
        return esc(
            f"GOGC={r['gogc_label']} limit={_limit(r['memory_limit_bytes'], hk)} "
            f"peak={_heap(r['peak_memory_bytes'], hk)} GC/min="
            f"{_num(r['gc_cycles_per_min'])} GC={_pct(r['gc_cpu_share'])} "
            f"({_cpu(r['gc_cpu_cores'], ck)} cores)"
        )

    for limit, rs in by_limit.items():
        rs = sorted(rs, key=lambda r: r["peak_memory_bytes"])
        fig.add_trace(
            go.Scatter(
                x=[r["peak_memory_bytes"] / scale for r in rs],
                y=[100 * r["gc_cpu_share"] for r in rs],
                mode="lines+markers+text",
                text=[esc(r["gogc_label"]) for r in rs],
                textposition="top center",
                hovertext=[hover(r) for r in rs],
                hoverinfo="text",
                name=esc(f"limit {_limit(limit, hk)}"),
            )
        )
    for key, symbol, name in (
        ("current", "star", "current"),
        ("recommended", "diamond", "recommended"),
    ):
        pts = [r for r in rows if r[key]]
        if pts:
            fig.add_trace(
                go.Scatter(
                    x=[r["peak_memory_bytes"] / scale for r in pts],
                    y=[100 * r["gc_cpu_share"] for r in pts],
                    mode="markers",
                    marker=dict(symbol=symbol, size=16, line=dict(width=1)),
                    hovertext=[hover(r) for r in pts],
                    hoverinfo="text",
                    name=name,
                )
            )
    if result.budget_bytes is not None and math.isfinite(result.budget_bytes):
        fig.add_vline(
            x=result.budget_bytes / scale,
            line_dash="dash",
            annotation_text=esc(f"budget {result.budget_label} (usable)"),
        )
    left_out = len(result.predictions) - len(rows)
    title = f"GC CPU vs peak memory ({esc(result.model)} model)"
    if left_out:
        title += f"; {left_out} unbounded setting(s) not drawn"
    fig.update_layout(
        title=title,
        xaxis_title=f"predicted peak memory ({xunit})",
        yaxis_title="predicted GC CPU (% of process CPU)",
    )
    return fig
