"""Synthetic CPU profiles with as many call edges as asked (trim tests, bench).

``edge_profile(names, n)`` writes a pprof CPU profile of ``n`` distinct call
edges between functions of ``names``: each edge one sample of two frames
(callee, caller at a line of its body), edge i weighing about ``top / (i+1)``
(a long tail of light edges, as a fleet merge has), the lightest weighing 1.
Function start lines are 10 apart, so every name is one function.
"""

from __future__ import annotations

import gzip
import random

from pyproflab._proto import profile_pb2


def edge_profile(names: list[str], n: int, *, seed: int = 1, top: int = 100_000) -> bytes:
    """The gzipped profile (module rules); ``names`` are the functions used."""
    rng = random.Random(seed)
    p = profile_pb2.Profile()
    strings = ["", "samples", "count", "cpu", "nanoseconds", "x.go"]
    p.string_table.extend(strings)
    p.sample_type.add(type=1, unit=2)
    p.sample_type.add(type=3, unit=4)
    p.period_type.type, p.period_type.unit = 3, 4
    p.period = 10_000_000
    p.duration_nanos = 60_000_000_000
    for i, name in enumerate(names):
        p.string_table.append(name)
        p.function.add(id=i + 1, name=len(p.string_table) - 1, filename=5, start_line=10 * i + 1)
    seen: set[tuple[int, int, int]] = set()
    locs: dict[tuple[int, int], int] = {}

    def loc(fn: int, line: int) -> int:
        key = (fn, line)
        if key not in locs:
            locs[key] = len(locs) + 1
            p.location.add(id=locs[key], address=len(locs)).line.add(function_id=fn, line=line)
        return locs[key]

    i = 0
    while i < n:
        caller, callee, off = rng.randrange(len(names)), rng.randrange(len(names)), rng.randrange(9)
        if caller == callee or (caller, callee, off) in seen:
            continue
        seen.add((caller, callee, off))
        w = max(1, top // (i + 1))
        stack = [loc(callee + 1, 10 * callee + 2), loc(caller + 1, 10 * caller + 1 + off)]
        p.sample.add(location_id=stack, value=[w, w * p.period])
        i += 1
    return gzip.compress(p.SerializeToString())
