"""Per-goroutine time in each state equals, to the nanosecond, what the tests'
independent Go tool (tests/goprogs/traces/gtimes: whole trace in memory, each
goroutine's transitions walked in order) computes from x/exp/trace's events."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.trace_helpers import TRACE_NAMES, trace_path

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
