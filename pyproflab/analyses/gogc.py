"""The GOGC / GOMEMLIMIT trade-off: predicted GC cost and heap for candidate settings.

This is the earlier model, kept for explicit figures (``GcInputs.from_observed``)
and ``--model improved|plain``; advice from GC data (gctrace, Prometheus, the
store) uses the fitted model of ``gogc_model`` on ``gogc_inputs``'
observations, which also models CPU saturation, the memory limit's CPU
limiter, and gives intervals.

The model (the Go GC guide's, with the runtime's rules from ``mgcpacer.go``).
Symbols: ``H`` marked heap (what the last cycle marked live), ``R`` GC roots
(goroutine stacks + globals), ``g`` = GOGC/100, ``A`` allocation rate (bytes/s),
``c0`` and ``c1`` GC CPU per cycle (core-seconds: fixed, and per byte of scan
work ``H + R``), ``N`` non-GC CPU (cores), ``M`` the memory limit, ``O`` the
non-heap memory the limit also counts (stacks and runtime overhead).

- GOGC goal: ``goal_g = max(H + (H + R)·g, 4 MiB·g)`` (the runtime's heap
  minimum scales with GOGC). GOGC=off: no GOGC goal.
- Limit goal: ``goal_M = (M − O) − max(3 %·(M − O), 1 MiB)``, never below ``H``.
- ``goal = min(goal_g, goal_M)``; ``governed_by`` says which. Off without a
  limit: no GC (cycles 0, GC CPU 0, heap unbounded).
- Each cycle allocates ``D = goal − H`` bytes: cycles/min = ``60·A/D``.
- GC CPU (cores) ``G = (A/D)·(c0 + c1·(H + R))``; process CPU ``P = N + G``;
  GC share ``G/P``. Peak heap = ``goal``; peak memory = ``goal + O``.
- A, N, R, c0, c1 and the truly live heap do not change with the setting.

Two models:

- ``plain``: ``H`` is the same for every setting (the guide's model).
- ``improved`` adds the effect the pacer has when allocation is fast: objects
  allocated while marking are allocated black, so the next cycle counts them
  as marked (``H = L + B`` with ``L`` the truly live heap). Marking takes a
  time proportional to its scan work, so it would naturally allocate
  ``B = κ·(H + R)`` bytes; but the trigger is never earlier than 45/64 of the
  way from ``H`` to the goal, so ``B ≤ φ·D`` with ``φ = 1 − 45/64`` (assists
  finish the mark on time). ``B = min(κ·(H + R), φ·D)`` and ``H = L + B`` is
  solved per setting; the per-cycle cost ``c0 + c1·(H + R)`` follows ``H``.
  Where the current setting is clamped (``B₀ = φ·D₀``), raising GOGC lets ``B``
  (and so ``H``) grow until ``κ·(H + R)`` is reached. ``κ`` comes from gctrace
  (heap at mark end − heap at mark start, over scan work) or is given; with
  ``κ = 0`` (unknown) the improved model equals the plain one.
  It also lets marking end before the goal (calibrated on the demo fleet:
  the bytes allocated per cycle, ``60·A/n``, fall short of ``D`` by an
  almost constant amount): each cycle allocates ``D − min(gap, φ·D)``, with
  ``gap = D₀ − 60·A/n₀`` measured at the current setting (0 when the
  allocation rate is only derived from the cycles, as from observed figures).

Inputs from observed figures only (``GcInputs.from_observed``): with GOGC,
cycles/min ``n`` and GC share ``s`` (optionally the heap, process CPU, roots):
``D₀ = goal₀ − H₀`` so ``A = n·D₀/60``; ``G₀ = s·P``, ``N = P − G₀``; the
per-cycle cost ``C₀ = 60·G₀/n``. One point cannot split ``C₀`` into fixed and
per-byte parts: it is taken as all per-byte (mark work ∝ scan work), unless
``fixed_fraction`` says otherwise. Without the heap, heaps are in units of the
current marked heap (``heap_known=False``: only ratios are reported); without
the process CPU, CPU is in units of the current process CPU (``cpu_known``).

From the store (``inputs_from_store``): the per-instance join of
``pyproflab.analyses.gc`` (cycles/min, heap live and goal, allocation rate,
CPU classes, GOGC, GOMEMLIMIT) plus ``gc_cycles`` (roots, mark-time
allocation, per-cycle CPU). ``c0, c1`` are fitted by least squares over
instances (or, with one instance, over its gctrace cycles, rescaled to the
CPU classes' total); a negative intercept is refitted through the origin.

Recommendation: among candidates with a finite peak memory within the budget
(``budget × (1 − headroom)``), the lowest GC CPU (ties: the smaller peak). A
raise (a higher GOGC, or off) without a memory limit is paired with
GOMEMLIMIT = the usable budget (``paired_memory_limit_bytes``), and a note
says so.

Longer than 500 lines: it is the whole earlier model, whose rules above each
function cites: the setting parsers (``parse_*``, which ``cli/gogc_fitted``
also imports), ``GcInputs`` and its derivation from observed figures, the
equations, the result and recommendation, and ``inputs_from_store``. The
parsers (about 70 lines) and the store inputs (about 200) are the seams a split
would cut along; it is left to issue 12's rewrite of the GOGC modules, which
moves code across them this session.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from pyproflab.display import render
from pyproflab.errors import UsageError
from pyproflab.store import queries

MiB = float(1 << 20)
HEAP_MINIMUM = 4 * MiB  # the runtime's heap minimum at GOGC=100 (scales with GOGC)
LIMIT_HEADROOM_PCT = 3.0  # memoryLimitHeapGoalHeadroomPercent
LIMIT_MIN_HEADROOM = 1 * MiB  # memoryLimitMinHeapGoalHeadroom
PHI = 1 - 45 / 64  # the largest runway: trigger >= H + (45/64)·(goal − H)
NO_LIMIT = float(2**63 - 1)  # GOMEMLIMIT's default (math.MaxInt64)

DEFAULT_CANDIDATES: tuple[float | None, ...] = (25, 50, 100, 150, 200, 300, 400, 800, None)
MODELS = ("plain", "improved")

Setting = tuple[float | None, float | None]  # (GOGC or None for off, limit bytes or None)


# --- parsing -----------------------------------------------------------------------

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([kmgtp]?)(i?)b?\s*$", re.I)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str | float | int) -> float:
    """Bytes from ``2GiB``, ``512MiB``, ``1.5G`` (SI: powers of 1000), ``1e9`` or a number."""
    if isinstance(text, (int, float)):
        return float(text)
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"bad size {text!r}: expected e.g. 2GiB, 512MiB, 1.5G or bytes")
    base = 1024.0 if m.group(3) else 1000.0
    return float(m.group(1)) * base ** _POW[m.group(2).lower()]


def parse_gogc(text: str | float | int | None) -> float | None:
    """A GOGC value: a non-negative number, or ``off`` (None; also any negative value)."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        return None if text < 0 else float(text)
    t = text.strip().lower()
    if t == "off":
        return None
    try:
        v = float(t)
    except ValueError:
        raise UsageError(f"bad GOGC {text!r}: expected a number or off") from None
    return None if v < 0 else v


def parse_limit(text: str | float | int | None) -> float | None:
    """A memory limit: a size, or ``off``/``none`` (None; so is GOMEMLIMIT's MaxInt64)."""
    if text is None:
        return None
    if isinstance(text, str) and text.strip().lower() in ("off", "none", ""):
        return None
    v = parse_size(text)
    if v <= 0:
        raise UsageError(f"bad memory limit {text!r}: must be positive")
    return None if v >= NO_LIMIT - 1024 else v


def parse_candidates(text: str | Iterable[Any]) -> list[float | None]:
    """GOGC candidates from ``25,50,off`` (or an iterable of numbers / ``off``)."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = [parse_gogc(x) for x in items if not (isinstance(x, str) and not x.strip())]
    if not out:
        raise UsageError("no GOGC candidates given")
    return list(dict.fromkeys(out))


def parse_fraction(text: str | float) -> float:
    """``10%`` or ``0.1`` -> 0.1 (0 <= f < 1)."""
    if isinstance(text, str):
        t = text.strip()
        try:
            v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
        except ValueError:
            raise UsageError(f"bad fraction {text!r}: expected e.g. 10% or 0.1") from None
    else:
        v = float(text)
    if not 0 <= v < 1:
        raise UsageError(f"fraction {text!r} out of range [0, 1)")
    return v


def gogc_label(g: float | None) -> str:
    return "off" if g is None else f"{g:g}"


# --- inputs ------------------------------------------------------------------------


@dataclass
class GcInputs:
    """What the model needs (bytes, seconds, cores). See the module docstring.

    ``live_heap_bytes`` is the marked heap ``H₀`` at the current setting.
    ``heap_known``/``cpu_known`` False: heaps are in units of ``H₀`` and CPU in
    units of the current process CPU (only ratios and shares are meaningful).
    ``mark_alloc_ratio`` is ``κ`` (bytes allocated while marking per byte of
    scan work; 0 = unknown). ``cycle_gap_bytes`` (improved model): how far below
    the goal marking ends, ``D₀ − A·60/n₀`` at the current setting (0 = unknown).
    ``non_heap_bytes`` None: taken as ``roots_bytes``.
    """

    live_heap_bytes: float
    alloc_bytes_per_sec: float
    gc_cpu_fixed_seconds: float
    gc_cpu_seconds_per_byte: float
    non_gc_cpu_cores: float
    roots_bytes: float = 0.0
    gogc: float | None = 100.0
    memory_limit_bytes: float | None = None
    non_heap_bytes: float | None = None
    mark_alloc_ratio: float = 0.0
    cycle_gap_bytes: float = 0.0
    heap_known: bool = True
    cpu_known: bool = True
    source: str = "explicit"
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in (
            "live_heap_bytes",
            "alloc_bytes_per_sec",
            "gc_cpu_fixed_seconds",
            "gc_cpu_seconds_per_byte",
            "non_gc_cpu_cores",
            "roots_bytes",
            "mark_alloc_ratio",
            "cycle_gap_bytes",
        ):
            v = getattr(self, name)
            if v is None or not math.isfinite(v) or v < 0:
                raise UsageError(f"GC input {name} must be a finite number >= 0, got {v!r}")
        if self.live_heap_bytes <= 0:
            raise UsageError("GC input live_heap_bytes must be > 0")

    @property
    def overhead_bytes(self) -> float:
        return self.roots_bytes if self.non_heap_bytes is None else self.non_heap_bytes

    @property
    def setting(self) -> Setting:
        return (self.gogc, self.memory_limit_bytes)

    @classmethod
    def from_observed(
        cls,
        *,
        gogc: float | str | None,
        gc_cycles_per_min: float,
        gc_cpu_share: float,
        heap_goal_bytes: float | None = None,
        live_heap_bytes: float | None = None,
        roots_bytes: float = 0.0,
        process_cpu_cores: float | None = None,
        memory_limit_bytes: float | None = None,
        non_heap_bytes: float | None = None,
        fixed_fraction: float = 0.0,
        mark_alloc_ratio: float = 0.0,
    ) -> GcInputs:
        """Derive the unobserved inputs from observed figures (see the module rules).

        ``gc_cpu_share``: GC CPU over process (busy) CPU, as a CPU profile shows it.
        ``fixed_fraction``: the share of the per-cycle cost that is fixed (one
        point cannot tell; 0 = all proportional to scan work).
        """
        g = parse_gogc(gogc) if isinstance(gogc, str) else gogc
        _check_observed(gc_cycles_per_min, gc_cpu_share, fixed_fraction)
        notes: list[str] = []
        heap_known = live_heap_bytes is not None or heap_goal_bytes is not None
        roots = float(roots_bytes or 0.0)
        h = _observed_heap(live_heap_bytes, heap_goal_bytes, roots, g, notes)
        if not heap_known and memory_limit_bytes is not None:
            raise UsageError("a memory limit needs the heap size: give the live heap or heap goal")
        cpu_known = process_cpu_cores is not None
        p = float(process_cpu_cores) if cpu_known else 1.0
        if not cpu_known:
            notes.append("no process CPU given: CPU is relative to the current process CPU")
        probe = cls(
            live_heap_bytes=h,
            alloc_bytes_per_sec=0.0,
            gc_cpu_fixed_seconds=0.0,
            gc_cpu_seconds_per_byte=0.0,
            non_gc_cpu_cores=p,
            roots_bytes=roots,
            gogc=g,
            memory_limit_bytes=memory_limit_bytes,
            non_heap_bytes=non_heap_bytes,
            heap_known=heap_known,
        )
        goal, _ = heap_goal(probe, h, g, memory_limit_bytes)
        observed = heap_goal_bytes if live_heap_bytes is not None else None
        dist = _cycle_distance(goal, observed, h)
        per_sec = gc_cycles_per_min / 60.0
        gc_cores = gc_cpu_share * p
        per_cycle = gc_cores / per_sec
        scan = h + roots
        if fixed_fraction == 0:
            notes.append(
                "one observation: the GC cost per cycle is taken as proportional "
                "to scan work (live heap + roots), no fixed part"
            )
        return cls(
            live_heap_bytes=h,
            alloc_bytes_per_sec=per_sec * dist,
            gc_cpu_fixed_seconds=fixed_fraction * per_cycle,
            gc_cpu_seconds_per_byte=(1 - fixed_fraction) * per_cycle / scan,
            non_gc_cpu_cores=p - gc_cores,
            roots_bytes=roots,
            gogc=g,
            memory_limit_bytes=memory_limit_bytes,
            non_heap_bytes=non_heap_bytes,
            mark_alloc_ratio=mark_alloc_ratio,
            heap_known=heap_known,
            cpu_known=cpu_known,
            source="observed",
            notes=notes,
        )


def _check_observed(gc_cycles_per_min: float, gc_cpu_share: float, fixed_fraction: float) -> None:
    """The observed figures ``from_observed`` needs: cycles > 0 and finite, the GC
    CPU share in [0, 1), the fixed fraction in [0, 1]; else ``UsageError``."""
    if not (gc_cycles_per_min > 0 and math.isfinite(gc_cycles_per_min)):
        raise UsageError("gc cycles per minute must be > 0 to derive the inputs")
    if not 0 <= gc_cpu_share < 1:
        raise UsageError(f"GC CPU share must be in [0, 1), got {gc_cpu_share}")
    if not 0 <= fixed_fraction <= 1:
        raise UsageError(f"fixed fraction must be in [0, 1], got {fixed_fraction}")


def _observed_heap(
    live_heap_bytes: float | None,
    heap_goal_bytes: float | None,
    roots: float,
    g: float | None,
    notes: list[str],
) -> float:
    """The marked heap ``H``: the live heap when given; else inverted from the heap
    goal (``goal = H + (H + R)·g``, which GOGC=off cannot invert); else 1 (heaps
    relative to the current one, which roots cannot be added to). Appends a note
    for each derived value."""
    if live_heap_bytes is not None:
        return float(live_heap_bytes)
    if heap_goal_bytes is not None:
        if g is None:
            raise UsageError("with GOGC=off give the live heap, not only the heap goal")
        # Invert goal = H + (H + R)·g (the heap minimum and limit aside).
        h = (float(heap_goal_bytes) - roots * g / 100) / (1 + g / 100)
        if h <= 0:
            raise UsageError("heap goal too small for these roots and GOGC")
        notes.append("marked heap derived from the heap goal: H = (goal − R·g)/(1 + g)")
        return h
    if roots:
        raise UsageError("roots need the heap size: give the live heap or heap goal")
    notes.append("no heap size given: heaps are relative to the current marked heap")
    return 1.0


def _cycle_distance(modelled: float, observed: float | None, h: float) -> float:
    """Bytes allocated per cycle, ``D = goal − H``, with the observed goal (when
    given beside the live heap) beating the modelled one. An infinite modelled
    goal (GOGC=off, no limit) runs no GC, and ``D <= 0`` gives no allocation
    rate: both raise ``UsageError``."""
    if not math.isfinite(modelled):
        raise UsageError(
            "GOGC=off without a memory limit runs no GC: the observed cycles cannot be explained"
        )
    goal = modelled if observed is None else float(observed)
    dist = goal - h
    if dist <= 0:
        raise UsageError("heap goal at or below the live heap: cannot derive the allocation rate")
    return dist


# --- the model -----------------------------------------------------------------------


def heap_goal(inp: GcInputs, h: float, g: float | None, limit: float | None) -> tuple[float, str]:
    """(goal bytes, what governs it: ``gogc``, ``limit`` or ``none``) for marked heap ``h``."""
    goal_g = math.inf
    if g is not None:
        goal_g = h + (h + inp.roots_bytes) * g / 100
        if inp.heap_known:
            goal_g = max(goal_g, HEAP_MINIMUM * g / 100)
    if limit is None:
        return goal_g, "gogc" if g is not None else "none"
    avail = limit - inp.overhead_bytes
    headroom = max(avail * LIMIT_HEADROOM_PCT / 100, LIMIT_MIN_HEADROOM)
    goal_m = avail - headroom if avail - headroom >= headroom else headroom
    goal_m = max(goal_m, h)
    if goal_m < goal_g:
        return goal_m, "limit"
    return goal_g, "gogc"


def _black(inp: GcInputs, h: float, dist: float) -> float:
    """Bytes allocated while marking, kept by the cycle: min(κ·(H + R), φ·D)."""
    return min(inp.mark_alloc_ratio * (h + inp.roots_bytes), PHI * max(dist, 0.0))


def true_live(inp: GcInputs) -> float:
    """``L = H₀ − B₀``: the live heap without the mark-time allocation (improved model)."""
    if inp.mark_alloc_ratio <= 0:
        return inp.live_heap_bytes
    h0 = inp.live_heap_bytes
    goal, _ = heap_goal(inp, h0, inp.gogc, inp.memory_limit_bytes)
    dist = goal - h0 if math.isfinite(goal) else math.inf
    return max(h0 - _black(inp, h0, dist), h0 * 1e-3)


def marked_heap(inp: GcInputs, g: float | None, limit: float | None, model: str) -> float:
    """The marked heap ``H`` under a setting: ``H₀`` (plain), or ``H = L + B(H)`` (improved)."""
    if model == "plain" or inp.mark_alloc_ratio <= 0:
        return inp.live_heap_bytes
    live = true_live(inp)

    def excess(h: float) -> float:  # decreasing in h while the slopes stay below one
        goal, _ = heap_goal(inp, h, g, limit)
        dist = goal - h if math.isfinite(goal) else math.inf
        return live + _black(inp, h, dist) - h

    lo, hi = live, max(live, 1.0)
    while excess(hi) > 0:
        hi *= 2
        if hi > live * 1e6:  # no steady state: the heap would grow without bound
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    return hi


PREDICTION_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("gogc", pa.float64()),  # null: off
        pa.field("gogc_label", pa.string()),
        pa.field("memory_limit_bytes", pa.float64()),  # null: no limit
        pa.field("governed_by", pa.string()),  # gogc, limit, none
        pa.field("live_heap_bytes", pa.float64()),  # marked heap H
        pa.field("heap_goal_bytes", pa.float64()),
        pa.field("peak_heap_bytes", pa.float64()),
        pa.field("peak_memory_bytes", pa.float64()),  # peak heap + non-heap memory
        pa.field("heap_ratio", pa.float64()),  # peak heap / the current setting's
        pa.field("gc_cycles_per_min", pa.float64()),
        pa.field("gc_cpu_cores", pa.float64()),
        pa.field("gc_cpu_share", pa.float64()),  # of process CPU
        pa.field("gc_cpu_ratio", pa.float64()),  # GC CPU / the current setting's
        pa.field("process_cpu_cores", pa.float64()),
        pa.field("current", pa.bool_()),
        pa.field("within_budget", pa.bool_()),
        pa.field("recommended", pa.bool_()),
        pa.field("status", pa.string()),  # ok, no-gc, continuous-gc, unbounded
    ]
)


def predict_one(
    inp: GcInputs, g: float | None, limit: float | None, model: str = "improved"
) -> dict[str, Any]:
    """One setting's prediction (absolute columns; ratios and flags are filled later)."""
    if model not in MODELS:
        raise UsageError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    row: dict[str, Any] = {
        "model": model,
        "gogc": g,
        "gogc_label": gogc_label(g),
        "memory_limit_bytes": limit,
    }
    h = marked_heap(inp, g, limit, model)
    goal, governed = heap_goal(inp, h, g, limit) if math.isfinite(h) else (math.inf, "gogc")
    row.update(
        governed_by=governed,
        live_heap_bytes=h,
        heap_goal_bytes=goal,
        peak_heap_bytes=goal,
        peak_memory_bytes=goal + inp.overhead_bytes,
    )
    if not math.isfinite(h):
        status, cycles, gc_cores = "unbounded", math.nan, math.nan
    elif not math.isfinite(goal):
        status, cycles, gc_cores = "no-gc", 0.0, 0.0
    else:
        dist = goal - h
        if dist <= h * 1e-6:
            status, cycles, gc_cores = "continuous-gc", math.nan, math.nan
        else:
            if model == "improved":
                # Marking ends before the goal by the unused runway, which the pacer plans
                # from scan work (constant in bytes) but never beyond φ·D.
                dist -= min(inp.cycle_gap_bytes, PHI * dist)
            per_sec = inp.alloc_bytes_per_sec / dist
            cost = inp.gc_cpu_fixed_seconds + inp.gc_cpu_seconds_per_byte * (h + inp.roots_bytes)
            status, cycles, gc_cores = "ok", 60 * per_sec, per_sec * cost
    proc = inp.non_gc_cpu_cores + gc_cores
    row.update(
        gc_cycles_per_min=cycles,
        gc_cpu_cores=gc_cores,
        gc_cpu_share=gc_cores / proc if proc > 0 else math.nan,
        process_cpu_cores=proc,
        status=status,
    )
    return row


def predict(
    inp: GcInputs,
    candidates: Sequence[float | None] = DEFAULT_CANDIDATES,
    memory_limits: Sequence[float | None] | None = None,
    *,
    model: str = "improved",
) -> pa.Table:
    """Predictions for every (GOGC, limit) pair plus the current setting (``current``).

    ``memory_limits`` None: the current limit only. Ratios are against the
    current setting under the same model.
    """
    limits = [inp.memory_limit_bytes] if memory_limits is None else list(memory_limits)
    settings: list[Setting] = [(g, m) for m in dict.fromkeys(limits) for g in candidates]
    if inp.setting not in settings:
        settings.append(inp.setting)
    cur = predict_one(inp, *inp.setting, model)
    rows = []
    for g, m in settings:
        r = predict_one(inp, g, m, model)
        r["current"] = (g, m) == inp.setting
        r["heap_ratio"] = _ratio(r["peak_heap_bytes"], cur["peak_heap_bytes"])
        r["gc_cpu_ratio"] = _ratio(r["gc_cpu_cores"], cur["gc_cpu_cores"])
        r["within_budget"] = None
        r["recommended"] = False
        rows.append(r)
    return pa.Table.from_pylist(rows, schema=PREDICTION_SCHEMA)


def _ratio(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b) or b == 0 or math.isinf(b):
        return math.nan
    return a / b


# --- the result ------------------------------------------------------------------------


@dataclass
class GogcResult:
    """Predictions per candidate setting, the current point and the recommendation.

    ``predictions`` (``PREDICTION_SCHEMA``): one row per (GOGC, limit), the
    current setting flagged. ``recommendation``: the recommended row plus
    ``memory_cost_bytes``/``memory_cost_ratio`` (peak memory vs current) and
    ``gc_cpu_saved_cores``/``gc_share_change``; None without a budget or fit.
    ``budget_bytes`` is the usable budget (after headroom).
    """

    inputs: GcInputs
    predictions: pa.Table
    model: str = "improved"
    budget_bytes: float | None = None
    budget_label: str | None = None
    recommendation: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def current(self) -> dict[str, Any]:
        return next(r for r in self.predictions.to_pylist() if r["current"])

    def to_arrow(self) -> pa.Table:
        return self.predictions

    def to_pandas(self):
        return self.predictions.to_pandas()

    def inputs_dict(self) -> dict[str, Any]:
        d = asdict(self.inputs)
        d["true_live_heap_bytes"] = true_live(self.inputs)
        return d

    def figure(self):
        return render(self, "figure")

    def __len__(self) -> int:
        return self.predictions.num_rows

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __repr__(self) -> str:
        rec = self.recommendation
        what = f"recommend GOGC={rec['gogc_label']}" if rec else "no recommendation"
        return f"GogcResult({self.predictions.num_rows} settings, {self.model}, {what})"


def recommend(
    table: pa.Table, budget_bytes: float | None, *, heap_known: bool = True
) -> tuple[pa.Table, dict[str, Any] | None, list[str]]:
    """Flag rows within the budget and the recommended one (lowest GC CPU, then peak)."""
    rows = table.to_pylist()
    notes: list[str] = []
    if budget_bytes is None:
        return table, None, ["no budget given: no recommendation (use --budget)"]
    cur = next(r for r in rows if r["current"])
    fits = []
    for r in rows:
        peak = r["peak_memory_bytes"] if heap_known else r["heap_ratio"]
        ok = (
            r["status"] in ("ok", "no-gc")
            and peak is not None
            and math.isfinite(peak)
            and peak <= budget_bytes
        )
        r["within_budget"] = ok
        if ok and not math.isnan(r["gc_cpu_cores"]):
            fits.append(r)
    rec = None
    if fits:
        best = min(fits, key=lambda r: (r["gc_cpu_cores"], r["peak_memory_bytes"]))
        best["recommended"] = True
        rec = dict(best)
        rec["memory_cost_bytes"] = best["peak_memory_bytes"] - cur["peak_memory_bytes"]
        rec["memory_cost_ratio"] = _ratio(best["peak_memory_bytes"], cur["peak_memory_bytes"])
        rec["gc_cpu_saved_cores"] = cur["gc_cpu_cores"] - best["gc_cpu_cores"]
        rec["gc_share_change"] = best["gc_cpu_share"] - cur["gc_cpu_share"]
        rec["paired_memory_limit_bytes"] = None
        if _is_raise(cur["gogc"], best["gogc"]) and best["memory_limit_bytes"] is None:
            # The guide's advice: a raise without a limit trades CPU for an OOM kill
            # when the prediction is wrong; with one, the GC works harder instead.
            rec["paired_memory_limit_bytes"] = budget_bytes
            what = (
                f"{budget_bytes / MiB:.0f}MiB"
                if heap_known
                else "the container's memory minus the headroom"
            )
            notes.append(
                f"GOGC={best['gogc_label']} is a raise: set GOMEMLIMIT={what} (the budget "
                "minus headroom) with it, so that a heap larger than predicted makes the GC "
                "work harder instead of getting the process killed"
            )
    else:
        notes.append("no candidate's predicted peak memory fits the budget")
    return pa.Table.from_pylist(rows, schema=table.schema), rec, notes


def _is_raise(current: float | None, new: float | None) -> bool:
    return current is not None and (new is None or new > current)


def parse_budget(
    budget: str | float | None, headroom: str | float = 0.1, *, current_peak: float | None = None
) -> tuple[float | None, str | None]:
    """Usable budget = budget × (1 − headroom). ``2x`` is relative to the current peak
    memory (needed when the heap size is unknown); headroom ``10%``, ``0.1`` or a size."""
    if budget is None:
        return None, None
    label = str(budget)
    if isinstance(budget, str) and budget.strip().lower().endswith("x"):
        try:
            total = float(budget.strip()[:-1])
        except ValueError:
            raise UsageError(f"bad budget {budget!r}") from None
        if current_peak is None or not math.isfinite(current_peak):
            raise UsageError("a relative budget needs a finite current peak")
        total *= current_peak
    else:
        total = parse_size(budget)
    if (
        isinstance(headroom, str)
        and not headroom.strip().endswith("%")
        and re.search(r"[a-zA-Z]", headroom)
    ):
        usable = total - parse_size(headroom)
    else:
        usable = total * (1 - parse_fraction(headroom))
    if usable <= 0:
        raise UsageError("budget minus headroom is not positive")
    return usable, label


# --- inputs from the store ---------------------------------------------------------


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least squares ``cost = c0 + c1·scan``; c0 < 0 refits through the origin.
    None when the scans do not vary (one point's split is unknowable)."""
    if len(points) < 2:
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= (mx * 1e-3) ** 2 * len(xs):
        return None
    c1 = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    c0 = my - c1 * mx
    if c0 < 0 or c1 < 0:
        sx2 = sum(x * x for x in xs)
        c0, c1 = 0.0, max(sum(x * y for x, y in zip(xs, ys, strict=True)) / sx2, 0.0)
    return c0, c1


def inputs_from_store(store, selection=None) -> GcInputs:
    """GcInputs for the selection's instances (their means; see the module rules).

    Raises ``UsageError`` when the store has no GC metrics or too few of them.
    """
    from pyproflab.analyses.gc import gc as gc_join

    present = queries.table_names(store)
    if "metric_samples" not in present and "gc_cycles" not in present:
        raise UsageError(
            "the store has no GC metrics (metric_samples, gc_cycles): ingest "
            "them with `pyproflab ingest-gc`, or give the inputs explicitly "
            "(--gogc, --gc-cycles-per-min, --gc-cpu-share)"
        )
    res = gc_join(store, selection, categories=False)
    notes = list(res.notes)
    insts = [r for r in res.instances.to_pylist() if r["gc_cycles_per_min"]]
    if not insts:
        raise UsageError(
            "no GC cycle counts for the selected profiles' instances and windows "
            "(go_gc_cycles_total_gc_cycles_total): cannot model GOGC"
        )
    gct = _gctrace_rows(store, res.instances.to_pylist()) if "gc_cycles" in present else []
    roots = 0.0
    if gct and all(r["stacks"] is not None for r in gct):
        roots = _mean(r["stacks"] + r["globals"] for r in gct) or 0.0
    else:
        notes.append("no gctrace stacks/globals: GC roots taken as 0")
    per_inst, points = _instance_rates(insts, roots, notes)
    h = _mean(p["h"] for p in per_inst) or 1.0
    gc_cores = _mean(p["gc"] for p in per_inst) or 0.0
    busy = _mean(p["busy"] for p in per_inst) or 0.0
    gogcs = {p["gogc"] for p in per_inst}
    if len(gogcs) > 1:
        notes.append(
            f"instances run different GOGC values {sorted(map(str, gogcs))}: "
            "the first is taken as current"
        )
    g = per_inst[0]["gogc"]
    if g is None:
        g = 100.0
        notes.append("GOGC not reported (go_gc_gogc_percent): taken as 100")
    per_cycle = 60 * gc_cores / (_mean(p["n"] for p in per_inst) or math.inf)
    fit = _cycle_cost_fit(points, gct, h + roots, per_cycle, notes)
    kappa = 0.0
    if gct:
        mark = _mean(max(r["end"] - r["start"], 0.0) for r in gct) or 0.0
        kappa = mark / (_mean(r["scan"] for r in gct) or math.inf)
    return GcInputs(
        live_heap_bytes=h,
        alloc_bytes_per_sec=_mean(p["a"] for p in per_inst) or 0.0,
        gc_cpu_fixed_seconds=fit[0],
        gc_cpu_seconds_per_byte=fit[1],
        non_gc_cpu_cores=max(busy - gc_cores, 0.0),
        roots_bytes=roots,
        gogc=parse_gogc(g),
        memory_limit_bytes=parse_limit(per_inst[0]["limit"]),
        mark_alloc_ratio=kappa,
        source=f"store ({len(per_inst)} instances)",
        notes=notes,
    )


def _mean(vals: Iterable[float | None]) -> float | None:
    """Mean of the finite values; None when there are none."""
    v = [x for x in vals if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else None


def _instance_rates(
    insts: list[dict[str, Any]], roots: float, notes: list[str]
) -> tuple[list[dict[str, Any]], list[tuple[float, float]]]:
    """Per instance: heap, allocation rate, GC and busy CPU (cores), GOGC, limit and
    cycles/min; and the (scan bytes, GC CPU s per cycle) points of the instances
    that ran cycles. An instance without heap, allocation or CPU-class metrics is
    skipped with a note; none left raises ``UsageError``."""
    points, per_inst = [], []
    for r in insts:
        h = r["heap_live_mean_bytes"] or (r["gctrace_heap_live_mean_mb"] or 0) * MiB or None
        secs = (
            r["alloc_bytes"] / r["alloc_bytes_per_sec"]
            if r["alloc_bytes"] and r["alloc_bytes_per_sec"]
            else None
        )
        if (
            h is None
            or secs is None
            or r["gc_cpu_seconds"] is None
            or r["total_cpu_seconds"] is None
        ):
            notes.append(
                f"instance {r['instance']}: heap, allocation or CPU-class metrics missing: skipped"
            )
            continue
        busy = r["total_cpu_seconds"] - (r["idle_cpu_seconds"] or 0.0)
        cycles = r["gc_cycles"] or 0
        per_inst.append(
            dict(
                h=h,
                a=r["alloc_bytes_per_sec"],
                gc=r["gc_cpu_seconds"] / secs,
                busy=busy / secs,
                gogc=r["gogc_percent"],
                limit=r["gomemlimit_bytes"],
                n=r["gc_cycles_per_min"],
            )
        )
        if cycles > 0:
            points.append((h + roots, r["gc_cpu_seconds"] / cycles))
    if not per_inst:
        raise UsageError(
            "no instance has heap, allocation and CPU-class metrics: cannot "
            "model GOGC (give the inputs explicitly)"
        )
    return per_inst, points


def _cycle_cost_fit(
    points: list[tuple[float, float]],
    gct: list[dict[str, Any]],
    scan: float,
    per_cycle: float,
    notes: list[str],
) -> tuple[float, float]:
    """GC CPU per cycle as ``(c0, c1)``, in this order of preference: fitted over
    the instances' points; else over gctrace cycles (when their scans vary),
    rescaled so the fit at the mean ``scan`` equals the CPU classes' ``per_cycle``
    (gctrace counts only the mark phases); else one point, all proportional to
    scan work. Appends a note saying which."""
    fit = _fit(points)
    if fit is None and len({round(r["scan"] / MiB) for r in gct}) > 1:
        fit = _fit([(r["scan"], r["cpu"]) for r in gct])
        if fit is not None:
            # gctrace CPU counts the mark phases; rescale to the CPU classes' total.
            at = fit[0] + fit[1] * scan
            k = per_cycle / at if at > 0 else 1.0
            fit = (fit[0] * k, fit[1] * k)
            notes.append(f"GC cost per cycle fitted over {len(gct)} gctrace cycles")
    elif fit is not None:
        notes.append(f"GC cost per cycle fitted over {len(points)} instances")
    if fit is None:
        fit = (0.0, per_cycle / scan)
        notes.append("GC cost per cycle from one point: taken as proportional to scan work")
    return fit


def _gctrace_rows(store, instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """gctrace cycles of the instances' windows: scan bytes, mark CPU s, heap start/end."""
    spans = [
        (r["service"], r["instance"], r["window_start"], r["window_end"])
        for r in instances
        if r["instance"] and r["window_start"] and r["window_end"]
    ]
    if not spans:
        return []
    t = pa.table(
        {
            "service": pa.array([s[0] for s in spans], pa.string()),
            "instance": pa.array([s[1] for s in spans], pa.string()),
            "w_start": pa.array([s[2] for s in spans], pa.timestamp("us", tz="UTC")),
            "w_end": pa.array([s[3] for s in spans], pa.timestamp("us", tz="UTC")),
        }
    )
    rows = queries.window_gc_cycle_costs(store, t)
    out = []
    for r in rows.to_pylist():
        stacks = None if r["stacks_mb"] is None else r["stacks_mb"] * MiB
        globs = None if r["globals_mb"] is None else r["globals_mb"] * MiB
        out.append(
            dict(
                stacks=stacks,
                globals=globs,
                scan=(r["heap_live_mb"] + (r["stacks_mb"] or 0) + (r["globals_mb"] or 0)) * MiB,
                cpu=r["cpu_ms"] / 1e3,
                start=r["heap_start_mb"] * MiB,
                end=r["heap_end_mb"] * MiB,
            )
        )
    return out


# --- the entry point -------------------------------------------------------------------


def gogc(
    store=None,
    selection=None,
    *,
    inputs: GcInputs | None = None,
    candidates: Iterable[Any] | str = DEFAULT_CANDIDATES,
    memory_limits: Iterable[Any] | str | None = None,
    budget: str | float | None = None,
    headroom: str | float = 0.1,
    model: str = "improved",
) -> GogcResult:
    """Predict GC cost and heap for candidate GOGC values and memory limits; recommend one.

    Inputs: ``inputs`` if given, else from ``store`` and ``selection``.
    ``memory_limits``: sizes or ``off`` (default: the current limit only).
    ``budget``: container memory (``2GiB``; ``2x`` = twice the current peak);
    the usable budget is ``budget × (1 − headroom)``.
    """
    if inputs is None:
        if store is None:
            raise UsageError("give GC inputs or a store")
        inputs = inputs_from_store(store, selection)
    cands = parse_candidates(candidates)
    limits = None
    if memory_limits is not None:
        items = memory_limits.split(",") if isinstance(memory_limits, str) else memory_limits
        limits = list(dict.fromkeys(parse_limit(x) for x in items))
        if any(m is not None for m in limits) and not inputs.heap_known:
            raise UsageError("memory limits need the heap size: give the live heap or heap goal")
    table = predict(inputs, cands, limits, model=model)
    cur_peak = next(r for r in table.to_pylist() if r["current"])
    if (
        budget is not None
        and not inputs.heap_known
        and not str(budget).strip().lower().endswith("x")
    ):
        raise UsageError(
            "an absolute budget needs the heap size (give the live heap or heap "
            "goal), or give a relative one such as 2x"
        )
    peak_key = "peak_memory_bytes" if inputs.heap_known else "heap_ratio"
    usable, label = parse_budget(budget, headroom, current_peak=cur_peak[peak_key])
    table, rec, notes = recommend(table, usable, heap_known=inputs.heap_known)
    notes = list(inputs.notes) + notes
    if not inputs.heap_known:
        notes.append("heap columns are in units of the current marked heap")
    if not inputs.cpu_known:
        notes.append("CPU columns are in units of the current process CPU")
    return GogcResult(
        inputs=inputs,
        predictions=table,
        model=model,
        budget_bytes=usable,
        budget_label=label,
        recommendation=rec,
        notes=notes,
    )


def with_setting(inp: GcInputs, gogc: float | None, limit: float | None) -> GcInputs:
    """The same inputs with another current setting (no re-derivation)."""
    return replace(inp, gogc=gogc, memory_limit_bytes=limit)


__all__ = [
    "DEFAULT_CANDIDATES",
    "MODELS",
    "PREDICTION_SCHEMA",
    "GcInputs",
    "GogcResult",
    "gogc",
    "heap_goal",
    "inputs_from_store",
    "marked_heap",
    "parse_candidates",
    "parse_size",
    "predict",
    "predict_one",
]
