"""A ``TopResult`` (``go tool pprof -top``) as text, JSON, CSV and HTML.

- text: pprof's header lines (and after its ``Duration`` line a ``Note:`` line
  per note of the result: what pprof does not say), then the rows. Values are scaled as pprof scales
  them by default (its "minimum" output unit: the unit of the smallest non-zero
  row, moved up when that is 100x smaller than the total), e.g. ``1.23s`` or
  ``512kB``; ``exact=True`` prints exact integers in the sample type's unit.
- json: the rows with exact integers, plus the header facts; keys sorted.
- csv: ``flat,flat_pct,sum_pct,cum,cum_pct,name`` (plus ``file,line`` at lines
  granularity), then ``label,inline`` (pprof's printed node name and its
  marker, so a row can be matched to pprof's); exact integers in the sample
  type's unit.
- html: a table of the rows, values and percentages as the text prints them;
  every name is escaped (names come from untrusted profiles).
"""

from __future__ import annotations

import csv
import html
import io
import shlex
from collections.abc import Callable

from pyproflab.analyses import units
from pyproflab.reports.formatting import json_text, text_name

ValueFormat = Callable[[int], str]


def value_format(result, exact: bool = False, out: str | None = None) -> ValueFormat:
    """How pprof would print this result's values (``out``: pprof's -unit, when given)."""
    if exact:
        return str
    unit = result.sample_type.unit
    if out:
        return lambda v: units.scaled_label(v, unit, out)
    min_value = 0
    for f, c in zip(
        result.rows.column("flat").to_pylist(), result.rows.column("cum").to_pylist(), strict=True
    ):
        v = abs(f) or abs(c)
        if v and (min_value == 0 or v < min_value):
            min_value = v
    # With no rows pprof keeps "minimum", which scales every value on its own.
    out_unit = (
        units.pick_output_unit(min_value, result.total, unit) if result.rows.num_rows else "minimum"
    )
    return lambda v: units.scaled_label(v, unit, out_unit)


def header_lines(result, fmt: ValueFormat | None = None) -> list[str]:
    """pprof's lines above the table: profile facts, filters, what is shown."""
    from pyproflab.analyses.top import format_time

    fmt = fmt or value_format(result)
    lines: list[str] = []
    if result.file:
        lines.append(f"File: {result.file}")
    if result.build_id:
        lines.append(f"Build ID: {result.build_id}")
    lines.extend(c for c in result.comments if not c.startswith("#"))
    if result.sample_type.type:
        lines.append(f"Type: {result.sample_type.type}")
    if result.doc_url:
        lines.append(f"Doc: {result.doc_url}")
    if result.time_nanos:
        lines.append(f"Time: {format_time(result.time_nanos)}")
    if result.duration_nanos:
        duration = units.label(result.duration_nanos, "nanoseconds")
        nanos, unit = units.scale(result.total, result.sample_type.unit, "nanoseconds")
        ratio = ""
        if unit == "ns" and nanos != 0:
            ratio = "(" + units.percentage(int(nanos), result.duration_nanos) + ")"
        lines.append(f"Duration: {duration}, Total samples = {fmt(result.total)} {ratio}")
    lines.extend(f"Note: {n}" for n in result.notes)
    if result.active_filters:
        lines.append("Active filters:")
        lines.extend("   " + (f if len(f) <= 80 else f[:80] + "…") for f in result.active_filters)
    pct = units.percentage(result.shown_total, result.total).strip()
    lines.append(
        f"Showing nodes accounting for {fmt(result.shown_total)}, {pct} of "
        f"{fmt(result.total)} total"
    )
    if result.total != 0:
        if result.dropped_nodes > 0:
            cut = abs(int(float(result.total) * result.node_fraction))
            noun = "nodes" if result.dropped_nodes > 1 else "node"
            lines.append(f"Dropped {result.dropped_nodes} {noun} (cum <= {fmt(cut)})")
        shown = result.rows.num_rows
        if 0 < shown < result.node_count_before:
            lines.append(f"Showing top {shown} nodes out of {result.node_count_before}")
    return [text_name(line) for line in lines]


def pprof_command(result) -> str:
    """The ``go tool pprof`` command whose -top prints ``result``'s rows and
    header lines, on the same (merged) profile: its options as pprof's flags,
    the trimming ones only where they are not pprof's defaults."""
    from pyproflab.analyses.options import PPROF_EDGE_FRACTION, PPROF_NODE_FRACTION

    flags = ["-top", f"-sample_index={result.sample_type.type or result.sample_index}"]
    flags += ["-cum"] if result.cum_sort else []
    flags += [f"-{result.granularity}"] if result.granularity != "functions" else []
    flags += [f"-nodecount={result.nodecount}"] if result.nodecount else []
    for name, value, default in (
        ("nodefraction", result.node_fraction, PPROF_NODE_FRACTION),
        ("edgefraction", result.edge_fraction, PPROF_EDGE_FRACTION),
    ):
        flags += [f"-{name}={value:g}"] if value != default else []
    flags += [f"-{f}" for f in result.active_filters]  # pprof's flags have the filters' names
    return "go tool pprof " + " ".join(map(shlex.quote, flags))


def render_text(result, *, exact: bool = False, unit: str | None = None) -> str:
    """``result`` as ``go tool pprof -top`` prints it (what ``str(TopResult)`` gives):
    pprof's header lines, then ``flat flat% sum% cum cum%`` and the node name.
    ``exact``: exact integers in the sample type's unit instead of pprof's scaled
    values; ``unit``: pprof's -unit (values in that unit, e.g. ``ms``, ``MB``)."""
    fmt = value_format(result, exact, unit)
    out = [line + "\n" for line in header_lines(result, fmt)]
    out.append(f"{'flat':>10} {'flat':>5}% {'sum':>5}% {'cum':>10} {'cum':>5}%\n")
    running = 0
    total = result.total
    cols = {c: result.rows.column(c).to_pylist() for c in ("flat", "cum", "label", "inline")}
    for flat, cum, label, inline in zip(
        cols["flat"], cols["cum"], cols["label"], cols["inline"], strict=True
    ):
        running += flat
        marker = f" {inline}" if inline else ""
        out.append(
            f"{fmt(flat):>10} {units.percentage(flat, total)} "
            f"{units.percentage(running, total)} {fmt(cum):>10} "
            f"{units.percentage(cum, total)}  {text_name(label)}{marker}\n"
        )
    return "".join(out)


def top_document(result) -> dict:
    """The JSON-ready content of a ``TopResult``."""
    return {
        "sample_type": {"type": result.sample_type.type, "unit": result.sample_type.unit},
        "sample_index": result.sample_index,
        "sample_types": [{"type": t.type, "unit": t.unit} for t in result.sample_types],
        "total": result.total,
        "shown_total": result.shown_total,
        "granularity": result.granularity,
        "nodecount": result.nodecount,
        "node_count_before": result.node_count_before,
        "dropped_nodes": result.dropped_nodes,
        "cum_sort": result.cum_sort,
        "focus": result.focus,
        "ignore": result.ignore,
        "file": result.file,
        "build_id": result.build_id,
        "comments": list(result.comments),
        "doc_url": result.doc_url,
        "time_nanos": result.time_nanos,
        "duration_nanos": result.duration_nanos,
        "notes": list(result.notes),
        "rows": result.rows.to_pylist(),
    }


def render_json(result) -> str:
    """``top_document`` as JSON, keys sorted."""
    return json_text(top_document(result))


COLUMNS = ["flat", "flat_pct", "sum_pct", "cum", "cum_pct", "name"]


def csv_columns(result) -> list[str]:
    extra = ["file", "line"] if result.granularity == "lines" else []
    return COLUMNS + extra + ["label", "inline"]


def render_csv(result) -> str:
    """The rows of a ``TopResult`` as CSV (see the module rules)."""
    cols = csv_columns(result)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    # Column by column, then one writerows: a Python step per cell cost 0.3 s
    # on the 23,000 rows of a fleet's top.
    w.writerows(zip(*(_column(result, c) for c in cols), strict=True))
    return buf.getvalue()


def _column(result, name: str) -> list:
    values = result.rows.column(name).to_pylist()
    if name.endswith("_pct"):
        return [f"{v:.4f}" for v in values]
    return ["" if v is None else v for v in values]


def render_html(result, max_rows: int | None = None, *, more: str = "use .to_pandas()") -> str:
    """A self-contained ``<div>`` with the header lines and the rows; ``more`` says
    where the rows cut by ``max_rows`` are (a notebook's method, a report's command)."""
    fmt = value_format(result)
    esc = html.escape
    parts = ['<div class="pyproflab-top">']
    parts.append("<pre>" + esc("\n".join(header_lines(result, fmt))) + "</pre>")
    parts.append(
        "<table><thead><tr><th>flat</th><th>flat%</th><th>sum%</th><th>cum</th>"
        "<th>cum%</th><th>name</th></tr></thead><tbody>"
    )
    cols = {c: result.rows.column(c).to_pylist() for c in ("flat", "cum", "label", "inline")}
    n = result.rows.num_rows if max_rows is None else min(max_rows, result.rows.num_rows)
    running = 0
    for i in range(n):
        flat, cum = cols["flat"][i], cols["cum"][i]
        running += flat
        name = cols["label"][i] + (f" {cols['inline'][i]}" if cols["inline"][i] else "")
        parts.append(
            f'<tr><td title="{flat}">{esc(fmt(flat))}</td><td>{_pct(flat, result)}</td>'
            f'<td>{_pct(running, result)}</td><td title="{cum}">{esc(fmt(cum))}</td>'
            f"<td>{_pct(cum, result)}</td><td>{esc(name)}</td></tr>"
        )
    parts.append("</tbody></table>")
    if n < result.rows.num_rows:
        parts.append(f"<p>… {result.rows.num_rows - n} more rows ({esc(more)})</p>")
    parts.append("</div>")
    return "".join(parts)


def _pct(value: int, result) -> str:
    """A percentage cell as the text prints it (pprof's rounding)."""
    return units.percentage(value, result.total).strip()
