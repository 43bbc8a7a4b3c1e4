"""The main job (``make demo``): a live fleet, profiled, joined with its GC metrics.

It lives beside the fleet it drives (``tests/fleet``, ``tests/support/fleet_harness.py``)
rather than in the package, whose users have no fleet: run it as
``python tests/support/fleet_demo.py`` (tests/ is then on the import path).

What it does, in order:

1. Builds the demo fleet (``tests/fleet``: the notesd service and the
   loadgen load generator) with ``tests/support/fleet_harness.py`` (cached by source hash).
2. Starts four notesd instances on 127.0.0.1: versions v1 and v2 (v2 plants
   about +30% CPU in ``main.scoreNote``) times instances a and b, with GOGC 50
   (a) and 200 (b), GOMAXPROCS=1 each (as a container of one CPU sets it: with
   Go's default, eight Ps of four processes on two CPUs keep goroutines
   "running" on threads the kernel has set aside, the runtime preempts them,
   and the CPU profiles book 28% of their samples to ``runtime.asyncPreempt``,
   against 14% with one P each, on the same busy machine),
   ``GODEBUG=gctrace=1`` to one log per instance, CPU profiles at
   ``CPU_PROFILE_HZ`` samples per second (notesd ``-cpu-profile-hz``; 2.5
   times pprof's 100, for the samples a busy machine leaves the fleet, and no
   more than the kernel's timer delivers; they hold about 71% of the CPU the
   processes use, see ``CPU_PROFILE_HZ``), and
   ``/debug/pprof/`` behind a bearer token. The token comes from
   ``$PYPROFLAB_DEMO_PPROF_TOKEN`` (a random one when unset); collect reads the
   header from ``$PYPROFLAB_DEMO_AUTH`` and writes it nowhere.
3. Drives load at all four, round robin: a warm-up whose rate ramps up, then a
   steady rate (steady, so that profiles taken at different moments measure
   the same work and can be compared as samples). ``collect`` then runs
   windows one after the other, each a CPU profile of ``--cpu-seconds`` plus
   allocs, mutex and block deltas over the same window, ``/metrics`` scraped
   every 2 s: at least ``--windows`` of them, and more until each version's
   CPU profiles hold ``--min-samples`` CPU samples or ``--max-seconds`` of
   load have passed. On a busy machine the fleet gets less CPU, its profiles
   fewer samples, and a fixed number of windows would leave a +30% change
   within the noise of a few hundred samples; a count of samples is known
   before any comparison, so stopping on it biases nothing. Heap and goroutine
   snapshots are taken at the end; then the load stops.
4. Stops the fleet, reads the gctrace logs into ``gc_cycles`` (times = each
   process's start + the runtime's ``@seconds``), and prints a summary of this
   run's profiles: the top CPU functions fleet-wide, the GC share per instance
   (profile view vs runtime view; over the windowed profiles, since the heap
   and goroutine snapshots are instants with no scrape in them) and the v1 vs
   v2 headline for ``main.scoreNote`` from ``analyses.regressions``: its share
   of each side's CPU, cum first, the relative change with each row's own
   (unadjusted) interval, its FCR interval when selected, and its q-value. Cum
   is the plant's measure: on a busy machine, a CPU-profiling signal that
   arrives with a pending preemption signal is booked to
   ``runtime.asyncPreempt``, called from the function it interrupted, so up
   to half of the function's flat samples move to that callee; cum keeps them.

Rules:

- Everything lands in the store given by ``--db`` (default ``./pyproflab.duckdb``),
  raw profiles in ``<workdir>/archive`` (default ``.demo``), gctrace logs and
  the PID file in ``<workdir>/run-<time>/``. A re-run appends its new profiles.
- Every process it starts is listed in ``<run dir>/pids`` as soon as it exists
  (``notesd PID INSTANCE`` / ``loadgen PID``), bounded in time by itself
  (notesd's ``-max-lifetime``, loadgen's duration), and stopped by its PID in a
  ``finally``: on success, on an error and on Ctrl-C (SIGINT) or SIGTERM at any
  moment. Further signals are ignored while it stops them.
- Exit codes: 0 done; 1 the fleet failed or nothing was collected; 2 a usage
  error; 130 interrupted. Errors are one line, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from pyproflab.errors import ProflabError

REPO = Path(__file__).resolve().parents[2]

SERVICE = "notesd"
TOKEN_ENV = "PYPROFLAB_DEMO_PPROF_TOKEN"  # the bearer token, if the user sets one
AUTH_ENV = "PYPROFLAB_DEMO_AUTH"  # the whole Authorization value collect sends
# (version, instance suffix, GOGC): two versions x two GOGC settings.
INSTANCES: tuple[tuple[str, str, int], ...] = (
    ("v1", "a", 50),
    ("v1", "b", 200),
    ("v2", "a", 50),
    ("v2", "b", 200),
)
PROFILE_TYPES = ("cpu", "heap", "allocs", "mutex", "block", "goroutine")
WINDOWED_TYPES = ("cpu", "allocs", "mutex", "block")  # taken over the whole window
SNAPSHOT_TYPES = ("heap", "goroutine")  # instants, taken once at the end
METRICS_INTERVAL = 2.0
WARMUP_SECONDS = 4.0  # load, ramping up, before the first collection window opens
# Requests/s over the fleet: ramped from RATE_START during the warm-up, then
# RATE. Four instances at 700/s use about 1.3 of this machine's 2 cores: a
# saturated machine would share CPU between them and hide v2's extra work.
RATE_START, RATE = 300.0, 700.0
# Each window's fetches take about this much longer than the window itself.
WINDOW_OVERHEAD_SECONDS = 3.0
# The longest -duration loadgen accepts (tests/fleet/cmd/loadgen): 2h.
LOADGEN_MAX_SECONDS = 7200.0
# CPU samples per second of each instance's profiles (notesd -cpu-profile-hz;
# pprof's default is 100): on a busy machine the fleet gets little CPU, and
# samples, not the spread between profiles, bounded the comparison (see
# MIN_SAMPLES). No more than the kernel's timer delivers: Go's per-thread CPU
# timer fires at most once a kernel tick, 250 a second here (a 10 s CPU burner
# at GOMAXPROCS 1: 250 Hz recorded 9.99 s of 10.09 s of CPU, 333 Hz 7.50 s, 500
# Hz 5.00 s, 1000 Hz 2.50 s), so a higher rate gives no more samples and books
# each at too little CPU: at 500 Hz the demo's profiles held half the CPU the
# processes used (v1-a: 43.7 s in 220.7 s of windows, process_cpu_seconds 0.43
# cores). Nor are all of 250 delivered: the timer is checked only at a tick while
# the thread runs, so threads running in bursts shorter than a tick lose samples.
# The demo run back to back at 100 and 250 Hz (helper-74, same settings, matched
# windows): its profiles held 92 % and 71 % of process_cpu_seconds_total, so
# pyproflab's CPU coverage note (analyses/cpu_coverage.py) shows on its store.
# 250 Hz still gives 1.9 times the samples 100 Hz gives from the same CPU (2.5 x
# 71 / 92), which is what the comparison needs; shares compare, cores read low.
CPU_PROFILE_HZ = 250
# CPU samples per version before the windows stop (see the module docstring).
# At 100 Hz and 8,000 samples, 10 runs beside two busy-looping neighbours found
# the plant (cum) in 6 of 9: the smallest change found with 80% power was about
# +18% of main.scoreNote's share, and a +30% CPU plant in a function with a
# share s moves its share by 1.3 / (1 + 0.3 s) - 1, +20% at s = 0.29, so
# about one run in five missed. The spread between profiles was near sampling
# noise (Pearson X^2/df 0.6 to 1.5): more samples give the test more power,
# 40,000 at 250 Hz taking 2.5 times the minutes 8,000 took at 100 Hz (at the
# 500 Hz asked before, the kernel delivered 250 as well).
MIN_SAMPLES = 40000
TOP_NODES = 12


def load_harness() -> ModuleType:
    """``tests/support/fleet_harness.py``: the fleet the demo drives, beside this file."""
    from support import fleet_harness

    return fleet_harness


# --- the processes ------------------------------------------------------------------


@dataclass
class Processes:
    """What the demo started, for the ``finally`` that stops it all."""

    pid_file: Path
    instances: list[Any] = field(default_factory=list)  # fleet_harness.FleetInstance
    loads: list[Any] = field(default_factory=list)  # fleet_harness.LoadRun

    def note(self, kind: str, pid: int, name: str = "") -> None:
        """Record a PID the moment the process exists (tests read this file)."""
        with open(self.pid_file, "a") as f:
            f.write(f"{kind} {pid} {name}".rstrip() + "\n")

    def stop(self, harness: ModuleType) -> None:
        """Stop everything by PID: loadgen first (it talks to the fleet), then
        SIGTERM to every instance at once, SIGKILL after 5 s, reap."""
        for run in self.loads:
            with contextlib.suppress(Exception):
                run.stop()
        with contextlib.suppress(Exception):
            harness.stop_instances(self.instances)
        for inst in self.instances:  # whatever stop_instances could not finish
            with contextlib.suppress(Exception):
                inst.stop()


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored inside (a second Ctrl-C must not cut the cleanup short)."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back inside, then raised as ``KeyboardInterrupt`` on
    leaving. Starting a process and noting its PID go inside: an interrupt that lands
    in between would otherwise leave a process nobody stops (Popen has spawned it but
    not yet returned it)."""
    caught: list[signal.Signals] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signal.Signals(signum))

    old = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    # A signal this process was started ignoring stays ignored.
    if any(old[s] is not signal.SIG_IGN for s in caught):
        raise KeyboardInterrupt


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the same cleanup path as Ctrl-C


# --- the run ------------------------------------------------------------------------


class Demo:
    """One run of the demo (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.db = Path(args.db)
        workdir = Path(args.workdir).resolve()
        self.archive = workdir / "archive"  # shared by the runs: content-addressed
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        self.run_dir = workdir / f"run-{stamp}"
        self.quiet = args.quiet
        self.t0 = time.monotonic()

    def say(self, text: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.t0:5.1f}s] {text}", flush=True)

    def run(self) -> int:
        from pyproflab.lab import Lab

        harness = load_harness()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        procs = Processes(self.run_dir / "pids")
        procs.pid_file.touch()
        self.say(f"work folder {self.run_dir}")
        token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(18)
        os.environ[AUTH_ENV] = f"Bearer {token}"
        try:
            self.say("building the fleet (tests/fleet; cached after the first time)")
            try:
                bins = harness.build_fleet()
            except harness.FleetError as e:
                print(f"pyproflab demo: error: {e}", file=sys.stderr)
                return 1
            with Lab.open(self.db) as lab:
                self.start_fleet(harness, bins, procs, token)
                reports = self.load_and_collect(harness, bins, procs, lab)
                with signals_ignored():
                    procs.stop(harness)
                self.ingest_gctrace(lab, procs.instances)
                fetches = [f for r in reports for f in r.fetches]
                ids = [f.profile_id for f in fetches if f.profile_id is not None]
                if not any(f.ok and f.profile_type == "cpu" for f in fetches):
                    print("pyproflab demo: error: no CPU profile was collected", file=sys.stderr)
                    return 1
                self.summary(lab, ids)
        finally:
            with signals_ignored():
                procs.stop(harness)
        self.say(f"done in {time.monotonic() - self.t0:.0f} s; every process stopped")
        return 0

    def start_fleet(self, harness: ModuleType, bins: Any, procs: Processes, token: str) -> None:
        """Launch the four instances (each PID noted at once), then await them all."""
        # A service outlives the demo by at most a minute, even if the demo is SIGKILLed.
        lifetime = WARMUP_SECONDS + load_bound(self.args) + 60.0
        for version, suffix, gogc in INSTANCES:
            name = f"{version}-{suffix}"
            inst = harness.FleetInstance(bins.notesd, workdir=self.run_dir)
            procs.instances.append(inst)
            with signals_deferred():
                inst.launch(
                    version,
                    name,
                    gogc=gogc,
                    token=token,
                    gctrace_path=self.run_dir / f"{name}.gctrace",
                    max_lifetime=lifetime,
                    gomaxprocs=1,
                    extra_args=[f"-cpu-profile-hz={CPU_PROFILE_HZ}"],
                )
                procs.note("notesd", inst.pid, name)
        for inst in procs.instances:
            inst.wait_ready(30.0)
            self.say(f"{inst.instance}: {inst.base_url} pid {inst.pid} GOGC={inst.gogc}")

    def load_and_collect(
        self, harness: ModuleType, bins: Any, procs: Processes, lab: Any
    ) -> list[Any]:
        """Warm up, then collect windows under steady load until the CPU samples
        suffice (see the module docstring); the collect reports, one per window,
        the snapshots' last."""
        from pyproflab.sources.targets import Target

        a = self.args
        warmup = self.start_load(harness, bins, procs, WARMUP_SECONDS, RATE_START, RATE)
        self.say(f"warm-up: {RATE_START:.0f} -> {RATE:.0f} requests/s for {WARMUP_SECONDS:g} s")
        self.finish_load(harness, warmup, "warm-up")
        # The load runs until the windows are done (then it is stopped), bounded by
        # itself well past --max-seconds: the minimum of windows is always taken.
        run = self.start_load(harness, bins, procs, load_bound(a), RATE, RATE)
        self.say(f"load: {RATE:.0f} requests/s (loadgen pid {run.pid})")
        targets = [
            Target(SERVICE, inst.version, inst.instance, inst.base_url, auth_env=AUTH_ENV)
            for inst in procs.instances
        ]
        self.archive.mkdir(parents=True, exist_ok=True)
        reports: list[Any] = []
        # A window is started only while it can end within the load.
        last_start = time.monotonic() + a.max_seconds - a.cpu_seconds - WINDOW_OVERHEAD_SECONDS
        while True:
            self.say(
                f"window {len(reports) + 1}: {', '.join(WINDOWED_TYPES)} from {len(targets)} "
                f"instances, CPU over {a.cpu_seconds} s, /metrics every {METRICS_INTERVAL:g} s"
            )
            reports.append(self.collect_window(lab, targets, a.cpu_seconds, WINDOWED_TYPES))
            if run.proc.poll() is not None:
                # Windows without load compare nothing: stop, saying why (its exit line).
                run.wait()
                raise harness.FleetError("loadgen ended before the collection windows did")
            counts = cpu_samples(
                lab, [f.profile_id for r in reports for f in r.fetches if f.profile_id is not None]
            )
            self.say("CPU samples so far: " + ", ".join(f"{v} {n}" for v, n in counts.items()))
            if len(reports) < a.windows:
                continue
            if min(counts.get(v, 0) for v in ("v1", "v2")) >= a.min_samples:
                break
            if time.monotonic() > last_start:
                self.say(
                    f"--max-seconds {a.max_seconds:g} reached before {a.min_samples} CPU "
                    "samples per version: the comparison has less to go on"
                )
                break
        self.say(f"snapshots: {', '.join(SNAPSHOT_TYPES)} from {len(targets)} instances")
        reports.append(self.collect_window(lab, targets, 1, SNAPSHOT_TYPES, metrics=False))
        self.finish_load(harness, run, "loadgen", stop=True)
        return reports

    def collect_window(
        self, lab: Any, targets: list, seconds: int, types: tuple, metrics: bool = True
    ) -> Any:
        from pyproflab.collect import collect

        report = collect(
            lab.store,
            targets,
            seconds=seconds,
            types=types,
            archive_dir=self.archive,
            metrics_interval=METRICS_INTERVAL if metrics else None,
        )
        self.say(report.summary())
        for line in report.errors():
            print(f"  {line}", file=sys.stderr)
        return report

    def start_load(
        self,
        harness: ModuleType,
        bins: Any,
        procs: Processes,
        seconds: float,
        rate_start: float,
        rate_end: float,
    ) -> Any:
        with signals_deferred():
            run = harness.start_load(
                procs.instances,
                duration=seconds,
                rate_start=rate_start,
                rate_end=rate_end,
                max_requests=int(max(rate_start, rate_end) * seconds) + 1000,
                concurrency=16,
                loadgen=bins.loadgen,
            )
            procs.loads.append(run)
            procs.note("loadgen", run.pid)
        return run

    def finish_load(self, harness: ModuleType, run: Any, what: str, stop: bool = False) -> None:
        """Wait for a loadgen to end (it is bounded by its duration; ``stop``: ask it
        to end now, SIGTERM, on which it prints its summary) and say how it went."""
        try:
            if stop:
                run.proc.send_signal(signal.SIGTERM)
            load = run.wait()
            self.say(
                f"{what}: {load.get('requests')} requests, {load.get('errors')} errors, "
                f"p99 {load.get('p99_ms', 0):.1f} ms, {load.get('rate_avg', 0):.0f}/s on average"
            )
        except harness.FleetError as e:
            print(f"  {what}: {e}", file=sys.stderr)

    def ingest_gctrace(self, lab: Any, instances: list[Any]) -> None:
        """One gc_cycles row per gctrace line; time = process start + @seconds."""
        from pyproflab.errors import MetricsError
        from pyproflab.sources.gctrace import read_gctrace
        from pyproflab.store.metrics import ingest_gc_cycles

        for inst in instances:
            if inst.stderr is None or not inst.stderr.exists():
                continue
            errors: list[MetricsError] = []
            rows = read_gctrace(
                inst.stderr,
                process_start=datetime.fromtimestamp(inst.started_at, UTC),
                errors=errors,
            )
            added = ingest_gc_cycles(
                lab.store,
                rows,
                service=SERVICE,
                version=inst.version,
                instance=inst.instance,
                source=str(inst.stderr),
            )
            lost = f", {len(errors)} split lines skipped" if errors else ""
            self.say(f"{inst.instance}: {added} GC cycles from gctrace{lost}")

    # --- the summary ----------------------------------------------------------------

    def summary(self, lab: Any, ids: list[int]) -> None:
        from pyproflab.reports import render
        from pyproflab.store.select import Selection

        def of_types(types: tuple[str, ...]) -> list[int]:
            sel = Selection(profile_type=list(types), profile_ids=ids)
            return lab.profiles(sel).column("profile_id").to_pylist()

        cpu_ids = of_types(("cpu",))
        # The GC join over the profiles taken across the whole window; the heap and
        # goroutine snapshots are instants at its end, with no scrape inside them.
        windowed_ids = of_types(WINDOWED_TYPES)
        print(f"\nstore {self.db.resolve()}: this run added {len(ids)} profiles")

        print(f"\n== Top CPU functions, fleet-wide ({len(cpu_ids)} CPU profiles) ==")
        top = lab.top(Selection(profile_ids=cpu_ids), nodecount=TOP_NODES)
        print(render(top, "text").rstrip())

        print("\n== GC share per instance: profile view vs runtime view ==")
        print(gc_table(lab.gc(Selection(profile_ids=windowed_ids))))

        print("\n== v1 vs v2 headline ==")
        print(headline(lab, cpu_ids))


def load_bound(args: argparse.Namespace) -> float:
    """Seconds the steady load may run at most (it is stopped when the windows end):
    past --max-seconds by the time the minimum of windows takes on a starved machine,
    capped at loadgen's limit (2 h: an hour past the longest --max-seconds)."""
    slack = 10 * args.windows * (args.cpu_seconds + WINDOW_OVERHEAD_SECONDS)
    return min(args.max_seconds + slack, LOADGEN_MAX_SECONDS)


def cpu_samples(lab: Any, ids: list[int]) -> dict[str, int]:
    """CPU samples per version in the CPU profiles among ``ids``."""
    if not ids:
        return {}
    rows = lab.sql(
        "SELECT p.version, sum(v.value) AS n FROM sample_values v JOIN profiles p USING "
        "(profile_id) WHERE p.profile_type = 'cpu' AND v.sample_type = 'samples' "
        "AND list_contains(?, p.profile_id) GROUP BY ALL ORDER BY 1",
        [ids],
    ).to_pylist()
    return {r["version"]: int(r["n"]) for r in rows}


def _pct(v: float | None) -> str:
    from pyproflab.reports.formatting import pct

    return pct(v, missing="-")


def gc_table(result: Any) -> str:
    """The per-instance GC table: the profile's view (GC categories of its CPU
    stacks) beside the runtime's (go_cpu_classes), and the cycles behind them."""
    from pyproflab.reports.formatting import grid

    head = [
        "version",
        "instance",
        "GOGC",
        "GC/min",
        "gctrace cycles",
        "heap goal",
        "profile view",
        "profile mark",
        "runtime busy",
        "runtime all",
    ]
    rows = []
    for r in result.instances.to_pylist():
        goal = r["heap_goal_mean_bytes"]
        rows.append(
            [
                str(r["version"] or "-"),
                str(r["instance"] or "-"),
                "-" if r["gogc_percent"] is None else f"{r['gogc_percent']:.0f}",
                "-" if r["gc_cycles_per_min"] is None else f"{r['gc_cycles_per_min']:.0f}",
                "-" if r["gctrace_cycles"] is None else str(r["gctrace_cycles"]),
                "-" if goal is None else f"{goal / 2**20:.1f} MiB",
                _pct(r["profile_gc_share"]),
                _pct(r["profile_gc_mark_share"]),
                _pct(r["gc_cpu_fraction_busy"]),
                _pct(r["gc_cpu_fraction"]),
            ]
        )
    legend = [
        "",
        "profile view: every GC category of the CPU stacks (mark, assists, malloc,",
        "  write barriers, sweeping, scavenger) / all CPU samples",
        "profile mark: only what the runtime books as GC (mark workers, assists, STW)",
        "runtime busy: go_cpu_classes gc / (total - idle), the one to set beside profile mark;",
        "  runtime all: gc / total (idle included)",
    ]
    notes = [f"note: {n}" for n in result.notes]
    table = grid(head, rows, "ll" + "r" * (len(head) - 2))
    return "\n".join([*table, *legend, *notes])


def _rel(v: float | None, digits: int = 0) -> str:
    """A signed percentage; "-" where it is undefined (a base of 0: never "nan")."""
    return "-" if v is None or not math.isfinite(v) else f"{v:+.{digits}%}"


def _side_change(row: dict[str, Any], m: str, r: Any) -> str:
    """``cum   22.9% -> 30.3% of each side's CPU, +32.3%; unadjusted 95% interval
    +13% .. +55%; FCR 99.4% interval +9% .. +61%; q 0.012, significant at FDR 5%``."""
    text = (
        f"{m:<4}  {_pct(row[f'{m}_share_base'])} -> {_pct(row[f'{m}_share_new'])} "
        f"of each side's CPU, {_rel(row[f'{m}_rel'], 1)}"
    )
    lo, hi = row[f"{m}_rel_lo"], row[f"{m}_rel_hi"]
    if _rel(lo) != "-" and _rel(hi) != "-":
        text += f"; unadjusted {r.confidence:.0%} interval {_rel(lo)} .. {_rel(hi)}"
    flo, fhi = row[f"{m}_rel_fcr_lo"], row[f"{m}_rel_fcr_hi"]
    if row[f"{m}_significant"] and _rel(flo) != "-" and _rel(fhi) != "-":
        text += f"; FCR {r.fcr_confidence:.1%} interval {_rel(flo)} .. {_rel(fhi)}"
    q = row[f"{m}_q"]
    if q is not None and math.isfinite(q):
        verdict = "significant" if row[f"{m}_significant"] else "not significant"
        text += f"; q {q:.2g}, {verdict} at FDR {r.fdr:.0%}"
    return text


def headline(lab: Any, cpu_ids: list[int]) -> str:
    """The planted function's share of each side's CPU, from ``regressions``, cum
    first (the plant's measure, see the module docstring): the relative change
    with its unadjusted interval, its FCR interval when selected, its q-value."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    planted = load_harness().PLANTED_FUNCTION
    sides = {
        v: lab.profiles(Selection(version=v, profile_ids=cpu_ids)).column("profile_id").to_pylist()
        for v in ("v1", "v2")
    }
    if not sides["v1"] or not sides["v2"]:
        return "no CPU profiles of both versions: no headline"
    r = regressions(
        lab.store, Selection(profile_ids=sides["v1"]), Selection(profile_ids=sides["v2"])
    )
    rows = r.rows.to_pylist()
    mine = next((x for x in rows if x["name"] == planted), None)
    if mine is None:
        return f"{planted}: not in either side's CPU profiles"
    samples = cpu_samples(lab, cpu_ids)
    lines = [
        f"{planted}, v1 -> v2 ({r.n_base} and {r.n_new} CPU profiles, {samples.get('v1', 0)} "
        f"and {samples.get('v2', 0)} CPU samples; the plant: +30% CPU in the function, "
        "13 counting passes instead of 10)"
    ]
    for m in ("cum", "flat"):
        lines.append("  " + _side_change(mine, m, r))
    lines.append(
        "  (cum holds the samples booked to runtime.asyncPreempt inside the function: on a "
        "busy machine a profiling signal that arrives with a preemption signal lands there)"
    )
    if r.fcr_confidence is None:
        lines.append("  (no row is significant: no FCR interval)")
    lines.append(f"  rank {mine['rank']} of {len(rows)} rows by evidence; the first 3:")
    for x in rows[:3]:
        m = x["evidence_metric"]
        lines.append(
            f"    {x['rank']}. {x['name']}: {m} {_pct(x[f'{m}_share_base'])} -> "
            f"{_pct(x[f'{m}_share_new'])} ({_rel(x[f'{m}_rel'])})"
            + (", significant" if x[f"{m}_significant"] else "")
        )
    if r.notes:
        lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)


# --- the command --------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python tests/support/fleet_demo.py",
        description="Run the demo fleet, collect its profiles and GC metrics, print a summary.",
    )
    p.add_argument("--db", default="pyproflab.duckdb", help="the store (default %(default)s)")
    p.add_argument("--workdir", default=".demo", help="logs and PID files (default %(default)s)")
    p.add_argument("--cpu-seconds", type=int, default=20, help="length of each window (20)")
    p.add_argument("--windows", type=int, default=3, help="collection windows at least (3)")
    p.add_argument(
        "--min-samples",
        type=int,
        default=MIN_SAMPLES,
        help=f"more windows until each version's CPU profiles hold this many samples "
        f"({MIN_SAMPLES})",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=420.0,
        help="the most seconds of steady load, windows included, however few the samples (420)",
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args(argv)
    if args.cpu_seconds < 1 or args.windows < 1 or args.min_samples < 0:
        p.error("--cpu-seconds and --windows must be at least 1, --min-samples at least 0")
    needed = args.windows * (args.cpu_seconds + WINDOW_OVERHEAD_SECONDS)
    if not needed <= args.max_seconds <= 3600:
        p.error(
            f"--max-seconds must be at most 3600 and cover every window: at least {needed:g} "
            f"for {args.windows} windows of {args.cpu_seconds} s"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    old_term = signal.signal(signal.SIGTERM, _sigterm)
    try:
        return Demo(args).run()
    except KeyboardInterrupt:
        print("pyproflab demo: interrupted; the processes it started are stopped", file=sys.stderr)
        return 130
    except ProflabError as e:
        print(f"pyproflab demo: error: {e}", file=sys.stderr)
        return e.exit_code
    except Exception as e:  # e.g. fleet_harness.FleetError: one line, no traceback
        print(f"pyproflab demo: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, old_term)


if __name__ == "__main__":
    # Run as a file: tests/ on sys.path, for the support.* imports.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
