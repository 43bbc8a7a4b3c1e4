"""Calibrate the GOGC model on the demo fleet and check its predictions (not a timed test).

Steps: build notesd and loadgen (tests/fleet), run notesd at GOGC=100 under a
constant load, measure from /metrics over the window after a warm-up
(cycles/min from go_gc_cycles_total, GC CPU share = go_cpu_classes gc /
(total − idle), heap goal and live means, allocation rate) and from gctrace
on stderr (roots, mark-time allocation). Calibrate ``GcInputs`` on that run,
then run 50, 200 and 400 under the same load, and print predicted vs
measured cycles/min, GC CPU share and heap goal with their errors, for the
plain and the improved model.

Bounds: loopback only; each run is warm-up + window seconds (default 5 + 20)
with a request cap; notesd has -max-lifetime; every process is stopped by
its own PID (Popen handles), also on errors.

    python -m bench.bench_gogc [--window 20] [--warmup 5] [--rate 400] [--gogc 50,200,400]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "tests" / "fleet"
MiB = float(1 << 20)


@dataclass
class Run:
    """What one run measured over its window."""

    gogc: float
    seconds: float
    cycles_per_min: float
    gc_share: float  # GC CPU over busy process CPU
    gc_cores: float
    busy_cores: float
    heap_goal: float  # mean over the window
    heap_live: float
    alloc_per_sec: float
    requests: int = 0
    classes: str = ""
    gctrace: list[dict] = field(default_factory=list)

    @property
    def roots(self) -> float:
        st = [
            c["stacks_mb"] + c["globals_mb"]
            for c in self.gctrace
            if c["stacks_mb"] is not None and c["globals_mb"] is not None
        ]
        return statistics.mean(st) * MiB if st else 0.0

    @property
    def kappa(self) -> float:
        """Bytes allocated while marking per byte of scan work (gctrace heap end − start)."""
        cyc = [c for c in self.gctrace if not c["forced"]]
        if not cyc:
            return 0.0
        mark = statistics.mean(max(c["heap_end_mb"] - c["heap_start_mb"], 0) for c in cyc)
        scan = statistics.mean(
            c["heap_live_mb"] + (c["stacks_mb"] or 0) + (c["globals_mb"] or 0) for c in cyc
        )
        return mark / scan if scan else 0.0


def build(tmp: Path) -> tuple[Path, Path]:
    go = shutil.which("go")
    if go is None:
        sys.exit("bench_gogc: needs Go on PATH")
    out = []
    for cmd in ("notesd", "loadgen"):
        exe = tmp / cmd
        subprocess.run(
            [go, "build", "-o", str(exe), f"./cmd/{cmd}"], cwd=FLEET, check=True, timeout=600
        )
        out.append(exe)
    return out[0], out[1]


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    from pyproflab.sources.prometheus import parse_exposition

    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:  # loopback only
        text = r.read().decode()
    t = parse_exposition(text, default_time=datetime.now(UTC), source=base)
    out: dict[tuple[str, tuple], float] = {}
    for m, lab, v in zip(
        t.column("metric").to_pylist(),
        t.column("labels").to_pylist(),
        t.column("value").to_pylist(),
        strict=True,
    ):
        out[(m, tuple(sorted(lab)))] = v
    return out


def _get(s: dict, metric: str) -> float:
    return next(v for (m, lab), v in s.items() if m == metric and not lab)


def run_once(
    notesd: Path,
    loadgen: Path,
    gogc: float,
    *,
    warmup: float,
    window: float,
    rate: float,
    concurrency: int,
) -> Run:
    from pyproflab.sources.gctrace import parse_gctrace

    tmp = Path(tempfile.mkdtemp(prefix="gogc-bench-"))
    port_file = tmp / "addr"
    env = dict(os.environ, GOGC=f"{gogc:g}", GODEBUG="gctrace=1")
    env.pop("GOMEMLIMIT", None)
    lifetime = int(warmup + window + 60)
    procs: list[subprocess.Popen] = []
    stderr_lines: list[str] = []
    try:
        srv = subprocess.Popen(
            [
                str(notesd),
                "-addr",
                "127.0.0.1:0",
                "-port-file",
                str(port_file),
                "-max-lifetime",
                f"{lifetime}s",
                "-instance",
                f"bench-gogc-{gogc:g}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(srv)
        reader = threading.Thread(target=lambda: stderr_lines.extend(srv.stderr), daemon=True)
        reader.start()
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or srv.poll() is not None:
                raise RuntimeError(f"notesd did not start: {''.join(stderr_lines)[-500:]}")
            time.sleep(0.05)
        base = f"http://{port_file.read_text().strip()}"
        total = warmup + window + 2
        gen = subprocess.Popen(
            [
                str(loadgen),
                "-targets",
                base,
                "-duration",
                f"{total:.0f}s",
                "-max-requests",
                str(int(rate * total * 1.2) + 100),
                "-rate-start",
                str(rate),
                "-rate-end",
                str(rate),
                "-concurrency",
                str(concurrency),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs.append(gen)
        time.sleep(warmup)
        first = scrape(base)
        t0 = time.monotonic()
        goals, lives = [], []
        while time.monotonic() - t0 < window:
            s = scrape(base)
            goals.append(_get(s, "go_gc_heap_goal_bytes"))
            lives.append(_get(s, "go_gc_heap_live_bytes"))
            time.sleep(1.0)
        last = scrape(base)
        secs = time.monotonic() - t0
        out, _ = gen.communicate(timeout=total + 30)
        m = re.search(r'"requests":\s*(\d+)', out or "")

        def inc(metric: str) -> float:
            return _get(last, metric) - _get(first, metric)

        gc = inc("go_cpu_classes_gc_total_cpu_seconds_total")
        busy = inc("go_cpu_classes_total_cpu_seconds_total") - inc(
            "go_cpu_classes_idle_cpu_seconds_total"
        )
        n_gc_first = _get(first, "go_gc_cycles_total_gc_cycles_total")
        n_gc_last = _get(last, "go_gc_cycles_total_gc_cycles_total")
        run = Run(
            gogc=gogc,
            seconds=secs,
            cycles_per_min=60 * (n_gc_last - n_gc_first) / secs,
            gc_share=gc / busy if busy > 0 else math.nan,
            gc_cores=gc / secs,
            busy_cores=busy / secs,
            heap_goal=statistics.mean(goals),
            heap_live=statistics.mean(lives),
            alloc_per_sec=inc("go_gc_heap_allocs_bytes_total") / secs,
            requests=int(m.group(1)) if m else 0,
            classes=" ".join(
                f"{k}={inc(f'go_cpu_classes_gc_{k}_cpu_seconds_total') / secs:.3f}"
                for k in ("mark_assist", "mark_dedicated", "mark_idle", "pause")
            ),
        )
    finally:
        for p in reversed(procs):  # stop what we started, by PID
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        shutil.rmtree(tmp, ignore_errors=True)
    trace = parse_gctrace(
        [ln for ln in stderr_lines if ln.startswith("gc ")], source="stderr", errors=[]
    )
    # Keep the window's cycles only (by their gc numbers' share of the run: the tail).
    rows = trace.to_pylist()
    n_window = max(int(round(run.cycles_per_min * run.seconds / 60)), 1)
    run.gctrace = rows[-n_window - 1 : -1] if len(rows) > n_window else rows
    return run


def calibrate(run: Run, *, with_kappa: bool):
    """GcInputs measured at the calibration run (one point: cost ∝ scan work)."""
    from pyproflab.analyses.gogc import GcInputs, heap_goal

    roots = run.roots
    per_cycle = run.gc_cores / (run.cycles_per_min / 60)
    inp = GcInputs(
        live_heap_bytes=run.heap_live,
        alloc_bytes_per_sec=run.alloc_per_sec,
        gc_cpu_fixed_seconds=0.0,
        gc_cpu_seconds_per_byte=per_cycle / (run.heap_live + roots),
        non_gc_cpu_cores=run.busy_cores - run.gc_cores,
        roots_bytes=roots,
        gogc=run.gogc,
        mark_alloc_ratio=run.kappa if with_kappa else 0.0,
        source="bench calibration",
    )
    if with_kappa:
        # The unused runway: the modelled distance minus the bytes allocated per cycle.
        dist = heap_goal(inp, run.heap_live, run.gogc, None)[0] - run.heap_live
        inp.cycle_gap_bytes = max(dist - 60 * run.alloc_per_sec / run.cycles_per_min, 0.0)
    return inp


def table(runs: Sequence[Run], inputs, model: str) -> tuple[list[str], dict[str, float]]:
    from pyproflab.analyses.gogc import predict_one

    lines = [
        f"model: {model}",
        f"{'GOGC':>5} {'cyc/min pred':>12} {'meas':>7} {'err':>7}  "
        f"{'GC share pred':>13} {'meas':>7} {'err':>7}  "
        f"{'goal MiB pred':>13} {'meas':>7} {'err':>7}",
    ]
    errs: dict[str, list[float]] = {"cycles": [], "share": [], "goal": []}
    for r in runs:
        p = predict_one(inputs, r.gogc, None, model)
        e = [
            (p["gc_cycles_per_min"] - r.cycles_per_min) / r.cycles_per_min,
            (p["gc_cpu_share"] - r.gc_share) / r.gc_share,
            (p["heap_goal_bytes"] - r.heap_goal) / r.heap_goal,
        ]
        if r.gogc != inputs.gogc:
            for k, v in zip(errs, e, strict=True):
                errs[k].append(abs(v))
        lines.append(
            f"{r.gogc:>5g} {p['gc_cycles_per_min']:>12.1f} {r.cycles_per_min:>7.1f} "
            f"{100 * e[0]:>+6.1f}%  {100 * p['gc_cpu_share']:>12.1f}% "
            f"{100 * r.gc_share:>6.1f}% {100 * e[1]:>+6.1f}%  "
            f"{p['heap_goal_bytes'] / MiB:>13.1f} {r.heap_goal / MiB:>7.1f} "
            f"{100 * e[2]:>+6.1f}%"
        )
    mean = {k: statistics.mean(v) if v else math.nan for k, v in errs.items()}
    lines.append(
        "mean |error| off the calibration point: "
        + ", ".join(f"{k} {100 * v:.1f}%" for k, v in mean.items())
    )
    return lines, mean


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gogc", default="50,200,400", help="GOGC values to check")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=400.0, help="requests/second")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args(argv)
    if not (0 < args.window <= 120 and 0 <= args.warmup <= 60):
        ap.error("keep runs short: window <= 120 s, warm-up <= 60 s")
    with tempfile.TemporaryDirectory(prefix="gogc-bench-bin-") as d:
        notesd, loadgen = build(Path(d))
        opts = dict(
            warmup=args.warmup, window=args.window, rate=args.rate, concurrency=args.concurrency
        )
        runs = [run_once(notesd, loadgen, 100, **opts)]
        for g in (float(x) for x in args.gogc.split(",")):
            runs.append(run_once(notesd, loadgen, g, **opts))
    print("measured:")
    for r in runs:
        print(
            f"  GOGC={r.gogc:g}: {r.requests} requests, {r.cycles_per_min:.1f} GC/min, GC "
            f"{100 * r.gc_share:.1f}% of {r.busy_cores:.2f} busy cores, heap live "
            f"{r.heap_live / MiB:.1f} MiB goal {r.heap_goal / MiB:.1f} MiB, alloc "
            f"{r.alloc_per_sec / MiB:.1f} MiB/s, roots {r.roots / MiB:.1f} MiB, "
            f"mark-time alloc ratio {r.kappa:.3f}, GC CPU by class {r.classes}"
        )
    plain = calibrate(runs[0], with_kappa=False)
    improved = calibrate(runs[0], with_kappa=True)
    for inp, model in ((plain, "plain"), (improved, "improved")):
        lines, _ = table(runs, inp, model)
        print()
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
