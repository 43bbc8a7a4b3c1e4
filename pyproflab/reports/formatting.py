"""How reports write numbers and tables as text: one place for the text grid,
percentages and units.

Rules:

- ``grid``: columns two spaces apart, each as wide as its widest cell in
  terminal cells (the header counts; a wide character counts two), aligned
  left (``l``) or right (``r``) by ``align``, one letter per column; trailing
  spaces are dropped; control characters print as ``\\xNN``. pprof's own
  layouts (top, tree, list, traces) are printed by their reports, character
  for character as pprof prints them, except that a name's control characters
  other than tab print as ``\\xNN`` there too (``text_name``; pprof prints them raw,
  so a crafted name could recolour or retitle the terminal, or forge a row).
- ``pct``: a fraction as a percentage (``0.123`` -> ``12.3%``); ``signed`` adds
  ``+`` to gains. None, NaN and infinities print as ``missing``.
- ``mib``, ``seconds``: bytes in MiB and durations in the unit that keeps them
  readable (µs, ms, s); None prints as ``missing``.
- ``json_text``: every JSON document a report writes: keys sorted, text as
  UTF-8, NaN and infinities as ``null`` (JSON has no such numbers: Python's
  ``NaN`` token breaks jq, JavaScript and every strict parser), times in ISO
  8601, anything else JSON lacks as its ``str``.
- ``plotly_text``: every text a plotly figure shows (labels, hover, titles,
  legend names) goes through it: plotly reads a pseudo-HTML, so ``<``, ``>``
  and ``&`` are escaped; ``"`` is left as is, because plotly does not decode
  ``&quot;``. Names come from untrusted profiles.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from datetime import date
from typing import Any


def grid(head: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """The header and rows as aligned text lines (see the module rules), laid out by
    rich's ``Table``: widths in terminal cells, cells taken as plain text (rich
    markup in a name stays text), nothing wrapped or cut."""
    if len(align) != len(head):
        raise ValueError(f"align has {len(align)} letters for {len(head)} columns")
    if not head:
        return [""] * (len(rows) + 1)
    import io

    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False, header_style="")
    for h, a in zip(head, align, strict=True):
        table.add_column(Text(inert(h)), justify="right" if a == "r" else "left", no_wrap=True)
    for r in rows:
        table.add_row(*(Text(inert(c)) for c in r))
    width = sum(
        max([cell_len(inert(h))] + [cell_len(inert(r[i])) for r in rows])
        for i, h in enumerate(head)
    )
    out = io.StringIO()
    console = Console(file=out, width=width + 2 * len(head) + 1, color_system=None, highlight=False)
    console.print(table)
    return [line.rstrip() for line in out.getvalue().split("\n")[:-1]]


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_TAB = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def inert(cell: str, *, tab: bool = False) -> str:
    """``cell`` with control characters written as ``\\xNN``: a name from a profile
    cannot move the cursor or recolour the terminal. ``tab``: a tab stays a tab
    (pprof's layouts, where real names hold tabs: ``receive_buf\\t[virtio_net]``)."""
    pattern = _CONTROL_BUT_TAB if tab else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", cell)


def text_name(name: str) -> str:
    """A profile's name as the text layouts print it: ``inert``, tabs kept."""
    return inert(name, tab=True)


def finite(v: Any) -> bool:
    """A real number that is neither NaN nor infinite."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def pct(v: Any, *, missing: str = "", signed: bool = False, digits: int = 1) -> str:
    """The fraction ``v`` as a percentage (see the module rules)."""
    if not finite(v):
        return missing
    return f"{100 * v:{'+' if signed else ''}.{digits}f}%"


def mib(v: float | None, *, missing: str = "", space: str = "") -> str:
    """Bytes as MiB with one decimal."""
    return missing if v is None else f"{v / 2**20:.1f}{space}MiB"


def seconds(v: float | None, *, missing: str = "") -> str:
    """A duration in seconds, printed in µs, ms or s."""
    if v is None:
        return missing
    if v < 1e-3:
        return f"{v * 1e6:.0f}µs"
    if v < 1:
        return f"{v * 1e3:.2f}ms"
    return f"{v:.2f}s"


def plotly_text(s: str) -> str:
    """``s`` escaped for plotly's pseudo-HTML text (see the module rules)."""
    return html.escape(s, quote=False)


def json_text(doc: Any, *, indent: int = 1) -> str:
    """``doc`` as a JSON document and a newline (see the module rules)."""
    return (
        json.dumps(
            json_value(doc),
            indent=indent,
            sort_keys=True,
            ensure_ascii=False,
            allow_nan=False,
            default=str,
        )
        + "\n"
    )


def json_value(v: Any) -> Any:
    """``v`` with every non-finite float as None and every time as ISO 8601, through
    dicts, lists and tuples."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    if isinstance(v, date):
        return v.isoformat()
    return v


def csv_cell(v: Any) -> Any:
    """``v`` as a CSV cell: empty for None and non-finite numbers, times in ISO
    8601, as JSON writes them (``json_value``)."""
    v = json_value(v)
    return "" if v is None else v
