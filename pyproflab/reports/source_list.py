"""Text like ``go tool pprof -list``: the total, then per routine a header line,
its flat and cum, and its source lines with their values.

Layout (pprof's ``printSource``): ``Total: V``; per routine ``ROUTINE ====...
NAME in FILE``, then ``FLAT CUM (flat, cum) P% of Total``, then either
`` Error: ...`` or one line per source line: flat and cum right-aligned in 10
columns (``.`` for zero), the line number in 6, ``:`` and the text. A
function without source information is one line. Every value is scaled on
its own (pprof does not pick one unit for a listing), unless ``unit`` is given.
"""

from __future__ import annotations

import html

from pyproflab.analyses import units
from pyproflab.reports.formatting import text_name


def render_list_text(result, unit: str | None = None, exact: bool = False) -> str:
    """``result`` (a ``ListResult``) as ``go tool pprof -list`` prints it."""
    base = result.sample_type.unit
    out_unit = unit or "minimum"

    def fmt(v: int) -> str:
        return str(v) if exact else units.scaled_label(v, base, out_unit)

    def dot(v: int) -> str:
        return "." if v == 0 else fmt(v)

    out = [f"Total: {fmt(result.total)}"]
    for r in result.routines:
        if r.file is None:
            out.append(f"No source information for {text_name(r.name)}")
            continue
        out.append(f"ROUTINE ======================== {text_name(r.name)} in {text_name(r.file)}")
        out.append(
            f"{fmt(r.flat):>10} {fmt(r.cum):>10} (flat, cum) "
            f"{units.percentage(r.cum, result.total)} of Total"
        )
        if r.error:
            out.append(f" Error: {text_name(r.error)}")
            continue
        out += [f"{dot(ln.flat):>10} {dot(ln.cum):>10} {ln.lineno:6d}:{ln.text}" for ln in r.lines]
    return "\n".join(out) + "\n"


def render_list_html(result, **options) -> str:
    """A notebook's view: the text, as ``render_list_text`` prints it, in a ``<pre>``."""
    return f'<pre class="pyproflab-list">{html.escape(render_list_text(result, **options))}</pre>'
