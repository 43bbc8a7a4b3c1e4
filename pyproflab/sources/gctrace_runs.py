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
- The log is in time order: each line is printed as its cycle ends, at its
  process's start + its seconds + its clock phases. So a line cannot
  continue a run if, by that run's clock, it would have been printed before
  a line of another run already in the log. Each pair of runs bounds the
  gap between their start times from the order of their lines; a candidate
  run is refused when the line's end, in its clock, falls more than
  ``SLACK`` seconds before a line already printed (a restart's new process,
  passing the dead one's last gc number, is not its continuation).
- Among the runs a line can continue, it goes to the best: a next gc number
  before a gap (lines lost), then the smallest gap, then the same GOMAXPROCS,
  then the goal nearest the one the run's last goal-to-marked ratio
  predicts, then the run extended most recently. With none, the line starts
  a run.
- A run is closed (no longer a candidate) once ``STALE_LINES`` lines have
  passed without extending it, or when more than ``MAX_OPEN`` are open (the
  least recently extended): a log of a thousand restarts stays linear.

The split depends only on the lines before, so a log that grows keeps the
runs it had, and ingesting it again finds every earlier line in its run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

# Runs kept open as candidates (interleaved processes, plus recent restarts).
MAX_OPEN = 64
# Lines after which a run not extended is closed.
STALE_LINES = 100_000
# Seconds a line may be printed late (its goroutine descheduled, the printed
# times rounded): the order rule allows this much on each side.
SLACK = 1.0
# A goal-to-marked ratio for a run that has shown none yet (GOGC=100).
_DEFAULT_RATIO = 2.0


@dataclass
class _Run:
    number: int
    gc: int
    seconds: float
    end: float
    live: int
    procs: int
    ratio: float | None
    touched: int
    # another run's number -> a lower bound of (its start - this run's start),
    # from lines of this run printed before lines of that one
    behind: dict[int, float] = field(default_factory=dict)


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
        end: float | None = None,
    ) -> int:
        """The run number of the next line of the log (its ``GC_CYCLES`` values;
        ``end``: seconds at the cycle's end, the seconds when not given)."""
        line = (gc_num, seconds, seconds if end is None else end)
        return self._one(*line, heap_start_mb, heap_live_mb, heap_goal_mb, procs)

    def assign(self, cols: dict[str, Any]) -> np.ndarray:
        """The runs of a batch of lines, in order: ``cols`` holds the
        ``COLUMNS`` and ``end`` as arrays. A line that continues the only open
        run in the plain way takes no search (the common, single-process case)."""
        gc, sec, end = (np.asarray(cols[c]) for c in ("gc_num", "seconds", "end"))
        start, live, goal, procs = (
            np.asarray(cols[c]) for c in ("heap_start_mb", "heap_live_mb", "heap_goal_mb", "procs")
        )
        n = len(gc)
        plain = np.zeros(n, bool)
        if n > 1:
            plain[1:] = (
                (gc[1:] == gc[:-1] + 1)
                & (sec[1:] >= sec[:-1])
                & (goal[1:] >= live[:-1])
                & (start[1:] >= live[:-1])
                & (procs[1:] == procs[:-1])
            )
        out = np.zeros(n, np.int64)
        i = 0
        while i < n:
            out[i] = self._one(
                int(gc[i]), float(sec[i]), float(end[i]), int(start[i]), int(live[i]),
                int(goal[i]), int(procs[i]),
            )  # fmt: skip
            j = self._plain_run(i + 1, plain, gc, end)
            if j > i + 1:  # lines i+1 .. j-1 continue the same run
                self._extend(self._chosen, j - 1 - i, gc, sec, end, live, goal, procs, j - 1)
                out[i + 1 : j] = out[i]
            i = j
        return out

    def _plain_run(self, i: int, plain: np.ndarray, gc: np.ndarray, end: np.ndarray) -> int:
        """The end of the lines from ``i`` that continue the run just chosen in
        the plain way (next gc number, same GOMAXPROCS, the heap going on) while
        no other open run could take them as its next gc number, and the order
        rule holds: each would go to that run through the full search too."""
        r = self._chosen
        others = [o for o in self._open if o is not r]
        taken = np.array([o.gc + 1 for o in others], np.int64)
        bound = max(
            (r.behind[o.number] + o.end for o in others if o.number in r.behind), default=None
        )
        j, window = i, 64
        while j < len(gc):
            k = min(len(gc), j + window)
            ok = plain[j:k] & ~np.isin(gc[j:k], taken)
            if bound is not None:
                ok &= end[j:k] + 2 * SLACK >= bound
            if not ok.all():
                return j + int(np.argmin(ok))
            j, window = k, window * 2
        return j

    def _extend(self, r: _Run, k: int, gc, sec, end, live, goal, procs, last: int) -> None:
        self._lines += k
        r.ratio = (float(goal[last]) + 0.5) / (float(live[last - 1]) + 0.5)
        r.gc, r.seconds, r.end = int(gc[last]), float(sec[last]), float(end[last])
        r.live, r.procs, r.touched = int(live[last]), int(procs[last]), self._lines

    def _one(
        self, gc: int, seconds: float, end: float, start: int, live: int, goal: int, procs: int
    ) -> int:
        self._lines += 1
        self._close_stale()
        best: tuple | None = None
        chosen: _Run | None = None
        for r in self._open:
            cost = self._cost(r, gc, seconds, end, start, goal, procs)
            if cost is not None and (best is None or cost < best):
                best, chosen = cost, r
        self._chosen: _Run
        if chosen is None:
            self.runs += 1
            chosen = _Run(self.runs, gc, seconds, end, live, procs, None, touched=0)
            self._note_order(chosen, end)  # every open run printed before it
            chosen.touched = self._lines
            self._open.append(chosen)
            if len(self._open) > MAX_OPEN:
                self._open.remove(min(self._open, key=lambda r: r.touched))
            self._chosen = chosen
            return chosen.number
        if gc == chosen.gc + 1:
            chosen.ratio = (goal + 0.5) / (chosen.live + 0.5)
        self._note_order(chosen, end)
        chosen.gc, chosen.seconds, chosen.end, chosen.live = gc, seconds, end, live
        chosen.procs, chosen.touched = procs, self._lines
        self._chosen = chosen
        return chosen.number

    def _note_order(self, q: _Run, end: float) -> None:
        """Run ``q`` prints a line ending at ``end`` (its clock): every run with a
        line since ``q``'s last started at least (its end - ``end``) before ``q``."""
        for r in self._open:
            if r is not q and r.touched > q.touched:
                gap = r.end - end
                if gap > r.behind.get(q.number, -math.inf):
                    r.behind[q.number] = gap

    def _cost(
        self, r: _Run, gc: int, seconds: float, end: float, start: int, goal: int, procs: int
    ) -> tuple | None:
        """How well a line continues run ``r`` (lower is better); None when it cannot."""
        if gc <= r.gc or seconds < r.seconds:
            return None
        gap = gc - r.gc
        if gap == 1 and (goal < r.live or start < r.live):
            return None
        for q in self._open:
            # printed after q's last line: start_r + end >= start_q + q.end
            b = r.behind.get(q.number)
            if q is not r and b is not None and end + 2 * SLACK < b + q.end:
                return None
        expected = (r.live + 0.5) * (r.ratio or _DEFAULT_RATIO)
        heap = abs(math.log((goal + 0.5) / expected))
        return (gap != 1, gap, procs != r.procs, heap, -r.touched)

    def _close_stale(self) -> None:
        if self._open and self._lines - min(r.touched for r in self._open) > STALE_LINES:
            self._open = [r for r in self._open if self._lines - r.touched <= STALE_LINES]


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
