"""The GOGC / GOMEMLIMIT model: the published gateway case, the runtime's goal rules,
the options, a store with instances at two settings, the fallback between GC
sources, logs of several runs, the container's limits, the advice and the CLI.
The model's accuracy on recorded workloads is in test_gogc_recorded.py."""

from __future__ import annotations

import html
import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pyproflab import schema
from pyproflab.analyses import gogc as model
from pyproflab.analyses.gogc import container as ct
from pyproflab.analyses.gogc.pacer import HEAP_MINIMUM, heap_goal
from pyproflab.cli import main
from pyproflab.errors import UsageError
from pyproflab.reports import render
from pyproflab.sources.gctrace import parse_gctrace

MiB = float(1 << 20)
GC = Path(__file__).resolve().parents[1] / "testdata" / "gc"

# DMM API gateway (DMM.go #4, 2022): GOGC 100 -> 300.
GATEWAY_BEFORE = dict(gogc=100.0, gc_cycles_per_min=5.6, gc_cpu_share=0.416)
GATEWAY_AFTER = dict(cycles_per_min=1.9, gc_share=0.192, heap=2.0)


def _gateway(**extra) -> dict[str, float]:
    obs = model.from_figures(**GATEWAY_BEFORE, **extra)
    res = model.advise(obs, model.GogcOptions(settings=((300.0, None),)))
    cur, r = res.current, next(r for r in res.rows() if r["gogc"] == 300)
    return dict(
        cycles_per_min=r["cycles_per_min"], gc_share=r["gc_share"], heap=r["goal"] / cur["goal"]
    )


def test_gateway_case_within_5_percent() -> None:
    """Published: 5.6 -> 1.9 cycles/min, 41.6% -> 19.2% GC share, twice the heap.
    No mark data: nothing floats; the guide's formula up to the per-heap-byte
    cost share's point (a tenth of the per-cycle cost)."""
    got = _gateway()
    for k, want in GATEWAY_AFTER.items():
        assert got[k] == pytest.approx(want, rel=0.05), (k, got)


def test_gateway_case_does_not_depend_on_units_or_roots() -> None:
    """Absolute heap and CPU change the units, not the ratios (but for the
    pacer's rules in bytes: the trigger's 4 MiB below the goal)."""
    base = _gateway()
    absolute = _gateway(heap_goal=800 * MiB, process_cpu=4.0)
    assert absolute == pytest.approx(base, rel=0.03)
    rooted = _gateway(live_heap=400 * MiB, roots=40 * MiB)
    assert rooted["cycles_per_min"] == pytest.approx(base["cycles_per_min"], rel=0.03)
    # goal = H + (H+R)·g: (400 + 440·3) / (400 + 440) = 2.048
    assert rooted["heap"] == pytest.approx((400 + 440 * 3) / (400 + 440), rel=1e-6)


def _cost_samples(scan_mib: float, goal_mib: float, costs: list[float]) -> list[dict]:
    mib = float(1 << 20)
    return [
        dict(w=1.0, run=i, cost=c, goal=goal_mib * mib, marked=scan_mib * mib, roots=0.0)
        for i, c in enumerate(costs)
    ]


def test_the_fixed_gc_cost_gets_the_range_the_settings_leave_it() -> None:
    """One setting: the fixed cost lies in [0, C] (C the upper end of the 95%
    interval of its runs' mean), its point the middle of [0, mean]. Two
    settings fitted exactly by 0.4 + 0.01/MiB of marked heap (alike in goal/S,
    so one per-byte term): the point is that solution and the
    range what the runs' spread allows, still short of [0, C]. A cost that
    falls as the heap grows beyond the runs' spread: a note, and non-negative
    least squares."""
    from pyproflab.analyses.gogc.cost import fit_cost

    one = {1: _cost_samples(50, 100, [0.8, 0.9, 1.0])}
    cf = fit_cost(one, dict(scan=50 * 2**20, goal=100 * 2**20, cost=0.9))
    t975 = 4.3027  # Student's t, two-sided 95%, 2 degrees of freedom
    assert cf.c0 == pytest.approx((0.45, 0.0, 0.9 + t975 * 0.1 / 3**0.5), rel=1e-4)
    two = {1: _cost_samples(50, 100, [0.88, 0.9, 0.92]), 2: _cost_samples(80, 160, [1.2] * 3)}
    cf = fit_cost(two, dict(scan=50 * 2**20, goal=100 * 2**20, cost=0.9))
    point, lo, hi = cf.c0
    assert point == pytest.approx(0.4, abs=1e-6) and 0.0 < lo < 0.4 < hi < 0.9, cf.c0
    assert sum(cf.per_byte(point, 0.0)) * 2**20 == pytest.approx(0.01, rel=1e-6)
    falls = {1: _cost_samples(50, 100, [0.9] * 3), 2: _cost_samples(80, 160, [0.6] * 3)}
    cf = fit_cost(falls, dict(scan=50 * 2**20, goal=100 * 2**20, cost=0.9))
    assert cf.notes and 0.0 <= cf.c0[1] <= cf.c0[0] <= cf.c0[2]


def test_heap_goal_rules() -> None:
    obs = model.from_figures(**GATEWAY_BEFORE, live_heap=100 * MiB, roots=10 * MiB)
    p = model.advise(obs).model.fit.params
    assert heap_goal(p, 100 * MiB, 100, None) == (210 * MiB, "gogc")
    assert heap_goal(replace(p, roots=0.0), 1 * MiB, 100, None) == (HEAP_MINIMUM, "gogc")
    assert heap_goal(p, 100 * MiB, None, None) == (math.inf, "none")
    goal, by = heap_goal(p, 100 * MiB, None, 500 * MiB)
    avail = 500 * MiB - p.limit_overhead
    assert by == "limit" and goal == pytest.approx(avail - 0.03 * avail)
    assert heap_goal(p, 100 * MiB, 50, 1e12)[1] == "gogc"


@pytest.mark.parametrize(
    "kw, want",
    [
        (dict(budget="2.5x"), ("budget", model.Budget(times=2.5))),
        (dict(budget="2GiB"), ("budget", model.Budget(bytes=2 * 1024 * MiB))),
        (dict(budget="1.5G"), ("budget", model.Budget(bytes=1.5e9))),
        (dict(headroom="10%"), ("headroom", 0.1)),
        (dict(headroom="64MiB"), ("headroom_bytes", 64 * MiB)),
        (dict(candidates="25,off,100"), ("candidates", (25.0, None, 100.0))),
        (dict(memory_limits="off,1GiB"), ("memory_limits", (None, 1024 * MiB))),
        (dict(gogc="off"), ("gogc", None)),
    ],
)
def test_options_parse_what_users_write(kw: dict, want: tuple) -> None:
    opts = model.GogcOptions.parse(**kw)
    assert getattr(opts, want[0]) == want[1]


@pytest.mark.parametrize(
    "kw",
    [
        dict(budget="lots"),
        dict(budget="-2x"),
        dict(headroom="150%"),
        dict(candidates=""),
        dict(gogc="fast"),
        dict(process_cpu=0),
        dict(process_cpu=float("inf")),
        dict(peak_rss="1e400"),
        dict(nonsense=1),
    ],
)
def test_options_refuse_bad_values_in_words(kw: dict) -> None:
    with pytest.raises(UsageError):
        model.GogcOptions.parse(**kw)


# --- logs, the store and the fallback between sources ------------------------------------


def _gctrace(
    n: int = 40, *, gogc: int = 100, live: int = 40, start: int = 1, t0: float = 2.0
) -> str:
    """A steady log: marked ``live`` MiB (+0..2), goal from the previous cycle's."""
    lines = ["program output that is not gctrace"]
    for i in range(n):
        mark, prev = live + (i % 3), live + ((i - 1) % 3)
        goal = prev + prev * gogc // 100
        lines.append(
            f"gc {start + i} @{t0 + i * 0.5:.3f}s 12%: 0.05+100+0.05 ms clock, "
            f"0.1+10/50/0+0.1 ms cpu, {goal - 8}->{goal + 2}->{mark} MB, {goal} MB goal, "
            "0 MB stacks, 0 MB globals, 2 P"
        )
    return "\n".join(lines) + "\n"


def _store_cycles(table: pa.Table, instance: str, service: str = "svc") -> pa.Table:
    n = table.num_rows
    extra = {
        "service": pa.array([service] * n),
        "version": pa.array([None] * n, pa.string()),
        "instance": pa.array([instance] * n),
        "source": pa.array([f"{instance}.log"] * n),
    }
    cols = {
        f.name: extra.get(f.name, table.column(f.name) if f.name in table.column_names else None)
        for f in schema.STORE_GC_CYCLES
    }
    return pa.table(cols, schema=schema.STORE_GC_CYCLES)


def test_gctrace_infers_each_runs_setting() -> None:
    t = parse_gctrace(_gctrace(gogc=100), source="t")
    obs = model.observe(cycles=t)
    assert list(obs.settings) == [(100.0, None)]
    assert obs.mean("n") == pytest.approx(2.0)
    assert "inferred" in obs.provenance["GOGC"]


def test_a_log_with_a_restart_models_each_runs_gogc(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35: a log spanning a restart (and one of two interleaved processes)
    gives each run's real GOGC, never an absurd one (it printed GOGC=-90)."""
    for name, want in (("restart", {100.0, 400.0}), ("interleaved", {50.0, 200.0})):
        obs = model.observe(cycles=model.read_gctrace_files([str(GC / "runs" / f"{name}.log")]))
        assert {g for g, _ in obs.settings} == want, name
        assert (
            main(["gogc", "--gctrace", str(GC / "runs" / f"{name}.log"), "--format", "json"]) == 0
        )
        doc = json.loads(capsys.readouterr().out)
        assert all(1 <= r["gogc"] <= 10_000 for r in doc["predictions"] if r["gogc"] is not None)
        assert all(r["gc_share"] is None or r["gc_share"] <= 1 for r in doc["predictions"])


def test_a_derived_gogc_outside_its_range_is_refused() -> None:
    """Goals below the marked heap give a negative GOGC: the run is left out with
    a note, and with nothing left the error is one line."""
    bad = _gctrace(gogc=100).replace(" MB goal", " MB goal").splitlines()
    lines = []
    for ln in bad[1:]:
        parts = ln.split("->")
        mark = int(parts[2].split(" ")[0])
        lines.append(ln.replace(f", {ln.split(', ')[3]}", f", {max(mark - 30, 1)} MB goal"))
    t = parse_gctrace("\n".join(lines), source="t")
    with pytest.raises(UsageError, match="no run has"):
        model.observe(cycles=t)
    mixed = pa.concat_tables([t, parse_gctrace(_gctrace(start=100, t0=40.0), source="t")])
    obs = model.observe(cycles=mixed)
    assert list(obs.settings) == [(100.0, None)]
    assert any("outside 1-10,000" in n for n in obs.notes)


def test_a_store_with_instances_at_two_settings_uses_both(tmp_path: Path) -> None:
    """Recorded tests/gcbench runs at GOGC 100 and 200 (one instance each) in one
    store: the fit uses both settings (both costs bound the fixed GC cost
    together), and the output names both."""
    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_gc_rows

    db = tmp_path / "two.duckdb"
    with Store.open(db) as store:
        for label in ("gogc100", "gogc200"):
            log = GC / "bench" / "cpu" / label / "r1" / "gctrace.log"
            t = parse_gctrace(log.read_text(), source=str(log))
            ingest_gc_rows(store, _store_cycles(t, label))
    with Store.open(db, read_only=True) as store:
        res = model.gogc(store, None, budget="1GiB")
    assert {g for g, _ in res.observation.settings} == {100.0, 200.0}
    assert [sf.setting[0] for sf in res.model.fit.observed] == [100.0, 200.0]
    cost = res.model.fit.cost
    assert cost is not None and len(cost.rows) == 2
    _, lo, hi = cost.c0
    assert hi < min(r.cost for r in cost.rows), (lo, hi, cost.rows)
    assert any("fitted on 2 observed setting(s)" in n for n in res.notes)
    assert sum(r["observed"] for r in res.rows()) == 2


def _snapshot(t: datetime, i: int, *, procs: int = 2, gogc: float = 100) -> str:
    ms = int(t.timestamp() * 1000)
    vals = {
        "go_gc_cycles_total_gc_cycles_total": ("counter", 100 + 2 * i),
        "go_gc_heap_allocs_bytes_total": ("counter", 1e9 + 100 * MiB * i),
        "go_cpu_classes_gc_total_cpu_seconds_total": ("counter", 10 + 0.2 * i),
        "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total": ("counter", 5 + 0.1 * i),
        "go_cpu_classes_total_cpu_seconds_total": ("counter", 100 + procs * i),
        "go_cpu_classes_idle_cpu_seconds_total": ("counter", 1.0 + (procs - 1) * i),
        "go_gc_heap_live_bytes": ("gauge", 40 * MiB),
        "go_gc_heap_goal_bytes": ("gauge", 40 * MiB * (1 + gogc / 100)),
        "go_gc_gogc_percent": ("gauge", gogc),
        "go_gc_gomemlimit_bytes": ("gauge", 2**63 - 1),
        "go_sched_gomaxprocs_threads": ("gauge", procs),
        "go_memstats_heap_inuse_bytes": ("gauge", 84 * MiB),
        "process_resident_memory_bytes": ("gauge", 100 * MiB),
    }
    return "".join(f"# TYPE {k} {typ}\n{k} {v!r} {ms}\n" for k, (typ, v) in vals.items())


def test_one_prometheus_snapshot_falls_back_to_gctrace(tmp_path: Path) -> None:
    """Issue 35: with gctrace cycles and a single /metrics snapshot of the same
    instance, gogc uses the cycles and says why not Prometheus."""
    from pyproflab.sources.prometheus_scan import parse_exposition
    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_gc_rows, ingest_metric_rows

    db = tmp_path / "s.duckdb"
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    snap = parse_exposition(_snapshot(t0, 0), default_time=t0, source="m")
    n = snap.num_rows
    extra = dict(service=["svc"] * n, version=[None] * n, instance=["i1"] * n, source=["m"] * n)
    cols = {
        f.name: extra[f.name] if f.name in extra else snap.column(f.name)
        for f in schema.STORE_METRIC_SAMPLES
    }
    with Store.open(db) as store:
        ingest_gc_rows(store, _store_cycles(parse_gctrace(_gctrace(), source="t"), "i1"))
        ingest_metric_rows(store, pa.table(cols, schema=schema.STORE_METRIC_SAMPLES))
        res = model.gogc(store, None, budget="400MiB")
    assert res.observation.source == "gctrace"
    assert any(
        n.startswith("GC data from gctrace only: prometheus could not serve") for n in res.notes
    )
    assert res.recommendation is not None


def test_a_share_above_100_percent_is_refused(tmp_path: Path) -> None:
    """Issue 35: GC CPU above the process's (2 cores of GC in 1 busy core) is
    never modelled: the intervals are refused, in one line."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    paths = []
    for i in range(4):
        text = _snapshot(t0 + timedelta(seconds=i), i).replace(
            f"go_cpu_classes_gc_total_cpu_seconds_total {10 + 0.2 * i!r}",
            f"go_cpu_classes_gc_total_cpu_seconds_total {10 + 2.0 * i!r}",
        )
        p = tmp_path / f"m-{i}.prom"
        p.write_text(text)
        paths.append(str(p))
    with pytest.raises(UsageError, match="share above 100%"):
        model.observe(samples=model.read_metric_files(paths))


def test_neither_source_serves_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "two.log"
    log.write_text("\n".join(_gctrace().splitlines()[:3]) + "\n")
    assert main(["gogc", "--gctrace", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error:") and err.count("\n") == 1


# --- the container ------------------------------------------------------------------------


def test_cgroup_v1_and_v2_limits(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text(f"{512 * 1024 * 1024}\n")
    (v1 / "cpu.cfs_quota_us").write_text("25000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    (v1 / "cpu.stat").write_text("nr_periods 400\nnr_throttled 300\nthrottled_time 9000000000\n")
    c = ct.from_cgroup(str(v1))
    assert (c.memory_limit, c.cpu_limit, c.throttled, c.periods) == (512 * MiB, 0.25, 300, 400)
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("max\n")
    (v2 / "cpu.max").write_text("150000 100000\n")
    c = ct.from_cgroup(str(v2))
    assert c.memory_limit is None and c.cpu_limit == 1.5
    with pytest.raises(UsageError, match="no such cgroup"):
        ct.from_cgroup(str(tmp_path / "nope"))


def test_gomaxprocs_above_the_quota_is_a_finding_and_the_limit_the_budget() -> None:
    obs = model.observe(cycles=parse_gctrace(_gctrace(), source="t"))
    res = model.advise(obs, model.GogcOptions.parse(cpu_limit=0.25, container_memory="256MiB"))
    assert res.budget_bytes == 256 * MiB and "--container-memory" in res.budget_source
    assert (
        res.findings
        and "GOMAXPROCS 2 is above the container's CPU quota of 0.25" in res.findings[0]
    )
    # The runtime's P-time, not the quota: at most GOMAXPROCS.
    assert all(r["process_cores"] <= 2.0 + 1e-9 for r in res.rows())
    assert res.recommendation is not None
    assert res.recommendation["peak_memory_hi"] <= 0.9 * 256 * MiB


# --- the advice and the CLI ---------------------------------------------------------------


def test_a_raise_carries_a_memory_limit_and_tiny_limits_are_never_advised() -> None:
    obs = model.observe(cycles=parse_gctrace(_gctrace(), source="t"))
    res = model.advise(obs, model.GogcOptions.parse(candidates="100,200,400", budget="400MiB"))
    rec = res.recommendation
    assert rec is not None and rec["gogc"] > 100
    assert rec["memory_limit_bytes"] is not None and rec["memory_limit_bytes"] <= 360 * MiB
    assert rec["peak_memory_hi"] <= 360 * MiB
    assert any("GOMEMLIMIT=" in n for n in res.notes)
    for r in res.rows():
        if r["gogc"] and r["gogc"] > 100 and r["memory_limit_bytes"] is None:
            assert not r["within_budget"]
    tight = model.advise(
        obs, model.GogcOptions.parse(candidates="100", memory_limits="36MiB", budget="1TiB")
    )
    row = next(r for r in tight.rows() if r["memory_limit_bytes"] == 36 * MiB)
    assert row["status"] == "near-limit" and not row["within_budget"]


def test_predictions_never_exceed_gomaxprocs() -> None:
    obs = model.observe(cycles=parse_gctrace(_gctrace(), source="t"))
    res = model.advise(obs, model.GogcOptions.parse(candidates="10,25,50,100,200,400"))
    for r in res.rows():
        assert r["gc_cores"] <= 2.0 and r["process_cores"] <= 2.0
        assert r["goal_lo"] <= r["goal"] <= r["goal_hi"]
    goals = [r["goal"] for r in res.rows() if r["gogc"] and not r["current"]]
    assert goals == sorted(goals)
    # Nor do their intervals: a Go 1.26 log at 2 Ps gave GOGC 25's process
    # CPU as 1.77-2.23 cores.
    log = model.read_gctrace_files([str(GC / "gctrace-go1.26.log")])
    for obs in (
        model.observe(cycles=log),
        model.observe(cycles=parse_gctrace(_gctrace(), source="t")),
    ):
        for r in model.advise(obs, model.GogcOptions.parse(candidates="25,50,100")).rows():
            assert max(r["gc_cores_hi"], r["process_cores_hi"]) <= 2.0, r["gogc"]


def test_cli_figures_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["gogc", "--gogc", "100", "--gc-cycles-per-min", "5.6", "--gc-cpu-share", "0.416"]
    assert main([*argv, "--candidates", "300", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    r = next(p for p in doc["predictions"] if p["gogc"] == 300)
    assert r["cycles_per_min"] == pytest.approx(1.9, rel=0.05)
    assert r["gc_share"] == pytest.approx(0.192, rel=0.05)
    assert doc["observed"]["current"]["gogc"] == 100


@pytest.mark.parametrize(
    "argv",
    [
        ["gogc", "--gogc", "100"],
        ["gogc", "--gogc", "100", "--gc-cycles-per-min", "0", "--gc-cpu-share", "0.4"],
        ["gogc", "--gogc", "100", "--gc-cycles-per-min", "5", "--gc-cpu-share", "1.4"],
        ["gogc", "--gc-cycles-per-min", "5", "--gc-cpu-share", "0.4"],
        [
            "gogc",
            "--gogc",
            "100",
            "--gc-cycles-per-min",
            "5",
            "--gc-cpu-share",
            "0.4",
            "--budget",
            "x",
        ],
        ["gogc", "--db", "/nonexistent/x.duckdb"],
        ["gogc", "--gctrace", "/nonexistent/x.log"],
        ["gogc", "--gctrace", "a.log", "--gc-cpu-share", "0.4"],
        [
            "gogc",
            "--cgroup",
            "/nonexistent/cg",
            "--gogc",
            "100",
            "--gc-cycles-per-min",
            "5",
            "--gc-cpu-share",
            "0.4",
        ],
    ],
)
def test_cli_mistakes_are_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch
) -> None:
    """Run in a folder of its own: ``gogc --gogc 100`` reads the default store,
    and in a checkout where ``make demo`` left ``pyproflab.duckdb`` (the README
    runs ``make demo`` then ``make test``) it answered, exit 0, and failed here."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error:") and err.count("\n") == 1


def test_a_recommendation_already_running_keeps_its_mark() -> None:
    """When the recommendation is the current setting, its row is marked ">*",
    not ">" alone (the text then showed no current setting), and the line says
    to keep it; an observed one is ">o"."""
    from pyproflab.reports.gogc import _cells, recommendation_line

    obs = model.observe(cycles=parse_gctrace(_gctrace(), source="t"))
    res = model.advise(obs, model.GogcOptions.parse(budget="400MiB"))
    rec = res.recommendation
    assert rec is not None and not rec["current"] and _cells(rec)[0] == ">"
    assert "keep it" not in recommendation_line(res)
    rec["current"] = True
    assert _cells(rec)[0] == ">*" and "(the current setting: keep it)" in recommendation_line(res)
    rec["current"], rec["observed"] = False, True
    assert _cells(rec)[0] == ">o"


def test_text_csv_html_and_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "svc.log"
    log.write_text(_gctrace())
    assert main(["gogc", "--gctrace", str(log), "--budget", "400MiB"]) == 0
    out = capsys.readouterr().out
    for want in (
        "Observed settings",
        "GOGC=100: 40 cycles",
        "GOGC: inferred",
        "Recommendation: GOGC=",
        "gctrace does not hold the process's CPU",
    ):
        assert want in out, want
    assert main(["gogc", "--gctrace", str(log), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("gogc,gogc_label,memory_limit_bytes")
    obs = model.observe(cycles=parse_gctrace(_gctrace(), source="t"))
    res = model.advise(obs, model.GogcOptions.parse(budget="400MiB"))
    res.notes.append("<img src=x>")
    html = res._repr_html_()
    assert "<img src=x>" not in html and "&lt;img" in html
    fig = res.figure()
    assert "<img" not in json.dumps(fig.to_plotly_json(), default=str)
    assert "recommended" in {t.name for t in fig.data}
    assert render(res, "text").startswith("GOGC / GOMEMLIMIT advice")


def _cadvisor(t: datetime, throttled: int, periods: int) -> str:
    ms = int(t.timestamp() * 1000)
    lab = '{id="/x",name="x"}'
    rows = [
        ("container_spec_memory_limit_bytes", "gauge", 300 * MiB),
        ("container_spec_cpu_quota", "gauge", 50000),
        ("container_spec_cpu_period", "gauge", 100000),
        ("container_cpu_cfs_throttled_periods_total", "counter", throttled),
        ("container_cpu_cfs_periods_total", "counter", periods),
    ]
    return "".join(f"# TYPE {m} {ty}\n{m}{lab} {v!r} {ms}\n" for m, ty, v in rows)


def test_cadvisor_metrics_give_the_budget_and_the_throttling(tmp_path: Path) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    paths = []
    for i in range(6):
        p = tmp_path / f"m-{i}.prom"
        p.write_text(
            _snapshot(t0 + timedelta(seconds=i), i)
            + _cadvisor(t0 + timedelta(seconds=i), 10 * i, 10 * i + 5)
        )
        paths.append(str(p))
    obs = model.observe(samples=model.read_metric_files(paths))
    res = model.advise(obs)
    assert res.budget_bytes == 300 * MiB and "cAdvisor" in res.budget_source
    assert "throttled in 50 of 50 CFS periods (100%)" in res.findings[0]


def test_a_canary_shorter_than_a_minute_says_its_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """service's recorded GOGC 100 and 200 logs: the canary's 30 cycles at GOGC
    400 (about 190 a minute) take about 10 s; the plan said 'about 0 min'."""
    runs = GC / "work" / "service"
    logs = [str(runs / g / "r1" / "gctrace.log") for g in ("gogc100", "gogc200")]
    assert main(["gogc", "--gctrace", *logs, "--budget", "512MiB", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)["canary"]
    assert plan is not None and plan["minutes"] < 1
    assert main(["gogc", "--gctrace", *logs, "--budget", "512MiB"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Canary"))
    assert f"about {round(60 * plan['minutes'])} s," in line and "0 min" not in line
    assert "refits on every setting seen, the canary's too" in line  # three, not "both"


def test_gctrace_given_twice_reads_both_logs(capsys: pytest.CaptureFixture[str]) -> None:
    """`--gctrace a --gctrace b` is both logs, as `--gctrace a b` is: the last
    list alone was read, so a second setting's log was silently dropped."""
    runs = GC / "work" / "service"
    logs = [str(runs / g / "r1" / "gctrace.log") for g in ("gogc100", "gogc200")]
    assert main(["gogc", "--gctrace", logs[0], "--gctrace", logs[1], "--format", "json"]) == 0
    twice = json.loads(capsys.readouterr().out)
    assert main(["gogc", "--gctrace", *logs, "--format", "json"]) == 0
    once = json.loads(capsys.readouterr().out)
    got = [len(r["observed"]["settings"]) for r in (twice, once)]
    assert got == [2, 2], got


def _service_log() -> Path:
    return GC / "work" / "service" / "gogc100" / "r1" / "gctrace.log"


@pytest.mark.parametrize(
    "cores, want",
    [("50", "more than GOMAXPROCS 2"), ("0.05", "less than the GC's own CPU at GOGC=100")],
)
def test_a_process_cpu_outside_what_the_log_allows_is_one_line(
    cores: str, want: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """service's GOGC=100 log (GOMAXPROCS 2, the GC at 0.29 cores): --process-cpu
    50 was taken (a process at 50 cores on 2 Ps) and 0.05 too (a GC share of
    100 %). Each is one line naming the flag and the bound; 1 core is taken."""
    base = ["gogc", "--gctrace", str(_service_log())]
    assert main([*base, "--process-cpu", cores]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error:") and err.count("\n") == 1
    assert "--process-cpu" in err and want in err, err
    assert main([*base, "--process-cpu", "1"]) == 0


def test_a_truncated_log_is_refused_or_skipped_when_lenient(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log cut in the middle of a gctrace line: gogc modelled the rest without
    a word (exit 0) where ingest-gc refuses the file. Now one line naming the
    file and the line; with --lenient the line is skipped and said on stderr."""
    text = _service_log().read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(text[: text.index("\n", 3000) + 20])
    assert main(["gogc", "--gctrace", str(cut)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{cut}:" in err and "malformed gctrace line" in err
    assert (
        main(["ingest-gc", "--db", str(tmp_path / "s.duckdb"), "--format", "gctrace", str(cut)])
        == 2
    )
    assert capsys.readouterr().err == err and not (tmp_path / "s.duckdb").exists()
    assert main(["gogc", "--gctrace", str(cut), "--lenient"]) == 0
    assert capsys.readouterr().err.startswith(f"skipped {cut}:")
    assert main(["gogc", "--metrics", str(cut), "--lenient"]) == 2


@pytest.mark.parametrize("fmt", ["text", "json", "html"])  # CSV is the table alone
def test_lenient_output_says_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """With --lenient, a skipped gctrace line was said on stderr only: the
    advice written (-o, or a scheduled job's stdout) read as if it covered the
    whole log. Its notes now count the skipped lines and name the first."""
    text = _service_log().read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(text[: text.index("\n", 3000) + 20])
    out = tmp_path / f"advice.{fmt}"
    args = ["gogc", "--gctrace", str(cut), "--lenient", "--format", fmt, "-o", str(out)]
    assert main(args) == 0
    where = capsys.readouterr().err.removeprefix("skipped ").split(": malformed")[0]
    written = html.unescape(out.read_text())
    assert "1 malformed gctrace line skipped (--lenient)" in written, written[-2000:]
    assert f"first: {where}: malformed gctrace line" in written, where


def test_throttling_sums_each_pods_own_counters(tmp_path: Path) -> None:
    """Two pods' cAdvisor counters (pod a: 1,000 -> 1,100 periods, 500 -> 550
    throttled; pod b, started later: 10 -> 110 and 0 -> 100) were taken as one
    series, last less first: 'throttled in -400 of -890 CFS periods'. Each
    pod's increase, summed: 150 of 200."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    tables = []
    for pod, start, p0, t_0 in (("a", 0, 1000, 500), ("b", 10, 10, 0)):
        paths = []
        for i in range(6):
            t = t0 + timedelta(seconds=start + i)
            p = tmp_path / f"{pod}-{i}.prom"
            p.write_text(
                _snapshot(t, i)
                + _cadvisor(t, t_0 + (550 - 500 if pod == "a" else 100) * i // 5, p0 + 20 * i)
            )
            paths.append(str(p))
        tables.append(model.read_metric_files(paths, instance=pod))
    box = ct.from_cadvisor(pa.concat_tables(tables))
    assert (box.throttled, box.periods) == (150, 200)
    assert "throttled in 150 of 200 CFS periods (75%)" in ct.findings(box, 2.0, cpu_known=True)[0]


def _one_process(tmp_path: Path) -> Path:
    """service's recorded GOGC=100 log, then its GOGC=200 log renumbered and
    moved in time as if one process had called debug.SetGCPercent(200)."""
    import re

    first = (GC / "work/service/gogc100/r1/gctrace.log").read_text().splitlines()
    then = (GC / "work/service/gogc200/r1/gctrace.log").read_text().splitlines()
    head = re.compile(r"^gc (\d+) @([\d.]+)s")
    n_end, t_end = (float(x) for x in head.match(first[-1]).groups())  # type: ignore[union-attr]
    n0, t0 = (float(x) for x in head.match(then[0]).groups())  # type: ignore[union-attr]
    lines = list(first)
    for ln in then:
        n, t = (float(x) for x in head.match(ln).groups())  # type: ignore[union-attr]
        lines.append(head.sub(f"gc {n - n0 + n_end + 5:.0f} @{t - t0 + t_end + 0.5:.3f}s", ln))
    log = tmp_path / "changed.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_one_instance_whose_gogc_changed_is_split_into_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One process run whose GOGC went from 100 to 200 (goal ÷ marked heap per
    cycle), ingested as one instance: the fit uses both settings, each over its
    own cycles, and the output says so."""
    db = str(tmp_path / "one.duckdb")
    argv = ["ingest-gc", "--db", db, "--format", "gctrace", "--service", "svc"]
    assert main([*argv, "--instance", "i-1", str(_one_process(tmp_path))]) == 0
    capsys.readouterr()
    assert main(["gogc", "--db", db, "--service", "svc", "--budget", "512MiB"]) == 0
    out = capsys.readouterr().out
    assert "current GOGC=200" in out
    assert (
        "fitted on 2 observed setting(s): GOGC=100 (40 cycles, 1 run), GOGC=200 (40 cycles, 1 run)"
        in out
    )


def test_an_unidentified_sweep_term_says_why_with_two_settings() -> None:
    """service's GOGC 100 and 200 logs, paced, from a run beside a neighbour
    (tests/testdata/gc/neighbour): two settings whose swept heaps differ too
    little leave the sweep term open; its note said 'one setting: ...' with
    two."""
    logs = [str(GC / "neighbour" / f"service-{g}.log") for g in ("gogc100", "gogc200")]
    res = model.advise(model.observe(cycles=model.read_gctrace_files(logs)))
    sweep = res.model.fit.terms["sweep"]
    assert len(res.model.fit.observed) == 2 and not sweep.identified
    assert not sweep.how.startswith("one setting"), sweep.how
