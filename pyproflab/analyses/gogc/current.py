"""Which observed GOGC setting the model takes as today's (``Observation.current``).

Rules:

- With absolute times (every sample has one): the setting with the most
  weight in the runs that overlap the latest run in time (instances running
  side by side); a note says when those runs ran more than one setting.
- Without (gctrace's ``@Ns`` counts from each process's start, so every
  log's runs begin at 0): a log's runs are in its order, so only each log's
  (instance's) last run is a candidate, its earlier runs having come before
  it; different logs cannot be ordered. The setting with the most weight
  in those last runs is taken, and when they ran more than one setting the
  note says that the logs do not say which ran last (side by side or days
  apart) and how to say it (``--gogc``; ``ingest-gc --process-start`` gives
  the cycles their times). Before, the relative seconds were compared as
  times: tests/testdata/gc/runs/restart.log (GOGC=100, then a restart at
  GOGC=400) was "current GOGC=100" with a note calling its two runs "side
  by side", and ``--budget 1.5x`` was of GOGC=100's peak (18 MiB, not
  GOGC=400's 46).
"""

from __future__ import annotations

from typing import Any

Setting = tuple[float | None, float | None]  # (GOGC or None for off, limit bytes or None)
MiB = float(1 << 20)
TAKEN = "is taken as the current setting"  # in every note latest_setting writes


def setting_label(s: Setting) -> str:
    """``GOGC=100``, ``GOGC=off, limit 512MiB``."""
    g, m = s
    out = f"GOGC={'off' if g is None else f'{g:g}'}"
    return out + (f", limit {m / MiB:.0f}MiB" if m is not None else "")


def _overlapping(samples: list[dict[str, Any]]) -> set[Any]:
    """The runs that overlap the latest run in absolute time (module rules)."""
    spans: dict[Any, list[float]] = {}
    for s in samples:
        lo_hi = spans.setdefault(s["run"], [s["taken"], s["taken"]])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], s["taken"]), max(lo_hi[1], s["taken"])
    last_start = spans[max(spans, key=lambda r: (spans[r][1], spans[r][0]))][0]
    return {r for r, (_, hi) in spans.items() if hi >= last_start}


def _last_of_each_log(samples: list[dict[str, Any]]) -> set[Any]:
    """Each instance's (log's) last run: runs are numbered in each log's order."""
    last: dict[Any, Any] = {}
    for s in samples:
        key = s.get("instance")
        last[key] = max(last.get(key, s["run"]), s["run"])
    return set(last.values())


def latest_setting(samples: list[dict[str, Any]], notes: list[str]) -> Setting:
    """The setting with the most weight (ties: the lower, in ``settings`` order)
    in the runs that may be today's (module rules), not in the latest run alone:
    which of two instances' last cycles came last is a matter of milliseconds
    (on a make demo store v1-a's, GOGC=50, 55 ms after v1-b's, GOGC=200), and it
    named the fleet's setting. When those runs ran other settings too, a note
    says so."""
    absolute = all(s.get("taken") is not None for s in samples)
    live = _overlapping(samples) if absolute else _last_of_each_log(samples)
    weight: dict[Setting, float] = {}
    for s in samples:
        if s["run"] in live:
            weight[s["setting"]] = weight.get(s["setting"], 0.0) + s["w"]
    order = sorted(weight, key=lambda k: (k[0] is None, k[0] or 0.0, k[1] is None, k[1] or 0.0))
    best = max(order, key=lambda k: weight[k])
    ran = f"ran {len(order)} settings (" + ", ".join(setting_label(k) for k in order) + ")"
    took = f"{setting_label(best)}, the one with the most weight in the model, {TAKEN}"
    note = (
        f"the {len(live)} latest runs, side by side, {ran}: {took}; select "
        "one instance or give --gogc to choose"
        if absolute
        else f"the {len(live)} logs' last runs {ran}, and their times count from each "
        "process's start: which ran last (side by side or days apart) the logs do not say. "
        f"{took} (a relative budget is of its peak); give --gogc, or "
        "ingest-gc --process-start for the cycles' times"
    )
    # A derived observation (gctrace with Prometheus) recomputes it, over other
    # weights: its note replaces its sources', which may have taken another setting
    # (a make demo store said GOGC=200 and GOGC=50 were each "taken as the current").
    notes[:] = [n for n in notes if TAKEN not in n]
    if len(order) > 1:
        notes.append(note)
    return best
