"""What a Go service's GC did, at every setting it ran, from Prometheus snapshots.

Rules (client_golang's defaults; runtime/metrics names preferred):

- A *run* is one instance's snapshots up to a restart (the cycle counter goes
  down). Counters are differenced between snapshots of a run: one sample per
  interval with at least one cycle, weighing its seconds; snapshots with no
  cycle since the last sample lengthen the next interval instead of being
  dropped (the runtime moves its CPU classes only when a cycle ends, and a
  rate over the cycled intervals alone read helper-70's h70svc at GOGC=400,
  a cycle per 12 s scraped every 2 s, as 30.5 cycles a minute against 5.0).
  Cycles ``go_gc_cycles_total_gc_cycles_total`` (else
  ``go_gc_duration_seconds_count``), allocation ``go_gc_heap_allocs_bytes_total``
  (else ``go_memstats_alloc_bytes_total``), GC CPU
  ``go_cpu_classes_gc_total_cpu_seconds_total``, busy CPU = total − idle
  classes (else ``process_cpu_seconds_total``).
- Gauges are the mean of the interval's two ends, as its counters average
  over it (read at the end alone, a heap that grows through a run read high:
  graph's marked heap at GOGC 100 by 9 %): ``go_gc_heap_live_bytes`` (marked
  heap), ``go_gc_heap_goal_bytes`` (else ``go_memstats_next_gc_bytes``),
  scan stack + globals (``go_sched_gomaxprocs_threads`` at the end).
  Without the live heap it is derived from the goal, ``H = (goal − R·g)/(1 +
  g)``.
- The setting of an interval is ``go_gc_gogc_percent`` (negative, or 2^62
  or more: off; the runtime exports off's -1 as a uint64, 2^64 − 1) and
  ``go_gc_gomemlimit_bytes`` (2^62 or more: no limit) at both ends; an
  interval whose setting changed in it is left out. Without them (Go before
  1.21): GOGC 100 and no limit, with a note (or the setting given); beside a
  gctrace log of the instance showing one GOGC, that GOGC (a GOGC=200 service
  of Go 1.20 read "current GOGC=100" from the store, its gctrace relabelled).
- Mark time: the dedicated class counts the dedicated and fractional workers.
  With only dedicated workers (P = 4, 5, 7, 8, ...) ``T`` = their CPU per
  cycle / their number, exact. With fractional ones (P <= 3 or 6) they run
  only when their P schedules, so that is a lower bound; the mark time is
  then raised to where the pacer's trigger floor puts it when the interval
  shows the trigger at its floor (``floor_mark``). Mark-time allocation is not
  exported: ``B = A·T``, at most what the trigger's floor leaves a cycle, ``Δ −
  (45/64)·D`` (``Δ = A/n`` the bytes a cycle allocates, ``D`` = goal − H): on
  a machine shared with other work, the workers' CPU counts time their
  threads waited for a core, and ``A·T`` ran to twice gctrace's ``B``.
  From ``B``, ``T`` and the mark classes' CPU, the interval's cons/mark as
  gctrace's (``samples.cons_mark``), for the pacer's runway (``fit`` rule 6).
- An interval whose GC CPU exceeds the process's busy CPU (a share above
  100 %: counters reset or mixed) is left out with a note: never advice.
- client_golang's defaults without the runtime/metrics set: GC CPU from
  ``go_memstats_gc_cpu_fraction`` × P (an average since the process
  started), P = the busy CPU rounded up, no mark time (``B = 0``): each
  fallback is noted.
- Memory: ``peak_heap`` is the goal (a scrape rarely catches the peak);
  ``non_heap`` = RSS − heap in use at a scrape; ``rss_per_goal`` = (RSS + goal −
  heap in use) / goal; ``runtime_non_heap`` = what a memory limit counts
  beside the heap's objects, the runtime's ``nonHeapMemory``: (sys − heap
  sys) + (heap in use − heap alloc) over the interval, the spans' unused
  part too (without it, service's goal under a 160 MiB limit came out
  6-7 % high); each run's largest RSS is its peak RSS.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gc_windows import (
    M_ALLOCS,
    M_CPU_GC,
    M_CPU_IDLE,
    M_CPU_TOTAL,
    M_CYCLES,
    M_GOGC,
    M_GOMEMLIMIT,
    M_HEAP_GOAL,
    M_HEAP_LIVE,
)
from pyproflab.analyses.gogc.pacer import (
    MIN_TRIGGER,
    background_workers,
    floor_mark,
    mark_seconds,
)
from pyproflab.analyses.gogc.samples import Observation, Setting, cons_mark
from pyproflab.errors import UsageError

NO_LIMIT_MIN = float(2**62)  # go_gc_gomemlimit_bytes at or above this: no limit
NO_GOGC_MIN = float(2**62)  # go_gc_gogc_percent at or above this: off (uint64(-1))

# The names the GC join (``gc_windows``) reads too, with client_golang's fallbacks.
CYCLES = (M_CYCLES, "go_gc_duration_seconds_count")
ALLOCS = (M_ALLOCS, "go_memstats_alloc_bytes_total")
GOAL = (M_HEAP_GOAL, "go_memstats_next_gc_bytes")
GC_CPU, TOTAL, IDLE = M_CPU_GC, M_CPU_TOTAL, M_CPU_IDLE
GOGC_METRIC, LIMIT_METRIC = M_GOGC, M_GOMEMLIMIT
DEDICATED = "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total"
IDLE_MARK = "go_cpu_classes_gc_mark_idle_cpu_seconds_total"
PAUSE = "go_cpu_classes_gc_pause_cpu_seconds_total"
ASSIST = "go_cpu_classes_gc_mark_assist_cpu_seconds_total"
GC_FRACTION = "go_memstats_gc_cpu_fraction"

METRIC_NAMES: tuple[str, ...] = (
    *CYCLES,
    *ALLOCS,
    *GOAL,
    GC_CPU,
    TOTAL,
    IDLE,
    DEDICATED,
    IDLE_MARK,
    PAUSE,
    ASSIST,
    GC_FRACTION,
    GOGC_METRIC,
    LIMIT_METRIC,
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    M_HEAP_LIVE,
    "go_gc_scan_stack_bytes",
    "go_gc_scan_globals_bytes",
    "go_sched_gomaxprocs_threads",
    "go_memstats_heap_inuse_bytes",
    "go_memstats_heap_alloc_bytes",
    "go_memstats_sys_bytes",
    "go_memstats_heap_sys_bytes",
)


def _series(rows: Iterable[dict[str, Any]]) -> dict[tuple[Any, str], dict[Any, float]]:
    """(instance, metric) -> {time: value}, unlabelled samples only (quantiles skipped)."""
    out: dict[tuple[Any, str], dict[Any, float]] = {}
    for r in rows:
        if r["labels"]:
            continue
        out.setdefault((r.get("instance"), r["metric"]), {})[r["time"]] = r["value"]
    return out


def _first(ser: dict, inst: Any, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if (inst, n) in ser), None)


class _Snaps:
    """One instance's series: values at a time, differences between two."""

    def __init__(self, ser: dict, inst: Any) -> None:
        self.ser, self.inst = ser, inst

    def at(self, name: str | None, t) -> float | None:
        return self.ser.get((self.inst, name), {}).get(t) if name else None

    def mid(self, name: str | None, t0, t1) -> float | None:
        """A gauge over an interval: the mean of its two ends (its end alone
        when the start is missing)."""
        a, b = self.at(name, t0), self.at(name, t1)
        return b if a is None or b is None else (a + b) / 2

    def delta(self, name: str | None, t0, t1) -> float | None:
        a, b = self.at(name, t0), self.at(name, t1)
        return None if a is None or b is None else b - a


def _setting(s: _Snaps, t, given: tuple[Any, Any], unexported: float | None = 100.0) -> Setting:
    g = given[0] if given[0] != "observed" else s.at(GOGC_METRIC, t)
    m = given[1] if given[1] != "observed" else s.at(LIMIT_METRIC, t)
    if given[0] == "observed" and g is None:
        g = unexported  # Go before 1.21 has no /gc/gogc:percent
    if g is not None and (g < 0 or g >= NO_GOGC_MIN):
        g = None
    if m is not None and m >= NO_LIMIT_MIN:
        m = None
    return (g, m)


def _limit_counted(s: _Snaps, t0, t1) -> float:
    """What a memory limit counts beside the heap's objects over an interval: the
    runtime's ``nonHeapMemory`` (mapped and ready − free − object bytes) in
    memstats, (sys − heap sys) + (heap in use − heap alloc): the memory
    outside the heap and the unused part of the heap's spans in use."""
    names = ("go_memstats_sys_bytes", "go_memstats_heap_sys_bytes")
    sys_, heap_sys = (s.mid(n, t0, t1) for n in names)
    if sys_ is None or heap_sys is None:
        return math.nan
    inuse = s.mid("go_memstats_heap_inuse_bytes", t0, t1)
    objects = s.mid("go_memstats_heap_alloc_bytes", t0, t1)
    spans = inuse - objects if inuse is not None and objects is not None else 0.0
    return sys_ - heap_sys + max(spans, 0.0)


def _interval(s: _Snaps, t0, t1, setting: Setting) -> dict[str, Any] | None:
    """One sample from the snapshots at t0 and t1 (module rules)."""
    dt = (t1 - t0).total_seconds()
    cname, aname, gname = (_first(s.ser, s.inst, n) for n in (CYCLES, ALLOCS, GOAL))
    cyc = s.delta(cname, t0, t1)
    if not cyc or cyc <= 0 or dt <= 0 or aname is None or gname is None:
        return None
    total, idle = s.delta(TOTAL, t0, t1), s.delta(IDLE, t0, t1)
    busy = total - idle if total is not None and idle is not None else None
    if busy is None:
        busy = s.delta("process_cpu_seconds_total", t0, t1)
    roots = (s.mid("go_gc_scan_stack_bytes", t0, t1) or 0.0) + (
        s.mid("go_gc_scan_globals_bytes", t0, t1) or 0.0
    )
    goal = s.mid(gname, t0, t1) or 0.0
    g = setting[0] if setting[0] is not None else 100.0
    marked = s.mid(M_HEAP_LIVE, t0, t1)
    if marked is None:
        marked = (goal - roots * g / 100) / (1 + g / 100)
    n, alloc = cyc / dt, (s.delta(aname, t0, t1) or 0.0) / dt
    p = s.at("go_sched_gomaxprocs_threads", t1) or (
        max(1.0, math.ceil(busy / dt - 0.05)) if busy is not None else 1.0
    )
    gc = s.delta(GC_CPU, t0, t1)
    frac = s.at(GC_FRACTION, t1)
    gc_cores = gc / dt if gc is not None else (frac * p if frac is not None else math.nan)
    saturated = idle is not None and total is not None and total > 0 and idle / total < 0.03
    ded, assist, idle_mark = (s.delta(k, t0, t1) for k in (DEDICATED, ASSIST, IDLE_MARK))
    pause = s.delta(PAUSE, t0, t1)
    per = dict(per_cycle=alloc / n, runway=goal - marked, alloc=alloc, n=n)
    if busy is not None:
        per["busy"] = busy / dt
    mark_s, b, runway = _mark(per, (ded, assist, idle_mark), cyc, p, saturated)
    work = sum(v for v in (ded, assist, idle_mark) if v is not None) / cyc
    rss, inuse = s.at("process_resident_memory_bytes", t1), s.at("go_memstats_heap_inuse_bytes", t1)
    cons = math.nan
    if ded is not None and assist is not None and math.isfinite(mark_s) and mark_s > 0:
        x = p * mark_s
        cons = cons_mark(b, marked + roots, work / x, (ded + assist) / cyc / x)
    return dict(
        setting=setting,
        cons_mark=cons,
        pacer_runway=runway,
        n=n,
        alloc=alloc,
        per_cycle=alloc / n,
        marked=marked,
        goal=goal,
        mark_alloc=b,
        roots=roots,
        cost=gc_cores / n,
        work=work if ded is not None else math.nan,
        background=ded / cyc if ded is not None else math.nan,
        assist=assist / cyc if assist is not None else math.nan,
        idle_mark=idle_mark / cyc if idle_mark is not None else math.nan,
        pause=pause / cyc if pause is not None else math.nan,
        mark_s=mark_s,
        mutator=(busy / dt - gc_cores) if busy is not None else math.nan,
        busy_all=busy / dt if busy is not None else math.nan,
        # Without the idle class (client_golang's defaults) P comes from the busy CPU
        # itself: no telling whether the process was CPU-bound.
        busy=busy / dt if busy is not None and idle is not None else math.nan,
        idle=(idle / total) if idle is not None and total else math.nan,
        peak_heap=goal,
        non_heap=rss - inuse if rss is not None and inuse is not None else math.nan,
        runtime_non_heap=_limit_counted(s, t0, t1),
        rss_per_goal=(rss + max(goal - (inuse if inuse is not None else goal), 0.0)) / goal
        if rss is not None and goal > 0
        else math.nan,
        procs=p,
        w=dt,
        t_end=t1.timestamp(),
        taken=t1.timestamp(),  # a scrape's own time: ``current``'s absolute time
    )


def _mark(
    per: dict[str, float],
    cpu: tuple[float | None, float | None, float | None],
    cyc: float,
    procs: float,
    saturated: bool,
) -> tuple[float, float, float]:
    """(mark seconds, mark-time allocation, the pacer's runway) of an interval
    (module rules); NaN, 0, NaN without the dedicated class."""
    ded, assist, idle_mark = cpu
    if ded is None:
        return math.nan, 0.0, math.nan
    mark_s, exact = mark_seconds(ded / cyc, procs)
    # At most what the trigger's floor leaves a cycle: B <= Δ - (45/64)·D.
    b = min(per["alloc"] * mark_s, max(per["per_cycle"] - MIN_TRIGGER * per["runway"], 0.0))
    # The pacer's runway as the interval shows it: the goal less where marking
    # started (the bytes a cycle allocates, less those allocated while marking).
    runway = max(per["runway"] - per["per_cycle"] + b, 0.0)
    if exact or assist is None or idle_mark is None:
        return mark_s, b, runway
    c = per | dict(mark_cpu=(ded + assist + idle_mark) / cyc, assist=assist / cyc)
    floor = floor_mark(c | {"idle_mark": idle_mark / cyc}, procs, saturated)
    if floor is not None and floor[0] > mark_s:
        return floor
    return mark_s, b, runway


def _run_cuts(times: list, cyc: dict) -> list[list]:
    """The snapshot times cut into runs where the cycle counter goes down (a restart)."""
    runs: list[list] = [[]]
    for t in times:
        if runs[-1] and cyc[t] < cyc[runs[-1][-1]]:
            runs.append([])
        runs[-1].append(t)
    return [r for r in runs if len(r) >= 2]


def _run_samples(
    s: _Snaps, times: list, given: tuple[Any, Any], unexported: float | None = 100.0
) -> tuple[list[dict], int]:
    """One run's samples and how many were absurd (module rules): an interval
    starts at the last sample's end (snapshots with no cycle in between
    lengthen it) or where the setting changed. ``gogc_exported`` says whether
    its GOGC is the exported (or given) one, not ``unexported``."""
    got, absurd, t0 = [], 0, times[0]
    for prev, t1 in zip(times, times[1:], strict=False):
        st1 = _setting(s, t1, given, unexported)
        if _setting(s, prev, given, unexported) != st1:
            t0 = t1
            continue
        if (smp := _interval(s, t0, t1, st1)) is None:
            continue
        t0 = t1
        smp["gogc_exported"] = given[0] != "observed" or s.at(GOGC_METRIC, t1) is not None
        if smp["mutator"] < -0.01 * smp["busy_all"]:  # GC CPU above the process's
            absurd += 1
            continue
        got.append(smp)
    return got, absurd


def from_metrics(
    samples: pa.Table,
    *,
    gogc: float | None | str = "observed",
    memory_limit: float | None | str = "observed",
    source: str = "prometheus",
    trace_gogc: dict[Any, float | None] | None = None,
) -> Observation:
    """An ``Observation`` from ``METRIC_SAMPLES`` rows (an ``instance`` column,
    if present, separates instances; module rules). Where GOGC is observed but
    not exported (Go before 1.21), an instance in ``trace_gogc`` takes the GOGC
    its gctrace shows (else 100): gctrace's heap goals say it, 100 is a guess."""
    trace_gogc = trace_gogc or {}
    ser = _series(samples.to_pylist())
    insts = sorted({k[0] for k in ser}, key=lambda x: (x is None, str(x)))
    out: list[dict[str, Any]] = []
    peaks: dict[Setting, list[float]] = {}
    run, absurd = 0, 0
    for inst in insts:
        s = _Snaps(ser, inst)
        cname = _first(ser, inst, CYCLES)
        if cname is None:
            continue
        cyc = ser[(inst, cname)]
        for times in _run_cuts(sorted(cyc), cyc):
            got, bad = _run_samples(s, times, (gogc, memory_limit), trace_gogc.get(inst, 100.0))
            absurd += bad
            if not got:
                continue
            for smp in got:
                smp["run"], smp["instance"] = run, inst
            out += got
            rss = [v for t in times if (v := s.at("process_resident_memory_bytes", t)) is not None]
            if rss:
                peaks.setdefault(got[-1]["setting"], []).append(max(rss))
            run += 1
    if not out and absurd:
        raise UsageError(
            f"{source}: every interval's GC CPU exceeds the process's CPU (a share above "
            "100%): refused, cannot model GOGC"
        )
    if not out:
        raise UsageError(
            f"{source}: no instance has two snapshots of a GC cycle count "
            f"({' or '.join(CYCLES)}), an allocation counter and a heap goal: "
            "cannot model GOGC"
        )
    obs = Observation(out, statistics.median(x["procs"] for x in out), source, peak_rss=peaks)
    _notes(ser, obs, gogc, memory_limit, set(insts) <= set(trace_gogc))
    if absurd:
        obs.notes.append(
            f"{absurd} interval(s) whose GC CPU exceeds the process's (a share above 100%): "
            "left out"
        )
    return obs


def _notes(ser: dict, obs: Observation, gogc: Any, memory_limit: Any, traced: bool) -> None:
    """Provenance of each input, and a note for each fallback (``traced``: every
    instance's GOGC, when not exported, is its gctrace's)."""
    names = {k[1] for k in ser}
    runs = f"{obs.runs} run{'s' if obs.runs != 1 else ''}"  # as gctrace's provenance says it
    label = f"{obs.source} ({obs.cycles} cycles over {len(obs.samples)} intervals, {runs})"
    for k in ("cycles", "allocation", "marked heap", "GC CPU", "mutator CPU", "GOMAXPROCS"):
        obs.provenance[k] = label
    obs.provenance["roots"] = label
    dedicated, fractional = background_workers(obs.procs)
    obs.provenance["mark time"] = (
        f"{label}: dedicated-worker CPU / {dedicated} dedicated worker(s)"
        if fractional == 0 and dedicated > 0
        else f"{label}: background-worker CPU / (25% of GOMAXPROCS), a lower bound "
        f"(fractional workers at GOMAXPROCS {obs.procs:g} run only when their P is free); "
        "where the trigger sits at its floor, the mark time that floor implies"
    )
    obs.provenance["mark-time allocation"] = "estimated: allocation rate x mark time (not exported)"
    obs.provenance["peak RSS"] = (
        f"{label}: process_resident_memory_bytes"
        if "process_resident_memory_bytes" in names
        else "not exported: peak memory taken as 1.4 x the heap goal"
    )
    unexported = "from gctrace's heap goals" if traced else "taken as 100"
    obs.provenance["GOGC"] = (
        "given"
        if gogc != "observed"
        else f"{label}: {GOGC_METRIC}"
        if GOGC_METRIC in names
        else f"{GOGC_METRIC} not exported (Go before 1.21): {unexported}"
    )
    obs.provenance["memory limit"] = (
        "given" if memory_limit != "observed" else f"{label}: {LIMIT_METRIC}"
    )
    checks = [
        (GOGC_METRIC, f"{GOGC_METRIC} not exported (Go before 1.21): GOGC {unexported}"),
        (GC_CPU, f"no {GC_CPU}: GC CPU from {GC_FRACTION} (the average since the process started)"),
        (DEDICATED, "no mark-worker CPU classes: mark time unknown, no floating garbage modelled"),
        (
            "go_sched_gomaxprocs_threads",
            "GOMAXPROCS not exported: taken as the busy CPU rounded up",
        ),
        (IDLE, "idle CPU not exported: the process is taken as not CPU-bound"),
    ]
    for name, note in checks:
        if name not in names and (name != GOGC_METRIC or gogc == "observed"):
            obs.notes.append(note)
