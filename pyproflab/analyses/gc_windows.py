"""The runtime view of the GC join: GC metrics of one instance over one time
window, from ``metric_samples`` (Prometheus) and ``gc_cycles`` (gctrace).

A window is a key with a service, an instance and bounds ``[w_start, w_end]``
(``gc`` makes them from profiles, or from an instance's span of profiles); an
instance's rows are those with the same instance (and service, when both name
one) whose time lies in the window, ends included.

Rules:

- A metric's rows are split into series by their labels (``le`` and
  ``quantile`` aside). When one metric has several series in a window (say a
  scrape and a Prometheus server's copy with ``job`` labels) the series with
  the most samples is used (ties: the smallest labels) and a note says so;
  series are never added up.
- Counter *increase*: the sum of the steps between consecutive samples, where
  a drop is a reset and the step is the new value (Prometheus' rule, without
  its extrapolation to the window edges). A *rate* divides the increase by the
  time between the first and the last sample used. Fewer than two samples give
  NULL.
- ``gc_cycles_per_min`` from ``go_gc_cycles_total_gc_cycles_total``;
  ``alloc_bytes_per_sec`` from ``go_gc_heap_allocs_bytes_total``; heap live
  and goal (``go_gc_heap_live_bytes``, ``go_gc_heap_goal_bytes``): mean and
  last sample in the window.
- STW pauses from the histogram ``go_sched_pauses_total_gc_seconds``: total
  = increase of ``_sum``, count = increase of ``_count``, p99 from the
  increases of the ``_bucket`` counters with Prometheus' ``histogram_quantile``
  interpolation (linear inside a bucket; the upper bound of the last finite
  bucket when the rank falls in ``+Inf``).
- GC CPU fraction = increase of ``go_cpu_classes_gc_total_cpu_seconds_total``
  / increase of ``go_cpu_classes_total_cpu_seconds_total`` (of all CPU
  GOMAXPROCS offers, idle included). ``gc_cpu_fraction_busy`` divides by total
  minus ``go_cpu_classes_idle_cpu_seconds_total`` instead: the busy CPU, which
  is what a CPU profile samples, so it is the one to set beside the profile view.
- GOGC and GOMEMLIMIT (``go_gc_gogc_percent``, ``go_gc_gomemlimit_bytes``):
  the last sample at or before the window's end (settings outlive scrapes).
- From ``gc_cycles`` (gctrace): cycles with a time in the window (a cycle
  logged twice is counted once) and their mean heap goal and marked-live MiB;
  NULL for an instance without any gctrace rows, 0 when none fall in the window.

Anything missing (a table, a metric, a window) leaves the value out and adds a
note, never an error.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.store import queries
from pyproflab.store.connection import Store

# --- the metrics read ---------------------------------------------------------------

M_CYCLES = "go_gc_cycles_total_gc_cycles_total"
M_HEAP_LIVE = "go_gc_heap_live_bytes"
M_HEAP_GOAL = "go_gc_heap_goal_bytes"
M_ALLOCS = "go_gc_heap_allocs_bytes_total"
M_PAUSES = "go_sched_pauses_total_gc_seconds"  # a histogram: _bucket, _sum, _count
M_CPU_GC = "go_cpu_classes_gc_total_cpu_seconds_total"
M_CPU_TOTAL = "go_cpu_classes_total_cpu_seconds_total"
M_CPU_IDLE = "go_cpu_classes_idle_cpu_seconds_total"
M_GOGC = "go_gc_gogc_percent"
M_GOMEMLIMIT = "go_gc_gomemlimit_bytes"

WINDOW_METRICS: tuple[str, ...] = (
    M_CYCLES,
    M_HEAP_LIVE,
    M_HEAP_GOAL,
    M_ALLOCS,
    f"{M_PAUSES}_bucket",
    f"{M_PAUSES}_sum",
    f"{M_PAUSES}_count",
    M_CPU_GC,
    M_CPU_TOTAL,
    M_CPU_IDLE,
)
SETTING_METRICS: tuple[str, ...] = (M_GOGC, M_GOMEMLIMIT)
# The Go release whose runtime/metrics first had what a metric reads: an older
# Go's /metrics lack it whatever client_golang does (Go 1.21 has no STW pause
# histogram, Go 1.19 no CPU classes).
SINCE_GO = {M_PAUSES: "1.22", M_HEAP_LIVE: "1.21"} | dict.fromkeys(
    (M_CPU_GC, M_CPU_TOTAL, M_CPU_IDLE), "1.20"
)

PAUSE_QUANTILE = 0.99

# --- pure helpers -------------------------------------------------------------------


def absent_note(metric: str) -> str:
    """The note for a metric that none of a window's scrapes holds, though they
    hold others: the service does not export it (not a gap in the scrapes)."""
    base = metric.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
    since = f" (Go {SINCE_GO[base]} and later export it)" if base in SINCE_GO else ""
    return f"{metric}: not in the window's scrapes{since}"


def counter_increase(values: Sequence[float]) -> float | None:
    """Increase of a counter over its samples in time order; a drop is a reset
    (the step is then the new value). None for fewer than two usable samples."""
    vals = [v for v in values if not math.isnan(v)]
    if len(vals) < 2:
        return None
    inc = 0.0
    for prev, cur in zip(vals, vals[1:], strict=False):
        inc += cur - prev if cur >= prev else cur
    return inc


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile`` over (upper bound, cumulative count) pairs.

    None when the histogram is empty or has no ``+Inf`` bucket.
    """
    bs = sorted(buckets)
    if not bs or not math.isinf(bs[-1][0]) or bs[-1][1] <= 0:
        return None
    # Cumulative counts must not decrease (increases of separate counters may jitter).
    fixed: list[tuple[float, float]] = []
    for ub, c in bs:
        fixed.append((ub, max(c, fixed[-1][1]) if fixed else c))
    total = fixed[-1][1]
    rank = q * total
    i = next(j for j, (_, c) in enumerate(fixed) if c >= rank)  # the last bucket qualifies
    ub, c = fixed[i]
    if math.isinf(ub):
        return fixed[-2][0] if len(fixed) > 1 else None
    lower, prev = (0.0, 0.0) if i == 0 else fixed[i - 1]
    if i == 0 and ub <= 0:
        return ub
    in_bucket = c - prev
    if in_bucket <= 0:
        return ub
    return lower + (ub - lower) * (rank - prev) / in_bucket


def _le(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _labels(value: Any) -> dict[str, str]:
    """A labels cell as a dict (DuckDB MAP arrives as a list of pairs)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    return {str(k): str(v) for k, v in value}


# --- the runtime view over windows ---------------------------------------------------


@dataclass
class _Series:
    times: list[int] = field(default_factory=list)  # epoch microseconds, ascending
    values: list[float] = field(default_factory=list)


class Notes:
    """Notes counted by text, so a fleet gets one line per kind of gap."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def add(self, text: str) -> None:
        self._seen[text] += 1

    def lines(self, what: str = "windows") -> list[str]:
        return [t if n == 1 else f"{t} ({n} {what})" for t, n in self._seen.items()]


def _pick(series: dict[tuple, _Series], metric: str, notes: Notes) -> _Series | None:
    """The series of a metric to use (most samples, then smallest labels)."""
    if not series:
        return None
    if len(series) > 1:
        notes.add(
            f"{metric}: {len(series)} series in one window; used the one with the most samples"
        )
    key = min(series, key=lambda k: (-len(series[k].times), k))
    return series[key]


def window_metrics(
    store: Store,
    windows: pa.Table,
    present: set[str],
    notes: Notes,
) -> dict[int, dict[str, Any]]:
    """Runtime-view values per window key. ``windows``: key, service, instance,
    w_start, w_end (windows without an instance or bounds are skipped here). A
    window without any scrape gets ``scrapes`` 0 and no note: the caller says
    which rows those are, its own way."""
    out: dict[int, dict[str, Any]] = {k: {} for k in windows.column("key").to_pylist()}
    if windows.num_rows == 0:
        return out
    if "metric_samples" not in present:
        notes.add(
            "the store has no metric_samples table (no GC metrics ingested): "
            "runtime-view columns are NULL"
        )
    else:
        _metric_values(store, windows, out, notes)
    if "gc_cycles" not in present:
        notes.add(
            "the store has no gc_cycles table (no gctrace logs ingested): gctrace columns are NULL"
        )
    else:
        _gctrace_values(store, windows, out)
    return out


def _metric_values(
    store: Store,
    windows: pa.Table,
    out: dict[int, dict[str, Any]],
    notes: Notes,
) -> None:
    rows = queries.window_metric_samples(store, windows, list(WINDOW_METRICS))
    settings = queries.window_metric_settings(store, windows, list(SETTING_METRICS))
    # key -> metric -> series labels -> le ('' for none) -> samples
    grouped: dict[int, dict[str, dict[tuple, dict[str, _Series]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(_Series)))
    )
    times: dict[int, set[int]] = defaultdict(set)
    cols = [rows.column(c).to_pylist() for c in ("key", "metric", "labels", "t", "value")]
    for key, metric, labels, t, value in zip(*cols, strict=True):
        lab = _labels(labels)
        le = lab.pop("le", "")
        lab.pop("quantile", None)
        s = grouped[key][metric][tuple(sorted(lab.items()))][le]
        s.times.append(int(t))
        s.values.append(float(value))
        times[key].add(int(t))
    for key, metric, value in zip(
        *(settings.column(c).to_pylist() for c in ("key", "metric", "value")), strict=True
    ):
        col = "gogc_percent" if metric == M_GOGC else "gomemlimit_bytes"
        out[key][col] = float(value)
    for key, vals in out.items():
        vals["scrapes"] = len(times.get(key, ()))
        _fill_window(vals, grouped.get(key, {}), notes if vals["scrapes"] else Notes())
        for col, metric in (("gogc_percent", M_GOGC), ("gomemlimit_bytes", M_GOMEMLIMIT)):
            if col not in vals and vals["scrapes"]:
                notes.add(f"{metric}: no sample at or before the window end: {col} is NULL")


def _fill_window(
    vals: dict[str, Any], metrics: dict[str, dict[tuple, dict[str, _Series]]], notes: Notes
) -> None:
    def plain(metric: str) -> _Series | None:
        by_labels = {k: v[""] for k, v in metrics.get(metric, {}).items() if "" in v}
        s = _pick(by_labels, metric, notes)
        if s is None:
            notes.add(absent_note(metric))  # the window has scrapes: _fill_window's caller
        return s

    def increase(metric: str) -> tuple[float | None, float | None]:
        """(increase, seconds between first and last sample)."""
        s = plain(metric)
        if s is None:
            return None, None
        inc = counter_increase(s.values)
        if inc is None:
            notes.add(f"{metric}: fewer than two samples in the window")
            return None, None
        return inc, (s.times[-1] - s.times[0]) / 1e6

    def rate(inc: float | None, seconds: float | None, per: float) -> float | None:
        if inc is None or not seconds:
            return None
        return inc / seconds * per

    inc, secs = increase(M_CYCLES)
    vals["gc_cycles"] = inc
    vals["gc_cycles_per_min"] = rate(inc, secs, 60.0)
    inc, secs = increase(M_ALLOCS)
    vals["alloc_bytes"] = inc
    vals["alloc_bytes_per_sec"] = rate(inc, secs, 1.0)
    for prefix, metric in (("heap_live", M_HEAP_LIVE), ("heap_goal", M_HEAP_GOAL)):
        s = plain(metric)
        finite = [v for v in s.values if math.isfinite(v)] if s else []
        vals[f"{prefix}_mean_bytes"] = sum(finite) / len(finite) if finite else None
        vals[f"{prefix}_last_bytes"] = finite[-1] if finite else None

    vals["stw_pause_total_seconds"], _ = increase(f"{M_PAUSES}_sum")
    vals["stw_pauses"], _ = increase(f"{M_PAUSES}_count")
    vals["stw_pause_p99_seconds"] = _pause_quantile(metrics.get(f"{M_PAUSES}_bucket", {}), notes)

    gc, _ = increase(M_CPU_GC)
    total, _ = increase(M_CPU_TOTAL)
    idle, _ = increase(M_CPU_IDLE)
    vals["gc_cpu_seconds"], vals["total_cpu_seconds"], vals["idle_cpu_seconds"] = gc, total, idle
    vals["gc_cpu_fraction"] = gc / total if gc is not None and total else None
    busy = total - idle if total is not None and idle is not None else None
    vals["gc_cpu_fraction_busy"] = gc / busy if gc is not None and busy else None


def _pause_quantile(series: dict[tuple, dict[str, _Series]], notes: Notes) -> float | None:
    metric = f"{M_PAUSES}_bucket"
    if not series:
        notes.add(absent_note(metric))
        return None
    if len(series) > 1:
        notes.add(
            f"{metric}: {len(series)} series in one window; used the one with the most samples"
        )
    key = min(series, key=lambda k: (-sum(len(s.times) for s in series[k].values()), k))
    buckets = []
    for le, s in series[key].items():
        ub = _le(le)
        inc = counter_increase(s.values)
        if ub is not None and inc is not None:
            buckets.append((ub, inc))
    q = histogram_quantile(PAUSE_QUANTILE, buckets)
    if q is None:
        notes.add(f"{metric}: no pauses counted in the window: p99 is NULL")
    return q


def _gctrace_values(store: Store, windows: pa.Table, out: dict[int, dict[str, Any]]) -> None:
    # Instances with any gctrace rows: for them no cycle in the window means 0.
    rows, logged = queries.window_gc_cycles(store, windows)
    for key, n, live, goal in zip(
        *(rows.column(c).to_pylist() for c in ("key", "n", "live", "goal")), strict=True
    ):
        out[key].update(
            gctrace_cycles=int(n), gctrace_heap_live_mean_mb=live, gctrace_heap_goal_mean_mb=goal
        )
    for key in logged.column("key").to_pylist():
        out[key].setdefault("gctrace_cycles", 0)
