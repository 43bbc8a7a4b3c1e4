"""Predictions with intervals, the advice, and the canary plan.

Rules:

1. Point: the fitted parameters solved at the setting (``pacer.solve``),
   times the residual ratios interpolated at its ``u`` (``fit`` rule 8: the
   heap goal's only where GOGC governs it); GC and process CPU at most the
   CPU the process can have; GC share = GC cores / process cores.
2. Interval, from three sources added on each side:
   - the spread across runs: the model refitted on each of up to ``CHUNKS``
     runs of consecutive samples of every process run (all settings at once);
   - each term the observed settings do not identify (``fit``), solved at
     the two ends of its range;
   - the distance from what was seen: ``MARGIN + WIDEN·d`` of the point,
     with ``d`` the distance in ``u = log(goal/S)`` to the nearest observed
     setting (0 at an observed one).
   Peak memory's upper end also takes the goal the largest floating garbage
   sets (``pacer`` rule 7) and the spread of the runs' peak RSS at the
   current setting; its lower end is at most the goal's.
3. Advice: the usable budget is ``budget × (1 − headroom)``. A candidate fits
   when the *upper* end of its peak memory is within it and it is neither
   ``near-limit`` nor unbounded; a raise (a higher GOGC than the current, or
   off) fits only with a memory limit within the usable budget (given ones,
   or else the usable budget itself, so each raise is also predicted with
   it). Among fits the lowest point GC CPU wins; ties go to the smaller upper
   peak.
4. Canary: when the advised setting lies outside the observed settings
   (``d`` above ``CANARY_DISTANCE``) or its GC share or peak interval is
   wider than ``CANARY_WIDTH`` of its point, run that setting on one
   instance (or one window) for ``N`` cycles: enough that the per-cycle
   figures' mean is known to 2 % (``N = (cv/0.02)²``, at least
   ``CANARY_CYCLES``), which takes ``N`` / the predicted cycles per minute.
   Afterwards its distance is 0, the unidentified terms are identified, and
   the spread shrinks with ``√N``: the plan states the interval that
   leaves. Run ``gogc`` again with the canary's cycles stored: it refits on
   both settings.

The priors of ``fit`` (``THETA``, ``SWEEP``, ``B_NAT_RANGE``) and ``WIDEN``
were set on six of the seven validation workloads of tests/gcbench
(``make bench-gc``); the seventh, ``queue``, was held out of every choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyproflab.analyses.gogc import fit as fitting
from pyproflab.analyses.gogc.samples import Observation, Setting, setting_label
from pyproflab.analyses.gogc.pacer import Params, solve

MiB = float(1 << 20)
MARGIN = 0.05
WIDEN = {"goal": 0.10, "cycles_per_min": 0.15, "gc_share": 0.25, "peak_memory": 0.10}
WIDEN_DEFAULT = 0.15
CHUNKS = 4
CANARY_DISTANCE = 0.1
CANARY_WIDTH = 0.5
CANARY_CYCLES = 30
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
        r["process_cores"] = min(max(r["process_cores"] * res["process_cores"], r["gc_cores"]), p.cap)
        for k in ("peak_memory", "peak_memory_top"):
            # The RSS holds at least the heap; the limit keeps all of it under.
            r[k] = max(r[k] * res["peak_memory"], r["goal"])
            if limit is not None:
                r[k] = min(r[k], limit)
        r["u"] = u
    r["gc_share"] = r["gc_cores"] / r["process_cores"] if r["process_cores"] > 0 else math.nan
    return r


def chunks(obs: Observation, parts: int = CHUNKS) -> list[Observation]:
    """Up to ``parts`` observations, the i-th made of the i-th run of consecutive
    samples of every process run (at least 3 samples each)."""
    by: dict[int, list[dict[str, Any]]] = {}
    for s in obs.samples:
        by.setdefault(s["run"], []).append(s)
    k = max(1, min(parts, min(len(v) for v in by.values()) // 3))
    out = []
    for i in range(k):
        ss = [s for v in by.values() for s in v[i * len(v) // k : (i + 1) * len(v) // k]]
        out.append(Observation(ss, obs.procs, obs.source, peak_rss=obs.peak_rss, current=obs.current))
    return out if k > 1 else []


@dataclass
class Model:
    """A fit and its variants for intervals (rule 2)."""

    obs: Observation
    fit: fitting.Fit
    variants: list[fitting.Fit] = field(default_factory=list)

    @classmethod
    def build(cls, obs: Observation, cap: float | None = None) -> Model:
        return cls(obs, fitting.fit(obs, cap), [fitting.fit(c, cap) for c in chunks(obs)])

    def distance(self, u: float) -> float:
        seen = [sf.figures["u"] for sf in self.fit.observed]
        return min(abs(u - s) for s in seen) if seen else 0.0

    def predict(self, g: float | None, limit: float | None) -> dict[str, Any]:
        """Point and ``<key>_lo``/``<key>_hi`` for one setting (rule 2)."""
        f = self.fit
        pt = point(f, f.params, g, limit)
        spread = [point(v, v.params, g, limit) for v in self.variants]
        terms = [
            (point(f, f.with_terms(**{t.name: x}), g, limit))
            for t in f.terms.values()
            if not t.identified
            for x in (t.lo, t.hi)
        ]
        d = self.distance(pt["u"]) if "u" in pt else 0.0
        for k in KEYS:
            lo, hi = _bounds(pt[k], [r[k] for r in spread], [r[k] for r in terms])
            s_lo, s_hi = _bounds(pt[k], [r[k] for r in spread], [])
            pt[k + "_spread"] = (s_hi - s_lo) / pt[k] if pt[k] and math.isfinite(s_hi) else math.inf
            w = MARGIN + WIDEN.get(k, WIDEN_DEFAULT) * d
            pt[k + "_lo"], pt[k + "_hi"] = lo * (1 - w), hi * (1 + w)
        pt["distance"] = d
        _peak_bounds(self, pt, [*spread, *terms])
        if any(r["status"] == "near-limit" for r in [*spread, *terms]):
            pt["status"] = "near-limit"
        return pt


def _bounds(p: float, spread: Sequence[float], terms: Sequence[float]) -> tuple[float, float]:
    """The point widened by the spread's extremes and each term's departures."""
    vals = [v for v in (p, *spread, *terms)]
    if not all(math.isfinite(v) for v in vals):
        return (math.nan, math.inf) if math.isfinite(p) else (p, p)
    lo = min(p, *spread) if spread else p
    hi = max(p, *spread) if spread else p
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
    if target is None:
        return None
    widths = {k: _width(target, k) for k in ("gc_share", "peak_memory", "cycles_per_min")}
    wide = [k for k, w in widths.items() if w > CANARY_WIDTH]
    if target["distance"] <= CANARY_DISTANCE and not wide:
        return None
    cur = m.obs.settings.get(m.obs.current, m.obs.samples)  # type: ignore[arg-type]
    cv = max(_cv([s["cost"] for s in cur]), _cv([s["per_cycle"] for s in cur]))
    n = max(CANARY_CYCLES, math.ceil((cv / 0.02) ** 2))
    seen = sum(1 for _ in cur)
    after = {}
    for k, w in widths.items():
        after[k] = min(2 * MARGIN + target[k + "_spread"] * math.sqrt(max(seen, 1) / n), w)
    per_min = target["cycles_per_min"]
    setting = (target["gogc"], target["memory_limit_bytes"])
    return dict(
        setting=setting,
        label=setting_label(setting),
        cycles=n,
        minutes=n / per_min if per_min and math.isfinite(per_min) and per_min > 0 else math.nan,
        why="outside the observed settings" if target["distance"] > CANARY_DISTANCE else "wide",
        width_now=widths,
        width_after=after,
    )


def _width(r: dict[str, Any], k: str) -> float:
    p, lo, hi = r[k], r[k + "_lo"], r[k + "_hi"]
    if not all(math.isfinite(v) for v in (p, lo, hi)) or p <= 0:
        return math.inf
    return (hi - lo) / p
