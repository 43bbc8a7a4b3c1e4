"""Plain Arrow tables (e.g. the store's profile list) as text, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa


def render_table(table: pa.Table, fmt: str = "text") -> str:
    """``table`` as aligned text columns, a JSON array of objects, or CSV."""
    from pyproflab.errors import UsageError

    rows = table.to_pylist()
    cols = table.column_names
    if fmt == "json":
        return json.dumps(rows, sort_keys=True, default=str, indent=1, ensure_ascii=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow(["" if r[c] is None else r[c] for c in cols])
        return buf.getvalue()
    if fmt != "text":
        raise UsageError(f"unknown format {fmt!r}; choose text, json or csv")
    from pyproflab.reports.formatting import grid

    cells = [[("" if r[c] is None else str(r[c])) for c in cols] for r in rows]
    return "\n".join(grid(cols, cells, "l" * len(cols))) + "\n"
