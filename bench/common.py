"""Timing helpers shared by the benchmarks.

Every figure is a median of repeated runs, measured in the same process run
as its peer, and reported as a ratio: these machines are shared and noisy,
so only ratios carry over.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
LARGE_CPU = CORPUS / "google-pprof" / "internal" / "proftest" / "testdata" / "large.cpu"


def median_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# Each measured command is started by a small launcher that reports its wall time,
# peak RSS and CPU: on Linux a child's peak RSS starts at its parent's high-water
# mark (vfork and exec carry it over), and the bench grows to hundreds of MiB making
# its inputs (after the trace section every later child read 400.4 MiB).
_LAUNCH = (
    "import os, sys, time\n"
    "t = time.perf_counter()\n"
    "pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "wall = time.perf_counter() - t\n"
    "cpu = usage.ru_utime + usage.ru_stime\n"
    "code = os.waitstatus_to_exitcode(status)\n"
    "os.write(int(sys.argv[1]), f'{wall} {usage.ru_maxrss} {cpu} {code}'.encode())\n"
)


def run_measured(cmd: list[str], *, stdout: Path | None = None, **kw) -> tuple[float, int, float]:
    """Run ``cmd`` to completion (its output into ``stdout`` if given, else dropped);
    return (wall seconds, peak RSS in bytes, CPU seconds) of the command alone."""
    read, write = os.pipe()
    sink = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115
    launcher = [sys.executable, "-I", "-S", "-c", _LAUNCH, str(write), *cmd]
    try:
        proc = subprocess.Popen(
            launcher, stdout=sink, stderr=subprocess.PIPE, pass_fds=(write,), **kw
        )
    finally:
        os.close(write)
        if stdout:
            sink.close()
    err = proc.communicate()[1].decode(errors="replace")
    with os.fdopen(read, "rb") as f:
        report = f.read().split()
    code = int(report[3]) if len(report) == 4 else proc.returncode
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}… failed ({code}): {err.strip()[:500]}")
    return float(report[0]), int(report[1]) * 1024, float(report[2])


def run_process(cmd: list[str], *, stdout: Path | None = None, **kw) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes) of ``cmd`` (as run_measured)."""
    wall, rss, _ = run_measured(cmd, stdout=stdout, **kw)
    return wall, rss


def median_process(cmd: list[str], repeat: int = 5, *, warmup: bool = True, **kw) -> float:
    """The median wall time of ``repeat`` runs (``stdout``, if given, keeps the last
    run's output)."""
    if warmup:
        run_process(cmd, **kw)  # warm caches (and Go's build cache for go tool pprof)
    return statistics.median(run_process(cmd, **kw)[0] for _ in range(repeat))


def pyproflab_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pyproflab", *args]


def pprof_cmd(*args: str) -> list[str]:
    return ["go", "tool", "pprof", "-symbolize=none", *args]


def self_peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def line(name: str, ours: float, peer: float, target: float | None, unit: str = "s") -> str:
    ratio = ours / peer if peer else float("inf")
    verdict = ""
    if target is not None:
        verdict = "  (target <= {:.2f}x: {})".format(
            target, "met" if ratio <= target else "NOT met"
        )
    return (
        f"{name:<58} ours {ours:8.3f}{unit}  peer {peer:8.3f}{unit}  ratio {ratio:6.3f}x{verdict}"
    )


def go_cpu_profiles(work: Path) -> list[Path]:
    """Two real CPU profiles from the Go test program (tests/goprogs/profgen)."""
    out = work / "profgen"
    binary = work / "bin" / "profgen"
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["go", "build", "-o", str(binary), "./profgen"], cwd=REPO / "tests" / "goprogs", check=True
    )
    subprocess.run(
        [str(binary), "-out", str(out), "-cpu-seconds", "2", "-cpu-profiles", "2"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return [out / "cpu.pb.gz", out / "cpu2.pb.gz"]
