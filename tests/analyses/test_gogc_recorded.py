"""The GOGC model against the recorded validation workloads (tests/testdata/gc/work;
`make bench-gc` records them, `python -m bench.gc_validate` prints every table).

Seven workloads written for the purpose (tests/gcbench/workloads.go), each at
GOGC 25-800, off and 400 with a memory limit, three runs each (nine for the
flat-out pointer-dense graph, lru, tiny and queue, whose runs differ most),
recorded on 2026-11-28 with each run in a CPU group of its own whose cpu.shares put it
before everything else on the machine (bench/gc_record.py: the runs got the
CPU they asked for; other processes took the cores a run left idle, up to
1.0 core beside the GOMAXPROCS=1 workloads). A setting's runs still differ
(median coefficient of variation of cycles per minute 0-24% by workload: the
flat-out pointer-dense workloads' marks themselves vary from run to run;
`bench.gc_validate` prints it per workload and `--spread` per setting).
Fitted on GOGC 100 and 200, then on 100 alone, from gctrace (with the
process's CPU at each observed setting, the one figure a log lacks) and from
Prometheus, every other setting is predicted and compared with the mean of
its runs.

Issue 29's targets: from two settings, heap goal, cycles per minute and GC
share within 10% mean and 20% largest error on every workload; from one, a
mean within 15% and the measured value inside the 90% interval for 90% of
the figures; under a budget of 2.5x the GOGC=100 peak, the advice's runs
within it. ``ACHIEVED`` holds what the model does on these recordings where
that is more than the target (the gaps, and why, are in the module notes of
``bench/gc_validate.py``' output and the closing note): a change that makes
a figure worse fails here. ``queue`` was held out of every choice of the
model's priors (``predict``'s notes: but for pacer rule 3's squeezed mark).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support import gc_recordings as rec

from pyproflab.analyses import gogc as model
from pyproflab.analyses.gogc.pacer import solve

FITS = {"100+200": ("gogc100", "gogc200"), "100": ("gogc100",)}
SOURCES = ("gctrace", "prometheus")
FIGURES = ("goal", "cycles_per_min", "gc_share")
TARGET = {"100+200": (10, 20), "100": (15, None)}

ACHIEVED = {
    ("100+200", "graph", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100+200", "graph", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 18),
        "gc_share": (10, 20),
    },
    ("100+200", "lru", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (8, 20),
    },
    ("100+200", "lru", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100+200", "blob", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (19, 32),
    },
    ("100+200", "blob", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (15, 36),
    },
    ("100+200", "tiny", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100+200", "tiny", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100+200", "service", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100+200", "service", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (12, 24),
        "gc_share": (10, 20),
    },
    ("100+200", "batch", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (12, 23),
    },
    ("100+200", "batch", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (11, 27),
        "gc_share": (15, 29),
    },
    ("100+200", "queue", "gctrace"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100+200", "queue", "prometheus"): {
        "goal": (10, 20),
        "cycles_per_min": (10, 20),
        "gc_share": (10, 20),
    },
    ("100", "graph", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 21),
        "gc_share": (15, 21),
    },
    ("100", "graph", "prometheus"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 25),
    },
    ("100", "lru", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 33),
    },
    ("100", "lru", "prometheus"): {
        "goal": (15, 24),
        "cycles_per_min": (15, 28),
        "gc_share": (15, 43),
    },
    ("100", "blob", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (16, 29),
    },
    ("100", "blob", "prometheus"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 37),
    },
    ("100", "tiny", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 20),
    },
    ("100", "tiny", "prometheus"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 20),
    },
    ("100", "service", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 22),
    },
    ("100", "service", "prometheus"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 21),
    },
    ("100", "batch", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 22),
        "gc_share": (16, 26),
    },
    ("100", "batch", "prometheus"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 42),
        "gc_share": (23, 43),
    },
    ("100", "queue", "gctrace"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 20),
    },
    ("100", "queue", "prometheus"): {
        "goal": (15, 20),
        "cycles_per_min": (15, 20),
        "gc_share": (15, 20),
    },
}


# Runs per setting (tests/testdata/gc/README.md): nine of the flat-out
# pointer-dense workloads, whose runs differ most; six of the others, recorded
# with no neighbour on the machine.
RUNS = {"graph": 9, "lru": 9, "tiny": 9, "queue": 9, "blob": 6, "batch": 6, "service": 6}


def test_recordings_are_complete() -> None:
    for w in rec.WORKLOADS:
        labels = rec.labels(w)
        assert len(labels) == 8, (w, labels)
        for label in labels:
            assert len(rec.runs(w, label)) == RUNS.get(w, 3), (w, label)


def test_the_workloads_span_what_the_issue_asks() -> None:
    """Live heaps from about 12 to 450 MiB, GOMAXPROCS 1 and 2, pointer-free
    heaps (blob, batch) and pointer-dense ones, and in graph and lru a marked
    heap at GOGC=400 at least 1.5x the one at GOGC=100 (long marks)."""

    def mean(w: str, label: str, key: str) -> float:
        ms = [rec.measured(d)[key] for d in rec.runs(w, label)]
        return sum(ms) / len(ms)

    live = {
        w: mean(w, "gogc100", "marked") - mean(w, "gogc100", "mark_alloc") for w in rec.WORKLOADS
    }
    assert min(live.values()) < 16 * rec.MiB and max(live.values()) > 400 * rec.MiB, live
    procs = {rec.summary(rec.runs(w, "gogc100")[0])["gomaxprocs"] for w in rec.WORKLOADS}
    assert procs == {1.0, 2.0}
    for w in ("graph", "lru"):
        assert mean(w, "gogc400", "marked") >= 1.5 * mean(w, "gogc100", "marked"), w


@pytest.mark.parametrize("workload", ["graph", "lru"])
def test_an_overrun_marks_floating_garbage_is_taken_as_seen(workload: str) -> None:
    """fit rule 2: at GOGC=100 graph's and lru's marks overran the runway.
    Fitted on GOGC 100 and 200 from gctrace (the current setting 200, where
    the process allocates about 1.6x faster), the model's own marked heap at
    GOGC=100 (before any residual) is the one measured there: the fastest
    mark's allocation is taken as seen. Scaled by the allocation rate, it came
    out 28-30 % high."""
    m = rec.model(workload, FITS["100+200"], "gctrace")
    pred = m.predict(*rec.setting_of("gogc100"))["marked"]
    seen = [rec.measured(d)["marked"] for d in rec.runs(workload, "gogc100")]
    assert pred == pytest.approx(sum(seen) / len(seen), rel=0.05)


@pytest.mark.parametrize("workload", ["graph", "lru"])
def test_the_gc_cpu_limiter_holds_the_gc_share(workload: str) -> None:
    """pacer rule 6, fit rule 5b: graph and lru spent 56 % of their CPU on the
    GC at GOGC 100, and the runtime's limiter (mgclimit.go: it runs without a
    memory limit too) held them at 57-59 % at 50 and 25. Fitted on GOGC 100
    from gctrace, the GC share predicted at 25 and 50 is within 7 % of the
    measured (−2.8 to −6.2 %: the hold is the share seen at 100, 54.6-54.8 %,
    and the limiter lets a little more through at 25; without the hold: +12
    to +20 %, 64-70 %), and the heap the assists it cuts leave overshooting
    marks more than unheld."""
    m = rec.model(workload, FITS["100"], "gctrace")
    assert m.fit.params.held >= 0.5
    for label in ("gogc25", "gogc50"):
        got = m.predict(*rec.setting_of(label))
        seen = [rec.measured(d)["gc_share"] for d in rec.runs(workload, label)]
        assert got["gc_share"] == pytest.approx(sum(seen) / len(seen), rel=0.07), label
        unheld = solve(replace(m.fit.params, held=0.0), *rec.setting_of(label))
        assert got["marked"] > unheld["marked"], label


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("workload", ["graph", "lru"])
def test_a_held_settings_gc_cost_is_left_out_of_the_cost_fit(workload: str, source: str) -> None:
    """fit rule 3c: fitted on GOGC 100 (held by the limiter) and 200, the GC
    CPU per cycle predicted at 400 and 800 is within 6 % of the measured
    (with GOGC 100's cost in the fit: up to +12 %, lru from gctrace)."""
    m = rec.model(workload, FITS["100+200"], source)
    for label in ("gogc400", "gogc800"):
        got = m.predict(*rec.setting_of(label))
        seen = [
            rec.measured(d)["gc_share"] * rec.busy_cores(d) * 60 / rec.measured(d)["cycles_per_min"]
            for d in rec.runs(workload, label)
        ]
        per_cycle = got["gc_cores"] * 60 / got["cycles_per_min"]
        assert per_cycle == pytest.approx(sum(seen) / len(seen), rel=0.06), label


def test_idle_mark_workers_take_only_the_ps_left_idle() -> None:
    """pacer rule 4, fit rule 3b: service is paced and its idle Ps run idle mark
    workers at GOGC 100 and 200; graph is CPU-bound and has none to give
    them. At GOGC 25 service leaves fewer Ps idle (its runs used 1.36-1.60 of
    2 cores): the process's cores and the GC CPU per cycle predicted there
    are within 10 % of its runs' (with the idle workers' CPU of GOGC 100 and
    200 carried over, the GC CPU per cycle came out 18 % high on runs that
    used 1.99 cores)."""
    assert rec.model("graph", FITS["100+200"], "gctrace").fit.params.idle_s == 0
    m = rec.model("service", FITS["100+200"], "gctrace")
    assert m.fit.params.idle_s > 0
    got = m.predict(25.0, None)
    busy = [rec.busy_cores(d) for d in rec.runs("service", "gogc25")]
    assert got["process_cores"] == pytest.approx(sum(busy) / len(busy), rel=0.10)
    predicted = got["gc_cores"] * 60 / got["cycles_per_min"]
    runs = rec.runs("service", "gogc25")
    seen = [
        rec.measured(d)["gc_share"] * rec.busy_cores(d) * 60 / rec.measured(d)["cycles_per_min"]
        for d in runs
    ]
    assert predicted == pytest.approx(sum(seen) / len(seen), rel=0.10)


def test_a_sweep_cost_within_the_runs_spread_is_not_identified() -> None:
    """fit rule 4: blob is paced, and the process CPU its runs used at GOGC 100
    and at 200 differs by less than their spread (Prometheus): the mutator's
    CPU per heap byte swept stays the prior, and the process CPU predicted at
    GOGC 25 is within 10 % of what its runs used (fitted on the difference
    of the two means, it came out 36 % high)."""
    m = rec.model("blob", FITS["100+200"], "prometheus")
    assert not m.fit.terms["sweep"].identified
    got = m.predict(25.0, None)["process_cores"]
    busy = [rec.busy_cores(d) for d in rec.runs("blob", "gogc25")]
    assert got == pytest.approx(sum(busy) / len(busy), rel=0.10)


@pytest.mark.parametrize("workload", ["graph", "lru"])
def test_the_mutators_cpu_per_cycle_carries_its_speed_to_a_higher_gogc(workload: str) -> None:
    """mutator rule 2: flat out and pointer-dense, graph and lru allocate more
    per mutator core-second at a higher GOGC (graph 897 MiB at 100, 1142 at
    200, 1305 at 800): a CPU cost per cycle. Fitted on GOGC 100 and 200
    (Prometheus), its range runs from 0 (the difference all the machine's
    load) to the fit that puts it all on the cycles, the point in the middle,
    and the heap goal at 400 and 800, whose floating garbage the mutator's
    speed sets, is within 10 % (at the current setting's speed graph's came
    out 17 and 16 % low)."""
    m = rec.model(workload, FITS["100+200"], "prometheus")
    k = m.fit.terms["cycle_cpu"]
    assert not k.identified and k.lo == 0 < k.point == pytest.approx(k.hi / 2)
    assert "per GC cycle or by the machine's load" in k.how
    one = rec.model(workload, FITS["100"], "prometheus").fit.terms["cycle_cpu"]
    assert one.how.startswith("one setting") and one.lo == one.point == 0 < one.hi
    errs = {
        r.label: r.error
        for r in rec.table(workload, "prometheus", FITS["100+200"])
        if r.label in ("gogc400", "gogc800") and r.metric == "goal"
    }
    assert len(errs) == 2 and max(map(abs, errs.values())) <= 0.10, errs


def test_kappas_point_is_a_fraction_of_its_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """mutator rule 2: the point of ``κ`` sits at ``KAPPA_POINT`` of ``κ̂``
    (bench.gc_kappa moves it to measure what the choice is worth); the range
    stays ``[0, κ̂]`` wherever the point is."""
    from pyproflab.analyses.gogc import mutator
    from pyproflab.analyses.gogc.fit import fit

    obs = rec.observation("graph", FITS["100+200"], "prometheus")
    monkeypatch.setattr(mutator, "KAPPA_POINT", 0.25)
    quarter = fit(obs).terms["cycle_cpu"]
    monkeypatch.setattr(mutator, "KAPPA_POINT", 1.0)
    whole = fit(obs).terms["cycle_cpu"]
    assert 0 == quarter.lo == whole.lo < quarter.hi == whole.hi
    assert quarter.point == pytest.approx(0.25 * whole.hi) and whole.point == whole.hi


@pytest.mark.parametrize("source", SOURCES)
def test_a_mutator_no_faster_at_a_higher_gogc_has_no_cpu_per_cycle(source: str) -> None:
    """mutator rule 2: tiny's mutator allocated 182 MiB per core-second at GOGC
    100 and 179 at 200: ``κ`` is 0, identified, and its note says so (it said
    the speeds differ and were not told apart, in the JSON report's terms)."""
    k = rec.model("tiny", FITS["100+200"], source).fit.terms["cycle_cpu"]
    assert k.identified and k.point == k.hi == 0
    assert "do not rise with GOGC" in k.how and "not told apart" not in k.how


def test_leave_one_out_chooses_kappas_point_on_the_other_workloads() -> None:
    """bench.gc_kappa: the fraction with the least mean score over the other
    workloads; a tie goes to the one nearest the default."""
    from bench.gc_kappa import choose

    scores = {
        0.0: {"a": 0.1, "b": 0.3, "c": 0.3},
        0.5: {"a": 0.5, "b": 0.2, "c": 0.2},
        1.0: {"a": 0.0, "b": 0.2, "c": 0.2},
    }
    assert choose(scores, ["a", "b", "c"], 0.5) == 1.0  # means 0.23, 0.30, 0.13
    assert choose(scores, ["a"], 0.5) == 1.0
    assert choose(scores, ["b", "c"], 0.5) == 0.5  # 0.5 and 1.0 tie
    assert choose(scores, ["b", "c"], 0.9) == 1.0


def test_gctrace_says_where_its_pauses_count_more_than_the_runtime() -> None:
    """samples rules: gctrace's pauses count at their clock on one P, which on
    a paced process holds the world's restart, uncounted by the runtime's CPU
    classes. Blob at GOGC 100 (0.2 of 2 P busy): pauses are 29 % of
    gctrace's GC CPU, which is 1.1x the classes' or more in each run; the
    provenance says so. graph (CPU-bound) says nothing of it."""
    from pyproflab.analyses.gogc.samples import from_gctrace

    blob = from_gctrace(rec.cycles_table(rec.runs("blob", "gogc100")))
    assert "the runtime counts less" in blob.provenance["GC CPU"]
    for d in rec.runs("blob", "gogc100"):
        one = from_gctrace(rec.cycles_table([d]))
        classes = rec.measured(d)["gc_share"] * rec.busy_cores(d)
        assert one.mean("n") * one.mean("cost") >= 1.1 * classes
    graph = from_gctrace(rec.cycles_table(rec.runs("graph", "gogc100")))
    assert "pauses" not in graph.provenance["GC CPU"]


def test_the_acceptance_table_reports_the_gc_shares_error_in_points() -> None:
    """bench.gc_validate --table: beside issue 29's relative errors, the GC
    share's absolute error in percentage points, labelled as no target (blob's
    share is 0.1-2.2 %: 0.4 predicted against 0.7 measured is 40 % off, 0.3 of
    a point)."""
    from bench import gc_validate

    lines = gc_validate.markdown_table(rec, ["blob"], ["prometheus"]).splitlines()
    assert lines[0].rstrip(" |").endswith("GC share, points (not a target)")
    rows = rec.table("blob", "prometheus", FITS["100"])
    pts = [
        100 * abs(r.predicted - r.measured)
        for r in rows
        if r.metric == "gc_share" and r.label not in FITS["100"]
    ]
    row = next(x for x in lines if x.startswith("| blob | GOGC 100 |"))
    assert row.split("|")[-2].strip() == f"{sum(pts) / len(pts):.2f} / {max(pts):.2f}"


@pytest.mark.parametrize("fit", FITS)
@pytest.mark.parametrize("workload", rec.WORKLOADS)
def test_a_memory_limit_counts_the_spans_unused_part(workload: str, fit: str) -> None:
    """pacer rule 1: what a limit counts beside the heap is the runtime's
    nonHeapMemory, the spans' unused part included (Prometheus: sys − heap
    sys + heap in use − heap alloc). The goal under each workload's limit
    alone (GOGC=off) comes out within 5 % (with sys − heap sys alone
    service's came out 6-7 % high), and with GOGC=400 beside it within 6 %
    (service's, fitted on 100+200, 5.3 % high either way)."""
    rows = rec.table(workload, "prometheus", FITS[fit])
    errs = {r.label: r.error for r in rows if "-lim" in r.label and r.metric == "goal"}
    assert len(errs) == 2 and max(map(abs, errs.values())) <= 0.06, errs
    (off,) = (e for label, e in errs.items() if label.startswith("gogcoff"))
    assert abs(off) <= 0.05, errs


@pytest.mark.parametrize("fit", FITS)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("workload", rec.WORKLOADS)
def test_prediction_errors(workload: str, source: str, fit: str) -> None:
    rows = rec.table(workload, source, FITS[fit])
    for metric in FIGURES:
        errs = rec.errors(rows, metric, FITS[fit])
        mean, worst = 100 * sum(errs) / len(errs), 100 * max(errs)
        bound_mean, bound_max = ACHIEVED[(fit, workload, source)][metric]
        assert mean <= bound_mean and worst <= bound_max, (
            f"{workload}/{source} fitted on {fit} {metric}: mean {mean:.1f}%, max {worst:.1f}%\n"
            + rec.format_compact(rows)
        )


def test_intervals_hold_the_measured_values() -> None:
    """From one setting (GOGC=100), 90% or more of every predicted figure's
    measured value lies inside its 90% interval; from two, likewise."""
    for fit in FITS.values():
        inside = total = 0
        for w in rec.WORKLOADS:
            for source in SOURCES:
                got = [
                    r.inside
                    for r in rec.table(w, source, fit)
                    if r.label not in fit and r.metric in FIGURES
                ]
                inside, total = inside + sum(got), total + len(got)
        assert inside >= 0.9 * total, (fit, inside, total)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("workload", rec.WORKLOADS)
def test_intervals_widen_with_the_distance_from_the_observed_setting(
    workload: str, source: str
) -> None:
    """Fitted on GOGC=100, each figure's interval at GOGC 800 is wider, relative
    to its point, than at GOGC 200 (issue 29: intervals widen with the distance
    from the observed settings)."""
    m = rec.model(workload, FITS["100"], source)
    near, far = m.predict(200.0, None), m.predict(800.0, None)
    for k in ("goal", "cycles_per_min", "gc_share", "peak_memory"):
        w_near, w_far = ((r[k + "_hi"] - r[k + "_lo"]) / r[k] for r in (near, far))
        assert w_far > w_near, (k, w_near, w_far)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("workload", rec.WORKLOADS)
def test_advice_stays_within_a_budget_of_2_5x_the_gogc100_peak(workload: str, source: str) -> None:
    r = rec.budget_check(workload, source)
    assert r["recommendation"] is not None
    assert r["measured_peak"] <= r["budget"], r
    res = r["result"]
    for row in res.rows():  # no raise without a limit is ever advised
        if row["gogc"] is None or row["gogc"] > 100:
            if row["memory_limit_bytes"] is None:
                assert not row["within_budget"]


@pytest.mark.parametrize("workload", ["queue", "graph", "lru"])
def test_a_canary_narrows_the_interval_and_refits_on_both_settings(workload: str) -> None:
    """Replayed: fitted on the workload's GOGC=100 runs (Prometheus), the advice
    lies beyond what was observed and the plan asks for a canary at that
    setting. One recorded run there, added as one more instance, is the
    canary: the refit uses both settings, its interval at the canary's
    setting is narrower than before (over its point) and holds what the canary's runs
    measured, and the plan's claimed width there is no less than 0.6 of the
    refit's (it claimed 0.14-0.16 of peak memory where the refit gave
    0.27-0.64, and queue's GC share 0.14 where it gave 0.30)."""
    before = rec.budget_check(workload, "prometheus")
    plan = before["result"].canary
    assert plan is not None and plan["cycles"] >= 30
    g, lim = plan["setting"]
    label = "gogc" + ("off" if g is None else f"{g:g}")
    if lim is not None:
        label += f"-lim{lim / rec.MiB:.0f}MiB"
    canary_runs = rec.runs(workload, label)
    dirs = [*rec.runs(workload, "gogc100"), canary_runs[0]]
    obs = rec.observation_of(dirs, "prometheus")
    after = model.advise(obs, model.GogcOptions(settings=(plan["setting"],)))
    assert len(after.model.fit.observed) == 2
    old = next(
        r
        for r in before["result"].rows()
        if (r["gogc"], r["memory_limit_bytes"]) == plan["setting"]
    )
    new = next(r for r in after.rows() if (r["gogc"], r["memory_limit_bytes"]) == plan["setting"])
    # Widths over the point, as the plan claims them: the canary moves the point
    # (lru's cycles per minute 543 predicted, 670 refitted), and one run borrows
    # the spread between runs (predict rule 2), 260 wide where 249 was before.
    width = lambda r, k: (r[k + "_hi"] - r[k + "_lo"]) / r[k]  # noqa: E731
    for k in ("goal", "cycles_per_min", "gc_share"):
        assert width(new, k) < width(old, k), k
    measured = [rec.measured(d) for d in canary_runs]
    goal = sum(m["goal"] for m in measured) / len(measured)
    assert new["goal_lo"] <= goal <= new["goal_hi"]
    for k, claimed in plan["width_after"].items():
        assert claimed >= 0.6 * (new[k + "_hi"] - new[k + "_lo"]) / new[k], (k, claimed, new)


# bench.gc_validate --canary: the claim within this factor either way of the
# median refit (one recorded run added, each of the first three in turn), where
# the recorded runs cover the cycles the plan asks for; within twice it where
# they do not (blob's cover 11 of the 119 its plan asks). The refit itself
# moves by up to 1.8x between runs (queue's GC share from gctrace 0.42-0.69);
# the claim came within 0.73-1.14x with one run borrowing the spread between
# runs (predict rule 2), 0.76-1.31x (blob's 0.56) with four chunks of it as its
# whole spread, drawn from the first current run alone 0.64-1.86x, the rule
# before it 0.61-3.87x (cycles per minute 1.5-3.9x).
CANARY_FACTOR = 1.5


@pytest.mark.parametrize(
    "workload, source",
    [
        ("graph", "prometheus"),
        ("lru", "gctrace"),
        ("lru", "prometheus"),
        ("blob", "gctrace"),
        ("blob", "prometheus"),
        ("queue", "gctrace"),
        ("queue", "prometheus"),
    ],
)
def test_the_canary_plans_claimed_width_is_near_the_refits(workload: str, source: str) -> None:
    """predict rule 4: the plan claims each figure's width at its setting after
    the canary as the refit with a canary that measured the prediction would
    have. Replayed with the setting's recorded runs (the fleet's GOGC=100 still
    the current setting), the claim is within ``CANARY_FACTOR`` of the median
    width of the refits with each of its first three runs added (2 where the
    runs are shorter than the plan asks). The claim
    before (the spread shrunk by √(seen/N), at least the current setting's
    width) was 3.9x the refit's cycles per minute on lru from gctrace, 3.3x on
    queue, 2.6x on graph."""
    from bench import gc_canary

    c = gc_canary.case(rec, workload, source)
    assert c["plan"] is not None
    factor = CANARY_FACTOR if min(c["covers"]) >= c["plan"]["cycles"] else 2.0
    for k in gc_canary.FIGURES:
        claimed = c["plan"]["width_after"][k]
        refit = sorted(o[k] for o in c["one"])[1]
        assert refit / factor <= claimed <= refit * factor, (k, claimed, c["one"])


# A width from three runs' spread is itself known to about ±50 % (the
# standard deviation of three values, two degrees of freedom): a one-run
# refit narrower than this share of it is narrower than the runs' noise.
ONE_RUN_SHARE = 0.6


@pytest.mark.parametrize(
    "workload, source, label",
    [
        ("graph", "prometheus", "gogcoff-lim160MiB"),
        ("lru", "gctrace", "gogcoff-lim224MiB"),
        ("queue", "gctrace", "gogc400-lim256MiB"),
    ],
)
def test_a_setting_seen_in_one_run_borrows_the_spread_between_runs(
    workload: str, source: str, label: str
) -> None:
    """predict rule 2: a setting observed in one run borrows the departures of
    the runs of the setting seen in the most (here the fleet's GOGC=100), so
    refitted with one canary run its interval there is not narrower than with
    three by more than the runs' noise. Before, one run's four chunks were its
    whole spread: cycles per minute 0.20, 0.19 and 0.25 wide (median over the
    first three runs) where three runs gave 0.37, 0.56 and 0.73."""
    from bench import gc_canary

    setting, cur = rec.setting_of(label), rec.setting_of("gogc100")
    base, runs = rec.runs(workload, "gogc100"), rec.runs(workload, label)
    three = gc_canary.refit(rec, base, runs[:3], source, setting, cur)
    ones = [gc_canary.refit(rec, base, [d], source, setting, cur) for d in runs[:3]]
    for k in ("gc_share", "cycles_per_min"):
        one = sorted(o[k] for o in ones)[1]
        assert one >= ONE_RUN_SHARE * three[k], (k, [o[k] for o in ones], three[k])


def test_a_canary_with_a_limit_from_gctrace_asks_for_its_metrics() -> None:
    """gctrace does not show GOMEMLIMIT: replayed, queue's canary at GOGC=400 with
    256 MiB refitted from its log alone came out as GOGC 165 and 175 (goals its
    limit held); now its cycles are left out, said (``infer`` rule 9). The
    plan's notes ask for the canary's /metrics; from Prometheus (which shows
    the limit) they do not, and the refit sees 400."""
    res = rec.budget_check("queue", "gctrace")["result"]
    assert res.canary is not None and res.canary["setting"][1] is not None
    log = rec.runs("queue", "gogc400-lim256MiB")[0]
    obs = rec.observation_of([*rec.runs("queue", "gogc100"), log], "gctrace")
    assert list(obs.settings) == [(100.0, None)]  # what the note warns of
    assert any("a memory limit held it" in n for n in obs.notes)
    assert any("store the canary's /metrics beside its log" in n for n in res.notes)
    prom = rec.budget_check("queue", "prometheus")["result"]
    assert not any("store the canary's /metrics" in n for n in prom.notes)


@pytest.mark.parametrize(
    "workload, source", [("graph", "gctrace"), ("tiny", "gctrace"), ("tiny", "prometheus")]
)
def test_no_canary_at_a_setting_already_observed(workload: str, source: str) -> None:
    """Fitted on GOGC=100 under 2.5x its peak, the advice is GOGC=100 itself,
    with a wide interval: the plan said to run GOGC=100 'on one instance' (the
    setting every instance runs) and claimed it would narrow GC share ±32% to
    ±7% (service, Prometheus: now advised GOGC=off with its 160 MiB limit, the
    limit bounding its peak, ``predict`` rule 2); a refit with more GOGC=100
    runs narrows nothing. No plan; a note says why the interval is wide."""
    res = rec.budget_check(workload, source)["result"]
    assert res.recommendation["observed"] and res.recommendation["current"]
    assert res.canary is None
    assert any("was observed: a canary there adds nothing" in n for n in res.notes), res.notes


def test_the_container_case_under_a_quarter_cpu_quota() -> None:
    """service at GOMAXPROCS 2 in a cgroup with a 0.25-CPU quota and a 256 MiB
    limit (bench/gc_record.py --quota): the budget is the container's limit,
    GOMAXPROCS above the quota is a finding with the throttled periods."""
    dirs = [d for label in ("gogc100",) for d in rec.quota_runs(label)]
    obs = model.observe(cycles=rec.cycles_table(dirs), samples=rec.samples_table(dirs, cgroup=True))
    res = model.advise(obs)
    assert res.budget_bytes == 256 * rec.MiB and "cAdvisor" in res.budget_source
    assert (
        res.findings
        and "GOMAXPROCS 2 is above the container's CPU quota of 0.25" in res.findings[0]
    )
    # The quota holds the program (recorded first in line for the CPU): throttled
    # in nearly every period, its own CPU the quota's 0.25 cores. (Recorded at
    # the default cpu.shares beside a load of 21, it got 0.20 cores and was
    # throttled in 9 of 100 periods: starved by the machine, not held by its quota.)
    m = re.search(r"throttled in (\d+) of (\d+) CFS periods", res.findings[0])
    assert m and int(m[1]) >= 0.9 * int(m[2]), res.findings[0]
    for d in dirs:
        s = rec.summary(d)
        assert s["own_cpu_seconds"] / s["wall_seconds"] == pytest.approx(0.25, abs=0.02)
    # The runtime counts P-time (throttled time included): GC share at the
    # current setting as the CPU classes give it, no prediction above GOMAXPROCS.
    assert all(r["process_cores"] <= 2.0 + 1e-9 for r in res.rows())
    assert res.current["gc_share"] < 0.9
    assert "--process-cpu" not in res.findings[0]  # Prometheus gave the process's CPU


def test_the_quota_case_from_gctrace_alone_asks_for_the_process_cpu(capsys) -> None:
    """The same recording's gctrace log alone, with --cpu-limit 0.25: the quota
    finding and the notes say the process's CPU is needed (--process-cpu); given
    it, neither asks."""
    from pyproflab.cli import main

    log = str(rec.quota_runs("gogc100")[0] / "gctrace.log")
    base = ["gogc", "--gctrace", log, "--cpu-limit", "0.25", "--container-memory", "256MiB"]
    assert main(base) == 0
    out = capsys.readouterr().out
    finding = next(x for x in out.splitlines() if "above the container's CPU quota" in x)
    assert "give --process-cpu" in finding
    assert "gctrace does not hold the process's CPU" in out.split("Notes:")[1]
    assert main([*base, "--process-cpu", "2"]) == 0
    assert "--process-cpu" not in capsys.readouterr().out


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("workload", rec.WORKLOADS)
def test_the_peaks_lower_end_is_at_least_the_triggers_floor(workload: str, source: str) -> None:
    """The peak holds the heap at a mark's end, past the trigger, which is at
    least 45/64 of the way from the marked heap to the goal (pacer rule 2): the
    peak's lower end is at least that floor at the goal's and marked heap's
    lower ends (at most the point). Before, it fell to 0 (graph at GOGC 25 and
    50, fitted on GOGC 100). The goal's lower end is no floor: blob's measured
    peak RSS sits under its measured goal. The measured peaks stay inside."""
    from pyproflab.analyses.gogc.pacer import MIN_TRIGGER

    m = rec.model(workload, FITS["100"], source)
    for g in (25.0, 50.0, 100.0, 200.0, 400.0, 800.0):
        r = m.predict(g, None)
        floor = r["marked_lo"] + MIN_TRIGGER * (r["goal_lo"] - r["marked_lo"])
        assert r["peak_memory_lo"] >= min(floor, r["peak_memory"]), (g, r)
    rows = rec.table(workload, source, FITS["100"])
    peaks = [r for r in rows if r.metric == "peak_memory"]
    outside = [(r.label, r.lo, r.measured, r.hi) for r in peaks if not r.inside]
    assert len(outside) <= (2 if workload == "batch" else 0), outside
    if workload == "blob":
        goals = {r.label: r.measured for r in rows if r.metric == "goal"}
        assert sum(r.measured < goals[r.label] for r in peaks) >= len(peaks) // 2
