"""Which observed GOGC setting the model takes as today's (``Observation.current``).

Rule: the setting with the most weight in the runs that overlap the latest run
in time (instances running side by side), by absolute time when every sample
has it (gctrace's own seconds count from each process's start); a note says
when those runs ran more than one setting.
"""

from __future__ import annotations

from typing import Any

Setting = tuple[float | None, float | None]  # (GOGC or None for off, limit bytes or None)
MiB = float(1 << 20)


def setting_label(s: Setting) -> str:
    """``GOGC=100``, ``GOGC=off, limit 512MiB``."""
    g, m = s
    out = f"GOGC={'off' if g is None else f'{g:g}'}"
    return out + (f", limit {m / MiB:.0f}MiB" if m is not None else "")


def latest_setting(samples: list[dict[str, Any]], notes: list[str]) -> Setting:
    """The setting with the most weight (ties: the lower, in ``settings`` order)
    in the runs that overlap the latest run in time (instances running side by
    side), not in the latest run alone: which of two instances' last cycles came
    last is a matter of milliseconds (on a make demo store v1-a's, GOGC=50, 55 ms
    after v1-b's, GOGC=200), and it named the fleet's setting. When those runs
    ran other settings too, a note says so."""
    absolute = all(s.get("taken") is not None for s in samples)
    spans: dict[Any, list[float]] = {}
    for s in samples:
        t = s["taken"] if absolute else s.get("t_end", 0.0)
        lo_hi = spans.setdefault(s["run"], [t, t])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], t), max(lo_hi[1], t)
    last_start = spans[max(spans, key=lambda r: (spans[r][1], spans[r][0]))][0]
    live = {r for r, (_, hi) in spans.items() if hi >= last_start}
    weight: dict[Setting, float] = {}
    for s in samples:
        if s["run"] in live:
            weight[s["setting"]] = weight.get(s["setting"], 0.0) + s["w"]
    order = sorted(weight, key=lambda k: (k[0] is None, k[0] or 0.0, k[1] is None, k[1] or 0.0))
    best = max(order, key=lambda k: weight[k])
    note = (
        f"the {len(live)} latest runs, side by side, ran {len(order)} settings ("
        + ", ".join(setting_label(k) for k in order)
        + f"): {setting_label(best)}, the one with the most weight in the model, is taken "
        "as the current setting; select one instance or give --gogc to choose"
    )
    if len(order) > 1 and note not in notes:  # once, though derived observations recompute it
        notes.append(note)
    return best
