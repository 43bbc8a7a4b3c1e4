"""Profiles dated after now (a file's time of 2100, a local time read as UTC) are
stored as dated, and said: every --since selects them and their version reads as
the newest (helper-86 found it unsaid)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import pyproflab
from pyproflab.cli import main
from pyproflab.store.ingest_report import DatedAhead

GO = Path(__file__).resolve().parents[1] / "testdata" / "go"
YEAR_2100 = 4102444800 * 10**9


def _dated(tmp_path: Path, name: str, time_nanos: int) -> Path:
    p = pyproflab.read_profile(GO / "allocs.pb.gz")
    out = tmp_path / name
    pyproflab.write_profile(dataclasses.replace(p, time_nanos=time_nanos), str(out))
    return out


def test_a_profile_dated_2100_is_said_in_one_line(tmp_path: Path, capsys) -> None:
    ahead = _dated(tmp_path, "ahead.pb.gz", YEAR_2100)
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", str(ahead), str(GO / "cpu.pb.gz"), "--db", db]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("2 new, 0 already present"), out
    (line,) = err.strip().splitlines()
    assert line.startswith("pyproflab: warning: 1 new profile dated after now (the latest ")
    assert "2100-01-01T00:00:00+0000" in line


def test_profiles_of_the_past_are_not_said(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", str(GO / "cpu.pb.gz"), str(GO / "heap.pb.gz"), "--db", db]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_lab_warns_a_notebook(tmp_path: Path) -> None:
    ahead = _dated(tmp_path, "ahead.pb.gz", YEAR_2100)
    with pyproflab.open(tmp_path / "s.duckdb") as lab, pytest.warns(DatedAhead, match="1 new"):
        report = lab.ingest([ahead])
    assert report.new == 1
