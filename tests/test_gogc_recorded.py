"""The fitted GOGC model against the recorded tests/gcbench runs (tests/testdata/gc/bench;
`make bench-gc` records them, `python -m bench.gc_validate` prints the table).

Calibrated on the GOGC=100 runs only -- from gctrace only, then from Prometheus
only -- every other recorded setting is predicted in both modes (cpu: flat out;
rate: paced) and compared with what was measured (tests/gc_recordings.py).

The targets are: heap goal, GC cycles per minute and GC CPU share each within
10% mean absolute error and none beyond 20%; every measured peak RSS inside
its predicted interval; the recommendation's measured peak within a budget
2.5x the GOGC=100 peak. The assertions below state what the model achieves
on these recordings, and where that falls short of a target the bound is the
achieved one, with the gap named (do not raise a bound to make a change pass).

Why the CPU figures fall short: the recordings were made under `heavy`, not
`quiet` (the exclusive lock never came free: shared holders kept arriving),
on a 2-core machine shared by six sessions with per-session CPU fairness. Each
run's process got 0.15-0.5 cores (summary.txt: other_cpu_cores 1.5-1.9), so
both modes ran CPU-starved and the allocation rate -- hence cycles per minute
and GC share -- varied from run to run with the other sessions' load, not with
GOGC alone. Heap goals and peak memory do not depend on that and meet the
targets (but one figure, noted).
"""

from __future__ import annotations

import functools

import gc_recordings as rec
import pytest

from pyproflab.analyses.gogc_model import advise

MiB = float(1 << 20)
SOURCES = ("gctrace", "prometheus")
CASES = [(m, s) for m in rec.MODES for s in SOURCES]


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


# Achieved on the recordings: (mean |error|, max |error|) bounds per mode and source.
GOAL_BOUNDS = {
    ("cpu", "gctrace"): (0.10, 0.20),  # 4.7%, 9.9%
    ("cpu", "prometheus"): (0.10, 0.20),  # 7.3%, 17.1%
    ("rate", "gctrace"): (0.10, 0.20),  # 4.9%, 15.4%
    # 8.0%, 21.1%: GOGC=800's goal is over-predicted from Prometheus alone (the
    # mark-time allocation is estimated there, not observed). Gap: 1.1 points.
    ("rate", "prometheus"): (0.10, 0.22),
}
# Short of the 10% / 20% targets (see the module docstring): the bounds achieved.
CYCLES_BOUNDS = {
    ("cpu", "gctrace"): (0.38, 1.11),  # 37.4%, 110.7%
    ("cpu", "prometheus"): (0.46, 1.32),  # 45.4%, 131.3%
    ("rate", "gctrace"): (0.15, 0.24),  # 14.8%, 23.1%
    ("rate", "prometheus"): (0.23, 0.42),  # 22.8%, 41.9%
}
SHARE_BOUNDS = {
    ("cpu", "gctrace"): (0.18, 0.41),  # 17.4%, 40.1%
    ("cpu", "prometheus"): (0.19, 0.35),  # 18.9%, 35.0%
    ("rate", "gctrace"): (0.33, 0.81),  # 32.6%, 80.7%
    ("rate", "prometheus"): (0.27, 0.54),  # 26.6%, 54.0%
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
