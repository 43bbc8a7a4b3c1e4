"""Renderings of ``WeightComparison`` (``pyproflab pgo weights``): text, JSON, HTML.

Rules: one line per weighting (edges, hot edges, each instance's share of the
merge, or why it was refused), then per compared pair the hot edges added,
removed and re-weighted with the overlap of the two hot sets, and at most
``rows`` of each list (0: all), largest share first. JSON has every list,
shares as percentages named ``*_pct``.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from pyproflab.reports.formatting import json_text, text_name

if TYPE_CHECKING:
    from pyproflab.analyses.pgo_edges import EdgeChange
    from pyproflab.analyses.pgo_weights import WeightComparison


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}%"


def _shares(cmp: WeightComparison, weight: str) -> str:
    shares = cmp.instance_shares(weight)
    return ", ".join(f"{text_name(k)} {v:.1f}%" for k, v in sorted(shares.items()))


def weighting_lines(cmp: WeightComparison) -> list[str]:
    """One line per weighting: its edges, hot edges and instances' shares."""
    out = []
    for w, r in cmp.results.items():
        if not r.ok:
            out.append(f"{w:>9}: refused: {r.refusal}")
            continue
        out.append(
            f"{w:>9}: {len(r.edges)} edges, {len(r.edges.hot)} hot; instances: {_shares(cmp, w)}"
        )
    return out


def _change(what: str, c: EdgeChange) -> str:
    return f"  {what:<5} {_pct(c.old_share):>8} -> {_pct(c.new_share):>8}  {text_name(str(c.key))}"


def render_text(cmp: WeightComparison, *, rows: int = 5) -> str:
    out = [
        "weightings of the same inputs (none: a plain sum; duration: per second; "
        "instance: each instance once):"
    ]
    out += weighting_lines(cmp)
    for a, b, d, jaccard in cmp.diffs:
        out.append(
            f"{b} against {a}: {len(d.added)} hot edges added, {len(d.removed)} removed, "
            f"{len(d.reweighted)} re-weighted by {cmp.min_change:g}+ points; "
            f"overlap {jaccard:.2f} (shared hot edges / hot edges in either)"
        )
        for what, changes in (("added", d.added), ("gone", d.removed), ("moved", d.reweighted)):
            out += [_change(what, c) for c in changes[: rows or None]]
    return "\n".join(out) + "\n"


def _rows(changes: list[EdgeChange]) -> list[dict]:
    return [
        {
            "caller": c.key.caller,
            "callee": c.key.callee,
            "offset": c.key.offset,
            "old_share_pct": c.old_share,
            "new_share_pct": c.new_share,
        }
        for c in changes
    ]


def render_json(cmp: WeightComparison) -> str:
    doc = {
        "weightings": {
            w: {
                "ok": r.ok,
                "refusal": r.refusal,
                "edges": len(r.edges),
                "hot": len(r.edges.hot),
                "instance_shares_pct": cmp.instance_shares(w) if r.ok else {},
            }
            for w, r in cmp.results.items()
        },
        "comparisons": [
            {
                "from": a,
                "to": b,
                "jaccard": jaccard,
                "added": _rows(d.added),
                "removed": _rows(d.removed),
                "reweighted": _rows(d.reweighted),
            }
            for a, b, d, jaccard in cmp.diffs
        ],
        "min_change": cmp.min_change,
    }
    return json_text(doc, indent=2)


def render_html(cmp: WeightComparison) -> str:
    esc = html.escape
    lines = "".join(f"<li>{esc(x.strip())}</li>" for x in weighting_lines(cmp))
    parts = [f"<p><b>PGO weightings</b></p><ul>{lines}</ul>"]
    parts.append(
        "<table><tr><th>against</th><th>weighting</th><th>added</th><th>removed</th>"
        "<th>re-weighted</th><th>overlap</th></tr>"
    )
    for a, b, d, jaccard in cmp.diffs:
        parts.append(
            f"<tr><td>{esc(a)}</td><td>{esc(b)}</td><td>{len(d.added)}</td>"
            f"<td>{len(d.removed)}</td><td>{len(d.reweighted)}</td><td>{jaccard:.2f}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)
