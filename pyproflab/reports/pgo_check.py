"""Renderings of ``PgoCheckResult`` (``pyproflab pgo check``): text, JSON, HTML.

Rules: the text starts with the verdict and its figures (the share of the
checked hot weight the compiler still applies, how many hot edges, and the
weight of each reason an edge no longer applies), then what was left out
(edges outside the module, runtime edges that are not calls), then one row
per hot edge, heaviest first: weight, share of all edge weight, status, the
edge, and where its offset lands today with what that line calls. ``edges``
limits the rows (0: all). JSON has every edge with exact integer weights,
shares as percentages named ``*_pct``;
HTML escapes every name (profiles are untrusted).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from pyproflab.analyses.pgo_check import APPLIED, APPLIES, NOT_COUNTED
from pyproflab.reports.formatting import json_text, text_name

if TYPE_CHECKING:
    from pyproflab.analyses.pgo_check import EdgeCheck, PgoCheckResult


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def verdict_line(r: PgoCheckResult) -> str:
    """``VERDICT: X% of the hot weight in MODULE still applies (...)``."""
    counted = [c for c in r.checks if c.counted]
    if not counted:
        return (
            f"unknown: no hot edge of {r.profile} has its caller in {r.module}, "
            "so nothing could be checked"
        )
    total = r.checked_weight
    applied = sum(c.applied for c in counted)
    lost = sorted(
        ((st, w) for st, (_, w) in r.by_status().items() if st not in (*APPLIED, *NOT_COUNTED)),
        key=lambda x: -x[1],
    )
    why = "; ".join(f"{st} {_pct(w, total)}" for st, w in lost)
    bounds = {
        "current": f"at least {r.options.current_at:g}%",
        "aging": f"{r.options.stale_below:g}-{r.options.current_at:g}%",
        "stale": f"under {r.options.stale_below:g}%: collect a new profile",
    }[r.verdict]
    out = (
        f"{r.verdict} ({bounds}): {r.share:.1f}% of the hot edge weight in {r.module} "
        f"still applies ({applied} of {len(counted)} hot edges"
    )
    out += f"; {r.intact_share:.1f}% on calls to their own callee)"
    return out + (f"; no longer applies: {why}" if why else "")


def _where(c: EdgeCheck) -> str:
    if c.line is None:
        return ""
    calls = ", ".join(c.calls) if c.calls else "no call"
    out = f"{c.file}:{c.line} {calls}"
    if c.target and c.status != APPLIES:
        out += f" (hot callee {c.target})"
    return text_name(out)


def render_text(r: PgoCheckResult, *, edges: int = 20) -> str:
    """The human summary (see the module rules)."""
    out = [f"pgo check: {r.profile} against {r.source} (module {r.module})", verdict_line(r)]
    w = out.append
    by = r.by_status()
    hot_w = sum(c.edge.weight for c in r.checks)
    w(
        f"hot edges: {len(r.checks)} ({_pct(hot_w, r.total_weight)} of all edge weight); "
        f"checked: {sum(c.counted for c in r.checks)}"
    )
    for st in NOT_COUNTED:
        if st in by:
            n, wt = by[st]
            w(f"  not checked, {st}: {n} edges, {_pct(wt, r.total_weight)} of all edge weight")
    moved = sorted({(c.edge.caller, c.caller_moved) for c in r.checks if c.caller_moved})
    for name, d in moved:
        w(
            f"  start line moved: {text_name(name)} {d:+d} lines "
            "(the compiler uses offsets: no effect)"
        )
    rows = [c for c in r.checks if c.counted]
    if rows:
        w(f"{'weight':>10} {'share':>7}  {'status':<24} edge  ->  today")
        shown = rows if edges <= 0 else rows[:edges]
        for c in shown:
            w(
                f"{c.edge.weight:>10} {c.edge.share:6.2f}%  {c.status:<24} "
                f"{text_name(str(c.edge.key))}"
                f"  ->  {_where(c)}".rstrip()
            )
        if len(shown) < len(rows):
            w(f"  … {len(rows) - len(shown)} more checked edges (--edges 0 shows all)")
    return "\n".join(out) + "\n"


def render_json(r: PgoCheckResult) -> str:
    doc = {
        "profile": r.profile,
        "source": r.source,
        "module": r.module,
        "verdict": r.verdict,
        "share_pct": r.share,
        "intact_share_pct": r.intact_share,
        "checked_weight": r.checked_weight,
        "total_weight": r.total_weight,
        "options": {
            "current_at": r.options.current_at,
            "stale_below": r.options.stale_below,
            "cdf_percent": r.options.cdf_percent,
        },
        "edges": [
            {
                "caller": c.edge.caller,
                "callee": c.edge.callee,
                "offset": c.edge.offset,
                "weight": c.edge.weight,
                "share_pct": c.edge.share,
                "status": c.status,
                "counted": c.counted,
                "applied": c.applied,
                "file": c.file,
                "line": c.line,
                "calls": list(c.calls),
                "target": c.target,
                "caller_moved": c.caller_moved,
                "callee_state": c.callee_state,
            }
            for c in r.checks
        ],
    }
    return json_text(doc, indent=2)


def render_html(r: PgoCheckResult, *, edges: int = 50) -> str:
    esc = html.escape
    parts = [f"<p><b>PGO check</b>: {esc(verdict_line(r))}</p>"]
    parts.append(
        "<table><tr><th>weight</th><th>share</th><th>status</th><th>caller</th>"
        "<th>callee</th><th>offset</th><th>today</th></tr>"
    )
    rows = [c for c in r.checks if c.counted]
    for c in rows[: edges or None]:
        parts.append(
            f"<tr><td>{c.edge.weight}</td><td>{c.edge.share:.2f}%</td><td>{esc(c.status)}</td>"
            f'<td class="name">{esc(c.edge.caller)}</td><td class="name">{esc(c.edge.callee)}</td>'
            f"<td>{c.edge.offset}</td><td>{esc(_where(c))}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)
