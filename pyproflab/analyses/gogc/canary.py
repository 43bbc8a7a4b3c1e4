"""A canary that measured what the model predicts (``predict`` rule 4's claim).

The plan claims the interval its canary would leave by refitting on the
observation plus the canary's cycles as the model now expects them: the
width a refit would have if the canary measured the prediction, with the
current setting's noise from sample to sample. Rules:

1. The canary is one run of its own at its setting: the current setting's
   samples in their order from one of its runs on, repeated until they
   cover the plan's cycles (gctrace: one sample a cycle; Prometheus:
   intervals of as many cycles as the current setting's, at least one).
   One canary run is one draw of that noise: the claim is the median over
   canaries drawn from each of the current setting's runs (at most
   ``DRAWS``). Replayed, a canary drawn from each of queue's nine GOGC=100
   runs left its GC share (gctrace) 0.33-0.66 wide, as its recorded GOGC=400
   runs did (0.39-0.68): drawn from the first run alone, the claim was one
   such draw.
2. Each figure is the current sample's times the model's point at the
   canary over its point at the current setting: heap goal and peak heap by
   the goal's; the marked heap by the marked heap's; the mark-time
   allocation, cons/mark and the runway an interval shows by the floating
   garbage's (marked heap less live heap); cycles a second by the cycles';
   GC CPU per cycle, its parts and the mark's length by the GC CPU per
   cycle's; the mutator's and the process's cores by theirs; the allocation
   rate by the mutator's cores when CPU-bound (``α`` bytes a core-second),
   else as seen (paced); the bytes a cycle allocates by the allocation over
   the cycles. A sample keeps its cycles (its seconds over the cycles'
   ratio). Roots, GOMAXPROCS, idle share and the memory ratios stay as seen;
   the canary's peak RSS is the point's peak memory.
"""

from __future__ import annotations

import math
from itertools import cycle, islice
from typing import Any

from pyproflab.analyses.gogc.samples import Observation, Setting

DRAWS = 9
_BY = {
    "goal": ("goal", "peak_heap"),
    "marked": ("marked",),
    "floating": ("mark_alloc", "cons_mark", "pacer_runway"),
    "n": ("n",),
    "cost": ("cost", "work", "background", "assist", "idle_mark", "pause", "mark_s"),
    "mutator": ("mutator",),
    "process": ("busy", "busy_all"),
    "alloc": ("alloc",),
    "per_cycle": ("per_cycle",),
}


def ratio(a: float, b: float) -> float:
    return a / b if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0 else 1.0


def ratios(now: dict[str, Any], at: dict[str, Any], live: float, saturated: bool) -> dict:
    """Rule 2: the canary's figure over the current setting's, per group of ``_BY``."""
    r = {k: ratio(at[k], now[k]) for k in ("goal", "marked")}
    r["floating"] = ratio(at["marked"] - live, now["marked"] - live)
    r["n"] = ratio(at["cycles_per_min"], now["cycles_per_min"])
    r["cost"] = ratio(at["gc_cores"], now["gc_cores"]) / r["n"]
    mut = (at["process_cores"] - at["gc_cores"], now["process_cores"] - now["gc_cores"])
    r["mutator"] = ratio(*mut)
    r["process"] = ratio(at["process_cores"], now["process_cores"])
    r["alloc"] = r["mutator"] if saturated else 1.0
    r["per_cycle"] = r["alloc"] / r["n"]
    return r


def draws(obs: Observation) -> list[int]:
    """The current setting's runs a canary is drawn from (rule 1)."""
    cur = obs.settings.get(obs.current, obs.samples)  # type: ignore[arg-type]
    return sorted({s["run"] for s in cur})[:DRAWS]


def observation(
    obs: Observation,
    now: dict[str, Any],
    at: dict[str, Any],
    setting: Setting,
    cycles: int,
    live: float,
    first: int,
) -> Observation:
    """``obs`` with the canary of rule 1 at ``setting``, drawn from run ``first``
    on (``now``/``at``: the model's points at the current setting and there)."""
    ss = obs.settings.get(obs.current, obs.samples)  # type: ignore[arg-type]
    cur = [s for s in ss if s["run"] == first] + [s for s in ss if s["run"] != first]
    r = ratios(now, at, live, obs.saturated())
    run = max(s["run"] for s in obs.samples) + 1
    made, covered = [], 0.0
    for s in islice(cycle(cur), 100_000):
        x = dict(s, setting=setting, run=run, instance="canary", w=s["w"] / r["n"])
        for group, keys in _BY.items():
            for k in keys:
                if isinstance(x.get(k), float) and math.isfinite(x[k]):
                    x[k] *= r[group]
        made.append(x)
        covered += x["w"] * x["n"]
        if covered >= cycles:
            break
    out = Observation(
        [*obs.samples, *made],
        obs.procs,
        obs.source,
        dict(obs.provenance),
        [],
        dict(obs.peak_rss),
        obs.current,
        obs.container,
    )
    out.peak_rss[setting] = [at["peak_memory"]]
    return out
