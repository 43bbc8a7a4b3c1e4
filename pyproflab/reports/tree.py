"""Text like ``go tool pprof -tree`` and ``-peek``: top's header, then one block
per node: its callers, the node's own row, its callees.

Layout (pprof's ``printTree``): a separator and a legend under the header;
each block opens with the separator; an edge line is its weight right-aligned
in 50 columns, its share of the node's cum, ``|``, and the other end's name
(`` (inline)`` when the edge is inline); the node line is flat, flat%, sum%
(over the printed nodes only), cum, cum%, ``|`` and the name. A final
separator closes the text when the graph has nodes. Values are scaled as top
scales them (the unit of the smallest node, or ``unit`` when given).
"""

from __future__ import annotations

import html

from pyproflab.analyses import units
from pyproflab.reports.formatting import text_name
from pyproflab.reports.top import header_lines, value_format

SEPARATOR = "----------------------------------------------------------+-------------"
LEGEND = "      flat  flat%   sum%        cum   cum%   calls calls% + context \t \t "


def render_tree_text(result, unit: str | None = None, exact: bool = False) -> str:
    """``result`` (a ``TreeResult``) as ``go tool pprof -tree``/``-peek`` prints it."""
    top = result.top
    fmt = value_format(top, exact, unit)
    out = header_lines(top, fmt) + [SEPARATOR, LEGEND]
    total = top.total
    flat_sum = 0
    for entry in result.entries:
        out.append(SEPARATOR)
        out += _edge_lines(entry.callers, entry.cum, fmt)
        flat_sum += entry.flat
        out.append(
            f"{fmt(entry.flat):>10} {units.percentage(entry.flat, total)} "
            f"{units.percentage(flat_sum, total)} {fmt(entry.cum):>10} "
            f"{units.percentage(entry.cum, total)}                | {text_name(entry.name)}"
        )
        out += _edge_lines(entry.callees, entry.cum, fmt)
    if top.rows.num_rows:
        out.append(SEPARATOR)
    return "\n".join(out) + "\n"


def _edge_lines(edges, cum: int, fmt) -> list[str]:
    return [
        f"{fmt(e.weight):>50} {units.percentage(e.weight, cum)} |   {text_name(e.name)}"
        + (" (inline)" if e.inline else "")
        for e in edges
    ]


def render_tree_html(result, **options) -> str:
    """A notebook's view: the text, as ``render_tree_text`` prints it, in a ``<pre>``."""
    return f'<pre class="pyproflab-tree">{html.escape(render_tree_text(result, **options))}</pre>'
