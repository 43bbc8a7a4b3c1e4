"""How much the validation table flatters the point of the mutator's CPU per GC
cycle (``mutator`` rule 2: range ``[0, κ̂]`` from two CPU-bound settings, the
point a fraction ``KAPPA_POINT`` of ``κ̂``), chosen after seeing every
workload's table.

For each fraction ``f`` of ``κ̂`` the model is refitted on every workload
(fits GOGC 100+200 and 100, gctrace and Prometheus, as ``bench.gc_validate
--table``) and each case's mean / largest absolute error of the heap goal,
cycles per minute and GC share is printed, with the predicted figures inside
their 90 % intervals (the range stays ``[0, κ̂]`` whatever the point). The
score of a workload at ``f`` is the mean, over its four cases and the three
figures, of the figure's mean absolute error. Leave one workload out: for
each, ``f`` is chosen on the other six's mean score (a tie, within 1e-9, goes
to the fraction nearest the default), and the held-out workload's score at
that ``f`` is set beside its score at the default (the in-sample table).

    python -m bench.gc_kappa [--fractions 0,0.25,0.5,0.75,1] [--workloads graph,lru]
        [--sources gctrace,prometheus]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bench.gc_validate import FIGURES, FITS, TARGETS, TESTS, summarize
from pyproflab.analyses.gogc import mutator

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
Case = tuple[str, str, str]  # workload, fit name, source


def stats_at(rec, f: float, workloads: Sequence[str], sources: Sequence[str]) -> dict[Case, dict]:
    """Every case's ``summarize`` figures with ``κ``'s point at ``f`` of ``κ̂``."""
    default = mutator.KAPPA_POINT
    mutator.KAPPA_POINT = f
    rec.model.cache_clear()
    try:
        return {
            (w, name, s): summarize(rec, rec.table(w, s, fit), fit)[1]
            for w in workloads
            for name, fit in FITS.items()
            for s in sources
        }
    finally:
        mutator.KAPPA_POINT = default
        rec.model.cache_clear()


def score(stats: dict[Case, dict], workload: str) -> float:
    """The workload's mean, over its cases and the three figures, of the
    figure's mean absolute error."""
    vals = [st[m][0] for (w, _, _), st in stats.items() if w == workload for m in FIGURES]
    return sum(vals) / len(vals)


def choose(scores: dict[float, dict[str, float]], others: Sequence[str], default: float) -> float:
    """The fraction with the least mean score over ``others``; a tie (within
    1e-9) goes to the one nearest ``default``."""
    mean = {f: sum(s[w] for w in others) / len(others) for f, s in scores.items()}
    best = min(mean.values())
    return min((f for f, v in mean.items() if v <= best + 1e-9), key=lambda f: abs(f - default))


def case_lines(all_stats: dict[float, dict[Case, dict]]) -> list[str]:
    """Per case, each fraction's figures' mean absolute errors (%), goal /
    cycles per minute / GC share, and ✗ where issue 29's target is missed."""
    fs = list(all_stats)
    out = ["case".ljust(30) + "".join(f"f={f:<18g}" for f in fs)]
    for case in next(iter(all_stats.values())):
        cells = []
        for f in fs:
            st = all_stats[f][case]
            lim = TARGETS[case[1]]
            ok = all(100 * st[m][0] <= lim[0] and 100 * st[m][1] <= lim[1] for m in FIGURES)
            cell = "/".join(f"{100 * st[m][0]:.1f}" for m in FIGURES) + ("" if ok else " ✗")
            cells.append(cell.ljust(20))
        out.append(f"{case[0]} {case[1]} {case[2]}".ljust(30) + "".join(cells))
    return out


def total_lines(all_stats: dict[float, dict[Case, dict]]) -> list[str]:
    """Per fraction: targets met, the largest error, and the share inside the
    90 % interval, per fit."""
    out = []
    for f, stats in all_stats.items():
        met = sum(
            all(
                100 * st[m][0] <= TARGETS[c[1]][0] and 100 * st[m][1] <= TARGETS[c[1]][1]
                for m in FIGURES
            )
            for c, st in stats.items()
        )
        parts = [f"f={f:g}: targets met {met}/{len(stats)}"]
        for name in FITS:
            sts = [st for c, st in stats.items() if c[1] == name]
            i, n = (sum(st["inside"][k] for st in sts) for k in (0, 1))
            worst = max(100 * st[m][1] for st in sts for m in FIGURES)
            parts.append(f"GOGC {name}: largest error {worst:.1f}%, inside {i}/{n}")
        out.append("; ".join(parts))
    return out


def loo_lines(all_stats: dict[float, dict[Case, dict]], workloads: Sequence[str]) -> list[str]:
    """Leave one workload out (module notes), then the held-out scores' mean
    beside the in-sample table's."""
    default = mutator.KAPPA_POINT
    scores = {f: {w: score(st, w) for w in workloads} for f, st in all_stats.items()}
    out = ["held out  chosen f  its score at f (at the default)   the others' mean score per f"]
    chosen, held, ins = [], [], []
    for w in workloads:
        others = [x for x in workloads if x != w]
        chosen.append(choose(scores, others, default))
        held.append(scores[chosen[-1]][w])
        ins.append(scores[default][w])
        per = ", ".join(
            f"{g:g}: {100 * sum(s[x] for x in others) / len(others):.3f}" for g, s in scores.items()
        )
        out.append(f"{w:<9} {chosen[-1]:<9g} {100 * held[-1]:6.2f}% ({100 * ins[-1]:.2f}%)   {per}")
    n = len(workloads)
    out.append(f"f={default:g} (the default) chosen in {chosen.count(default)} of {n} folds")
    out.append(
        f"mean score: held out {100 * sum(held) / n:.3f}%, in-sample at f={default:g} "
        f"{100 * sum(ins) / n:.3f}%; every workload's at each f: "
        + ", ".join(f"{g:g}: {100 * sum(s.values()) / n:.3f}%" for g, s in scores.items())
    )
    return out


def main(argv: list[str] | None = None) -> int:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from support import gc_recordings as rec

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fractions", default=",".join(f"{f:g}" for f in FRACTIONS))
    p.add_argument("--workloads", default=",".join(rec.WORKLOADS))
    p.add_argument("--sources", default="gctrace,prometheus")
    args = p.parse_args(argv)
    workloads, sources = args.workloads.split(","), args.sources.split(",")
    fs = sorted({float(x) for x in args.fractions.split(",")} | {mutator.KAPPA_POINT})
    all_stats = {f: stats_at(rec, f, workloads, sources) for f in fs}
    print("mean |error| % of heap goal / cycles per minute / GC share (✗: a target missed)")
    print("\n".join(case_lines(all_stats)))
    print("\n".join(total_lines(all_stats)))
    print("\n".join(loo_lines(all_stats, workloads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
