"""One term of the GOGC model (``fit``, ``mutator``): its point, its range, and
whether the observed settings identify it (``predict`` solves an unidentified
term at both ends of its range)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Term:
    """One model term: its point, its range, and whether the data identify it."""

    name: str
    point: float
    lo: float
    hi: float
    identified: bool
    how: str
