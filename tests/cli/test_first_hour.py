"""What a new user met in their first hour (issue 34, "Defects a new user hit").

- ``ingest`` of files that are all refused exits 2 and leaves no store behind;
  a file already present is still exit 0.
- ``gogc --gctrace FILE`` of a file with no gctrace line names that file
  (the log was given; "give gctrace logs" was wrong).
- Outputs (``merge -o``, ``pgo -o``, ``export --parquet``) get the mode the
  umask gives any new file or folder, not tempfile's 0600/0700.
- A command that opened a store for writing leaves no ``*.duckdb.lock`` behind.
- pprof's filters that match nothing say so on stderr as pprof does
  ("TagShow expression matched no samples"), and the report still prints.
- ``traces`` takes ``--diff_base`` and ``--base``, as pprof's -traces does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support import pprof_oracle as oracle

from pyproflab.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _bad(path: Path) -> Path:
    path.write_text("not a profile\n", encoding="utf-8")
    return path


# --- ingest --------------------------------------------------------------------------


def test_ingest_of_only_refused_files_exits_2_and_makes_no_store(cwd, capsys):
    _bad(cwd / "a.pb.gz")
    _bad(cwd / "b.pb.gz")
    assert main(["ingest", "a.pb.gz", "b.pb.gz", "--db", "s.duckdb"]) == 2
    err = capsys.readouterr().err
    assert "refused a.pb.gz" in err and "refused b.pb.gz" in err
    assert sorted(p.name for p in cwd.iterdir()) == ["a.pb.gz", "b.pb.gz"]


def test_ingest_exit_codes_of_an_existing_store(cwd, go_profiles, capsys):
    shutil.copy(go_profiles["cpu"], cwd / "cpu.pb.gz")
    _bad(cwd / "bad.pb.gz")
    # Something stored beside a refusal: 0 (the refusal is listed).
    assert main(["ingest", "cpu.pb.gz", "bad.pb.gz", "--db", "s.duckdb"]) == 0
    # Already present: still 0, nothing was refused.
    assert main(["ingest", "cpu.pb.gz", "--db", "s.duckdb"]) == 0
    # Only a refusal: 2, and the store that was there stays.
    assert main(["ingest", "bad.pb.gz", "--db", "s.duckdb"]) == 2
    assert (cwd / "s.duckdb").exists()
    assert "0 new, 0 already present, 1 refused" in capsys.readouterr().out


# --- gogc ---------------------------------------------------------------------------


def test_gogc_of_a_file_without_gctrace_names_it(cwd, capsys):
    (cwd / "README.md").write_text("# notes\nnothing of the GC here\n", encoding="utf-8")
    assert main(["gogc", "--gctrace", "README.md", "--budget", "2GiB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "README.md: no gctrace line" in err[0]
    assert "give gctrace logs" not in err[0]


# --- outputs and leftovers ----------------------------------------------------------


@pytest.fixture(params=[0o022, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_outputs_get_the_umasks_mode(cwd, go_profiles, umask, capsys):
    shutil.copy(go_profiles["cpu"], cwd / "cpu.pb.gz")
    assert main(["merge", "cpu.pb.gz", "-o", "merged.pb.gz"]) == 0
    assert main(["pgo", "cpu.pb.gz", "-o", "default.pgo", "--no-verify"]) == 0
    assert main(["ingest", "cpu.pb.gz", "--db", "s.duckdb"]) == 0
    assert main(["export", "--db", "s.duckdb", "--parquet", "dataset"]) == 0
    assert _mode(cwd / "merged.pb.gz") == 0o666 & ~umask
    assert _mode(cwd / "default.pgo") == 0o666 & ~umask
    assert _mode(cwd / "dataset") == 0o777 & ~umask


def test_no_lock_file_stays_behind(cwd, go_profiles, capsys):
    shutil.copy(go_profiles["cpu"], cwd / "cpu.pb.gz")
    assert main(["ingest", "cpu.pb.gz", "--db", "s.duckdb"]) == 0
    assert main(["top", "--db", "s.duckdb", "--nodecount", "3"]) == 0
    assert not list(cwd.glob("*.lock")), list(cwd.iterdir())


# --- pprof's warnings and traces ----------------------------------------------------

NO_MATCH = [
    (["--tagshow", "nosuchkey"], "-tagshow=nosuchkey"),
    (["--tagfocus", "nosuchkey=x"], "-tagfocus=nosuchkey=x"),
    (["--taghide", "nosuchkey"], "-taghide=nosuchkey"),
    (["--tagignore", "nosuchkey=x"], "-tagignore=nosuchkey=x"),
    (["--focus", "zzz"], "-focus=zzz"),
    (["--ignore", "zzz"], "-ignore=zzz"),
    (["--hide", "zzz"], "-hide=zzz"),
    (["--show", "zzz"], "-show=zzz"),
    (["--show_from", "zzz"], "-show_from=zzz"),
    (["--tagfocus", "phase=cpu", "--tagshow", "phase"], "-tagfocus=phase=cpu -tagshow=phase"),
]


@pytest.mark.go
@pytest.mark.parametrize("command", ["traces", "top"])
@pytest.mark.parametrize(("ours", "theirs"), NO_MATCH, ids=[t for _, t in NO_MATCH])
def test_filters_matching_nothing_warn_as_pprof(command, ours, theirs, go_profiles, capsys):
    path = str(go_profiles["cpu"])
    assert main([command, path, *ours]) == 0
    out = capsys.readouterr()
    want = oracle.run_pprof_output([f"-{command}", *theirs.split(), path])
    assert out.err.splitlines() == want.stderr.splitlines()
    assert out.out == want.stdout


@pytest.mark.go
@pytest.mark.parametrize("flag", ["diff_base", "base"])
def test_traces_take_a_base_as_pprof(flag, go_profiles, capsys):
    new, base = str(go_profiles["cpu2"]), str(go_profiles["cpu"])
    assert main(["traces", new, f"--{flag}", base]) == 0
    ours = capsys.readouterr().out
    assert ours == oracle.run_pprof(["-traces", f"-{flag}={base}", new])
    # -diff_base labels the base's samples; -base only subtracts them.
    assert ("pprof::base" in ours) == (flag == "diff_base")


@pytest.mark.parametrize("command", [["top"], ["peek", "main"], ["merge", "-o", "m.pb.gz"]])
def test_an_empty_folder_is_named(command, cwd, capsys):
    """``pyproflab top emptydir`` said only "no profile files given" (the folder was
    given; it holds no file)."""
    (cwd / "emptydir").mkdir()
    (cwd / "emptydir" / ".hidden").write_text("x", encoding="utf-8")
    assert main([command[0], *command[1:], "emptydir"]) == 2
    assert capsys.readouterr().err == "pyproflab: error: emptydir: no files in this folder\n"
    assert sorted(p.name for p in cwd.iterdir()) == ["emptydir"]


@pytest.mark.parametrize("workload", ["service", "batch", "tiny"])
def test_gogc_notes_name_no_model_symbol(workload, capsys):
    """gogc's note on the terms the settings leave open named them by the fit's
    symbols and rules: "c0 (...)", "theta (...)", "b_nat (...)", "squeeze (... (rule
    2b))", "peak_cons (... (rule 6))"; it names them in words."""
    import re

    from pyproflab.analyses.gogc import TERM_WORDS

    log = REPO / "tests" / "testdata" / "gc" / "work" / workload / "gogc100" / "r1" / "gctrace.log"
    assert main(["gogc", "--gctrace", str(log), "--budget", "512MiB"]) == 0
    notes = capsys.readouterr().out.split("\nNotes:\n")[1]
    assert "not identified by the observed settings" in notes
    said = [w for w in (*TERM_WORDS, "rule", "κ") if re.search(rf"(?<![\w-]){w}(?![\w-])", notes)]
    assert not said, said
