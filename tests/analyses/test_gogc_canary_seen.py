"""An advised setting the data ran at gets no canary (``predict`` rule 4),
on h70svc's recorded logs (tests/testdata/gc/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyproflab.cli import main

H70 = Path(__file__).resolve().parents[1] / "testdata" / "gc" / "h70svc"
# No raise among the candidates: a raise with its limit at the usable budget
# (382 MiB) is bounded by the limit (predict rule 2) and would be advised.
ARGS = ["--process-cpu", "0.85", "--budget", "424MiB", "--candidates", "50,100,200"]


def test_an_observed_recommendation_gets_no_canary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """h70svc at GOGC 100 and 200, each log from its gc 2 on (as a rotated log
    starts: ``startup`` cuts only a run that begins at gc 1, so the start-up
    cycles stay): the advice keeps GOGC=200, which the data ran at; the plan
    said "run GOGC=200 on one instance for 252 GC cycles" (outside the
    observed settings), its runs' own goal over marked heap 0.12 from the
    model's GOGC=200."""
    logs = []
    for p in sorted(H70.glob("gogc*/r*/gctrace.log")):
        cut = tmp_path / f"{p.parent.parent.name}-{p.parent.name}.log"
        cut.write_text("".join(p.read_text().splitlines(keepends=True)[1:]))
        logs.append(str(cut))
    assert main(["gogc", "--gctrace", *logs, *ARGS, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rec = out["recommendation"]
    assert rec["observed"] and rec["gogc"] == 200
    assert rec["distance"] > 0.1  # the case the distance alone got wrong
    assert out["canary"] is None
    assert any("was observed: a canary there adds nothing" in n for n in out["notes"])


def test_a_setting_near_an_observed_one_is_not_called_observed() -> None:
    """make demo (GOGC=50 and 200 observed, budget 1.5x) advised GOGC=300 with a 55 MiB
    limit, its goal held near GOGC=200's (distance under CANARY_DISTANCE): no canary,
    right, but the note said "GOGC=300, limit 55MiB was observed" beneath a list of the
    two settings that were."""
    from pyproflab.analyses.gogc import predict as pr

    wide = {"gc_share": 0.015, "gc_share_lo": 0.010, "gc_share_hi": 0.025}
    wide |= {k + s: 1.0 for k in ("peak_memory", "cycles_per_min") for s in ("", "_lo", "_hi")}
    near = {"gogc": 300.0, "memory_limit_bytes": 55 * 2**20, "observed": False}
    note = pr.wide_note({**near, **wide, "distance": pr.CANARY_DISTANCE / 2})
    assert note is not None and "was observed" not in note
    assert "GOGC=300" in note and "did not run" in note and "within 11% of a setting" in note
    ran = pr.wide_note({**near, **wide, "observed": True, "distance": 0.0})
    assert ran is not None and "was observed: a canary there adds nothing" in ran
    assert pr.wide_note({**near, **wide, "distance": 2 * pr.CANARY_DISTANCE}) is None
