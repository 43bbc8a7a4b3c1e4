"""`pyproflab job run`: spec loading, exit codes, exactly-once, outputs, retention.

The drop folder holds small variants of profgen's CPU profile (the
``go_profiles`` fixture): version v1 as written, version v2 with one function
made ``SLOWDOWN`` times heavier, each file a distinct profile (its own
time_nanos), laid out as ``{service}/{version}/{instance}/cpu-{time}.pb.gz``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.jobs_helpers import (
    REPO,
    T0,
    make_drop,
    output_state,
    variant,
    write_job,
)

# --- helpers (also used by test_crash_safety.py) --------------------------------------


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def store_state(db: Path) -> dict:
    from pyproflab.store import Store

    with Store.open(db, read_only=True) as s:
        counts = s.counts()
        hashes = s.sql("SELECT content_hash FROM profiles ORDER BY 1").column(0).to_pylist()
        runs = s.sql("SELECT run_id, fingerprint, exit_code FROM job_runs ORDER BY 1").to_pylist()
    return {"counts": counts, "hashes": hashes, "runs": runs}


# --- fixtures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def drop_source(go_profiles, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("drop")
    make_drop(go_profiles["cpu"], folder)
    return folder


# --- spec ---------------------------------------------------------------------------


def test_spec_relative_paths_and_unknown_keys(tmp_path):
    from pyproflab.errors import UsageError
    from pyproflab.jobs import load_job

    job = tmp_path / "j.toml"
    job.write_text(
        '[job]\nname="x"\nstore="s.duckdb"\noutput="out"\n'
        '[[source]]\nkind="drop"\npath="in"\n[regressions]\nthreshold_pct=5\n'
    )
    spec = load_job(job)
    assert spec.store == str(tmp_path / "s.duckdb")
    assert spec.sources[0].path == str(tmp_path / "in")
    assert spec.regressions.threshold_pct == 5 and spec.pgo is None
    job.write_text('[job]\nname="x"\nstore="s"\noutput="o"\n[regressions]\nthreshold=5\n')
    with pytest.raises(UsageError, match="unknown key 'threshold'"):
        load_job(job)
    job.write_text('[job]\nname="x"\nstore="s"\noutput="o"\n[[source]]\nkind="ftp"\n')
    with pytest.raises(UsageError, match="kind must be one of"):
        load_job(job)


def test_cli_bad_job_file_is_exit_2(tmp_path):
    res = run_cli("job", "run", str(tmp_path / "missing.toml"))
    assert res.returncode == 2
    assert "cannot read the job file" in res.stderr and "Traceback" not in res.stderr


# --- a real run -----------------------------------------------------------------------


def test_job_findings_outputs_and_exactly_once(drop_source, tmp_path):
    db, out = tmp_path / "fleet.duckdb", tmp_path / "out"
    job = write_job(tmp_path / "job.toml", drop=drop_source, store=db, output=out)

    res = run_cli("job", "run", str(job), "--summary", str(tmp_path / "s.json"))
    assert res.returncode == 1, res.stderr  # v2's slowdown is a finding over 10%
    assert "run 1:" in res.stdout and "24 new profiles" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    cli_summary = json.loads((tmp_path / "s.json").read_text())
    assert cli_summary.pop("pruned") == []  # known only after the summary file is written
    assert summary == cli_summary
    reg = summary["regressions"][0]
    assert (reg["base"], reg["new"]) == ("v1", "v2") and reg["findings"]
    # The heaviest leaf x4 (SLOWDOWN): +300% as a rate; as a share (the job's default
    # measure) 4 / (1 + 3 s) - 1 for its base share s, +98% here (s = 0.34).
    assert reg["findings"][0]["rel_pct"] > 50
    # Stable names are symlinks to this run's timestamped files.
    for stable in (
        "summary.json",
        "regressions-svc.json",
        "regressions-svc.txt",
        "default.pgo",
        "pgo-svc.json",
    ):
        assert (out / stable).is_symlink(), stable
        assert summary["stamp"] in os.readlink(out / stable)
    from pyproflab import read_profile

    assert read_profile(out / "default.pgo").samples.num_rows > 0

    # Exactly once: again on the same input changes nothing, writes nothing.
    before_out, before_store = output_state(out), store_state(db)
    res2 = run_cli("job", "run", str(job))
    assert res2.returncode == 1, res2.stderr  # the same verdict as the run it repeats
    assert "unchanged since run 1" in res2.stdout and "nothing written" in res2.stdout
    assert output_state(out) == before_out
    assert store_state(db) == before_store

    # A new profile in the drop folder is a new input: run 2, new stamp, latest moves.
    from pyproflab.encode import write_profile

    extra = drop_source.parent / "drop-extra"
    new_file = extra / "svc" / "v2" / "i-9" / "cpu-9999.pb.gz"
    new_file.parent.mkdir(parents=True)
    base = read_profile(next(drop_source.rglob("*.pb.gz")))
    write_profile(variant(base, time=T0 + timedelta(minutes=30)), new_file)
    job.write_text(job.read_text().replace(f'path = "{drop_source}"', f'path = "{extra}"'))
    res3 = run_cli("job", "run", str(job))
    assert res3.returncode in (0, 1), res3.stderr
    assert "run 2:" in res3.stdout and "1 new profile," in res3.stdout
    s3 = json.loads((out / "summary.json").read_text())
    assert s3["run_id"] == 2 and s3["stamp"] != summary["stamp"]
    assert (out / f"summary-{summary['stamp']}.json").is_file()  # the old one is kept


def test_threshold_decides_exit_code_0(drop_source, tmp_path):
    db, out = tmp_path / "fleet.duckdb", tmp_path / "out"
    job = write_job(
        tmp_path / "job.toml", drop=drop_source, store=db, output=out, threshold=10_000, pgo=False
    )
    from pyproflab.jobs import load_job, run_job

    result = run_job(load_job(job), log=lambda line: None)
    assert result.exit_code == 0 and result.summary["findings"] == 0
    assert "0 findings over 10000%" in result.line


def test_drop_folder_is_incremental(drop_source, tmp_path):
    """Handled files are not read again: a run with nothing new reads no profile."""
    from pyproflab.jobs import load_job, run_job

    db, out = tmp_path / "fleet.duckdb", tmp_path / "out"
    spec = load_job(
        write_job(tmp_path / "job.toml", drop=drop_source, store=db, output=out, pgo=False)
    )
    first = run_job(spec, log=lambda line: None)
    assert first.summary["sources"][0]["files"] == 24
    second = run_job(spec, log=lambda line: None)
    assert second.summary["sources"][0]["files"] == 0
    assert second.summary["unchanged_since"] == 1


def test_source_failure_is_exit_2(tmp_path):
    from pyproflab.jobs import load_job, run_job

    job = write_job(
        tmp_path / "job.toml",
        drop=tmp_path / "nope",
        store=tmp_path / "s.duckdb",
        output=tmp_path / "out",
        pgo=False,
    )
    result = run_job(load_job(job), log=lambda line: None)
    assert result.exit_code == 2
    assert "does not exist" in result.summary["sources"][0]["error"]
    # The line a scheduler logs says why it is 2 (it said "0 new profiles, 0 selected ...").
    assert ": run 1: 0 new profiles, 1 source failed, 0 selected, " in result.line, result.line
    (tmp_path / "a-file").write_text("not a folder")
    job = write_job(
        tmp_path / "job.toml",
        drop=tmp_path / "a-file",
        store=tmp_path / "s.duckdb",
        output=tmp_path / "out",
        pgo=False,
    )
    result = run_job(load_job(job), log=lambda line: None)
    assert result.exit_code == 2  # it said "does not exist" of a file that does
    assert result.summary["sources"][0]["error"].endswith("a-file is not a folder")


def test_unexpected_exception_is_exit_2_not_1(drop_source, tmp_path, monkeypatch, capsys):
    """Python's own exit code for a crash is 1, which means findings here."""
    from pyproflab.cli import main
    from pyproflab.jobs import runner

    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(runner, "_regressions", boom)
    job = write_job(
        tmp_path / "job.toml",
        drop=drop_source,
        store=tmp_path / "s.duckdb",
        output=tmp_path / "out",
        pgo=False,
    )
    assert main(["job", "run", str(job)]) == 2
    assert "RuntimeError: bug" in capsys.readouterr().err


# --- retention ----------------------------------------------------------------------


def test_retention_drops_old_profiles_and_orphans(go_profiles, tmp_path):
    from pyproflab.decode import decode_bytes
    from pyproflab.jobs.retention import apply_retention
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest_paths

    old_dir = tmp_path / "old"
    # "Now" a day after the recorded heap profile, not the wall clock: that
    # profile is dated 2026-11-24, and from 2026-12-24 a 30-day retention on
    # today's date removed it too (4 profiles, not 3).
    heap = decode_bytes(go_profiles["heap"].read_bytes())
    now = datetime.fromtimestamp(heap.time_nanos / 1e9, UTC) + timedelta(days=1)
    make_drop(
        go_profiles["cpu"],
        old_dir,
        n=3,
        versions=("v0",),
        slow_version=None,
        start=now - timedelta(days=40),
    )
    with Store.open(tmp_path / "ref.duckdb") as ref:
        ingest_paths(ref, [go_profiles["heap"]], ProfileMeta(service="svc"))
        expected = ref.counts()  # what the heap profile alone needs
    with Store.open(tmp_path / "s.duckdb") as store:
        ingest_paths(store, [old_dir], ProfileMeta(service="svc"))
        ingest_paths(store, [go_profiles["heap"]], ProfileMeta(service="svc"))
        assert store.counts()["profiles"] == 4
        rep = apply_retention(store, 30, now=now)
        assert rep.profiles == 3 and rep.changed
        # What is left is exactly what the heap profile alone needs.
        assert store.counts() == expected
        again = apply_retention(store, 30, now=now)
        assert not again.changed


@pytest.mark.go
def test_retention_drops_old_traces_with_their_profiles(tmp_path):
    """A trace (a job's collect source of type trace stores them) goes with its
    blocking profiles, every trace_* row with it; a newer trace stays whole. Before,
    its profiles went and the trace and its rows stayed forever."""
    from support.trace_helpers import trace_path

    from pyproflab import schema
    from pyproflab.jobs.retention import apply_retention
    from pyproflab.keying.keys import ProfileMeta
    from pyproflab.store import Store
    from pyproflab.store.traces import ingest_trace

    def counts(store: Store) -> dict[str, int]:
        names = ["traces", *(f"trace_{n}" for n in schema.TRACE_TABLES), *store.counts()]
        return {n: store.sql(f"SELECT count(*) FROM {n}")[0][0].as_py() for n in names}

    meta = ProfileMeta(service="svc")
    with Store.open(tmp_path / "ref.duckdb") as ref:
        ingest_trace(ref, trace_path("mutex"), meta)
        expected = counts(ref)  # what the newer trace alone needs
    with Store.open(tmp_path / "s.duckdb") as store:
        old = ingest_trace(store, trace_path("chan"), meta).trace_id
        new = ingest_trace(store, trace_path("mutex"), meta).trace_id
        rows = store.sql("SELECT trace_id, time FROM traces").to_pylist()
        times = {r["trace_id"]: r["time"] for r in rows}
        assert times[old] < times[new]
        rep = apply_retention(store, 30, now=times[new] + timedelta(days=30, seconds=-1))
        assert (rep.profiles, rep.traces) == (4, 1) and rep.changed
        assert counts(store) == expected
        assert store.sql("SELECT trace_id FROM traces")[0].to_pylist() == [new]


def test_retention_in_a_job_and_no_reingest(go_profiles, tmp_path):
    """A dropped profile whose file is still in the drop folder is not ingested again."""
    from pyproflab.jobs import load_job, run_job

    drop = tmp_path / "drop"
    make_drop(
        go_profiles["cpu"],
        drop,
        n=2,
        versions=("v0",),
        slow_version=None,
        start=datetime.now(UTC) - timedelta(days=10),
    )
    make_drop(go_profiles["cpu"], drop, n=3, versions=("v1",), slow_version=None)
    job = write_job(
        tmp_path / "job.toml",
        drop=drop,
        store=tmp_path / "s.duckdb",
        output=tmp_path / "out",
        pgo=False,
        extra="\n[retention]\nmax_age_days = 7\nkeep_runs = 2\n",
    )
    spec = load_job(job)
    r1 = run_job(spec, log=lambda line: None)
    assert r1.summary["retention"]["profiles"] == 2 and r1.summary["profiles"] == 3
    assert ", retention removed 2 profiles; exit 0" in r1.line  # the summary line says so too
    r2 = run_job(spec, log=lambda line: None)
    assert r2.summary["sources"][0]["files"] == 0
    assert r2.summary["unchanged_since"] == r1.summary["run_id"]
    assert "retention removed" not in r2.line  # nothing more to remove


def test_outputs_prune_keeps_latest(tmp_path):
    from pyproflab.jobs import outputs

    for run in range(1, 5):
        o = outputs.OutputSet(tmp_path, outputs.make_stamp(T0 + timedelta(hours=run), run))
        o.write("summary", "json", f'{{"run": {run}}}')
        o.publish()
    deleted = outputs.prune(tmp_path, 2)
    assert len(deleted) == 2
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 3 and json.loads((tmp_path / "summary.json").read_text())["run"] == 4


def test_example_job_file_loads():
    from pyproflab.jobs import load_job

    spec = load_job(REPO / "examples" / "job.toml")
    assert spec.sources[0].kind == "drop" and spec.regressions.threshold_pct == 10
    assert spec.pgo is not None and spec.gogc is not None


def test_job_over_time_finds_the_step(drop_source, tmp_path):
    """v2's profiles come after v1's: followed over time, the slowed leaf
    steps up and stays, a finding of the job's over-time pass."""
    db, out = tmp_path / "fleet.duckdb", tmp_path / "out"
    job = write_job(tmp_path / "job.toml", drop=drop_source, store=db, output=out, pgo=False)
    text = job.read_text().replace(
        "[regressions]\n", '[regressions]\nover_time = true\nover_time_since = "36500d"\n'
    )
    job.write_text(text)
    res = run_cli("job", "run", str(job))
    assert res.returncode == 1, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    item = summary["over_time"][0]
    assert item["service"] == "svc" and "skipped" not in item, item
    # x4 (SLOWDOWN) is +300% as a rate, 4 / (1 + 3 s) - 1 as a share s (the default).
    assert item["findings"] and item["findings"][0]["rel_pct"] > 50, item
    assert (out / "over-time-svc.json").is_symlink()


def test_a_drop_whose_every_new_file_is_refused_failed(tmp_path):
    """As a collect source none of whose fetches succeeded: a drop folder whose
    new files were all refused (a scraper writing error pages) failed as a whole,
    exit 2, the files named; they are handled, so the next run does not fail on
    them again. One refused file beside stored ones is only listed."""
    from pyproflab.jobs import load_job, run_job

    drop = tmp_path / "drop"
    bad = drop / "svc" / "v1" / "i1" / "cpu-1.pb.gz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"<html>502 Bad Gateway</html>")
    os.utime(bad, (time.time() - 3600,) * 2)
    job = write_job(
        tmp_path / "job.toml", drop=drop, store=tmp_path / "s.duckdb", output=tmp_path / "out"
    )
    result = run_job(load_job(job), log=lambda line: None)
    assert result.exit_code == 2
    error = result.summary["sources"][0]["error"]
    assert error.startswith("drop: every new file was refused (1); first: ") and str(bad) in error
    again = run_job(load_job(job), log=lambda line: None)
    assert "error" not in again.summary.get("sources", [{}])[0]


def test_the_run_line_counts_refused_files(drop_source, tmp_path):
    """A run that stored the good files of a drop and refused one said
    "24 new profiles, ... exit 0", the line a scheduler logs, as if every file
    had been read; the refused file was only on stderr and in the summary. The
    line (and the unchanged one of the next run) now counts it."""
    import shutil

    from pyproflab.jobs import load_job, run_job

    drop = tmp_path / "drop"
    shutil.copytree(drop_source, drop)
    bad = sorted(drop.rglob("*.pb.gz"))[0].with_name("cpu-bad.pb.gz")
    bad.write_bytes(b"<html>502 Bad Gateway</html>")
    os.utime(bad, (time.time() - 3600,) * 2)
    out = tmp_path / "out"
    job = write_job(tmp_path / "job.toml", drop=drop, store=tmp_path / "s.duckdb", output=out)
    first = run_job(load_job(job), log=lambda line: None)
    assert first.exit_code in (0, 1), first.line
    assert "24 new profiles, 1 refused, 24 selected" in first.line, first.line
    # A refused file is handled: the next run, on the same input, refuses nothing new.
    again = run_job(load_job(job), log=lambda line: None)
    assert "0 new profiles, nothing written" in again.line, again.line


def test_the_run_line_names_the_analyses_it_skipped(drop_source, tmp_path):
    """A job whose regressions could not run (a mistyped ``per`` counter) and
    whose gogc had no GC data said '0 findings over 10%, ...; exit 0' and
    nothing on stderr, the answer of a fleet with nothing hot: the skips were
    only in summary.json. The line now counts and names them, and the log gives
    each reason."""
    from pyproflab.jobs import load_job, run_job

    extra = '\n[gogc]\nbudget = "2GiB"\n'
    job = write_job(
        tmp_path / "job.toml",
        drop=drop_source,
        store=tmp_path / "s.duckdb",
        output=tmp_path / "o",
        extra=extra,
        pgo=False,
    )
    job.write_text(job.read_text().replace("[regressions]", '[regressions]\nper = "no_such_total"'))
    lines: list[str] = []
    result = run_job(load_job(job), log=lines.append)
    assert result.exit_code == 0, result.line
    assert "0 findings over 10%, 2 skipped (regressions of svc, gogc), " in result.line
    reg = result.summary["regressions"][0]["skipped"]
    gogc = result.summary["gogc"]["skipped"]
    assert "no_such_total" in reg and lines == [
        f"regressions of svc skipped: {reg}",
        f"gogc skipped: {gogc}",
    ]


def test_a_service_without_versions_is_said_and_gets_its_pgo(go_profiles, drop_source, tmp_path):
    """A service whose drop is laid out without {version} was left out of the
    analyses without a word: 'versions' lists versioned services only, so its
    regressions (and over-time) never ran, its default.pgo was never written
    when another service had versions, and the run said '0 findings', exit 0."""
    from pyproflab.jobs import load_job, run_job

    solo = tmp_path / "solo-drop"
    make_drop(
        go_profiles["cpu"],
        solo,
        n=3,
        service="solo",
        versions=("b1",),
        start=T0 - timedelta(hours=1),
    )
    job = write_job(
        tmp_path / "job.toml", drop=drop_source, store=tmp_path / "s.duckdb", output=tmp_path / "o"
    )
    text = job.read_text().replace('[selection]\nservice = "svc"\n', "")
    second = (
        f'[[source]]\nkind = "drop"\npath = "{solo}"\n'
        'path_template = "{service}/{build}/{instance}/{type}-{time}.pb.gz"\n\n'
    )
    job.write_text(text.replace("[regressions]", second + "[regressions]"))
    result = run_job(load_job(job), log=lambda line: None)
    assert result.exit_code in (0, 1), result.line
    regs = {i["service"]: i.get("skipped") for i in result.summary["regressions"]}
    assert regs == {"solo": "no version on its cpu profiles", "svc": None}
    assert ", 1 skipped (regressions of solo), " in result.line
    assert [(i["service"], i["version"]) for i in result.summary["pgo"]] == [
        ("solo", None),
        ("svc", "v2"),
    ]
    assert (tmp_path / "o" / "default-solo.pgo").is_file()


def test_versions_started_together_are_compared_by_name_and_said(go_profiles, tmp_path):
    """Both versions' first profiles taken at T0 and stored in one ingest: which
    is newer cannot come from the store, so v1 -> v2 by name, said in the
    regressions' notes and beside the PGO version (v2's files come first in
    path order only by their folder's name: workflows.versions' rules)."""
    from pyproflab.jobs import load_job, run_job

    drop = tmp_path / "drop"
    for ver in ("v2", "v1"):
        make_drop(go_profiles["cpu"], drop, n=4, versions=(ver,), slow_version="v2")
    job = write_job(
        tmp_path / "job.toml", drop=drop, store=tmp_path / "s.duckdb", output=tmp_path / "o"
    )
    result = run_job(load_job(job), log=lambda line: None)
    [reg] = result.summary["regressions"]
    assert (reg["base"], reg["new"]) == ("v1", "v2")
    assert reg["notes"][0].startswith("v1 and v2 started together (their first profiles overlap")
    [pgo] = result.summary["pgo"]
    assert pgo["version"] == "v2" and "taken from their names" in pgo["note"]


def test_a_selection_matching_nothing_is_exit_2(drop_source, tmp_path):
    """A [selection] naming no stored service (a typo) ran no analysis and said
    '0 selected, 0 findings', exit 0: the answer of a fleet with nothing hot."""
    from pyproflab.jobs import load_job, run_job

    job = write_job(
        tmp_path / "job.toml", drop=drop_source, store=tmp_path / "s.duckdb", output=tmp_path / "o"
    )
    job.write_text(job.read_text().replace('service = "svc"', 'service = "svx"'))
    lines: list[str] = []
    result = run_job(load_job(job), log=lines.append)
    why = "the selection (service=svx) matches none of the store's 24 profiles: nothing analysed"
    assert (result.exit_code, result.summary["error"], lines) == (2, why, [why])
    assert result.summary["sources"][0]["new"] == 24  # the ingest itself stands


def test_the_run_line_names_three_skips_and_counts_the_rest(drop_source, tmp_path):
    """Every service of a fleet skipped (a mistyped per counter) named each one on
    the line; it names three and counts the rest, and logs each."""
    from pyproflab.jobs import load_job, run_line

    job = load_job(
        write_job(tmp_path / "j.toml", drop=drop_source, store=tmp_path / "s", output=tmp_path)
    )
    summary = {"regressions": [{"service": f"s{i}", "skipped": "why"} for i in range(5)]}
    lines: list[str] = []
    part = run_line.findings_part(job, 0, summary, lines.append)
    assert (
        part == "0 findings over 10%, 5 skipped (regressions of s0, regressions of s1, "
        "regressions of s2, 2 more)"
    )
    assert lines == [f"regressions of s{i} skipped: why" for i in range(5)]


def test_a_default_pgo_failing_its_check_is_on_the_line(drop_source, tmp_path, monkeypatch):
    """A default.pgo whose edges go tool preprofile read otherwise than pyproflab
    computed (MISMATCH: the pgo command warns on stderr) was kept in
    summary.json alone: the job said '0 findings ...; exit 0'. The line and the
    log now say so. (preprofile is replaced by one that reads no edges.)"""
    from pyproflab.analyses import pgo
    from pyproflab.analyses.pgo_edges import EdgeSet
    from pyproflab.jobs import load_job, run_job

    monkeypatch.setattr(pgo, "go_binary", lambda: "go")
    monkeypatch.setattr(pgo, "preprofile_edges", lambda path: EdgeSet(source="preprofile"))
    job = write_job(
        tmp_path / "job.toml", drop=drop_source, store=tmp_path / "s.duckdb", output=tmp_path / "o"
    )
    job.write_text(job.read_text().replace("verify = false", "verify = true"))
    lines: list[str] = []
    result = run_job(load_job(job), log=lines.append)
    verify = result.summary["pgo"][0]["verify"]
    assert verify.startswith("MISMATCH"), verify
    assert ", default.pgo of svc failed its check, " in result.line, result.line
    assert f"pgo of svc: {verify}" in lines
