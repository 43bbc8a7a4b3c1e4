"""`make bench-gc`: record the GC validation workloads at every GOGC setting.

Workloads (tests/gcbench): the seven of issue 29 (``graph``, ``lru``, ``blob``,
``tiny``, ``service``, ``batch``, ``queue``: see tests/gcbench/workloads.go),
each at its own GOMAXPROCS, plus the two modes of the earlier validation
(``cpu``: flat out; ``rate``: paced to 150 MiB/s, 32 MiB live). Settings: GOGC
25 50 100 200 400 800, GOGC=off with the workload's memory limit and GOGC=400
with the same limit. Each run has GODEBUG=gctrace=1 and writes a Prometheus
snapshot a second; the program reports its peak RSS, its own CPU, the
machine's busy CPU and the time it took to build its live heap.

Each run gets the CPU it asks for, as a pod with a CPU request does: it runs
in a cgroup v1 CPU group of its own (``pyproflab-record``) with
``cpu.shares`` 262144, the kernel's largest, against 1024 for every other
process in the root group, so under contention the scheduler gives the
workload's threads up to all of its GOMAXPROCS cores before anything else on
the machine (needs root and the cgroup v1 CPU controller; without them the
recording stops and says so, as a run that shares the CPU is not the truth
the validation asks for). Take the bench lock around a recording: the
GOMAXPROCS=2 workloads take both cores while they run. Runs are in an order
shuffled within each repetition; each summary still records the other
processes' CPU (``other_cpu_cores``) and the load average before and after,
which show what the group did not shut out (the kernel's own work, interrupts).

``--quota`` records the container case instead: one workload at GOMAXPROCS 2
in a cgroup v1 of its own (``pyproflab-gogc``) with a CPU quota of 0.25 CPU
and a memory limit, first in line for the CPU (``cpu.shares`` as above: the quota
holds it, not the machine), with cAdvisor-style snapshots of the cgroup beside the
runtime's (``container_spec_cpu_quota``, ``container_cpu_cfs_throttled_periods_total``,
``container_spec_memory_limit_bytes`` and the rest; needs root).

Raw runs go to OUT/raw; with --testdata DIR the trimmed copy (gctrace lines
after the warm-up thinned to at most --max-lines in pairs of consecutive
cycles, three snapshots, the summary) is written there too.

    python -m bench.gc_record [--out .bench/gc] [--testdata tests/testdata/gc/work]
        [--reps 9] [--first-rep 1] [--duration 12] [--workloads graph,lru]
        [--settings 100,off@512MiB] [--quota] [--retrim]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GCBENCH = REPO / "tests" / "gcbench"
WARMUP_S = 1.0  # after the live heap is built: the first cycles at the new size
# Cycles after the warm-up left out of the trimmed log: floating garbage takes a
# few cycles to settle (each goal follows the heap the cycle before marked).
SETTLE_CYCLES = 4
MIN_CYCLES, MAX_SECONDS = 14, 100  # a workload runs on until this many cycles, at most this long


@dataclass(frozen=True)
class Workload:
    procs: int
    limit: str  # the memory limit of the off@ and 400@ settings
    args: tuple[str, ...]


WORKLOADS = {
    "graph": Workload(2, "160MiB", ("-workload", "graph")),
    "lru": Workload(1, "224MiB", ("-workload", "lru")),
    "blob": Workload(2, "1536MiB", ("-workload", "blob")),
    "tiny": Workload(2, "48MiB", ("-workload", "tiny")),
    "service": Workload(2, "160MiB", ("-workload", "service")),
    "batch": Workload(1, "64MiB", ("-workload", "batch")),
    "queue": Workload(2, "256MiB", ("-workload", "queue")),
    # The earlier validation's two modes (tests/testdata/gc/bench).
    "cpu": Workload(2, "160MiB", ("-mode", "cpu", "-live", "32")),
    "rate": Workload(2, "160MiB", ("-mode", "rate", "-rate", "150", "-live", "32")),
}
NEW = ("graph", "lru", "blob", "tiny", "service", "batch", "queue")
GOGCS = ("25", "50", "100", "200", "400", "800")
CGROUP = "pyproflab-gogc"  # our own cgroup (the trace helper uses another)
QUOTA_CPU = 0.25
RECORD_CG = Path("/sys/fs/cgroup/cpu") / "pyproflab-record"  # the recorded runs' CPU group
RECORD_SHARES = 262144  # cgroup v1's largest cpu.shares; every root-group task weighs 1024
# Enters the cgroups given as arguments, then runs the command after "--".
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs"; shift; done; shift; exec "$@"'


def settings_of(workload: str) -> list[str]:
    lim = WORKLOADS[workload].limit
    return [*GOGCS, f"off@{lim}", f"400@{lim}"]


def label(setting: str) -> str:
    """``gogc400-lim320MiB`` for ``400@320MiB``; ``gogc100`` for ``100``."""
    g, _, lim = setting.partition("@")
    return f"gogc{g}" + (f"-lim{lim}" if lim else "")


def build(out: Path) -> Path:
    exe = out / "gcbench"
    subprocess.run(["go", "build", "-o", str(exe), "."], cwd=GCBENCH, check=True)
    return exe


def read_summary(path: Path) -> dict[str, float]:
    vals = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition(" ")
        vals[k] = float(v)
    return vals


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_once(
    exe: Path,
    workload: str,
    setting: str,
    run_dir: Path,
    duration: float,
    prefix: tuple[str, ...] = (),
    procs: int | None = None,
) -> dict:
    """One run (under ``prefix``: the CPU group); returns its summary (peak RSS,
    other CPU, load)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    w = WORKLOADS[workload]
    g, _, lim = setting.partition("@")
    env = dict(os.environ, GOGC=g, GODEBUG="gctrace=1", GOMAXPROCS=str(procs or w.procs))
    env.pop("GOMEMLIMIT", None)
    if lim:
        env["GOMEMLIMIT"] = lim
    cmd = [
        *prefix,
        str(exe),
        *w.args,
        "-duration",
        f"{duration}s",
        *(
            ("-min-cycles", str(MIN_CYCLES), "-max-duration", f"{MAX_SECONDS}s")
            if "-workload" in w.args
            else ()
        ),
        "-metrics-dir",
        str(run_dir),
        "-summary",
        str(run_dir / "summary.txt"),
    ]
    load0 = loadavg()
    with open(run_dir / "gctrace.log", "w") as err:
        subprocess.run(cmd, env=env, stderr=err, stdout=subprocess.DEVNULL, check=True, timeout=600)
    with open(run_dir / "summary.txt", "a") as f:
        f.write(f"load_start {load0:.2f}\nload_end {loadavg():.2f}\n")
    return read_summary(run_dir / "summary.txt")


_GC = re.compile(r"^gc (\d+) @([0-9.]+)s")
_WHOLE = re.compile(r" \d+ P$")  # a gctrace line's end


def trim(run_dir: Path, dest: Path, max_lines: int) -> None:
    """Copy a run thinned: gctrace lines from WARMUP_S after the live heap was
    built, less the first SETTLE_CYCLES (at most max_lines, in pairs of
    consecutive cycles, always the first and the last), the snapshots at the
    first kept cycle, in the middle and at
    the end, the summary, and the cgroup snapshots of the container case."""
    dest.mkdir(parents=True, exist_ok=True)
    summ = read_summary(run_dir / "summary.txt")
    built = summ.get("built_seconds", 1.0)
    lines = [
        ln
        for ln in (run_dir / "gctrace.log").read_text().splitlines()
        if (m := _GC.match(ln))
        and float(m.group(2)) >= built + WARMUP_S
        and "(forced)" not in ln
        and _WHOLE.search(ln)  # a run can end while the runtime prints its last line
    ]
    if "built_seconds" in summ:  # the workloads: from where floating garbage has settled
        lines = lines[SETTLE_CYCLES:]
    if len(lines) > max_lines:
        # Pairs of consecutive cycles (a goal is set from the previous cycle's
        # marked heap), spread evenly, plus the last line.
        pairs = max_lines // 2
        step = (len(lines) - 2) / max(pairs - 1, 1)
        keep = sorted({j for i in range(pairs) for j in (round(i * step), round(i * step) + 1)})
        lines = [lines[j] for j in keep if j < len(lines) - 1] + [lines[-1]]
    (dest / "gctrace.log").write_text("".join(ln + "\n" for ln in lines))
    snaps = sorted(run_dir.glob("snap-*.prom"))
    # The new workloads snapshot a second apart from the end of the build (the
    # first kept one at the first kept cycle); the earlier modes from the start.
    first = 2
    if "built_seconds" in summ:
        start = float(_GC.match(lines[0]).group(2)) if lines else built + WARMUP_S  # type: ignore[union-attr]
        first = max(1, math.ceil(start - built))
    idx = {min(first, len(snaps) - 1), (first + len(snaps) - 1) // 2, len(snaps) - 1}
    for i in idx:
        shutil.copy(snaps[i], dest / snaps[i].name)
    for cad in run_dir.glob("cgroup-*.prom"):  # the container case: every one (small)
        shutil.copy(cad, dest / cad.name)
    shutil.copy(run_dir / "summary.txt", dest / "summary.txt")


def retrim(args: argparse.Namespace) -> int:
    """Rewrite the trimmed test data from the raw runs already recorded."""
    raw = Path(args.out) / "raw"
    for run in sorted(raw.glob("*/*/r*")):
        dest = Path(args.testdata) / run.relative_to(raw)
        if dest.exists():
            shutil.rmtree(dest)
        trim(run, dest, args.max_lines)
    return 0


def plan(args: argparse.Namespace) -> list[tuple[int, str, str]]:
    """(rep, workload, setting) in recording order: repetition-major (an
    interrupted recording still holds every setting once), shuffled within a
    repetition with a fixed seed."""
    out = []
    for rep in range(args.first_rep, args.reps + 1):
        one = [
            (rep, w, s)
            for w in args.workloads.split(",")
            for s in (args.settings.split(",") if args.settings else settings_of(w))
        ]
        random.Random(rep).shuffle(one)
        out += one
    return out


def record_group() -> tuple[str, ...]:
    """Create the recording's CPU group; the prefix that runs a command in it."""
    try:
        RECORD_CG.mkdir(exist_ok=True)
        (RECORD_CG / "cpu.shares").write_text(str(RECORD_SHARES))
    except OSError as e:
        raise SystemExit(
            f"gc_record: cannot set up the CPU group {RECORD_CG}: {e} (needs root)"
        ) from None
    return ("sh", "-c", _ENTER, "sh", str(RECORD_CG), "--")


def record(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    exe = build(out)
    prefix = record_group()
    try:
        return _record_all(args, out, exe, prefix)
    finally:
        try:
            RECORD_CG.rmdir()
        except OSError:
            pass


def _record_all(args: argparse.Namespace, out: Path, exe: Path, prefix: tuple[str, ...]) -> int:
    t0 = time.time()
    todo = plan(args)
    for k, (rep, workload, setting) in enumerate(todo, 1):
        rel = Path(workload) / label(setting) / f"r{rep}"
        final = out / "raw" / rel
        if args.resume and (final / "summary.txt").exists():
            continue
        s = run_once(exe, workload, setting, final, args.duration, prefix)
        if args.testdata:
            dest = Path(args.testdata) / rel
            if dest.exists():
                shutil.rmtree(dest)
            trim(final, dest, args.max_lines)
        print(
            f"[{k}/{len(todo)}] {rel}: peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB, "
            f"own CPU {s['own_cpu_seconds']:.1f} s, other CPU {s['other_cpu_cores']:.2f} cores, "
            f"load {s['load_start']:.1f}-{s['load_end']:.1f}, {time.time() - t0:.0f} s elapsed",
            flush=True,
        )
    return 0


# --- the container case -------------------------------------------------------------------

CPU_CG = Path("/sys/fs/cgroup/cpu") / CGROUP
MEM_CG = Path("/sys/fs/cgroup/memory") / CGROUP


def _cgroup_snapshots(run_dir: Path, stop: threading.Event, every: float = 1.0) -> None:
    """cAdvisor's names for the cgroup's CPU and memory figures, a file a second."""
    n = 0
    while True:
        stat = dict(
            ln.split() for ln in (CPU_CG / "cpu.stat").read_text().splitlines() if ln.strip()
        )
        quota = int((CPU_CG / "cpu.cfs_quota_us").read_text())
        period = int((CPU_CG / "cpu.cfs_period_us").read_text())
        limit = int((MEM_CG / "memory.limit_in_bytes").read_text())
        usage = int((MEM_CG / "memory.usage_in_bytes").read_text())
        ts = int(time.time() * 1000)
        lab = f'{{id="/{CGROUP}",name="{CGROUP}"}}'
        rows = [
            ("container_spec_cpu_quota", "gauge", quota),
            ("container_spec_cpu_period", "gauge", period),
            ("container_cpu_cfs_periods_total", "counter", int(stat["nr_periods"])),
            ("container_cpu_cfs_throttled_periods_total", "counter", int(stat["nr_throttled"])),
            (
                "container_cpu_cfs_throttled_seconds_total",
                "counter",
                int(stat["throttled_time"]) / 1e9,
            ),
            ("container_spec_memory_limit_bytes", "gauge", limit),
            ("container_memory_usage_bytes", "gauge", usage),
        ]
        text = "".join(f"# TYPE {m} {t}\n{m}{lab} {v} {ts}\n" for m, t, v in rows)
        (run_dir / f"cgroup-{n:03d}.prom").write_text(text)
        n += 1
        if stop.wait(every):
            return


def record_quota(args: argparse.Namespace) -> int:
    """The container case: ``args.workloads``' first workload at GOMAXPROCS 2 under
    a 0.25-CPU quota and a memory limit (cgroup v1), at each of ``args.settings``."""
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    exe = build(out)
    for cg in (CPU_CG, MEM_CG):
        cg.mkdir(exist_ok=True)
    (CPU_CG / "cpu.cfs_period_us").write_text("100000")
    (CPU_CG / "cpu.cfs_quota_us").write_text(str(int(QUOTA_CPU * 100000)))
    # First in line for the CPU, as the other recordings: the quota, not the
    # machine's other work, must be what holds the program (at the default
    # shares and load 21 it got 0.20 cores of its 0.25, throttled in 9-15% of
    # the periods: starved, not held by its quota).
    (CPU_CG / "cpu.shares").write_text(str(RECORD_SHARES))
    (MEM_CG / "memory.limit_in_bytes").write_text(str(args.quota_memory << 20))
    workload = args.workloads.split(",")[0]
    try:
        for rep in range(args.first_rep, args.reps + 1):
            for setting in (args.settings or "100").split(","):
                rel = Path(f"{workload}-quota") / label(setting) / f"r{rep}"
                final = out / "raw" / rel
                stop = threading.Event()
                # run_once starts the run's directory afresh: the cgroup's snapshots
                # go beside it until the run ends.
                side = final.with_name(final.name + ".cgroup")
                shutil.rmtree(side, ignore_errors=True)
                side.mkdir(parents=True)
                th = threading.Thread(target=_cgroup_snapshots, args=(side, stop))
                prefix = ("sh", "-c", _ENTER, "sh", str(CPU_CG), str(MEM_CG), "--")
                th.start()
                try:
                    s = run_once(exe, workload, setting, final, args.duration, prefix, procs=2)
                finally:
                    stop.set()
                    th.join()
                for f in side.iterdir():
                    f.rename(final / f.name)
                side.rmdir()
                if args.testdata:
                    trim(final, Path(args.testdata) / rel, args.max_lines)
                print(f"{rel}: own CPU {s['own_cpu_seconds']:.1f} s", flush=True)
    finally:
        for cg in (CPU_CG, MEM_CG):
            try:
                cg.rmdir()
            except OSError:
                pass
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(REPO / ".bench" / "gc"))
    p.add_argument("--testdata", help="also write the trimmed runs here")
    p.add_argument("--reps", type=int, default=9, help="the last repetition's number")
    p.add_argument(
        "--first-rep",
        type=int,
        default=1,
        help="the first repetition's number: add runs to a recording (r4..r9 beside r1..r3)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=10.0,
        help="seconds per run after the build (a workload runs on until MIN_CYCLES cycles, "
        "at most MAX_SECONDS)",
    )
    p.add_argument("--workloads", default=",".join(NEW))
    p.add_argument("--settings", help="default: each workload's eight (settings_of)")
    p.add_argument("--max-lines", type=int, default=40)
    p.add_argument("--resume", action="store_true", help="skip runs already recorded")
    p.add_argument("--quota", action="store_true", help="the container case (root)")
    p.add_argument("--quota-memory", type=int, default=256, help="MiB, with --quota")
    p.add_argument("--retrim", action="store_true", help="only re-trim the raw runs in --out")
    args = p.parse_args(argv)
    if args.retrim:
        if not args.testdata:
            p.error("--retrim needs --testdata")
        return retrim(args)
    if args.quota:
        return record_quota(args)
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
