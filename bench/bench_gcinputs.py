"""GC inputs at production size (issue 35, finding 7): time and peak RSS of

- ``pyproflab ingest-gc LOG --format gctrace`` and ``pyproflab gogc --gctrace LOG``
  on a 2,000,000-cycle gctrace log (20 process runs of 100,000 cycles: a
  service restarted 19 times; lines from tests/testdata/gc/gctrace-go1.26.log's
  shape with a steady 32 MiB heap at GOGC=100),
- ``pyproflab ingest-gc FILE --format prom`` of a 500 MB Prometheus exposition
  (the GC families of a client_golang /metrics, 20,000 instances' worth of
  series as labels, timestamps given),

each beside its floor, reading the same file line by line in Python
(``for line in f``): the part no parser can avoid. Targets: each under 60 s
and 1 GiB.

    python -m bench --only gc-inputs
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench import common
from bench.common import pyproflab_cmd

GIB = 1 << 30
CYCLES = 2_000_000
RUN_CYCLES = 100_000
PROM_MB = 500

_GC = (
    "gc {n} @{s:.3f}s 4%: 0.021+1.2+0.034 ms clock, 0.085+0.31/1.1/2.0+0.13 ms cpu, "
    "{a}->{b}->32 MB, 66 MB goal, 0 MB stacks, 0 MB globals, 4 P\n"
)


def write_gctrace(path: Path, cycles: int = CYCLES) -> None:
    """``cycles`` gctrace lines: runs of ``RUN_CYCLES`` (gc numbers and seconds
    start again at each restart), 12 cycles a second, program output between."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(cycles):
            n = i % RUN_CYCLES + 1
            if n % 1000 == 0:
                f.write(f"INFO served {i} requests\n")
            f.write(_GC.format(n=n, s=n / 12, a=60 + n % 5, b=64 + n % 3))


_FAMILIES = (
    ("go_gc_cycles_total_gc_cycles_total", "counter"),
    ("go_gc_heap_allocs_bytes_total", "counter"),
    ("go_gc_heap_goal_bytes", "gauge"),
    ("go_gc_heap_live_bytes", "gauge"),
    ("go_cpu_classes_gc_total_cpu_seconds_total", "counter"),
    ("go_cpu_classes_total_cpu_seconds_total", "counter"),
    ("go_cpu_classes_idle_cpu_seconds_total", "counter"),
    ("go_gc_gogc_percent", "gauge"),
    ("go_sched_gomaxprocs_threads", "gauge"),
    ("process_resident_memory_bytes", "gauge"),
)


def write_prom(path: Path, megabytes: int = PROM_MB) -> int:
    """A text exposition of about ``megabytes`` MB: each family's HELP and TYPE,
    then one series per (instance, pod) label pair, a timestamp each; returns
    the number of samples."""
    target = megabytes * 1_000_000
    per_family = 0
    line = '{m}{{instance="10.0.{a}.{b}:8080",job="api",pod="api-{i:06d}"}} {v} 1764000000000\n'
    size = len(line.format(m=_FAMILIES[0][0], a=0, b=0, i=0, v="123456789")) * len(_FAMILIES)
    per_family = max(1, target // size)
    with open(path, "w", encoding="utf-8") as f:
        for name, kind in _FAMILIES:
            f.write(f"# HELP {name} bench series\n# TYPE {name} {kind}\n")
            for i in range(per_family):
                f.write(line.format(m=name, a=i // 250 % 250, b=i % 250, i=i, v=100000000 + i))
    return per_family * len(_FAMILIES)


def run_measured(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds (user + system), peak RSS bytes) of ``cmd``. The
    CPU time is what a shared machine does not inflate much: on a quiet one
    the wall time of these single-threaded readers is close to it."""
    wall, rss, cpu = common.run_measured(cmd)
    return wall, cpu, rss


def _floor(path: Path) -> tuple[float, float, int]:
    code = "import sys\nn = 0\nfor _ in open(sys.argv[1], encoding='utf-8'):\n    n += 1\n"
    return run_measured([sys.executable, "-c", code, str(path)])


def _row(name: str, got: tuple[float, float, int], floor: tuple[float, float, int]) -> str:
    wall, cpu, rss = got
    ok = "met" if wall < 60 and rss < GIB else "NOT met"
    return (
        f"{name:<28} wall {wall:6.1f} s  cpu {cpu:6.1f} s  peak RSS {rss / 2**20:6.1f} MiB  "
        f"(floor: cpu {floor[1]:4.1f} s, {floor[2] / 2**20:4.1f} MiB)  "
        f"target < 60 s, < 1 GiB: {ok}"
    )


def section_gc_inputs(
    work: Path, runs: int, cycles: int = CYCLES, prom_mb: int = PROM_MB
) -> list[str]:
    log, prom = work / "gctrace.log", work / "metrics.prom"
    write_gctrace(log, cycles)
    samples = write_prom(prom, prom_mb)
    floor_log, floor_prom = _floor(log), _floor(prom)
    out = [f"gctrace log: {cycles:,} cycles, {log.stat().st_size / 1e6:.0f} MB"]
    db = work / "gc.duckdb"
    got = run_measured(pyproflab_cmd("ingest-gc", str(log), "--format", "gctrace", "--db", str(db)))
    out.append(_row("ingest-gc --format gctrace", got, floor_log))
    got = run_measured(pyproflab_cmd("gogc", "--gctrace", str(log)))
    out.append(_row("gogc --gctrace", got, floor_log))
    out.append(f"Prometheus text: {samples:,} samples, {prom.stat().st_size / 1e6:.0f} MB")
    db = work / "prom.duckdb"
    got = run_measured(pyproflab_cmd("ingest-gc", str(prom), "--format", "prom", "--db", str(db)))
    out.append(_row("ingest-gc --format prom", got, floor_prom))
    return out
