"""What an audit of the CLI's first hour found (2026-11-28), each on recorded data.

- Every command's and sub-action's ``--help`` prints (``gogc --help`` was a
  traceback: a ``%`` in a help text is argparse's format character).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import build_parser


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
