"""What a Go service's GC did, at every setting it ran, from gctrace cycles.

An ``Observation`` holds *samples*: one per gctrace cycle (here) or per
interval between two Prometheus snapshots (``prometheus``). Each sample
carries the setting it ran at (``setting``: GOGC or None for off, and the
memory limit or None), the process run it came from (``run``), and its
weight (``w``: the seconds it stands for). The model fits on all of them.

Per sample (bytes, seconds, cores):

- ``n`` GC cycles per second; ``alloc`` allocation rate ``A``;
- ``marked`` the heap the cycle marked ``H``; ``goal`` the heap goal;
  ``mark_alloc`` ``B``, bytes allocated while marking (allocated black: the
  cycle counts them as marked, floating garbage); ``roots`` ``R``;
- ``cost`` GC CPU per cycle ``C`` (every GC class: pauses, assists,
  background and idle workers); ``work`` the mark workers' part (assist +
  background + idle); ``idle_mark``, ``pause`` and ``assist`` its parts;
  ``mark_s`` the mark phase's wall time ``T``;
- ``mutator`` the mutator's CPU (cores); ``idle`` the idle share of the
  P-time (0 when the process saturates GOMAXPROCS);
- ``peak_heap`` the largest heap seen; ``cons_mark`` the pacer's cons/mark.

Rules, gctrace (``GODEBUG=gctrace=1``, ``sources.gctrace``):

- Forced cycles and each run's start-up (``startup``) are dropped. Sizes are
  floored MiB: half a MiB is added.
- A *run* is one process: the cycles of one (instance, source[, incarnation])
  in gc-number order, cut where the number does not rise or the time goes
  back (a restart). Each run's ``n`` is (last gc number − first) / (last start
  − first start) over each segment of one setting: exact even when lines in
  between are missing.
- The bytes a cycle allocates are its heap at the end less the heap the cycle
  before it marked (its own where the log skips one; in a steady state each
  cycle frees what was allocated since the last), so ``A = n × that``; ``B =
  heap_end − heap_start``; ``T`` the concurrent mark's clock time.
- The pauses (sweep and mark termination) count at their clock time, one P:
  gctrace's "ms cpu" for them is the clock times P, which counts the Ps that
  still ran (or waited on the OS) while the world was being stopped. The
  runtime's CPU classes, which the model predicts, count each P only from
  its own stop (``stoppingCPUTime``), and all P only once the world stands
  (mgc.go, Go 1.22+), nor the restart the sweep termination's clock holds
  (to ``tMark``). CPU-bound, the classes' pause was about the clock at one
  P (median 1.1-1.5 at 2 P, 0.8 at 1 P). On paced blob (0.2 of 2 P busy,
  pauses 8-20 % of its GC CPU) it was 0.12-0.51 of it, restarts 50-80 % of
  the clock (reruns: ``/sched/pauses/total/gc`` less ``stopping`` and the
  stopped time), and gctrace's GC CPU 1.15-1.9x the classes' (fitted on
  GOGC 100, the share there 0.9 % against 0.7 %). Not corrected (gctrace
  does not show the restart); the provenance says so where Ps idle and
  pauses are 10 % or more of GC CPU. With /metrics beside the log that
  carry the pause class, the pauses take the classes' mean (``pauses``).
- The mutator's CPU is what the workers leave of ``P·T`` while marking:
  ``P − work/T``; too much when Ps idle (idle workers do not take every idle
  moment): a process CPU from Prometheus or ``--process-cpu`` replaces it.
- The setting is not printed: GOGC is inferred from the cycles' heap goals
  (``infer``'s rules). A derived GOGC outside 1–10,000 is refused (the
  segment is left out, with a note): never advice. A given
  ``gogc``/``memory_limit`` replaces the inference.
- Each cycle weighs ``1/n`` seconds: a run counts for the time it covers
  (a figure of one cycle, such as its GC CPU, is averaged over cycles:
  ``means``).
- gctrace's mark CPU figures are the workers' time by the runtime's clock
  (``nanotime`` around assists and mark workers), not CPU the OS gave: a
  process stopped or descheduled while marking counts the stop as GC CPU,
  and the mark's clock holds it too. A mark's clock per scanned byte
  (``T / (H + R)``) follows the scan speed and the pacer's utilisation,
  which vary a few-fold within a run (the recorded workloads, tests/testdata/
  gc: at most 30x the run's median), so a cycle at ``STALLED_MARK`` (100) or
  more times its run's median did not run for most of its mark: its CPU and
  clock measure the stop (the demo's notesd, a 255 s idle gap, then
  ``gc 546``: 96 s of mark, 94 s "CPU", 94 of the run's 98 s of GC CPU). It
  is left out as a missing line is (the rate counts gc numbers), with a
  note naming it and its figures.
- Where the process's CPU at a setting is known (``busy``: Prometheus beside
  the log, ``--process-cpu``), the GC's cores there as the fit takes them
  (mean rate x mean GC CPU per cycle) are at most it: the runtime's clock
  counts a stop the stall rule keeps as GC work, and an OS count or another
  window of /metrics can show less CPU than gctrace's GC (no cost to fit).
  Above it, the GC CPU figures there (``cost``, its parts, a cycle's
  cons/mark) are scaled down to it, the mark's clock and the mutator's CPU
  kept, and a note gives the excess as time the process did not run.
  ``--process-cpu`` below the GC's own CPU is refused (``check_process_cpu``).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gogc import infer, pauses, startup
from pyproflab.analyses.gogc.current import Setting, latest_setting, setting_label
from pyproflab.analyses.gogc.infer import SEGMENT_MIN
from pyproflab.analyses.gogc.means import wmean
from pyproflab.errors import UsageError

MiB = float(1 << 20)
SATURATED_IDLE = 0.03  # idle share of P-time below which the process runs at GOMAXPROCS
GOGC_RANGE = (1.0, 10_000.0)  # a derived GOGC outside this is refused (issue 35)
PAUSE_NOTE = 0.1  # a paced process's pauses this much of GC CPU: said in the provenance
STALLED_MARK = 100.0  # mark clock per scanned byte over its run's median: a stop (module rules)


@dataclass
class Observation:
    """Samples of one service at every setting it ran (module rules).

    ``provenance`` maps each model input to where it came from (``"gctrace
    (118 cycles)"``); ``peak_rss`` maps a setting to each run's peak RSS
    there, when known; ``current`` is the setting the model treats as today's
    (unless given: ``current.latest_setting``).
    """

    samples: list[dict[str, Any]]
    procs: float
    source: str
    provenance: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    peak_rss: dict[Setting, list[float]] = field(default_factory=dict)
    current: Setting | None = None
    container: Any = None  # container.Container, when known

    def __post_init__(self) -> None:
        if self.current is None and self.samples:
            self.current = latest_setting(self.samples, self.notes)

    @property
    def settings(self) -> dict[Setting, list[dict[str, Any]]]:
        """The samples per setting, in order of GOGC (off last), then limit."""
        by: dict[Setting, list[dict[str, Any]]] = {}
        for s in self.samples:
            by.setdefault(s["setting"], []).append(s)
        order = lambda k: (k[0] is None, k[0] or 0.0, k[1] is None, k[1] or 0.0)  # noqa: E731
        return {k: by[k] for k in sorted(by, key=order)}

    @property
    def runs(self) -> int:
        return len({s["run"] for s in self.samples})

    @property
    def cycles(self) -> int:
        return int(round(sum(s["w"] * s["n"] for s in self.samples)))

    def at(self, settings: Iterable[Setting]) -> Observation:
        """The observation restricted to these settings (the current one kept when present)."""
        keep = set(settings)
        ss = [s for s in self.samples if s["setting"] in keep]
        if not ss:
            raise UsageError("no GC samples at the chosen settings")
        cur = self.current if self.current in keep else None
        return Observation(
            ss,
            self.procs,
            self.source,
            dict(self.provenance),
            list(self.notes),
            {k: v for k, v in self.peak_rss.items() if k in keep},
            cur,
            self.container,
        )

    def saturated(self, samples: Iterable[dict[str, Any]] | None = None) -> bool:
        """True when the process ran at GOMAXPROCS: its CPU (``busy``, when known:
        Prometheus, or given) within 3 % of it, else no idle mark-worker time to
        speak of (gctrace alone: idle workers do not always take idle Ps, so
        this can call a paced process CPU-bound)."""
        ss = list(self.samples if samples is None else samples)
        busy = [s["busy"] / s["procs"] for s in ss if math.isfinite(s.get("busy", math.nan))]
        if busy:
            return statistics.median(busy) >= 1 - SATURATED_IDLE
        idle = [v for s in ss if math.isfinite(v := s["idle"])]
        return bool(idle) and statistics.median(idle) < SATURATED_IDLE

    def mean(self, key: str, samples: Iterable[dict[str, Any]] | None = None) -> float:
        """The mean of ``key`` over the samples (all, or those given), weighted
        as ``means`` rules."""
        got = wmean(self.samples if samples is None else samples, key)
        if math.isnan(got):
            raise UsageError(f"no GC samples carry {key}: cannot model GOGC")
        return got


# --- gctrace -------------------------------------------------------------------------


def _mb(v: float | None) -> float:
    return (v + 0.5) * MiB if v is not None else 0.0


def cons_mark(mark_alloc: float, scan: float, u_all: float, u_busy: float) -> float:
    """The pacer's cons/mark ratio of one cycle (``mgcpacer.go``, endCycle):
    bytes allocated while marking per byte of scan work, scaled by the GC's
    CPU utilisation ``u_all`` (idle workers included) over the mutator's share
    ``1 − u_busy``. The background workers count as they ran, not at their 25 %
    goal as endCycle takes them (which made the runway at GOGC 400 and 800 on
    tests/gcbench flat out twice as long as seen)."""
    if scan <= 0 or not 0 <= u_busy < 0.99:
        return math.nan
    return mark_alloc * u_all / (scan * (1 - u_busy))


def cycle_sample(r: dict[str, Any]) -> dict[str, Any] | None:
    """One gctrace cycle's figures (``n`` filled by the caller); None when it
    carries no usable mark phase."""
    t = r["clock_mark_ms"] / 1e3
    if t <= 0:
        return None
    marked, start, end = _mb(r["heap_live_mb"]), _mb(r["heap_start_mb"]), _mb(r["heap_end_mb"])
    # Roots are often far below 1 MiB ("0 MB stacks"): a zero stays zero.
    roots = sum(_mb(v) for v in (r["stacks_mb"], r["globals_mb"]) if v)
    p = float(r["procs"])
    work = (r["cpu_background_ms"] + r["cpu_idle_ms"] + r["cpu_assist_ms"]) / 1e3
    pause = (r["clock_sweep_term_ms"] + r["clock_mark_term_ms"]) / 1e3  # one P: module rules
    busy = (r["cpu_background_ms"] + r["cpu_assist_ms"]) / 1e3 / (p * t)
    return dict(
        cons_mark=cons_mark(end - start, marked + roots, work / (p * t), busy),
        per_cycle=max(end - marked, 0.0),
        marked=marked,
        goal=_mb(r["heap_goal_mb"]),
        mark_alloc=max(end - start, 0.0),
        roots=roots,
        cost=work + pause,
        work=work,
        background=r["cpu_background_ms"] / 1e3,
        assist=r["cpu_assist_ms"] / 1e3,
        idle_mark=r["cpu_idle_ms"] / 1e3,
        pause=pause,
        mark_s=t,
        mutator=min(max(p - work / t, 0.0), p),
        idle=r["cpu_idle_ms"] / 1e3 / (p * t),
        peak_heap=max(end, start),
        procs=p,
        gc_num=r["gc_num"],
        t_end=r["seconds"],
        taken=r["time"].timestamp() if r.get("time") else None,  # seconds count per process
        instance=r.get("instance"),
    )


def _runs(cycles: pa.Table) -> list[list[dict[str, Any]]]:
    """Unforced cycles per process run (module rules), each in gc-number order."""
    keys = [c for c in ("instance", "source", "incarnation", "run") if c in cycles.column_names]
    by: dict[tuple, list[dict[str, Any]]] = {}
    for r in cycles.to_pylist():
        if not r["forced"]:
            by.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    # Numbers as numbers: a log's runs in its order (run 10 after run 9, not 1).
    for key in sorted(by, key=lambda k: tuple((v is None, _order(v)) for v in k)):
        run: list[dict[str, Any]] = []
        # The log's order, not the numbers': a restart shows as a number that does not rise.
        for r in by[key]:
            if run and (r["gc_num"] <= run[-1]["gc_num"] or r["seconds"] < run[-1]["seconds"]):
                out.append(run)
                run = []
            run.append(r)
        out.append(run)
    return [r for r in out if r]


def _order(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def _stall(s: dict[str, Any]) -> float:
    return s["mark_s"] / (s["marked"] + s["roots"])


def _without_stalls(ss: list[dict[str, Any]], k: int, notes: list[str]) -> list[dict[str, Any]]:
    """The run's cycles less those whose mark clock per scanned byte is
    ``STALLED_MARK`` times the run's median or more (module rules); a note
    names them and their figures."""
    if len(ss) < 3:
        return ss
    med = statistics.median(_stall(s) for s in ss)
    out = [s for s in ss if _stall(s) < STALLED_MARK * med]
    if len(out) < len(ss):
        gone = [s for s in ss if _stall(s) >= STALLED_MARK * med]
        said = "; ".join(
            f"gc {s['gc_num']} (mark {s['mark_s']:,.1f} s clock, GC CPU {s['cost']:,.1f} s, "
            f"{s['marked'] // MiB:.0f} MiB marked: {_stall(s) / med:,.0f}x)"
            for s in gone[:3]
        )
        more = f" and {len(gone) - 3} more" if len(gone) > 3 else ""
        who = f" of {ss[0]['instance']}" if ss[0].get("instance") else ""
        notes.append(
            f"run {k + 1}{who}: {len(gone)} cycle(s) left out, their mark clock per scanned "
            f"MiB {STALLED_MARK:g}x or more the run's median ({med * MiB * 1e3:.2g} ms): "
            f"{said}{more}; gctrace times GC work by the runtime's clock, so a process "
            "stopped or descheduled while marking counts the stop as GC CPU"
        )
    return out


def _segment_rate(seg: list[dict[str, Any]]) -> float | None:
    span, cycles = seg[-1]["t_end"] - seg[0]["t_end"], seg[-1]["gc_num"] - seg[0]["gc_num"]
    return cycles / span if span > 0 and cycles > 0 else None


def from_gctrace(
    cycles: pa.Table,
    *,
    gogc: float | None | str = "infer",
    memory_limit: float | None = None,
    source: str = "gctrace",
) -> Observation:
    """An ``Observation`` from ``GC_CYCLES`` rows (``instance``/``source``/
    ``incarnation`` columns, when present, separate runs; module rules)."""
    notes: list[str] = []
    samples: list[dict[str, Any]] = []
    runs: list[tuple[int, list[Any]]] = []  # each run's cycles, or its (GOGC, cycles)
    for k, run in enumerate(_runs(cycles)):
        ss = [s for r in run if (s := cycle_sample(r)) is not None]
        ss = startup.past_startup(_without_stalls(ss, k, notes), k, notes)
        if len(ss) < SEGMENT_MIN:
            continue
        for a, b in zip(ss, ss[1:], strict=False):
            if b["gc_num"] == a["gc_num"] + 1:  # allocated since the last cycle's mark
                b["per_cycle"] = max(b["peak_heap"] - a["marked"], b["per_cycle"])
        runs.append((k, ss if gogc == "infer" else [(gogc, ss)]))
    if gogc == "infer":
        runs, split = infer.split_runs(runs)
        notes += split
        runs = infer.cluster(runs)
    ranges: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    for k, segs in runs:
        for g, seg in segs:
            n = _segment_rate(seg)
            if n is None or len(seg) < SEGMENT_MIN:
                continue
            if gogc == "infer" and (bounds := infer.segment_bounds(seg)):
                ranges[g].append(bounds)
            if g is not None and not GOGC_RANGE[0] <= g <= GOGC_RANGE[1]:
                notes.append(
                    f"run {k + 1}: {len(seg)} cycles whose goals give GOGC={g:g}, outside "
                    f"{GOGC_RANGE[0]:g}-{GOGC_RANGE[1]:,.0f}: left out (a log mixing processes, "
                    "or a memory limit holding the goal; give --gogc)"
                )
                continue
            for s in seg:
                s.update(run=k, n=n, alloc=n * s["per_cycle"], w=1 / n)
                s["setting"] = (g, memory_limit)
            samples += seg
    if not samples:
        raise UsageError(
            f"{source}: no run has {SEGMENT_MIN} or more unforced GC cycles at a usable "
            + (f"GOGC ({notes[-1]})" if notes else "GOGC: cannot model GOGC")
        )
    kept = {s["setting"][0] for s in samples}
    notes += infer.wide_notes({g: r for g, r in ranges.items() if g in kept})
    obs = Observation(samples, statistics.median(s["procs"] for s in samples), source, notes=notes)
    _gctrace_provenance(obs, gogc)
    return obs


def _gctrace_provenance(obs: Observation, gogc: Any) -> None:
    n, runs = len(obs.samples), obs.runs
    label = f"{obs.source} ({n} cycles, {runs} run{'s' if runs != 1 else ''})"
    for k in ("cycles", "allocation", "marked heap", "mark-time allocation", "GC CPU"):
        obs.provenance[k] = label
    for k in ("mark time", "mutator CPU", "GOMAXPROCS", "roots"):
        obs.provenance[k] = label
    obs.provenance["GOGC"] = (
        "given" if gogc != "infer" else f"inferred from {n} cycles' heap goals (give --gogc)"
    )
    if not obs.saturated():
        obs.provenance["mutator CPU"] = (
            f"{label}: the CPU the GC workers leave while marking (too much when Ps "
            "idle: give the process CPU with --process-cpu, or Prometheus beside the log)"
        )
        if (pauses := obs.mean("pause") / obs.mean("cost")) >= PAUSE_NOTE:  # module rules
            obs.provenance["GC CPU"] = f"{label}: pauses {pauses:.0%} of it, at their " + (
                "clock, one P; where Ps idle the runtime counts less (the clock holds the restart)"
            )
    obs.provenance["memory limit"] = "none (assumed; give --current-limit)"
    obs.provenance["peak RSS"] = "not in gctrace: peak memory taken as 1.4 x the heap goal"


def with_process_cpu(
    obs: Observation, cores: float, how: str = "given", setting: Setting | None = None
) -> Observation:
    """The observation with the process's CPU at a setting (the current one unless
    given) observed elsewhere: the mutator's CPU there is that less the GC's
    (gctrace shows the GC's CPU, not the rest)."""
    if not (cores > 0 and math.isfinite(cores)):
        raise UsageError(f"process CPU must be a positive number of cores, got {cores}")
    at = obs.current if setting is None else setting
    for s in obs.samples:
        if s["setting"] == at:
            s["busy"] = cores
    bound_gc_cpu(obs, how)
    for s in obs.samples:
        if s["setting"] == at:
            s["mutator"] = max(cores - s["n"] * s["cost"], 0.0)
    obs.provenance["mutator CPU"] = f"{how} (process CPU {cores:g} cores less the GC's)"
    return obs


def bound_gc_cpu(obs: Observation, how: str) -> None:
    """At each setting whose samples carry the process's CPU (``busy``), the
    GC's cores (mean rate times mean GC CPU per cycle) at most it: above, the
    GC CPU figures scaled down to it and a note (module rules)."""
    for st, ss in obs.settings.items():
        if not all(math.isfinite(s.get("busy", math.nan)) for s in ss):
            continue
        cores, gc = obs.mean("busy", ss), obs.mean("n", ss) * obs.mean("cost", ss)
        if gc <= cores * (1 + 1e-9):
            continue
        for s in ss:
            for key in {"cost", "work", "background", "assist", "idle_mark", "pause"} & set(s):
                s[key] *= cores / gc
            if "gc_num" in s:  # a gctrace cycle's cons/mark anew (cycle_sample)
                x, busy = s["procs"] * s["mark_s"], s["background"] + s["assist"]
                s["cons_mark"] = cons_mark(
                    s["mark_alloc"], s["marked"] + s["roots"], s["work"] / x, busy / x
                )
        obs.notes.append(
            f"{setting_label(st)}: gctrace's GC CPU, {gc:.2f} cores, is more than the "
            f"process's CPU there ({cores:.2f} cores, {how}): taken as {cores:.2f}; the "
            f"{gc - cores:.2f} cores above it are time the process did not run (stopped, "
            "descheduled or throttled) that the runtime's clock counted as GC work, or "
            "the two sources cover different windows"
        )


def with_peak_rss(obs: Observation, peak: float, how: str = "given") -> Observation:
    """The observation with the peak RSS seen at the current setting (a container's)."""
    if not (peak > 0 and math.isfinite(peak)):
        raise UsageError(f"peak RSS must be a positive size, got {peak}")
    obs.peak_rss[obs.current] = [float(peak)]  # type: ignore[index]
    obs.provenance["peak RSS"] = how
    return obs


def combine(trace: Observation, metrics: Observation) -> Observation:
    """gctrace for the per-cycle figures, their pauses as Prometheus's classes
    count them where it has the class (``pauses``); Prometheus, per setting, for the CPU
    the process used (busy, else ``process_cpu_seconds_total``; the mutator's is
    that less gctrace's GC) and the peak RSS (each input says its source).
    An instance whose /metrics show one setting throughout has its cycles
    labelled with it (the exported setting beats the one inferred from
    goals); else, for a GOGC Prometheus reports, its limit is taken."""
    by_setting = metrics.settings
    limits = {g: m for g, m in by_setting}
    own: dict[Any, set] = {}
    for x in metrics.samples:
        if x.get("gogc_exported", True):  # a GOGC assumed for a missing metric labels nothing
            own.setdefault(x.get("instance"), set()).add(x["setting"])
    relabelled = False
    inferred = set()  # the GOGCs still inferred from gctrace's goals
    for s in trace.samples:
        g, m = s["setting"]
        one = own.get(s.get("instance"), set())
        if len(one) == 1:  # the instance's setting as /metrics reports it
            s["setting"] = next(iter(one))
            relabelled = True
        else:
            inferred.add(g)
            if m is None and g in limits:
                s["setting"] = (g, limits[g])
        got = by_setting.get(s["setting"]) or []
        # busy, else the OS's count (client_golang's defaults: no idle class)
        if cpu := [k for k in ("busy", "busy_all") if any(math.isfinite(x[k]) for x in got)]:
            s["busy"] = metrics.mean(cpu[0], got)
    prov = dict(trace.provenance)
    if scaled := pauses.from_classes(trace.samples, by_setting):
        prov["GC CPU"] = f"{prov.get('GC CPU', trace.source)}; pauses as {metrics.source}'s " + (
            "classes count them: " + ", ".join(f"{setting_label(k)} x{f:.2f}" for k, f in scaled)
        )
    src = metrics.provenance.get("mutator CPU", metrics.source)
    prov["mutator CPU"] = f"{src}: the process's CPU less gctrace's GC"
    prov["peak RSS"] = metrics.provenance.get("peak RSS", prov.get("peak RSS", ""))
    prov["memory limit"] = metrics.provenance.get("memory limit", prov.get("memory limit", ""))
    if relabelled:
        prov["GOGC"] = metrics.provenance.get("GOGC", prov.get("GOGC", ""))
    for key in ("rss_per_goal", "non_heap", "runtime_non_heap"):
        vals = [x[key] for x in metrics.samples if math.isfinite(x.get(key, math.nan))]
        if vals:
            for s in trace.samples:
                s[key] = max(vals)
    out = Observation(
        trace.samples,
        trace.procs,
        f"{trace.source}+{metrics.source}",
        prov,
        [n for n in trace.notes if infer.still_inferred(n, inferred)] + metrics.notes,
        metrics.peak_rss or trace.peak_rss,
        None,
        metrics.container or trace.container,
    )
    bound_gc_cpu(out, metrics.source)
    for s in out.samples:
        if math.isfinite(s.get("busy", math.nan)):
            s["mutator"] = max(s["busy"] - s["n"] * s["cost"], 0.0)
    return out
