"""Per-goroutine time in each state equals, to the nanosecond, what the tests'
independent Go tool (tests/goprogs/traces/gtimes: whole trace in memory, each
goroutine's transitions walked in order) computes from x/exp/trace's events."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support.trace_helpers import TRACE_NAMES, trace_path

from pyproflab.analyses.gotrace import nearest_rank
from pyproflab.analyses.gotrace_answers import answer

pytestmark = pytest.mark.go

STATES = ("running_ns", "runnable_ns", "syscall_ns", "waiting_ns")


@pytest.mark.parametrize("name", TRACE_NAMES)
def test_goroutine_times_equal_the_independent_account(name: str, gtimes_bin: Path) -> None:
    out = subprocess.run(
        [str(gtimes_bin), str(trace_path(name))], capture_output=True, text=True, check=True
    ).stdout
    want = {}
    for line in out.splitlines():
        d = json.loads(line)
        want[d["g"]] = (*(d[s] for s in STATES), {k: v for k, v in d["waiting"].items() if v})
    rows = answer("goroutines", path=trace_path(name)).rows.to_pylist()
    got = {
        r["g"]: (*(r[s] for s in STATES), {w["reason"]: w["ns"] for w in r["waiting"] if w["ns"]})
        for r in rows
    }
    assert got == want
    assert sum(v[0] for v in got.values()) > 0  # some goroutine ran


@pytest.mark.parametrize("name", [*TRACE_NAMES, "cpulimit-quota", "cpulimit-free"])
def test_scheduler_waits_equal_the_independent_account(name: str, gtimes_bin: Path) -> None:
    """Every runnable -> running wait, counted from the transition into runnable
    as `go tool trace -pprof=sched` does: a runnable -> runnable transition (the
    quota run has 103) does not start a new wait."""
    out = subprocess.run(
        [str(gtimes_bin), str(trace_path(name))], capture_output=True, text=True, check=True
    ).stdout
    waits = [w for line in out.splitlines() for w in json.loads(line)["runnable_waits"]]
    values = np.array(sorted(waits), dtype=np.int64)
    res = answer("sched", path=trace_path(name))
    row = res.per_trace.to_pylist()[0]
    want = {"count": len(values), "total_ns": int(values.sum()), "max_ns": int(values.max())}
    want |= {f"p{p}_ns": nearest_rank(values, p) for p in (50, 90, 99)}
    assert {k: row[k] for k in want} == want
    longest = [r["wait_ns"] for r in res.longest.to_pylist()]
    assert longest == [int(v) for v in values[::-1][: len(longest)]]
