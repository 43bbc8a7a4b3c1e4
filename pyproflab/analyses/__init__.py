"""Analyses: a ``Profile`` in, result objects out (rendered by ``pyproflab.reports``).

- ``graph``: pprof's graph engine (nodes, inline frames, flat/cum, edges).
- ``top``: flat/cum per function, line or file, equal to ``go tool pprof -top``.
- ``merge``: several profiles into one, as ``go tool pprof -proto A B …``
  (their common sample types and units first: ``sample_types``).
- ``filters``: focus/ignore and drop_frames pruning with pprof's semantics.
"""

from __future__ import annotations

from pyproflab.analyses.merge import merge
from pyproflab.analyses.top import TopResult, top

__all__ = ["TopResult", "merge", "top"]
