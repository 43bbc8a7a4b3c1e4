"""Answers from Go execution traces: goroutines, scheduler latency, user tasks
and regions, goroutine counts and leaks (STW and GC: ``gotrace_stw``).

Rules:

- Per-goroutine time (``goroutine_summary``) is the helper's account
  (``pyproflab/_go/internal/trace/goroutines.go``): running, runnable, in a
  syscall and waiting (by reason), from the goroutine's creation (or the
  trace's start) to its exit (or the trace's end).
- Scheduler latency is the time a goroutine waited runnable before it ran:
  every runnable -> running transition, its duration. Percentiles are nearest
  rank (the smallest value with at least p% of the waits at or below it), in
  whole nanoseconds, per trace and per window of ``window_s`` seconds from the
  trace's start. The longest waits name the goroutine, its start function and
  the stack ``go tool trace -pprof=sched`` charges the wait to.
- CPU starvation is named for a trace whose p99 scheduler latency reaches
  ``starved_p99_ms``: the Go scheduler hands a runnable goroutine to an idle P
  within microseconds, so waits of milliseconds mean no P was free to run it
  or the process was not given a CPU (a CPU quota's throttling, an
  overloaded host). The line adds the throttled CFS periods when the store
  has them for the instance and time (``SchedOptions.throttling``).
- User tasks and regions: latency (end - start) per type over those that both
  began and ended in the trace, with the count of the others.
- Goroutine counts: goroutines alive at the end of each of ``windows`` equal
  windows, per group (start function and creation stack). A group is a leak
  suspect when its count never falls from one window to the next, grows by at
  least ``min_growth`` over the trace, and its goroutines are all alive and
  waiting (blocked) at the trace's end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyproflab.analyses.gotrace_data import TraceAnswer, TraceData
from pyproflab.schema import GO_STATES

PERCENTILES = (50, 90, 99)


def nearest_rank(values: np.ndarray, p: float) -> int:
    """The p-th percentile by nearest rank of ``values`` (sorted or not); 0 if empty."""
    if not len(values):
        return 0
    s = np.sort(values)
    k = max(1, math.ceil(p / 100 * len(s)))
    return int(s[k - 1])


def _spread(values: np.ndarray) -> dict[str, int]:
    out = {"count": int(len(values)), "total_ns": int(values.sum()) if len(values) else 0}
    for p in PERCENTILES:
        out[f"p{p}_ns"] = nearest_rank(values, p)
    out["max_ns"] = int(values.max()) if len(values) else 0
    return out


# --- goroutines ---------------------------------------------------------------------------


@dataclass
class GoroutineOptions:
    """``sort``: g (default) or a time column (running_ns ...), largest first;
    ``top``: how many rows to keep (None: all)."""

    sort: str = "g"
    top: int | None = None


@dataclass(repr=False)
class GoroutineSummary(TraceAnswer):
    """One row per goroutine: trace_id, instance, g, name, running_ns,
    runnable_ns, syscall_ns, waiting_ns, waiting (by reason), created/ended."""

    MAIN = "rows"
    TABLES = ("rows",)

    rows: pa.Table
    traces: pa.Table


TIME_COLUMNS = ("running_ns", "runnable_ns", "syscall_ns", "waiting_ns")


def goroutine_summary(data: TraceData, options: GoroutineOptions | None = None) -> GoroutineSummary:
    """Per-goroutine time in each state (module rules)."""
    opts = options or GoroutineOptions()
    g = data.tables["goroutines"]
    ids, instances = (data.traces.column(c).to_pylist() for c in ("trace_id", "instance"))
    inst = dict(zip(ids, instances, strict=True))
    rows = pa.table(
        {
            "trace_id": g.column("trace_id"),
            "instance": pa.array([inst[t] for t in g.column("trace_id").to_pylist()], pa.string()),
            "g": g.column("g"),
            "name": g.column("name"),
            **{c: g.column(c) for c in TIME_COLUMNS},
            "waiting": g.column("waiting"),
            "created_ns": g.column("created_ns"),
            "ended_ns": g.column("ended_ns"),
        }
    )
    if opts.sort == "g":
        rows = rows.sort_by([("trace_id", "ascending"), ("g", "ascending")])
    elif opts.sort in TIME_COLUMNS:
        rows = rows.sort_by(
            [(opts.sort, "descending"), ("trace_id", "ascending"), ("g", "ascending")]
        )
    else:
        raise ValueError(f"sort by g or one of {', '.join(TIME_COLUMNS)}, not {opts.sort!r}")
    if opts.top is not None:
        rows = rows.slice(0, opts.top)
    return GoroutineSummary(rows, data.traces)


# --- scheduler latency ----------------------------------------------------------------------


@dataclass
class SchedOptions:
    """``window_s``: window length; ``top``: longest waits listed;
    ``starved_p99_ms``: the p99 that names CPU starvation; ``throttling``:
    trace_id -> (throttled CFS periods, periods) over the trace, when known."""

    window_s: float = 1.0
    top: int = 10
    starved_p99_ms: float = 10.0
    throttling: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(repr=False)
class SchedLatency(TraceAnswer):
    """``per_trace`` and ``windows``: count, total, p50/p90/p99/max of the waits;
    ``longest``: the longest waits; ``findings``: one line per starved trace."""

    MAIN = "windows"
    TABLES = ("per_trace", "windows", "longest")
    FINDINGS = "findings"

    per_trace: pa.Table
    windows: pa.Table
    longest: pa.Table
    findings: list[str]
    options: SchedOptions


def _waits(data: TraceData) -> pa.Table:
    t = data.tables["transitions"]
    runnable, running = GO_STATES.index("runnable"), GO_STATES.index("running")
    mask = pc.and_(
        pc.equal(t.column("from_state"), runnable), pc.equal(t.column("to_state"), running)
    )
    w = t.filter(pc.and_(mask, pc.is_valid(t.column("duration_ns"))))
    return w.select(["trace_id", "t_ns", "g", "duration_ns", "from_stack_id"])


def sched_latency(data: TraceData, options: SchedOptions | None = None) -> SchedLatency:
    """Scheduler latency per trace and window, the longest waits, starvation (module rules)."""
    opts = options or SchedOptions()
    waits = _waits(data)
    tid = waits.column("trace_id").to_numpy()
    dur = waits.column("duration_ns").to_numpy()
    at = waits.column("t_ns").to_numpy()
    win_ns = int(opts.window_s * 1e9)
    per_trace, windows, findings = [], [], []
    for key in data.traces.to_pylist():
        sel = tid == key["trace_id"]
        d, t = dur[sel], at[sel]
        row = {"trace_id": key["trace_id"], "instance": key["instance"], **_spread(d)}
        per_trace.append(row)
        for w in range(int(key["duration_ns"] // win_ns) + 1):
            in_w = (t >= w * win_ns) & (t < (w + 1) * win_ns)
            start = key["time"] + timedelta(seconds=w * opts.window_s)
            windows.append(
                {
                    "trace_id": key["trace_id"],
                    "instance": key["instance"],
                    "window_start": start,
                    **_spread(d[in_w]),
                }
            )
        line = _starvation(key, row, opts)
        if line:
            findings.append(line)
    return SchedLatency(
        pa.Table.from_pylist(per_trace),
        pa.Table.from_pylist(windows),
        _longest(data, waits, opts.top),
        findings,
        opts,
    )


def _starvation(key: dict, row: dict, opts: SchedOptions) -> str | None:
    p99_ms = row["p99_ns"] / 1e6
    if not row["count"] or p99_ms < opts.starved_p99_ms:
        return None
    who = (
        key["instance"] or key.get("source") or f"trace {key['trace_id']}"
    )  # no instance: its file
    line = (
        f"CPU starvation on {who}: goroutines waited for a CPU {p99_ms:.1f} ms at p99 "
        f"(max {row['max_ns'] / 1e6:.1f} ms) over {row['count']} scheduler waits"
    )
    throttled = opts.throttling.get(key["trace_id"])
    if throttled and throttled[1]:
        line += f"; throttled in {throttled[0]} of {throttled[1]} CFS periods"
    return line


def _longest(data: TraceData, waits: pa.Table, top: int) -> pa.Table:
    order = waits.sort_by(
        [("duration_ns", "descending"), ("trace_id", "ascending"), ("t_ns", "ascending")]
    )
    names = {}
    g = data.tables.get("goroutines")
    if g is not None:
        names = dict(
            zip(
                zip(g.column("trace_id").to_pylist(), g.column("g").to_pylist(), strict=True),
                g.column("name").to_pylist(),
                strict=True,
            )
        )
    rows = []
    for r in order.slice(0, top).to_pylist():
        key = data.key(r["trace_id"])
        rows.append(
            {
                "trace_id": r["trace_id"],
                "instance": key["instance"],
                "g": r["g"],
                "name": names.get((r["trace_id"], r["g"]), ""),
                "wait_ns": r["duration_ns"],
                "at": key["time"] + timedelta(microseconds=r["t_ns"] // 1000),
                "stack": " <- ".join(data.stack(r["trace_id"], r["from_stack_id"])[:6]),
            }
        )
    return pa.Table.from_pylist(rows, LONGEST)


LONGEST = pa.schema(
    [
        ("trace_id", pa.int64()),
        ("instance", pa.string()),
        ("g", pa.int64()),
        ("name", pa.string()),
        ("wait_ns", pa.int64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("stack", pa.string()),
    ]
)


# --- user tasks and regions ------------------------------------------------------------


@dataclass(repr=False)
class TaskLatency(TraceAnswer):
    """One row per (kind task|region, type): count, p50/p90/p99/max of the
    complete ones, and ``incomplete`` (began or ended outside the trace)."""

    MAIN = "rows"
    TABLES = ("rows",)

    rows: pa.Table


def task_latency(data: TraceData) -> TaskLatency:
    """Latency per task and region type (module rules)."""
    rows = []
    for kind, name in (("task", "tasks"), ("region", "regions")):
        t = data.tables[name]
        start, end = t.column("start_ns"), t.column("end_ns")
        whole = pc.and_(pc.is_valid(start), pc.is_valid(end))
        types = t.column("type").to_pylist()
        dur = pc.subtract(end, start).to_numpy(zero_copy_only=False)
        ok = whole.to_numpy(zero_copy_only=False)
        for typ in sorted(set(types)):
            is_t = np.array([x == typ for x in types], dtype=bool)
            d = dur[is_t & ok].astype(np.int64)
            rows.append(
                {"kind": kind, "type": typ, **_spread(d), "incomplete": int((is_t & ~ok).sum())}
            )
    return TaskLatency(pa.Table.from_pylist(rows, TASKS))


# A trace without tasks or regions still has the table's columns (a CSV header).
TASKS = pa.schema(
    [
        ("kind", pa.string()),
        ("type", pa.string()),
        ("count", pa.int64()),
        ("total_ns", pa.int64()),
        *[(f"p{p}_ns", pa.int64()) for p in PERCENTILES],
        ("max_ns", pa.int64()),
        ("incomplete", pa.int64()),
    ]
)


# --- goroutine counts and leaks --------------------------------------------------------------


@dataclass
class LeakOptions:
    """``windows``: how many equal windows the trace is cut into; ``min_growth``:
    the least growth over the trace that makes a never-falling group a suspect."""

    windows: int = 10
    min_growth: int = 10


@dataclass(repr=False)
class GoroutineCounts(TraceAnswer):
    """``counts``: goroutines alive at each window's end per trace; ``groups``:
    per (trace, start function, creation stack) the counts over the windows and
    whether it is a leak ``suspect``; ``suspects``: one line each."""

    MAIN = "groups"
    TABLES = ("counts", "groups")
    FINDINGS = "suspects"

    counts: pa.Table
    groups: pa.Table
    suspects: list[str]


def goroutine_counts(data: TraceData, options: LeakOptions | None = None) -> GoroutineCounts:
    """Goroutines alive over time and the groups that only grow (module rules)."""
    opts = options or LeakOptions()
    g = data.tables["goroutines"]
    counts, groups, suspects = [], [], []
    for key in data.traces.to_pylist():
        rows = g.filter(pc.equal(g.column("trace_id"), key["trace_id"]))
        created = rows.column("created_ns").fill_null(0).to_numpy()
        ended = rows.column("ended_ns").fill_null(np.iinfo(np.int64).max).to_numpy()
        ends = [key["duration_ns"] * (i + 1) // opts.windows for i in range(opts.windows)]
        alive = np.array([(created <= t) & (ended > t) for t in ends])  # windows x goroutines
        for i, t in enumerate(ends):
            counts.append(
                {
                    "trace_id": key["trace_id"],
                    "instance": key["instance"],
                    "at": key["time"] + timedelta(microseconds=t // 1000),
                    "goroutines": int(alive[i].sum()),
                }
            )
        names = rows.column("name").to_pylist()
        stacks = rows.column("creation_stack_id").to_pylist()
        blocked = pc.equal(rows.column("end_state"), "waiting").to_numpy(zero_copy_only=False)
        for (name, sid), idx in _group_index(names, stacks).items():
            series = alive[:, idx].sum(axis=1)
            growth = int(series[-1] - series[0])
            suspect = bool(
                np.all(np.diff(series) >= 0)
                and growth >= opts.min_growth
                and alive[-1, idx].all()
                and blocked[idx].all()
            )
            where = " <- ".join(data.stack(key["trace_id"], sid)[:4])
            groups.append(
                {
                    "trace_id": key["trace_id"],
                    "instance": key["instance"],
                    "name": name,
                    "creation_stack": where,
                    "counts": [int(x) for x in series],
                    "growth": growth,
                    "suspect": suspect,
                }
            )
            if suspect:
                suspects.append(
                    f"possible goroutine leak on {key['instance']}: {name} grew from "
                    f"{int(series[0])} to {int(series[-1])} and never fell (created at {where})"
                )
    groups_t = pa.Table.from_pylist(groups) if groups else pa.table({})
    if groups:
        groups_t = groups_t.sort_by(
            [
                ("suspect", "descending"),
                ("growth", "descending"),
                ("trace_id", "ascending"),
                ("name", "ascending"),
            ]
        )
    return GoroutineCounts(pa.Table.from_pylist(counts), groups_t, suspects)


def _group_index(names: list[str], stacks: list[int]) -> dict[tuple[str, int], np.ndarray]:
    out: dict[tuple[str, int], list[int]] = {}
    for i, k in enumerate(zip(names, stacks, strict=True)):
        out.setdefault(k, []).append(i)
    return {k: np.array(v) for k, v in out.items()}
