"""Plain Arrow tables (e.g. the store's profile list) as text, JSON or CSV."""

from __future__ import annotations

import csv
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
