"""A job that collects execution traces, end to end: `pyproflab job run` with a
``collect`` source of type ``trace`` against a live notesd, run twice as its
timer would. Each run stores one new trace of the instance (its tables and
four blocking profiles) and archives the file; each trace holds the service
serving that very request (net/http/pprof.Trace's goroutine waiting out the
seconds), and the traces answer `pyproflab trace goroutines --db`. The demo
fleet is built as test_collect's end-to-end test builds it (skipped, saying
why, where it does not build)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pyproflab.store import Store

pytestmark = pytest.mark.go


def _job(tmp_path: Path, url: str) -> Path:
    (tmp_path / "targets.toml").write_text(
        f'[[target]]\nservice = "notesd"\nversion = "v1"\ninstance = "i-1"\nurl = "{url}"\n'
    )
    job = tmp_path / "job.toml"
    job.write_text(
        '[job]\nname = "traces"\nstore = "fleet.duckdb"\noutput = "out"\n'
        '[[source]]\nkind = "collect"\ntargets = "targets.toml"\nseconds = 1\n'
        'types = ["trace"]\narchive = "archive"\nmetrics_interval = 0\n'
    )
    return job


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args], capture_output=True, text=True, timeout=120
    )


def test_a_job_collects_a_trace_each_run(tmp_path: Path) -> None:
    fh = pytest.importorskip("support.fleet_harness")
    try:
        bins = fh.build_fleet()
    except fh.FleetError as e:
        pytest.skip(f"the demo fleet does not build here: {str(e).splitlines()[0]}")
    with fh.FleetInstance(bins.notesd, workdir=tmp_path / "fleet") as inst:
        inst.start("v1", "i-1", max_lifetime=90)
        job = _job(tmp_path, inst.base_url)
        summaries = []
        for _ in range(2):
            res = _cli("job", "run", str(job))
            assert res.returncode == 0, res.stderr
            summaries.append(json.loads((tmp_path / "out" / "summary.json").read_text()))
    for run, summary in enumerate(summaries, 1):
        (source,) = summary["sources"]
        assert summary["run_id"] == run
        assert (source["kind"], source["failed"], source["errors"]) == ("collect", 0, [])
    db = tmp_path / "fleet.duckdb"
    with Store.open(db, read_only=True) as store:
        traces = store.sql(
            "SELECT service, version, instance, source, events FROM traces ORDER BY trace_id"
        ).to_pylist()
        hashes = store.sql("SELECT DISTINCT content_hash FROM traces").num_rows
        kinds = store.sql(
            "SELECT profile_type, count(*) AS n FROM profiles GROUP BY 1 ORDER BY 1"
        ).to_pylist()
        serving = store.sql(
            "SELECT DISTINCT trace_id FROM trace_stacks, unnest(frames) AS f(frame) "
            "WHERE frame.func = 'net/http/pprof.Trace' ORDER BY 1"
        ).column(0)
    url = f"{inst.base_url}/debug/pprof/trace?seconds=1"
    assert [(t["service"], t["version"], t["instance"], t["source"]) for t in traces] == [
        ("notesd", "v1", "i-1", url)
    ] * 2
    assert hashes == 2 and all(t["events"] > 0 for t in traces)
    assert kinds == [
        {"profile_type": f"trace-{k}", "n": 2} for k in ("net", "sched", "sync", "syscall")
    ]
    assert len(list((tmp_path / "archive").rglob("*.trace"))) == 2
    assert serving.to_pylist() == [1, 2]
    res = _cli("trace", "goroutines", "--db", str(db), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert {r["trace_id"] for r in json.loads(res.stdout)} == {1, 2}
