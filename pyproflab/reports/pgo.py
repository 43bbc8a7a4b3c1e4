"""Renderings of ``PgoResult`` (what went into a default.pgo and its hot edges)
and ``EdgeDiff`` (``pgo diff``): text, JSON, HTML.

Rules: text lists the inputs, skipped inputs, safeguards, trimming, the
refusal if any, then the hot edges (caller -> callee, call-site offset,
weight, share, cumulative share), marking those inside the compiler's 99%
cutoff with ``*``; ``edges`` limits the rows (0: all). JSON has every
edge with exact integer weights; its shares are percentages, named so
(``share_pct``, ``cum_share_pct``, ``old_share_pct``: elsewhere a share is a
fraction). HTML escapes every name (names come from
profiles, which are untrusted).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pyproflab.reports.formatting import json_text, text_name

if TYPE_CHECKING:
    from pyproflab.analyses.pgo import PgoResult
    from pyproflab.analyses.pgo_edges import EdgeDiff, EdgeSet

FORMATS = ("text", "json", "html")


def _edge_set(result: PgoResult) -> EdgeSet:
    return result.verified or result.edges


def _fmt_cores(c: float | None) -> str:
    return "-" if c is None else f"{c:.2f}"


def render_text(result: PgoResult, *, edges: int = 20) -> str:
    """The human summary (see the module rules)."""
    out: list[str] = []
    w = out.append
    w(
        f"inputs: {len(result.inputs)} CPU profile{'' if len(result.inputs) == 1 else 's'}"
        + (f" (of {result.candidates} matching)" if result.candidates else "")
        + f", weight={result.weight}"
    )
    for i in result.inputs:
        extra = f", x{i.factor}" if result.weight != "none" else ""
        w(
            f"  {text_name(i.label)}: {i.samples} samples, {i.duration_nanos / 1e9:.1f}s, "
            f"{_fmt_cores(i.cores)} cores{extra}"
        )
    for label, why in result.skipped:
        w(f"  skipped {text_name(label)}: {why}")
    if result.safeguarded:
        for name, weight in result.safeguarded.items():
            w(f"safeguard: renamed {text_name(name)} (edge weight {weight} kept)")
    elif result.safeguards:
        w(f"safeguards: none of {len(result.safeguards)} listed functions in the profile")
    if result.preempt_folded[0]:
        w(preempt_line(result))
    if result.trim_leaf is not None:
        w(f"trimmed to {result.trim_leaf} leaf frames: {'yes' if result.trimmed else 'no'}")
    if result.trim_report is not None:
        w(str(result.trim_report))
    for note in result.notes:
        w(f"note: {note}")
    if result.refusal:
        w(f"REFUSED: {result.refusal}")
        return "\n".join(out) + "\n"
    if result.output:
        w(f"wrote {result.output}: {result.profile.num_samples if result.profile else 0} samples")
    if result.verify_note:
        w(result.verify_note)
    es = _edge_set(result)
    hot = es.hot
    w(f"call edges: {len(es)}, total weight {es.total}, {len(hot)} hot (99% cutoff)")
    if es.edges:
        w(f"{'':1} {'weight':>12} {'share':>7} {'cum':>7}  edge")
        rows = es.edges if edges <= 0 else es.edges[:edges]
        for e in rows:
            mark = "*" if e.hot else " "
            w(
                f"{mark} {e.weight:>12} {e.share:6.2f}% {e.cum_share:6.2f}%  "
                f"{text_name(e.caller)} -> {text_name(e.callee)} (+{e.offset})"
            )
        if len(rows) < len(es.edges):
            w(f"  … {len(es.edges) - len(rows)} more edges (--edges 0 shows all)")
    return "\n".join(out) + "\n"


def preempt_line(result: PgoResult) -> str:
    """What folding runtime.asyncPreempt did (pgo_edges.fold_preemption)."""
    n, weight = result.preempt_folded
    total = _edge_set(result).total
    share = f" ({100.0 * weight / total:.1f}% of the edge weight)" if total else ""
    return (
        f"preemption: {n} samples of weight {weight}{share} in runtime.asyncPreempt counted "
        "for the functions they interrupted (not call edges)"
    )


def _edges_json(es: EdgeSet | None) -> list[dict[str, Any]] | None:
    if es is None:
        return None
    return [
        {
            "caller": e.caller,
            "callee": e.callee,
            "offset": e.offset,
            "weight": e.weight,
            "share_pct": e.share,
            "cum_share_pct": e.cum_share,
            "hot": e.hot,
        }
        for e in es.edges
    ]


def render_json(result: PgoResult) -> str:
    doc = {
        "ok": result.ok,
        "refusal": result.refusal,
        "output": result.output,
        "output_samples": result.profile.num_samples if result.profile else None,
        "weight": result.weight,
        "candidates": result.candidates,
        "inputs": [
            {
                "label": i.label,
                "samples": i.samples,
                "duration_nanos": i.duration_nanos,
                "cpu_nanos": i.cpu_nanos,
                "cores": i.cores,
                "factor": i.factor,
            }
            for i in result.inputs
        ],
        "skipped": [{"label": lbl, "why": why} for lbl, why in result.skipped],
        "safeguards": list(result.safeguards),
        "safeguarded": result.safeguarded,
        "fold_preempt": result.fold_preempt,
        "preempt_folded": {"samples": result.preempt_folded[0], "weight": result.preempt_folded[1]},
        "trim_leaf": result.trim_leaf,
        "max_edges": result.max_edges,
        "trim_report": None
        if result.trim_report is None
        else {
            "edges_before": result.trim_report.edges_before,
            "edges_after": result.trim_report.edges_after,
            "weight_dropped": result.trim_report.weight_dropped,
            "hot_lost": len(result.trim_report.hot_lost),
        },
        "trimmed": result.trimmed,
        "notes": result.notes,
        "total_weight": _edge_set(result).total,
        "edges": _edges_json(_edge_set(result)) if result.ok else [],
        "verified": result.verified is not None,
        "verify_note": result.verify_note,
    }
    return json_text(doc, indent=2)


def render_html(result: PgoResult, *, edges: int = 50) -> str:
    esc = html.escape
    parts = [
        f"<p><b>PGO profile</b>: {len(result.inputs)} CPU profiles, weight={esc(result.weight)}</p>"
    ]
    if result.refusal:
        parts.append(f"<p><b>Refused:</b> {esc(result.refusal)}</p>")
        return "".join(parts)
    for note in result.notes:
        parts.append(f"<p>note: {esc(note)}</p>")
    if result.preempt_folded[0]:
        parts.append(f"<p>{esc(preempt_line(result))}</p>")
    es = _edge_set(result)
    parts.append(
        "<table><tr><th>hot</th><th>weight</th><th>share</th><th>cum</th>"
        "<th>caller</th><th>callee</th><th>offset</th></tr>"
    )
    for e in es.edges[: edges or None]:
        parts.append(
            f"<tr><td>{'*' if e.hot else ''}</td><td>{e.weight}</td>"
            f"<td>{e.share:.2f}%</td><td>{e.cum_share:.2f}%</td>"
            f'<td class="name">{esc(e.caller)}</td><td class="name">{esc(e.callee)}</td>'
            f"<td>{e.offset}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)


# --- diff ----------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}%"


def diff_text(diff: EdgeDiff) -> str:
    """``render_diff_text`` with the sides named as the diff names them."""
    return render_diff_text(diff, old=diff.old_name, new=diff.new_name)


def render_diff_text(diff: EdgeDiff, *, old: str = "OLD", new: str = "NEW") -> str:
    out: list[str] = []
    w = out.append
    w(
        f"hot edges: {diff.old_hot} in {old} (total weight {diff.old_total}), "
        f"{diff.new_hot} in {new} (total weight {diff.new_total})"
    )
    if not diff.changed:
        w(f"no change in the hot edges (share moves under {diff.min_change} points ignored)")
        return "\n".join(out) + "\n"
    for title, rows in (
        ("added", diff.added),
        ("removed", diff.removed),
        ("re-weighted", diff.reweighted),
    ):
        if not rows:
            continue
        w(f"{title} ({len(rows)}):")
        for c in rows:
            w(
                f"  {_pct(c.old_share):>8} -> {_pct(c.new_share):>8}  "
                f"({c.old_weight if c.old_weight is not None else '-'} -> "
                f"{c.new_weight if c.new_weight is not None else '-'})  {text_name(str(c.key))}"
            )
    if diff.unchanged:
        w(f"unchanged: {diff.unchanged} hot edges")
    return "\n".join(out) + "\n"


def render_diff_json(diff: EdgeDiff) -> str:
    def rows(cs):
        return [
            {
                "caller": c.key.caller,
                "callee": c.key.callee,
                "offset": c.key.offset,
                "old_weight": c.old_weight,
                "new_weight": c.new_weight,
                "old_share_pct": c.old_share,
                "new_share_pct": c.new_share,
                "old_hot": c.old_hot,
                "new_hot": c.new_hot,
            }
            for c in cs
        ]

    return json_text(
        {
            "old_total": diff.old_total,
            "new_total": diff.new_total,
            "old_hot": diff.old_hot,
            "new_hot": diff.new_hot,
            "min_change": diff.min_change,
            "changed": diff.changed,
            "added": rows(diff.added),
            "removed": rows(diff.removed),
            "reweighted": rows(diff.reweighted),
            "unchanged": diff.unchanged,
        },
        indent=2,
    )
