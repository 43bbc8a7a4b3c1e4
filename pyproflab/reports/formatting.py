"""How reports write numbers and tables as text: one place for the text grid,
percentages and units.

Rules:

- ``grid``: columns two spaces apart, each as wide as its widest cell (the
  header counts), aligned left (``l``) or right (``r``) by ``align``, one letter
  per column; trailing spaces are dropped.
- ``pct``: a fraction as a percentage (``0.123`` -> ``12.3%``); ``signed`` adds
  ``+`` to gains. None, NaN and infinities print as ``missing``.
- ``mib``, ``seconds``: bytes in MiB and durations in the unit that keeps them
  readable (µs, ms, s); None prints as ``missing``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def grid(head: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """The header and rows as aligned text lines (see the module rules)."""
    if len(align) != len(head):
        raise ValueError(f"align has {len(align)} letters for {len(head)} columns")
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if a == "r" else c.ljust(w)
            for c, w, a in zip(cells, widths, align, strict=True)
        ).rstrip()

    return [line(head)] + [line(r) for r in rows]


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
