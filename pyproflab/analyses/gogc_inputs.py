"""What a Go service's GC did at its current setting, from any GC source.

A ``GcObservation`` is what the fitted model (``gogc_model``) calibrates on:
per-instance *samples* (one per gctrace cycle, or one per interval between
two Prometheus snapshots), each with the figures below, plus where each
figure came from and over how many cycles. No profile is needed.

Per sample (bytes, seconds, cores):

- ``n`` GC cycles per second; ``alloc`` allocation rate ``A``;
- ``marked`` the heap the cycle marked live ``H``; ``goal`` the heap goal;
  ``mark_alloc`` ``B``, bytes allocated while marking (they are allocated
  black, so the next cycle counts them as marked: floating garbage);
- ``roots`` ``R`` (stacks + globals); ``cost`` GC CPU per cycle ``C``
  (core-seconds, every GC class: pauses, assists, background and idle
  workers); ``background``, ``idle_mark`` and ``pause`` its background
  workers', idle workers' and stop-the-world parts; ``mark_s`` the mark
  phase's wall time ``T``;
- ``mutator`` the mutator's non-GC CPU (cores); ``idle`` the idle share of
  the machine's P-time (0 when the process saturates GOMAXPROCS);
- ``peak_heap`` the largest heap in use seen; ``cons_mark`` the pacer's
  cons/mark ratio (``cons_mark()``; gctrace) or ``pacer_runway`` the runway
  the pacer left (Prometheus).

Rules, gctrace (``GODEBUG=gctrace=1``; see ``sources.gctrace``):

- Forced cycles are dropped. Sizes are floored MiB: half a MiB is added.
- ``n`` = (last gc number − first) / (last start − first start) per instance:
  exact even when lines in between are missing.
- In a steady state each cycle frees what was allocated since the last one,
  so the bytes allocated per cycle are ``heap_end − marked`` and ``A = n ×
  that``. ``B = heap_end − heap_start`` (allocation between trigger and mark
  end). ``T`` is the concurrent-mark clock time.
- The mutator's CPU during mark is what the background, idle and assist
  workers leave of ``P·T`` (idle workers take any P that would otherwise be
  idle): ``mutator = P − (background + idle + assist)/T``; ``idle`` =
  idle-worker CPU / ``P·T``. When Ps idle that is too much (idle workers do
  not take every idle moment: paced tests/gcbench, 0.63 cores for the 0.48
  the runtime's CPU classes count): ``with_process_cpu`` takes the process's
  CPU from elsewhere.
- GOGC is not printed: it is inferred from the goals, ``g = 100·(goal −
  H)/(H + R)`` (median over cycles; rounded), unless given; a cycle whose goal
  is set by a memory limit makes the inference wrong, so give ``gogc`` then.

Rules, Prometheus (client_golang's defaults; runtime/metrics names preferred):

- Counters are differenced between consecutive snapshots of an instance (one
  sample per interval with at least one cycle): cycles
  ``go_gc_cycles_total_gc_cycles_total`` (else ``go_gc_duration_seconds_count``),
  allocation ``go_gc_heap_allocs_bytes_total`` (else
  ``go_memstats_alloc_bytes_total``), GC CPU
  ``go_cpu_classes_gc_total_cpu_seconds_total``, busy CPU = total − idle
  classes (else ``process_cpu_seconds_total``).
- Gauges are taken at the interval's end: ``go_gc_heap_live_bytes`` (marked
  heap), ``go_gc_heap_goal_bytes`` (else ``go_memstats_next_gc_bytes``),
  ``go_gc_gogc_percent``, ``go_gc_gomemlimit_bytes``, scan stack + globals,
  ``go_sched_gomaxprocs_threads``. Without the live heap it is derived from
  the goal: ``H = (goal − R·g)/(1 + g)``.
- Mark time: the dedicated class counts the dedicated and the fractional
  workers (``background_workers``: the runtime's split of 25 % of P). Dedicated
  workers hold their P for the whole mark phase, so with no fractional part
  (P = 4, 5, 7, 8, ...) ``T`` = dedicated CPU per cycle / their number, exact.
  Fractional workers (P <= 3 or 6) run only when their P schedules: ``T`` =
  that CPU / (0.25·P) is then a lower bound, short when the Ps are busy
  (tests/gcbench, P = 2, GOGC=100: 4.6 ms for gctrace's 14.6 flat out, 7.7
  for 11.6 paced), and the provenance says so. Mark-time allocation is not
  exported: ``B = A·T`` (the mutator's rate outside marking). The pacer's
  runway is what the interval shows: ``pacer_runway = goal − H − A/n + B``
  (the goal less the heap at the trigger).
- The trigger's floor (fractional workers only; ``floor_mark``). A cycle
  allocates ``Δ = A/n = (trigger − H) + B``, and the trigger is never below
  ``H + (45/64)·D`` (``D`` = goal − H; ``mgcpacer.go``, trigger), so ``B ≤
  Δ − (45/64)·D``. At that bound the mark lasted ``T = B/A`` -- in a process
  at GOMAXPROCS, where the mutator allocates the same per core-second of its
  own in and out of the mark and holds every P the mark workers leave, ``B =
  A·(P·T − M)/(P − M·n)`` with ``M`` the mark workers' CPU per cycle, solved
  for ``T``. The pacer's runway after such a cycle is ``3·B·(u + i)/(1 − u)``
  (endCycle's cons/mark: ``u = 1/4 + assist/(P·T)``, ``i`` = idle workers'
  CPU / ``(P·T)``). When that runway reaches the floor's, ``(19/64)·D``, the
  trigger sits at its floor: ``T``, ``B`` and the pacer's runway are taken
  from it (when ``T`` exceeds the lower bound and lasts less than a cycle).
  Otherwise the lower bound stands. (tests/gcbench flat out, GOGC=100: 13.6
  ms and 8.9 MiB for gctrace's 14.6 and 10.5; paced the runway falls short
  and the lower bound stands.)
- client_golang's defaults without the runtime/metrics set: GC CPU from
  ``go_memstats_gc_cpu_fraction`` × P (an average since the process
  started), P = the busy CPU rounded up, no mark time (so ``B = 0``: the
  guide's plain model), not CPU-bound; each fallback is noted.
- A scrape rarely catches the heap at its peak: ``peak_heap`` is the goal,
  and ``non_heap`` = ``process_resident_memory_bytes`` −
  ``go_memstats_heap_inuse_bytes`` at the same scrape (what the RSS holds
  beyond the heap in use); ``rss_per_goal`` = (RSS + goal − heap in use) / goal at the scrape;
  ``runtime_non_heap`` = ``go_memstats_sys_bytes`` −
  ``go_memstats_heap_sys_bytes`` (what a memory limit counts beside the heap);
  the
  largest RSS per instance is its peak RSS.

Longer than 500 lines: it builds one ``GcObservation`` from each of three
sources (gctrace cycles, Prometheus snapshots, the store) under the rules
above, and ``combine`` merges two of them, so the readers share the
observation's sample keys. The Prometheus reader (``from_metrics`` and its
helpers, about 310 lines) is the seam a split would cut along; it is left to
issue 12's rewrite of these modules.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.errors import UsageError

MiB = float(1 << 20)
NO_LIMIT_MIN = float(2**62)  # go_gc_gomemlimit_bytes at or above this: no limit
BACKGROUND_UTILIZATION = 0.25  # gcBackgroundUtilization
MAX_UTIL_ERROR = 0.3  # startCycle's maxUtilError: beyond it, fractional workers
SATURATED_IDLE = 0.03  # idle share of P-time below which the process runs at GOMAXPROCS
TRIGGER_FLOOR = 45 / 64  # minTriggerRatioNum / triggerRatioDen: the lowest trigger


def background_workers(procs: float) -> tuple[int, float]:
    """(dedicated mark workers, fractional utilisation goal per P) as the runtime
    splits ``BACKGROUND_UTILIZATION`` of ``procs`` (``mgcpacer.go``, startCycle):
    the goal rounded to whole workers, unless that is more than 30 % off, when
    whole workers are rounded down and fractional workers make up the rest."""
    total = procs * BACKGROUND_UTILIZATION
    dedicated = int(total + 0.5)
    if total <= 0 or abs(dedicated / total - 1) <= MAX_UTIL_ERROR:
        return dedicated, 0.0
    if dedicated > total:
        dedicated -= 1
    return dedicated, (total - dedicated) / procs


def pacer_runway(b: float, t: float, assist: float, idle_mark: float, procs: float) -> float:
    """The runway the pacer sets after a cycle that allocated ``b`` bytes in ``t``
    seconds of marking with ``assist`` and ``idle_mark`` CPU (``mgcpacer.go``:
    endCycle's cons/mark times ``(1 − 1/4)/(1/4)`` times the scan work, which
    cancels): ``3·b·(u + i)/(1 − u)`` with ``u = 1/4 + assist/(P·t)`` (the
    background workers taken at their goal, as endCycle does) and ``i =
    idle_mark/(P·t)``. Infinite when ``u ≥ 1``: the runtime then triggers at its floor."""
    x = procs * t
    u = BACKGROUND_UTILIZATION + assist / x
    if u >= 1:
        return math.inf
    return 3 * b * (u + idle_mark / x) / (1 - u)


def floor_mark(
    c: dict[str, float], procs: float, saturated: bool
) -> tuple[float, float, float] | None:
    """(mark seconds, mark-time allocation, the pacer's runway) of a cycle whose
    trigger sits at its floor, or None when it cannot (module rules, Prometheus).

    ``c`` holds one interval's per-cycle figures: ``per_cycle`` bytes allocated,
    ``runway`` goal − marked heap, ``alloc`` rate, ``n`` cycles per second,
    ``mark_cpu`` (every mark worker class), ``assist`` and ``idle_mark`` CPU."""
    b = c["per_cycle"] - TRIGGER_FLOOR * c["runway"]
    if b <= 0 or c["alloc"] <= 0 or c["runway"] <= 0:
        return None
    if saturated:
        # The mutator allocates the same per core-second of its own in and out of
        # the mark, and holds every P the mark workers leave: B = A·(P·T − M)/(P − M·n).
        spare = procs - c["mark_cpu"] * c["n"]
        if spare <= 0:
            return None
        t = (b * spare / c["alloc"] + c["mark_cpu"]) / procs
    else:
        t = b / c["alloc"]
    if not 0 < t < 1 / c["n"]:
        return None
    runway = pacer_runway(b, t, c["assist"], c["idle_mark"], procs)
    if runway < (1 - TRIGGER_FLOOR) * c["runway"]:
        return None
    return t, b, runway


def mark_seconds(background_cpu: float, procs: float) -> tuple[float, bool]:
    """(mark phase seconds, exact) from one cycle's dedicated-class CPU (the
    dedicated and fractional workers): exact when only dedicated workers run,
    else the lower bound of the fractional workers at their full goal."""
    dedicated, fractional = background_workers(procs)
    if fractional == 0 and dedicated > 0:
        return background_cpu / dedicated, True
    return background_cpu / (BACKGROUND_UTILIZATION * procs), False


@dataclass
class GcObservation:
    """Samples of one service at one setting (see the module rules).

    ``provenance`` maps each model input to ``"gctrace (118 cycles)"`` and the
    like; ``instances`` is how many instances contributed.
    """

    samples: list[dict[str, float]]
    gogc: float | None
    memory_limit: float | None
    procs: float
    cycles: int
    source: str
    instances: int = 1
    peak_rss: float | None = None
    peak_rss_by_instance: list[float] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def saturated(self) -> bool:
        """True when the process ran at GOMAXPROCS: no idle P-time to speak of
        (False when the idle time is not known)."""
        idle = [s["idle"] for s in self.samples if math.isfinite(s["idle"])]
        return bool(idle) and statistics.median(idle) < SATURATED_IDLE

    def mean(self, key: str) -> float:
        vals = [s[key] for s in self.samples if s.get(key) is not None and math.isfinite(s[key])]
        if not vals:
            raise UsageError(f"no GC samples carry {key}: cannot model GOGC")
        return sum(vals) / len(vals)


# --- gctrace -------------------------------------------------------------------------


def _mb(v: float | None) -> float:
    return (v + 0.5) * MiB if v is not None else 0.0


def _cycle_sample(r: dict[str, Any], n: float) -> dict[str, float] | None:
    """One gctrace cycle as a sample; None when it carries no usable mark phase."""
    t = r["clock_mark_ms"] / 1e3
    if t <= 0:
        return None
    marked, start, end = _mb(r["heap_live_mb"]), _mb(r["heap_start_mb"]), _mb(r["heap_end_mb"])
    # Roots are often far below 1 MiB ("0 MB stacks"): a zero stays zero.
    roots = sum(_mb(v) for v in (r["stacks_mb"], r["globals_mb"]) if v)
    p = float(r["procs"])
    workers = (r["cpu_background_ms"] + r["cpu_idle_ms"] + r["cpu_assist_ms"]) / 1e3
    cost = workers + (r["cpu_sweep_term_ms"] + r["cpu_mark_term_ms"]) / 1e3
    busy = (r["cpu_background_ms"] + r["cpu_assist_ms"]) / 1e3 / (p * t)
    return dict(
        cons_mark=cons_mark(end - start, marked + roots, workers / (p * t), busy),
        n=n,
        alloc=n * max(end - marked, 0.0),
        marked=marked,
        goal=_mb(r["heap_goal_mb"]),
        mark_alloc=max(end - start, 0.0),
        roots=roots,
        cost=cost,
        background=r["cpu_background_ms"] / 1e3,
        idle_mark=r["cpu_idle_ms"] / 1e3,
        pause=(r["cpu_sweep_term_ms"] + r["cpu_mark_term_ms"]) / 1e3,
        mark_s=t,
        mutator=min(max(p - workers / t, 0.0), p),
        idle=r["cpu_idle_ms"] / 1e3 / (p * t),
        peak_heap=max(end, start),
        procs=p,
    )


def cons_mark(mark_alloc: float, scan: float, u_all: float, u_busy: float) -> float:
    """The pacer's cons/mark ratio of one cycle (``mgcpacer.go``, endCycle):
    bytes allocated while marking per byte of scan work, scaled by the GC's
    CPU utilisation ``u_all`` (idle workers included) over the mutator's
    share ``1 − u_busy`` (idle workers not).

    Unlike endCycle, ``u`` counts the background workers' CPU as they ran;
    endCycle takes them at their 25 % goal. With endCycle's assumption the
    runway at GOGC=100 on tests/gcbench flat out comes out twice as long (48
    MiB against 22; the runway seen at GOGC 400 and 800 is 37), and the cycles
    predicted at GOGC 400 and 800 were 20% and 18% too many: the runtime's
    cons/mark falls at large GOGC as the assists do, which one fitted runway
    does not follow. Tried and left (session 6, ``gogc`` helper)."""
    if scan <= 0 or not 0 <= u_busy < 0.99:
        return math.nan
    return mark_alloc * u_all / (scan * (1 - u_busy))


def _infer_gogc(samples: list[dict[str, float]]) -> float | None:
    """GOGC from the goals: median of ``100·(goal − H)/(H + R)``, rounded to 5 above 20.

    A cycle's goal was set from the previous cycle's marked heap: consecutive
    cycles are paired where the log has them (else each cycle with itself)."""
    pairs = [
        (b["goal"], a["marked"] + a["roots"], a["marked"])
        for a, b in zip(samples, samples[1:], strict=False)
        if b["gc_num"] == a["gc_num"] + 1 and b["inst"] == a["inst"]
    ] or [(s["goal"], s["marked"] + s["roots"], s["marked"]) for s in samples]
    g = statistics.median(100 * (goal - h) / scan for goal, scan, h in pairs)
    return float(round(g / 5) * 5 if g > 20 else round(g))


def _instance_samples(cycles: pa.Table) -> tuple[list[list[dict[str, float]]], list[str]]:
    """Samples per process run of an instance (3 or more unforced cycles each;
    a log's runs are its restarts and interleaved processes: ``run``, with
    ``source``), and notes on the rest."""
    by_inst: dict[Any, list[dict[str, Any]]] = {}
    for r in cycles.to_pylist():
        if not r["forced"]:
            key = (r.get("instance"), r.get("source"), r.get("run"))
            by_inst.setdefault(key, []).append(r)
    out: list[list[dict[str, float]]] = []
    notes: list[str] = []
    for (inst, _, run), rs in by_inst.items():
        rs.sort(key=lambda r: r["gc_num"])
        span = rs[-1]["seconds"] - rs[0]["seconds"] if len(rs) >= 3 else 0.0
        if span <= 0:
            which = f" run {run}" if run is not None and run != 1 else ""
            notes.append(f"instance {inst or '(unnamed)'}{which}: fewer than 3 cycles: skipped")
            continue
        n = (rs[-1]["gc_num"] - rs[0]["gc_num"]) / span
        got = []
        for r in rs:
            if (smp := _cycle_sample(r, n)) is not None:
                smp["inst"], smp["gc_num"] = len(out), r["gc_num"]
                got.append(smp)
        if got:
            out.append(got)
    return out, notes


def _common_gogc(
    per_inst: list[list[dict[str, float]]], notes: list[str]
) -> tuple[float | None, list[list[dict[str, float]]]]:
    """The GOGC most instances run (inferred per instance); the others are dropped."""
    gs = [_infer_gogc(ss) for ss in per_inst]
    g = max(set(gs), key=lambda v: (gs.count(v), -abs((v or 0) - 100)))
    kept = [ss for ss, gi in zip(per_inst, gs, strict=True) if gi == g]
    if len(kept) < len(per_inst):
        notes.append(
            f"instances run different GOGC values ({', '.join(sorted({f'{v:g}' for v in gs}))}): "
            f"modelled on the {len(kept)} at GOGC={g:g}"
        )
    return g, kept


def from_gctrace(
    cycles: pa.Table,
    *,
    gogc: float | None | str = "infer",
    memory_limit: float | None = None,
    source: str = "gctrace",
) -> GcObservation:
    """A ``GcObservation`` from ``GC_CYCLES`` rows (an ``instance`` column, if
    present, separates instances; ``gogc="infer"`` infers GOGC from the goals)."""
    per_inst, notes = _instance_samples(cycles)
    if not per_inst:
        raise UsageError(
            f"{source}: no instance has 3 or more unforced GC cycles: cannot model GOGC"
        )
    g: float | None
    if gogc == "infer":
        g, per_inst = _common_gogc(per_inst, notes)
        how = f"inferred from {sum(map(len, per_inst))} cycles' heap goals"
        notes.append(f"GOGC={g:g} inferred from the heap goals (give --gogc if it differs)")
    else:
        g = gogc  # type: ignore[assignment]
        how = "given"
    samples = [s for ss in per_inst for s in ss]
    used = len(per_inst)
    label = f"{source} ({len(samples)} cycles, {used} instance{'s' if used != 1 else ''})"
    prov = {
        k: label
        for k in (
            "cycles",
            "allocation",
            "marked heap",
            "mark-time allocation",
            "GC CPU",
            "mark time",
            "mutator CPU",
            "GOMAXPROCS",
            "roots",
        )
    }
    prov["GOGC"] = how
    if not all(s["idle"] < 0.03 for s in samples):
        prov["mutator CPU"] = (
            f"{label}: the CPU the GC workers leave while marking (too much when Ps "
            "idle: give the process CPU)"
        )
    prov["memory limit"] = "given" if memory_limit is not None else "none (assumed)"
    prov["peak RSS"] = "not in gctrace: peak memory taken as 1.4 x the heap goal"
    return GcObservation(
        samples=samples,
        gogc=g,
        memory_limit=memory_limit,
        procs=statistics.median(s["procs"] for s in samples),
        cycles=len(samples),
        source=source,
        instances=used,
        provenance=prov,
        notes=notes,
    )


# --- Prometheus ----------------------------------------------------------------------

_CYCLES = ("go_gc_cycles_total_gc_cycles_total", "go_gc_duration_seconds_count")
_ALLOCS = ("go_gc_heap_allocs_bytes_total", "go_memstats_alloc_bytes_total")
_GOAL = ("go_gc_heap_goal_bytes", "go_memstats_next_gc_bytes")
_GC_CPU = "go_cpu_classes_gc_total_cpu_seconds_total"
_TOTAL = "go_cpu_classes_total_cpu_seconds_total"
_IDLE = "go_cpu_classes_idle_cpu_seconds_total"
_DEDICATED = "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total"
_IDLE_MARK = "go_cpu_classes_gc_mark_idle_cpu_seconds_total"
_PAUSE = "go_cpu_classes_gc_pause_cpu_seconds_total"
_ASSIST = "go_cpu_classes_gc_mark_assist_cpu_seconds_total"
_GC_FRACTION = "go_memstats_gc_cpu_fraction"


def _series(rows: Iterable[dict[str, Any]]) -> dict[tuple[Any, str], dict[Any, float]]:
    """(instance, metric) -> {time: value}, unlabelled samples only (quantiles skipped)."""
    out: dict[tuple[Any, str], dict[Any, float]] = {}
    for r in rows:
        if r["labels"]:
            continue
        out.setdefault((r.get("instance"), r["metric"]), {})[r["time"]] = r["value"]
    return out


def _rss_at_goal(rss: float | None, inuse: float | None, goal: float) -> float:
    """RSS / goal had the heap been at its goal when scraped (a scrape usually
    sees it part way: the RSS then grows by what the heap still had to grow)."""
    if rss is None:
        return math.nan
    return (rss + max(goal - (inuse if inuse is not None else goal), 0.0)) / goal


def _non_heap(rss: float | None, inuse: float | None) -> float:
    return rss - inuse if rss is not None and inuse is not None else math.nan


def _first(ser: dict, inst: Any, names: tuple[str, ...]) -> tuple[str | None, dict]:
    for name in names:
        if (inst, name) in ser:
            return name, ser[(inst, name)]
    return None, {}


def _interval(ser, inst, t0, t1, g: float) -> dict[str, float] | None:
    """One sample from the snapshots at t0 and t1 (see the module rules)."""

    def at(name: str, t) -> float | None:
        return ser.get((inst, name), {}).get(t)

    def delta(name: str) -> float | None:
        a, b = at(name, t0), at(name, t1)
        return None if a is None or b is None else b - a

    dt = (t1 - t0).total_seconds()
    cname, _ = _first(ser, inst, _CYCLES)
    aname, _ = _first(ser, inst, _ALLOCS)
    gname, _ = _first(ser, inst, _GOAL)
    cyc = delta(cname) if cname else None
    if not cyc or cyc <= 0 or dt <= 0 or aname is None or gname is None:
        return None
    gc = delta(_GC_CPU)
    total, idle = delta(_TOTAL), delta(_IDLE)
    busy = (
        total - idle
        if total is not None and idle is not None
        else delta("process_cpu_seconds_total")
    )
    roots = (at("go_gc_scan_stack_bytes", t1) or 0.0) + (at("go_gc_scan_globals_bytes", t1) or 0.0)
    goal = at(gname, t1)
    marked = at("go_gc_heap_live_bytes", t1)
    if marked is None:
        marked = (goal - roots * g / 100) / (1 + g / 100)
    n = cyc / dt
    alloc = delta(aname) / dt
    ded = delta(_DEDICATED)
    idle_mark, pause = delta(_IDLE_MARK), delta(_PAUSE)
    # Without runtime/metrics: GOMAXPROCS from the busy CPU, GC CPU from memstats'
    # fraction (cumulative since start: the window's own figure is not exported).
    p = at("go_sched_gomaxprocs_threads", t1) or (
        max(1.0, math.ceil(busy / dt - 0.05)) if busy is not None else 1.0
    )
    frac = at(_GC_FRACTION, t1)
    gc_cores = gc / dt if gc is not None else (frac * p if frac is not None else math.nan)
    saturated = idle is not None and bool(total) and idle / total < SATURATED_IDLE
    per = dict(per_cycle=alloc / n, runway=goal - marked, alloc=alloc, n=n)
    mark_s, b, runway = _mark(per, (ded, delta(_ASSIST), idle_mark), cyc, p, saturated)
    return dict(
        pacer_runway=runway,
        n=n,
        alloc=alloc,
        marked=marked,
        goal=goal,
        mark_alloc=b,
        roots=roots,
        cost=gc_cores / n,
        background=ded / cyc if ded is not None else math.nan,
        idle_mark=idle_mark / cyc if idle_mark is not None else math.nan,
        pause=pause / cyc if pause is not None else math.nan,
        mark_s=mark_s,
        mutator=(busy / dt - gc_cores) if busy is not None else math.nan,
        idle=(idle / total) if idle is not None and total else math.nan,
        # A scrape rarely catches the heap's peak: the goal stands for it, and the
        # memory beyond the heap is what the RSS holds over the heap in use then.
        peak_heap=goal,
        non_heap=_non_heap(
            at("process_resident_memory_bytes", t1), at("go_memstats_heap_inuse_bytes", t1)
        ),
        runtime_non_heap=_non_heap(
            at("go_memstats_sys_bytes", t1), at("go_memstats_heap_sys_bytes", t1)
        ),
        rss_per_goal=_rss_at_goal(
            at("process_resident_memory_bytes", t1), at("go_memstats_heap_inuse_bytes", t1), goal
        ),
        procs=p,
    )


def _mark(
    per: dict[str, float],
    cpu: tuple[float | None, float | None, float | None],
    cyc: float,
    procs: float,
    saturated: bool,
) -> tuple[float, float, float]:
    """(mark seconds, mark-time allocation, the pacer's runway) of an interval
    from its mark workers' CPU (dedicated class, assists, idle workers) over
    ``cyc`` cycles: the worker split's mark time, raised to the trigger's floor
    where that holds (module rules); NaN, 0, NaN without the dedicated class."""
    ded, assist, idle_mark = cpu
    if ded is None:
        return math.nan, 0.0, math.nan
    mark_s, exact = mark_seconds(ded / cyc, procs)
    b = per["alloc"] * mark_s
    # The pacer's runway as the interval shows it: the goal less where marking
    # started (the bytes a cycle allocates, less those allocated while marking).
    runway = max(per["runway"] - per["per_cycle"] + b, 0.0)
    if exact or assist is None or idle_mark is None:
        return mark_s, b, runway
    per = per | dict(mark_cpu=(ded + assist + idle_mark) / cyc, assist=assist / cyc)
    floor = floor_mark(per | {"idle_mark": idle_mark / cyc}, procs, saturated)
    if floor is not None and floor[0] > mark_s:
        return floor
    return mark_s, b, runway


def from_metrics(
    samples: pa.Table,
    *,
    gogc: float | None | str = "observed",
    memory_limit: float | None | str = "observed",
    source: str = "prometheus",
) -> GcObservation:
    """A ``GcObservation`` from ``METRIC_SAMPLES`` rows (an ``instance`` column,
    if present, separates instances). ``"observed"`` takes GOGC and the limit
    from ``go_gc_gogc_percent`` / ``go_gc_gomemlimit_bytes`` (GOGC 100 and no
    limit when absent, with a note)."""
    ser = _series(samples.to_pylist())
    insts = sorted({k[0] for k in ser}, key=lambda x: (x is None, x))
    notes: list[str] = []
    g = _observed_setting(ser, insts, "go_gc_gogc_percent", gogc, 100.0, notes)
    lim = _observed_setting(ser, insts, "go_gc_gomemlimit_bytes", memory_limit, None, notes)
    if lim is not None and lim >= NO_LIMIT_MIN:
        lim = None
    if g is not None and g < 0:
        g = None
    out, cycles, used, rss_by = _instance_intervals(ser, insts, g, gogc)
    if not out:
        raise UsageError(
            f"{source}: no instance has two snapshots of a GC cycle count "
            f"({' or '.join(_CYCLES)}), an allocation counter and a heap goal: "
            "cannot model GOGC"
        )
    _fallback_notes(ser, notes)
    insts_txt = f"{used} instance{'s' if used != 1 else ''}"
    label = f"{source} ({cycles} cycles over {len(out)} intervals, {insts_txt})"
    procs = statistics.median(s["procs"] for s in out)
    prov = _metrics_provenance(label, bool(rss_by), gogc, memory_limit, procs)
    return GcObservation(
        samples=out,
        gogc=g,
        memory_limit=lim,
        procs=procs,
        cycles=cycles,
        source=source,
        instances=used,
        peak_rss=max(rss_by) if rss_by else None,
        peak_rss_by_instance=rss_by,
        provenance=prov,
        notes=notes,
    )


def _instance_intervals(
    ser: dict, insts: list[Any], g: float | None, gogc: float | None | str
) -> tuple[list[dict[str, float]], int, int, list[float]]:
    """The samples of every instance's intervals between cycle-count snapshots,
    each tagged with its instance's number; with the cycles they span, the
    number of instances used and each used instance's peak RSS. With GOGC
    ``"observed"``, an instance whose last GOGC differs from ``g`` runs another
    setting and is left out; an instance with no interval is left out too."""
    out: list[dict[str, float]] = []
    cycles, used, rss_by = 0, 0, []
    for inst in insts:
        own = ser.get((inst, "go_gc_gogc_percent"))
        if gogc == "observed" and own and g is not None and list(own.values())[-1] != g:
            continue  # another setting: not this observation's
        _, cyc = _first(ser, inst, _CYCLES)
        times = sorted(cyc)
        got = [
            s
            for t0, t1 in zip(times, times[1:], strict=False)
            if (s := _interval(ser, inst, t0, t1, g if g is not None else 100.0)) is not None
        ]
        if not got:
            continue
        for smp in got:
            smp["inst"] = used
        used += 1
        cycles += int(cyc[times[-1]] - cyc[times[0]])
        out.extend(got)
        inst_rss = ser.get((inst, "process_resident_memory_bytes"), {}).values()
        if inst_rss:
            rss_by.append(max(inst_rss))
    return out, cycles, used, rss_by


def _metrics_provenance(
    label: str,
    has_rss: bool,
    gogc: float | None | str,
    memory_limit: float | None | str,
    procs: float,
) -> dict[str, str]:
    """Where each of ``from_metrics``' figures comes from: the metrics (``label``),
    an estimate, or ``"given"`` for a setting the caller gave."""
    prov = {
        k: label
        for k in (
            "cycles",
            "allocation",
            "marked heap",
            "GC CPU",
            "mutator CPU",
            "GOMAXPROCS",
            "roots",
        )
    }
    dedicated, fractional = background_workers(procs)
    prov["mark time"] = (
        f"{label}: dedicated-worker CPU / {dedicated} dedicated worker(s)"
        if fractional == 0 and dedicated > 0
        else f"{label}: background-worker CPU / (25% of GOMAXPROCS), a lower bound "
        f"(fractional workers at GOMAXPROCS {procs:g} run only when their P is free); "
        "where the pacer's runway puts the trigger at its floor, the mark time that floor implies"
    )
    prov["peak RSS"] = (
        f"{label}: process_resident_memory_bytes"
        if has_rss
        else "not exported: peak memory taken as 1.4 x the heap goal"
    )
    prov["mark-time allocation"] = "estimated: allocation rate × mark time (not exported)"
    prov["GOGC"] = "given" if gogc != "observed" else label
    prov["memory limit"] = "given" if memory_limit != "observed" else label
    return prov


def _fallback_notes(ser: dict, notes: list[str]) -> None:
    names = {k[1] for k in ser}
    if _GC_CPU not in names:
        notes.append(
            f"no {_GC_CPU}: GC CPU from {_GC_FRACTION} (the average since the process started)"
        )
    if _DEDICATED not in names:
        notes.append("no mark-worker CPU classes: mark time unknown, no floating garbage modelled")
    if "go_sched_gomaxprocs_threads" not in names:
        notes.append("GOMAXPROCS not exported: taken as the busy CPU rounded up")
    if _IDLE not in names:
        notes.append("idle CPU not exported: the process is taken as not CPU-bound")


def _observed_setting(ser, insts, metric, given, default, notes) -> float | None:
    if given != "observed":
        return given
    vals = [v for i in insts for v in ser.get((i, metric), {}).values()]
    if not vals:
        notes.append(
            f"{metric} not exported: taken as {default if default is not None else 'none'}"
        )
        return default
    latest = [list(ser[(i, metric)].values())[-1] for i in insts if (i, metric) in ser]
    common = statistics.mode(latest)
    if len(set(latest)) > 1:
        seen = ", ".join(sorted({f"{v:g}" for v in latest}))
        notes.append(
            f"instances report different {metric} ({seen}): modelled on those at "
            f"the most common, {common:g}"
        )
    return common


def with_peak_rss(obs: GcObservation, peak_rss: float, how: str = "given") -> GcObservation:
    """The observation with a peak RSS observed elsewhere (the container's memory
    at the current setting): peak memory is then the peak heap + what the RSS held
    beyond it."""
    obs.peak_rss = float(peak_rss)
    obs.peak_rss_by_instance = [float(peak_rss)]
    obs.provenance["peak RSS"] = how
    return obs


def with_process_cpu(obs: GcObservation, cores: float, how: str = "given") -> GcObservation:
    """The observation with the process's CPU observed elsewhere (the container's,
    in cores, at the current setting): the mutator's CPU is that less the GC's.
    gctrace shows the GC's CPU but not the rest; without this, the CPU the GC
    workers leave while marking stands for the mutator's, too much when Ps idle
    (paced tests/gcbench at GOGC=100: 0.63 cores for 0.48)."""
    if not cores > 0:
        raise UsageError(f"process CPU must be positive cores, got {cores}")
    for s in obs.samples:
        s["mutator"] = max(cores - s["n"] * s["cost"], 0.0)
    obs.provenance["mutator CPU"] = f"{how} (process CPU {cores:g} cores less the GC's)"
    return obs


def combine(trace: GcObservation, metrics: GcObservation) -> GcObservation:
    """gctrace for the per-cycle figures, Prometheus for the CPU the process used
    and the peak RSS (both sources say which inputs they gave)."""
    mut = metrics.mean("mutator")
    samples = [dict(s, mutator=mut) for s in trace.samples]
    prov = dict(trace.provenance)
    prov["mutator CPU"] = metrics.provenance["mutator CPU"]
    prov["peak RSS"] = metrics.provenance.get("peak RSS", prov.get("peak RSS", ""))
    if metrics.provenance.get("GOGC", "").startswith(metrics.source):
        prov["GOGC"] = metrics.provenance["GOGC"]
    return GcObservation(
        samples=samples,
        gogc=metrics.gogc if "inferred" in trace.provenance.get("GOGC", "") else trace.gogc,
        memory_limit=trace.memory_limit if trace.memory_limit is not None else metrics.memory_limit,
        procs=trace.procs,
        cycles=trace.cycles,
        source=f"{trace.source}+{metrics.source}",
        instances=max(trace.instances, metrics.instances),
        peak_rss=metrics.peak_rss,
        peak_rss_by_instance=metrics.peak_rss_by_instance,
        provenance=prov,
        notes=trace.notes + metrics.notes,
    )


# --- files and the store ---------------------------------------------------------------

METRIC_NAMES: tuple[str, ...] = (
    *_CYCLES,
    *_ALLOCS,
    *_GOAL,
    _GC_CPU,
    _TOTAL,
    _IDLE,
    _DEDICATED,
    _IDLE_MARK,
    _PAUSE,
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "go_gc_heap_live_bytes",
    "go_gc_gogc_percent",
    "go_gc_gomemlimit_bytes",
    "go_gc_scan_stack_bytes",
    "go_gc_scan_globals_bytes",
    "go_sched_gomaxprocs_threads",
    "go_memstats_heap_inuse_bytes",
    "go_memstats_sys_bytes",
    "go_memstats_heap_sys_bytes",
    _GC_FRACTION,
)


def _with_instance(table: pa.Table, name: str | None) -> pa.Table:
    col = pa.array([name] * table.num_rows, pa.string())
    if "instance" in table.column_names:
        return table.set_column(table.column_names.index("instance"), "instance", col)
    return table.append_column("instance", col)


def read_gctrace_files(paths: Iterable[str]) -> pa.Table:
    """The gctrace cycles of log files, one instance per file (named by its path).
    An unreadable file is a ``UsageError`` naming it."""
    from pyproflab.sources.gctrace import read_gctrace

    tables = []
    for path in paths:
        # Read in bounded pieces, values checked (sources.gctrace).
        t = read_gctrace(path, source=path, errors=[])
        tables.append(_with_instance(t, path))
    return pa.concat_tables(tables) if tables else pa.table({})


def read_metric_files(paths: Iterable[str], instance: str | None = None) -> pa.Table:
    """Prometheus text snapshots (one scrape per file; a sample without a
    timestamp takes the file's modification time), as one instance."""

    from pyproflab.sources.prometheus import read_exposition

    tables = []
    for path in paths:
        t = read_exposition(path, source=path)  # undated samples: the file's mtime
        tables.append(_with_instance(t, instance))
    return pa.concat_tables(tables)


def observe(
    *,
    cycles: pa.Table | None = None,
    samples: pa.Table | None = None,
    gogc: float | None | str = "auto",
    memory_limit: float | None | str = "auto",
) -> GcObservation:
    """One observation from gctrace cycles and/or metric samples (either may be
    None or empty). ``"auto"``: GOGC and the limit from the metrics when they
    are there, else GOGC inferred from the goals and no limit."""
    has_c = cycles is not None and cycles.num_rows > 0
    has_s = samples is not None and samples.num_rows > 0
    if not has_c and not has_s:
        raise UsageError("no GC data: give gctrace logs or Prometheus metrics")
    met = None
    if has_s:
        met = from_metrics(
            samples,  # type: ignore[arg-type]
            gogc="observed" if gogc == "auto" else gogc,
            memory_limit="observed" if memory_limit == "auto" else memory_limit,
        )
    if not has_c:
        return met  # type: ignore[return-value]
    trace = from_gctrace(
        cycles,  # type: ignore[arg-type]
        gogc="infer" if gogc == "auto" else gogc,
        memory_limit=None if memory_limit == "auto" else memory_limit,  # type: ignore[arg-type]
    )
    return combine(trace, met) if met is not None else trace


def observe_store(
    store,
    *,
    service: str | None = None,
    version: str | None = None,
    instance: str | None = None,
    gogc: float | None | str = "auto",
    memory_limit: float | None | str = "auto",
) -> GcObservation:
    """The observation of a service/version/instance from the store's gctrace
    cycles and metric samples; no profile needed."""
    from pyproflab.store.metrics import gc_cycle_rows, metric_sample_rows

    sel = dict(service=service, version=version, instance=instance)
    cycles = gc_cycle_rows(store, **sel)
    samples = metric_sample_rows(store, METRIC_NAMES, **sel)
    if cycles.num_rows == 0 and samples.num_rows == 0:
        what = ", ".join(f"{k} {v}" for k, v in sel.items() if v is not None) or "the store"
        raise UsageError(
            f"no gctrace cycles or GC metrics for {what}: ingest them with `pyproflab ingest-gc`"
        )
    return observe(cycles=cycles, samples=samples, gogc=gogc, memory_limit=memory_limit)
