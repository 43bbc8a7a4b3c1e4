"""The stop-the-world pauses' GC CPU, from the runtime's classes where
/metrics beside a gctrace log have them.

Rule: gctrace counts a cycle's two pauses at their clock time, one P
(``samples``' rules: the runtime's CPU classes, which the model predicts,
count each P from its own stop). How many Ps the classes count varies: about
one unthrottled (1.1-1.5x the clock at 2 P on tests/gcbench flat out),
less where Ps idle, more under a CPU quota, where the world can be throttled
while it stands (h77svc, GOMAXPROCS 4 under 0.5 CPU: the classes' pause
1.9-2.4x gctrace's clock, 8-21 % of the classes' GC CPU, so GC CPU came out
7 % low and the GC share at the observed GOGC 100 6.7 % against 7.5 %).
Where the Prometheus samples at a setting carry the pause class
(``go_cpu_classes_gc_pause_cpu_seconds_total``), the gctrace cycles there
take its mean per cycle: each cycle's pause is scaled by the classes' mean
over gctrace's (the cycles keep their own spread), and its GC CPU is its
mark workers' plus that. On the recorded workloads (``python -m
bench.gc_validate --sources gctrace+prometheus``, unthrottled) the GC
share's mean error moved by at most 1.4 points per workload and fit, except
blob's (19.2 to 14.7 % fitted on GOGC 100 and 200, 16.8 to 15.0 % on 100;
its largest 34.3 to 36.7 %); the figures inside their intervals, unchanged.
"""

from __future__ import annotations

import math
from typing import Any

from pyproflab.analyses.gogc.means import wmean


def from_classes(
    trace: list[dict[str, Any]], metrics: dict[Any, list[dict[str, Any]]]
) -> list[tuple[Any, float]]:
    """Rescale ``trace``'s pauses (in place) at each setting ``metrics`` (the
    Prometheus samples per setting) has the pause class for (module rule);
    the (setting, factor) pairs applied."""
    done = []
    for st, got in metrics.items():
        classes = wmean(got, "pause")
        ss = [s for s in trace if s["setting"] == st]
        clock = wmean(ss, "pause")
        if not (math.isfinite(classes) and math.isfinite(clock) and clock > 0):
            continue
        for s in ss:
            s["pause"] *= classes / clock
            s["cost"] = s["work"] + s["pause"]
        done.append((st, classes / clock))
    return done
