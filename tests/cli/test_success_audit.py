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
"""

from __future__ import annotations

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
