"""The trace questions by name, one table for every front end (CLI, Lab, report).

``ANSWERS``: name -> (tables it reads, the analysis, its options class).
``answer(name, path=..., store=..., selection=..., options=...)`` reads only
those tables, from one trace file or from the store's selected traces, and
runs the analysis; ``stw`` joins the store's gctrace when reading a store.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pyarrow as pa

from pyproflab.analyses import gotrace, gotrace_stw
from pyproflab.analyses.gotrace_data import TraceData
from pyproflab.errors import UsageError
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection

ANSWERS: dict[str, tuple[list[str], Callable[..., Any], type]] = {
    "goroutines": (["goroutines"], gotrace.goroutine_summary, gotrace.GoroutineOptions),
    "sched": (["transitions", "goroutines", "stacks"], gotrace.sched_latency, gotrace.SchedOptions),
    "stw": (["ranges", "metrics"], gotrace_stw.stw_gc, gotrace_stw.StwOptions),
    "tasks": (["tasks", "regions"], gotrace.task_latency, type(None)),
    "leaks": (["goroutines", "stacks"], gotrace.goroutine_counts, gotrace.LeakOptions),
}


# The numeric options' floor and whether it is excluded; the CLI's flags say the same.
_LOW = {"window_s": (0, True), "starved_p99_ms": (0, True), "top": (0, False)}
_LOW |= {"windows": (1, False), "min_growth": (0, False)}
_WHOLE = ("top", "windows", "min_growth")
# Windows are cut in whole nanoseconds: a shorter one is none (a ZeroDivisionError).
_SHORTEST_WINDOW_S = 1e-9
# goroutines' sort: by goroutine id, or by a time column, largest first.
SORTS = ("g", *gotrace.TIME_COLUMNS)


def options_of(name: str, spelled: Callable[[str], str] = str, **keywords: Any) -> Any:
    """The options object of question ``name`` from keywords (None when none are
    given), each checked: an unknown keyword, a wrong type, a number out of
    range or not finite, a window under a nanosecond or an unknown sort is one
    line naming it as ``spelled(keyword)`` spells it (the CLI: its flag).
    ``window_s=0`` was a ZeroDivisionError, ``window_s=-1`` an answer without
    windows, ``window_s=inf`` an OverflowError, ``sort='x'`` a ValueError."""
    if not keywords:
        return None
    cls = ANSWERS[name][2]
    known = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    unknown = sorted(set(keywords) - set(known))
    if unknown:
        raise UsageError(
            f"trace {name}: unknown option {unknown[0]!r} (known: {', '.join(known) or 'none'})"
        )
    for key, v in keywords.items():
        if key == "sort" and v not in SORTS:
            raise UsageError(f"{spelled(key)}={v!r}: expected one of {', '.join(SORTS)}")
        if key not in _LOW or (v is None and key == "top" and name == "goroutines"):
            continue
        low, open_ = _LOW[key]
        whole = key in _WHOLE
        number = not isinstance(v, bool) and isinstance(v, int if whole else (int, float))
        if not number or not math.isfinite(v) or not (v > low if open_ else v >= low):
            what = "a whole number" if whole else "a number"
            raise UsageError(
                f"{spelled(key)}={v!r}: expected {what} {'>' if open_ else '>='} {low}"
            )
        if key == "window_s" and v < _SHORTEST_WINDOW_S:
            raise UsageError(
                f"{spelled(key)}={v!r}: expected at least {_SHORTEST_WINDOW_S} s (one nanosecond)"
            )
    return cls(**keywords)


def load(
    name: str,
    *,
    path: str | os.PathLike | None = None,
    store: Store | None = None,
    selection: Selection | None = None,
) -> TraceData:
    """The traces ``name`` reads: one file, or a store's selection."""
    tables = ANSWERS[name][0]
    if path is not None:
        return TraceData.from_file(path, tables)
    if store is None:
        raise UsageError("give a trace file or a store")
    return TraceData.from_store(store, selection, tables)


def answer(
    name: str,
    *,
    path: str | os.PathLike | None = None,
    store: Store | None = None,
    selection: Selection | None = None,
    options: Any = None,
) -> Any:
    """The result of the trace question ``name`` (see ``ANSWERS``)."""
    if name not in ANSWERS:
        raise UsageError(f"unknown trace question {name!r}; one of {', '.join(ANSWERS)}")
    _, run, options_class = ANSWERS[name]
    data = load(name, path=path, store=store, selection=selection)
    if name == "tasks":
        return run(data)
    if name == "stw":
        return run(data, options, store=store if path is None else None)
    if name == "sched" and store is not None and path is None:
        options = options or gotrace.SchedOptions()
        options.throttling = throttling(store, data)
    return run(data, options)


THROTTLED = "container_cpu_cfs_throttled_periods_total"
PERIODS = "container_cpu_cfs_periods_total"
SLACK = timedelta(seconds=2)


def throttling(store: Store, data: TraceData) -> dict[int, tuple[int, int]]:
    """trace_id -> (throttled CFS periods, periods) the store has for each
    trace's instance over the trace, give or take ``SLACK`` (the counters are
    read just before and after it; cAdvisor's names)."""
    from pyproflab.store.traces import window_counter_deltas

    keys = data.traces
    when = keys.schema.field("time").type
    ends = [
        t + timedelta(microseconds=d // 1000)
        for t, d in zip(
            keys.column("time").to_pylist(), keys.column("duration_ns").to_pylist(), strict=True
        )
    ]
    windows = pa.table(
        {
            "key": keys.column("trace_id"),
            "service": keys.column("service"),
            "instance": keys.column("instance"),
            "w_start": pa.array([t - SLACK for t in keys.column("time").to_pylist()], when),
            "w_end": pa.array([t + SLACK for t in ends], when),
        }
    )
    got: dict[int, dict[str, float]] = {}
    for r in window_counter_deltas(store, windows, [THROTTLED, PERIODS]).to_pylist():
        got.setdefault(r["key"], {})[r["metric"]] = r["delta"]
    return {k: (int(v.get(THROTTLED, 0)), int(v.get(PERIODS, 0))) for k, v in got.items()}
