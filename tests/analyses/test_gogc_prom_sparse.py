"""Prometheus snapshots scraped more often than the GC runs (``gogc.prometheus``:
snapshots with no cycle lengthen the next interval), on h70svc's recorded
/metrics (tests/testdata/gc/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyproflab.analyses import gogc as model

RUN = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "h70svc" / "gogc400-metrics"


def test_a_cycle_every_few_scrapes_keeps_its_rate_and_gc_cpu() -> None:
    """GOGC=400: a cycle every 12 s, scraped every 2 s (30 snapshots). Only the
    intervals holding a cycle were kept, each weighing its 2 s: 30.5 cycles a
    minute and 0.12 GC cores, against the program's own 5.0 and 0.02 over
    the same minute (runtime/metrics, summary.json)."""
    paths = sorted(str(p) for p in RUN.glob("*.prom"))
    obs = model.observe(samples=model.read_metric_files(paths))
    (seen,) = model.advise(obs).model.fit.observed
    truth = json.loads((RUN / "summary.json").read_text())
    assert seen.figures["cycles_per_min"] == pytest.approx(truth["cycles_per_min"], rel=0.2)
    gc_cores = truth["gc_cpu_s"] / truth["wall_s"]
    assert seen.figures["gc_cores"] == pytest.approx(gc_cores, rel=0.3)


def test_one_run_is_said_so() -> None:
    """The inputs' lines said "(5 cycles over 5 intervals, 1 runs)"; gctrace's say "1 run"."""
    obs = model.observe(samples=model.read_metric_files([str(p) for p in RUN.glob("*.prom")]))
    assert obs.provenance["cycles"].endswith(" intervals, 1 run)")
