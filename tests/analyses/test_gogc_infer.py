"""GOGC inferred from gctrace's heap goals (``analyses.gogc.infer``), on the
recorded validation runs: one setting per run of one GOGC, and the range its
MiB-floored figures allow said where it is wide."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import gc_recordings as rec

from pyproflab.analyses.gogc import infer
from pyproflab.analyses.gogc.inputs import read_gctrace_files
from pyproflab.analyses.gogc.samples import from_gctrace
from pyproflab.errors import UsageError

MiB = float(1 << 20)


def _observed(workload: str, label: str):
    return from_gctrace(rec.cycles_table(rec.runs(workload, label)))


@pytest.mark.parametrize(("workload", "label"), [("tiny", "gogc25"), ("service", "gogc25")])
def test_one_gogc_on_a_small_heap_is_one_setting(workload, label):
    # tiny's three GOGC=25 runs were read as GOGC 20, 25 and 30 (10, 277, 73
    # cycles) and modelled as three settings; service's as two.
    obs = _observed(workload, label)
    assert list(obs.settings) == [(25.0, None)]


def test_a_wide_floored_range_is_said():
    # batch's 13 MiB heap at GOGC 25: gctrace's whole MiB fit anything from 19 to 38.
    obs = _observed("batch", "gogc25")
    (said,) = [n for n in obs.notes if "whole MiB" in n]
    assert "from 19 to 38" in said and said.endswith("give --gogc")


def test_a_narrow_range_is_not_said():
    for workload in ("graph", "lru", "blob", "queue"):
        obs = _observed(workload, "gogc100")
        assert not [n for n in obs.notes if "whole MiB" in n], workload


def test_ranges_that_only_hold_their_own_value_stay_apart():
    # batch's GOGC 25 and 50 (19-38 and 38-62): two settings, not one (25 read
    # as 30, which its note qualifies).
    dirs = rec.runs("batch", "gogc25") + rec.runs("batch", "gogc50")
    obs = from_gctrace(rec.cycles_table(dirs))
    assert sorted(g for g, _ in obs.settings) == [30.0, 50.0]


def _cycle(n: int, goal_mib: int, marked_mib: int) -> dict:
    return {
        "gc_num": n,
        "goal": (goal_mib + 0.5) * MiB,
        "marked": (marked_mib + 0.5) * MiB,
        "roots": 0.0,
    }


def test_segment_bounds_follow_the_floor():
    # goal 17, marked 13 (whole MiB), no roots: g_lo = (17 - 14)/(14 + 2),
    # g_hi = (18 - 13)/13.
    seg = [_cycle(1, 17, 13), _cycle(2, 17, 13)]
    lo, hi = infer.segment_bounds(seg)
    assert lo == pytest.approx(100 * 3 / 16) and hi == pytest.approx(100 * 5 / 13)
    assert infer.segment_bounds([_cycle(1, 17, 13), _cycle(3, 17, 13)]) is None


@pytest.mark.parametrize(
    ("workload", "label"),
    [
        ("queue", "gogc400-lim256MiB"),
        ("graph", "gogcoff-lim160MiB"),
        ("blob", "gogc400-lim1536MiB"),
    ],
)
def test_goals_a_limit_held_give_no_gogc(workload, label):
    # queue's were read as GOGC 175 and 200 (goal 231 MB throughout, marked
    # 70-96 MB), graph's GOGC=off as 170: settings that never ran.
    with pytest.raises(UsageError, match=r"a memory limit held it.*--gogc and --current-limit"):
        _observed(workload, label)


def test_a_canary_under_a_limit_is_left_out_of_an_inferred_refit():
    dirs = rec.runs("queue", "gogc100") + rec.runs("queue", "gogc400-lim256MiB")[:1]
    obs = from_gctrace(rec.cycles_table(dirs))
    assert list(obs.settings) == [(100.0, None)]
    (said,) = [n for n in obs.notes if "memory limit held it" in n]
    assert "40 of 40 cycles kept a heap goal near 232 MiB" in said


def test_a_given_setting_keeps_the_held_goals():
    t = rec.cycles_table(rec.runs("queue", "gogc400-lim256MiB"))
    obs = from_gctrace(t, gogc=400.0, memory_limit=256 * MiB)
    assert list(obs.settings) == [(400.0, 256 * MiB)]
    assert not [n for n in obs.notes if "held" in n]


def test_a_start_up_ramp_does_not_move_the_setting_off_its_cycles_range():
    """gcload at GOGC=25 under Go 1.22 (helper-89): 5 ramp cycles, where the
    whole MiB of a 1-5 MiB heap allow any GOGC from 9 to 37 (value 30), and 5
    steady ones, which allow only 24.8 to 25.3. Joined as one setting, its
    label was the median of 30 and 25: "current GOGC=30" beside a note that
    "any GOGC from 25 to 25 fits"."""
    log = Path(__file__).resolve().parents[1] / "testdata/gc/runs/gcload-go1.22-startup.log"
    obs = from_gctrace(read_gctrace_files([str(log)]))
    assert list(obs.settings) == [(25.0, None)]
    assert obs.current == (25.0, None)
    assert not [n for n in obs.notes if "whole MiB" in n]


def test_a_gogc_metrics_export_takes_back_the_inferred_notes_range():
    """batch at GOGC 25 with its /metrics beside the log: the exported
    go_gc_gogc_percent labels the cycles, yet the note that gctrace's goals read
    as GOGC 30, "any GOGC from 19 to 38", stayed (helper-89, on Go 1.22's notesd:
    "GOGC=50 is inferred ... give --gogc" under "GOGC: prometheus")."""
    from pyproflab.analyses.gogc.inputs import observe

    dirs = rec.runs("batch", "gogc25")
    alone = observe(cycles=rec.cycles_table(dirs))
    assert [n for n in alone.notes if "whole MiB" in n]
    both = observe(cycles=rec.cycles_table(dirs), samples=rec.samples_table(dirs))
    assert list(both.settings) == [(25.0, None)]
    assert not [n for n in both.notes if "whole MiB" in n], both.notes
