"""The GOGC advice on h77svc, a starved pod: a worker pool decoding JSON at
GOMAXPROCS 4 under a 0.5-CPU quota (tests/testdata/gc/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyproflab.cli import main

RUN = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "h77svc" / "gogc100-r1"
MiB = float(1 << 20)


def _predict(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    files = ["--gctrace", str(RUN / "gctrace.log"), "--metrics"]
    files += [str(p) for p in sorted(RUN.glob("snap-*.prom"))]
    assert main(["gogc", *files, *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_limit_the_peak_does_not_reach_leaves_the_peak(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GOGC=300 from GOGC=100's run: peak 356 MiB without a limit. With a
    432 MiB limit, above it, the peak came out 313 MiB (the residual ratio
    scaled the peak after the limit had capped it; 346 MiB measured in three
    runs at GOGC=300 with 432 MiB)."""
    out = _predict(capsys, "--candidates", "300", "--memory-limit", "432MiB,off")
    rows = {r["memory_limit_bytes"]: r for r in out["predictions"] if r["gogc"] == 300}
    free, capped = rows[None], rows[432 * MiB]
    assert free["peak_memory"] < 432 * MiB
    assert capped["peak_memory"] == pytest.approx(free["peak_memory"], rel=1e-9)
    assert capped["peak_memory_lo"] == pytest.approx(free["peak_memory_lo"], rel=1e-9)


def test_the_quota_finding_says_what_go_sets_under_half_a_cpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GOMAXPROCS 4 under a 0.5-CPU quota: the finding advised GOMAXPROCS=1 and
    said Go 1.25 and later "set it from the quota themselves", but Go sets 2
    there (the quota rounded up, at least 2: runtime/cgroup_linux.go)."""
    out = _predict(capsys, "--cpu-limit", "0.5", "--budget", "480MiB")
    finding = next(f for f in out["findings"] if "above the container's CPU quota" in f)
    assert "GOMAXPROCS 4 is above the container's CPU quota of 0.5" in finding
    assert "Set GOMAXPROCS=1" in finding
    assert "at least 2: 2 here)" in finding


def test_the_gc_share_seen_counts_the_pauses_as_the_runtime_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The run's own setting, from its log and /metrics: the GC share came out
    6.8 % against the runtime's 7.7 % over the run (summary.json), gctrace's
    pauses counted at their clock, one P, where the throttled runtime's classes
    counted 1.9-2.4x that. With the classes' pauses it is within the 3 %
    between the window the run measured and the snapshots' and the 2 % of the
    Ps the process left idle (the model takes a CPU-bound process at all P)."""
    out = _predict(capsys, "--candidates", "100")
    row = next(r for r in out["predictions"] if r["gogc"] == 100 and r["current"])
    seen = json.loads((RUN / "summary.json").read_text())["gc_share"]
    assert row["gc_share"] == pytest.approx(seen, rel=0.06)
    assert "pauses as" in json.dumps(out)


def test_a_heap_goal_under_a_memory_limit_stays_under_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GOGC 400 and 800 with a 432 MiB limit: the goals' intervals reached 455
    and 451 MiB (widened with the distance from GOGC=100 past the limit the
    runtime's goal never passes while the heap marked is below it; the three
    runs at 800 with 432 MiB had goals of 382 MiB)."""
    out = _predict(capsys, "--candidates", "400,800", "--memory-limit", "432MiB")
    rows = [r for r in out["predictions"] if r["memory_limit_bytes"] == 432 * MiB]
    assert len(rows) == 2
    for r in rows:
        assert r["marked_hi"] < 432 * MiB
        assert r["goal_lo"] <= r["goal"] <= r["goal_hi"] <= 432 * MiB
