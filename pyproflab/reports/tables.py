"""Plain Arrow tables (e.g. the store's profile list) as text, JSON, CSV or HTML.

HTML is what Jupyter shows of an Arrow table once ``pyproflab.notebook()`` ran
(``reports.notebook``): pyarrow's own repr is its schema then each column's
values, ``profile_id: [[1,2,3,...]]``, which no one reads as rows. Rules: a
``<div>`` holding the row and column counts and a table of the first
``max_rows`` rows, each column headed by its name and Arrow type; a cell is its
value's ``str`` (null: empty), cut to ``max_chars`` characters, and escaped
(values come from profiles: untrusted).
"""

from __future__ import annotations

import csv
import html
import io

import pyarrow as pa

from pyproflab.reports.formatting import csv_cell, grid, json_text


def _cell(v) -> str:
    return "" if v is None else str(v)


def render_text(table: pa.Table) -> str:
    """``table`` as aligned text columns."""
    cols = table.column_names
    cells = [[_cell(r[c]) for c in cols] for r in table.to_pylist()]
    return "\n".join(grid(cols, cells, "l" * len(cols))) + "\n"


def render_json(table: pa.Table) -> str:
    """``table`` as a JSON array of objects, keys sorted."""
    rows = table.to_pylist()
    return json_text(rows)


def render_csv(table: pa.Table) -> str:
    """``table`` as CSV with a header row; nulls are empty cells."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.column_names)
    for r in table.to_pylist():
        w.writerow([csv_cell(r[c]) for c in table.column_names])
    return buf.getvalue()


def render_html(table: pa.Table, /, max_rows: int = 30, max_chars: int = 80) -> str:
    """``table`` as an HTML ``<div>`` (see the module rules)."""
    esc = html.escape
    shown = table.slice(0, max_rows)
    # By position: SQL may name two columns alike (to_pylist's dicts would keep one).
    columns = [column.to_pylist() for column in shown.columns]
    head = "".join(
        f"<th>{esc(f.name)}<br><small>{esc(str(f.type))}</small></th>" for f in table.schema
    )
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(_short(v, max_chars))}</td>" for v in row) + "</tr>"
        for row in zip(*columns, strict=True)
    )
    note = f"{table.num_rows} rows, {table.num_columns} columns"
    note += f"; the first {shown.num_rows} shown" if shown.num_rows < table.num_rows else ""
    return (
        f'<div class="pyproflab-table"><p>{note}</p>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _short(v, limit: int) -> str:
    text = _cell(v)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
