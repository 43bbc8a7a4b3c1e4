"""Renderings of ``PgoEffect`` (``pyproflab pgo effect``): text, JSON, HTML.

Rules: the CPU change first (cores per second on each side, the relative
change and its interval), then the functions whose CPU changed most (the
regressions analysis' rows, cum per second), the CPU of stack growth, the
memory measures, and the compiler's PGO decisions as one table in the order
it printed them (kind, position, caller, callee or target, cost, times).
Values keep three significant figures; JSON has them exact. A change
without an interval (one profile on a side) says ``[no interval]``. HTML escapes
every name.
"""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pyproflab.analyses.units import quantity
from pyproflab.reports.formatting import json_text, text_name

if TYPE_CHECKING:
    from pyproflab.analyses.pgo_effect import Change, Decision, PgoEffect


def _interval(rel: float | None, lo: float | None, hi: float | None) -> str:
    if rel is None or rel != rel:
        return "-"
    if lo is None or hi is None or lo != lo or hi != hi:  # one profile on a side
        return f"{rel:+.1%} [no interval]"
    return f"{rel:+.1%} [{lo:+.1%}, {hi:+.1%}]"


def _amount(v: float, unit: str) -> str:
    """Bytes in KiB/MiB/GiB (``1.45e+07 bytes`` was the heap's line); others as counted."""
    return quantity(v, "B") if unit == "bytes" else f"{v:.3g} {unit}"


def change_line(c: Change) -> str:
    """``WHAT: BEFORE -> AFTER, REL [LO, HI] (n profiles)``, each side with its unit."""
    mark = "" if c.significant else " (not significant)"
    return (
        f"{c.what}: {_amount(c.before, c.unit)} -> {_amount(c.after, c.unit)}, "
        f"{_interval(c.rel, c.lo, c.hi)}{mark} ({c.n_before} and {c.n_after} profiles)"
    )


def _row_line(r: dict[str, Any]) -> str:
    return (
        f"    {text_name(r['label'])}: "
        f"{r['cum_rate_base'] or 0:.3g} -> {r['cum_rate_new'] or 0:.3g}, "
        f"{_interval(r['cum_rel'], r['cum_rel_lo'], r['cum_rel_hi'])}"
        + (f", q {q:.2g}" if (q := r["cum_q"]) is not None and q == q else "")  # NaN: untested
    )


def decision_text(d: Decision) -> str:
    """One decision as the table shows it."""
    where = f"{d.file}:{d.line}:{d.column}"
    if d.kind.startswith("devirtualize"):
        what = f"{d.callee} -> {d.target}"
    else:
        what = f"{d.callee} (cost {d.cost}) into {d.caller}"
    times = f" x{d.count}" if d.count > 1 else ""
    return f"  {d.kind:<26} {text_name(where):<28} {text_name(what)}{times}"


def render_text(effect: PgoEffect, *, rows: int = 10) -> str:
    out = [f"pgo effect: {effect.before} -> {effect.after}"]
    if effect.cpu is not None:
        out.append(change_line(effect.cpu))
        unit = effect.regressions.rate_unit if effect.regressions is not None else ""
        out.append(f"  functions, cum ({unit}), change [interval], q (regressions):")
        out += [_row_line(r) for r in effect.cpu_rows[: rows or None]]
    if effect.stack_rows:
        out.append("  stack growth (CPU):")
        out += [_row_line(r) for r in effect.stack_rows]
    if effect.memory:
        out.append("memory:")
        out += ["  " + change_line(c) for c in effect.memory]
    if effect.decisions:
        kinds: dict[str, int] = {}
        for d in effect.decisions:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in kinds.items())
        out.append(f"the compiler's PGO decisions ({summary}):")
        out += [decision_text(d) for d in effect.decisions]
    out += [f"note: {n}" for n in effect.notes]
    return "\n".join(out) + "\n"


def render_json(effect: PgoEffect) -> str:
    doc = {
        "before": effect.before,
        "after": effect.after,
        "cpu": asdict(effect.cpu) if effect.cpu is not None else None,
        "cpu_rows": effect.cpu_rows,
        "stack_rows": effect.stack_rows,
        "memory": [asdict(c) for c in effect.memory],
        "decisions": [asdict(d) for d in effect.decisions],
        "notes": effect.notes,
    }
    return json_text(doc, indent=2)


def render_html(effect: PgoEffect) -> str:
    esc = html.escape
    parts = [f"<p><b>PGO effect</b>: {esc(effect.before)} &rarr; {esc(effect.after)}</p><ul>"]
    changes = ([effect.cpu] if effect.cpu is not None else []) + effect.memory
    parts += [f"<li>{esc(change_line(c))}</li>" for c in changes]
    parts.append("</ul>")
    if effect.decisions:
        parts.append(
            "<table><tr><th>decision</th><th>position</th><th>caller</th><th>callee</th>"
            "<th>to</th><th>cost</th><th>times</th></tr>"
        )
        for d in effect.decisions:
            parts.append(
                f"<tr><td>{esc(d.kind)}</td><td>{esc(f'{d.file}:{d.line}:{d.column}')}</td>"
                f'<td class="name">{esc(d.caller or "")}</td><td class="name">{esc(d.callee)}</td>'
                f'<td class="name">{esc(d.target or "")}</td><td>{d.cost or ""}</td>'
                f"<td>{d.count}</td></tr>"
            )
        parts.append("</table>")
    parts += [f"<p>note: {esc(n)}</p>" for n in effect.notes]
    return "".join(parts)
