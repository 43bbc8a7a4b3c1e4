"""Stable names (``summary.json``, ``default.pgo``, ``regressions-<svc>.json`` ...)
when a run skips an analysis, and output retention (``keep_runs``).

The job runs in-process on a drop folder (see test_jobs.py): run 1 has two
versions, so regressions and PGO run; later runs add, each, a profile with no
samples as a newest version v3 (its PGO is refused: "no samples") and ask
regressions for a ``per`` counter that has no samples (skipped).
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from support.jobs_helpers import T0, make_drop, variant, write_job

KEEP_RUNS = 2
RUNS = KEEP_RUNS + 3


def _empty_profile(cpu: Path, folder: Path, run: int) -> None:
    """A new input for ``run``: a v3 CPU profile with no samples."""
    from pyproflab import read_profile
    from pyproflab.encode import write_profile

    p = variant(read_profile(cpu), time=T0 + timedelta(minutes=run))
    path = folder / "svc" / "v3" / "i-0" / f"cpu-9{run:03d}.pb.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_profile(dataclasses.replace(p, samples=p.samples.slice(0, 0)), path)


@pytest.fixture
def skipping_job(go_profiles, tmp_path):
    """Run the job RUNS times (run 1 analyses everything, runs 2.. skip regressions
    and PGO); return (output folder, each run's summary, the JSON stable names
    after run 1)."""
    from pyproflab.jobs import load_job, run_job

    drop, out = tmp_path / "drop", tmp_path / "out"
    make_drop(go_profiles["cpu"], drop, n=6)
    extra = f"\n[retention]\nkeep_runs = {KEEP_RUNS}\n"
    job = write_job(
        tmp_path / "job.toml", drop=drop, store=tmp_path / "s.duckdb", output=out, extra=extra
    )
    summaries = [run_job(load_job(job), log=lambda line: None).summary]
    first = {p.name: json.loads(p.read_text()) for p in out.glob("*.json") if p.is_symlink()}
    job.write_text(job.read_text().replace("[regressions]", '[regressions]\nper = "no_such_total"'))
    for run in range(2, RUNS + 1):
        _empty_profile(go_profiles["cpu"], drop, run)
        summaries.append(run_job(load_job(job), log=lambda line: None).summary)
    return out, summaries, first


def test_retention_never_leaves_a_stable_name_dangling(skipping_job):
    """Runs 2.. write no default.pgo: retention (keep_runs) must not delete run 1's,
    which default.pgo still names, or a build reading default.pgo fails (ENOENT)."""
    from pyproflab import read_profile

    out, summaries, first_docs = skipping_job
    assert [s["run_id"] for s in summaries] == list(range(1, RUNS + 1))
    assert all("skipped" in s["pgo"][0] for s in summaries[1:])
    assert any(s["pruned"] for s in summaries)  # retention did delete files
    links = [p for p in out.iterdir() if p.is_symlink()]
    assert {p.name for p in links} >= {"summary.json", "default.pgo", "pgo-svc.json"}
    assert [p.name for p in links if not p.exists()] == []
    assert summaries[0]["stamp"] in os.readlink(out / "default.pgo")
    assert read_profile(out / "default.pgo").samples.num_rows > 0


def test_each_json_output_says_which_run_wrote_it(skipping_job):
    """pgo-svc.json (and every report JSON) said nothing of its run: after runs
    that skipped PGO, a reader of it (or of default.pgo) alone could not tell it
    was run 1's. Now each JSON output carries job_run, and the summary of a run
    that skipped PGO names the profile default.pgo still points to."""
    out, summaries, first_docs = skipping_job
    first, last = summaries[0], summaries[-1]
    doc = json.loads((out / "pgo-svc.json").read_text())
    assert doc["job_run"] == {"job": "test-job", "run_id": 1, "stamp": first["stamp"]}
    reg = first_docs["regressions-svc.json"]
    assert reg["job_run"]["run_id"] == 1 and reg["rows"]
    assert last["pgo"][0]["kept"] == os.readlink(out / "default.pgo")
    assert first["stamp"] in last["pgo"][0]["kept"]
    assert "job_run" not in json.loads((out / "summary.json").read_text())


def test_a_skipped_pgo_log_line_names_the_profile_kept():
    from pyproflab.jobs import run_line

    summary = {"pgo": [{"service": "svc", "skipped": "no samples", "kept": "default-x-r1.pgo"}]}
    assert run_line.skipped(summary) == [("pgo of svc", "no samples (default-x-r1.pgo kept)")]


def test_a_report_the_newest_run_did_not_write_has_no_stable_name(skipping_job):
    """regressions-svc.json (.txt) still named run 1's report after runs 2.. had
    skipped regressions: read as the current verdict, an old answer shown as new.
    Its stable names are now withdrawn by the first run that does not write it,
    and the summary says so; default.pgo and pgo-svc.json stay (run 1's)."""
    out, summaries, _ = skipping_job
    reports = ["regressions-svc.json", "regressions-svc.txt"]
    assert all(out.joinpath(name).is_symlink() for name in ("default.pgo", "pgo-svc.json"))
    assert not any(
        out.joinpath(name).is_symlink() or out.joinpath(name).exists() for name in reports
    )
    assert [s["withdrawn"] for s in summaries] == [[], reports] + [[]] * (RUNS - 2)
    assert "no_such_total" in summaries[1]["regressions"][0]["skipped"]  # and why
