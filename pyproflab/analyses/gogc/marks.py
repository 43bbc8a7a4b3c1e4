"""What the observed marks show about the pacer, for the fit (``fit`` rules 2
and 3b-5b): how much of the runway hurried marks used, the least floating
garbage an overrun mark carried, how much slower a mark runs with the
assists' CPU left out, the idle mark workers' CPU per idle core, the
GC share the limiter held, and the pacer's runway (rules 6 and 6b)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pyproflab.analyses.gogc.cost import wmean
from pyproflab.analyses.gogc.pacer import LIMITER_SHARE
from pyproflab.analyses.gogc.samples import Observation, Setting


def hurry_share(groups: list[dict[str, float]]) -> float:
    """``fit`` rule 2: the share of the widest runway hurried marks used, among those
    that stayed within it (1 when none was seen)."""
    got = [f["hurry"] for f in groups if f["hurried"] and f["hurry"] <= 1]
    return min(max(sum(got) / len(got), 0.5), 1.0) if got else 1.0


def fastest_mark_alloc(groups: list[dict[str, float]]) -> float:
    """``fit`` rule 2: the mark-time allocation of the fastest mark seen: marks that
    overran the widest runway (assists could not end them by the goal) show
    the least floating garbage a cycle carries whatever the setting, as seen
    (assists pace it, not the mean allocation rate)."""
    got = [f["mark_alloc"] for f in groups if f["hurry"] > 1 and math.isfinite(f["mark_alloc"])]
    return min(got) if got else 0.0


def idle_take(groups: list[dict[str, float]], cap: float, saturated: bool) -> float:
    """``fit`` rule 3b: the idle mark workers' CPU per cycle per idle core, the mean over
    the settings that show it (0 when CPU-bound: no P idles)."""
    got = [
        f["idle_mark"] / spare
        for f in groups
        if not saturated
        and math.isfinite(f["idle_mark"])
        and f["idle_mark"] > 0
        # the cores that would idle but for the idle workers
        and (spare := cap - f["process_cores"] + f["n"] * f["idle_mark"]) > 0
    ]
    return sum(got) / len(got) if got else 0.0


def slow_mark(ss: Sequence[dict[str, Any]]) -> float:
    """``pacer`` rule 7: all the workers' CPU over the unassisted workers'."""
    work, assist = wmean(ss, "work"), wmean(ss, "assist")
    if not (math.isfinite(work) and math.isfinite(assist)) or work - assist <= 0:
        return 1.0
    return max(work / (work - assist), 1.0)


def limiter_held(groups: list[dict[str, float]], cap: float, saturated: bool) -> float:
    """``fit`` rule 5b: the largest GC share a CPU-bound setting showed, when 50 % or
    more (the limiter held it there: ``pacer`` rule 6); else 0."""
    share = max((f["gc_cores"] / cap for f in groups), default=0.0) if saturated else 0.0
    return share if share >= LIMITER_SHARE else 0.0


def unheld(
    obs: Observation,
    groups: dict[Setting, dict[str, float]],
    weights: dict[Setting, float],
    cur: dict[str, float],
    saturated: bool,
) -> tuple[dict[Setting, list[dict[str, Any]]], dict[str, float]]:
    """``fit`` rule 3c: the settings the cost is fitted on, and the current one among
    them (the heaviest when the current setting was held)."""
    held = {
        k for k, f in groups.items() if saturated and f["gc_cores"] >= LIMITER_SHARE * obs.procs
    }
    keep = {k: v for k, v in obs.settings.items() if k not in held}
    if not held or not keep:
        return obs.settings, cur
    if obs.current in keep:
        return keep, cur
    return keep, groups[max(keep, key=lambda k: weights[k])]


def expected_max(values: Sequence[float], k: int) -> float:
    """The expected largest of ``k`` values drawn without replacement from
    ``values`` (all of them when fewer): deterministic, no sampling."""
    xs = sorted(values)
    n = len(xs)
    if n <= k:
        return xs[-1]
    return sum(x * math.comb(i, k - 1) for i, x in enumerate(xs)) / math.comb(n, k)


def peak_cons(obs: Observation) -> float:
    """``fit`` rule 6b's ``k``: the expected largest of 5 cycles' cons/mark over their
    mean; infinite (no bound) without two or more."""
    cons = [s["cons_mark"] for s in obs.samples if math.isfinite(s.get("cons_mark", math.nan))]
    mean = sum(cons) / len(cons) if len(cons) >= 2 else 0.0
    return expected_max(cons, 5) / mean if mean > 0 else math.inf


def runway_k(obs: Observation, scan: float) -> float:
    """``fit`` rule 6."""
    cons = [s["cons_mark"] for s in obs.samples if math.isfinite(s.get("cons_mark", math.nan))]
    if cons:
        return 3 * expected_max(cons, 5)
    seen = [
        s["pacer_runway"] for s in obs.samples if math.isfinite(s.get("pacer_runway", math.nan))
    ]
    return (sum(seen) / len(seen)) / scan if seen and scan > 0 else 0.0
