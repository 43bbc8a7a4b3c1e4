"""The Go GC's pacer as the model uses it: one setting's steady state for one
set of parameters (``Params``).

Symbols: ``L`` the truly live heap, ``R`` roots (stacks + globals), ``g`` =
GOGC/100, ``M`` the memory limit, ``P`` GOMAXPROCS (``cap``: the CPU the
process can have in the runtime's P-time accounting: P), ``A`` the allocation rate.

1. Goal (the GC guide; ``mgcpacer.go``): ``goal_g = H + (H + R)·g``, at least
   ``4 MiB·g`` (the heap minimum scales with GOGC); off: none. Under a limit,
   ``goal_M = (M − O) − max(3 %·(M − O), 1 MiB)`` with ``O`` what the limit
   counts beside the heap's objects (the runtime's ``nonHeapMemory``: the
   memory outside the heap and the unused part of the spans in use), never
   below ``H``; the goal is the smaller.
2. Trigger: the pacer starts marking ``runway`` bytes before the goal, kept
   between 45/64 and 61/64 of the way from ``H`` (or 4 MiB below the goal on
   large heaps): ``t = clamp(D − runway, (45/64)·D, max((61/64)·D, D − 4 MiB))``
   with ``D = goal − H``. The runway is ``runway_k·(H + R)``: endCycle's
   cons/mark × (1 − 25 %)/25 % × scan work, from the largest of recent
   cycles' ratios; without cons/mark data, the unhurried mark's ``B_nat``.
   At most ``k·B_nat`` (at the setting's allocation rate): a cycle's
   cons/mark is ``B·(u + i)/(S·(1 − u))`` (endCycle), with ``u`` the
   background workers' 25 % plus the assists' share of the mark's P-time,
   so an unhurried mark (no assists; idle workers aside) leaves a runway of
   ``3·B·(1/4)/(3/4) = B_nat``, and endCycle keeps the largest of the last
   five cycles' ratios: ``k`` is the expected largest of 5 of the observed
   cycles' cons/mark over their mean (``fit`` rule 6; with one setting
   observed the bound is left to the interval). The runway per scan byte
   comes from the observed settings, where assists raised ``u`` (graph's
   and lru's GOGC 100, held by the limiter: ``u`` about 0.7, so ``u/(1 −
   u)`` 7x an unhurried mark's); taken at GOGC 800 it put their triggers
   at the floor, 45/64 of the way from ``H`` to the goal, where gctrace's
   mean heap at the mark's start sat at 0.83-0.84 (0.71 at 400): cycles per
   minute at 800 came out 17 and 28 % high (fitted on GOGC 100 and 200,
   Prometheus; now −2 and +6 %). Their heap goal there came out 2-16 % low
   with the mutator's bytes per core-second held at the current setting's
   (graph: 889 at GOGC 100, 1304 at 800, Prometheus); with rule 5's CPU
   per cycle, −6 to +7 %.
   Not modelled: the idle workers' share in that bound. endCycle's ratio
   counts their utilisation (``pacer_runway``), so on a paced process the
   pacer plans ``(P/4 + idle)/(P/4)`` times ``B_nat``. With that factor,
   service's cycles per minute at GOGC 25 came out +9 % (gctrace) and
   +2 % (Prometheus), fitted on 100 and 200, not +19 and +24; but its GC
   share at 400-800 came out 13-20 % low from gctrace (7-15 % from
   Prometheus, mean 13.6 % and 8.8 %): its idle workers held each idle
   P for the whole mark (their CPU per cycle per idle core over the mark's
   clock 0.89-1.18 at GOGC 50-800), and its marks lengthened with the heap
   (8.8 ms at GOGC 100, 14.1 at 800, the same 27-30 MiB marked), which
   rule 3's ``B_nat`` and rule 4's ``ι`` hold fixed. The two errors cancel
   in the bound as it stands; the factor waits on a mark length that grows
   with the heap. gctrace's runway (goal − heap at the mark's start) on
   service was 15.1, 17.6 and 21.4 MB at GOGC 200, 400 and 800 (8.2 at 100,
   at the floor) where the bound gives 6.0 MiB (gctrace) and 3.6
   (Prometheus): it puts GOGC 100's trigger at 0.78-0.87 of the way from
   ``H`` where gctrace's sat at 0.70, and ``fit`` rule 8's ``eps`` (0.85,
   0.78) makes up for it there and carries it to GOGC 25, where the
   trigger sits at the floor and the mark fills the runway (gctrace's heap
   at the mark's end 1.05 of the way; Prometheus' bytes a cycle 0.96-1.05
   of goal − live): cycles per minute +19 and +24 %. With the factor and
   ``ι`` linear in ln(goal) between the observed settings (service's 8.6
   ms per idle core at GOGC 100, 9.8 at 200, 13.0 at 800, gctrace),
   service met its targets (cycles per minute at 25 +8 and +2 %, GC share
   13.5 and 8.0 % at most) and blob's GC share came closer (at most 31 →
   28 %, 36 → 26 %), but blob's cycles per minute at 25 went +0.5 → +2.5 %
   (gctrace): its ``k`` (2.78) × ``B_nat`` × (1 + 4i) put its runway at 11
   MiB where gctrace shows 7-9.5 MB at every setting. Not landed (a
   largest error grew); ``ι``'s rise has no runtime rule here.
3. Floating garbage: objects allocated while marking are allocated black,
   so ``H = L + B``. Unhurried, a mark lasts what the background workers'
   25 % of P (plus the Ps that idle) need for the mark work, during which the
   mutator allocates ``B_nat`` (at the reference allocation rate; in
   proportion to ``A``). Assists hurry it to end by the goal, within the
   runway the trigger left, ``r = D − t``: ``B = min(B_nat, r·max(σ·hurry,
   1 − e^(−B_nat/r)))``. ``hurry`` is the share of that runway hurried marks
   were seen to use (they end early: the pacer's runway comes from the
   largest of recent cons/mark ratios). ``1 − e^(−B_nat/r)`` is the share
   a mark the background workers alone would stretch over ``B_nat`` bytes
   uses when assists pace the rest (``mgcpacer.go`` revise: the assists' work
   per byte is the scan work left over the heap left to the goal): with the
   workers doing ``W/B_nat`` of the work ``W`` per byte allocated and the
   assists ``w/(r − b)``, the work ``w`` left after ``b`` bytes follows
   ``dw/db = −w/(r − b) − W/B_nat`` and reaches 0 at ``b = r·(1 −
   e^(−B_nat/r))``: a mark squeezed into a runway shorter than ``B_nat``
   ends near the goal. ``σ`` in [0, 1] (point 1, not identified: ``fit``
   rule 2b) is how much of ``hurry`` holds there. On tiny, service and queue
   (2 Ps) gctrace's mean heap at the mark's end was 0.84-0.98 of the way
   from its start to the goal at GOGC 50 and queue's 25, past the goal at
   tiny's and service's 25 (1.2, 1.6); 0.62-0.82 at 100. With ``B =
   min(B_nat, hurry·r)`` their cycles per minute at 25-50 came out up to
   15, 10 and 22 % high (fitted on GOGC 100 and 200, gctrace; now 11, 7
   and 14). ``B`` is never below ``B_min``, what
   the fastest mark seen allocated (a mark cannot be hurried beyond the CPU
   it has: the heap then overshoots its goal). ``H`` is solved by damped
   fixed-point iteration; infinite when marking never catches up.
4. A cycle allocates ``Δ = t + B`` bytes (what it frees in a steady state),
   so there are ``A/Δ`` cycles a second, each costing ``C = c0 + c1·(L + R) +
   c2·goal`` core-seconds: fixed, per scanned byte (the live heap and roots:
   what the mark allocates black it does not scan, ``fit`` rule 3), per heap
   byte. GC CPU is ``G = (A/Δ)·C``, plus, on a paced process, the idle mark
   workers': the Ps that would idle while marking run them, ``ι`` (``fit``
   rule 3b) core-seconds per cycle per idle core, ``min((A/Δ)·ι, 1)·(cap −
   N − G)``; a CPU-bound process has no idle P to give them.
   Not modelled: the runtime tests the trigger only at an allocation (every
   large object, every new span), so marking starts at the first test past
   it, part of that increment beyond ``t``. On batch the heap sees only the
   1 MiB copies (its 64 KiB scratch slice stays on the stack: ``go build
   -gcflags=-m``), so a cycle allocates a whole number of MiB past ``H``:
   4, 7, 13 and 26 at GOGC 25-200 (Prometheus: 3.997, 6.99, 12.94, 26.00)
   against triggers at 61/64 of the runway of 3.17, 6.34, 12.67 and 25.35
   (gctrace: heap at the mark's start = at its end, ``H`` + 4, 7, 13, 26).
   The excess, 0.83, 0.66, 0.33, 0.65 MiB, is the trigger's phase against
   the step: ``Δ = ⌈(61/64)·D / 1 MiB⌉`` MiB is 1.203, 1.053, 0.977, 0.977
   of ``D`` at GOGC 25-200, Prometheus' 1.20, 1.05, 0.98, 0.98 (first to
   last snapshot, six runs each); at 25 it passes the goal itself (the
   runtime then raises it to the heap + 64 KiB: gctrace's 17 MB against
   16.40 MiB). ``fit`` rule 8's ratio from GOGC 100 shrinks it with the
   runway (cycles per minute at 25: 23-24 % high). Fitted on 100 and 200, the
   intercept of the bytes a cycle allocates against this rule's is −0.65
   MiB (Prometheus) and 0 (gctrace, whole MiB), slopes 1.02 and 1.05: the
   two settings do not identify such a term, and the object sizes that
   bound it are in neither source: every step of 13/k MiB, k = 1-20, gives
   GOGC 100's 13 and 200's 26 MiB (their runways are in ratio 2), and at 25
   from 3.25 (k = 12) to 13 MiB. Fitted on GOGC 100 alone from
   Prometheus, cycles per minute at 25 came out +42 %: rule 2's runway,
   1.33 MiB from the intervals' cons/mark with ``B = A·T``, put the
   trigger at the floor. gctrace shows no mark-time allocation at GOGC
   25-200 (heap at the mark's start = at its end, 120 of 120 cycles each),
   endCycle leaves cons/mark as it was when the heap did not grow while
   marking (``heapLive <= triggered``), and at 25 a heap at ``H`` + 3 MiB
   (16.08 MiB, goal 16.40) started no cycle: the runtime's runway was
   under 0.32 MiB.
5. The mutator: ``N = N0 + (A/Δ)·(κ + s·goal)`` cores, where ``κ`` is its
   CPU per cycle and ``s`` its CPU per heap byte per cycle (sweeping every
   span in use once a cycle; ``mutator``'s rules). Paced (not CPU-bound),
   ``A`` is fixed, until ``N + G`` would exceed ``cap``, and then as
   CPU-bound with the current setting's ``α = A/N0``; CPU-bound, the CPU the
   GC leaves goes to the mutator, which allocates ``α`` bytes per
   core-second of its own: ``A = α·(cap − G − n·(κ + s·goal))``, that is
   ``A = α·cap / (1 + α·(C + κ + s·goal)/Δ)``: with fewer cycles less of
   the mutator's CPU goes to them, and its bytes per core-second rise
   (graph's from 793 at GOGC 25 to 1305 at 800). No prediction exceeds
   ``cap``.
6. The limiter: under a limit, GC CPU is capped at 50 % of P; a setting whose
   GC CPU would reach it, or whose limit leaves a runway under 25 % of ``L``,
   is ``near-limit`` (the GC runs nearly all the time: a death spiral), never
   advised. Without a limit that is ``gc-bound``. The runtime's limiter runs
   without a limit too (Go 1.26 ``mgclimit.go``): each update adds the GC's
   time less the mutator's to a bucket of 1 s per P (``capacityPerProc``),
   the GC's time being the assists plus 25 % of the window's P-time while
   the GC is on, idle Ps and idle mark workers left out of both; when the
   bucket is full, assists stop (``gcAssistAlloc`` returns, ``gcDrainN``
   backs out), and the first update that drains it starts them again. Held
   there, a CPU-bound process's GC spends about half its CPU, plus what
   overflows the full bucket between updates (each assist's end; the
   scheduler's at most every 10 ms): not derived here, but taken as seen.
   When a CPU-bound setting observed spent ``held`` ≥ 50 % of its CPU on the
   GC, no setting spends more: ``G = min(G, held·cap)``, the mutator gets
   the rest, the cycles per minute stay as rules 2-4 give, and the mark,
   slowed by the assists cut, lets the heap overshoot: ``B`` grows by
   ``G/(held·cap)`` (the unheld GC CPU over the held). On graph and lru
   (CPU-bound, pointer-dense) the GC share held at 54-59 % of the busy CPU
   from GOGC 100 down to 25 (GC CPU per cycle flat or falling, cycles per
   minute up 11-32 %); in gctrace their heaps ended over the goal in 82-97 %
   of the cycles at 25 and 50 (1.17-1.40x it on average), 49-62 % at 100
   (1.06-1.09x), 10-12 % at 200, and their marked heaps were 1.0-1.2x GOGC
   100's. Unheld, the model gave 64-72 % at 25 and 50.
7. Peak memory: goal × the largest RSS/goal seen (Prometheus), else the peak
   heap (goal × the largest heap/goal seen) + ``O``; at most the limit (the
   scavenger returns pages to keep under it; ``peak_memory_free`` and
   ``peak_memory_top_free`` are the figures before that cap). Its upper
   bound also takes the goal the largest floating garbage would set,
   ``L + B_top`` (the slowest mark: ``B_nat`` × the observed ratio of all
   workers' CPU to the unassisted workers', at most the widest runway
   ``(19/64)·D``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MiB = float(1 << 20)
HEAP_MINIMUM = 4 * MiB  # defaultHeapMinimum (scales with GOGC)
LIMIT_HEADROOM = 0.03  # memoryLimitHeapGoalHeadroomPercent
LIMIT_MIN_HEADROOM = 1 * MiB
LIMITER_SHARE = 0.5  # the GC CPU limiter's cap, of GOMAXPROCS
NEAR_LIMIT_RUNWAY = 0.25  # runway under this share of the live heap: near the limit
MIN_TRIGGER, MAX_TRIGGER = 45 / 64, 61 / 64  # of the way from H to the goal
BACKGROUND_UTILIZATION = 0.25  # gcBackgroundUtilization
MAX_UTIL_ERROR = 0.3  # startCycle's maxUtilError: beyond it, fractional workers
RSS_PER_GOAL_UNKNOWN = 1.4  # no RSS seen: Go's RSS ran 16-38 % above its goal on tests/gcbench


@dataclass(frozen=True)
class Params:
    """One parameter set (module rules)."""

    live: float  # L
    roots: float  # R
    procs: float  # P
    cap: float  # the CPU the process can use in P-time: P
    b_nat: float  # B_nat at the reference allocation rate (rule 3)
    alloc: float  # A, paced; the reference rate for b_nat
    runway_k: float  # the pacer's runway per scan byte (rule 2); 0: the trigger's floor
    c0: float
    c1: float
    c2: float
    saturated: bool
    alpha: float  # bytes per mutator core-second (CPU-bound)
    mutator0: float  # N0 (rule 5)
    sweep: float  # s (rule 5)
    peak_ratio: float  # the largest heap / goal
    memory_ratio: float  # the largest RSS / goal (0: peak heap + overhead)
    overhead: float  # O for peak memory
    limit_overhead: float  # O for the limit's goal
    slow_mark: float = 1.0  # rule 7
    eps: float = 1.0  # observed bytes per cycle / rule 4's, where observed
    hurry: float = 1.0  # the share of the runway left a hurried mark uses (rule 3)
    b_min: float = 0.0  # the fastest mark's allocation (rule 3)
    idle_s: float = 0.0  # ι: idle mark workers' CPU per cycle per idle core (rule 4)
    held: float = 0.0  # the GC share the limiter held at an observed setting (rule 6); 0: none
    squeeze: float = 1.0  # σ: how far the assists' pace carries a squeezed mark (rule 3)
    peak_cons: float = math.inf  # k: the largest of 5 cycles' cons/mark over their mean (rule 2)
    cycle_cpu: float = 0.0  # κ: the mutator's CPU per cycle, core-seconds (rule 5)


def background_workers(procs: float) -> tuple[int, float]:
    """(dedicated mark workers, fractional utilisation goal per P) as the runtime
    splits 25 % of ``procs`` (``mgcpacer.go``, startCycle): the goal rounded to
    whole workers, unless that is more than 30 % off, when whole workers are
    rounded down and fractional workers make up the rest."""
    total = procs * BACKGROUND_UTILIZATION
    dedicated = int(total + 0.5)
    if total <= 0 or abs(dedicated / total - 1) <= MAX_UTIL_ERROR:
        return dedicated, 0.0
    if dedicated > total:
        dedicated -= 1
    return dedicated, (total - dedicated) / procs


def mark_seconds(background_cpu: float, procs: float) -> tuple[float, bool]:
    """(mark phase seconds, exact) from one cycle's dedicated-class CPU: exact
    when only dedicated workers run, else the fractional workers' lower bound."""
    dedicated, fractional = background_workers(procs)
    if fractional == 0 and dedicated > 0:
        return background_cpu / dedicated, True
    return background_cpu / (BACKGROUND_UTILIZATION * procs), False


def pacer_runway(b: float, t: float, assist: float, idle_mark: float, procs: float) -> float:
    """The runway the pacer sets after a cycle that allocated ``b`` bytes in ``t``
    seconds of marking with ``assist`` and ``idle_mark`` CPU (endCycle's
    cons/mark × 3 × scan work, which cancels): ``3·b·(u + i)/(1 − u)`` with ``u
    = 1/4 + assist/(P·t)`` and ``i = idle_mark/(P·t)``; infinite when ``u ≥ 1``."""
    x = procs * t
    u = BACKGROUND_UTILIZATION + assist / x
    if u >= 1:
        return math.inf
    return 3 * b * (u + idle_mark / x) / (1 - u)


def floor_mark(
    c: dict[str, float], procs: float, saturated: bool
) -> tuple[float, float, float] | None:
    """(mark seconds, mark-time allocation, the pacer's runway) of a cycle whose
    trigger sits at its floor, or None when it cannot: a cycle allocates
    ``Δ = (trigger − H) + B`` and the trigger is at least ``(45/64)·D`` above
    ``H``, so ``B ≤ Δ − (45/64)·D``; at that bound the mark lasted ``B/A``
    (CPU-bound: ``(B·(P − M·n)/A + M)/P``, the mutator holding every P the
    mark workers leave). It holds when that cycle's runway reaches the floor's,
    and, below GOMAXPROCS, when the idle mark workers' CPU is at least half
    of what the Ps left idle (neither the mutator's, ``busy`` − mark CPU,
    nor the background workers' 25 %) would have given them over that mark:
    idle workers take every idle P while marking, so a mark that long on an
    idle process shows far more idle-worker CPU (on blob, paced at 0.3 of
    2 cores, the floor's 76 ms mark against gctrace's 1-5 ms).

    ``c``: ``per_cycle`` bytes, ``runway`` goal − H, ``alloc``, ``n``,
    ``mark_cpu`` (every mark worker class), ``assist``, ``idle_mark``, and
    optionally ``busy`` (the process's cores)."""
    b = c["per_cycle"] - MIN_TRIGGER * c["runway"]
    if b <= 0 or c["alloc"] <= 0 or c["runway"] <= 0:
        return None
    if saturated:
        spare = procs - c["mark_cpu"] * c["n"]
        if spare <= 0:
            return None
        t = (b * spare / c["alloc"] + c["mark_cpu"]) / procs
    else:
        t = b / c["alloc"]
    if not 0 < t < 1 / c["n"]:
        return None
    busy = c.get("busy", math.nan)
    if not saturated and math.isfinite(busy):
        spare = procs * (1 - BACKGROUND_UTILIZATION) - (busy - c["mark_cpu"] * c["n"])
        if c["idle_mark"] < 0.5 * max(spare, 0.0) * t:
            return None
    runway = pacer_runway(b, t, c["assist"], c["idle_mark"], procs)
    if runway < (1 - MIN_TRIGGER) * c["runway"]:
        return None
    return t, b, runway


def heap_goal(p: Params, h: float, g: float | None, limit: float | None) -> tuple[float, str]:
    """(goal, governed by ``gogc``/``limit``/``none``) for marked heap ``h`` (rule 1)."""
    goal_g = math.inf
    if g is not None:
        goal_g = max(h + (h + p.roots) * g / 100, HEAP_MINIMUM * g / 100)
    if limit is None:
        return goal_g, "gogc" if g is not None else "none"
    avail = limit - p.limit_overhead
    goal_m = max(avail - max(avail * LIMIT_HEADROOM, LIMIT_MIN_HEADROOM), h)
    return (goal_m, "limit") if goal_m < goal_g else (goal_g, "gogc")


def cycle(p: Params, h: float, runway: float, b_natural: float) -> tuple[float, float]:
    """(mark-time allocation B, bytes allocated per cycle Δ) at marked heap ``h``
    and runway ``D = goal − h`` (rules 2-4)."""
    # Without cons/mark data the pacer is taken to plan for the unhurried mark;
    # with it, for no more than an unhurried mark's (rule 2).
    pacer = min(p.runway_k * (h + p.roots), p.peak_cons * b_natural) if p.runway_k > 0 else p.b_nat
    hi = max(MAX_TRIGGER * runway, runway - HEAP_MINIMUM)
    trig = min(max(runway - pacer, MIN_TRIGGER * runway), hi)
    left = runway - trig
    paced = 1 - math.exp(-b_natural / left) if left > 0 else 1.0
    hurried = max(p.squeeze * p.hurry, paced) * left
    b = max(min(b_natural, hurried), min(p.b_min, b_natural))
    return b, trig + b


def _rates(p: Params, h: float, goal: float, per_cycle: float) -> tuple[float, float, float]:
    """(allocation rate, GC cores, mutator cores) at heap ``h`` and ``goal`` with
    ``per_cycle`` bytes a cycle (rule 5)."""
    per_cycle *= p.eps
    cost = p.c0 + p.c1 * (p.live + p.roots) + p.c2 * goal
    if not p.saturated:
        a = p.alloc
        n = a / per_cycle
        g, mut = n * cost, p.mutator0 + n * (p.cycle_cpu + p.sweep * goal)
        if mut + g <= p.cap * (1 + 1e-6):
            idle = max(p.cap - mut - g, 0.0)  # the idle mark workers' share of it
            return a, g + min(n * p.idle_s, 1.0) * idle, mut
    if p.alpha <= 0:
        return 0.0, 0.0, p.cap
    a = p.alpha * p.cap / (1 + p.alpha * (cost + p.cycle_cpu + p.sweep * goal) / per_cycle)
    n = a / per_cycle
    return a, n * cost, p.cap - n * cost


def limiter_held(p: Params, gc: float) -> float:
    """The GC cores the limiter leaves a CPU-bound process (rule 6)."""
    return min(gc, p.held * p.cap) if p.held > 0 and p.saturated else gc


def steady_heap(p: Params, g: float | None, limit: float | None) -> tuple[float, float]:
    """(marked heap H, allocation rate A) solving ``H = L + B(H, A)`` (rule 3)."""
    h, a = p.live, p.alloc
    for _ in range(200):
        goal, _ = heap_goal(p, h, g, limit)
        if not math.isfinite(goal):
            return h, a
        runway = max(goal - h, 1.0)
        b, per_cycle = cycle(p, h, runway, p.b_nat * a / p.alloc if p.alloc > 0 else 0.0)
        a, gc, _ = _rates(p, h, goal, per_cycle)
        held = limiter_held(p, gc)
        h_new = p.live + (b * gc / held if 0 < held < gc else b)
        if abs(h_new - h) < 1e-7 * h:
            return h_new, a
        if h_new > 1e3 * p.live:
            return math.inf, a
        h = 0.5 * (h + h_new)
    return h, a


def _no_gc(p: Params, h: float, gov: str, status: str) -> dict[str, Any]:
    unbounded = status == "unbounded"
    return dict(
        marked=math.inf if unbounded else h,
        goal=math.inf,
        governed_by=gov,
        cycles_per_min=math.nan if unbounded else 0.0,
        gc_cores=math.nan if unbounded else 0.0,
        process_cores=p.cap if unbounded or p.saturated else p.mutator0,
        mutator_cores=p.cap if unbounded or p.saturated else p.mutator0,
        status=status,
        peak_heap=math.inf,
        peak_memory=math.inf,
        peak_memory_top=math.inf,
        peak_memory_free=math.inf,
        peak_memory_top_free=math.inf,
    )


def memory(p: Params, goal: float, limit: float | None) -> float:
    """Peak memory for a heap goal (rule 7)."""
    if p.memory_ratio > 0:
        out = goal * p.memory_ratio
    else:
        out = goal * p.peak_ratio + p.overhead
    return min(out, limit) if limit is not None else out


def solve(p: Params, g: float | None, limit: float | None) -> dict[str, Any]:
    """One setting under one parameter set: heap, goal, cycles, CPU and status."""
    h, a = steady_heap(p, g, limit)
    if not math.isfinite(h):
        return _no_gc(p, h, "gogc", "unbounded")
    goal, gov = heap_goal(p, h, g, limit)
    if not math.isfinite(goal):
        return _no_gc(p, h, gov, "no-gc")
    runway = max(goal - h, 1.0)
    b_natural = p.b_nat * a / p.alloc if p.alloc > 0 else 0.0
    b, per_cycle = cycle(p, h, runway, b_natural)
    a, gc, mut = _rates(p, h, goal, per_cycle)
    held = limiter_held(p, gc)
    if held < gc:
        gc, mut = held, p.cap - held
    status = "ok"
    if gc >= LIMITER_SHARE * p.procs or runway < NEAR_LIMIT_RUNWAY * p.live:
        status = "near-limit" if gov == "limit" else "gc-bound"
        if gov == "limit":
            gc = min(gc, LIMITER_SHARE * p.procs)
    b_top = max(b, min(b_natural * p.slow_mark, (1 - MIN_TRIGGER) * runway))
    free = memory(p, goal, None)
    top = max(free, memory(p, heap_goal(p, p.live + b_top, g, limit)[0], None))
    mem = min(free, limit) if limit is not None else free
    return dict(
        marked=h,
        goal=goal,
        governed_by=gov,
        cycles_per_min=60 * a / (p.eps * per_cycle),
        gc_cores=min(gc, p.cap),
        process_cores=min(p.cap, mut + gc),
        mutator_cores=max(min(p.cap, mut + gc) - min(gc, p.cap), 0.0),
        status=status,
        peak_heap=goal * p.peak_ratio,
        peak_memory=mem,
        peak_memory_top=min(top, limit) if limit is not None else top,
        # Before the limit: predict's residual ratio scales these, then caps.
        peak_memory_free=free,
        peak_memory_top_free=top,
    )
