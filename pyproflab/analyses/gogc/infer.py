"""GOGC from gctrace, which does not print it: inferred from the heap goals.

Rules:

1. Per cycle, from the goal the previous cycle's marked heap gave it, ``g =
   100·(goal − H)/(H + R)``, taken as the median over 5 cycles (of those
   whose previous cycle the log holds, where any in the 5 does: a thinned
   log's lone cycle's own marked heap did not set its goal, and on lru,
   whose marks vary, such cycles put a stretch of a GOGC=100 run at 75),
   rounded (to a common value within 8 %, else to 5 above 20).
2. A run is cut into segments where that value changes for 5 cycles or more.
3. Segments whose values lie within 12 % of each other (across runs too), or
   that rule 7 joins, are one setting, labelled with their cycle-weighted
   median, rounded: the floored MiB of a small heap move a cycle's value.
   Where the segments' ranges (rule 6) intersect, the label lies in that
   intersection (moved to its nearest end, rounded; else its middle): a Go 1.22
   start-up log of 5 ramp cycles (any GOGC from 9 to 37) and 5 at a steady
   GOGC=25 (24.8 to 25.3) was labelled GOGC 30, the median of 30 and 25.
4. gctrace prints heaps as ``bytes >> 20``: a printed ``X MB`` is ``[X, X + 1)``
   MiB, and ``samples`` takes its middle. Roots (stacks + globals, each
   floored) lie within 1 MiB below and 2 MiB above the sum taken.
5. A cycle's goal was set from the previous cycle's marked heap ``H``:
   ``g = (goal − H)/(H + R)``. Its bounds put the goal, ``H`` and ``R`` at
   the ends of their ranges: ``g_lo = (goal − ½ − (H + ½))/(H + ½ + R_hi)``,
   ``g_hi = (goal + ½ − (H − ½))/(H − ½ + R_lo)`` (in MiB).
6. One setting's cycles share one GOGC, so a segment's range is the
   intersection of its cycles' ranges (the marked heap moves from cycle to
   cycle, which narrows it); where they do not intersect (a goal the runtime
   raised past the trigger, as on batch at GOGC 25, whose gctrace printed a
   17 MB goal for a 16.40 MiB ``go_gc_heap_goal_bytes``), the medians of
   the cycles' bounds.
7. Two segments are one setting when either's range holds the other's
   inferred GOGC: the recorded GOGC=25 runs of tiny (14-16 MiB marked) were
   read as three settings, GOGC 20 (10 cycles, any of 15 to 27 fitting), 25
   (277 cycles, 22 to 26) and 30 (73 cycles, 21 to 29), and modelled as three.
   Ranges that only touch do not join (batch at 25 and 50: 19-38, 38-62).
9. A memory limit's goal does not follow the marked heap (``pacer`` rule
   1), a GOGC's moves by ``1 + g`` per byte of it: a segment whose goal
   barely moved (slope on the previous cycle's marked heap under
   ``HELD_SLOPE``) while that heap moved by 4 MiB or more was held by
   a limit, which gctrace does not print. 4 MiB is resolution, not scale:
   over the recorded runs whose marked heap moved that far, every GOGC run's
   slope was 1.10 or more and every held one's 0.11 or less; a relative
   bound as well (4 %) missed blob's 1.5 GiB limit, whose 455 MiB marked
   heap moved 5-16 MiB (1-4 %) under goals that did not move. Its GOGC is not in its goals: it is
   left out with a note (a given ``gogc`` keeps it), as is any other
   segment whose median goal lies within 1 % (at least 1 MiB) of a held one's
   (a run whose marked heap stayed put shows no slope; graph's GOGC=off runs
   under 160 MiB, held at 144-145 MiB, read as GOGC 170). Queue's GOGC=400 runs
   under a 256 MiB limit (goal 231 MB throughout, marked 80-92 MB) were read
   as GOGC 165 and 175, and a refit with that canary modelled settings that
   never ran.
8. A setting's range is said when it reaches beyond ``SAME_GOGC`` either
   side of it: recorded batch at GOGC 25 (a 13 MiB heap) read as
   GOGC 30, any of 19 to 38 fitting its cycles.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

MiB = float(1 << 20)
SEGMENT_MIN = 5  # cycles of a new GOGC before a run is cut there (rule 2)
SAME_GOGC = 0.12  # inferred GOGCs this close are one setting (rule 3)
HELD_SLOPE = 0.5  # goal per marked byte below which a limit held the goal (rule 9)
HELD_MOVE = 4 * MiB  # the marked heap's move that shows a slope through floored MiB (rule 9)

# GOGC values people set; an inferred value within SNAP of one is taken as it (rule 1).
COMMON_GOGC = (
    10,
    20,
    25,
    30,
    40,
    50,
    60,
    75,
    80,
    100,
    120,
    125,
    150,
    200,
    250,
    300,
    400,
    500,
    800,
    1000,
)
SNAP = 0.08


def snap_gogc(g: float) -> float:
    near = min(COMMON_GOGC, key=lambda c: abs(math.log(max(g, 1e-9) / c)))
    if abs(g / near - 1) <= SNAP:
        return float(near)
    return float(round(g / 5) * 5 if g > 20 else round(g))


def cycle_gogc(ss: list[dict[str, Any]]) -> list[float]:
    """Each cycle's GOGC from its goal and the previous cycle's marked heap,
    median over 5 cycles, rounded; cycles whose previous one the log lacks
    count only where none in the window has it (their own marked heap did
    not set their goal)."""
    raw, own = [], []
    for i, s in enumerate(ss):
        seen = bool(i) and ss[i - 1]["gc_num"] == s["gc_num"] - 1
        p = ss[i - 1] if seen else s
        g = 100 * (s["goal"] - p["marked"]) / (p["marked"] + p["roots"])
        raw.append(g if seen else math.nan)
        own.append(math.nan if seen else g)
    out = []
    for i in range(len(raw)):
        window = [g for g in raw[max(0, i - 2) : i + 3] if not math.isnan(g)]
        window = window or [g for g in own[max(0, i - 2) : i + 3] if not math.isnan(g)]
        out.append(snap_gogc(statistics.median(window)))
    return out


def segments(ss: list[dict[str, Any]], gs: list[float]) -> list[tuple[float, list[dict]]]:
    """Cut a run where its inferred GOGC changes for ``SEGMENT_MIN`` cycles or more."""
    segs: list[tuple[float, list[dict]]] = []
    for s, g in zip(ss, gs, strict=True):
        if segs and (g == segs[-1][0] or len(segs[-1][1]) < SEGMENT_MIN):
            segs[-1][1].append(s)
        else:
            segs.append((g, [s]))
    # A short last piece belongs to the one before it.
    if len(segs) > 1 and len(segs[-1][1]) < SEGMENT_MIN:
        segs[-2][1].extend(segs.pop()[1])
    return [(statistics.median(cycle_gogc(seg)), seg) for _, seg in segs]


def cluster(runs: list[tuple[int, list[tuple[Any, list[dict]]]]]) -> list:
    """One GOGC for segments whose inferred values lie within ``SAME_GOGC`` of
    each other, or one of which the other's MiB-floored range holds (rule 7):
    their cycle-weighted median, rounded (rule 3)."""
    segs = sorted((g, len(seg), segment_bounds(seg)) for _, ss in runs for g, seg in ss)
    groups: list[list[tuple[float, int, Any]]] = []
    for g, n, b in segs:
        if groups and (
            g <= groups[-1][0][0] * (1 + SAME_GOGC)
            or any(same_setting((g, b), (h, c)) for h, _, c in groups[-1])
        ):
            groups[-1].append((g, n, b))
        else:
            groups.append([(g, n, b)])
    label = {}
    for grp in groups:
        ws = [g for g, n, _ in grp for _ in range(n)]
        med = within(snap_gogc(statistics.median(ws)), [b for _, _, b in grp if b])
        label.update({g: med for g, _, _ in grp})
    return [(k, [(label[g], seg) for g, seg in ss]) for k, ss in runs]


def within(g: float, bounds: Sequence[tuple[float, float]]) -> float:
    """Rule 3's label kept inside the range every segment of the setting allows,
    where their ranges intersect: the GOGC no cycle contradicts."""
    lo, hi = (
        max((b[0] for b in bounds), default=-math.inf),
        min((b[1] for b in bounds), default=math.inf),
    )
    if lo > hi or lo <= g <= hi:
        return g
    snapped = snap_gogc(min(max(g, lo), hi))
    return snapped if lo <= snapped <= hi else float(round((lo + hi) / 2))


def _cycle_bounds(s: dict[str, Any], prev: dict[str, Any]) -> tuple[float, float]:
    """Rule 5, in percent, for a cycle and the one whose marked heap set its goal."""
    goal, h, r = s["goal"], prev["marked"], prev["roots"]
    half = MiB / 2
    r_lo, r_hi = max(r - MiB, 0.0), r + 2 * MiB
    lo = 100 * (goal - half - (h + half)) / (h + half + r_hi)
    hi = 100 * (goal + half - (h - half)) / max(h - half + r_lo, half)
    return lo, hi


def segment_bounds(seg: Sequence[dict[str, Any]]) -> tuple[float, float] | None:
    """Rule 6: the GOGC range a segment's cycles allow; None when no cycle's
    previous one is in the log."""
    bounds = [
        _cycle_bounds(s, p)
        for p, s in zip(seg, seg[1:], strict=False)
        if s["gc_num"] == p["gc_num"] + 1
    ]
    return _joint(bounds) if bounds else None


def _joint(bounds: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Rule 6's range of ranges: their intersection, else their bounds' medians."""
    lo, hi = max(b[0] for b in bounds), min(b[1] for b in bounds)
    if lo > hi:
        return statistics.median(b[0] for b in bounds), statistics.median(b[1] for b in bounds)
    return lo, hi


def same_setting(a: tuple[float, Any], b: tuple[float, Any]) -> bool:
    """Rule 7, for two (inferred GOGC, range or None) segments."""
    (ga, ra), (gb, rb) = a, b
    return bool((ra and ra[0] < gb < ra[1]) or (rb and rb[0] < ga < rb[1]))


def wide_notes(
    ranges: dict[float, list[tuple[float, float]]], snap: float = SAME_GOGC
) -> list[str]:
    """Rule 8: one note per inferred setting whose segments' joint range is
    wider than ``snap`` either side of it."""
    notes = []
    for g, rs in sorted(ranges.items()):
        lo, hi = _joint(rs)
        if lo < g * (1 - snap) or hi > g * (1 + snap):
            notes.append(
                f"GOGC={g:g} {WIDE} in whole MiB: "
                f"any GOGC from {max(lo, 0):.0f} to {hi:.0f} fits those cycles (a small "
                "heap); give --gogc"
            )
    return notes


WIDE = "is inferred from heap sizes gctrace prints"


def still_inferred(note: str, gogcs: set) -> bool:
    """False for a rule 8 note on a GOGC none of whose cycles is still labelled
    by inference (the /metrics beside the log export the setting): "GOGC=50 is
    inferred ..." beside "GOGC: prometheus ... go_gc_gogc_percent" (helper-89)."""
    head, _, rest = note.partition(" ")
    if not (head.startswith("GOGC=") and rest.startswith(WIDE)):
        return True
    return head[5:] in {f"{g:g}" for g in gogcs if g is not None}


def held_by_limit(seg: Sequence[dict[str, Any]]) -> bool:
    """Rule 9: whether a memory limit held the segment's goals."""
    pairs = [
        (p["marked"], s["goal"])
        for p, s in zip(seg, seg[1:], strict=False)
        if s["gc_num"] == p["gc_num"] + 1
    ]
    hs, gs = [h for h, _ in pairs], [g for _, g in pairs]
    if len(pairs) < SEGMENT_MIN - 1 or max(hs) - min(hs) < HELD_MOVE:
        return False
    return statistics.covariance(hs, gs) / statistics.variance(hs) < HELD_SLOPE


def _median_goal(ss: Sequence[dict[str, Any]]) -> float:
    return statistics.median(s["goal"] for s in ss)


def _near(goal: float, held: list[float]) -> bool:
    return any(abs(goal - h) <= max(MiB, 0.01 * h) for h in held)


def split_runs(runs: list[tuple[int, list]]) -> tuple[list, list[str]]:
    """Rules 1-2 and 9 over every run ``(k, cycles)``: each run's segments
    less what a limit held, and a note saying what was left out (none when
    nothing was)."""
    whole = {k for k, ss in runs if held_by_limit(ss)}
    segs = {k: [] if k in whole else segments(ss, cycle_gogc(ss)) for k, ss in runs}
    held = [_median_goal(ss) for k, ss in runs if k in whole]
    held += [_median_goal(seg) for k in segs for _, seg in segs[k] if held_by_limit(seg)]
    out = [(k, [(g, x) for g, x in segs[k] if not _near(_median_goal(x), held)]) for k, _ in runs]
    kept = {k: sum(len(x) for _, x in ss) for k, ss in out}
    left = [(k, ss) for k, ss in runs if kept[k] < len(ss)]
    return out, [_held_note(left, kept)] if left else []


def _held_note(left: list[tuple[int, list]], kept: dict[int, int]) -> str:
    cycles = [s for _, ss in left for s in ss]
    n = sum(len(ss) - kept[k] for k, ss in left)
    names = ", ".join(str(k + 1) for k, _ in left)
    return (
        f"run{'s' if len(left) > 1 else ''} {names}: {n} of {len(cycles)} cycles kept "
        f"a heap goal near {_median_goal(cycles) / MiB:.0f} MiB while the marked heap moved "
        f"({min(s['marked'] for s in cycles) / MiB:.0f}-"
        f"{max(s['marked'] for s in cycles) / MiB:.0f} MiB): a memory limit held it, which "
        "gctrace does not print, so their GOGC is unknown; left out (give their /metrics, "
        "or --gogc and --current-limit)"
    )
