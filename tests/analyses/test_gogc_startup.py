"""A process's start-up cycles are left out of its run (``gogc.startup``), on
h70svc's whole logs (tests/testdata/gc/README.md)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from pyproflab.analyses import gogc as model

H70 = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "h70svc"


@pytest.mark.parametrize("setting", ["gogc100", "gogc200"])
def test_start_up_cycles_do_not_set_the_rate(setting: str) -> None:
    """Each log starts with the process: 3-6 fast cycles while the map of 200k
    records is built. Kept, they made GOGC=100's rate 37.2 cycles a minute and
    GOGC=200's 19.6, against 26.0 and 15.3 in the traffic the program measured
    itself (runtime/metrics over its request window, summary.json)."""
    logs = sorted(H70.glob(f"{setting}/r*/gctrace.log"))
    obs = model.observe(cycles=model.read_gctrace_files([str(p) for p in logs]))
    (seen,) = model.advise(obs).model.fit.observed
    truth = statistics.mean(
        json.loads((p.parent / "summary.json").read_text())["cycles_per_min"] for p in logs
    )
    assert seen.figures["cycles_per_min"] == pytest.approx(truth, rel=0.10)
    assert sum("left out as start-up" in n for n in obs.notes) == len(logs)


def test_a_start_up_too_long_to_cut_is_said() -> None:
    """A 30 s GOGC=200 run: gc 1-4 while the map was built, then 4 cycles,
    too few to fit alone. The start-up stays in, and the output says so (it
    said nothing: the rate and goals silently held the build)."""
    log = H70 / "short" / "gogc200.log"
    obs = model.observe(cycles=model.read_gctrace_files([str(log)]))
    assert len(obs.samples) == 8
    assert any("start-up (gc 1-4, the heap still being built) is kept" in n for n in obs.notes)
