"""The CPU-limit story (tests/goprogs/traces/cpulimit, recorded by
tests/support/record_traces.py): a service with GOMAXPROCS=2 under load, in a
cgroup with a 0.25 CPU quota and again without one. Scheduler latency names
the starvation of the quota run, with its throttled periods, and none for the
free run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.trace_helpers import TRACES, cpulimit_store

from pyproflab.analyses.gotrace_answers import answer
from pyproflab.store import Selection

pytestmark = pytest.mark.go


def test_the_quota_run_is_starved_and_the_free_run_is_not(tmp_path: Path) -> None:
    runs = json.loads((TRACES / "cpulimit.json").read_text())
    quota = runs["quota"]
    throttled = quota["cpu_stat_end"]["nr_throttled"] - quota["cpu_stat_start"]["nr_throttled"]
    periods = quota["cpu_stat_end"]["nr_periods"] - quota["cpu_stat_start"]["nr_periods"]
    assert throttled > periods / 2  # the recording really was throttled
    with cpulimit_store(tmp_path / "s.duckdb") as store:
        res = answer("sched", store=store, selection=Selection(service="cpulimit"))
    assert len(res.findings) == 1, res.findings
    line = res.findings[0]
    assert line.startswith("CPU starvation on quota:")
    assert f"throttled in {throttled} of {periods} CFS periods" in line
    by = {r["instance"]: r for r in res.per_trace.to_pylist()}
    assert by["quota"]["p99_ns"] > 10 * by["free"]["p99_ns"]
    assert by["free"]["p99_ns"] < 10_000_000


def test_the_report_names_the_starvation_in_one_line(tmp_path: Path) -> None:
    from pyproflab.reports.html_report import render_report
    from pyproflab.workflows.report import sections

    sel = Selection(service="cpulimit")
    with cpulimit_store(tmp_path / "s.duckdb") as store:
        page = render_report(sections(store, sel, "s.duckdb")).html
    lines = [ln for ln in page.split("<li>") if ln.startswith("CPU starvation")]
    assert len(lines) == 1 and lines[0].startswith("CPU starvation on quota:"), lines
    assert "throttled in" in lines[0] and "CPU starvation on free" not in page
