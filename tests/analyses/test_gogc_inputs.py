"""The GOGC model's inputs from each GC source alone: Prometheus snapshots (the
runtime/metrics set and client_golang's defaults), gctrace logs, a store holding
only one of them (no profile), and the pacer's rules they use. Synthetic
steady-state data with known figures; the model's accuracy is tested on
recordings in test_gogc_recorded.py."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pyproflab import schema
from pyproflab.analyses import gogc as gi
from pyproflab.analyses.gogc import pacer
from pyproflab.analyses.gogc.prometheus import from_metrics
from pyproflab.analyses.gogc.samples import from_gctrace, with_peak_rss, with_process_cpu
from pyproflab.cli import main
from pyproflab.errors import UsageError
from pyproflab.sources.gctrace import parse_gctrace

MiB = float(1 << 20)


def _gctrace(n: int = 40, *, period: float = 0.5, idle: float = 0.0) -> str:
    """A steady GOGC=100 log: marked 40 MiB (+0.5), goal 2x the previous marked heap."""
    lines = ["program output that is not gctrace"]
    for i in range(n):
        live = 40 + (i % 3)  # a little spread across cycles
        prev = 40 + ((i - 1) % 3)
        goal = 2 * prev + 1
        lines.append(
            f"gc {i + 10} @{2 + i * period:.3f}s 12%: 0.05+100+0.05 ms clock, "
            f"0.1+10/50/{idle:g}+0.1 ms cpu, {goal - 8}->{goal + 4}->{live} MB, {goal} MB goal, "
            "0 MB stacks, 0 MB globals, 2 P"
        )
    return "\n".join(lines) + "\n"


def _snapshots(
    tmp: Path, n: int = 6, procs: int = 2, growth: float = 0.0, busy: float = 1.0, gc: float = 0.2
) -> list[str]:
    """Prometheus snapshots 1 s apart: 2 cycles/s, 100 MiB/s, GC 0.2 of 1 busy core
    (1 idle; or ``gc`` of ``busy``); the marked heap 40 MiB, growing by ``growth``
    MiB a second."""
    paths = []
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n):
        ms = int((t0 + timedelta(seconds=i)).timestamp() * 1000)
        vals = {
            "go_gc_cycles_total_gc_cycles_total": ("counter", 100 + 2 * i),
            "go_gc_heap_allocs_bytes_total": ("counter", 1e9 + 100 * MiB * i),
            "go_cpu_classes_gc_total_cpu_seconds_total": ("counter", 10 + gc * i),
            "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total": ("counter", 5 + gc / 2 * i),
            "go_cpu_classes_total_cpu_seconds_total": ("counter", 100 + 2 * i),
            "go_cpu_classes_idle_cpu_seconds_total": ("counter", 1.0 + (2 - busy) * i),
            "go_gc_heap_live_bytes": ("gauge", (40 + growth * i) * MiB),
            "go_gc_heap_goal_bytes": ("gauge", 2 * (40 + growth * i) * MiB),
            "go_gc_gogc_percent": ("gauge", 100),
            "go_gc_gomemlimit_bytes": ("gauge", 2**63 - 1),
            "go_sched_gomaxprocs_threads": ("gauge", procs),
            "go_memstats_heap_inuse_bytes": ("gauge", 84 * MiB),
            "process_resident_memory_bytes": ("gauge", 100 * MiB),
        }
        text = "".join(f"# TYPE {k} {typ}\n{k} {v!r} {ms}\n" for k, (typ, v) in vals.items())
        p = tmp / f"snap-{i:03d}.prom"
        p.write_text(text)
        paths.append(str(p))
    return paths


def test_gctrace_observation_figures() -> None:
    t = parse_gctrace(_gctrace(), source="t")
    obs = from_gctrace(t)
    assert list(obs.settings) == [(100.0, None)]  # inferred from the goals
    assert obs.cycles == 40 and obs.procs == 2 and obs.saturated()
    assert obs.mean("n") == pytest.approx(2.0)
    assert obs.mean("mark_alloc") == pytest.approx(12 * MiB)  # heap end - heap start
    assert "gctrace (40 cycles" in obs.provenance["cycles"]


def test_runs_at_different_rates_give_the_gc_cpu_they_spent() -> None:
    """``means``' rules: two processes at GOGC 100, one at 1 cycle a second with
    260.1 ms of GC CPU a cycle (its idle workers' 200 ms), one at 10 with 60.1
    ms (the pauses at their clock, one P), each 40 cycles. Together they spent
    40 × 0.2601 + 40 × 0.0601 core-seconds in 40 + 4 seconds: 0.291 cores.
    Each cycle weighted by its seconds, the mean cost per cycle came out 0.242 s
    and the GC 0.440 cores."""
    slow = parse_gctrace(_gctrace(period=1.0, idle=200), source="slow")
    fast = parse_gctrace(_gctrace(period=0.1), source="fast")
    obs = from_gctrace(pa.concat_tables([slow, fast]))
    assert list(obs.settings) == [(100.0, None)]
    spent, seconds = 40 * 0.2601 + 40 * 0.0601, 40 * 1.0 + 40 * 0.1
    assert obs.mean("n") == pytest.approx(80 / seconds)
    assert obs.mean("n") * obs.mean("cost") == pytest.approx(spent / seconds)
    fit = gi.advise(obs).current
    assert fit["gc_cores"] == pytest.approx(spent / seconds, rel=1e-6)


def test_cli_gctrace_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "svc.log"
    log.write_text(_gctrace())
    assert main(["gogc", "--gctrace", str(log), "--budget", "400MiB"]) == 0
    out = capsys.readouterr().out
    assert "cycles: gctrace (40 cycles, 1 run)" in out
    assert "GOGC: inferred" in out
    assert "peak RSS: not in gctrace: peak memory taken as 1.4 x the heap goal" in out
    assert "Recommendation: GOGC=" in out
    assert main(["gogc", "--gctrace", str(log), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["observed"]["current"]["gogc"] == 100 and doc["recommendation"] is None


PACED_100 = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "bench" / "rate" / "gogc100"


def test_cli_gctrace_with_the_process_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    """gctrace does not show the process's CPU outside the GC: --process-cpu gives
    it (here a paced gcbench run, whose Ps idle), and the current setting's GC
    share is then the GC's CPU over it."""
    logs = [str(d / "gctrace.log") for d in sorted(PACED_100.glob("r*"))]
    cycles = gi.read_gctrace_files(logs)
    gc_cores = gi.advise(gi.observe(cycles=cycles)).current["gc_cores"]
    assert main(["gogc", "--gctrace", *logs, "--process-cpu", "0.6", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "given (process CPU 0.6 cores" in json.dumps(doc)
    cur = next(r for r in doc["predictions"] if r["current"])
    assert cur["gc_share"] == pytest.approx(gc_cores / 0.6, rel=0.01)
    with pytest.raises(UsageError):
        with_process_cpu(from_gctrace(cycles), 0.0)


def test_cli_prometheus_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = _snapshots(tmp_path)
    assert main(["gogc", "--metrics", *paths, "--budget", "2x"]) == 0
    out = capsys.readouterr().out
    assert "cycles: prometheus (10 cycles over 5 intervals, 1 run)" in out
    assert "mark-time allocation: estimated" in out
    obs = gi.observe(samples=gi.read_metric_files(paths))
    assert list(obs.settings) == [(100.0, None)] and not obs.saturated()
    assert obs.mean("n") == pytest.approx(2.0)
    assert obs.mean("alloc") == pytest.approx(100 * MiB)
    assert obs.peak_rss == {(100.0, None): [100 * MiB]}


def test_gctrace_gc_cpu_at_most_the_process_cpu_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gctrace's GC CPU is the workers' time by the runtime's clock; the log's
    GC, 0.12 cores (2 cycles/s of 60.1 ms), against /metrics that show the
    process at 0.1 cores (from a quieter window, or an OS count) made the
    setting's GC cores more than the process's. They are now at most its CPU
    (samples module rules), and a note gives the 0.02 cores above it."""
    log = tmp_path / "svc.log"
    log.write_text(_gctrace())
    snaps = _snapshots(tmp_path, busy=0.1, gc=0.05)
    trace = from_gctrace(parse_gctrace(_gctrace(), source="t"))
    assert trace.mean("n") * trace.mean("cost") == pytest.approx(0.1202)  # the log alone
    obs = gi.observe(cycles=gi.read_gctrace_files([str(log)]), samples=gi.read_metric_files(snaps))
    assert obs.mean("busy") == pytest.approx(0.1)
    assert obs.mean("n") * obs.mean("cost") == pytest.approx(0.1)
    assert obs.mean("cost") == pytest.approx(sum(obs.mean(k) for k in ("work", "pause")))
    assert obs.mean("mutator") == 0.0  # all of the 0.1 cores the GC's (was /metrics' 0.05)
    res = gi.advise(obs)
    assert res.current["gc_cores"] <= 0.1 * (1 + 1e-6)
    said = [n for n in obs.notes if "did not run" in n]
    assert len(said) == 1 and "0.02 cores" in said[0] and "GOGC=100" in said[0], obs.notes
    assert main(["gogc", "--gctrace", str(log), "--metrics", *snaps]) == 0
    assert said[0] in capsys.readouterr().out.replace("\n    ", " ")


def test_prometheus_gauges_span_their_interval(tmp_path: Path) -> None:
    """An interval's counters average over it, so do its gauges: the mean of
    the two ends, not the end alone (a heap growing 2 MiB a second reads 1 MiB
    high at the end of each 1 s interval)."""
    obs = from_metrics(gi.read_metric_files(_snapshots(tmp_path, growth=2.0)))
    marked = [s["marked"] / MiB for s in sorted(obs.samples, key=lambda s: s["t_end"])]
    assert marked == pytest.approx([41.0, 43.0, 45.0, 47.0, 49.0])
    assert [s["goal"] / MiB for s in obs.samples] == pytest.approx([2 * m for m in marked])


@pytest.mark.parametrize(
    "procs, mark_s, exact", [(2, 0.1, False), (4, 0.05, True), (5, 0.05, True)]
)
def test_prometheus_mark_time_from_the_worker_split(
    tmp_path: Path, procs: int, mark_s: float, exact: bool
) -> None:
    """0.1 dedicated-class seconds per second over 2 cycles/s: 0.05 s per cycle.
    One dedicated worker (P 4 or 5) holds its P all mark long: T = 0.05 s, not
    0.05 / (0.25·P). At P = 2 fractional workers: T = 0.05 / 0.5, a lower bound."""
    obs = from_metrics(gi.read_metric_files(_snapshots(tmp_path, procs=procs)))
    assert obs.mean("mark_s") == pytest.approx(mark_s)
    assert ("lower bound" in obs.provenance["mark time"]) is not exact


@pytest.mark.parametrize(
    "procs, dedicated, fractional",
    # mgcpacer.go: fractional workers "for GOMAXPROCS<=3 or GOMAXPROCS=6".
    [(1, 0, 0.25), (2, 0, 0.25), (3, 0, 0.25), (4, 1, 0), (5, 1, 0), (6, 1, 0.5 / 6), (7, 2, 0)],
)
def test_background_workers_split_as_the_runtime_does(
    procs: int, dedicated: int, fractional: float
) -> None:
    assert pacer.background_workers(procs) == (dedicated, pytest.approx(fractional))


def test_store_with_only_gctrace_cycles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_gc_rows

    t = parse_gctrace(_gctrace(), source="t")
    n = t.num_rows
    extra = {
        "service": pa.array(["svc"] * n),
        "version": pa.array([None] * n, pa.string()),
        "instance": pa.array(["i1"] * n),
        "source": pa.array(["svc.log"] * n),
    }
    cols = {
        f.name: extra[f.name] if f.name in extra else t.column(f.name)
        for f in schema.STORE_GC_CYCLES
    }
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        ingest_gc_rows(store, pa.table(cols, schema=schema.STORE_GC_CYCLES))
    assert main(["gogc", "--db", str(db), "--service", "svc", "--budget", "400MiB"]) == 0
    out = capsys.readouterr().out
    assert "gctrace (40 cycles, 1 run)" in out and "Recommendation:" in out
    assert main(["gogc", "--db", str(db), "--service", "other"]) == 2
    err = capsys.readouterr().err
    assert "no gctrace cycles or GC metrics for service other" in err and err.count("\n") == 1


def _memstats_snapshots(tmp: Path, n: int = 6) -> list[str]:
    """client_golang's default Go collector without runtime/metrics: 2 cycles/s,
    100 MiB/s, next GC 80 MiB, 0.1 of the 1 busy core in GC since start."""
    paths = []
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n):
        ms = int((t0 + timedelta(seconds=i)).timestamp() * 1000)
        text = (
            "# TYPE go_gc_duration_seconds summary\n"
            f'go_gc_duration_seconds{{quantile="0.5"}} 0.0001 {ms}\n'
            f"go_gc_duration_seconds_sum {0.01 * i} {ms}\n"
            f"go_gc_duration_seconds_count {100 + 2 * i} {ms}\n"
            "# TYPE go_memstats_alloc_bytes_total counter\n"
            f"go_memstats_alloc_bytes_total {1e9 + 100 * MiB * i!r} {ms}\n"
            "# TYPE go_memstats_next_gc_bytes gauge\n"
            f"go_memstats_next_gc_bytes {80 * MiB!r} {ms}\n"
            "# TYPE go_memstats_heap_inuse_bytes gauge\n"
            f"go_memstats_heap_inuse_bytes {84 * MiB!r} {ms}\n"
            "# TYPE go_memstats_gc_cpu_fraction gauge\n"
            f"go_memstats_gc_cpu_fraction 0.1 {ms}\n"
            "# TYPE process_cpu_seconds_total counter\n"
            f"process_cpu_seconds_total {50.0 + i!r} {ms}\n"
        )
        p = tmp / f"m-{i:03d}.prom"
        p.write_text(text)
        paths.append(str(p))
    return paths


def test_prometheus_client_golang_defaults_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _memstats_snapshots(tmp_path)
    obs = gi.observe(samples=gi.read_metric_files(paths))
    assert list(obs.settings) == [(100.0, None)] and obs.procs == 1 and not obs.saturated()
    assert obs.mean("n") == pytest.approx(2.0)
    assert obs.mean("marked") == pytest.approx(40 * MiB)  # (goal)/(1 + g), no roots
    assert obs.mean("cost") == pytest.approx(0.1 / 2.0)
    assert any("go_memstats_gc_cpu_fraction" in n for n in obs.notes)
    assert any("go_gc_gogc_percent not exported" in n for n in obs.notes)
    res = gi.advise(obs, gi.GogcOptions(settings=((200.0, None),)))
    r = next(x for x in res.rows() if x["gogc"] == 200)
    assert r["goal"] == pytest.approx(120 * MiB, rel=0.01)
    assert r["cycles_per_min"] == pytest.approx(60.0, rel=0.03)
    assert main(["gogc", "--metrics", *paths, "--budget", "1GiB"]) == 0
    assert "Recommendation:" in capsys.readouterr().out


def test_gctrace_beside_client_golang_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/metrics without the runtime's CPU classes (client_golang's defaults)
    give the process's CPU as process_cpu_seconds_total (1 core here): beside
    a gctrace log that is its CPU, as for Prometheus alone. Each source alone
    served, both together were refused ("no GC samples carry busy")."""
    log = tmp_path / "svc.log"
    log.write_text(_gctrace())
    paths = _memstats_snapshots(tmp_path)
    obs = gi.observe(cycles=gi.read_gctrace_files([str(log)]), samples=gi.read_metric_files(paths))
    assert obs.source == "gctrace+prometheus" and obs.procs == 2
    assert obs.mean("busy") == pytest.approx(1.0)
    assert obs.mean("n") * obs.mean("cost") == pytest.approx(0.1202)  # gctrace's, below 1
    # the process's CPU less the GC's as the model takes it (gctrace's), not less
    # /metrics' own GC (0.1): mutator and GC were 1.02 cores of a 1.0-core process
    assert obs.mean("mutator") == pytest.approx(1.0 - 0.1202)
    assert main(["gogc", "--gctrace", str(log), "--metrics", *paths, "--budget", "1GiB"]) == 0
    assert "Recommendation:" in capsys.readouterr().out


def test_peak_memory_without_and_with_an_observed_rss() -> None:
    def at(obs, *settings):
        res = gi.advise(obs, gi.GogcOptions(settings=settings))
        return {(r["gogc"], r["memory_limit_bytes"]): r for r in res.rows()}

    obs = from_gctrace(parse_gctrace(_gctrace(), source="t"))
    r = at(obs)[(100.0, None)]
    assert r["peak_memory"] == pytest.approx(1.4 * r["goal"], rel=0.02)  # no RSS: the allowance
    with_peak_rss(obs, 100 * MiB)
    rows = at(obs, (400.0, 120 * MiB))
    assert rows[(100.0, None)]["peak_memory"] == pytest.approx(100 * MiB)  # as observed
    assert rows[(400.0, 120 * MiB)]["peak_memory"] <= 120 * MiB  # kept under the limit


def test_store_with_only_prometheus_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_metric_rows

    t = gi.read_metric_files(_snapshots(tmp_path))
    n = t.num_rows
    extra = {
        "service": pa.array(["svc"] * n),
        "version": pa.array([None] * n, pa.string()),
        "instance": pa.array(["i1"] * n),
        "source": pa.array(["snap"] * n),
    }
    cols = {
        f.name: extra[f.name] if f.name in extra else t.column(f.name)
        for f in schema.STORE_METRIC_SAMPLES
    }
    db = tmp_path / "p.duckdb"
    with Store.open(db) as store:
        ingest_metric_rows(store, pa.table(cols, schema=schema.STORE_METRIC_SAMPLES))
    assert main(["gogc", "--db", str(db), "--instance", "i1", "--budget", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "cycles: prometheus (10 cycles over 5 intervals, 1 run)" in out
    assert "Recommendation:" in out


def test_pacer_runway_as_end_cycle_computes_it() -> None:
    """10 bytes allocated over a 0.01 s mark at P = 2 with 5 ms of assists:
    u = 1/4 + 0.005/0.02 = 1/2, so the runway is 3·10·(1/2)/(1/2) = 30; idle
    workers' 4 ms add i = 0.2 to the scan side: 3·10·0.7/0.5 = 42. Assists
    past 3/4 of the P-time leave the mutator none: infinite (the floor)."""
    assert pacer.pacer_runway(10, 0.01, 0.005, 0.0, 2) == pytest.approx(30)
    assert pacer.pacer_runway(10, 0.01, 0.005, 0.004, 2) == pytest.approx(42)
    assert pacer.pacer_runway(10, 0.01, 0.02, 0.0, 2) == math.inf


def test_floor_mark_when_the_pacer_runway_clears_the_floor() -> None:
    """Flat out (tests/gcbench-like figures): 40 MiB a cycle against a 44 MiB
    runway puts B at 40 − (45/64)·44 MiB, and T solves the saturated mutator's
    B = A·(P·T − M)/(P − M·n); the pacer's runway there is above (19/64)·44."""
    c = dict(per_cycle=40.0, runway=44.0, alloc=1000.0, n=25.0)
    c.update(mark_cpu=0.011, assist=0.009, idle_mark=0.0)
    t, b, runway = pacer.floor_mark(c, 2, saturated=True)
    assert b == pytest.approx(40 - 45 / 64 * 44)
    assert b == pytest.approx(1000 * (2 * t - 0.011) / (2 - 0.011 * 25))
    assert runway == pytest.approx(pacer.pacer_runway(b, t, 0.009, 0.0, 2))
    assert runway >= 19 / 64 * 44


def test_floor_mark_refused_when_it_does_not_hold() -> None:
    """Paced (tests/gcbench-like figures): at the floor B = 26.6 − (45/64)·35
    MiB over T = B/A, the pacer's runway (about 6.8 MiB) falls short of the
    floor's 10.4: the trigger is above its floor, no mark time follows. Nor
    when a cycle allocates less than the floor itself, or there is no runway."""
    c = dict(per_cycle=26.6, runway=35.0, alloc=161.0, n=6.06)
    c.update(mark_cpu=0.016, assist=0.0025, idle_mark=0.0097)
    assert pacer.floor_mark(c, 2, saturated=False) is None
    assert pacer.floor_mark(c | {"per_cycle": 20.0}, 2, saturated=False) is None
    # A marked heap at or above the goal (a limit squeezing it) leaves no runway.
    assert pacer.floor_mark(c | {"runway": -1.0, "per_cycle": 5.0}, 2, saturated=False) is None


def _bare_params(**given: float) -> pacer.Params:
    """A setting of 100 live bytes, no roots, no GC or sweep cost and a runway
    of H, CPU-bound: only what the test gives decides the mark."""
    bare = dict(live=100.0, roots=0.0, alloc=1.0, runway_k=1.0, c0=0.0, c1=0.0, c2=0.0)
    bare.update(saturated=True, alpha=1.0, mutator0=1.0, sweep=0.0, peak_ratio=1.0)
    bare.update(memory_ratio=0.0, overhead=0.0, limit_overhead=0.0)
    return pacer.Params(**(bare | given))


def test_a_squeezed_mark_ends_near_the_goal() -> None:
    """pacer rule 3: with the trigger at its floor, a 64-byte runway leaves r =
    19 to the goal. A mark the background workers alone would stretch over
    2r ends at r·(1 − e^−2) (the assists' pace, revise), not at hurry's 0.6·r;
    one that fits (B_nat = 5) is not hurried; with σ = 0 the assists' pace
    alone holds (5 → r·(1 − e^(−5/19)))."""
    # a runway of H (runway_k 1): the trigger sits at its floor
    p = _bare_params(procs=2.0, cap=2.0, b_nat=38.0, hurry=0.6)
    b, per_cycle = pacer.cycle(p, 100.0, 64.0, 38.0)
    assert b == pytest.approx(19 * (1 - math.exp(-2)))
    assert per_cycle == pytest.approx(45 + b)
    assert pacer.cycle(p, 100.0, 64.0, 5.0)[0] == pytest.approx(5.0)
    paced = pacer.cycle(replace(p, squeeze=0.0), 100.0, 64.0, 5.0)[0]
    assert paced == pytest.approx(19 * (1 - math.exp(-5 / 19)))


def test_the_runway_is_at_most_an_unhurried_marks() -> None:
    """pacer rule 2: the runway per scan byte (1 × H = 100) is capped at k·B_nat
    = 1.2·10 = 12 bytes before the goal (an unhurried mark's, endCycle's
    largest of 5): with a runway D = 200 the trigger sits 188 above H, not at
    the floor (45/64)·200; without the cap (k infinite, fit rule 6: one
    setting) at the floor."""
    p = _bare_params(procs=1.0, cap=1.0, b_nat=10.0, hurry=1.0, peak_cons=1.2)
    b, per_cycle = pacer.cycle(p, 100.0, 200.0, 10.0)
    assert b == pytest.approx(10.0)  # fits in the 12 left: unhurried
    assert per_cycle == pytest.approx(188 + 10)
    b, per_cycle = pacer.cycle(replace(p, peak_cons=math.inf), 100.0, 200.0, 10.0)
    assert per_cycle - b == pytest.approx(45 / 64 * 200)


def test_prometheus_gogc_off_is_off(capsys: pytest.CaptureFixture[str]) -> None:
    """The runtime exports GOGC=off's -1 as a uint64: go_gc_gogc_percent
    1.8446744073709552e+19 (graph's recorded run at GOGC=off with a 160 MiB
    limit). It is off, not GOGC=1.84467e+19 (what the advice called the
    current setting, and a canary at off never matched it in a refit)."""
    run = Path(__file__).resolve().parents[1] / "testdata/gc/work/graph/gogcoff-lim160MiB/r1"
    paths = sorted(str(p) for p in run.glob("snap-*.prom"))
    assert "1.8446744073709552e+19" in Path(paths[0]).read_text()
    obs = gi.observe(samples=gi.read_metric_files(paths))
    assert list(obs.settings) == [(None, 160 * MiB)]
    assert main(["gogc", "--metrics", *paths, "--budget", "300MiB", "--format", "json"]) == 0
    cur = next(r for r in json.loads(capsys.readouterr().out)["predictions"] if r["current"])
    assert (cur["gogc"], cur["gogc_label"]) == (None, "off")


def test_the_mutators_cpu_per_cycle_raises_its_speed_with_fewer_cycles() -> None:
    """pacer rule 5, mutator rule 2: CPU-bound on one core with no GC cost, a
    mutator that spends κ = 10 core-seconds a cycle allocates α·cap/(1 + α·κ/Δ):
    half its own speed at 10 bytes a cycle, 1/1.1 of it at 100; without κ
    the same at both (the speed rule 5 held at the current setting's)."""
    p = _bare_params(procs=1.0, cap=1.0, b_nat=0.0, cycle_cpu=10.0)
    for per_cycle, speed in ((10.0, 0.5), (100.0, 1 / 1.1)):
        a, gc, mutator = pacer._rates(p, 100.0, 200.0, per_cycle)
        assert (a, gc, mutator) == pytest.approx((speed, 0.0, 1.0))
        assert pacer._rates(replace(p, cycle_cpu=0.0), 100.0, 200.0, per_cycle)[0] == 1.0
    paced = replace(p, saturated=False, alloc=0.5, mutator0=0.2, cap=4.0)
    assert pacer._rates(paced, 100.0, 200.0, 10.0)[2] == pytest.approx(0.2 + 0.05 * 10.0)


def _shifted_snapshots(src: Path, dest: Path, ms: int, cycles: int) -> list[str]:
    """Copies of the snapshots in ``src``, each sample ``ms`` later and the cycle
    counters ``cycles`` higher (another process of the same program)."""
    import re

    dest.mkdir()
    for p in sorted(src.glob("*.prom")):
        lines = []
        for line in p.read_text().splitlines():
            m = re.fullmatch(r"(\S+) (\S+) (\d+)", line)
            if m and not line.startswith("#"):
                name, v, ts = m.groups()
                value = float(v) + (cycles if name.startswith("go_gc_cycles_") else 0)
                line = f"{name} {value!r} {int(ts) + ms}"
            lines.append(line)
        (dest / p.name).write_text("\n".join(lines) + "\n")
    return sorted(str(p) for p in dest.glob("*.prom"))


def test_two_services_pod_0_are_two_instances(tmp_path: Path) -> None:
    """api and db each run pod-0, scraped a second apart. gogc over both (no
    --service) read one pod-0 series, the two cycle counters interleaved: "30000
    cycles, 30 runs, 60000.0 GC/min" where each has 5 cycles, 5.6 GC/min."""
    from pyproflab.analyses.gogc.inputs import observe_store
    from pyproflab.store import Store

    run = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "h70svc" / "gogc400-metrics"
    db = tmp_path / "s.duckdb"
    snaps = sorted(str(p) for p in run.glob("*.prom"))
    shifted = _shifted_snapshots(run, tmp_path / "db", 1000, 1000)
    for service, files in (("api", snaps), ("db", shifted)):
        args = ["--format", "prom", "--service", service, "--instance", "pod-0"]
        assert main(["ingest-gc", "--db", str(db), *args, *files]) == 0
    with Store.open(db, read_only=True) as store:
        one = gi.advise(observe_store(store, service="api")).model.fit.observed
        both = gi.advise(observe_store(store)).model.fit.observed
    assert len(one) == len(both) == 1
    assert both[0].cycles == 2 * one[0].cycles and both[0].runs == 2
    assert both[0].figures["cycles_per_min"] == pytest.approx(one[0].figures["cycles_per_min"])
