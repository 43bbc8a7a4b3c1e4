"""`make bench-gc`: record tests/gcbench at every GOGC setting, in both modes.

For each mode (cpu: flat out on GOMAXPROCS; rate: paced allocation), each
setting (GOGC 25 50 100 200 400 800, GOGC=off with a memory limit, GOGC=400
with the same limit) and each repetition, one run of the benchmark under
`quiet` (the exclusive machine lock, so other jobs do not take its CPU),
with GODEBUG=gctrace=1 and metric snapshots (``--lock priority``: see
LOCKS, for when the exclusive lock cannot be had). The program reports its peak
RSS and the machine's busy CPU over the run; a run in which other processes
used more than --max-other cores is redone (up to --attempts times; the
least disturbed attempt is kept and its disturbance recorded).

Raw runs go to OUT/raw; with --testdata DIR the trimmed copy (every gctrace
line after the warm-up thinned to at most --max-lines, three metric
snapshots, the summary) is written there too (tests/testdata/gc).

    python -m bench.gc_record [--out .bench/gc] [--testdata tests/testdata/gc/bench]
        [--reps 3] [--duration 10] [--modes cpu,rate] [--settings 100,off@160MiB]
        [--lock quiet|heavy] [--rate MiB/s] [--live MiB] [--retrim]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GCBENCH = REPO / "tests" / "gcbench"
LIMIT = "160MiB"
SETTINGS = ("25", "50", "100", "200", "400", "800", f"off@{LIMIT}", f"400@{LIMIT}")
WARMUP_S = 2.0  # building the live set and the first cycles
# How a run claims the machine. quiet: the exclusive lock. heavy: the shared one
# (the run competes; its other CPU is recorded). priority: the shared lock, the
# run in a session of its own whose autogroup has nice -20, so the scheduler's
# per-session fairness gives it the CPUs while it runs (what quiet would do,
# without waiting for every shared holder to leave: under a steady stream of
# shared holders the exclusive lock starves).
LOCKS = {
    "quiet": ["quiet"],
    "heavy": ["heavy"],
    "priority": [
        "heavy",
        "setsid",
        "sh",
        "-c",
        'echo -20 > /proc/self/autogroup && exec "$@"',
        "sh",
    ],
}
# `heavy` and `quiet` are flock wrappers of the machine the recordings were made on
# (a shared and an exclusive lock on one file); where they are not installed, a run
# simply does not take the lock.
MACHINE_LOCKS = ("heavy", "quiet")


def lock_prefix(lock: str) -> list[str]:
    """The command prefix for ``lock``, without lock wrappers this machine lacks."""
    return [c for c in LOCKS[lock] if c not in MACHINE_LOCKS or shutil.which(c)]


def label(setting: str) -> str:
    """``gogc400-lim320MiB`` for ``400@320MiB``; ``gogc100`` for ``100``."""
    g, _, lim = setting.partition("@")
    return f"gogc{g}" + (f"-lim{lim}" if lim else "")


def build(out: Path) -> Path:
    exe = out / "gcbench"
    subprocess.run(
        [*lock_prefix("heavy"), "go", "build", "-o", str(exe), "."], cwd=GCBENCH, check=True
    )
    return exe


def read_summary(path: Path) -> dict[str, float]:
    vals = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition(" ")
        vals[k] = float(v)
    return vals


def run_once(
    exe: Path,
    mode: str,
    setting: str,
    run_dir: Path,
    duration: float,
    lock: str = "quiet",
    extra: tuple[str, ...] = (),
) -> dict:
    """One run under `quiet` (or `heavy`); returns its summary (peak RSS, other CPU)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    g, _, lim = setting.partition("@")
    env = dict(os.environ, GOGC=g, GODEBUG="gctrace=1", GOMAXPROCS="2")
    env.pop("GOMEMLIMIT", None)
    if lim:
        env["GOMEMLIMIT"] = lim
    cmd = [
        *lock_prefix(lock),
        str(exe),
        "-mode",
        mode,
        "-duration",
        f"{duration}s",
        "-metrics-dir",
        str(run_dir),
        "-summary",
        str(run_dir / "summary.txt"),
        *extra,
    ]
    with open(run_dir / "gctrace.log", "w") as err:
        subprocess.run(
            cmd, env=env, stderr=err, stdout=subprocess.DEVNULL, check=True, timeout=1800
        )
    return read_summary(run_dir / "summary.txt")


_GC = re.compile(r"^gc (\d+) @([0-9.]+)s")


def trim(run_dir: Path, dest: Path, max_lines: int) -> None:
    """Copy a run thinned: gctrace lines after the warm-up (at most max_lines,
    always the first and the last), snapshots at the window's start, middle
    and end, and the summary."""
    dest.mkdir(parents=True, exist_ok=True)
    lines = [
        ln
        for ln in (run_dir / "gctrace.log").read_text().splitlines()
        if (m := _GC.match(ln)) and float(m.group(2)) >= WARMUP_S
    ]
    if len(lines) > max_lines:
        # Pairs of consecutive cycles (a goal is set from the previous cycle's
        # marked heap), spread evenly, plus the last line.
        pairs = max_lines // 2
        step = (len(lines) - 2) / max(pairs - 1, 1)
        keep = sorted({j for i in range(pairs) for j in (round(i * step), round(i * step) + 1)})
        lines = [lines[j] for j in keep if j < len(lines) - 1] + [lines[-1]]
    (dest / "gctrace.log").write_text("".join(ln + "\n" for ln in lines))
    snaps = sorted(run_dir.glob("snap-*.prom"))
    first = int(WARMUP_S)  # snapshots are one second apart, from the start
    keep = {snaps[min(first, len(snaps) - 1)], snaps[(first + len(snaps) - 1) // 2], snaps[-1]}
    for s in keep:
        shutil.copy(s, dest / s.name)
    shutil.copy(run_dir / "summary.txt", dest / "summary.txt")


def retrim(args: argparse.Namespace) -> int:
    """Rewrite the trimmed test data from the raw runs already recorded."""
    raw = Path(args.out) / "raw"
    for run in sorted(p for p in raw.glob("*/*/r*") if ".try" not in p.name):
        dest = Path(args.testdata) / run.relative_to(raw)
        if dest.exists():
            shutil.rmtree(dest)
        trim(run, dest, args.max_lines)
    return 0


def record(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    exe = build(out)
    t0 = time.time()
    extra = ("-rate", str(args.rate), "-live", str(args.live))
    # Repetition-major: an interrupted recording still holds every setting once.
    for rep in range(1, args.reps + 1):
        for mode in args.modes.split(","):
            for setting in args.settings.split(","):
                rel = Path(mode) / label(setting) / f"r{rep}"
                best = None
                for attempt in range(1, args.attempts + 1):
                    tmp = out / "raw" / rel.with_name(f"{rel.name}.try{attempt}")
                    s = run_once(exe, mode, setting, tmp, args.duration, args.lock, extra)
                    s["attempts"] = attempt
                    if best is None or s["other_cpu_cores"] < best[0]["other_cpu_cores"]:
                        best = (s, tmp)
                    # Paced at priority, the run takes the CPU whenever it wants it:
                    # others may use what it leaves idle without disturbing it.
                    paced = mode == "rate" and args.lock == "priority"
                    if paced or s["other_cpu_cores"] <= args.max_other:
                        break
                s, tmp = best
                final = out / "raw" / rel
                if final.exists():
                    shutil.rmtree(final)
                tmp.rename(final)
                with open(final / "summary.txt", "a") as f:
                    f.write(
                        f"attempts {s['attempts']:.0f}\nexclusive {int(args.lock == 'quiet')}\n"
                        f"priority {int(args.lock == 'priority')}\n"
                        f"rate_mib_s {args.rate:g}\nlive_mib {args.live}\n"
                    )
                if args.testdata:
                    dest = Path(args.testdata) / rel
                    if dest.exists():
                        shutil.rmtree(dest)
                    trim(final, dest, args.max_lines)
                print(
                    f"{rel}: peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB, other CPU "
                    f"{s['other_cpu_cores']:.2f} cores, attempts {s['attempts']:.0f}, "
                    f"{time.time() - t0:.0f} s elapsed",
                    flush=True,
                )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(REPO / ".bench" / "gc"))
    p.add_argument("--testdata", help="also write the trimmed runs here")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    p.add_argument("--modes", default="cpu,rate")
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--max-other", type=float, default=0.2, help="other processes' cores")
    p.add_argument("--max-lines", type=int, default=60)
    p.add_argument("--rate", type=float, default=300.0, help="MiB/s in rate mode")
    p.add_argument("--live", type=int, default=32, help="live heap MiB")
    p.add_argument(
        "--lock",
        choices=sorted(LOCKS),
        default="quiet",
        help="how a run claims the machine (see LOCKS); other CPU is recorded either way",
    )
    p.add_argument("--retrim", action="store_true", help="only re-trim the raw runs in --out")
    args = p.parse_args(argv)
    if args.retrim:
        if not args.testdata:
            p.error("--retrim needs --testdata")
        return retrim(args)
    return record(args)


if __name__ == "__main__":
    sys.exit(main())
