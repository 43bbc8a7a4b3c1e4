"""argparse types the commands share, so each flag's error line names that flag.

- ``seconds``: a finite number > 0. nan and inf reached ``socket.settimeout``
  (a ValueError and an OverflowError traceback), so both are refused here.
- ``interval``: a finite number of seconds >= 0, 0 turning a repeat off. inf
  passed, and turned ``collect --metrics-interval`` off without a word.
- ``at_least(low, high=None)``: a whole number >= ``low`` (and <= ``high``).
- ``flag_of(name)``: the flag of an option field or argparse dest, ``--NAME``
  with dashes, for the error lines that name it.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _finite_seconds(text: str, low: float, strict: bool, rule: str) -> float:
    """``text`` as a finite number of seconds above ``low`` (or at it, unless
    ``strict``); else an error line stating ``rule``."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(v) and (v > low if strict else v >= low)):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return v


def seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    return _finite_seconds(text, 0.0, True, "a finite number > 0")


def interval(text: str) -> float:
    """A finite number of seconds >= 0 (0: off)."""
    return _finite_seconds(text, 0.0, False, "a finite number >= 0 (0: off)")


def at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """A whole number >= ``low`` (and <= ``high``)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < low or (high is not None and v > high):
            within = f"from {low} to {high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {within}, got {text!r}")
        return v

    return parse


def flag_of(name: str) -> str:
    """``--NAME`` with dashes for an option field or argparse dest ``name`` (as
    ``common.add_option_flags`` names the flags it adds)."""
    return "--" + name.replace("_", "-")
