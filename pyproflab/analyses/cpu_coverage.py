"""Did the CPU profiles record the CPU the processes used?

Go's CPU profiler counts CPU with a per-thread timer that fires at most once a
kernel tick (250 a second on the machine this was measured on, 100 on many
hosts). Asked for more (``runtime.SetCPUProfileRate``, a Pyroscope or Datadog
setting, notesd's ``-cpu-profile-hz``), it still fires once a tick but books
each sample at the shorter period asked for, so every rate in cores is low by
the ratio: a CPU burner at GOMAXPROCS 1 recorded 9.99 s of 10.09 s of CPU at
250 Hz, 5.00 s at 500 Hz and 2.50 s at 1000 Hz (rusage against ``go tool pprof
-top``). Nothing in a profile says so; the process's own CPU counter does.

Rules:

- Process CPU is ``process_cpu_seconds_total`` of the profile's service and
  instance (``metric_samples``, summed over label sets per scrape). The Go
  runtime's ``go_cpu_classes_total - idle`` is not used: it counts a P's time
  as busy while the OS has its thread off the CPU, so it is an upper bound (the
  runtime's documentation says as much): on a ``make demo`` store of 4
  processes on 2 cores it said 0.83 cores where the process used 0.25.
- A profile's window is [``time_nanos``, ``time_nanos + duration_nanos``], the
  profiler's own start and length. It is compared only when scrapes bracket it
  (one at or before its start, one at or after its end) and the counter does
  not drop between those two (a restart); the process's CPU over it is the
  counter interpolated linearly at both ends (so it assumes an even rate
  between the scrapes around each end). Other profiles are left out, so the
  CPU of times no profile covers (start-up, gaps between profiles) never
  counts against the profiles.
- The profiles' CPU is the sum of their ``cpu``/``nanoseconds`` values over
  the compared windows; cores are each sum over the windows' total length.
- Why profiles fall short at and below the tick's rate too: Linux checks a
  thread's CPU timer only at a tick while that thread runs, and periods
  passed meanwhile give one signal, so a thread that runs in bursts shorter
  than a tick loses samples. Measured with ``tests/goprogs/cpucover`` (two
  3 s profiles, a loaded 2-core machine, 250 ticks a second), the share of
  the process's CPU the profiles kept at 100 / 250 / 1000 Hz: one goroutine
  burning without pause 100 / 91 / 25 %; one running 0.5 ms in every 2 ms
  52 / 39 / 11 %; four such on two Ps 93 / 61 / 24 %. The demo fleet
  (notesd serving requests; ``tests/support/fleet_demo.py``, 5 windows of
  20 s, run twice in a row) kept 92 % at 100 Hz (0.190 of 0.207 cores) and
  71 % at 250 Hz (0.147 of 0.207) over matched windows.
- Profiles hold *clearly less* when their CPU is below ``SHORT_BELOW`` (80 %)
  of the process's and the process's CPU over the windows is at least
  ``MIN_PERIODS`` sampling periods (100: a 20 % shortfall is then 2 standard
  deviations of the samples' Poisson noise). The recording in
  ``tests/testdata/cpucover`` kept 101 % at 100 Hz and 97 % at 250 Hz
  without pause (so agreement is within a few %), 26 % at 1000 Hz (tick /
  rate = 25 %), and 55 % at 100 Hz in 0.5 ms bursts.
- Nothing is said (None) when no profile has a ``cpu``/``nanoseconds`` type,
  no process CPU is stored for its instance, or no window is bracketed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

PROCESS_CPU = "process_cpu_seconds_total"
SHORT_BELOW = 0.8
MIN_PERIODS = 100
#: The fastest kernel tick common on Linux servers (CONFIG_HZ 100, 250, 300, 1000
#: are the choices; 100 and 250 the usual ones): rates above it are suspect.
COMMON_TICK_HZ = 100


@dataclass(frozen=True)
class CpuCoverage:
    """The CPU profiles' CPU beside their processes' over the windows scrapes
    bracket (see the module docstring for the rules)."""

    profiles: int  # profiles whose windows were compared
    profiles_selected: int  # profiles with a cpu/nanoseconds type
    profiled_seconds: float
    process_seconds: float
    window_seconds: float
    rates_hz: tuple[float, ...]  # the compared profiles' sampling rates, 1e9 / period

    @property
    def ratio(self) -> float:
        """The profiles' CPU over the process's (NaN when the process used none)."""
        return self.profiled_seconds / self.process_seconds if self.process_seconds else np.nan

    @property
    def profiled_cores(self) -> float:
        return self.profiled_seconds / self.window_seconds

    @property
    def process_cores(self) -> float:
        return self.process_seconds / self.window_seconds

    @property
    def short(self) -> bool:
        """Profiles hold clearly less than the process used (the rule above)."""
        periods = self.process_seconds * min(self.rates_hz, default=0.0)
        return periods >= MIN_PERIODS and bool(self.ratio < SHORT_BELOW)

    def describe(self) -> str:
        """One line of the figures: profiled cores against process cores."""
        hz = sorted({round(r) for r in self.rates_hz})
        rate = "/".join(f"{h:g}" for h in hz)
        return (
            f"{self.profiled_cores:.3g} cores profiled vs {self.process_cores:.3g} process "
            f"cores ({self.ratio:.0%}) over {self.profiles} profile windows of "
            f"{self.window_seconds:.4g} s that scrapes of {PROCESS_CPU} bracket, "
            f"sampled at {rate} Hz"
        )

    def cause(self) -> str:
        """The likely cause of a shortfall, from the sampling rate (see the module
        docstring for the measurements)."""
        if max(self.rates_hz, default=0.0) > COMMON_TICK_HZ:
            return (
                "a sampling rate near or above the kernel's tick (100 or 250 a second on "
                "most Linux hosts): Go's CPU timer fires at most once a tick, only while "
                "the thread runs, and books each sample at the period asked for, so "
                "threads that run in short bursts lose the most; profile at 100 Hz, "
                "Go's default"
            )
        return (
            "threads that run in bursts shorter than a kernel tick (Go's CPU timer is "
            "checked only at a tick while the thread runs), or CPU of threads Go does "
            "not sample (C threads)"
        )


def short_note(sides: Sequence[tuple[str, CpuCoverage | None]]) -> str | None:
    """One note for the named coverages that are short, or None when none is."""
    short = [(name, c) for name, c in sides if c is not None and c.short]
    if not short:
        return None
    figures = "; ".join(f"{name}: {c.describe()}" if name else c.describe() for name, c in short)
    return (
        f"CPU profiles hold less CPU than the processes used, so rates in cores are low: "
        f"{figures}. Likely cause: {short[0][1].cause()}"
    )


def coverage_of(
    rows: Sequence[dict[str, Any]], cpu_seconds: Sequence[float], samples: pa.Table
) -> CpuCoverage | None:
    """The coverage of the profiles ``rows`` (service, instance, time_nanos,
    duration_nanos, period) holding ``cpu_seconds`` each, against ``samples``
    (service, instance, time, value) of ``PROCESS_CPU`` in time order."""
    series = _series(samples)
    got, hz, windows = np.zeros(3), [], 0
    for r, cpu in zip(rows, cpu_seconds, strict=True):
        used = _used(series.get((r["service"], r["instance"])), r)
        if used is None:
            continue
        windows += 1
        got += (cpu, used, r["duration_nanos"] / 1e9)
        hz.append(1e9 / r["period"] if r["period"] else 0.0)
    if not windows or got[2] <= 0:
        return None
    profiled, process, seconds = (float(x) for x in got)
    return CpuCoverage(windows, len(rows), profiled, process, seconds, tuple(hz))


def _series(samples: pa.Table) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """(service, instance) -> (times in ns, values)."""
    if not samples.num_rows:
        return {}
    t = samples.column("time").cast(pa.timestamp("ns", "UTC")).cast(pa.int64()).to_numpy()
    v = samples.column("value").to_numpy(zero_copy_only=False)
    keys = list(zip(samples["service"].to_pylist(), samples["instance"].to_pylist(), strict=True))
    out: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    for k in dict.fromkeys(keys):
        m = np.array([x == k for x in keys])
        out[k] = (t[m], v[m])
    return out


def _used(series: tuple[np.ndarray, np.ndarray] | None, row: dict[str, Any]) -> float | None:
    """The process's CPU over the profile's window, or None when scrapes do not
    bracket it or the counter drops between the bracketing scrapes."""
    t0 = row["time_nanos"] or 0
    t1 = t0 + (row["duration_nanos"] or 0)
    if series is None or not t0 or t1 <= t0:
        return None
    ts, vs = series
    first = int(np.searchsorted(ts, t0, side="right")) - 1  # last scrape at or before t0
    last = int(np.searchsorted(ts, t1, side="left"))  # first scrape at or after t1
    if first < 0 or last >= len(ts):
        return None
    if np.any(np.diff(vs[first : last + 1]) < 0):
        return None
    return float(np.interp(t1, ts, vs) - np.interp(t0, ts, vs))


def cpu_coverage(store, selection) -> CpuCoverage | None:
    """The coverage of the CPU profiles ``selection`` picks in a DuckDB store."""
    from pyproflab.store.cpu_coverage import cpu_profile_seconds
    from pyproflab.store.regressions import counter_samples

    rows = cpu_profile_seconds(store, selection)
    if not rows:
        return None
    samples = counter_samples(store, PROCESS_CPU, sorted({r["service"] for r in rows}, key=str))
    return coverage_of(rows, [r["cpu_ns"] / 1e9 for r in rows], samples)


def notes_for(store, selection) -> list[str]:
    """The note to set beside CPU rates of ``selection``'s profiles (``top``'s
    ``Total samples = ... (N%)``): one when they hold clearly less CPU than their
    processes used, else none."""
    return notes_of(cpu_coverage(store, selection))


def notes_of(coverage: CpuCoverage | None) -> list[str]:
    """``notes_for``'s note from a coverage however it was read (the store, Spark)."""
    note = short_note([("", coverage)])
    return [note] if note else []
