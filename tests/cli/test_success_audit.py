"""What an audit of answers that look like success found (2026-11-28).

- ``regressions --base ... --new ... --service S`` (or ``--since``,
  ``--select``) compared the two sides over every service and time: those
  flags narrow ``--over-time``'s one selection and were dropped without a
  word otherwise. They are refused in one line, exit 2.
- ``ingest DATASET --service S`` (or ``--version``, ``--instance``,
  ``--label``, ``--path-template``) stored the dataset's profiles under their
  exported metadata and exited 0: the flags name files, and there were none.
  Refused in one line, exit 2, no store left; a refused dataset (a file
  altered) no longer leaves the empty store it made either.
- ``ingest FILE TYPO`` stored FILE and exited 0 with one "refused TYPO"
  line: a path named outright that does not exist is now one line, exit 2,
  nothing stored (a glob matching nothing stays a refusal).
- SIGTERM (``timeout``, a scheduler's stop) killed a command where it stood:
  ingest's worker processes stayed for ever. It unwinds as Ctrl-C does, exit
  143 ("terminated").
- ``profiles`` of a selection matching nothing printed a bare header; it says
  so on stderr (exit 0: an empty listing is an answer).
- ``ingest-gc A.prom B.prom --time T`` stored A and counted B's differing
  values "already present": an input with two values of one series at one
  time is refused whole, and the store ingest-gc made for it removed; so is
  one restating a stored sample's key with another value (B after A, in two
  runs), or a stored gctrace cycle with another time (a log re-dated with
  another --process-start said "20 already present" and kept the old dates).
- (2026-11-29) ``top FILE > out.txt`` (any command's stdout) on a full disk
  exited 2 under a traceback calling it a bug; it is one line naming stdout.
- (2026-11-29) ``regressions --base v1 --new v2 --fail-on-change`` exited 0
  with main.ownWork +18 % significant: the flag was over-time's alone, and a
  CI gate on two sides passed every time. It now exits 1 on a significant
  increase that is not half of a cost shift. ``--over-time`` took two sides'
  options (``--rank-by``, ``--test``, ``--unit``, ``--resamples``,
  ``--noinlines``) and ignored them, ``--top`` too (56 rows for ``--top 5`` on
  a demo store): the first are refused, ``--top`` cuts its change points.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyproflab.cli import main

GO = Path(__file__).parents[1] / "testdata" / "go"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--service", "apx"], "--service"),
        (["--since", "24h", "--select", "instance=i-1"], "--since, --select"),
    ],
)
def test_regressions_two_sides_refuse_over_time_narrowing(extra, named, tmp_path, capsys) -> None:
    db = tmp_path / "s.duckdb"
    argv = ["regressions", "--db", str(db), "--base", "version=v1", "--new", "version=v2"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pyproflab: error: {named}: over-time's one selection")
    assert err.count("\n") == 1 and not db.exists()


@pytest.fixture(scope="module")
def planted_store(tmp_path_factory) -> Path:
    from support import regdata

    db = tmp_path_factory.mktemp("planted") / "s.duckdb"
    cases = ["own", "base-own", "load", "base-load", "shift", "base-shift", "transient"]
    regdata.store_of(db, cases).close()
    return db


@pytest.mark.parametrize(("case", "rc"), [("own", 1), ("load", 0), ("shift", 0)])
def test_regressions_two_sides_fail_on_a_significant_increase(case, rc, planted_store, capsys):
    """own: main.ownWork +30 % planted (exit 1); load: 30 % more requests, no
    code change; shift: main.shiftX +30 % and main.shiftY -30 %, the total
    unchanged (a cost shift, not a regression of the service)."""
    argv = ["regressions", "--db", str(planted_store), "--base", f"instance=base-{case}"]
    argv += ["--new", f"instance={case}", "--format", "json"]
    assert main(argv) == 0  # without the flag, always 0
    assert main([*argv, "--fail-on-change"]) == rc
    capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--rank-by", "flat", "--test", "welch"], "--rank-by, --test"),
        (["--noinlines"], "--noinlines"),
    ],
)
def test_regressions_over_time_refuses_two_sides_options(extra, named, planted_store, capsys):
    argv = ["regressions", "--db", str(planted_store), "--over-time"]
    argv += ["--service", "regprog-transient"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert err == f"pyproflab: error: {named}: two sides' options; --over-time does not use them\n"


def test_regressions_over_time_top_cuts_the_change_points(planted_store, capsys):
    argv = ["regressions", "--db", str(planted_store), "--over-time"]
    argv += ["--service", "regprog-transient"]
    assert main([*argv, "--format", "json"]) == 0
    every = json.loads(capsys.readouterr().out)["changes"]
    assert len(every) > 2
    assert main([*argv, "--format", "json", "--top", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == every[:2]
    assert main([*argv, "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"... {len(every) - 2} more change points (--top N, or csv/json)")


def test_ingest_of_a_missing_named_path_stores_nothing(tmp_path, capsys) -> None:
    """``ingest cpu.pb.gz typo.pb.gz`` stored cpu.pb.gz and exited 0 with one
    'refused typo.pb.gz' line: a mistyped name looked like success."""
    db, missing = tmp_path / "s.duckdb", str(tmp_path / "cpu2.pb.gzz")
    assert main(["ingest", str(GO / "cpu.pb.gz"), missing, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err == f"pyproflab: error: {missing}: no such file or folder; nothing stored\n"
    assert not db.exists()
    # A glob matching nothing beside a file is still a refusal, not an error.
    none = str(tmp_path / "nothing-*.pb.gz")
    assert main(["ingest", str(GO / "cpu.pb.gz"), none, "--db", str(db)]) == 0
    assert f"refused {none}: no files match" in capsys.readouterr().err


def test_ingest_of_a_dataset_refuses_metadata_it_would_drop(tmp_path, capsys) -> None:
    """``ingest DATASET --service other`` said '1 new' and exit 0, the profile kept
    its exported service: the flags were dropped without a word."""
    src, dst, ds = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "ds"
    assert main(["ingest", str(GO / "cpu.pb.gz"), "--db", str(src), "--service", "api"]) == 0
    assert main(["export", "--db", str(src), "--parquet", str(ds)]) == 0
    capsys.readouterr()
    argv = ["ingest", str(ds), "--db", str(dst)]
    assert main(argv + ["--service", "other", "--label", "team=x"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"pyproflab: error: {ds}: a Parquet dataset keeps the metadata its profiles were "
        "exported with; the service, labels given would apply to no file (drop them)\n"
    )
    assert not dst.exists()
    with open(ds / "stacks.parquet", "ab") as f:  # a refused dataset: no store either
        f.write(b"x")
    assert main(argv) == 2
    assert "stacks.parquet differs from the export" in capsys.readouterr().err
    assert not dst.exists()


_TERM_AT_THIRD_FILE = """
import os, signal, sys
from pyproflab.cli import common, main
shown = common.Progress.__call__
def progress(self, done, total):
    if done == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    shown(self, done, total)
common.Progress.__call__ = progress
sys.exit(main(sys.argv[1:]))
"""


def _marked(mark: str) -> list[int]:
    """Pids of the processes whose environment holds ``mark``."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and mark.encode() in (d / "environ").read_bytes():
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


def test_sigterm_during_ingest_unwinds_and_leaves_no_worker(tmp_path) -> None:
    """SIGTERM killed ingest where it stood: its worker pool's processes stayed,
    blocked on their queues for ever, holding its stdout (``timeout 60 pyproflab
    ingest ... | tee log`` never ended). Now it unwinds as Ctrl-C does: exit 143,
    whole batches stored, no process left."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import uuid

    from pyproflab.store.connection import Store

    mark = f"PYPROFLAB_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    db, log = tmp_path / "s.duckdb", tmp_path / "log"
    argv = ["ingest", str(GO), "--db", str(db), "--workers", "2", "--batch-size", "1"]
    try:
        with open(log, "w") as out:
            rc = subprocess.run(
                [sys.executable, "-c", _TERM_AT_THIRD_FILE, *argv],
                stdout=out, stderr=out, env=env, timeout=120, check=False,
            ).returncode  # fmt: skip
        deadline = time.monotonic() + 300  # the pool's processes see their parent go (a hang bound)
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _marked(mark)
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
    assert (rc, left) == (143, []), log.read_text()
    with Store.open(db, read_only=True) as store:
        rows = store.sql(
            "SELECT p.num_samples AS n, (SELECT count(*) FROM samples s "
            "WHERE s.profile_id = p.profile_id) AS stored FROM profiles p"
        ).to_pylist()
    assert rows and all(r["n"] == r["stored"] for r in rows)
    # The line says what the store now holds (ingest's interrupt names its count).
    last = log.read_text().splitlines()[-1]
    assert last.startswith(f"pyproflab: terminated: {len(rows)} new profiles of the "), last


def test_profiles_of_a_selection_matching_nothing_says_so(tmp_path, capsys) -> None:
    """``profiles --service apx`` printed a header over no rows and nothing else."""
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", str(GO / "cpu.pb.gz"), "--db", db, "--service", "api"]) == 0
    capsys.readouterr()
    assert main(["profiles", "--db", db, "--service", "apx", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert (out.strip(), err) == ("[]", "pyproflab: note: no profiles match service=apx\n")
    assert main(["profiles", "--db", db, "--service", "api"]) == 0
    assert capsys.readouterr().err == ""


def test_two_snapshots_given_one_time_are_refused_not_half_stored(tmp_path, capsys) -> None:
    """``ingest-gc A.prom B.prom --time T``: B's samples took A's times, and those
    whose value differed were counted 'already present' and dropped, exit 0."""
    snap = GO.parent / "gc" / "prometheus-2.42-metrics.prom"
    other = tmp_path / "b.prom"
    other.write_text(
        "".join(
            "go_memstats_heap_alloc_bytes 999\n"
            if line.startswith("go_memstats_heap_alloc_bytes ")
            else line
            for line in snap.read_text().splitlines(keepends=True)
        )
    )
    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", "--format", "prom", "--instance", "i-1", "--db", str(db)]
    argv += ["--time", "2026-11-22T10:00:00Z"]
    assert main([*argv, str(snap), str(other)]) == 2
    assert capsys.readouterr().err == (
        "pyproflab: error: go_memstats_heap_alloc_bytes of instance i-1 has two values at "
        "2026-11-22T10:00:00+0000 in this input (samples without a timestamp of several "
        "files took one time?); nothing stored\n"
    )
    assert not db.exists()
    assert main([*argv, str(snap), str(snap)]) == 0  # the same file twice: one copy
    assert ": 295 new, 295 already present" in capsys.readouterr().out
    assert main([*argv, str(other)]) == 2  # B in a run of its own, after A
    assert capsys.readouterr().err == (
        "pyproflab: error: go_memstats_heap_alloc_bytes at 2026-11-22T10:00:00+00 of "
        "instance i-1: the store holds value 7916184.0 where this input says 999.0; "
        "nothing stored (one of them is misdated or misnamed)\n"
    )


def test_a_log_given_another_process_start_is_refused_not_present(tmp_path, capsys) -> None:
    """A gctrace log ingested again with a corrected --process-start said '20 already
    present', exit 0, and kept the first dates."""
    log = GO.parent / "gc" / "gctrace-go1.26.log"
    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(log), "--format", "gctrace", "--instance", "i-1", "--db", str(db)]
    assert main([*argv, "--process-start", "2026-11-22T10:00:00Z"]) == 0
    assert main([*argv, "--process-start", "2026-11-22T10:00:00Z"]) == 0  # the same again
    capsys.readouterr()
    assert main([*argv, "--process-start", "2026-11-23T10:00:00Z"]) == 2
    assert capsys.readouterr().err == (
        f"pyproflab: error: {log} gc 1 of instance i-1: the store holds time "
        "2026-11-22 10:00:00+00:00 where this input says 2026-11-23 10:00:00+00:00; "
        "nothing stored (one of them is misdated or misnamed)\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["top", str(GO / "cpu.pb.gz")],
        ["ingest", str(GO / "cpu.pb.gz"), "--db", "{db}"],
        ["profiles", "--db", "{db}"],
    ],
    ids=["top", "ingest", "profiles"],
)
def test_stdout_on_a_full_disk_is_one_line_not_a_bug(argv, tmp_path) -> None:
    """``pyproflab top FILE > out.txt`` on a full disk (here /dev/full) exited 2
    under a traceback ending 'an internal error (a bug: see the traceback
    above)': a full disk is the machine's state, not a bug. One line naming
    stdout and the reason, exit 2, no traceback."""
    import subprocess
    import sys

    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(GO / "cpu.pb.gz"), "--db", str(db)]) == 0
    argv = [a.replace("{db}", str(db)) for a in argv]
    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [sys.executable, "-m", "pyproflab", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last == "pyproflab: error: stdout: cannot write: No space left on device", res.stderr


def test_ingest_of_a_refused_dataset_beside_files_stores_nothing(tmp_path, capsys) -> None:
    """``ingest DATASET cpu.pb.gz`` with a damaged dataset stored the file, then
    failed on the dataset: exit 2 under the dataset's line alone, one profile in
    the store and not a word of it. The dataset is checked before any file is
    stored: the same line and exit 2, nothing stored."""
    src, dst, ds = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "ds"
    assert main(["ingest", str(GO / "heap.pb.gz"), "--db", str(src)]) == 0
    assert main(["export", "--db", str(src), "--parquet", str(ds)]) == 0
    with open(ds / "stacks.parquet", "ab") as f:
        f.write(b"x")
    capsys.readouterr()
    assert main(["ingest", str(ds), str(GO / "cpu.pb.gz"), "--db", str(dst)]) == 2
    assert "stacks.parquet differs from the export" in capsys.readouterr().err
    assert not dst.exists()  # the command's new store, with nothing in it, is not left
