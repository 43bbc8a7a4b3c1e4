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


def run_process(cmd: list[str], *, stdout: Path | None = None, **kw) -> tuple[float, int]:
    """Run ``cmd`` to completion (its output into ``stdout`` if given, else dropped);
    return (wall seconds, peak RSS in bytes of the child)."""
    sink = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115
    t = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, **kw)
    finally:
        if stdout:
            sink.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}… failed ({proc.returncode}): {err.strip()[:500]}")
    return wall, usage.ru_maxrss * 1024


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
