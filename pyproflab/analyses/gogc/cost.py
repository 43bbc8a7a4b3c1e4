"""GC CPU per cycle, ``C = c0 + c1·S + c2·goal`` (``pacer`` rule 4), from the
observed settings (``fit`` rule 3): the mark's work, without the idle mark
workers' CPU (``work_cost``), which follows the idle Ps, not the heap.

Rules (each setting's cost a weighted mean over its samples; ``S = H − B + R``,
what the mark scans: ``fit`` rule 3):

1. Non-negative terms. A fixed cost, a cost per marked byte and one per heap
   byte are each at least 0; no lower bound on the per-byte costs is taken
   (scanning pointer-free spans costs next to nothing, so no least scan cost
   holds for every heap).
2. The feasible fixed cost: the range of ``c0`` over the non-negative terms
   that put each setting's cost within its runs' spread (the 95 %
   confidence interval of the mean of its runs' means, Student's t; a
   setting seen in fewer than ``MIN_RUNS`` (3) runs borrows the coefficient
   of variation of the run means of the setting seen in the most, when 3 or
   more, with that setting's degrees of freedom, as ``predict`` rule 2 does;
   without one, the mean itself for one run), a linear programme (scipy's
   HiGHS). With one setting it is ``[0, C]`` (C that interval's upper end);
   two or more bound it jointly. Not the smallest to the largest run: with
   three runs that band is narrower than the mean's own uncertainty, and a
   per-heap-byte cost fitted from the difference of two noisy settings
   (tiny: 23.4 and 26.9 ms a cycle at GOGC 100 and 200, 24.5 and 25.7 at
   400 and 800) doubled the GC share predicted at GOGC 800. When no terms
   fit every setting within its spread, the bound is non-negativity alone:
   ``[0, min C]`` (no setting's cost holds less than the fixed part).
3. Its point, the best the data justify: with one or two settings the
   middle of the ``c0`` that fit the settings' means exactly (one setting:
   ``[0, C]``; two: the segment of exact solutions), else the middle of the
   range; with three settings or more, or when no terms fit every setting
   within its spread, the weighted least squares over the three terms (NNLS,
   on the settings' means), within the range. ``c0`` counts as identified
   when its range is a point.
4. The per-byte terms given ``c0``: ``c1`` and ``c2`` by weighted NNLS on the
   settings' ``C − c0`` when the settings' mean ``goal/S`` differ by 20 % or
   more (two settings) and no fixed and per-marked-byte costs alone (``c2 =
   0``) put every setting's cost within its runs' spread (a per-heap-byte
   cost the runs' noise can hide is not identified: fitted from it, it
   grew tenfold past the observed heaps); otherwise the current setting's ``C − c0`` splits
   between them with a share ``θ`` per heap byte: point ``THETA``, range
   ``[0, THETA_MAX]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyproflab.analyses.gogc.means import wmean

THETA, THETA_MAX = 0.05, 0.6
MIN_RUNS = 3  # runs that estimate a setting's own spread between runs (rule 2)
GOAL_RATIO = 1.2  # the settings' goal/S apart by this much identify c2 (rule 4)


def nonneg_fit(rows: list[tuple[float, list[float], float]], names: list[str]) -> dict[str, float]:
    """Weighted least squares with every coefficient at least 0 (rows: weight,
    regressors, value), by scipy's NNLS on the rows scaled by √weight."""
    import numpy as np
    from scipy.optimize import nnls

    w = np.sqrt(np.array([r[0] for r in rows], dtype=float))
    a = np.array([r[1] for r in rows], dtype=float) * w[:, None]
    b = np.array([r[2] for r in rows], dtype=float) * w
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)  # columns of bytes and of ones
    coef, _ = nnls(a / scale, b)
    return {n: float(c / k) for n, c, k in zip(names, coef, scale, strict=True)}


@dataclass
class Row:
    """One observed setting: weight, scan bytes, goal, mean cost, and the
    smallest and largest of its runs' mean costs."""

    w: float
    scan: float
    goal: float
    cost: float
    lo: float
    hi: float


@dataclass
class CostFit:
    """The observed settings' costs and how the per-byte terms follow ``c0``."""

    rows: list[Row]
    cur: tuple[float, float, float]  # the current setting's S, goal, C
    by_goal: bool  # rule 4: c2 fitted (True) or split by θ
    c0: tuple[float, float, float] = (0.0, 0.0, 0.0)  # point, lo, hi
    how: str = ""
    notes: list[str] = field(default_factory=list)

    def per_byte(self, c0: float, theta: float) -> tuple[float, float]:
        """Rule 4: ``(c1, c2)`` given the fixed cost and θ."""
        if self.by_goal:
            rows = [(r.w, [r.scan, r.goal], r.cost - c0) for r in self.rows]
            c = nonneg_fit(rows, ["c1", "c2"])
            return c["c1"], c["c2"]
        scan, goal, cost = self.cur
        rest = max(cost - c0, 0.0) if math.isfinite(cost) else 0.0
        c1 = (1 - theta) * rest / scan if scan > 0 else 0.0
        c2 = theta * rest / goal if goal > 0 else 0.0
        return c1, c2


def less_idle(cost: float, idle: float) -> float:
    """GC CPU per cycle less the idle mark workers' (``pacer`` rule 4): what the
    mark's work cost, the part these terms model."""
    return cost - idle if math.isfinite(idle) and 0 < idle < cost else cost


def work_cost(ss: Sequence[dict[str, Any]]) -> float:
    """``less_idle`` over samples."""
    return less_idle(wmean(ss, "cost"), wmean(ss, "idle_mark"))


def by_run(ss: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The samples grouped by run, in the order runs first appear."""
    runs: dict[Any, list[dict[str, Any]]] = {}
    for s in ss:
        runs.setdefault(s["run"], []).append(s)
    return list(runs.values())


def run_means(ss: Sequence[dict[str, Any]], f: Callable[[Any], float]) -> list[float]:
    """``f`` of each run's samples, where finite."""
    return [m for m in (f(r) for r in by_run(ss)) if math.isfinite(m)]


def donor_cv(
    settings: dict[Any, list[dict[str, Any]]], f: Callable[[Any], float]
) -> tuple[float, int] | None:
    """Rule 2's borrowed spread: the coefficient of variation (sample) of the
    run means of the setting seen in the most runs, and their number, when
    ``MIN_RUNS`` or more."""
    if not settings:
        return None
    means = max((run_means(v, f) for v in settings.values()), key=len)
    mean = sum(means) / len(means) if means else 0.0
    if len(means) < MIN_RUNS or mean <= 0:
        return None
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1))
    return sd / mean, len(means)


def _row(ss: Sequence[dict[str, Any]], borrow: tuple[float, int] | None = None) -> Row | None:
    cost, goal = work_cost(ss), wmean(ss, "goal")
    marked, black = wmean(ss, "marked"), wmean(ss, "mark_alloc")
    black = black if math.isfinite(black) else 0.0
    scan = max(marked - black, 0.05 * marked) + wmean(ss, "roots")
    if not (math.isfinite(cost) and cost > 0 and scan > 0 and goal > 0):
        return None
    lo, hi = mean_interval(run_means(ss, work_cost), borrow)
    return Row(sum(s["w"] for s in ss), scan, goal, cost, lo, hi)


def mean_interval(
    means: Sequence[float], borrow: tuple[float, int] | None = None
) -> tuple[float, float]:
    """Rule 2: the 95 % confidence interval of the mean of the runs' means, by
    scipy's Student's t; with fewer than ``MIN_RUNS`` runs, from the
    ``borrow``ed coefficient of variation and its runs (the mean itself
    without one and for one run)."""
    from scipy.stats import t

    k = len(means)
    mean = sum(means) / k
    if k < MIN_RUNS and borrow is not None:
        cv, n = borrow
        half = float(t.ppf(0.975, n - 1)) * cv * mean / math.sqrt(k)
        return max(mean - half, 0.0), mean + half
    if k < 2:
        return mean, mean
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (k - 1))
    half = float(t.ppf(0.975, k - 1)) * sd / math.sqrt(k)
    return max(mean - half, 0.0), mean + half


def spread(xs: Sequence[float]) -> float:
    """The coefficient of variation of ``xs`` (population)."""
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / len(xs)
    return math.sqrt(var) / mean if mean > 0 else 0.0


def one_within_spread(settings: dict[Any, list[dict[str, Any]]], key: str) -> bool:
    """True when one value of ``key`` lies within every setting's runs' spread
    (rule 2's interval of the mean of its runs' means; ``fit`` rule 4)."""
    spans = []
    f = lambda r: wmean(r, key)  # noqa: E731
    borrow = donor_cv(settings, f)
    for ss in settings.values():
        means = run_means(ss, f)
        if means:
            spans.append(mean_interval(means, borrow))
    return len(spans) >= 2 and max(lo for lo, _ in spans) <= min(hi for _, hi in spans)


def c0_range(rows: Sequence[Row], exact: bool, per_heap: bool = True) -> tuple[float, float] | None:
    """Rule 2: the least and largest ``c0`` with ``c0, c1, c2 ≥ 0`` putting every
    setting's cost within ``[lo, hi]`` (``exact``: at its mean; without
    ``per_heap``, ``c2 = 0``); None when none does."""
    import numpy as np
    from scipy.optimize import linprog

    top = max(r.hi for r in rows)
    ks = max(r.scan for r in rows)
    kg = max(r.goal for r in rows)
    a = np.array([[1.0, r.scan / ks, r.goal / kg if per_heap else 0.0] for r in rows])
    lo = np.array([(r.cost if exact else r.lo) / top for r in rows])
    hi = np.array([(r.cost if exact else r.hi) / top for r in rows])
    a_ub, b_ub = np.vstack([a, -a]), np.concatenate([hi, -lo])
    ends = []
    for sign in (1.0, -1.0):
        res = linprog([sign, 0.0, 0.0], A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
        if res.status != 0:
            return None
        ends.append(float(res.x[0]) * top)
    return max(ends[0], 0.0), max(ends[1], ends[0])


def fit_cost(settings: dict[Any, list[dict[str, Any]]], cur: dict[str, float]) -> CostFit:
    """Rules 1-4 over the observed settings' samples (``cur``: the current
    setting's ``scan`` S, ``goal`` and ``cost``)."""
    borrow = donor_cv(settings, work_cost)
    rows = [r for r in (_row(v, borrow) for v in settings.values()) if r is not None]
    ratio = [r.goal / r.scan for r in rows]
    by_goal = len(rows) >= 2 and max(ratio) >= GOAL_RATIO * min(ratio)
    by_goal = by_goal and c0_range(rows, exact=False, per_heap=False) is None
    out = CostFit(rows, (cur["scan"], cur["goal"], cur["cost"]), by_goal)
    if not rows:
        out.how = "no GC cost per cycle seen: taken as 0"
        return out
    span = c0_range(rows, exact=False)
    exact = c0_range(rows, exact=True) if len(rows) < 3 else None
    mid = exact or span
    if mid is not None and len(rows) < 3:
        point = (mid[0] + mid[1]) / 2
        how = "the middle of those fitting " + (
            "the settings' means exactly" if exact else "every setting within its runs' spread"
        )
    else:
        names = ["c0", "c1", "c2"] if by_goal else ["c0", "c1"]
        got = nonneg_fit([(r.w, [1.0, r.scan, r.goal][: len(names)], r.cost) for r in rows], names)
        point = got["c0"]
        how = f"least squares over {len(rows)} settings"
    if span is None:
        span = (0.0, min(r.cost for r in rows))
        out.notes.append(
            "no non-negative fixed and per-byte GC costs fit every setting within its "
            "runs' spread: the fixed cost is bounded by the smallest setting's cost alone"
        )
    else:
        point = min(max(point, span[0]), span[1])
    lo, hi = min(span[0], point), max(span[1], point)
    out.c0 = (point, lo, hi)
    out.how = (
        f"fixed GC CPU per cycle {lo:.3g}-{hi:.3g} core-seconds, as non-negative terms "
        f"within the {len(rows)} setting(s)' runs leave it; point: {how}"
    )
    return out
