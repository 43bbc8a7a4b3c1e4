"""A gctrace cycle whose mark the process did not run through (stopped or
descheduled: the runtime's clock counts the stop as GC work) is left out of
the GOGC model, with a note (``samples`` module rules). The excerpt is of a
real log (tests/testdata/gc/stall: the demo's notesd, `make demo`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyproflab.analyses import gogc as model
from pyproflab.cli import main
from pyproflab.sources.gctrace import parse_gctrace

STALL = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "stall"
LOGS = {"v1-a": 2484, "v1-b": 546}  # each log's stalled cycle


def _cost(r: dict) -> float:
    """A cycle's GC CPU as the model counts it (pauses at their clock, one P)."""
    work = r["cpu_background_ms"] + r["cpu_idle_ms"] + r["cpu_assist_ms"]
    return (work + r["clock_sweep_term_ms"] + r["clock_mark_term_ms"]) / 1e3


def test_a_stalled_mark_does_not_set_its_settings_gc_cost() -> None:
    """v1-b's gc 546 marked for 96 s after a 255 s gap and counted 94 s of GC
    CPU (every other cycle of the excerpt 0.11 s or less): it made GOGC=200's
    mean GC CPU per cycle larger than any cycle the process ran, and the
    advice turned to GOGC=50. A setting's mean cost now lies within its
    other cycles' costs, and the notes name the cycles left out."""
    paths = {name: str(STALL / f"{name}.gctrace") for name in LOGS}
    obs = model.observe(cycles=model.read_gctrace_files(paths.values()))
    for name, stalled in LOGS.items():
        rows = parse_gctrace(Path(paths[name]).read_text(), source=name).to_pylist()
        others = [_cost(r) for r in rows if r["gc_num"] != stalled and not r["forced"]]
        ss = [s for s in obs.samples if s["instance"] == paths[name]]
        assert min(others) <= obs.mean("cost", ss) <= max(others), name
        assert stalled not in {s["gc_num"] for s in ss}, name
        assert any(f"of {paths[name]}:" in n and f"gc {stalled} (" in n for n in obs.notes)


def test_the_output_says_which_cycle_was_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    logs = [str(STALL / f"{name}.gctrace") for name in LOGS]
    assert main(["gogc", "--budget", "256MiB", "--gctrace", *logs]) == 0
    out = capsys.readouterr().out
    assert "gc 546 (mark 95.8 s clock, GC CPU 94.2 s" in out
    assert "gc 2484 (mark 4.2 s clock, GC CPU 2.6 s" in out
    assert "stopped or descheduled" in out


def test_a_heap_that_grows_is_not_taken_for_a_stall(tmp_path: Path) -> None:
    """Marks as long as the heap is large are kept: the rule is on the mark
    clock per scanned byte. Heaps growing 1,000x over a run (marks from 2 ms
    to 2 s) lose no cycle."""
    lines, t = [], 1.0
    for i in range(60):
        live = 4 * 1.125**i  # MiB: 4 to about 4,000
        mark = 0.5 * live  # ms
        goal = 2 * live
        lines.append(
            f"gc {i + 1} @{t:.3f}s 5%: 0.05+{mark:.1f}+0.05 ms clock, "
            f"0.05+0.1/{mark / 4:.2f}/0+0.05 ms cpu, {goal * 0.9:.0f}->{goal:.0f}->{live:.0f} MB, "
            f"{goal:.0f} MB goal, 0 MB stacks, 0 MB globals, 1 P"
        )
        t += 1 + mark / 1e3
    log = tmp_path / "growing.log"
    log.write_text("\n".join(lines) + "\n")
    obs = model.observe(cycles=model.read_gctrace_files([str(log)]), gogc=100.0)
    assert len(obs.samples) == len(lines)
    assert not any("left out" in n for n in obs.notes)
