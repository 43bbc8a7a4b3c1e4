"""The fitted GOGC / GOMEMLIMIT model: calibrated on one observed setting
(``gogc_inputs.GcObservation``), it predicts every other with an interval,
and advises a setting chosen on the interval's upper bound of peak memory.

Starting point, the Go GC guide: with marked live heap ``H``, roots ``R``
(stacks + globals) and ``g = GOGC/100``, the heap goal is ``H + (H + R)·g``;
each cycle lets the heap grow by the runway ``D = goal − H``, so at
allocation rate ``A`` there are ``A/D`` cycles per second, and GC CPU is
``(A/D)·C`` with ``C`` the cost of one cycle. The guide's model holds ``H``,
``A`` and ``C`` fixed. Here they are not:

1. Floating garbage. Objects allocated while marking are allocated black: the
   next cycle counts them as marked, so ``H = L + B`` where ``L`` (the truly
   live heap) is fixed and ``B`` = allocation rate while marking × mark time.
   Mark time grows with scan work, ``T = τ·(H + R)`` (``τ`` observed), and the
   mutator allocates at ``ρ·A`` while marking (``ρ`` observed). ``H`` is
   solved per setting by fixed-point iteration.
2. The trigger and the bytes a cycle allocates (the pacer, ``mgcpacer.go``).
   The pacer starts marking ``runway = 3·κ·(H + R)`` before the goal, where
   ``κ`` is its cons/mark estimate: the largest of the last five cycles'
   ratios (here: the expected largest of five observed ratios), and 3 is
   ``(1 − u)/u`` at its 25 % goal utilisation. Prometheus does not show a
   cycle's mark (its mark time is inferred from the background workers' CPU,
   which a saturated process does not give them in full, so a cons/mark built
   on it ran 4-6 times too large): there the runway is the one observed,
   ``D − (Δ − B)`` (the goal less where marking started), per scan byte --
   or, where that is the trigger's floor, the runway the pacer computed
   (``gogc_inputs.floor_mark``).
   The trigger is kept between 70 % (45/64) and 95 % of the way from ``H``
   to the goal (or 4 MiB below the goal on large heaps): ``t = clamp(D −
   runway, 0.7·D, max(0.95·D, D − 4 MiB))`` above ``H``. Marking then allocates ``B = min(B_natural,
   D − t)`` (assists stop it at the goal), and in a steady state the bytes
   allocated per cycle are what it frees: ``Δ = t + B``. A calibration factor
   ``ε`` (observed ``Δ`` over the model's at the observed setting, near 1)
   absorbs what the rules miss.
3. GC cost per cycle ``C = c0 + c1·(H + R)``: a fixed part and a part per
   byte of scan work, fitted by least squares across samples when their scan
   work varies (several instances or settings), else all per-byte.
4. CPU saturation. When the process ran at GOMAXPROCS ``P`` (no idle P-time
   observed), the CPU GC frees goes to the mutator, whose allocation is
   ``α`` bytes per mutator core-second: ``A = α·(P − G)`` with ``G = A·C/Δ``,
   so ``A = α·P / (1 + α·C/Δ)``. Otherwise ``A`` is the observed rate and the
   mutator's CPU ``N`` is fixed, until ``N + G`` would exceed ``P``, where
   the saturated rule takes over. No prediction exceeds ``P`` cores.
5. The memory limit ``M``: the limit goal is ``(M − O) − max(3 %, 1 MiB)``
   with ``O`` the memory the limit counts beyond the heap (Prometheus: the
   runtime's memory outside the heap, ``sys − heap_sys``; else observed peak
   RSS minus peak heap when the RSS is known, else the roots); the goal is
   the smaller of the two. GC CPU is capped by the limiter at 50 % of ``P``; a
   setting whose uncapped GC CPU would reach that, or whose limit leaves a
   runway under 25 % of ``L``, is flagged ``near-limit`` (the GC would run
   nearly continuously: a death spiral) and never recommended.
6. Peak heap = goal × the observed ratio of the largest heap to the goal
   (1 from Prometheus, whose scrapes rarely catch the peak); peak memory =
   peak heap + ``O`` -- from Prometheus, goal × the largest RSS / goal seen
   at a scrape (RSS keeps freed pages for a while, so a scrape sees near
   its peak) -- and at most the memory limit, which the runtime keeps all
   its memory under by returning pages. With no RSS observed at all (gctrace
   alone), peak memory is taken as ``1.4 × goal`` (the most the benchmark's
   RSS ran above its goal) and the output says so. A cycle's goal is set by
   the heap the cycle before it marked, so the peak follows the largest
   floating garbage, not the mean: peak memory's upper bound also takes the
   goal of ``L + B_top``, where ``B_top`` is the mark-time allocation of the
   slowest mark -- the workers' CPU done by the background and idle workers
   alone, at the rate they ran (long marks with few assists: large GOGC) --
   at most the pacer's widest mark runway, ``(1 − 45/64)·D``.

Calibration means weigh every instance the same (a fast instance's many
cycles do not outvote a slow one).

Intervals: the model is calibrated again on each run of consecutive samples
of each instance (up to ``CHUNKS`` per instance: the spread across cycles
and instances); the interval runs from the smallest to the largest of those
predictions and the point, widened by ``MARGIN`` on each side for what the
spread does not show. Peak memory's interval also widens by the spread of
the instances' peak RSS at the current setting (when known).

Advice: the usable budget is ``budget × (1 − headroom)``. A candidate fits
when the upper bound of its peak memory is within it and it is not
near-limit. Any GOGC above the current one (and off) must carry a memory
limit within the usable budget: the given ones, or, when none is given
within it, the usable budget itself (the guide's advice: a raise without a limit trades an
OOM kill for CPU). Among fits the lowest predicted GC CPU wins; ties go to
the smaller peak.

Longer than 500 lines: the rules above (about 80 lines) state the equations that
``calibrate``, ``solve`` and ``advise`` apply to one ``Params``, and they are
meant to be read beside the code; without them the module is about 500 lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gogc_inputs import GcObservation
from pyproflab.display import render
from pyproflab.errors import UsageError

MiB = float(1 << 20)
LIMIT_HEADROOM = 0.03  # memoryLimitHeapGoalHeadroomPercent
LIMITER_SHARE = 0.5  # the GC CPU limiter's cap, of GOMAXPROCS
NEAR_LIMIT_RUNWAY = 0.25  # runway under this share of the live heap: near the limit
MARGIN = 0.10  # added to each side of the sample spread
MIN_TRIGGER, MAX_TRIGGER = 45 / 64, 61 / 64  # of the way from H to the goal
HEAP_MINIMUM = 4 * MiB
# No RSS observed (gctrace alone): peak memory = goal x this. Go's RSS ran 16-38%
# above the heap goal on tests/gcbench (tests/testdata/gc/bench): the top of that.
RSS_PER_GOAL_UNKNOWN = 1.4
CHUNKS = 4  # runs of consecutive samples per instance, for the spread


@dataclass(frozen=True)
class Params:
    """One calibration (see the module rules for the symbols)."""

    live: float  # L
    roots: float  # R
    tau: float  # mark seconds per scan byte
    rho: float  # allocation while marking / outside
    eps: float  # observed bytes per cycle / the trigger rule's, at the observed setting
    runway_k: float  # 3·E[max of 5 cons/mark]: the pacer's runway per scan byte
    c0: float
    c1: float
    alloc: float  # A at the observed setting
    alpha: float  # bytes per mutator core-second
    mutator: float  # N at the observed setting
    procs: float
    saturated: bool
    peak_ratio: float  # peak heap / goal
    overhead: float  # O
    memory_ratio: float = 0.0  # peak memory / goal when scrapes tell (else peak heap + O)
    limit_overhead: float | None = None  # what the limit counts beside the heap (else O)
    slow_mark: float = 1.0  # the slowest mark's length over the mean (rule 6)


def _ls(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least squares ``y = c0 + c1·x`` (c0, c1 ≥ 0); None when x barely varies."""
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= (0.05 * mx) ** 2 * len(xs):
        return None
    c1 = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    c0 = my - c1 * mx
    if c0 < 0 or c1 < 0:
        return None
    return c0, c1


def _memory_ratio(obs: GcObservation) -> float:
    """Peak memory per byte of goal: the largest a scrape showed; with no RSS
    at all, ``RSS_PER_GOAL_UNKNOWN`` (0: peak heap + observed overhead)."""
    seen = [
        x["rss_per_goal"] for x in obs.samples if math.isfinite(x.get("rss_per_goal", math.nan))
    ]
    if seen:
        return max(seen)
    return RSS_PER_GOAL_UNKNOWN if obs.peak_rss is None else 0.0


def _mean_finite(samples: Sequence[dict[str, float]], key: str) -> float | None:
    vals = [x[key] for x in samples if math.isfinite(x.get(key, math.nan))]
    return sum(vals) / len(vals) if vals else None


def expected_max(values: Sequence[float], k: int) -> float:
    """The expected largest of ``k`` values drawn without replacement from
    ``values`` (all of them when fewer): deterministic, no sampling."""
    xs = sorted(values)
    n = len(xs)
    if n <= k:
        return xs[-1]
    return sum(x * math.comb(i, k - 1) for i, x in enumerate(xs)) / math.comb(n, k)


def _inst_mean(ss: Sequence[dict[str, float]], key: str) -> float:
    """The mean of ``key`` where each instance weighs the same, however many cycles it ran."""
    per: dict[Any, list[float]] = {}
    for s in ss:
        if s.get(key) is not None and math.isfinite(s[key]):
            per.setdefault(s.get("inst"), []).append(s[key])
    means = [sum(v) / len(v) for v in per.values()]
    return sum(means) / len(means) if means else math.nan


def _slow_mark(ss: Sequence[dict[str, float]]) -> float:
    """The slowest mark's length over the mean (rule 6): the workers' CPU done by
    the background and idle workers alone (no assists), at the rate they ran."""
    m = lambda key: _inst_mean(ss, key) if math.isfinite(_inst_mean(ss, key)) else 0.0  # noqa: E731
    unassisted = m("background") + m("idle_mark")
    slow = (m("cost") - m("pause")) / unassisted if unassisted > 0 else 1.0
    return max(slow, 1.0) if math.isfinite(slow) else 1.0


def _seen_runway(ss: Sequence[dict[str, float]], scan: float) -> float:
    """The pacer's runway per scan byte as the samples show it (rule 2), 0 if not."""
    seen = _inst_mean(ss, "pacer_runway")
    return seen / scan if math.isfinite(seen) and seen > 0 and scan > 0 else 0.0


def calibrate(obs: GcObservation, samples: Iterable[dict[str, float]] | None = None) -> Params:
    """Params from the observation's samples (all of them, or those given)."""
    ss = list(obs.samples if samples is None else samples)
    m = lambda key: _inst_mean(ss, key)  # noqa: E731

    marked, roots, b = m("marked"), m("roots"), m("mark_alloc")
    goal, n, alloc = m("goal"), m("n"), m("alloc")
    runway = max(goal - marked, 1.0)
    scan = marked + roots
    mark_s = m("mark_s")
    fit = _ls([(s["marked"] + s["roots"], s["cost"]) for s in obs.samples])
    cost = m("cost")
    c0, c1 = fit if fit is not None else (0.0, cost / scan)
    # Rescale a global fit to this subset's mean cost, so the subset's spread shows.
    k = cost / (c0 + c1 * scan) if c0 + c1 * scan > 0 else 1.0
    gc_cores = n * cost
    mutator = m("mutator")
    if not math.isfinite(mutator):
        mutator = obs.procs - gc_cores
    saturated = obs.saturated
    if saturated:
        mutator = max(obs.procs - gc_cores, 1e-3)
    peak = max((s["peak_heap"] for s in ss), default=goal)
    overhead = roots
    non_heap = [x["non_heap"] for x in obs.samples if math.isfinite(x.get("non_heap", math.nan))]
    if non_heap:
        overhead = max(max(non_heap), roots)
    elif obs.peak_rss is not None:
        overhead = max(obs.peak_rss - max(s["peak_heap"] for s in obs.samples), roots)
    cons = [x["cons_mark"] for x in ss if math.isfinite(x.get("cons_mark", math.nan))]
    runway_k = 3 * expected_max(cons, 5) if cons else _seen_runway(ss, marked + roots)
    base = Params(
        live=max(marked - b, marked * 0.05),
        roots=roots,
        tau=0.0,
        rho=1.0,
        eps=1.0,
        runway_k=runway_k,
        c0=0.0,
        c1=0.0,
        alloc=alloc,
        alpha=0.0,
        mutator=0.0,
        procs=obs.procs,
        saturated=saturated,
        peak_ratio=1.0,
        overhead=overhead,
    )
    _, modelled = _cycle(base, marked, runway, b)
    return Params(
        live=max(marked - b, marked * 0.05),
        roots=roots,
        tau=mark_s / scan if math.isfinite(mark_s) else 0.0,
        rho=b / (alloc * mark_s) if alloc > 0 and mark_s > 0 and math.isfinite(b) else 1.0,
        eps=min(max((alloc / n) / modelled, 0.5), 2.0) if n > 0 and modelled > 0 else 1.0,
        runway_k=runway_k,
        c0=c0 * k,
        c1=c1 * k,
        alloc=alloc,
        alpha=alloc / mutator if mutator > 0 else 0.0,
        mutator=mutator,
        procs=obs.procs,
        saturated=saturated,
        peak_ratio=max(peak / goal, 1.0),
        overhead=overhead,
        limit_overhead=_mean_finite(obs.samples, "runtime_non_heap"),
        memory_ratio=_memory_ratio(obs),
        slow_mark=_slow_mark(ss),
    )


def heap_goal(p: Params, h: float, g: float | None, limit: float | None) -> tuple[float, str]:
    """(goal, governed by ``gogc``/``limit``/``none``) for marked heap ``h``."""
    goal_g = h + (h + p.roots) * g / 100 if g is not None else math.inf
    if g is not None:
        goal_g = max(goal_g, 4 * MiB * g / 100)
    if limit is None:
        return goal_g, "gogc" if g is not None else "none"
    avail = limit - (p.overhead if p.limit_overhead is None else p.limit_overhead)
    goal_m = max(avail - max(avail * LIMIT_HEADROOM, MiB), h)
    return (goal_m, "limit") if goal_m < goal_g else (goal_g, "gogc")


def _cycle(p: Params, h: float, runway: float, b_natural: float) -> tuple[float, float]:
    """(mark-time allocation B, bytes allocated per cycle Δ) for marked heap ``h``
    and runway ``D`` (rule 2: the trigger between its bounds, B stopped at the goal)."""
    pacer = p.runway_k * (h + p.roots) if p.runway_k > 0 else runway
    hi = max(MAX_TRIGGER * runway, runway - HEAP_MINIMUM)
    trig = min(max(runway - pacer, MIN_TRIGGER * runway), hi)
    b = min(b_natural, runway - trig)
    return b, trig + b


def _rates(p: Params, h: float, per_cycle: float) -> tuple[float, float]:
    """(allocation rate, GC cores) at marked heap ``h`` with ``per_cycle`` bytes
    allocated per cycle (rule 4)."""
    per_cycle *= p.eps
    cost = p.c0 + p.c1 * (h + p.roots)
    if not p.saturated:
        a = p.alloc
        g = a * cost / per_cycle
        if p.mutator + g <= p.procs:
            return a, g
    if p.alpha <= 0:
        return 0.0, 0.0
    a = p.alpha * p.procs / (1 + p.alpha * cost / per_cycle)
    return a, a * cost / per_cycle


def _no_gc(p: Params, h: float, gov: str, status: str) -> dict[str, Any]:
    unbounded = status == "unbounded"
    return dict(
        marked=math.inf if unbounded else h,
        goal=math.inf,
        governed_by=gov,
        cycles_per_min=math.nan if unbounded else 0.0,
        gc_cores=math.nan if unbounded else 0.0,
        process_cores=p.procs if unbounded else p.mutator,
        status=status,
        peak_heap=math.inf,
        peak_memory=math.inf,
    )


def _steady_heap(p: Params, g: float | None, limit: float | None) -> tuple[float, float]:
    """(marked heap H, allocation rate A) solving ``H = L + B(H, A)`` by damped
    fixed-point iteration; H is infinite when marking never catches up."""
    h, a = p.live, p.alloc
    for _ in range(200):
        goal, _ = heap_goal(p, h, g, limit)
        if not math.isfinite(goal):
            return h, a
        runway = max(goal - h, 1.0)
        b, per_cycle = _cycle(p, h, runway, p.rho * a * p.tau * (h + p.roots))
        a, _ = _rates(p, h, per_cycle)
        h_new = p.live + b
        if abs(h_new - h) < 1e-7 * h:
            return h_new, a
        if h_new > 1e3 * p.live:
            return math.inf, a
        h = 0.5 * (h + h_new)
    return h, a


def solve(p: Params, g: float | None, limit: float | None) -> dict[str, Any]:
    """One setting under one calibration: heap, goal, cycles, CPU and status."""
    h, a = _steady_heap(p, g, limit)
    if not math.isfinite(h):
        return _no_gc(p, h, "gogc", "unbounded")
    goal, gov = heap_goal(p, h, g, limit)
    if not math.isfinite(goal):
        return _no_gc(p, h, gov, "no-gc")
    runway = max(goal - h, 1.0)
    b_natural = p.rho * a * p.tau * (h + p.roots)
    b, per_cycle = _cycle(p, h, runway, b_natural)
    a, gc = _rates(p, h, per_cycle)
    status = "ok"
    if gc >= LIMITER_SHARE * p.procs or runway < NEAR_LIMIT_RUNWAY * p.live:
        status = "near-limit" if gov == "limit" else "gc-bound"
        gc = min(gc, LIMITER_SHARE * p.procs) if gov == "limit" else gc
    proc = p.procs if p.saturated else min(p.procs, max(p.mutator + gc, gc))
    peak = goal * p.peak_ratio
    memory = _memory(p, goal, limit)
    # Rule 6: the largest floating garbage a cycle can carry sets the next goal.
    b_top = max(b, min(b_natural * p.slow_mark, (1 - MIN_TRIGGER) * runway))
    memory_top = _memory(p, heap_goal(p, p.live + b_top, g, limit)[0], limit)
    return dict(
        marked=h,
        goal=goal,
        governed_by=gov,
        cycles_per_min=60 * a / (p.eps * per_cycle),
        gc_cores=min(gc, p.procs),
        process_cores=proc,
        status=status,
        peak_heap=peak,
        peak_memory=memory,
        peak_memory_top=max(memory, memory_top),
    )


def _memory(p: Params, goal: float, limit: float | None) -> float:
    """Peak memory for a heap goal (rule 6)."""
    memory = goal * p.memory_ratio if p.memory_ratio > 0 else goal * p.peak_ratio + p.overhead
    if limit is not None:
        # The limit counts all the runtime's memory and the scavenger returns pages
        # to keep within it (until the limiter gives way: near-limit).
        memory = min(memory, limit)
    return memory


_KEYS = ("goal", "marked", "cycles_per_min", "gc_cores", "gc_share", "process_cores", "peak_memory")


def _with_share(r: dict[str, Any]) -> dict[str, Any]:
    r["gc_share"] = r["gc_cores"] / r["process_cores"] if r["process_cores"] > 0 else math.nan
    return r


def predict_setting(
    obs: GcObservation, g: float | None, limit: float | None, *, margin: float = MARGIN
) -> dict[str, Any]:
    """Point prediction (all samples) and ``<key>_lo``/``<key>_hi`` from the per-sample
    calibrations, widened by ``margin``."""
    point = _with_share(solve(calibrate(obs), g, limit))
    each = [_with_share(solve(calibrate(obs, c), g, limit)) for c in chunks(obs)]
    for k in _KEYS:
        vals = [e[k] for e in each if math.isfinite(e[k])] + [point[k]]
        if not all(math.isfinite(v) for v in vals):
            point[k + "_lo"], point[k + "_hi"] = math.nan, math.inf
            continue
        point[k + "_lo"] = min(vals) * (1 - margin)
        point[k + "_hi"] = max(vals) * (1 + margin)
    # The RSS never holds less than the heap: the low end of peak memory is at
    # most the low end of the goal (what the memory beyond the heap adds varies
    # more between runs than the spread of samples shows).
    point["peak_memory_lo"] = min(point["peak_memory_lo"], point["goal_lo"])
    tops = [e["peak_memory_top"] for e in [*each, point] if "peak_memory_top" in e]
    if tops and math.isfinite(point["peak_memory_hi"]):
        point["peak_memory_hi"] = max(point["peak_memory_hi"], max(tops) * (1 + margin))
    if obs.peak_rss_by_instance and math.isfinite(point["peak_memory_hi"]):
        # Peak RSS differs between instances at the same setting (and between runs):
        # the interval also carries that spread, observed at the current setting.
        spread = max(obs.peak_rss_by_instance) - min(obs.peak_rss_by_instance)
        point["peak_memory_lo"] -= spread
        point["peak_memory_hi"] += spread
    if any(e["status"] == "near-limit" for e in each):
        point["status"] = "near-limit"  # unsafe for any part of the spread: unsafe
    return point


def chunks(obs: GcObservation, parts: int = CHUNKS) -> list[list[dict[str, float]]]:
    """The samples split per instance into up to ``parts`` runs of consecutive
    samples (at least 3 each): each run calibrates the model alone."""
    by: dict[Any, list[dict[str, float]]] = {}
    for s in obs.samples:
        by.setdefault(s.get("inst"), []).append(s)
    out = []
    for ss in by.values():
        k = max(1, min(parts, len(ss) // 3))
        out += [ss[i * len(ss) // k : (i + 1) * len(ss) // k] for i in range(k)]
    return out


def gogc_label(g: float | None) -> str:
    return "off" if g is None else f"{g:g}"


ADVICE_SCHEMA = pa.schema(
    [
        pa.field("gogc", pa.float64()),
        pa.field("gogc_label", pa.string()),
        pa.field("memory_limit_bytes", pa.float64()),
        pa.field("governed_by", pa.string()),
        pa.field("status", pa.string()),
        *(pa.field(f"{k}{s}", pa.float64()) for k in _KEYS for s in ("", "_lo", "_hi")),
        pa.field("current", pa.bool_()),
        pa.field("within_budget", pa.bool_()),
        pa.field("recommended", pa.bool_()),
    ]
)


@dataclass
class FittedAdvice:
    """Predictions with intervals per candidate setting, and the advice.

    ``table`` follows ``ADVICE_SCHEMA``; ``recommendation`` is its recommended
    row (None without a budget or a fit); ``observation`` says where each
    input came from.
    """

    observation: GcObservation
    table: pa.Table
    budget_bytes: float | None = None
    usable_bytes: float | None = None
    recommendation: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        return self.table.to_pylist()

    def to_pandas(self):
        return self.table.to_pandas()

    def figure(self):
        """The observed cycles against the fit, and the predictions with intervals."""
        return render(self, "figure")

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __repr__(self) -> str:
        rec = self.recommendation
        what = f"recommend GOGC={rec['gogc_label']}" if rec else "no recommendation"
        return f"FittedAdvice({self.table.num_rows} settings, {what})"


def _candidate_settings(
    obs: GcObservation,
    candidates: Sequence[float | None],
    limits: Sequence[float | None],
    usable: float | None,
) -> list[tuple[float | None, float | None]]:
    """Settings to predict: each candidate with each limit; when no given limit
    is within the usable budget, raises also paired with the usable budget as
    their limit (rule: a raise carries a limit)."""
    out = [(g, m) for m in limits for g in candidates]
    if usable is not None and not any(m is not None and m <= usable for m in limits):
        out += [(g, usable) for g in candidates if _is_raise(obs, g)]
    cur = (obs.gogc, obs.memory_limit)
    if cur not in out:
        out.insert(0, cur)
    return list(dict.fromkeys(out))


def _is_raise(obs: GcObservation, g: float | None) -> bool:
    if obs.gogc is None:
        return False
    return g is None or g > obs.gogc


def advise(
    obs: GcObservation,
    candidates: Sequence[float | None] = (25, 50, 100, 150, 200, 300, 400, 800, None),
    limits: Sequence[float | None] | None = None,
    *,
    budget: float | None = None,
    headroom: float = 0.1,
    margin: float = MARGIN,
    settings: Sequence[tuple[float | None, float | None]] | None = None,
) -> FittedAdvice:
    """Predict every (candidate, limit) setting and choose one (module rules).
    ``settings``: exactly these (GOGC, limit) pairs instead (and the current one)."""
    if not 0 <= headroom < 1:
        raise UsageError(f"headroom must be in [0, 1), got {headroom}")
    usable = budget * (1 - headroom) if budget is not None else None
    lims = list(limits) if limits is not None else [obs.memory_limit]
    rows = []
    pairs = _candidate_settings(obs, candidates, lims, usable)
    if settings is not None:
        pairs = list(dict.fromkeys([(obs.gogc, obs.memory_limit), *settings]))
    for g, lim in pairs:
        r = predict_setting(obs, g, lim, margin=margin)
        r.update(
            gogc=g,
            gogc_label=gogc_label(g),
            memory_limit_bytes=lim,
            current=(g, lim) == (obs.gogc, obs.memory_limit),
            recommended=False,
        )
        r["within_budget"] = usable is not None and _fits(obs, r, usable)
        rows.append(r)
    rec = None
    notes = list(obs.notes)
    if usable is None:
        notes.append("no budget given: no recommendation")
    else:
        fits = [r for r in rows if r["within_budget"]]
        if fits:
            rec = min(fits, key=lambda r: (r["gc_cores"], r["peak_memory_hi"]))
            rec["recommended"] = True
            if _is_raise(obs, rec["gogc"]):
                notes.append(
                    f"GOGC={rec['gogc_label']} is a raise: set GOMEMLIMIT="
                    f"{rec['memory_limit_bytes'] / MiB:.0f}MiB with it (at most the budget "
                    "minus headroom), so a growing live heap makes the GC work harder "
                    "instead of the container being killed"
                )
        else:
            notes.append("no candidate's upper bound of peak memory fits the budget")
        if any(r["status"] == "near-limit" for r in rows):
            notes.append(
                "some limits leave the live heap too little room: the GC would run near "
                "its 50% CPU limiter (a death spiral); they are never recommended"
            )
    cols = {f.name: [r.get(f.name) for r in rows] for f in ADVICE_SCHEMA}
    return FittedAdvice(obs, pa.table(cols, schema=ADVICE_SCHEMA), budget, usable, rec, notes)


def _fits(obs: GcObservation, r: dict[str, Any], usable: float) -> bool:
    if r["status"] not in ("ok", "gc-bound") or not math.isfinite(r["peak_memory_hi"]):
        return False
    if _is_raise(obs, r["gogc"]) and (
        r["memory_limit_bytes"] is None or r["memory_limit_bytes"] > usable
    ):
        return False
    return r["peak_memory_hi"] <= usable
