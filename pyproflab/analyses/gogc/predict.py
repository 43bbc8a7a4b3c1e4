"""Predictions with intervals, the advice, and the canary plan.

Rules:

1. Point: the fitted parameters solved at the setting (``pacer.solve``),
   times the residual ratios interpolated at its ``u`` (``fit`` rule 8: the
   heap goal's only where GOGC governs it; peak memory's before a limit caps
   it, so a limit above the peak leaves it); GC and process CPU, and their
   intervals, at most the CPU the process can have; GC share = GC cores /
   process cores, its interval within 0-100 %; GC CPU at half of GOMAXPROCS or more is
   ``gc-bound``.
2. Interval, from three sources added on each side:
   - the spread across runs: the model refitted on each variant, the k-th
     holding the k-th run of every setting (or the k-th of up to ``CHUNKS``
     pieces of consecutive samples, for a setting seen in one run), then
     Student's t at 95 % × the standard deviation of their predictions ×
     ``√(2/k)`` (the mean of as many new runs as were fitted). A setting seen
     in fewer than ``MIN_RUNS`` (3) runs cannot show its spread between runs
     (one run none; two, a standard deviation of one degree of freedom): it
     borrows that of the setting seen in the most runs, when that has 3 or
     more (the donor). Its k-th unit (its two runs in turn, or its one run's
     pieces) has every figure (``SCALED``) times the donor's (k+1)-th run's
     weighted mean over the donor's mean: the donor's relative spread
     between runs on top of its own within them, from another run than the
     donor's own in that variant (another process). The cost fit's
     spread (``cost`` rule 2) and the flat-mutator test (``fit`` rule 4)
     borrow the donor's coefficient of variation the same way. Before, one
     canary run left cycles per minute 0.19-0.25 wide (width over point)
     where three runs gave 0.37-0.73; the one-run refit's width over the
     three-run's (``python -m bench.gc_validate --canary``, 21 figures) went
     from 0.24-1.26 (6 below 0.6) to 0.43-1.38 (1: blob's GC share from
     Prometheus, 0.54 against 1.26, its three GOGC=400 runs of 11 cycles
     differing far more than its GOGC=100 runs);
   - each term the observed settings do not identify (``fit``), solved at
     the two ends of its range;
   - the distance from what was seen: ``MARGIN + WIDEN·d`` of the point,
     with ``d`` the distance in ``u = log(goal/S)`` to the nearest observed
     setting (0 at an observed one).
   Peak memory's upper end also takes the goal the largest floating garbage
   sets (``pacer`` rule 7) and the spread of the runs' peak RSS at the
   current setting; its lower end is at most the goal's, and at least the
   trigger's floor at the goal's and marked heap's lower ends (``marked_lo
   + (45/64)·(goal_lo − marked_lo)``, at most the point): the peak holds the
   heap at a mark's end, past the trigger (``pacer`` rule 2). Not the goal:
   a mark that ends early leaves the heap under it (blob's measured peak RSS
   sat under its measured goal at 6 of its 8 settings, 880 against 904 MiB
   at GOGC 100). Before, the lower end fell to 0 at 23 of the 224 peaks
   ``python -m bench.gc_validate`` predicts (graph at GOGC 25 and 50, the
   runs' spread taken off); now at 11, where the goal's lower end is 0
   itself, with the same 2 measured peaks outside. Under a memory
   limit ``M`` the upper end, and the heap goal's, is at most ``M`` unless
   the setting is ``near-limit`` or gc-bound, or the limiter was seen
   holding the GC (``pacer`` rule 6). The runtime's rules
   (``debug.SetMemoryLimit``, ``mgcpacer.go``, ``mgcscavenge.go``, Go
   1.26): the limit counts all the memory
   the runtime mapped and has not released (``Sys − HeapReleased``: the
   heap's spans, free ones too, stacks, metadata); the heap goal under it
   leaves 3 % for the heap's overshoot and the scavenger returns free
   pages aiming at 95 % of it. What the limit counts passes it only when
   the GC falls behind: the 50 % CPU limiter stops the assists and the heap
   passes its goal (a setting predicted to reach it is ``near-limit``; a
   CPU-bound process seen held there passes its goal at every setting).
   What it does not count (the binary's pages, C's memory, mappings made
   with ``syscall.Mmap``) is left to the headroom (rule 3). The recorded
   limited runs (tests/testdata/gc/work, GOGC 400 and off) that the
   limiter did not hold peaked at 0.94-0.996 of their limit (blob,
   tiny, service, batch, queue); graph's and lru's, held, at up to 1.045
   and 1.053, inside their uncapped intervals. Uncapped, the interval's
   widening (a prediction's error, which the limit does not let through)
   put the bound past the limit, so a raise with the limit at the usable
   budget fitted only where its point stayed well under the limit: the
   notesd demo (``make demo``) was advised GOGC=800 with an 85 MiB limit
   at 1.5x its peak (its point, rule 8's ratio taken on the capped figure,
   70 MiB, its bound 83), GOGC=400 with 113 MiB at 2x (800 with 113 MiB:
   point 95, bound 113.2 MiB).
3. Advice: the usable budget is ``budget × (1 − headroom)``. A candidate fits
   when the *upper* end of its peak memory is within it and it is neither
   ``near-limit`` nor unbounded (``gc-bound``, GC CPU at half of GOMAXPROCS or
   more without a limit, may be all a service can have); a raise (a higher GOGC than the current, or
   off) fits only with a memory limit within the usable budget (given ones,
   or else the usable budget itself, so each raise is also predicted with
   it). Among fits the lowest point GC CPU wins; ties go to the smaller upper
   peak.
4. Canary: when the advised setting lies outside the observed settings
   (not one the data ran at, and ``d`` above ``CANARY_DISTANCE``), run that setting on one
   instance (or one window) for ``N`` cycles: enough that the per-cycle
   figures' mean is known to 5 % (``N = (cv/0.05)²`` with ``cv`` the larger
   coefficient of variation of the current setting's per-cycle cost and
   bytes, at least ``CANARY_CYCLES``), which takes ``N`` / the predicted
   cycles per minute.
   The width it claims each figure's interval will have there afterwards
   (``width_after``) is a pre-posterior one: the width of the refit on the
   observation plus a canary of ``N`` cycles that measured what the model
   now predicts there, with the current setting's noise from sample to
   sample (``canary``'s rules: one run of its own, so the refit's spread,
   its terms' ranges and the distance 0 are what a canary that met the
   prediction would leave; the median over canaries drawn from each of the
   current setting's runs); at most today's width. Replayed on the
   recordings (``python -m bench.gc_validate --canary``: each plan against
   the median of the refits with each of its setting's first three recorded
   runs added, 21 figures), it came within 0.73-1.14x of the refit's width
   (median 0.99; 1 beyond 30 %: blob's GC share from gctrace 0.73, whose
   recorded runs cover 11 cycles where the plan asks 119; the refit itself
   moves by up to 1.8x between runs); the rule it replaced (2·MARGIN + the
   spread × √(seen/N), at least the current setting's width) came within 0.61-3.87x (median 1.11;
   11 beyond 30 %, cycles per minute 1.5-3.9x too wide, the current
   setting's width holding the spread of its nine runs a single canary run
   does not show). The canary is one run: it borrows the current
   setting's spread between runs (rule 2), as the refit with one recorded
   run does.
   Run ``gogc`` again with the canary's cycles stored: it
   refits on every setting seen. An advised setting observed already gets
   no canary, whatever its width (one there adds nothing: the plan named
   the current setting): a note says why its interval is wide
   (``wide_note``).

Where the constants come from. ``fit``'s priors for terms one setting does not
identify: ``THETA`` (the per-heap-byte share of the per-cycle cost: 3-10 % on
the earlier tests/gcbench recordings, about 0 in the published gateway case)
and ``SWEEP`` (about 1e-10 core-seconds per heap byte per cycle on the earlier
recordings: the point is a fifth of it, the range up to twice it);
``B_NAT_RANGE``, ``HURRIED``, ``MARGIN``, ``WIDEN`` and ``CANARY_*`` were chosen
looking at six of the seven validation workloads of tests/gcbench (``make
bench-gc``); the seventh, ``queue``, was held out of every choice, but for
``pacer`` rule 3's squeezed mark (no constant: derived from ``revise``), whose
check looked at queue's GOGC 25-50 marks beside tiny's and service's, and
``fit`` rule 6b's point with one setting, and ``mutator`` rule 2's (the
middle of ``κ``'s range from two settings; ``KAPPA_SHARE``, its bound from
one, measured on graph), chosen with every workload's table (queue's
included) in view (``bench.gc_kappa`` measures the middle's choice left one
workload out: 6.69 % mean error held out, 6.67 % in-sample). Fits of the
sweep term on the seven gave 0 to 7e-9 (the machine's other work moves the
mutator's CPU more): no prior came from them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyproflab.analyses.gogc import canary
from pyproflab.analyses.gogc import fit as fitting
from pyproflab.analyses.gogc.cost import MIN_RUNS, by_run, wmean
from pyproflab.analyses.gogc.pacer import LIMITER_SHARE, MIN_TRIGGER, Params, solve
from pyproflab.analyses.gogc.samples import Observation, Setting, setting_label

MiB = float(1 << 20)
MARGIN = 0.05
WIDEN = {"goal": 0.10, "cycles_per_min": 0.15, "gc_share": 0.25, "peak_memory": 0.10}
WIDEN_DEFAULT = 0.15
CHUNKS = 4
# The figures a borrowed spread moves (rule 2): every per-sample figure but the
# weight, GOMAXPROCS, the idle share and the clock.
SCALED = (
    *("n", "alloc", "per_cycle", "marked", "goal", "mark_alloc", "roots", "cost", "work"),
    *("background", "assist", "idle_mark", "pause", "mark_s", "mutator", "busy", "busy_all"),
    *("peak_heap", "cons_mark", "pacer_runway"),
)
CANARY_DISTANCE = 0.1
CANARY_WIDTH = 0.5
CANARY_CYCLES = 30
CANARY_PRECISION = 0.05  # the canary's per-cycle means known to 5 %
CANARY_FIGURES = ("gc_share", "peak_memory", "cycles_per_min")
KEYS = ("goal", "marked", "cycles_per_min", "gc_cores", "gc_share", "process_cores", "peak_memory")


def point(f: fitting.Fit, p: Params, g: float | None, limit: float | None) -> dict[str, Any]:
    """Rule 1."""
    r = solve(p, g, limit)
    if math.isfinite(r["goal"]) and math.isfinite(r["marked"]):
        u = math.log(max(r["goal"] / (r["marked"] + p.roots), 1.0 + 1e-9))
        res = fitting.residual_at(f, u)
        if r["governed_by"] == "gogc":
            r["goal"] *= res["goal"]
        r["cycles_per_min"] *= res["cycles_per_min"]
        r["gc_cores"] = min(r["gc_cores"] * res["gc_cores"], p.cap)
        mutator = r["mutator_cores"] * res["mutator_cores"]
        r["process_cores"] = min(mutator + r["gc_cores"], p.cap)
        for k in ("peak_memory", "peak_memory_top"):
            # The RSS holds at least the heap; the limit keeps all of it under:
            # the ratio scales the peak before the limit caps it, as a cap then
            # scaled moved a limit the peak did not reach (h77svc's GOGC=300 with
            # 432 MiB: 312 MiB, against 384 without the limit; 346 measured).
            r[k] = max(r[k + "_free"] * res["peak_memory"], r["goal"])
            if limit is not None:
                r[k] = min(r[k], limit)
        r["u"] = u
    r["gc_share"] = r["gc_cores"] / r["process_cores"] if r["process_cores"] > 0 else math.nan
    if r["status"] == "ok" and r["gc_cores"] >= LIMITER_SHARE * p.procs:
        r["status"] = "gc-bound"
    return r


def departures(ss: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Each run's weighted mean of every ``SCALED`` figure over its setting's
    (rule 2's borrowed spread; 1 where a figure is missing)."""
    whole = {k: wmean(ss, k) for k in SCALED}
    return [{k: canary.ratio(wmean(r, k), whole[k]) for k in SCALED} for r in by_run(ss)]


def _scaled(ss: list[dict[str, Any]], dep: dict[str, float]) -> list[dict[str, Any]]:
    """The samples with each ``SCALED`` figure times a run's departure."""
    return [dict(s, **{k: s[k] * dep[k] for k in SCALED if _num(s.get(k))}) for s in ss]


def _num(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _units(
    ss: list[dict[str, Any]], parts: int, deps: list[dict[str, float]] | None = None
) -> list[list[dict[str, Any]]]:
    """One setting's samples as units of the spread (rule 2): its runs when
    there are ``MIN_RUNS`` or more; else its two runs, or up to ``parts``
    runs of consecutive samples (3 or more each) of its one run, the i-th
    times the donor's (i+1)-th run's departures when there is a donor (the
    k-th variant holds the donor's k-th run: another process's departure)."""
    runs = by_run(ss)
    if len(runs) >= MIN_RUNS:
        return runs
    if len(runs) == 2:
        own = runs
    else:
        (one,) = runs
        k = max(1, min(parts, len(one) // 3))
        own = [one[i * len(one) // k : (i + 1) * len(one) // k] for i in range(k)]
    if not deps:
        return own
    n = max(len(own), len(deps))
    return [_scaled(own[i % len(own)], deps[(i + 1) % len(deps)]) for i in range(n)]


def donor(obs: Observation) -> list[dict[str, float]] | None:
    """Rule 2: the departures of the observed setting with the most runs (the
    most weight among equals), when it has ``MIN_RUNS`` or more."""
    by = obs.settings
    if not by:
        return None
    key = max(by, key=lambda k: (len(by_run(by[k])), sum(s["w"] for s in by[k])))
    return departures(by[key]) if len(by_run(by[key])) >= MIN_RUNS else None


def variants(obs: Observation, parts: int = CHUNKS) -> list[Observation]:
    """Observations for the spread (rule 2): the k-th holds the k-th unit of
    every setting (its k-th run, its samples with the donor's k-th departure,
    or the k-th piece of its one run); a setting with a single unit is in each
    as it is, the others' spread still counting (there were no variants at
    all: a canary's one instance, two Prometheus intervals, left the refit
    without a spread); none when every setting has a single unit."""
    deps = donor(obs)
    units = {k: _units(v, parts, deps) for k, v in obs.settings.items()}
    n = max(len(u) for u in units.values())
    if n < 2:
        return []
    out = []
    for i in range(min(n, 2 * parts)):
        ss = [s for u in units.values() for s in u[i % len(u)]]
        out.append(
            Observation(ss, obs.procs, obs.source, peak_rss=obs.peak_rss, current=obs.current)
        )
    return out


# Student's t at 95 % (one side of a 90 % interval) by degrees of freedom.
T95 = {1: 6.31, 2: 2.92, 3: 2.35, 4: 2.13, 5: 2.02, 6: 1.94, 7: 1.89}


@dataclass
class Model:
    """A fit and its variants for intervals (rule 2)."""

    obs: Observation
    fit: fitting.Fit
    variants: list[fitting.Fit] = field(default_factory=list)
    ends: dict[tuple[str, float], fitting.Fit] = field(default_factory=dict)

    @classmethod
    def build(cls, obs: Observation, cap: float | None = None) -> Model:
        return cls(obs, fitting.fit(obs, cap), [fitting.fit(v, cap) for v in variants(obs)])

    def term_end(self, name: str, x: float) -> tuple[fitting.Fit, Params]:
        """The fit and parameters at one end of a term's range (rule 2), with
        ratios of its own for the terms ``fit`` rule 8 anchors."""
        p = self.fit.with_terms(**{name: x})
        if name not in fitting.ANCHORED:
            return self.fit, p
        if (name, x) not in self.ends:
            self.ends[(name, x)] = fitting.anchored(self.fit, p, self.obs)
        return self.ends[(name, x)], p

    def distance(self, u: float) -> float:
        seen = [sf.figures["u"] for sf in self.fit.observed]
        return min(abs(u - s) for s in seen) if seen else 0.0

    def predict(self, g: float | None, limit: float | None) -> dict[str, Any]:
        """Point and ``<key>_lo``/``<key>_hi`` for one setting (rule 2)."""
        f = self.fit
        pt = point(f, f.params, g, limit)
        spread = [point(v, v.params, g, limit) for v in self.variants]
        terms = [
            point(*self.term_end(t.name, x), g, limit)
            for t in f.terms.values()
            if not t.identified
            for x in (t.lo, t.hi)
        ]
        d = self.distance(pt["u"]) if "u" in pt else 0.0
        # A share is at most all of the process's CPU, and cores at most the CPU
        # it can have (pacer rule 5: no prediction exceeds it, an interval neither).
        ceiling = {"gc_share": 1.0, "gc_cores": f.params.cap, "process_cores": f.params.cap}
        for k in KEYS:
            lo, hi = _bounds(pt[k], [r[k] for r in spread], [r[k] for r in terms])
            w = MARGIN + WIDEN.get(k, WIDEN_DEFAULT) * d
            top = ceiling.get(k, math.inf)
            pt[k + "_lo"], pt[k + "_hi"] = lo * (1 - w), min(min(hi, top) * (1 + w), top)
        pt["distance"] = d
        _peak_bounds(self, pt, [*spread, *terms])
        if any(r["status"] == "near-limit" for r in [*spread, *terms]):
            pt["status"] = "near-limit"
        if limit is not None and pt["status"] == "ok" and not _limiter_holds(f.params):
            for k in ("goal_hi", "peak_memory_hi"):
                pt[k] = min(pt[k], limit)
        return pt


def _bounds(p: float, spread: Sequence[float], terms: Sequence[float]) -> tuple[float, float]:
    """The point widened by the spread (Student's t at 95 % times the standard
    deviation of the variants' predictions, for the mean of as many new runs
    as were fitted: ``√(2/k)``) and by each term's departures."""
    vals = [v for v in (p, *spread, *terms)]
    if not all(math.isfinite(v) for v in vals):
        return (math.nan, math.inf) if math.isfinite(p) else (p, p)
    lo = hi = p
    if len(spread) >= 2:
        k = len(spread)
        mean = sum(spread) / k
        sd = math.sqrt(sum((v - mean) ** 2 for v in spread) / (k - 1))
        half = T95.get(k - 1, 1.65) * sd * math.sqrt(2 / k)
        lo, hi = p - half, p + half
    for a, b in zip(terms[::2], terms[1::2], strict=False):
        lo -= max(0.0, p - min(a, b))
        hi += max(0.0, max(a, b) - p)
    return max(lo, 0.0), hi


def _peak_bounds(m: Model, pt: dict[str, Any], others: list[dict[str, Any]]) -> None:
    if not math.isfinite(pt["peak_memory_hi"]):
        return
    tops = [r.get("peak_memory_top", math.nan) for r in [pt, *others]]
    tops = [t for t in tops if math.isfinite(t)]
    w = MARGIN + WIDEN["peak_memory"] * pt["distance"]
    if tops:
        pt["peak_memory_hi"] = max(pt["peak_memory_hi"], max(tops) * (1 + w))
    pt["peak_memory_lo"] = min(pt["peak_memory_lo"], pt["goal_lo"])
    runs = m.obs.peak_rss.get(m.obs.current)  # type: ignore[arg-type]
    if runs and len(runs) > 1:
        spread = max(runs) - min(runs)
        pt["peak_memory_lo"] = max(pt["peak_memory_lo"] - spread, 0.0)
        pt["peak_memory_hi"] += spread
    marked, goal = pt["marked_lo"], pt["goal_lo"]
    floor = marked + MIN_TRIGGER * (goal - marked)  # rising in both: a floor of the floors
    if math.isfinite(floor):
        pt["peak_memory_lo"] = max(pt["peak_memory_lo"], min(floor, pt["peak_memory"]))


def _limiter_holds(p: Params) -> bool:
    """Whether the GC CPU limiter was seen holding the GC (``pacer`` rule 6): then
    the heap passes its goal, and under a limit the limit (rule 2)."""
    return p.held > 0 and p.saturated


def is_raise(current: Setting | None, g: float | None) -> bool:
    if current is None or current[0] is None:
        return False
    return g is None or g > current[0]


def candidate_settings(
    current: Setting | None,
    candidates: Sequence[float | None],
    limits: Sequence[float | None],
    usable: float | None,
) -> list[Setting]:
    """Each candidate with each limit; when no given limit is within the usable
    budget, each raise also with the usable budget as its limit (rule 3)."""
    out = [(g, m) for m in limits for g in candidates]
    if usable is not None and not any(m is not None and m <= usable for m in limits):
        out += [(g, usable) for g in candidates if is_raise(current, g)]
    if current is not None and current not in out:
        out.insert(0, current)
    return list(dict.fromkeys(out))


def fits_budget(current: Setting | None, r: dict[str, Any], usable: float) -> bool:
    """Rule 3."""
    if r["status"] not in ("ok", "gc-bound") or not math.isfinite(r["peak_memory_hi"]):
        return False
    lim = r["memory_limit_bytes"]
    if is_raise(current, r["gogc"]) and (lim is None or lim > usable):
        return False
    return r["peak_memory_hi"] <= usable


def recommend(rows: list[dict[str, Any]], usable: float | None) -> dict[str, Any] | None:
    fits = [r for r in rows if r["within_budget"]]
    if usable is None or not fits:
        return None
    best = min(fits, key=lambda r: (r["gc_cores"], r["peak_memory_hi"]))
    best["recommended"] = True
    return best


def _cv(vals: Sequence[float]) -> float:
    vals = [v for v in vals if math.isfinite(v)]
    if len(vals) < 2:
        return 0.5
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return math.sqrt(var) / mean if mean > 0 else 0.5


def canary_plan(m: Model, target: dict[str, Any] | None) -> dict[str, Any] | None:
    """Rule 4: one setting on one instance, how long, and the interval it leaves."""
    if target is None or _seen(target):
        return None
    widths = {k: _width(target, k) for k in CANARY_FIGURES}
    cur = m.obs.settings.get(m.obs.current, m.obs.samples)  # type: ignore[arg-type]
    cv = max(_cv([s["cost"] for s in cur]), _cv([s["per_cycle"] for s in cur]))
    n = max(CANARY_CYCLES, math.ceil((cv / CANARY_PRECISION) ** 2))
    expected = expected_widths(m, target, n)
    after = {k: min(expected[k], w) for k, w in widths.items()}
    per_min = target["cycles_per_min"]
    setting = (target["gogc"], target["memory_limit_bytes"])
    return dict(
        setting=setting,
        label=setting_label(setting),
        cycles=n,
        minutes=n / per_min if per_min and math.isfinite(per_min) and per_min > 0 else math.nan,
        why="outside the observed settings",
        width_now=widths,
        width_after=after,
    )


def expected_widths(m: Model, target: dict[str, Any], cycles: int) -> dict[str, float]:
    """Rule 4's claim: each figure's width at the canary's setting refitted with
    a canary that measured the point, the median over ``canary.draws``."""
    setting = (target["gogc"], target["memory_limit_bytes"])
    now = point(m.fit, m.fit.params, *m.obs.current)  # type: ignore[misc]
    got = []
    for run in canary.draws(m.obs):
        obs = canary.observation(m.obs, now, target, setting, cycles, m.fit.params.live, run)
        got.append(Model.build(obs).predict(*setting))
    return {k: statistics.median(_width(r, k) for r in got) for k in CANARY_FIGURES}


def wide_note(target: dict[str, Any] | None) -> str | None:
    """Rule 4: why an observed advised setting's wide interval gets no canary."""
    if target is None or not _seen(target):
        return None
    wide = {k: w for k in CANARY_FIGURES if (w := _width(target, k)) > CANARY_WIDTH}
    if not wide:
        return None
    what = ", ".join(f"{k.replace('_', ' ')} ±{50 * w:.0f}%" for k, w in wide.items())
    label = setting_label((target["gogc"], target["memory_limit_bytes"]))
    # A setting only near one that ran is not "observed": the demo's GOGC=300 with a
    # 55 MiB limit (its goal held at GOGC=200's) was called so under a list of two
    # observed settings, GOGC=50 and GOGC=200.
    seen = (
        f"{label} was observed"
        if target.get("observed")
        else f"{label}, though it did not run, has a heap goal within "
        f"{100 * math.expm1(CANARY_DISTANCE):.0f}% of a setting that did"
    )
    return (
        f"the recommendation's interval is wide ({what}), but {seen}: a canary there adds "
        "nothing. The width is the spread of its runs (more runs narrow it) and the terms "
        "the observed settings leave open (a setting not yet seen narrows them)"
    )


def _seen(target: dict[str, Any]) -> bool:
    """Rule 4: an advised setting the data ran at (its row's ``observed``), or
    one within ``CANARY_DISTANCE`` of one, is observed. The distance alone
    missed h70svc's GOGC=200: its own runs' mean goal over marked heap (start-up
    cycles in the logs) put it 0.12 from the model's GOGC=200, and the plan asked
    for a canary at the setting it recommended keeping."""
    return bool(target.get("observed")) or target["distance"] <= CANARY_DISTANCE


def _width(r: dict[str, Any], k: str) -> float:
    p, lo, hi = r[k], r[k + "_lo"], r[k + "_hi"]
    if not all(math.isfinite(v) for v in (p, lo, hi)) or p <= 0:
        return math.inf
    return (hi - lo) / p
