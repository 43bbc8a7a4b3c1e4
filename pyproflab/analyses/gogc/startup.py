"""A process's start-up cycles, left out of its run (``samples``' gctrace rules).

A gctrace log kept as a user keeps it starts with the process: its first
cycles run while the live heap is being built, each marking a small heap
whose goal the smaller one before it set, and they come fast. helper-70's
h70svc (tests/testdata/gc/h70svc: a map of 200k records built, then paced
requests) ran gc 1-5 in its first 0.7 s (4-50 MiB marked, then 73-87 MiB):
kept, they made the GOGC=100 runs' rate 37.2 cycles a minute against 26 in
the traffic, and the GOGC=200 runs' mean goal 172 MiB against 205-235 MiB
in every steady cycle. Rules:

- Only a run that begins with the process has a start-up: its first line is
  ``gc 1`` (the runtime numbers cycles from 1). A log cut later, as the
  validation recordings are (after their warm-up and 4 cycles more), keeps
  every cycle: there, graph's and lru's marked heaps rise for several cycles
  at most settings (floating garbage settling, marks of different lengths),
  and the rule below, applied to every run, cut 2-11 cycles from 57 of their
  runs.
- Its leading cycles, up to and including the first whose marked heap
  reaches ``STARTUP_SHARE`` of the run's median marked heap, are the start-up
  (that cycle's mark set the first steady goal) and are left out, with a
  note, when the heap then levels off: no later cycle marks more than
  ``PLATEAU`` times the median (a heap that grows through the run, 1,000x
  in tests/analyses/test_gogc_stall.py, has no start-up to cut). Nothing is
  left out where fewer than ``SEGMENT_MIN`` would remain, but a note says
  the run's figures include its start-up (h70svc's 30 s runs at GOGC=200:
  gc 1-4 while the map was built, then 4 cycles).
"""

from __future__ import annotations

import statistics
from typing import Any

from pyproflab.analyses.gogc.infer import SEGMENT_MIN

STARTUP_SHARE = 0.75
PLATEAU = 2.0
MiB = float(1 << 20)


def past_startup(ss: list[dict[str, Any]], k: int, notes: list[str]) -> list[dict[str, Any]]:
    """Run ``k``'s cycles without its start-up (module rules)."""
    if not ss or ss[0]["gc_num"] != 1:
        return ss
    med = statistics.median(s["marked"] for s in ss)
    floor = STARTUP_SHARE * med
    first = next(i for i, s in enumerate(ss) if s["marked"] >= floor)
    kept = ss[first + 1 :]
    if first == 0 or not kept or max(s["marked"] for s in kept) > PLATEAU * med:
        return ss
    gone = ss[: first + 1]
    who = f" of {ss[0]['instance']}" if ss[0].get("instance") else ""
    if len(kept) < SEGMENT_MIN:
        notes.append(
            f"run {k + 1}{who}: its start-up (gc {gone[0]['gc_num']}-{gone[-1]['gc_num']}, "
            f"the heap still being built) is kept: only {len(kept)} cycles follow it, fewer "
            f"than {SEGMENT_MIN}, so its rate and goals include the build (record longer)"
        )
        return ss
    notes.append(
        f"run {k + 1}{who}: its first {len(gone)} cycles (gc {gone[0]['gc_num']}-"
        f"{gone[-1]['gc_num']}) left out as start-up, the heap still being built: marked "
        f"{gone[0]['marked'] / MiB:.0f} MiB rising to {gone[-1]['marked'] / MiB:.0f} MiB, "
        f"the first at {100 * STARTUP_SHARE:.0f}% or more of the run's median "
        f"({med / MiB:.0f} MiB)"
    )
    return kept
