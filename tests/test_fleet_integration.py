"""The whole loop against real processes (issue 3's integration acceptance).

The checks run on one live run recorded once (tests/support/fleet_integration_run.py,
tests/testdata/fleet_integration): how many scrapes, cycles and samples a live
window catches depends on the machine's load, so a live run here could fail by
chance. The same checks on a fresh live run are the ``fleet-integration``
bench section (``python -m bench --only fleet-integration``).

Two notesd instances (GOGC 50 and 200, ``GODEBUG=gctrace=1`` to a file each,
pprof behind a bearer token) are scraped every second by a real Prometheus
(Debian's ``/usr/bin/prometheus`` on 127.0.0.1, stopped by PID) while loadgen
drives a ramp of load at them for about 20 s; ``collect`` takes profiles and
/metrics from both meanwhile. Then Prometheus' ``query_range`` is imported
through ``PrometheusSource`` (its ``instance`` label mapped to ours) and the
gctrace logs are ingested, and the stored numbers are checked against the
services' own:

1. GC cycles: the increase of ``go_gc_cycles_total_gc_cycles_total`` between
   two Prometheus scrapes equals the number of gctrace cycles whose time lies
   between them, within 1.
2. ``go_memstats_next_gc_bytes`` equals the gctrace goal within its MiB rounding.
3. The profiles carry their windows and instance metadata, and ``lab.gc``
   gives a runtime view (and a profile view) for each instance.
4. One GC category's share of a collected CPU profile equals
   ``go tool pprof -top -focus=REGEX`` (tests/analyses/test_gc_categories.py checks all).

How the two clocks meet (runtime/mgc.go, mgcpacer.go, Go 1.21+):

- A gctrace line ``gc N @S s ... G MB goal`` is printed when cycle N ends;
  ``@S`` is when it *started* (``work.tSweepTerm - runtimeInitTime``), so its
  wall time is the process start plus S. The harness records ``started_at``
  just before the exec and the runtime's clock starts a few ms later, so the
  times computed here are early by that much.
- ``G`` is ``lastHeapGoal``: the heap goal in effect *during* cycle N, set
  when cycle N-1 ended (``commit``), read at the end of N's mark phase
  (``endCycle``), when it may have been raised to ``trigger + 64 KiB``.
- The cycle counter (``/gc/cycles/total:gc-cycles``, i.e. ``numgc``) counts
  completed cycles, and ``next_gc`` is ``heapGoal()`` now. So a scrape that
  saw N cycles saw the goal that cycle N+1 prints as its goal: compare
  ``next_gc >> 20`` with the goal of line ``gc N+1``.
- Prometheus stamps a scrape with its start time, and ``query_range`` returns
  at each step the latest scrape at or before it. The query
  ``timestamp(go_gc_cycles_total_gc_cycles_total)`` is imported too, so each
  stored point knows the scrape it came from.

Check 1 takes two kinds of window. From the process start to each scrape: a
cycle in progress at the scrape (or one moved across it by the few ms between
the two clocks) makes the counts differ by one, hence the issue's ±1. And
from the first to the last scrape at which no gctrace cycle was in progress
within ``EDGE_MARGIN`` (the idle ones before and after the load), where the
counts should agree exactly; ±1 is asserted.

Measured on the 2-core box (Go 1.26, GOGC 50 under load, ~20 cycles/s):
``next_gc >> 20`` equalled the goal of ``gc N+1`` at every scrape; gctrace
times came out early by up to ~15 ms against Prometheus' stamps.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.fleet_integration_run import (
    CPU_SECONDS,
    CYCLES_Q,
    SERVICE,
    STAMP_Q,
    TOKEN,
    Run,
    wait_idle,
)
from support.gc_categories_helpers import shown, value_index

LIVE = os.environ.get("PYPROFLAB_FLEET_IT") == "live"  # the bench's live run
EDGE_MARGIN = 0.05  # s: no cycle within this of a window edge (clock offsets are ms)
NEXT_GC = "go_memstats_next_gc_bytes"
MiB = 2**20


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The recorded run (tests/testdata/fleet_integration); a live one when the
    bench asks (PYPROFLAB_FLEET_IT=live: needs Go and /usr/bin/prometheus)."""
    from support import fleet_integration_run as fir

    tmp = tmp_path_factory.mktemp("integration")
    if not LIVE:
        yield fir.load_run(tmp)
        return
    if not fir.PROMETHEUS.exists():
        pytest.skip(fir.SKIP_NO_PROMETHEUS)
    run = fir.live_run(tmp)
    # A few timeouts on a crowded box are not this test's business.
    errors, requests = run.load_errors
    assert errors <= 0.01 * requests, run.load_errors
    yield run


def us(t: datetime) -> int:
    """``t`` in whole microseconds since the epoch (the store's precision)."""
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


@dataclass(frozen=True)
class Scrape:
    """One Prometheus scrape of one instance, as stored."""

    time: float  # the scrape's own timestamp (Unix s)
    cycles: int
    next_gc: int


@dataclass(frozen=True)
class Cycle:
    """One gctrace line, as stored."""

    num: int
    start: float  # Unix s: process start + @seconds
    end: float  # start + the three clock phases
    goal_mb: int


def scrapes_of(store, instance: str) -> list[Scrape]:
    """Distinct scrapes from the imported query_range points (each step repeats
    the latest scrape; the timestamp() series says which one it was)."""
    rows = store.sql(
        """
        SELECT s.value AS stamp, c.value AS cycles, n.value AS next_gc
        FROM metric_samples s
        JOIN metric_samples c ON c.instance = s.instance AND c.time = s.time
        JOIN metric_samples n ON n.instance = s.instance AND n.time = s.time
        WHERE s.instance = ? AND s.metric = ? AND c.metric = ? AND n.metric = ?
          AND c.source LIKE '%query_range%' AND n.source LIKE '%query_range%'
        ORDER BY s.time
        """,
        [instance, STAMP_Q, CYCLES_Q, NEXT_GC],
    ).to_pylist()
    out: dict[float, Scrape] = {}
    for r in rows:
        out.setdefault(r["stamp"], Scrape(r["stamp"], int(r["cycles"]), int(r["next_gc"])))
    return sorted(out.values(), key=lambda s: s.time)


def cycles_of(store, instance: str) -> list[Cycle]:
    rows = store.sql(
        """
        SELECT gc_num, epoch_us(time) / 1e6 AS start,
               (clock_sweep_term_ms + clock_mark_ms + clock_mark_term_ms) / 1e3 AS dur,
               heap_goal_mb
        FROM gc_cycles WHERE instance = ? ORDER BY gc_num
        """,
        [instance],
    ).to_pylist()
    return [Cycle(r["gc_num"], r["start"], r["start"] + r["dur"], r["heap_goal_mb"]) for r in rows]


def quiet(s: Scrape, cycles: list[Cycle]) -> bool:
    """No gctrace cycle in progress within EDGE_MARGIN of the scrape."""
    return all(not (c.start - EDGE_MARGIN <= s.time <= c.end + EDGE_MARGIN) for c in cycles)


def test_prometheus_import_mapped_instances(fleet_run: Run) -> None:
    from pyproflab.store.connection import Store

    assert fleet_run.imported > 0
    with Store.open(fleet_run.db, read_only=True) as store:
        for version, instance, addr in fleet_run.instances:
            got = store.sql(
                "SELECT DISTINCT service, version FROM metric_samples "
                "WHERE instance = ? AND source LIKE '%query_range%'",
                [instance],
            ).to_pylist()
            assert got == [{"service": SERVICE, "version": version}]
            labels = store.sql(
                "SELECT labels FROM metric_samples WHERE instance = ? AND metric = ? LIMIT 1",
                [instance, STAMP_Q],
            ).to_pylist()[0]["labels"]
            assert dict(labels) == {"instance": addr, "job": SERVICE}


def test_gc_cycles_prometheus_equal_gctrace(fleet_run: Run) -> None:
    from pyproflab.store.connection import Store

    with Store.open(fleet_run.db, read_only=True) as store:
        for _, instance, _ in fleet_run.instances:
            scrapes = scrapes_of(store, instance)
            cycles = cycles_of(store, instance)
            assert len(scrapes) >= 10, f"{instance}: only {len(scrapes)} scrapes"
            assert cycles and [c.num for c in cycles] == list(range(1, len(cycles) + 1))

            # Every scrape sits between the end of its last counted cycle and the
            # end of the next one (clock offsets of a few ms allowed).
            by_num = {c.num: c for c in cycles}
            for s in scrapes:
                last, following = by_num.get(s.cycles), by_num.get(s.cycles + 1)
                if last is not None:
                    assert last.start <= s.time + 0.25, (instance, s, last)
                if following is not None:
                    assert following.end >= s.time - 0.25, (instance, s, following)

            # From the process start to each scrape: one edge, so within 1.
            for s in scrapes:
                by_time = sum(c.start <= s.time for c in cycles)
                assert abs(by_time - s.cycles) <= 1, (
                    f"{instance}: {s.cycles} cycles by Prometheus at {s.time:.3f}, "
                    f"{by_time} gctrace cycles started by then"
                )

            # The widest window between two quiet scrapes (the idle ones before
            # and after the load, when nothing else): it spans the whole load.
            edges = [s for s in scrapes if quiet(s, cycles)]
            assert len(edges) >= 2, f"{instance}: no two quiet scrapes among {len(scrapes)}"
            first, last = edges[0], edges[-1]
            from_prom = last.cycles - first.cycles
            from_trace = sum(first.time < c.start <= last.time for c in cycles)
            # How many cycles a loaded machine lets the load cause varies (19 on
            # one run where 20 were asked for); the claim is the equality below.
            assert from_prom >= 5, f"{instance}: only {from_prom} cycles in the window"
            assert abs(from_prom - from_trace) <= 1, (
                f"{instance}: Prometheus counts {from_prom} cycles between "
                f"{first.time:.3f} and {last.time:.3f}, gctrace {from_trace}"
            )
            print(
                f"\n{instance}: GC cycles over the load, Prometheus {from_prom}, "
                f"gctrace {from_trace}"
            )


def test_next_gc_equals_gctrace_goal(fleet_run: Run) -> None:
    from pyproflab.store.connection import Store

    with Store.open(fleet_run.db, read_only=True) as store:
        for _, instance, _ in fleet_run.instances:
            goals = {c.num: c.goal_mb for c in cycles_of(store, instance)}
            compared = exact = 0
            for s in scrapes_of(store, instance):
                if s.cycles + 1 not in goals:
                    continue  # no cycle after this scrape: its goal was never printed
                compared += 1
                mb = s.next_gc >> 20
                goal = goals[s.cycles + 1]
                # The printed goal may exceed next_gc by the 64 KiB minimum runway,
                # or a cycle may end between reading the count and the goal.
                nearby = {goal, goals.get(s.cycles + 2, goal), goals.get(s.cycles, goal)}
                assert mb in nearby or abs(s.next_gc / MiB - goal) <= 1, (
                    f"{instance} at {s.time:.3f}: next_gc {s.next_gc} B ({mb} MiB) after "
                    f"{s.cycles} cycles; gctrace goal of gc {s.cycles + 1}: {goal} MB"
                )
                exact += mb == goal
            assert compared >= 10, f"{instance}: only {compared} scrapes to compare"
            # Most scrapes fall well inside a cycle's gap: there the equality is exact.
            assert exact >= 0.8 * compared, f"{instance}: {exact} of {compared} exact"
            print(f"\n{instance}: next_gc equals the gctrace goal in {exact} of {compared} scrapes")


def test_profiles_windows_and_gc_join(fleet_run: Run) -> None:
    from pyproflab.lab import Lab

    assert fleet_run.errors == [], fleet_run.errors
    with Lab.open(fleet_run.db, read_only=True) as lab:
        got = lab.sql(
            "SELECT service, version, instance, profile_type, window_start, window_end, "
            "source, time_nanos, duration_nanos FROM profiles ORDER BY instance, profile_type"
        ).to_pylist()
        want = {(v, i) for v, i, _ in fleet_run.instances}
        assert {(r["version"], r["instance"]) for r in got} == want
        assert len(got) == 2 * 3
        for r in got:
            assert r["service"] == SERVICE
            assert r["window_start"] is not None and r["window_end"] > r["window_start"]
            assert TOKEN not in (r["source"] or "")
        cpu = [r for r in got if r["profile_type"] == "cpu"]
        for r in cpu:
            # The window is the request's: it holds the interval Go stamped on the
            # profile it answered with (same clock), which lasts the seconds asked.
            # No upper bound on its length: a loaded machine stretches it.
            start, end = (us(r["window_start"]) * 1000, us(r["window_end"]) * 1000)
            assert start <= r["time_nanos"], r
            assert (r["time_nanos"] + r["duration_nanos"]) // 1000 * 1000 <= end, r
            assert r["duration_nanos"] >= CPU_SECONDS * 10**9, r

        result = lab.gc(profile_type="cpu")
        rows = {r["instance"]: r for r in result.instances.to_pylist()}
        assert set(rows) == {i for _, i, _ in fleet_run.instances}
        for name, r in rows.items():
            # Runtime view: from the metrics in the window (collect's scrapes
            # and Prometheus' copy), and the gctrace cycles in it.
            assert r["scrapes"] and r["scrapes"] >= 3, (name, r)
            assert r["gc_cycles"] and r["gc_cycles"] > 0, (name, r)
            assert r["gc_cpu_fraction"] is not None and 0 < r["gc_cpu_fraction"] < 1
            assert r["gc_cpu_fraction_busy"] is not None
            assert r["gctrace_cycles"] and r["gctrace_cycles"] > 0
            assert r["gogc_percent"] == (50 if name == "it-a" else 200)
            # Profile view: the GC categories of its CPU profile.
            assert r["profile_gc_share"] is not None and 0 < r["profile_gc_share"] < 1
        # GOGC 50 collects more often than GOGC 200 under the same load.
        assert rows["it-a"]["gc_cycles_per_min"] > rows["it-b"]["gc_cycles_per_min"]


def test_gc_category_equals_pprof_focus(fleet_run: Run, pprof) -> None:
    from pyproflab import read_profile
    from pyproflab.analyses.gc_categories import GC_CATEGORIES, gc_categories

    paths = [
        Path(f.archive_path)
        for f in fleet_run.fetches
        if f.profile_type == "cpu" and f.archive_path
    ]
    assert len(paths) == 2
    for path in paths:
        ours = gc_categories(read_profile(path))
        # The category with the most CPU: the comparison means most there.
        cat = max(GC_CATEGORIES, key=lambda c: ours.value(c.name, plain=True))
        assert ours.value(cat.name, plain=True) > 0
        report = pprof.top(path, sample_index=value_index(path, pprof), focus=cat.regex)
        assert ours.total == report.total
        assert ours.value(cat.name, plain=True) == shown(report), cat.name
        share = ours.value(cat.name, plain=True) / ours.total
        assert share == pytest.approx(shown(report) / report.total, abs=0)


class LaggingPrometheus:
    """``/api/v1/query`` of a Prometheus whose stored scrapes trail: the k-th
    query answers ``answers[k]`` (instance -> its (stamp, cycle count) scrapes),
    then the last one."""

    def __init__(self, answers: list[dict[str, list[tuple[float, int]]]]) -> None:
        import http.server
        import json
        import threading

        self.queries = 0
        lagging = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                got = answers[min(lagging.queries, len(answers) - 1)]
                lagging.queries += 1
                result = [
                    {"metric": {"instance": i}, "values": [[t, str(v)] for t, v in points]}
                    for i, points in got.items()
                ]
                body = json.dumps({"status": "success", "data": {"result": result}}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_live_run_waits_for_idle_scrapes_however_late() -> None:
    """The live run's window edges are idle scrapes (the cycle count unchanged)
    after a moment (before the load, after it), waited for until a query
    answers them, not slept for: 2.5 s left the GOGC=50 instance one scrape
    after its last cycle, in the recorded run and in a live one."""
    a = [(99.0, 7), (101.0, 8), (102.0, 9), (103.0, 9), (104.0, 9)]  # busy, then idle
    b = [(99.5, 3), (100.5, 3), (101.5, 3), (102.5, 3)]
    # A lagging store: nothing after 100 for 5 queries, then a scrape more each.
    answers = [{"a:1": a[:1], "b:2": b[:1]}] * 5
    answers += [{"a:1": a[: k + 1], "b:2": b[: k + 1]} for k in range(1, 5)]
    prom = LaggingPrometheus(answers)
    try:
        wait_idle(prom.base, ["a:1", "b:2"], 100.0, 3)
        assert prom.queries == len(answers)  # a:1 idle for 3 scrapes at the last only
        with pytest.raises(RuntimeError, match="answered .* of 4 idle scrapes"):
            wait_idle(prom.base, ["a:1", "b:2"], 100.0, 4, timeout=0.5)
    finally:
        prom.close()
