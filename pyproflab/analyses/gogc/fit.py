"""The model's parameters from every observed setting at once (``pacer.Params``).

Rules (each figure a weighted mean over its samples, a rate by the seconds a
sample stands for, a figure of one cycle by its cycles: ``means``; ``S = L +
R`` the scan work, rule 3):

1. Truly live heap ``L``: ``H − B`` per setting (the marked heap less what
   was allocated black while marking), averaged over settings by weight.
   Roots ``R``: their mean.
2. Floating garbage ``B_nat`` (``pacer`` rule 3). A setting whose mark-time
   allocation stayed below 60 % of the widest runway, ``(19/64)·D``, shows it
   unhurried: ``B_nat`` is its ``B``. Any other setting was hurried by
   assists; the share of that runway its marks used is ``hurry`` (the mean
   over hurried settings that stayed within it, 0.5-1; 1 when none; ``pacer``
   rule 3 stops ``B`` there). A setting whose marks overran the runway shows
   the fastest mark's allocation, ``B_min``: the least floating garbage at
   any setting (the smallest such ``B`` as seen, unscaled: assists pace an
   overrun mark, not the mean allocation rate; 0 when none). A
   hurried setting's ``B_nat`` is estimated as the mark workers' CPU ``W`` done at
   the background workers' 25 % of P plus the CPU idle workers found,
   ``T_nat = W/(P/4 + idle_rate)``, times the mark-time allocation rate
   ``B/T``. Unhurried settings, when any, decide it (identified); else the
   estimate is the point and the range runs from the largest ``B`` seen
   (floating garbage does not shrink when the runway grows) to
   ``B_NAT_RANGE`` × the estimate. Each setting's figure is scaled to the
   reference allocation rate (the current setting's).
2b. ``σ`` (``pacer`` rule 3), how much of ``hurry`` holds for a mark
   squeezed into a runway shorter than ``B_nat``: not identified, point 1,
   range [0, 1] (at 0 the assists' pace alone, ``1 − e^(−B_nat/r)``).
3. GC CPU per cycle ``C = c0 + c1·S + c2·goal`` (``cost``): the fixed
   ``c0`` has the range of the non-negative terms that put every setting's
   cost within its runs' spread, its point the middle of the exact fits (two
   settings or one) or least squares (three or more); ``c1`` and ``c2`` follow
   from it, by NNLS when the settings' mean ``goal/S`` differ by 20 % or more,
   else split by ``θ``: point ``THETA``, range ``[0, THETA_MAX]``.
   The costs are the mark's work: GC CPU less the idle mark workers' (3b).
   ``S`` is what the mark scans, ``L + R`` (per setting ``H − B + R``), not
   the marked heap ``H``: objects allocated while marking are allocated
   black (counted as marked, never scanned) and are garbage by the next
   mark. On the validation workloads, recorded with the CPU they asked for,
   graph's GC CPU per cycle stayed at 0.07-0.09 core-seconds and lru's at
   0.06 from GOGC 25 to 800 while their marked heaps grew 3.5x (graph 51 to
   214 MiB, the live heap 26-27 MiB). The settings' costs are taken as
   measured (an earlier rule scaled a CPU-bound setting's by its mutator's
   speed, to cancel the load of a shared machine; on quiet recordings that
   moved the cost with GOGC, and the GC share at GOGC 800 came out 2.6x).
3b. Idle mark workers (``pacer`` rule 4): ``ι``, their CPU per cycle per core
   that would idle without them (GOMAXPROCS − the process's cores + theirs),
   the mean over the settings that show them; 0 when CPU-bound (service's
   took 0.3 ms a cycle at GOGC 25, at 1.99 of 2 cores, 9-11 at 200-400).
3c. A setting the limiter held (rule 5b: CPU-bound, GC at half the CPU or
   more) is left out of the cost when an unheld one is seen: its GC CPU per
   cycle is what the limiter left it, the assists it cut not spent (lru's
   was 53.6-54.7 ms a cycle at GOGC 25-50, where the limiter held it, 65.5-67
   at 100-200). With graph's and lru's GOGC 100 in it, the cost per cycle
   predicted at 400 and 800 from GOGC 100 and 200 came out up to 12 % high
   (lru, gctrace), and their GC share there up to 44 %.
4. The mutator (``pacer`` rule 5; ``mutator``'s rules): per setting, its CPU
   ``N``, cycles a second ``n`` and the sweep regressor ``n·goal``. The sweep
   term ``s`` is fitted on paced settings, else a prior; the mutator's CPU
   per cycle ``κ`` is bounded by CPU-bound settings (the rise of its bytes
   per core-second with GOGC: graph 897 at GOGC 100 to 1305 at 800), else
   a range from the current setting; ``α`` or ``N0`` is the current
   setting's, the rest of its CPU.
5. CPU-bound: the median idle share of the samples under 3 % (``Observation.
   saturated``). ``cap``: GOMAXPROCS (the runtime's CPU accounting is P-time).
5b. The limiter's hold (``pacer`` rule 6): CPU-bound, the largest GC share of
   ``cap`` an observed setting showed, when 50 % or more (graph's and lru's
   at GOGC 100: 56 %); else none.
6. The pacer's runway per scan byte: 3 × the expected largest of 5
   samples' cons/mark ratios (gctrace's cycles, or Prometheus intervals with
   the mark worker classes), else the runway the Prometheus intervals show.
   Not that runway first: where an interval's trigger sat at its floor
   (``floor_mark``), the runway it shows is the floor's, less than the pacer
   asked for, and taken per scan byte it put the trigger near the goal at
   GOGC 400 and 800: graph's and lru's floating garbage there came out a
   third of what they marked (from Prometheus, GOGC 100 and 200: heap goal
   -48 to -56 %).
6b. ``k`` (``pacer`` rule 2's bound on the runway, ``k·B_nat``): the
   expected largest of 5 of those cons/mark ratios over their mean (endCycle
   keeps the largest of the last five; 1.1-1.5 on the validation workloads
   fitted on GOGC 100 and 200, 2.0 on batch's Prometheus, 2.5 on blob's
   gctrace). Not identified: its range runs from ``k`` to
   no bound; the point is ``k`` when two or more settings are observed,
   else no bound. From one setting nothing carries the mutator's speed
   beyond it (``κ``'s point is 0, rule 4; rule 8's residual at a second,
   higher setting does): on graph, fitted on GOGC 100 alone from gctrace,
   the bound put the cycles per minute at 800 23 % low (8 % without it), the
   mutator's faster pace there having been offset by the lower trigger.
7. Memory: the largest heap/goal and RSS/goal seen; the memory beyond the
   heap from RSS − heap in use (Prometheus) or the peak RSS given less the
   peak heap; what a limit counts beside the heap, the mean over the
   samples of sys − heap sys + heap in use − heap alloc (``prometheus``'s
   rules; without them, the memory beyond the heap).
8. Residuals: the bytes a cycle allocates are scaled by what the current
   setting showed over the pacer's rules (``eps``, within 0.5-2); then at each
   observed setting the point parameters' prediction is
   compared with what was seen (goal, cycles per minute, GC cores, the
   mutator's cores, peak memory); a prediction elsewhere is multiplied by the ratio
   interpolated over ``u = log(goal/S)`` between observed settings, held
   at the nearest one beyond them. Observed settings are then reproduced;
   so are they at the ends of ``κ``'s range (``mutator`` rule 2), which
   get ratios of their own (``ANCHORED``): ``κ`` is what the observed
   settings' speeds leave open, not a departure from them (unanchored, a
   canary at GOGC 400 with a limit widened lru's GC share interval there).
9. One service: a setting whose marked heap differs from the current
   setting's by more than 3x is another process's (two services in one log,
   or a changed build) and is left out, with a note. (Floating garbage
   moves the marked heap by less: 2.4x from GOGC 100 to 800 on the
   validation workloads.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyproflab.analyses.gogc import marks, mutator
from pyproflab.analyses.gogc.cost import (
    THETA,
    THETA_MAX,
    CostFit,
    fit_cost,
    less_idle,
    one_within_spread,
)
from pyproflab.analyses.gogc.cost import wmean as _wmean
from pyproflab.analyses.gogc.pacer import (
    BACKGROUND_UTILIZATION,
    MIN_TRIGGER,
    RSS_PER_GOAL_UNKNOWN,
    Params,
    solve,
)
from pyproflab.analyses.gogc.samples import Observation, Setting
from pyproflab.analyses.gogc.term import Term

# Priors for terms one setting does not identify (rules 2-3; ``mutator`` for rule 4's);
# see the module notes in ``predict`` for the workloads they were set on.
B_NAT_RANGE = 1.5
PEAK_CONS_HOW = (
    "whether the pacer's runway at another setting is an unhurried mark's or the "
    "observed runway per scan byte: not identified (rule 6)"
)
SQUEEZE_HOW = "how far the assists carry a squeezed mark toward the goal: not identified (rule 2b)"
HURRIED = 0.6  # of the widest runway: a mark hurried by assists
LIVE_SPREAD = 3.0  # marked heaps further apart are not one service's (rule 9)
MiB = float(1 << 20)
ANCHORED = ("cycle_cpu",)  # rule 8: terms whose ends reproduce the observed settings
RESIDUAL_KEYS = ("goal", "cycles_per_min", "gc_cores", "mutator_cores", "peak_memory")


@dataclass
class SettingFigures:
    """What one observed setting showed (weighted means), for the fit and the report."""

    setting: Setting
    weight: float
    cycles: int
    runs: int
    figures: dict[str, float]


@dataclass
class Fit:
    """Point parameters, the terms with their ranges, the observed settings and
    the residual ratios at each (module rules)."""

    params: Params
    terms: dict[str, Term]
    observed: list[SettingFigures]
    residuals: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    current: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cost: CostFit | None = None

    def with_terms(self, **values: float) -> Params:
        """The point parameters with some unidentified terms at other values."""
        return params_with(self, values)


def figures(ss: Sequence[dict[str, Any]], procs: float, saturated: bool) -> dict[str, float]:
    """One setting's weighted means, and what follows from them. A CPU-bound
    process's mutator holds every P the GC leaves (gctrace's estimate, the CPU
    the workers leave while marking, misses the time between marks)."""
    f = {
        k: _wmean(ss, k)
        for k in (
            "n",
            "alloc",
            "marked",
            "goal",
            "mark_alloc",
            "roots",
            "cost",
            "work",
            "idle_mark",
            "mark_s",
            "mutator",
            "idle",
            "per_cycle",
        )
    }
    f["gc_cores"] = f["n"] * f["cost"]
    f["work_cost"] = less_idle(f["cost"], f["idle_mark"])
    if saturated:
        f["mutator"] = max(procs - f["gc_cores"], 1e-3)
    f["cycles_per_min"] = 60 * f["n"]
    f["process_cores"] = f["mutator"] + f["gc_cores"]
    f["mutator_cores"] = f["mutator"]
    f["scan"] = f["marked"] + f["roots"]
    f["scan_live"] = max(f["marked"] - f["mark_alloc"], 0.05 * f["marked"]) + f["roots"]
    f["u"] = math.log(max(f["goal"] / f["scan"], 1.0 + 1e-9)) if f["scan"] > 0 else 0.0
    f["runway"] = f["goal"] - f["marked"]
    b, t = f["mark_alloc"], f["mark_s"]
    f["hurry"] = b / ((1 - MIN_TRIGGER) * f["runway"]) if f["runway"] > 0 else math.nan
    f["hurried"] = float(f["hurry"] >= HURRIED)
    idle_rate = f["idle_mark"] / t if t > 0 and math.isfinite(f["idle_mark"]) else 0.0
    t_nat = f["work"] / (BACKGROUND_UTILIZATION * procs + idle_rate) if t > 0 else math.nan
    f["b_nat"] = b if not f["hurried"] else (b / t) * t_nat if t > 0 else math.nan
    f["sweep_x"] = f["n"] * f["goal"]
    return f


def _cost_terms(
    settings: dict[Setting, list[dict[str, Any]]], cur: dict[str, float]
) -> tuple[dict[str, Term], CostFit]:
    """Rule 3 (``cost``): c0 with its range, c1 and c2 at the point c0 (or θ's split)."""
    cf = fit_cost(settings, dict(cur, scan=cur["scan_live"], cost=cur["work_cost"]))
    point, lo, hi = cf.c0
    exact = hi - lo <= 1e-9 * max(point, 1e-300)
    c1, c2 = cf.per_byte(point, THETA)
    how = f"fitted on the means of {len(cf.rows)} settings, given c0"
    out = {"c0": Term("c0", point, lo, hi, exact, cf.how)}
    if cf.by_goal:
        out["c1"] = Term("c1", c1, c1, c1, True, how)
        out["c2"] = Term("c2", c2, c2, c2, True, how)
        out["theta"] = Term("theta", math.nan, math.nan, math.nan, True, how)
    else:
        how = "the per-byte cost split between marked and heap bytes is not identified"
        out["theta"] = Term("theta", THETA, 0.0, THETA_MAX, False, how)
    return out, cf


def _b_nat_term(groups: list[dict[str, float]], ref_alloc: float) -> Term:
    """Rule 2."""
    scaled = [
        (f["b_nat"] * ref_alloc / f["alloc"], f)
        for f in groups
        if math.isfinite(f["b_nat"]) and f["alloc"] > 0
    ]
    if not scaled or ref_alloc <= 0:
        return Term("b_nat", 0.0, 0.0, 0.0, False, "no mark time: no floating garbage modelled")
    calm = [b for b, f in scaled if not f["hurried"]]
    if calm:
        b = sum(calm) / len(calm)
        return Term("b_nat", b, b, b, True, f"seen unhurried at {len(calm)} setting(s)")
    est = sum(b for b, _ in scaled) / len(scaled)
    seen = max(f["mark_alloc"] * ref_alloc / f["alloc"] for _, f in scaled)
    how = "every setting seen was hurried by assists: estimated from the mark workers' CPU"
    return Term("b_nat", max(est, seen), seen, max(est, seen) * B_NAT_RANGE, False, how)


def _memory(obs: Observation) -> dict[str, float]:
    """Rule 7: peak heap/goal, RSS/goal, the memory beyond the heap, and what a
    limit counts beside it."""
    ss = obs.samples
    peak_ratio = max(max(s["peak_heap"] / s["goal"] for s in ss if s["goal"] > 0), 1.0)
    rss = [s["rss_per_goal"] for s in ss if math.isfinite(s.get("rss_per_goal", math.nan))]
    roots = _wmean(ss, "roots")
    non_heap = [s["non_heap"] for s in ss if math.isfinite(s.get("non_heap", math.nan))]
    overhead = max(max(non_heap), roots) if non_heap else roots
    memory_ratio = max(rss) if rss else 0.0
    peaks = obs.peak_rss.get(obs.current)  # type: ignore[arg-type]
    if not rss and peaks:
        cur = obs.settings.get(obs.current, ss)  # type: ignore[arg-type]
        overhead = max(max(peaks) - max(s["peak_heap"] for s in cur), roots)
    elif not rss:
        memory_ratio = RSS_PER_GOAL_UNKNOWN
    lim = [s["runtime_non_heap"] for s in ss if math.isfinite(s.get("runtime_non_heap", math.nan))]
    return dict(
        peak_ratio=peak_ratio,
        memory_ratio=memory_ratio,
        overhead=overhead,
        limit_overhead=sum(lim) / len(lim) if lim else overhead,
    )


def params_with(fit: Fit, values: dict[str, float]) -> Params:
    """The fit's parameters with the unidentified terms (``theta``, ``sweep``,
    ``b_nat``) at the given values (their points when not given)."""
    t = {k: values.get(k, term.point) for k, term in fit.terms.items()}
    cur = fit.current
    p = fit.params
    c0, c1, c2 = p.c0, p.c1, p.c2
    if fit.cost is not None:
        c0 = t["c0"]
        c1, c2 = fit.cost.per_byte(c0, t["theta"])
    s, k = t["sweep"], t["cycle_cpu"]
    alpha, mut0 = p.alpha, p.mutator0
    if "alpha" not in fit.terms and "mutator0" not in fit.terms:
        alpha, mut0, s, k = mutator.base(cur, s, k)
    elif alpha <= 0 < mut0:  # paced: its speed should the GC's CPU leave it short
        alpha = cur["alloc"] / mut0
    return replace(
        p,
        c0=c0,
        c1=c1,
        c2=c2,
        sweep=s,
        cycle_cpu=k,
        alpha=alpha,
        mutator0=mut0,
        b_nat=t["b_nat"],
        squeeze=t["squeeze"],
        peak_cons=t["peak_cons"],
    )


def same_service(obs: Observation) -> tuple[Observation, list[str]]:
    """Rule 9: the settings whose marked heap is within ``LIVE_SPREAD`` of the
    current setting's, and a note when any is left out."""
    live = {k: _wmean(v, "marked") for k, v in obs.settings.items()}
    cur = live.get(obs.current)  # type: ignore[arg-type]
    if cur is None or cur <= 0:
        return obs, []
    keep = [k for k, v in live.items() if v > 0 and max(v / cur, cur / v) <= LIVE_SPREAD]
    if len(keep) == len(live):
        return obs, []
    from pyproflab.analyses.gogc.samples import setting_label

    gone = ", ".join(
        f"{setting_label(k)} ({v / MiB:.0f} MiB)" for k, v in live.items() if k not in keep
    )
    return obs.at(keep), [
        f"left out as another process's (its marked heap differs from the current "
        f"{cur / MiB:.0f} MiB by more than {LIVE_SPREAD:g}x): {gone}"
    ]


def fit(obs: Observation, cap: float | None = None) -> Fit:
    """The model's parameters from every setting in ``obs`` (module rules)."""
    obs, notes = same_service(obs)
    saturated = obs.saturated()
    groups = {k: figures(v, obs.procs, saturated) for k, v in obs.settings.items()}
    weights = {k: sum(s["w"] for s in v) for k, v in obs.settings.items()}
    cur = groups.get(obs.current) or max(groups.values(), key=lambda f: f["n"])  # type: ignore[arg-type]
    tot = sum(weights.values())
    avg = lambda key: sum(weights[k] * groups[k][key] for k in groups) / tot  # noqa: E731
    live = avg("marked") - avg("mark_alloc")
    roots = avg("roots")
    terms, cost = _cost_terms(*marks.unheld(obs, groups, weights, cur, saturated))
    notes += cost.notes
    flat = one_within_spread(obs.settings, "mutator")
    terms.update(mutator.terms(list(groups.values()), saturated, flat, cur))
    terms["b_nat"] = _b_nat_term(list(groups.values()), cur["alloc"])
    terms["squeeze"] = Term("squeeze", 1.0, 0.0, 1.0, False, SQUEEZE_HOW)
    k = marks.peak_cons(obs)
    # One setting: the point stays the observed runway per scan byte (rule 6).
    point = k if len(groups) >= 2 else math.inf
    terms["peak_cons"] = Term("peak_cons", point, k, math.inf, False, PEAK_CONS_HOW)
    c = {k: terms[k].point for k in ("c0", "c1", "c2") if k in terms}
    base = Params(
        live=max(live, 0.05 * avg("marked")),
        roots=roots,
        procs=obs.procs,
        cap=min(obs.procs, cap) if cap else obs.procs,
        b_nat=terms["b_nat"].point,
        alloc=cur["alloc"],
        runway_k=marks.runway_k(obs, cur["scan"]),
        peak_cons=point,
        c0=c.get("c0", 0.0),
        c1=c.get("c1", 0.0),
        c2=c.get("c2", 0.0),
        saturated=saturated,
        alpha=terms["alpha"].point if "alpha" in terms else 0.0,
        mutator0=terms["mutator0"].point if "mutator0" in terms else 0.0,
        sweep=terms["sweep"].point,
        slow_mark=marks.slow_mark(obs.samples),
        hurry=marks.hurry_share(list(groups.values())),
        b_min=marks.fastest_mark_alloc(list(groups.values())),
        **_memory(obs),
    )
    base = replace(base, idle_s=marks.idle_take(list(groups.values()), base.cap, saturated))
    base = replace(base, held=marks.limiter_held(list(groups.values()), base.cap, saturated))
    observed = [
        SettingFigures(
            k,
            weights[k],
            int(round(sum(s["w"] * s["n"] for s in v))),
            len({s["run"] for s in v}),
            groups[k],
        )
        for k, v in obs.settings.items()
    ]
    out = Fit(base, terms, observed, notes=notes, cost=cost)
    out.current = cur
    out.params = params_with(out, {})
    out.params = replace(out.params, eps=_eps(out.params, cur))
    base = replace(base, eps=out.params.eps)
    out.params = params_with(replace(out, params=base), {})
    out.residuals = _residuals(out, obs)
    return out


def _eps(p: Params, cur: dict[str, float]) -> float:
    """Rule 8's first part: the bytes a cycle allocated at the current setting
    over ``pacer`` rule 4's (within 0.5-2), so that the CPU the model balances
    there (``pacer`` rule 5) is the one seen."""
    from pyproflab.analyses.gogc.pacer import cycle

    runway = cur["goal"] - cur["marked"]
    if not (runway > 0 and cur["per_cycle"] > 0):
        return 1.0
    _, modelled = cycle(p, cur["marked"], runway, p.b_nat)
    return min(max(cur["per_cycle"] / modelled, 0.5), 2.0) if modelled > 0 else 1.0


def _residuals(f: Fit, obs: Observation) -> list[tuple[float, dict[str, float]]]:
    """Rule 8: (u, observed/predicted per key) at each observed setting, by u."""
    out = []
    for sf in f.observed:
        pred = solve(f.params, *sf.setting)
        seen = dict(sf.figures)
        peaks = obs.peak_rss.get(sf.setting)
        seen["peak_memory"] = max(peaks) if peaks else math.nan
        ratios = {}
        for k in RESIDUAL_KEYS:
            # Peak memory's ratio is to the figure before the limit's cap (``predict``
            # rule 1 applies it there).
            a, b = seen.get(k, math.nan), pred.get(k + "_free", pred.get(k, math.nan))
            ok = math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0
            ratios[k] = a / b if ok else 1.0
        out.append((sf.figures["u"], ratios))
    return sorted(out, key=lambda x: x[0])


def anchored(f: Fit, p: Params, obs: Observation) -> Fit:
    """Rule 8 at another parameter set: ``f`` with ``p`` and the ratios ``p``
    leaves at the observed settings."""
    out = replace(f, params=p)
    out.residuals = _residuals(out, obs)
    return out


def residual_at(f: Fit, u: float) -> dict[str, float]:
    """The residual ratios interpolated at ``u`` (rule 8)."""
    rs = f.residuals
    if not rs:
        return dict.fromkeys(RESIDUAL_KEYS, 1.0)
    if u <= rs[0][0]:
        return rs[0][1]
    if u >= rs[-1][0]:
        return rs[-1][1]
    for (u0, r0), (u1, r1) in zip(rs, rs[1:], strict=False):
        if u0 <= u <= u1:
            x = (u - u0) / (u1 - u0) if u1 > u0 else 0.0
            return {k: r0[k] + x * (r1[k] - r0[k]) for k in RESIDUAL_KEYS}
    return rs[-1][1]
