"""What an audit of answers that look like success found (2026-11-28).

- ``regressions --base ... --new ... --service S`` (or ``--since``,
  ``--select``) compared the two sides over every service and time: those
  flags narrow ``--over-time``'s one selection and were dropped without a
  word otherwise. They are refused in one line, exit 2.
"""

from __future__ import annotations

import pytest

from pyproflab.cli import main


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
