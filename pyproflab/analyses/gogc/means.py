"""Means over GC samples, each weighted by what it stands for.

A sample (a gctrace cycle, or a Prometheus interval) carries ``w``, the
seconds it stands for, and ``n``, its cycles a second. A rate or a state (the
cycles a second, bytes a second, the heap, the process's cores) is weighted by
its seconds. A figure of one cycle (``PER_CYCLE``: its GC CPU and their parts,
its mark's clock and allocation, the bytes it allocates) is weighted by the
cycles it stands for, ``w·n``: then the mean rate times the mean cost per cycle
is the GC's CPU over the samples' time, as measured, even where runs at one
setting cycle at different rates. Weighted by seconds, two gctrace logs at
GOGC 100, at 1 and 10 cycles a second with 0.26 and 0.06 s of GC CPU a cycle,
gave 0.440 GC cores for the 0.291 they spent; on the validation recordings,
graph's and lru's GC share at GOGC 100 (gctrace) came out 56.4 and 55.6 % for
the runs' 54.8 and 54.9 % (now 54.8 and 54.6 %).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

PER_CYCLE = frozenset(
    {"cost", "work", "idle_mark", "assist", "pause", "mark_s", "mark_alloc", "per_cycle"}
)


def wmean(ss: Iterable[dict[str, Any]], key: str) -> float:
    """The mean of ``key`` over the samples that have it (module rules); NaN when
    none has it."""
    num = den = 0.0
    per_cycle = key in PER_CYCLE
    for s in ss:
        v = s.get(key)
        if v is None or not math.isfinite(v):
            continue
        w = s["w"]
        if per_cycle and math.isfinite(n := s.get("n", math.nan)):
            w *= n
        num += w * v
        den += w
    return num / den if den > 0 else math.nan
