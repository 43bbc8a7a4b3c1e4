"""Renderings of ``RegressionsResult``: text, JSON, CSV, HTML and plotly figures.

Rules: text shows the header facts, the top rows (rate change with its
interval, relative change, q-value and a ``*`` when significant) and the
notes. Every interval says which it is: each row's own at ``confidence``,
"unadjusted" (it may leave out 0 where q is above the FDR: no contradiction,
the q-value accounts for the other tests), and for the selected rows the FCR
interval at ``fcr_confidence``, which agrees with the selection. JSON has
every row with exact merged integers, the facts and notes (NaN as null);
CSV is the rows table. Every name that reaches HTML or a plotly label/hover
text is HTML-escaped: names come from untrusted profiles.
"""

from __future__ import annotations

import csv
import html
import io
import math
from datetime import UTC
from typing import Any

from pyproflab.analyses.units import label, quantity
from pyproflab.reports.formatting import csv_cell, grid, json_text, plotly_text, text_name


def _num(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:+.{digits}g}"


def _q(v: float | None, result) -> str:
    """A signed change in the result's unit (``+33.4 MiB/s``, ``+1.2 ms``)."""
    return quantity(v, result.rate_unit, signed=True)


def _pct(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v * 100:+.1f}%"


def facts(result) -> dict[str, Any]:
    """The header facts as a JSON-ready dict."""
    return {
        "sample_type": {"type": result.sample_type.type, "unit": result.sample_type.unit},
        "sample_index": result.sample_index,
        "granularity": result.granularity,
        "rate": result.rate,
        "rate_unit": result.rate_unit,
        "measure": result.measure,
        "base": {
            "selection": result.base_description,
            "profiles": result.n_base,
            "units": result.n_units_base,
            "duration_s": result.duration_base,
            "total": result.total_base,
        },
        "new": {
            "selection": result.new_description,
            "profiles": result.n_new,
            "units": result.n_units_new,
            "duration_s": result.duration_new,
            "total": result.total_new,
        },
        "statistics": result.statistics,
        "unit": result.unit,
        "fdr": result.fdr,
        "confidence": result.confidence,
        "fcr_confidence": result.fcr_confidence,
        "resamples": result.resamples,
        "test": result.test,
        "permutations": result.permutations,
        "seed": result.seed,
        "min_share": result.min_share,
        "rank_by": result.rank_by,
        "per": result.per,
        "notes": list(result.notes),
    }


def header_lines(result) -> list[str]:
    st = result.sample_type
    if result.measure == "share":
        what = f"{st.type} as share of the profiles' totals"
    else:
        what = f"{st.type} as {result.rate_unit}" + (
            " (rate per second of profile duration)" if result.rate else " (per-profile value)"
        )
    lines = [
        f"Type: {what}, {result.granularity}",
        f"Base: {result.base_description}: {result.n_base} profiles over "
        f"{result.duration_base:.1f}s, {label(result.total_base, st.unit)} of {st.type}",
        f"New:  {result.new_description}: {result.n_new} profiles over "
        f"{result.duration_new:.1f}s, {label(result.total_new, st.unit)} of {st.type}",
    ] + [f"Note: {n}" for n in result.notes]
    return [text_name(line) for line in lines]


def _metric(result, r: dict) -> str:
    """The metric a row is shown by: its evidence's, or ``rank_by``'s."""
    return r["evidence_metric"] if result.rank_by == "evidence" else result.rank_by


def _note(r: dict) -> str:
    if r["shift_with"]:
        return f"cost shift with {r['shift_with']}"
    if r["explained_by"]:
        return f"explained by {r['explained_by']}"
    return ""


def _cells(result, rows: list[dict]) -> list[list[str]]:
    cells = []
    for r in rows:
        m = _metric(result, r)
        interval = (
            f"[{_q(r[f'{m}_change_lo'], result)}, {_q(r[f'{m}_change_hi'], result)}]"
            if result.statistics
            else "-"
        )
        rel_iv = (
            f"[{_pct(r[f'{m}_rel_lo'])}, {_pct(r[f'{m}_rel_hi'])}]" if result.statistics else "-"
        )
        fcr = _fcr(r, m)
        sig = ("*" if r[f"{m}_significant"] else "") if r[f"{m}_tested"] else "untested"
        q = r[f"{m}_q"]
        det = r[f"{m}_detectable"]
        cells.append(
            [
                str(r["rank"]),
                m,
                quantity(r[f"{m}_rate_base"], result.rate_unit),
                quantity(r[f"{m}_rate_new"], result.rate_unit),
                _q(r[f"{m}_change"], result),
                interval,
                _pct(r[f"{m}_rel"]),
                rel_iv,
                fcr,
                "-" if q is None or math.isnan(q) else f"{q:.3g}",
                sig,
                "-" if det is None or math.isnan(det) else f"{det * 100:.0f}%",
                r["label"] + (f"  ({_note(r)})" if _note(r) else ""),
            ]
        )
    return cells


def _fcr(r: dict, m: str) -> str:
    """The FCR interval of a selected row's relative change, else "-"."""
    if not r[f"{m}_significant"]:
        return "-"
    return f"[{_pct(r[f'{m}_rel_fcr_lo'])}, {_pct(r[f'{m}_rel_fcr_hi'])}]"


def _head(result) -> list[str]:
    """The table's column heads, text and HTML alike (``_cells`` fills them)."""
    return [
        "rank",
        "by",
        "base",
        "new",
        "change",
        f"{_level(result.confidence)} interval, unadj.",
        "rel",
        "rel interval, unadj.",
        "FCR rel interval",
        "q",
        "sig",
        "detect",
        "name",
    ]


def _table(result, rows: list[dict]) -> list[str]:
    head = _head(result)
    return grid(head, _cells(result, rows), "r" * (len(head) - 1) + "l")


def _level(confidence: float) -> str:
    return f"{confidence * 100:.3g}%"


def interval_lines(result) -> list[str]:
    """What the intervals are, in words."""
    kind = "Wald" if result.test == "quasi-poisson" else "bootstrap"
    lines = [
        f"Intervals: 'unadj.' is each row's own {_level(result.confidence)} {kind} "
        "interval, unadjusted for the other tests (it can leave out 0 where q is "
        f"above {result.fdr:g}: the q-value counts the other tests, the interval does not)"
    ]
    if result.fcr_confidence is not None:
        agree = (
            "it leaves out 0 exactly when the row is selected (the score test inverted)"
            if result.test == "quasi-poisson"
            else "bootstrap, at that level"
        )
        lines.append(
            "FCR: Benjamini-Yekutieli false-coverage-rate interval of each selected "
            f"row's relative change, at {_level(result.fcr_confidence)} (1 - R*q/m); {agree}"
        )
    return lines


def render_text(result, top: int | None = 30) -> str:
    """Header facts, the increases and unchanged rows (``top`` of them), then the
    decreases apart, the edges carrying a changed callee's cost, and the notes."""
    all_rows = result.rows.to_pylist()
    lines = header_lines(result)
    if result.rank_by == "evidence":
        ups = [r for r in all_rows if r["direction"] != "decrease"]
        downs = [r for r in all_rows if r["direction"] == "decrease"]
        how = "by evidence (the conservative end of the interval of flat or cum), increases first"
    else:
        ups, downs = all_rows, []
        how = f"by |{result.rank_by} change|"
    shown = ups[:top] if top else ups
    lines.append(
        f"Ranked {how}, in {result.rate_unit}; sig '*': q <= {result.fdr:g}; detect: the "
        "smallest increase found with 80% power"
    )
    if result.statistics:
        lines += interval_lines(result)
    lines += _table(result, shown)
    if top and len(ups) > top:
        lines.append(f"... {len(ups) - top} more rows (--top N, or csv/json)")
    if downs:
        lines.append("Decreases (improvements):")
        lines += _table(result, downs[:top] if top else downs)
    edges = [e for e in result.edges.to_pylist() if e["significant"]]
    if edges:
        lines.append("Call edges carrying a changed callee's cost:")
        for e in edges:
            lines.append(
                f"  {text_name(e['caller'])} -> {text_name(e['callee'])}  "
                f"{_q(e['change'], result)} "
                f"({_pct(e['rel'])} [{_pct(e['rel_lo'])}, {_pct(e['rel_hi'])}] unadj., "
                f"q {e['q']:.3g})"
            )
    return "\n".join(lines) + "\n"


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and (math.isnan(v) or math.isinf(v)) else v


def render_json(result, top: int | None = None) -> str:
    rows = result.rows.slice(0, top) if top else result.rows
    doc = facts(result)
    doc["rows"] = rows.to_pylist()
    doc["edges"] = result.edges.to_pylist()
    return json_text(doc)


def render_csv(result, top: int | None = None) -> str:
    rows = result.rows.slice(0, top) if top else result.rows
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(rows.column_names)
    for r in rows.to_pylist():
        w.writerow([csv_cell(v) for v in r.values()])
    return buf.getvalue()


def render_html(result, top: int | None = None, *, more: str = "use .to_pandas()") -> str:
    """A ``<div>`` with the facts and the ``top`` rows (all by default); every name
    escaped; ``more`` says where the rows cut by ``top`` are."""
    esc = html.escape
    parts = [
        '<div class="pyproflab-regressions">',
        "<pre>" + esc("\n".join(header_lines(result))) + "</pre>",
        "<pre>" + esc("\n".join(interval_lines(result) if result.statistics else [])) + "</pre>",
        "<table><thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in _head(result))
        + "</tr></thead><tbody>",
    ]
    rows = result.rows.slice(0, top) if top else result.rows
    for cells in _cells(result, rows.to_pylist()):
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table>")
    if rows.num_rows < result.rows.num_rows:
        parts.append(f"<p>… {result.rows.num_rows - rows.num_rows} more rows ({esc(more)})</p>")
    parts.append("</div>")
    return "".join(parts)


# --- figures ------------------------------------------------------------------------


def _what(result, metric: str) -> str:
    """What a change of ``metric`` is measured in, in words."""
    if result.measure == "share":
        return f"{metric} share of each side's {result.sample_type.type} (percentage points)"
    return f"{metric} {result.sample_type.type} ({result.rate_unit})"


def figure_caption(result, metric: str = "flat") -> str:
    """What ``figure_top`` draws, in words: its measure, its intervals and colours."""
    kind = "Wald" if result.test == "quasi-poisson" else "bootstrap"
    return (
        f"Each dot is one function's change of {_what(result, metric)}, the functions "
        f"with the largest changes, with its {_level(result.confidence)} {kind} interval "
        "(each row's own, unadjusted for the others); red ones are significant after "
        f"the false-discovery-rate correction (q ≤ {result.fdr:g})."
    )


def figure_top(result, n: int = 20, metric: str = "flat"):
    """Horizontal dots with interval bars for the ``n`` largest changes of ``metric``
    (by |change|; rows whose ``metric`` did not change are left out)."""
    import plotly.graph_objects as go

    changed = [
        r
        for r in result.rows.to_pylist()
        if _clean(r[f"{metric}_change"]) is not None and r[f"{metric}_change"] != 0
    ]
    changed.sort(key=lambda r: -abs(r[f"{metric}_change"]))
    rows = changed[:n][::-1]  # plotly draws the first at the bottom
    names = [plotly_text(r["label"]) for r in rows]
    # Shares are fractions of 1; the axis (and the text's "pp") is in percentage points.
    scale = 100.0 if result.measure == "share" else 1.0

    def scaled(key: str) -> list[float | None]:
        return [None if (v := _clean(r[key])) is None else v * scale for r in rows]

    x = scaled(f"{metric}_change")
    lo = scaled(f"{metric}_change_lo")
    hi = scaled(f"{metric}_change_hi")
    plus = [None if h is None or v is None else h - v for v, h in zip(x, hi, strict=True)]
    minus = [None if lo_ is None or v is None else v - lo_ for v, lo_ in zip(x, lo, strict=True)]
    colors = ["#d62728" if r[f"{metric}_significant"] else "#7f7f7f" for r in rows]
    hover = [
        f"{nm}<br>base {plotly_text(quantity(r[f'{metric}_rate_base'], result.rate_unit))}"
        f" → new {plotly_text(quantity(r[f'{metric}_rate_new'], result.rate_unit))}"
        f"<br>change {plotly_text(_q(r[f'{metric}_change'], result))} "
        f"({_pct(r[f'{metric}_rel'])})<br>q {_num(r[f'{metric}_q'], 3)}"
        for nm, r in zip(names, rows, strict=True)
    ]
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=list(range(len(rows))),
            mode="markers",
            marker={"color": colors, "size": 9},
            # A colour of its own: the marker's array of colours is no colour for plotly's
            # error bars (they drew black with a console warning).
            error_x={
                "type": "data",
                "symmetric": False,
                "array": plus,
                "arrayminus": minus,
                "color": "#444",
            },
            hovertext=hover,
            hoverinfo="text",
        )
    )
    kind = "Wald" if result.test == "quasi-poisson" else "bootstrap"
    # The title says what is drawn: no rows, or rows without intervals (one profile
    # on a side), were an empty chart or bare dots under a title promising intervals.
    if not rows:
        how = f"none: no function's {metric} changed"
    elif all(v is None for v in plus + minus):
        how = "no intervals (no statistics with one profile on a side): the plain diff"
    else:
        how = f"{_level(result.confidence)} {kind} intervals, unadjusted; red: q ≤ {result.fdr:g}"
    fig.update_layout(
        title=f"Top {metric} changes ({plotly_text(result.rate_unit)}), {how}",
        yaxis={"tickvals": list(range(len(rows))), "ticktext": names},
        xaxis_title=plotly_text(f"change of {_what(result, metric)}"),
        height=max(300, 28 * len(rows) + 120),
        showlegend=False,
    )
    fig.add_vline(x=0, line_dash="dot")
    return fig


# --- over time ----------------------------------------------------------------------


def _when(t) -> str:
    """A time in UTC, as the store keeps it; the headings say UTC (``top``'s header
    is in the local zone, as pprof's, so an unmarked time could be read as local)."""
    return "-" if t is None else t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


_OVER_TIME_HEAD = (
    "time (UTC)",
    "window",
    "before",
    "after",
    "rel",
    "interval",
    "q",
    "status",
    "name",
)


def _over_time_cells(result, top: int | None = None) -> list[list[str]]:
    cells = []
    for c in _changes(result, top).to_pylist():
        status = c["status"]
        if status == "went away":
            status = f"went away at {_when(c['until'])} (window {c['until_window']})"
        cells.append(
            [
                _when(c["time"]),
                str(c["window"]),
                quantity(c["rate_before"], result.rate_unit),
                quantity(c["rate_after"], result.rate_unit),
                _pct(c["rel"]),
                f"[{_pct(c['rel_lo'])}, {_pct(c['rel_hi'])}]",
                f"{c['q']:.3g}",
                status,
                c["label"]
                + f" ({c['metric']})"
                + (f"  (explained by {c['explained_by']})" if c["explained_by"] else ""),
            ]
        )
    return cells


def _changes(result, top: int | None):
    """The first ``top`` change points (all without it)."""
    return result.changes.slice(0, top) if top else result.changes


def render_over_time_text(result, top: int | None = None) -> str:
    """The windows, then each change point (most credible first; ``top`` of
    them) and the notes."""
    w = result.windows
    lines = [
        f"Over time: {result.selection}: {w.num_rows} windows "
        f"{_when(w.column('start')[0].as_py())} .. {_when(w.column('end')[-1].as_py())} UTC, "
        f"rates in {result.rate_unit}"
    ] + [f"Note: {n}" for n in result.notes]
    lines = [text_name(line) for line in lines]
    if not result.changes.num_rows:
        lines.append(f"No change points at FDR {result.fdr:g}.")
        return "\n".join(lines) + "\n"
    head = list(_OVER_TIME_HEAD)
    lines += grid(head, _over_time_cells(result, top), "r" * (len(head) - 2) + "ll")
    if top and result.changes.num_rows > top:
        lines.append(
            f"... {result.changes.num_rows - top} more change points (--top N, or csv/json)"
        )
    return "\n".join(lines) + "\n"


def render_over_time_json(result, top: int | None = None) -> str:
    doc = {
        "selection": result.selection,
        "rate_unit": result.rate_unit,
        "fdr": result.fdr,
        "permutations": result.permutations,
        "seed": result.seed,
        "per": result.per,
        "notes": list(result.notes),
        "windows": result.windows.to_pylist(),
        "changes": _changes(result, top).to_pylist(),
    }
    return json_text(doc)


def render_over_time_csv(result, top: int | None = None) -> str:
    """The change points (``top`` of them), one row each, in the table's columns."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(result.changes.column_names)
    for r in _changes(result, top).to_pylist():
        w.writerow([csv_cell(v) for v in r.values()])
    return buf.getvalue()


def render_over_time_html(result, top: int | None = None) -> str:
    """A ``<div>`` with the change points; every name escaped."""
    esc = html.escape
    head = list(_OVER_TIME_HEAD)
    parts = [
        '<div class="pyproflab-over-time">',
        "<pre>"
        + esc(
            "\n".join(
                render_over_time_text(result).splitlines()[:1]
                + [f"Note: {n}" for n in result.notes]
            )
        )
        + "</pre>",
        "<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>",
    ]
    for cells in _over_time_cells(result, top):
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)
