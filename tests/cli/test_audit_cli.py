"""What an audit of the CLI's first hour found (2026-11-28), each on recorded data.

- Every command's and sub-action's ``--help`` prints (``gogc --help`` was a
  traceback: a ``%`` in a help text is argparse's format character).
- ``spool-ingest SPOOL`` of a folder that is not there, or of a file, is one
  line and exit 2 (it made a spool at the mistyped path and said "0 spool
  files", or was a traceback); ``serve`` makes the spool before its ingesters.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pyproflab.cli import build_parser, main


def _parsers(parser: argparse.ArgumentParser, name: str = "pyproflab"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _parsers(p, f"{name} {sub}")


def test_every_help_prints() -> None:
    seen = []
    for name, parser in _parsers(build_parser()):
        assert parser.format_help().startswith("usage:"), name
        seen.append(name)
    assert "pyproflab gogc" in seen and "pyproflab trace sched" in seen


@pytest.mark.parametrize("what", ["missing", "file"])
def test_spool_ingest_of_no_spool_is_one_line(what, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    if what == "file":
        Path("spool").write_text("not a spool\n", encoding="utf-8")
    assert main(["spool-ingest", "spool", "--db", "s.duckdb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pyproflab: error: spool:") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["spool"] if what == "file" else [])
