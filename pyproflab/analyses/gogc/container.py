"""A service's container limits, for the GOGC advice.

Rules:

- Sources, first found wins per figure: a flag (``--container-memory``,
  ``--cpu-limit``), a cgroup directory (``--cgroup``: v2 ``memory.max``,
  ``cpu.max``, ``cpu.stat``; v1 ``memory.limit_in_bytes``,
  ``cpu.cfs_quota_us``/``cpu.cfs_period_us``, ``cpu.stat``; a v1 name is
  looked up under ``/sys/fs/cgroup/{memory,cpu}/``), then cAdvisor's metrics
  in the data (``container_spec_memory_limit_bytes``,
  ``container_spec_cpu_quota``/``container_spec_cpu_period``,
  ``container_cpu_cfs_throttled_periods_total`` over
  ``container_cpu_cfs_periods_total``, first to last sample of each
  instance's series, summed: each pod counts its own periods). A memory limit
  of 0 or 2^60 and more, a quota of -1 or ``max``: none.
- The budget defaults to the container's memory limit when it is known.
- GOMAXPROCS above the CPU quota is a finding of its own: the runtime plans
  for GOMAXPROCS cores (its background GC workers take a quarter of them)
  while the quota throttles the process; the share of CFS periods throttled
  says how often. The model's CPU figures stay in the runtime's accounting
  (P-time: a P held while the quota throttles its thread counts as busy), so
  they are capped at GOMAXPROCS, not at the quota: under a quota the GC's
  cores there can exceed it (the throttled share says by how much time).
- The GOMAXPROCS to set is the quota rounded up (at least 1). Go 1.25 and
  later set their own where GOMAXPROCS is not given, the quota rounded up
  but at least 2 (``adjustCgroupGOMAXPROCS``, runtime/cgroup_linux.go): the
  finding gives both, as under a quota below 2 cores the runtime's own
  choice stays above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyproflab.errors import UsageError

MiB = float(1 << 20)
# The files a cgroup directory is read from (from_cgroup).
CGROUP_FILES = (
    "memory.max",
    "memory.limit_in_bytes",
    "cpu.max",
    "cpu.cfs_quota_us",
    "cpu.cfs_period_us",
    "cpu.stat",
)
NO_MEMORY_LIMIT = float(2**60)
CADVISOR = (
    "container_spec_memory_limit_bytes",
    "container_spec_cpu_quota",
    "container_spec_cpu_period",
    "container_cpu_cfs_throttled_periods_total",
    "container_cpu_cfs_periods_total",
)
V1_ROOT = Path("/sys/fs/cgroup")


@dataclass
class Container:
    """What is known of the container: each figure with where it came from."""

    memory_limit: float | None = None
    cpu_limit: float | None = None  # cores
    throttled: float | None = None  # throttled CFS periods
    periods: float | None = None  # CFS periods
    source: dict[str, str] = field(default_factory=dict)

    def merge(self, other: Container | None) -> Container:
        """This container's figures, with ``other``'s where this has none."""
        if other is None:
            return self
        out = Container(self.memory_limit, self.cpu_limit, self.throttled, self.periods)
        out.source = dict(other.source) | dict(self.source)
        for k in ("memory_limit", "cpu_limit", "throttled", "periods"):
            if getattr(out, k) is None:
                setattr(out, k, getattr(other, k))
        return out

    @property
    def empty(self) -> bool:
        return self.memory_limit is None and self.cpu_limit is None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _dirs(spec: str) -> list[Path]:
    """The cgroup directories a ``--cgroup`` names: the directory itself, or a
    v1 name under each controller's hierarchy."""
    p = Path(spec)
    if p.is_dir():
        return [p]
    found = [V1_ROOT / c / spec.strip("/") for c in ("memory", "cpu", "cpu,cpuacct")]
    found = [d for d in found if d.is_dir()]
    if not found:
        raise UsageError(f"{spec}: no such cgroup directory (v2 path or v1 name)")
    return found


def cgroup_files(spec: str) -> list[Path]:
    """The files ``from_cgroup(spec)`` reads, where they exist."""
    return [d / name for d in _dirs(spec) for name in CGROUP_FILES if (d / name).is_file()]


def from_cgroup(spec: str) -> Container:
    """The limits a cgroup directory (v1 or v2) holds (module rules)."""
    c = Container()
    for d in _dirs(spec):
        mem = _read(d / "memory.max") or _read(d / "memory.limit_in_bytes")
        if mem and mem != "max" and c.memory_limit is None:
            v = float(mem)
            if 0 < v < NO_MEMORY_LIMIT:
                c.memory_limit, c.source["memory limit"] = v, f"cgroup {d}"
        cpu_max = _read(d / "cpu.max")
        quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
        if cpu_max:
            q, _, per = cpu_max.partition(" ")
            quota, period = (None if q == "max" else q), per or "100000"
        if quota and period and float(quota) > 0 and c.cpu_limit is None:
            c.cpu_limit = float(quota) / float(period)
            c.source["CPU limit"] = f"cgroup {d}"
        stat = _read(d / "cpu.stat")
        if stat and c.periods is None:
            kv = dict(ln.split()[:2] for ln in stat.splitlines() if len(ln.split()) >= 2)
            if "nr_periods" in kv:
                c.periods, c.throttled = float(kv["nr_periods"]), float(kv["nr_throttled"])
                c.source["throttling"] = f"cgroup {d}/cpu.stat"
    return c


def from_cadvisor(samples: pa.Table | None) -> Container | None:
    """The limits cAdvisor's metrics in ``samples`` show (labels ignored: one
    container), or None when there are none."""
    if samples is None or samples.num_rows == 0:
        return None
    ser: dict[str, list[tuple[Any, float]]] = {}
    for r in samples.to_pylist():
        if r["metric"] in CADVISOR and math.isfinite(r["value"]):
            ser.setdefault(r["metric"], []).append((r["time"], r["value"]))
    if not ser:
        return None
    for v in ser.values():
        v.sort(key=lambda x: x[0])
    c = Container()
    mem = ser.get("container_spec_memory_limit_bytes")
    if mem and 0 < mem[-1][1] < NO_MEMORY_LIMIT:
        c.memory_limit = mem[-1][1]
        c.source["memory limit"] = "cAdvisor (container_spec_memory_limit_bytes)"
    quota, period = ser.get("container_spec_cpu_quota"), ser.get("container_spec_cpu_period")
    if quota and period and quota[-1][1] > 0 and period[-1][1] > 0:
        c.cpu_limit = quota[-1][1] / period[-1][1]
        c.source["CPU limit"] = "cAdvisor (container_spec_cpu_quota / _period)"
    thr, per = (
        _increase(samples, "container_cpu_cfs_throttled_periods_total"),
        _increase(samples, "container_cpu_cfs_periods_total"),
    )
    if thr is not None and per:
        c.throttled, c.periods = thr, per
        c.source["throttling"] = "cAdvisor (container_cpu_cfs_throttled_periods_total)"
    return c


def _increase(samples: pa.Table, metric: str) -> float | None:
    """A counter's first-to-last increase summed over its series (instance and
    labels): two pods' counters are not one series (the last of one less the
    first of another gave 'throttled in -400 of -890 CFS periods')."""
    by: dict[tuple, list[tuple[Any, float]]] = {}
    for r in samples.to_pylist():
        if r["metric"] == metric and math.isfinite(r["value"]):
            key = (r.get("instance"), str(r.get("labels")))
            by.setdefault(key, []).append((r["time"], r["value"]))
    runs = [[x for _, x in sorted(v, key=lambda x: x[0])] for v in by.values() if len(v) >= 2]
    # A counter that falls was reset (a restart): it counts from 0 again.
    steps = [(a, b) for v in runs for a, b in zip(v, v[1:], strict=False)]
    return sum(b - a if b >= a else b for a, b in steps) if runs else None


def _set_procs(procs: float, quota: float) -> str:
    """The GOMAXPROCS to set under ``quota`` cores, beside the one Go sets itself
    (module rules)."""
    want, go = max(1, math.ceil(quota)), max(2, math.ceil(quota))
    runs = ", the setting this process runs at" if procs == go else ""
    return (
        f"Set GOMAXPROCS={want} (Go 1.25 and later, where GOMAXPROCS is not given, "
        f"take the quota rounded up, at least 2: {go} here{runs})"
    )


def findings(c: Container | None, procs: float, *, cpu_known: bool = True) -> list[str]:
    """The container's findings (module rules): GOMAXPROCS above the quota, throttling.
    ``cpu_known`` false (the process's CPU from gctrace alone): the finding asks
    for it, since under the quota the process runs below GOMAXPROCS."""
    if c is None or c.cpu_limit is None:
        return []
    out = []
    thr = ""
    if c.periods:
        thr = (
            f"; throttled in {c.throttled:,.0f} of {c.periods:,.0f} CFS periods "
            f"({100 * (c.throttled or 0) / c.periods:.0f}%)"
        )
    if procs > c.cpu_limit + 1e-9:
        out.append(
            f"GOMAXPROCS {procs:g} is above the container's CPU quota of {c.cpu_limit:g} "
            f"cores ({c.source.get('CPU limit', 'given')}): the runtime plans for {procs:g} "
            f"cores, its background GC workers alone a quarter of them{thr}. "
            f"{_set_procs(procs, c.cpu_limit)}. CPU figures here are the runtime's "
            "P-time, which counts throttled time: under this quota they overstate the CPU"
            + (
                ""
                if cpu_known
                else ". gctrace does not hold the process's CPU, which under a quota can "
                "lie below GOMAXPROCS: give --process-cpu (or Prometheus beside the log)"
            )
        )
    elif thr:
        out.append(f"CPU quota {c.cpu_limit:g} cores{thr}")
    return out
