"""Issue 17, fault injection for jobs: a write error at any step of a job run (a store
statement, or an output file) is one line with exit code 2 and leaves the store and
the job's state consistent; the next run completes the work and ends exactly where a
run without the fault ends.

The job: a drop folder of 8 small CPU profiles (two versions, batches of 3), the
regressions and PGO analyses. Kills at random moments are covered by
test_crash_safety.py; here every failure is a clean error at a chosen step.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

import pytest
from support.hostile_faults_helpers import _Fault
from support.jobs_helpers import make_drop, write_job

from pyproflab.cli import main
from pyproflab.store import Store

CPU = Path(__file__).resolve().parents[1] / "testdata" / "go" / "cpu.pb.gz"
# Statements of one run hit by a fault: every STRIDE-th, and the last LAST (the
# run's record and the drop folder's last batch are at the end).
STRIDE, LAST = 5, 4


@pytest.fixture(scope="module")
def drop(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("drop")
    make_drop(CPU, folder, n=4)
    return folder


def _job(folder: Path, drop: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_job(
        folder / "job.toml",
        drop=drop,
        store=folder / "s.duckdb",
        output=folder / "out",
        batch_size=3,
        resamples=100,  # the least regressions takes
    )


def _run(job: Path, capsys) -> tuple[int, list[str]]:
    code = main(["job", "run", str(job)])
    return code, capsys.readouterr().err.strip().splitlines()


def _state(db: Path) -> dict:
    """Samples per stored profile, the job's files and its runs (none of each for a
    store file whose creation failed before its schema was made)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        made = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'store_meta'")
        if not made.fetchone()[0]:
            return {"profiles": {}, "files": [], "runs": []}
    with Store.open(str(db), read_only=True) as s:
        per_profile = s.sql(
            "SELECT p.content_hash AS digest, count(x.profile_id) AS n FROM profiles p "
            "LEFT JOIN samples x USING (profile_id) GROUP BY 1 ORDER BY 1"
        ).to_pylist()
        tables = set(s.sql("SELECT table_name FROM duckdb_tables()").column(0).to_pylist())
        files = runs = []
        if "job_files" in tables:
            files = s.sql("SELECT path, status FROM job_files ORDER BY 1").to_pylist()
        if "job_runs" in tables:
            runs = s.sql(
                "SELECT run_id, fingerprint, exit_code, finished_at IS NOT NULL AS done "
                "FROM job_runs ORDER BY 1"
            ).to_pylist()
    return {
        "profiles": {r["digest"]: r["n"] for r in per_profile},
        "files": files,
        "runs": runs,
    }


def _outputs(folder: Path) -> dict[str, bytes]:
    """The stable names' contents, the summary left out (it holds times); the output
    folder and the run's stamp (time and run id, also in ``job_run``) in the text
    are made placeholders."""
    return {
        p.name: re.sub(
            rb'"run_id": \d+',
            b'"run_id": RUN',
            re.sub(
                rb"\d{8}T\d{6}Z-r\d+",
                b"STAMP",
                p.read_bytes().replace(str(folder).encode(), b"OUT"),
            ),
        )
        for p in sorted(folder.iterdir())
        if p.is_symlink() and p.name != "summary.json"
    }


@pytest.fixture(scope="module")
def reference(drop, tmp_path_factory) -> dict:
    """A run without faults: its exit code, state and outputs, and how many store
    statements it runs."""
    folder = tmp_path_factory.mktemp("reference")
    job = _job(folder, drop)
    fault = _Fault(0)
    mp = pytest.MonkeyPatch()
    try:
        fault.install(mp)
        code = main(["job", "run", str(job)])
    finally:
        mp.undo()
    assert code in (0, 1)
    return {
        "code": code,
        "state": _state(folder / "s.duckdb"),
        "outputs": _outputs(folder / "out"),
        "statements": fault.calls,
    }


def _consistent(db: Path, reference: dict) -> None:
    """Every stored profile is whole; every file the job recorded as ingested is
    stored; no run is recorded as done with a good exit code unless it was."""
    if not db.exists():
        return
    got = _state(db)
    want = reference["state"]["profiles"]
    for digest, n in got["profiles"].items():
        assert want.get(digest) == n, f"profile {digest} has {n} samples"
    ingested = [f for f in got["files"] if f["status"] == "ingested"]
    assert len(ingested) <= len(got["profiles"])
    if any(run["done"] and run["exit_code"] != 2 for run in got["runs"]):
        assert got["profiles"] == want  # a good run saw the whole input


def _assert_completed(folder: Path, reference: dict, capsys) -> None:
    """The next run without a fault ends where the reference run ended."""
    code, err = _run(folder / "job.toml", capsys)
    assert code == reference["code"], err
    got, want = _state(folder / "s.duckdb"), reference["state"]
    assert got["profiles"] == want["profiles"]
    assert sorted((f["path"], f["status"]) for f in got["files"]) == sorted(
        (f["path"], f["status"]) for f in want["files"]
    )
    # (Fingerprints differ between folders: they hash the job spec, paths included.)
    last = got["runs"][-1]
    assert last["done"] and last["exit_code"] == want["runs"][-1]["exit_code"]
    assert _outputs(folder / "out") == reference["outputs"]
    # And once more: nothing left to do.
    again, _ = _run(folder / "job.toml", capsys)
    assert again == reference["code"] and _state(folder / "s.duckdb")["runs"] == got["runs"]


def _fault_steps(n: int) -> list[int]:
    return sorted(set(range(1, n + 1, STRIDE)) | set(range(max(1, n - LAST + 1), n + 1)))


def test_a_store_write_error_at_any_step_of_a_job(drop, reference, tmp_path, capsys) -> None:
    n = reference["statements"]
    assert n >= 20  # sources, state, analyses, the run's record
    for k in _fault_steps(n):
        folder = tmp_path / f"k{k}"
        job = _job(folder, drop)
        fault = _Fault(k)
        with pytest.MonkeyPatch.context() as mp:
            fault.install(mp)
            code, err = _run(job, capsys)
        assert fault.fired, k
        # A failing source is reported and the job goes on (exit 2); any other
        # step stops the run with one line. Either way: exit 2, no traceback.
        assert code == 2, (k, err)
        assert not any("Traceback" in line for line in err), (k, err)
        if not any("source failed" in line for line in err):
            assert len(err) == 1 and "No space left on device" in err[0], (k, err)
        _consistent(folder / "s.duckdb", reference)
        _assert_completed(folder, reference, capsys)


def test_an_output_write_error_at_each_file_of_a_job(drop, reference, tmp_path, capsys) -> None:
    from pyproflab.jobs import outputs

    real_write, real_point = outputs.write_atomic, outputs.point_latest
    n = len(reference["outputs"]) * 2 + 2  # each file and its stable name, the summary
    for k in range(1, n + 1):
        folder = tmp_path / f"w{k}"
        job = _job(folder, drop)
        calls = [0]

        def full(real, *args, k=k, calls=calls, **kwargs):
            calls[0] += 1
            if calls[0] == k:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(*args, **kwargs)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(outputs, "write_atomic", lambda *a, f=full, **kw: f(real_write, *a, **kw))
            mp.setattr(outputs, "point_latest", lambda *a, f=full, **kw: f(real_point, *a, **kw))
            code, err = _run(job, capsys)
        if calls[0] < k:
            break  # fewer writes than guessed: every one has been hit
        assert code == 2 and len(err) == 1, (k, err)
        assert "cannot write the job's outputs" in err[0] and "No space left" in err[0]
        _consistent(folder / "s.duckdb", reference)
        assert not [p for p in (folder / "out").iterdir() if ".tmp-" in p.name]
        _assert_completed(folder, reference, capsys)
        shutil.rmtree(folder)
