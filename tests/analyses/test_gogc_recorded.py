"""The fitted GOGC model against the recorded tests/gcbench runs (tests/testdata/gc/bench;
`make bench-gc` records them, `python -m bench.gc_validate` prints the table).

Calibrated on the GOGC=100 runs only -- from gctrace only, from Prometheus
only, then from both -- every other recorded setting is predicted in both modes (cpu: flat out;
rate: paced) and compared with what was measured (tests/support/gc_recordings.py).

The targets are: heap goal, GC cycles per minute and GC CPU share each within
10% mean absolute error and none beyond 20%; every measured peak RSS inside
its predicted interval; the recommendation's measured peak within a budget
2.5x the GOGC=100 peak. The assertions below state what the model achieves
on these recordings, and where that falls short of a target the bound is the
achieved one, with the gap named (do not raise a bound to make a change pass).

Why it falls short (recordings of 2026-11-24 under the exclusive lock: other
processes used -0.05 to 0.13 cores, see tests/testdata/gc/README.md;
`python -m bench.gc_explain` prints every figure below):

- Inputs at GOGC=100 against what the same runs measured: GC CPU per cycle,
  marked heap and goal agree within 3.5% from either source. Two do not:
  Prometheus's paced mark time (P = 2 runs fractional mark workers, which run
  only when their P is free: 7.7 ms for 11.6; it is a lower bound and the
  provenance says so; flat out the trigger's floor gives 13.6 for 14.6, see
  ``gogc_inputs.floor_mark``), and paced gctrace's mutator CPU
  (the CPU the GC workers leave while marking: 0.628 cores for the runtime's
  0.480 user class), which alone makes the paced gctrace share 20.5%/32.4%;
  with 0.480 it would be 7.0%/14.0%. gctrace cannot show that CPU: with
  Prometheus beside it (``gctrace+prometheus``) the paced row meets the target.
- GC CPU per cycle moves with the setting beyond what the marked heap explains:
  flat out 11.56 ms at GOGC=100, 13.46 at 400 and 15.70 at 800 for a marked
  heap of 42.9, 46.4 and 47.0 MiB; paced 14.13 at 25 and 18.71 at 800 for the
  same 34.6 MiB (of which idle workers 5.9 and 10.2 ms). The GOGC=100 cycles
  do not identify a per-byte-of-goal term: fitted across them (goals 76-98
  MiB flat out) it is 0.013 +- 0.017 ms per MiB; paced (66-72 MiB) -0.03 +-
  0.29. With each setting's measured cost the share would be 8.5%/14.1% (cpu
  gctrace), 6.3%/9.7% (cpu Prometheus), 7.5%/10.7% (paced Prometheus).
- Flat out at GOGC=25 the mutator allocates 494 MiB/s per core of its CPU, for
  565 at GOGC=100: cycles +15%, share +14%. Not the write barriers: at
  GOGC=100 it allocates 585 MiB per core-second while marking and 571 outside
  (gctrace). Sweeping fits: the runtime counts it as user CPU, and each cycle
  sweeps every span in use, so it costs ``k·(A + n·H)``. With k = 1e-4
  core-seconds per MiB the rest of the user CPU allocates 653, 632 and 640
  MiB per core-second at GOGC 25, 50 and 100 flat out, and paced it is
  0.431-0.448 cores at every setting where the user class runs 0.450-0.524.
  Within the GOGC=100 runs ``n·H`` barely varies, so ``k`` is not identified
  there: no sweep term was added (taking it from the other settings would fit
  the validation data).
- Prometheus flat out met the targets once the trigger's floor gave its mark
  time (before: 4.6 ms, floating garbage 4.5 MiB for 10.5, cycles under the
  160 MiB limit -21%, share 17.2%/23.9%).
"""

from __future__ import annotations

import functools

import pytest
from support import gc_recordings as rec

from pyproflab.analyses.gogc_model import advise, calibrate

MiB = float(1 << 20)
CASES = [(m, s) for m in rec.MODES for s in rec.SOURCES]


@functools.cache
def _table(mode: str, source: str) -> tuple[rec.Row, ...]:
    return tuple(rec.table(mode, source))


def _errors(mode: str, source: str, metric: str) -> list[float]:
    return [
        abs(r.error) for r in _table(mode, source) if r.metric == metric and r.label != "gogc100"
    ]


def test_recordings_are_complete() -> None:
    for mode in rec.MODES:
        labels = rec.labels(mode)
        assert len(labels) == 8, labels
        assert "gogcoff-lim160MiB" in labels and "gogc400-lim160MiB" in labels
        for label in labels:
            assert len(rec.runs(mode, label)) == 3, (mode, label)


INPUT_TOLERANCE = 0.035


def _gogc100_measured(mode: str) -> dict[str, float]:
    ms = [rec.measured(d) for d in rec.runs(mode, "gogc100")]
    return {k: sum(m[k] for m in ms) / len(ms) for k in ms[0]}


@pytest.mark.parametrize(
    "mode, source, key",
    [
        (m, s, k)
        for m in rec.MODES
        for s in ("gctrace", "prometheus")
        for k in ("cost", "marked", "goal", "mutator")
    ],
)
def test_gogc100_inputs_match_what_the_runs_measured(mode: str, source: str, key: str) -> None:
    """Each source's input at the calibration setting against the same runs'
    measurement (GC CPU per cycle and the mutator's CPU: the runtime's CPU
    classes; marked heap and goal: gctrace): an estimation error here is a
    defect, whatever the model makes of it. The paced gctrace mutator is the
    one known gap (see the module notes)."""
    obs = rec.calibration(mode, source)
    got = calibrate(obs).mutator if key == "mutator" else obs.mean(key)
    want = _gogc100_measured(mode)[key]
    if (mode, source, key) == ("rate", "gctrace", "mutator"):
        # gctrace cannot see it: the CPU the GC workers leave while marking, 0.628 for 0.480.
        assert got / want == pytest.approx(1.31, abs=0.02)
        return
    assert abs(got / want - 1) <= INPUT_TOLERANCE, (got, want)


@pytest.mark.parametrize("mode", rec.MODES)
def test_prometheus_mark_time_at_two_procs(mode: str) -> None:
    """At GOMAXPROCS 2 the background workers are fractional: their CPU gives
    only a lower bound of the mark time, and the provenance says so. Flat out
    the pacer's runway puts the trigger at its floor, and the floor gives the
    mark time (13.6 ms for gctrace's 14.6); paced it does not, and the lower
    bound stands (7.7 for 11.6)."""
    obs = rec.calibration(mode, "prometheus")
    assert obs.procs == 2
    assert "lower bound" in obs.provenance["mark time"]
    ratio = obs.mean("mark_s") / _gogc100_measured(mode)["mark_s"]
    if mode == "cpu":
        assert 0.9 <= ratio <= 1.0, ratio
    else:
        assert ratio < 0.7, ratio


# Achieved on the recordings (python -m bench.gc_validate): (mean |error|, max |error|).
# Where a bound is above the 10% / 20% target, the comment names the gap.
GOAL_BOUNDS = {
    ("cpu", "gctrace"): (0.10, 0.20),  # 3.1%, 5.8%
    ("cpu", "prometheus"): (0.10, 0.20),  # 3.9%, 5.4%
    ("rate", "gctrace"): (0.10, 0.20),  # 1.5%, 2.8%
    ("rate", "prometheus"): (0.10, 0.20),  # 2.0%, 4.0%
    ("cpu", "gctrace+prometheus"): (0.10, 0.20),  # 3.4%, 5.8%
    ("rate", "gctrace+prometheus"): (0.10, 0.20),  # 1.5%, 2.8%
}
CYCLES_BOUNDS = {
    ("cpu", "gctrace"): (0.10, 0.20),  # 8.8%, 14.6%
    ("cpu", "prometheus"): (0.10, 0.20),  # 6.2%, 10.5%
    ("rate", "gctrace"): (0.10, 0.20),  # 2.2%, 4.4%
    ("rate", "prometheus"): (0.10, 0.20),  # 3.4%, 6.3%
    ("cpu", "gctrace+prometheus"): (0.10, 0.20),  # 9.2%, 14.6%
    ("rate", "gctrace+prometheus"): (0.10, 0.20),  # 2.2%, 4.4%
}
SHARE_BOUNDS = {
    ("cpu", "gctrace"): (0.11, 0.20),  # 10.4%, 16.8%: mean 0.4 over
    ("cpu", "prometheus"): (0.10, 0.20),  # 7.3%, 15.9%
    ("rate", "gctrace"): (0.21, 0.33),  # 20.5%, 32.4%: 10.5 and 12.4 points over
    ("rate", "prometheus"): (0.12, 0.20),  # 11.2%, 19.4%: mean 1.2 over
    ("cpu", "gctrace+prometheus"): (0.11, 0.20),  # 10.8%, 16.8%: mean 0.8 over
    # Both sources meet the target: Prometheus gives the process's CPU that gctrace lacks.
    ("rate", "gctrace+prometheus"): (0.10, 0.20),  # 7.0%, 14.3%
}


@pytest.mark.parametrize(
    "metric, bounds",
    [("goal", GOAL_BOUNDS), ("cycles_per_min", CYCLES_BOUNDS), ("gc_share", SHARE_BOUNDS)],
)
@pytest.mark.parametrize("mode, source", CASES)
def test_prediction_errors(mode: str, source: str, metric: str, bounds: dict) -> None:
    errs = _errors(mode, source, metric)
    assert len(errs) == 7
    mae, worst = sum(errs) / len(errs), max(errs)
    mae_bound, max_bound = bounds[(mode, source)]
    assert mae <= mae_bound and worst <= max_bound, (
        f"{mode}/{source} {metric}: mean |error| {mae:.1%}, max {worst:.1%}\n"
        + rec.format_rows([r for r in _table(mode, source) if r.metric == metric])
    )


@pytest.mark.parametrize("mode, source", CASES)
def test_every_measured_peak_is_inside_its_interval(mode: str, source: str) -> None:
    rows = [r for r in _table(mode, source) if r.metric == "peak_memory"]
    assert len(rows) == 8
    outside = [r for r in rows if not r.inside]
    assert not outside, rec.format_rows(outside)


@pytest.mark.parametrize("mode, source", CASES)
def test_recommendation_stays_within_a_budget_2_5x_the_gogc100_peak(mode: str, source: str) -> None:
    obs = rec.calibration(mode, source)
    peak100 = max(rec.summary(d)["peak_rss_bytes"] for d in rec.runs(mode, "gogc100"))
    budget = 2.5 * peak100
    recorded = [rec.setting_of(label) for label in rec.labels(mode)]
    adv = advise(obs, settings=recorded, budget=budget)
    r = adv.recommendation
    assert r is not None
    # A raise comes with a memory limit within the budget minus headroom.
    if r["gogc"] is None or r["gogc"] > 100:
        assert r["memory_limit_bytes"] is not None
        assert r["memory_limit_bytes"] <= budget * 0.9
    label = f"gogc{r['gogc_label']}" + (
        f"-lim{r['memory_limit_bytes'] / MiB:.0f}MiB" if r["memory_limit_bytes"] else ""
    )
    measured = [rec.summary(d)["peak_rss_bytes"] for d in rec.runs(mode, label)]
    assert max(measured) <= budget, (label, max(measured) / MiB, budget / MiB)
    # No raise without a limit is ever within the budget, whatever its point estimate.
    for row in adv.rows():
        if row["memory_limit_bytes"] is None and (row["gogc"] is None or row["gogc"] > 100):
            assert not row["within_budget"]
