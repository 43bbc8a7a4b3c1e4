"""Execution-trace answers as text, JSON, CSV and HTML (``analyses/gotrace*``).

Rules: text prints the findings first (one line each), then aligned tables
with durations in µs/ms/s (``formatting.seconds``); JSON is every table of the
result as lists of objects, integers in nanoseconds, keys sorted; CSV is one
table (``table``: the result's main one by default), nanoseconds exact. HTML
(a notebook's view) is the text's findings and tables, cells as text prints
them, each table cut at ``limit`` rows. In
the goroutine rows, ``waiting`` is an object reason -> ns in JSON and
``reason=ns;...`` in CSV; a wait the trace gives no reason for (a goroutine
parked before the trace began) is ``unknown`` in every format.
"""

from __future__ import annotations

import csv
import html
import io
from typing import Any

import pyarrow as pa

from pyproflab.errors import UsageError
from pyproflab.reports.formatting import csv_cell, grid, json_text, seconds, text_name


def _shape(result: Any) -> tuple[str, tuple[str, ...], str | None]:
    """(main table, the tables in order, findings attribute or None): the
    result's own (``analyses.gotrace_data.TraceAnswer``)."""
    return result.MAIN, result.TABLES, result.FINDINGS


NO_REASON = "unknown"


def _rows(t: pa.Table) -> list[dict[str, Any]]:
    rows = t.to_pylist()
    for r in rows:
        if isinstance(r.get("waiting"), list):
            r["waiting"] = {w["reason"] or NO_REASON: w["ns"] for w in r["waiting"]}
    return rows


def render_json(result: Any) -> str:
    main, names, findings = _shape(result)
    doc: dict[str, Any] = {n: _rows(getattr(result, n)) for n in names}
    if findings:
        doc["findings"] = list(getattr(result, findings))
    if names == (main,):
        doc = doc[main]
    return json_text(doc)


def render_csv(result: Any, table: str | None = None) -> str:
    main, names, _ = _shape(result)
    name = table or main
    if name not in names:
        raise UsageError(f"--table: one of {', '.join(names)}, not {name!r}")
    t = getattr(result, name)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.column_names)
    for r in _rows(t):
        cells = []
        for c in t.column_names:
            v = r[c]
            if isinstance(v, dict):
                v = ";".join(f"{k}={x}" for k, x in v.items())
            elif isinstance(v, list):
                v = " ".join(map(str, v))
            cells.append(csv_cell(v))
        w.writerow(cells)
    return buf.getvalue()


def _cell(col: str, v: Any) -> str:
    if v is None:
        return ""
    if col.endswith("_ns") and isinstance(v, int | float):
        return seconds(v / 1e9)
    if col.endswith("_ms") and isinstance(v, int | float):
        return seconds(v / 1e3)
    if isinstance(v, dict):
        top = sorted(v.items(), key=lambda kv: -kv[1])[:2]
        return ", ".join(f"{k} {seconds(x / 1e9)}" for k, x in top)
    if isinstance(v, list):
        return " ".join(map(str, v))
    if hasattr(v, "isoformat"):
        return v.strftime("%H:%M:%S.%f")[:-3]
    return str(v)


_HIDDEN = {"trace_id", "service", "window_end", "created_ns", "ended_ns"}


def _heading(col: str, typ: pa.DataType | None = None) -> str:
    """A column's heading in text and HTML: a duration's without its ``_ns`` or
    ``_ms``, since its cells carry their unit (``total 121.50s``, not ``total_ns
    121.50s``); JSON and CSV keep the names, whose numbers are in that unit.
    A scheduler wait's ``stack`` is the one that made the goroutine runnable
    (another goroutine's when it was woken): its heading says so. A wall-clock
    time's (``typ`` a timestamp) says UTC: its cells are UTC clock times, beside
    ``top``'s header in the local zone (as pprof's)."""
    if typ is not None and pa.types.is_timestamp(typ):
        return f"{col} (UTC)"
    if col == "waiting":  # the reasons, beside waiting_ns's total ("waiting")
        return "waiting on"
    if col == "stack":  # sched's longest waits: often the waker's, not the goroutine's own
        return "made runnable at"
    return col[:-3] if col.endswith(("_ns", "_ms")) else col


def _text_table(title: str, t: pa.Table, limit: int | None = None) -> list[str]:
    cols = [c for c in t.column_names if c not in _HIDDEN]
    rows = _rows(t)[:limit] if limit else _rows(t)
    numeric = {
        c
        for c in cols
        if pa.types.is_integer(t.schema.field(c).type)
        or pa.types.is_floating(t.schema.field(c).type)
    }
    cells = [[_cell(c, r[c]) for c in cols] for r in rows]
    align = "".join("r" if c in numeric else "l" for c in cols)
    more = [f"... {t.num_rows - len(rows)} more rows"] if len(rows) < t.num_rows else []
    if not t.num_rows:  # the columns stay; "none" says, not a header over nothing
        more = ["(none)"]
    head = [_heading(c, t.schema.field(c).type) for c in cols]
    return [f"{title}:", *grid(head, cells, align), *more, ""]


def render_text(result: Any, limit: int | None = 50) -> str:
    _, names, findings = _shape(result)
    lines = []
    if findings:
        found = list(getattr(result, findings))
        lines += [text_name(x) for x in found] or ["no findings"]
        lines.append("")
    for n in names:
        lines += _text_table(n.replace("_", " "), getattr(result, n), limit)
    return "\n".join(lines).rstrip("\n") + "\n"


def _html_table(title: str, t: pa.Table, limit: int | None) -> str:
    esc = html.escape
    cols = [c for c in t.column_names if c not in _HIDDEN]
    rows = _rows(t)[:limit] if limit else _rows(t)
    head = "".join(f"<th>{esc(_heading(c, t.schema.field(c).type))}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(_cell(c, r[c]))}</td>" for c in cols) + "</tr>" for r in rows
    )
    more = f"<p>... {t.num_rows - len(rows)} more rows</p>" if len(rows) < t.num_rows else ""
    more = more if t.num_rows else "<p>(none)</p>"
    return (
        f"<p><b>{esc(title)}</b> ({t.num_rows} rows)</p><table><tr>{head}</tr>{body}</table>{more}"
    )


def render_html(result: Any, limit: int | None = 20) -> str:
    _, names, findings = _shape(result)
    parts = ['<div class="pyproflab-gotrace">']
    if findings:
        found = list(getattr(result, findings)) or ["no findings"]
        parts.append("<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in found) + "</ul>")
    parts += [_html_table(n.replace("_", " "), getattr(result, n), limit) for n in names]
    return "".join(parts) + "</div>"
