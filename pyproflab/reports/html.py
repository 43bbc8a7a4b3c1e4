"""HTML: a table of the rows; every name is escaped (names come from untrusted profiles)."""

from __future__ import annotations

import html
from typing import IO

from pyproflab.reports.base import Reporter
from pyproflab.reports.text import header_lines, value_format


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
    cols = {
        c: result.rows.column(c).to_pylist()
        for c in ("flat", "flat_pct", "sum_pct", "cum", "cum_pct", "label", "inline")
    }
    n = result.rows.num_rows if max_rows is None else min(max_rows, result.rows.num_rows)
    for i in range(n):
        name = cols["label"][i] + (f" {cols['inline'][i]}" if cols["inline"][i] else "")
        parts.append(
            f'<tr><td title="{cols["flat"][i]}">{esc(fmt(cols["flat"][i]))}</td>'
            f"<td>{cols['flat_pct'][i]:.2f}%</td><td>{cols['sum_pct'][i]:.2f}%</td>"
            f'<td title="{cols["cum"][i]}">{esc(fmt(cols["cum"][i]))}</td>'
            f"<td>{cols['cum_pct'][i]:.2f}%</td><td>{esc(name)}</td></tr>"
        )
    parts.append("</tbody></table>")
    if n < result.rows.num_rows:
        parts.append(f"<p>… {result.rows.num_rows - n} more rows ({esc(more)})</p>")
    parts.append("</div>")
    return "".join(parts)


class HtmlReporter(Reporter):
    def render(self, out: IO[str]) -> None:
        out.write(
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>top</title></head>'
            "<body>" + render_html(self.result) + "</body></html>\n"
        )
