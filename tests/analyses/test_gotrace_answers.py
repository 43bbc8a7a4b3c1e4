"""Scheduler latency, tasks, leaks and STW on the committed traces, each
against what its program is known to do."""

from __future__ import annotations

import html

import numpy as np
import pyarrow.compute as pc
import pytest
from support.trace_helpers import trace_path

from pyproflab.analyses import gotrace
from pyproflab.analyses.gotrace_answers import answer, load
from pyproflab.display import render

pytestmark = pytest.mark.go


def test_nearest_rank() -> None:
    v = np.array([5, 1, 4, 2, 3])
    assert [gotrace.nearest_rank(v, p) for p in (20, 50, 90, 100)] == [1, 3, 5, 5]
    assert gotrace.nearest_rank(np.array([], np.int64), 99) == 0


def test_sched_latency_matches_the_runnable_waits() -> None:
    data = load("sched", path=trace_path("chan"))
    t = data.tables["transitions"]
    waits = t.filter(
        pc.and_(pc.equal(t["from_state"], 2), pc.equal(t["to_state"], 3))  # runnable, running
    )["duration_ns"].to_numpy()
    res = gotrace.sched_latency(data, gotrace.SchedOptions(window_s=0.05, top=3))
    row = res.per_trace.to_pylist()[0]
    assert row["count"] == len(waits) and row["max_ns"] == waits.max()
    assert row["p99_ns"] == np.sort(waits)[int(np.ceil(0.99 * len(waits))) - 1]
    assert sum(res.windows["count"].to_pylist()) == len(waits)
    assert res.longest["wait_ns"].to_pylist() == sorted(waits)[::-1][:3]


def test_tasks_and_regions_of_the_many_program() -> None:
    rows = {
        (r["kind"], r["type"]): r for r in answer("tasks", path=trace_path("many")).rows.to_pylist()
    }
    # 3,000 jobs, each one task with a sleep and a compute region, all inside the trace
    assert {k: r["count"] for k, r in rows.items()} == {
        ("task", "job"): 3000,
        ("region", "sleep"): 3000,
        ("region", "compute"): 3000,
    }
    # sleep regions sleep 0..600 µs plus scheduling: their median is above compute's
    assert rows[("region", "sleep")]["p50_ns"] > rows[("region", "compute")]["p50_ns"]


def test_the_leak_finder_names_the_leaked_goroutines_only() -> None:
    res = answer("leaks", path=trace_path("many"))
    suspects = [g for g in res.groups.to_pylist() if g["suspect"]]
    # tests/goprogs/traces/many parks 20 goroutines in main.leak per wave, forever
    assert [g["name"] for g in suspects] == ["main.leak"]
    assert suspects[0]["counts"][-1] == 200
    assert len(res.suspects) == 1 and "main.leak" in res.suspects[0]
    assert answer("leaks", path=trace_path("mutex")).suspects == []


def test_stw_counts_the_gc_heavy_program_s_cycles() -> None:
    res = answer("stw", path=trace_path("gcheavy"))
    reasons = set(res.pauses["reason"].to_pylist())
    assert {"GC sweep termination", "GC mark termination"} <= reasons
    cycles = sum(res.windows["gc_cycles"].to_pylist())
    # each GC cycle stops the world twice: sweep termination and mark termination
    sweep_terms = res.pauses["reason"].to_pylist().count("GC sweep termination")
    assert cycles >= 5 and abs(sweep_terms - cycles) <= 1
    assert any(v for v in res.windows["heap_goal_bytes"].to_pylist())


@pytest.mark.parametrize("question", ["goroutines", "sched", "stw", "tasks", "leaks"])
def test_an_answer_shows_itself_in_a_notebook(question: str) -> None:
    """Each answer's repr counts its tables (not the Arrow dump it was), its
    HTML view has its findings and tables, its pandas view is its main table."""
    res = answer(question, path=trace_path("many"))
    main = getattr(res, res.MAIN)
    assert res.to_pandas().shape == (main.num_rows, main.num_columns) and len(res) == main.num_rows
    assert repr(res).startswith(f"{type(res).__name__}({res.TABLES[0]} ")
    assert len(repr(res)) < 200
    page = res._repr_html_()
    assert page.startswith('<div class="pyproflab-gotrace">')
    for name in res.TABLES:
        t = getattr(res, name)
        assert f"<b>{name.replace('_', ' ')}</b> ({t.num_rows} rows)" in page
    for line in res.findings_list():
        assert f"<li>{html.escape(line)}</li>" in page
    assert str(res) == render(res, "text")
