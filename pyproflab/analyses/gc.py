"""The join: each profile beside the GC metrics of its instance and time window.

For every selected profile, its *window* is ``[window_start, window_end]``
when it was collected live, else ``[time, time + duration]``. Its *instance*
rows are the ``metric_samples``/``gc_cycles`` rows with the same instance (and
the same service, when both name one), whose time lies in the window (ends
included).

Rules (runtime view, from ``metric_samples``):

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

Profile view (CPU profiles only): the categories of ``gc_categories``; the GC
share is the sum of the exclusive categories over the profile total, and the
GC *mark* share counts only ``RUNTIME_COMPARABLE``, the work the runtime's
CPU classes call GC (so it is the one to set beside ``gc_cpu_fraction_busy``).

Per instance (service, version, instance): the profile view sums the GC and
total CPU of its CPU profiles; the runtime view applies the rules above to one
window spanning all of its selected profiles.

Anything missing (a table, a metric, a window, an instance) gives NULL
columns and a note in ``GcResult.notes``, never an error.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gc_categories import (
    CATEGORY_NAMES,
    GC_CATEGORIES,
    GcCategoriesResult,
    gc_categories,
)
from pyproflab.display import render
from pyproflab.store import queries
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection

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

PAUSE_QUANTILE = 0.99

# The categories the runtime's own ``/cpu/classes/gc/total`` counts (mark
# assists, dedicated/fractional/idle workers, pauses). Allocation, write
# barriers, sweeping and the scavenger are GC *cost* in the guide's sense but
# the runtime books them as user (or scavenge) time, so the like-for-like
# comparison with ``gc_cpu_fraction_busy`` is ``profile_gc_mark_share``.
RUNTIME_COMPARABLE: tuple[str, ...] = (
    "mark_dedicated",
    "mark_fractional",
    "mark_idle",
    "mark_worker_other",
    "mark_assist",
    "stw_other",
)

# --- result columns -----------------------------------------------------------------

_F = pa.float64()
_I = pa.int64()
_S = pa.string()
_T = pa.timestamp("us", tz="UTC")

# What the runtime-view columns are, in order (shared by both tables).
RUNTIME_FIELDS: tuple[pa.Field, ...] = (
    pa.field("scrapes", _I),  # distinct sample times of the metrics read, in the window
    pa.field("gc_cycles", _F),
    pa.field("gc_cycles_per_min", _F),
    pa.field("heap_live_mean_bytes", _F),
    pa.field("heap_live_last_bytes", _F),
    pa.field("heap_goal_mean_bytes", _F),
    pa.field("heap_goal_last_bytes", _F),
    pa.field("alloc_bytes", _F),
    pa.field("alloc_bytes_per_sec", _F),
    pa.field("stw_pauses", _F),
    pa.field("stw_pause_total_seconds", _F),
    pa.field("stw_pause_p99_seconds", _F),
    pa.field("gc_cpu_seconds", _F),
    pa.field("total_cpu_seconds", _F),
    pa.field("idle_cpu_seconds", _F),
    pa.field("gc_cpu_fraction", _F),
    pa.field("gc_cpu_fraction_busy", _F),
    pa.field("gogc_percent", _F),
    pa.field("gomemlimit_bytes", _F),
    pa.field("gctrace_cycles", _I),
    pa.field("gctrace_heap_live_mean_mb", _F),
    pa.field("gctrace_heap_goal_mean_mb", _F),
)

_ID_FIELDS: tuple[pa.Field, ...] = (
    pa.field("service", _S),
    pa.field("version", _S),
    pa.field("instance", _S),
)

PROFILES_SCHEMA = pa.schema(
    [
        pa.field("profile_id", _I, nullable=False),
        *_ID_FIELDS,
        pa.field("profile_type", _S),
        pa.field("window_start", _T),
        pa.field("window_end", _T),
        *RUNTIME_FIELDS,
        pa.field("profile_cpu_ns", _I),
        pa.field("profile_gc_cpu_ns", _I),
        pa.field("profile_gc_share", _F),
        pa.field("profile_gc_mark_share", _F),
        *[pa.field(f"gc_{name}_ns", _I) for name in CATEGORY_NAMES],
    ]
)

INSTANCES_SCHEMA = pa.schema(
    [
        *_ID_FIELDS,
        pa.field("profiles", _I, nullable=False),
        pa.field("cpu_profiles", _I, nullable=False),
        pa.field("window_start", _T),
        pa.field("window_end", _T),
        pa.field("profile_gc_share", _F),
        pa.field("profile_gc_mark_share", _F),
        *RUNTIME_FIELDS,
        pa.field("profile_cpu_ns", _I),
        pa.field("profile_gc_cpu_ns", _I),
        pa.field("profile_gc_mark_cpu_ns", _I),
    ]
)

CATEGORIES_SCHEMA = pa.schema(
    [
        pa.field("profile_id", _I, nullable=False),
        pa.field("category", _S, nullable=False),
        pa.field("cpu_ns", _I, nullable=False),
        pa.field("share", _F, nullable=False),
        pa.field("samples", _I, nullable=False),
        pa.field("plain_cpu_ns", _I, nullable=False),
        pa.field("plain_share", _F, nullable=False),
    ]
)


# --- pure helpers -------------------------------------------------------------------


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


class _Notes:
    """Notes counted by text, so a fleet gets one line per kind of gap."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def add(self, text: str) -> None:
        self._seen[text] += 1

    def lines(self, what: str = "windows") -> list[str]:
        return [t if n == 1 else f"{t} ({n} {what})" for t, n in self._seen.items()]


def _pick(series: dict[tuple, _Series], metric: str, notes: _Notes) -> _Series | None:
    """The series of a metric to use (most samples, then smallest labels)."""
    if not series:
        return None
    if len(series) > 1:
        notes.add(
            f"{metric}: {len(series)} series in one window; used the one with the most samples"
        )
    key = min(series, key=lambda k: (-len(series[k].times), k))
    return series[key]


def _window_metrics(
    store: Store, windows: pa.Table, present: set[str], notes: _Notes
) -> dict[int, dict[str, Any]]:
    """Runtime-view values per window key. ``windows``: key, service, instance,
    w_start, w_end (windows without an instance or bounds are skipped here)."""
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
    store: Store, windows: pa.Table, out: dict[int, dict[str, Any]], notes: _Notes
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
        if not vals["scrapes"]:
            # One note for a window without any metrics, not one per metric.
            notes.add("no GC metrics of the instance in the window: runtime-view columns are NULL")
        _fill_window(vals, grouped.get(key, {}), notes if vals["scrapes"] else _Notes())
        for col, metric in (("gogc_percent", M_GOGC), ("gomemlimit_bytes", M_GOMEMLIMIT)):
            if col not in vals and vals["scrapes"]:
                notes.add(f"{metric}: no sample at or before the window end: {col} is NULL")


def _fill_window(
    vals: dict[str, Any], metrics: dict[str, dict[tuple, dict[str, _Series]]], notes: _Notes
) -> None:
    def plain(metric: str) -> _Series | None:
        by_labels = {k: v[""] for k, v in metrics.get(metric, {}).items() if "" in v}
        s = _pick(by_labels, metric, notes)
        if s is None:
            notes.add(f"{metric}: no samples in the window")
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


def _pause_quantile(series: dict[tuple, dict[str, _Series]], notes: _Notes) -> float | None:
    metric = f"{M_PAUSES}_bucket"
    if not series:
        notes.add(f"{metric}: no samples in the window")
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


# --- the result ---------------------------------------------------------------------


@dataclass
class GcResult:
    """GC metrics per profile and per instance, with the profile view of CPU profiles.

    ``profiles`` (``PROFILES_SCHEMA``): one row per selected profile.
    ``instances`` (``INSTANCES_SCHEMA``): one row per (service, version, instance).
    ``categories`` (``CATEGORIES_SCHEMA``): per CPU profile and category.
    ``notes``: what was missing, one line per kind.
    """

    profiles: pa.Table
    instances: pa.Table
    categories: pa.Table
    notes: list[str] = field(default_factory=list)
    category_results: dict[int, GcCategoriesResult] = field(default_factory=dict, repr=False)

    def to_arrow(self) -> pa.Table:
        return self.profiles

    def to_pandas(self):
        return self.profiles.to_pandas()

    def __len__(self) -> int:
        return self.profiles.num_rows

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __repr__(self) -> str:
        return (
            f"GcResult({self.profiles.num_rows} profiles, {self.instances.num_rows} "
            f"instances, {len(self.notes)} notes)"
        )


def _windows_of(table: pa.Table, key: str) -> pa.Table:
    """Key, service, instance and window bounds of the rows that have all of them."""
    cols = {
        c: table.column(c).to_pylist() for c in (key, "service", "instance", "w_start", "w_end")
    }
    keep = [
        i
        for i in range(table.num_rows)
        if cols["instance"][i] is not None
        and cols["w_start"][i] is not None
        and cols["w_end"][i] is not None
    ]
    return pa.table(
        {
            "key": pa.array([cols[key][i] for i in keep], _I),
            "service": pa.array([cols["service"][i] for i in keep], _S),
            "instance": pa.array([cols["instance"][i] for i in keep], _S),
            "w_start": pa.array([cols["w_start"][i] for i in keep], _T),
            "w_end": pa.array([cols["w_end"][i] for i in keep], _T),
        }
    )


def gc(store: Store, selection: Selection | None = None, *, categories: bool = True) -> GcResult:
    """Join the selected profiles with their instances' GC metrics (see the module rules).

    ``categories=False`` skips reading CPU profiles' stacks (runtime view only).
    """
    profiles = queries.profile_windows(store, selection)
    notes = _Notes()
    present = queries.table_names(store)
    if profiles.num_rows == 0:
        return GcResult(
            PROFILES_SCHEMA.empty_table(),
            INSTANCES_SCHEMA.empty_table(),
            CATEGORIES_SCHEMA.empty_table(),
            ["no profiles selected"],
        )

    ids = profiles.column("profile_id").to_pylist()
    meta = {
        c: profiles.column(c).to_pylist()
        for c in ("service", "version", "instance", "profile_type", "w_start", "w_end")
    }
    for i in range(len(ids)):
        if meta["instance"][i] is None:
            notes.add("profile without an instance: runtime-view columns are NULL")
        elif meta["w_start"][i] is None:
            notes.add("profile without a time or collection window: runtime-view columns are NULL")
    windows = _windows_of(profiles, "profile_id")
    runtime = _window_metrics(store, windows, present, notes)

    # Profile view: the categories of every CPU profile.
    cat_results: dict[int, GcCategoriesResult] = {}
    if categories:
        for pid, ptype in zip(ids, meta["profile_type"], strict=True):
            if ptype == "cpu":
                cat_results[pid] = gc_categories(store.profile(pid))

    rows: dict[str, list] = {f.name: [] for f in PROFILES_SCHEMA}
    for i, pid in enumerate(ids):
        rows["profile_id"].append(pid)
        for c in ("service", "version", "instance", "profile_type"):
            rows[c].append(meta[c][i])
        rows["window_start"].append(meta["w_start"][i])
        rows["window_end"].append(meta["w_end"][i])
        vals = runtime.get(pid, {})
        for f in RUNTIME_FIELDS:
            rows[f.name].append(vals.get(f.name))
        r = cat_results.get(pid)
        rows["profile_cpu_ns"].append(r.total if r else None)
        rows["profile_gc_cpu_ns"].append(r.gc if r else None)
        rows["profile_gc_share"].append(r.gc_share if r and r.total else None)
        mark = sum(r.value(n) for n in RUNTIME_COMPARABLE) if r and r.total else None
        rows["profile_gc_mark_share"].append(mark / r.total if r and mark is not None else None)
        for name in CATEGORY_NAMES:
            rows[f"gc_{name}_ns"].append(r.value(name) if r else None)
    profile_table = pa.table(rows, schema=PROFILES_SCHEMA)

    cat_rows: dict[str, list] = {f.name: [] for f in CATEGORIES_SCHEMA}
    for pid, r in cat_results.items():
        for x in r.rows.to_pylist():
            for col, src in (
                ("category", "category"),
                ("cpu_ns", "cpu"),
                ("share", "share"),
                ("samples", "samples"),
                ("plain_cpu_ns", "plain_cpu"),
                ("plain_share", "plain_share"),
            ):
                cat_rows[col].append(x[src])
            cat_rows["profile_id"].append(pid)
    cat_table = pa.table(cat_rows, schema=CATEGORIES_SCHEMA)

    instance_table = _instances(store, profile_table, present, notes)
    return GcResult(profile_table, instance_table, cat_table, notes.lines("profiles"), cat_results)


def _instances(store: Store, profiles: pa.Table, present: set[str], notes: _Notes) -> pa.Table:
    """Per (service, version, instance): profile view sums, runtime view over the span."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in profiles.to_pylist():
        groups[(row["service"], row["version"], row["instance"])].append(row)
    keys = sorted(groups, key=lambda k: tuple((x is None, x or "") for x in k))
    spans = []
    for n, key in enumerate(keys):
        starts = [r["window_start"] for r in groups[key] if r["window_start"] is not None]
        ends = [r["window_end"] for r in groups[key] if r["window_end"] is not None]
        spans.append(
            (n, key[0], key[2], min(starts) if starts else None, max(ends) if ends else None)
        )
    span_table = pa.table(
        {
            "key": pa.array([s[0] for s in spans], _I),
            "service": pa.array([s[1] for s in spans], _S),
            "instance": pa.array([s[2] for s in spans], _S),
            "w_start": pa.array([s[3] for s in spans], _T),
            "w_end": pa.array([s[4] for s in spans], _T),
        }
    )
    # Notes from the per-profile pass already name every gap; don't repeat them.
    runtime = _window_metrics(store, _windows_of(span_table, "key"), present, _Notes())
    out: dict[str, list] = {f.name: [] for f in INSTANCES_SCHEMA}
    for (n, _, _, start, end), key in zip(spans, keys, strict=True):
        rows = groups[key]
        cpu = [r for r in rows if r["profile_cpu_ns"] is not None]
        total = sum(r["profile_cpu_ns"] for r in cpu)
        gc_ns = sum(r["profile_gc_cpu_ns"] for r in cpu)
        mark_ns = sum(r[f"gc_{n}_ns"] for r in cpu for n in RUNTIME_COMPARABLE)
        out["service"].append(key[0])
        out["version"].append(key[1])
        out["instance"].append(key[2])
        out["profiles"].append(len(rows))
        out["cpu_profiles"].append(len(cpu))
        out["window_start"].append(start)
        out["window_end"].append(end)
        out["profile_gc_share"].append(gc_ns / total if total else None)
        out["profile_gc_mark_share"].append(mark_ns / total if total else None)
        vals = runtime.get(n, {})
        for f in RUNTIME_FIELDS:
            out[f.name].append(vals.get(f.name))
        out["profile_cpu_ns"].append(total if cpu else None)
        out["profile_gc_cpu_ns"].append(gc_ns if cpu else None)
        out["profile_gc_mark_cpu_ns"].append(mark_ns if cpu else None)
    return pa.table(out, schema=INSTANCES_SCHEMA)


__all__ = [
    "CATEGORIES_SCHEMA",
    "GC_CATEGORIES",
    "INSTANCES_SCHEMA",
    "PROFILES_SCHEMA",
    "GcResult",
    "counter_increase",
    "gc",
    "histogram_quantile",
]
