"""Renderings of ``GcResult`` and ``GcCategoriesResult``: text, JSON, CSV, HTML.

Rules: text shows GC share per instance (profile view beside the runtime
view), then the category breakdown of each CPU profile, then the notes;
JSON has every table (``instances``, ``profiles``, ``categories``) and the
notes, with exact values (times as ISO strings, NULL as null); CSV is one
table, ``profiles`` unless another is named. HTML escapes every name (they
come from profiles and metric labels, which are untrusted).
"""

from __future__ import annotations

import html
from typing import Any

import pyarrow as pa

from pyproflab.errors import UsageError
from pyproflab.reports.formatting import (
    csv_cell,
    grid,
    json_text,
    mib,
    pct,
    seconds,
    text_name,
)

TABLES = ("profiles", "instances", "categories")

# Short column heads for the category breakdown, in GC_CATEGORIES order.
_CATEGORY_HEADS = {
    "mark_dedicated": "mark ded",
    "mark_fractional": "mark frac",
    "mark_idle": "mark idle",
    "mark_worker_other": "mark other",
    "mark_assist": "assist",
    "write_barrier": "wb",
    "sweep": "sweep",
    "scavenge": "scav",
    "stw_other": "stw/other",
    "allocation": "alloc",
}


def _num(v: float | None, digits: int = 1) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _limit(v: float | None) -> str:
    # GOMEMLIMIT's "off" is math.MaxInt64 bytes.
    if v is None:
        return ""
    return "off" if v >= 2**63 - 1024 else mib(v)


def _cell(v: Any) -> str:
    return "" if v is None else str(v)


def _grid(head: list[str], rows: list[list[str]], first_right: int) -> list[str]:
    """Columns left-aligned up to ``first_right``, right-aligned from there on."""
    return grid(head, rows, "l" * first_right + "r" * (len(head) - first_right))


# The per-instance table's columns: (head, cell of a row, shown in HTML too).
# HTML leaves out the heap goal, allocation and STW total to fit a notebook cell.
_INSTANCE_COLUMNS = (
    ("service", lambda r: _cell(r["service"]), True),
    ("version", lambda r: _cell(r["version"]), True),
    ("instance", lambda r: _cell(r["instance"]), True),
    ("profiles", lambda r: f"{r['profiles']} ({r['cpu_profiles']} cpu)", True),
    ("profile view", lambda r: pct(r["profile_gc_share"]), True),
    ("profile mark", lambda r: pct(r["profile_gc_mark_share"]), True),
    ("runtime busy", lambda r: pct(r["gc_cpu_fraction_busy"]), True),
    ("runtime all", lambda r: pct(r["gc_cpu_fraction"]), True),
    ("GC/min", lambda r: _num(r["gc_cycles_per_min"]), True),
    ("heap live", lambda r: mib(r["heap_live_mean_bytes"]), True),
    ("heap goal", lambda r: mib(r["heap_goal_mean_bytes"]), False),
    ("alloc/s", lambda r: mib(r["alloc_bytes_per_sec"]), False),
    ("STW total", lambda r: seconds(r["stw_pause_total_seconds"]), False),
    ("STW p99", lambda r: seconds(r["stw_pause_p99_seconds"]), True),
    ("GOGC", lambda r: _num(r["gogc_percent"], 0), True),
    ("GOMEMLIMIT", lambda r: _limit(r["gomemlimit_bytes"]), True),
)


def _instance_table(rows: list[dict], *, in_html: bool) -> tuple[list[str], list[list[str]]]:
    """The per-instance table's heads and cells (HTML's shorter set when ``in_html``)."""
    cols = [c for c in _INSTANCE_COLUMNS if c[2] or not in_html]
    return [c[0] for c in cols], [[c[1](r) for c in cols] for r in rows]


def instance_lines(result) -> list[str]:
    """The per-instance table: GC share, profile view vs runtime view, and the metrics."""
    head, rows = _instance_table(result.instances.to_pylist(), in_html=False)
    return _grid(head, rows, 3)


CATEGORY_TITLE = "GC CPU by category (CPU profiles; exclusive, % of the profile's CPU)"


def category_lines(result) -> list[str]:
    """Per CPU profile: GC share and each exclusive category's share of the profile."""
    head, rows = _category_table(result)
    return _grid(head, rows, 2) if rows else []


def _category_table(result) -> tuple[list[str], list[list[str]]]:
    from pyproflab.analyses.gc_categories import CATEGORY_NAMES

    cpu = [r for r in result.profiles.to_pylist() if r["profile_cpu_ns"] is not None]
    head = [
        "profile",
        "instance",
        "cpu",
        "GC",
        *[_CATEGORY_HEADS.get(n, n) for n in CATEGORY_NAMES],
    ]
    rows = []
    for r in cpu:
        total = r["profile_cpu_ns"]
        rows.append(
            [
                str(r["profile_id"]),
                _cell(r["instance"]),
                f"{total / 1e9:.2f}s",
                pct(r["profile_gc_share"]),
                *[pct(r[f"gc_{n}_ns"] / total) if total else "" for n in CATEGORY_NAMES],
            ]
        )
    return head, rows


def render_text(result) -> str:
    lines = [
        "GC share per instance",
        "  profile view: every GC category of its CPU profiles / their CPU samples",
        "  profile mark: only what the runtime books as GC (mark workers, assists, STW)",
        "  runtime busy: go_cpu_classes gc / (total - idle); runtime all: gc / total",
        "",
    ]
    lines += instance_lines(result)
    cats = category_lines(result)
    if cats:
        lines += ["", CATEGORY_TITLE, ""]
        lines += cats
    if result.notes:
        lines += ["", "Notes:"] + [f"  - {text_name(n)}" for n in result.notes]
    return "\n".join(lines) + "\n"


def render_json(result) -> str:
    doc = {
        "instances": result.instances.to_pylist(),
        "profiles": result.profiles.to_pylist(),
        "categories": result.categories.to_pylist(),
        "notes": list(result.notes),
    }
    return json_text(doc)


def render_csv(result, table: str = "profiles") -> str:
    import csv
    import io

    if table not in TABLES:
        raise UsageError(f"unknown table {table!r}; choose one of {', '.join(TABLES)}")
    t: pa.Table = getattr(result, table)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.column_names)
    for row in t.to_pylist():
        w.writerow([csv_cell(row[c]) for c in t.column_names])
    return buf.getvalue()


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    parts = ["<table><thead><tr>", *[f"<th>{esc(h)}</th>" for h in head], "</tr></thead><tbody>"]
    for r in rows:
        parts.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def render_gc_html(result, max_rows: int = 200, *, python: bool = True) -> str:
    """A ``<div>``: the per-instance table, the category table, the notes (all escaped);
    ``python``: end with the result's Python accessors (off in the offline report)."""
    esc = html.escape
    head, inst = _instance_table(result.instances.to_pylist()[:max_rows], in_html=True)
    parts = [
        '<div class="pyproflab-gc">',
        "<p>GC share per instance</p>",
        _html_table(head, inst),
    ]
    head, cats = _category_table(result)
    if cats:
        parts += [f"<p>{esc(CATEGORY_TITLE)}</p>", _html_table(head, cats[:max_rows])]
    if result.notes:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in result.notes) + "</ul>")
    if python:
        parts.append(
            "<p>Per profile: <code>.to_pandas()</code>; per instance: "
            "<code>.instances</code>; categories: <code>.categories</code></p>"
        )
    parts.append("</div>")
    return "".join(parts)


def categories_html(result) -> str:
    """A ``GcCategoriesResult`` as an escaped HTML table."""
    unit = result.unit
    rows = [
        [
            r["category"],
            f"{r['cpu']}",
            pct(r["share"]),
            f"{r['plain_cpu']}",
            pct(r["plain_share"]),
            r["regex"],
        ]
        for r in result.rows.to_pylist()
    ]
    return (
        '<div class="pyproflab-gc-categories">'
        f"<p>GC {html.escape(pct(result.gc_share))} of {result.total} "
        f"{html.escape(unit)}</p>"
        + _html_table(
            ["category", f"exclusive ({unit})", "share", f"plain ({unit})", "plain share", "regex"],
            rows,
        )
        + "</div>"
    )
