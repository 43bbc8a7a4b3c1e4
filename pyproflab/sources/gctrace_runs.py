"""Which process run each line of a gctrace log belongs to.

A log is not always one process: a service restarts (its gc numbers start
again at 1), two processes write to one stderr (a sidecar collecting both),
or a file is the concatenation of several. Their cycles must not be mixed: a
restart's second run is another incarnation of the instance, with another
heap and perhaps another GOGC.

Rules (each line is taken in log order and put in a run of the lines before
it, or starts a new one; runs are numbered 1, 2, ... in the order their first
line appears):

- A line can continue a run only when its gc number is above the run's last
  and its seconds are not below the run's last (the runtime counts both up
  from its start).
- When the gc number is the run's last + 1, the heap must continue too: the
  runtime sets a cycle's goal from the heap the previous cycle marked, never
  below it (``mgcpacer.go``: "a heap goal below the live heap doesn't make
  sense"), and the heap at a cycle's start is what was marked plus what was
  allocated since. So the line's goal and its start heap must each be at
  least the run's last marked heap (``heap_live_mb``); MiB floors keep both
  comparisons exact. A line failing this is another process's.
- Among the runs a line can continue, it goes to the best: a next gc number
  before a gap (lines lost), then the smallest gap, then the same GOMAXPROCS,
  then the goal nearest the one the run's own goal-to-marked ratio predicts,
  then the run extended most recently. With none, the line starts a run.
- At most ``MAX_OPEN`` runs are candidates: the least recently extended ones
  are closed beyond that (a log of a thousand restarts stays linear).

The split depends only on the lines before, so a log that grows keeps the
runs it had, and ingesting it again finds every earlier line in its run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

# Runs kept open as candidates (interleaved processes, plus recent restarts).
MAX_OPEN = 64
# A goal-to-marked ratio for a run that has shown none yet (GOGC=100).
_DEFAULT_RATIO = 2.0


@dataclass
class _Run:
    number: int
    gc: int
    seconds: float
    live: int
    procs: int
    ratio: float | None
    touched: int


class RunSplitter:
    """Assigns the cycles of one log, in log order, to process runs (module rules)."""

    #: the ``GC_CYCLES`` columns ``run_of`` takes, by name
    COLUMNS = ("gc_num", "seconds", "heap_start_mb", "heap_live_mb", "heap_goal_mb", "procs")

    def __init__(self) -> None:
        self._open: list[_Run] = []
        self._lines = 0
        self.runs = 0

    def run_of(
        self,
        *,
        gc_num: int,
        seconds: float,
        heap_start_mb: int,
        heap_live_mb: int,
        heap_goal_mb: int,
        procs: int,
    ) -> int:
        """The run number of the next line of the log (its ``GC_CYCLES`` values)."""
        gc, live_mb, goal_mb = gc_num, heap_live_mb, heap_goal_mb
        self._lines += 1
        best: tuple | None = None
        chosen: _Run | None = None
        for r in self._open:
            cost = self._cost(r, gc, seconds, heap_start_mb, goal_mb, procs)
            if cost is not None and (best is None or cost < best):
                best, chosen = cost, r
        if chosen is None:
            self.runs += 1
            chosen = _Run(self.runs, gc, seconds, live_mb, procs, None, self._lines)
            self._open.append(chosen)
            if len(self._open) > MAX_OPEN:
                self._open.remove(min(self._open, key=lambda r: r.touched))
            return chosen.number
        if gc == chosen.gc + 1:
            ratio = (goal_mb + 0.5) / (chosen.live + 0.5)
            chosen.ratio = ratio if chosen.ratio is None else (chosen.ratio + ratio) / 2
        chosen.gc, chosen.seconds, chosen.live = gc, seconds, live_mb
        chosen.procs, chosen.touched = procs, self._lines
        return chosen.number

    @staticmethod
    def _cost(
        r: _Run, gc: int, seconds: float, start_mb: int, goal_mb: int, procs: int
    ) -> tuple | None:
        """How well a line continues run ``r`` (lower is better); None when it cannot."""
        if gc <= r.gc or seconds < r.seconds:
            return None
        gap = gc - r.gc
        if gap == 1 and (goal_mb < r.live or start_mb < r.live):
            return None
        expected = (r.live + 0.5) * (r.ratio or _DEFAULT_RATIO)
        heap = abs(math.log((goal_mb + 0.5) / expected))
        return (gap != 1, gap, procs != r.procs, heap, -r.touched)


def with_runs(table: pa.Table, by: Sequence[str] = ()) -> pa.Table:
    """``table`` (``GC_CYCLES`` columns, maybe more) with its ``run`` column
    computed, in row order, separately for each distinct value of the ``by``
    columns (one log each): for rows stored before runs existed. A table that
    has a ``run`` column is returned as it is."""
    if "run" in table.column_names:
        return table
    cols = {c: table.column(c).to_pylist() for c in (*by, *RunSplitter.COLUMNS)}
    splitters: dict[tuple, RunSplitter] = {}
    runs = []
    for i in range(table.num_rows):
        key = tuple(cols[c][i] for c in by)
        split = splitters.setdefault(key, RunSplitter())
        runs.append(split.run_of(**{c: cols[c][i] for c in RunSplitter.COLUMNS}))
    return table.append_column("run", pa.array(runs, pa.int64()))
