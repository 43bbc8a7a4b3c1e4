"""Stop-the-world pauses and GC phases from execution traces, per window,
beside the gctrace cycles and GC metrics stored for the same instance and time.

Rules:

- A pause is a ``stop-the-world (REASON)`` range of the trace; its reason is
  the runtime's (``GC sweep termination``, ``GC mark termination``, ``start
  trace`` ...). A GC cycle is a ``GC concurrent mark phase`` range; mark
  assists (``GC mark assist``, per goroutine) and sweeping (``GC incremental
  sweep``, per P) add up their ranges' time. A range still open at the
  trace's end ends there.
- Windows are ``window_s`` seconds from each trace's start; a range belongs to
  the window it starts in. The heap goal is the trace's last
  ``/gc/heap/goal:bytes`` sample in the window.
- With a store, each window is joined with the gctrace cycles of the trace's
  instance (and service) logged inside it: their count, their
  stop-the-world wall clock (sweep termination + mark termination) and mark
  phase, as gctrace prints them in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pyarrow as pa

from pyproflab.analyses.gotrace_data import TraceAnswer, TraceData
from pyproflab.store.connection import Store
from pyproflab.store.traces import window_gctrace

_STW = re.compile(r"^stop-the-world \((.*)\)$")
MARK = "GC concurrent mark phase"
ASSIST = "GC mark assist"
SWEEP = "GC incremental sweep"
HEAP_GOAL = "/gc/heap/goal:bytes"


@dataclass
class StwOptions:
    """``window_s``: the window length in seconds."""

    window_s: float = 1.0


@dataclass(repr=False)
class StwReport(TraceAnswer):
    """``pauses``: every STW pause; ``windows``: per trace and window the
    pauses, GC cycles, assists, sweeping, heap goal and the gctrace join;
    ``findings``: one line per trace."""

    MAIN = "windows"
    TABLES = ("pauses", "windows")
    FINDINGS = "findings"

    pauses: pa.Table
    windows: pa.Table
    findings: list[str]
    options: StwOptions


def _ranges(data: TraceData, trace_id: int, duration_ns: int) -> list[dict]:
    r = data.tables["ranges"]
    rows = [x for x in r.to_pylist() if x["trace_id"] == trace_id]
    for x in rows:
        x["end_ns"] = duration_ns if x["end_ns"] is None else x["end_ns"]
        x["dur"] = x["end_ns"] - x["start_ns"]
    return rows


def stw_gc(
    data: TraceData, options: StwOptions | None = None, store: Store | None = None
) -> StwReport:
    """Pauses and GC phases per window, joined with the store's gctrace (module rules)."""
    opts = options or StwOptions()
    win_ns = int(opts.window_s * 1e9)
    pauses, windows, findings = [], [], []
    metrics = data.tables.get("metrics")
    for key in data.traces.to_pylist():
        ranges = _ranges(data, key["trace_id"], key["duration_ns"])
        n_windows = int(key["duration_ns"] // win_ns) + 1
        for x in ranges:
            m = _STW.match(x["name"])
            if m:
                pauses.append(
                    {
                        "trace_id": key["trace_id"],
                        "instance": key["instance"],
                        "reason": m.group(1),
                        "duration_ns": x["dur"],
                        "at": key["time"] + timedelta(microseconds=x["start_ns"] // 1000),
                    }
                )
        for w in range(n_windows):
            lo, hi = w * win_ns, (w + 1) * win_ns
            inw = [x for x in ranges if lo <= x["start_ns"] < hi]
            stw = [x["dur"] for x in inw if _STW.match(x["name"])]
            windows.append(
                {
                    "trace_id": key["trace_id"],
                    "instance": key["instance"],
                    "service": key["service"],
                    "window_start": key["time"] + timedelta(seconds=w * opts.window_s),
                    "window_end": key["time"] + timedelta(seconds=(w + 1) * opts.window_s),
                    "stw_count": len(stw),
                    "stw_total_ns": int(sum(stw)),
                    "stw_max_ns": int(max(stw, default=0)),
                    "gc_cycles": sum(1 for x in inw if x["name"] == MARK),
                    "gc_mark_ns": int(sum(x["dur"] for x in inw if x["name"] == MARK)),
                    "assist_ns": int(sum(x["dur"] for x in inw if x["name"] == ASSIST)),
                    "sweep_ns": int(sum(x["dur"] for x in inw if x["name"] == SWEEP)),
                    "heap_goal_bytes": _last_metric(metrics, key["trace_id"], HEAP_GOAL, lo, hi),
                }
            )
    table = pa.Table.from_pylist(windows)
    if store is not None and table.num_rows:
        table = _join_gctrace(store, table)
    for key in data.traces.to_pylist():
        findings.append(
            _finding(key, [p for p in pauses if p["trace_id"] == key["trace_id"]], table)
        )
    return StwReport(pa.Table.from_pylist(pauses, PAUSES), table, findings, opts)


PAUSES = pa.schema(
    [
        ("trace_id", pa.int64()),
        ("instance", pa.string()),
        ("reason", pa.string()),
        ("duration_ns", pa.int64()),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)


def _last_metric(
    metrics: pa.Table | None, trace_id: int, name: str, lo: int, hi: int
) -> int | None:
    if metrics is None:
        return None
    t = metrics.to_pylist() if metrics.num_rows < 100_000 else []
    vals = [
        m["value"]
        for m in t
        if m["trace_id"] == trace_id and m["name"] == name and lo <= m["t_ns"] < hi
    ]
    return vals[-1] if vals else None


def _join_gctrace(store: Store, windows: pa.Table) -> pa.Table:
    keyed = pa.table(
        {
            "key": pa.array(np.arange(windows.num_rows), pa.int64()),
            "service": windows.column("service"),
            "instance": windows.column("instance"),
            "w_start": windows.column("window_start"),
            "w_end": windows.column("window_end"),
        }
    )
    cycles = window_gctrace(store, keyed).to_pylist()
    n = np.zeros(windows.num_rows, np.int64)
    stw = np.zeros(windows.num_rows)
    mark = np.zeros(windows.num_rows)
    for c in cycles:
        n[c["key"]] += 1
        stw[c["key"]] += c["stw_ms"]
        mark[c["key"]] += c["mark_ms"]
    return (
        windows.append_column("gctrace_cycles", pa.array(n))
        .append_column("gctrace_stw_ms", pa.array(stw))
        .append_column("gctrace_mark_ms", pa.array(mark))
    )


def _finding(key: dict, pauses: list[dict], windows: pa.Table) -> str:
    who = (
        key["instance"] or key.get("source") or f"trace {key['trace_id']}"
    )  # no instance: its file
    if not pauses:
        return f"{who}: no stop-the-world pauses"
    d = np.array([p["duration_ns"] for p in pauses])
    line = (
        f"{who}: {len(d)} stop-the-world pause{'s' * (len(d) != 1)}, "
        f"{d.sum() / 1e6:.2f} ms in all, "
        f"longest {d.max() / 1e6:.2f} ms ({pauses[int(d.argmax())]['reason']})"
    )
    mine = windows.filter(pa.compute.equal(windows.column("trace_id"), key["trace_id"]))
    line += f"; {sum(mine.column('gc_cycles').to_pylist())} GC cycles in the trace"
    if "gctrace_cycles" in mine.column_names:
        n = sum(mine.column("gctrace_cycles").to_pylist())
        if n:
            ms = sum(mine.column("gctrace_stw_ms").to_pylist())
            line += f", {n} in gctrace ({ms:.2f} ms stop-the-world)"
    return line
