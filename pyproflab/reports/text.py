"""Text like ``go tool pprof -top``: pprof's header lines, then the rows.

Values are scaled as pprof scales them by default (its "minimum" output unit:
the unit of the smallest non-zero row, moved up when that is 100x smaller
than the total), e.g. ``1.23s`` or ``512kB``; ``exact=True`` prints exact
integers in the sample type's unit instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from pyproflab.analyses import units
from pyproflab.reports.base import Reporter

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
    return lines


class TextReporter(Reporter):
    """pprof's -top layout: ``flat flat% sum% cum cum%`` then the node name."""

    def __init__(self, result, *, exact: bool = False, unit: str | None = None) -> None:
        super().__init__(result)
        self.exact = exact
        self.unit = unit

    def render(self, out: IO[str]) -> None:
        r = self.result
        fmt = value_format(r, self.exact, self.unit)
        for line in header_lines(r, fmt):
            out.write(line + "\n")
        out.write(f"{'flat':>10} {'flat':>5}% {'sum':>5}% {'cum':>10} {'cum':>5}%\n")
        running = 0
        cols = {c: r.rows.column(c).to_pylist() for c in ("flat", "cum", "label", "inline")}
        for flat, cum, label, inline in zip(
            cols["flat"], cols["cum"], cols["label"], cols["inline"], strict=True
        ):
            running += flat
            marker = f" {inline}" if inline else ""
            out.write(
                f"{fmt(flat):>10} {units.percentage(flat, r.total)} "
                f"{units.percentage(running, r.total)} {fmt(cum):>10} "
                f"{units.percentage(cum, r.total)}  {label}{marker}\n"
            )


def render_text(result, exact: bool = False) -> str:
    """``result`` as ``go tool pprof -top`` prints it (what ``str(TopResult)`` gives)."""
    return TextReporter(result, exact=exact).render_to_string()
