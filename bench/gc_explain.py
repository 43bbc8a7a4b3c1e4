"""Why the GOGC model's predictions miss on the recorded gcbench runs.

Four tables per mode (tests/testdata/gc/bench, tests/support/gc_recordings.py):

1. The inputs each source derives at GOGC=100 beside what the same runs
   measured (gctrace's mark phase, the runtime's CPU classes): an input that
   differs from its measurement is an estimation error, not a model error.
2. What each recorded setting measured of the quantities the model holds
   fixed or derives: marked heap, GC CPU per cycle, the mutator's CPU (the
   runtime's user class) and its allocation per core-second.
3. Whether the GOGC=100 cycles alone identify a GC cost per byte of goal
   (least squares across them, with its standard error).
4. The model's mean / largest |error| of cycles per minute and GC CPU share,
   then the same with one input replaced by its measurement: each setting's
   own GC CPU per cycle, or the GOGC=100 runs' user-class CPU as the
   mutator's. These are diagnostics that read the settings being predicted;
   the model never does.

    python -m bench.gc_explain [--mode cpu,rate]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
MiB = float(1 << 20)


def _mean_measured(rec, mode: str, label: str) -> dict[str, float]:
    ms = [rec.measured(d) for d in rec.runs(mode, label)]
    return {k: sum(m[k] for m in ms) / len(ms) for k in ms[0]}


def _inputs(rec, mode: str) -> list[str]:
    """Table 1: GOGC=100 inputs per source beside the runs' measurements."""
    from pyproflab.analyses.gogc_model import calibrate

    head = "source      cost ms  mark ms  B MiB  marked  goal   mutator  GC cores  share"
    lines = [f"{mode}: inputs at GOGC=100", head]
    for source in rec.SOURCES:
        obs = rec.calibration(mode, source)
        p = calibrate(obs)
        n, cost = obs.mean("n"), obs.mean("cost")
        gc = n * cost
        lines.append(
            f"{rec.SHORT[source]:10} {1e3 * cost:7.2f} {1e3 * obs.mean('mark_s'):8.2f} "
            f"{obs.mean('mark_alloc') / MiB:6.2f} {obs.mean('marked') / MiB:7.1f} "
            f"{obs.mean('goal') / MiB:5.1f} {p.mutator:8.3f} {gc:9.3f} "
            f"{gc / (p.mutator + gc):6.1%}"
        )
    m = _mean_measured(rec, mode, "gogc100")
    lines.append(
        f"{'measured':10} {1e3 * m['cost']:7.2f} {1e3 * m['mark_s']:8.2f} "
        f"{m['mark_alloc'] / MiB:6.2f} {m['marked'] / MiB:7.1f} {m['goal'] / MiB:5.1f} "
        f"{m['mutator']:8.3f} {m['gc_cores']:9.3f} {m['gc_share']:6.1%}"
    )
    return lines


def _settings(rec, mode: str) -> list[str]:
    """Table 2: what the model holds fixed, as each setting measured it."""
    lines = [
        f"{mode}: measured per setting",
        "setting           marked  goal   cost ms  mutator  alloc/mutator MiB/s",
    ]
    for label in rec.labels(mode):
        m = _mean_measured(rec, mode, label)
        lines.append(
            f"{label:17} {m['marked'] / MiB:6.1f} {m['goal'] / MiB:6.1f} {1e3 * m['cost']:7.2f} "
            f"{m['mutator']:8.3f} {m['alloc'] / m['mutator'] / MiB:10.0f}"
        )
    return lines


def _goal_term(rec, mode: str) -> list[str]:
    """GC CPU per cycle against the heap goal across the GOGC=100 gctrace cycles:
    whether those cycles alone could fit a per-byte-of-goal cost."""
    from scipy.stats import linregress

    ss = rec.calibration(mode, "gctrace").samples
    fit = linregress([s["goal"] / MiB for s in ss], [1e3 * s["cost"] for s in ss])
    lo, hi = min(s["goal"] for s in ss) / MiB, max(s["goal"] for s in ss) / MiB
    return [
        f"{mode}: GOGC=100 cycles, GC CPU per cycle vs goal ({lo:.0f}-{hi:.0f} MiB): "
        f"{fit.intercept:.2f} ms + {fit.slope:.3f} +- {fit.stderr:.3f} ms per MiB"
    ]


def _errors(rec, mode: str, source: str, cost: bool, mutator: bool) -> str:
    """Mean / largest |error| of cycles and share, with measured inputs swapped in."""
    from pyproflab.analyses import gogc_model as gm

    p = gm.calibrate(rec.calibration(mode, source))
    if mutator and not p.saturated:
        user = _mean_measured(rec, mode, "gogc100")["mutator"]
        p = dataclasses.replace(p, mutator=user, alpha=p.alloc / user)
    errs: dict[str, list[float]] = {"cycles_per_min": [], "gc_share": []}
    for label in rec.labels(mode):
        if label == "gogc100":
            continue
        m = _mean_measured(rec, mode, label)
        q = dataclasses.replace(p, c0=m["cost"], c1=0.0) if cost else p
        r = gm._with_share(gm.solve(q, *rec.setting_of(label)))
        for k, v in errs.items():
            v.append(abs(r[k] - m[k]) / m[k])
    return "  ".join(
        f"{k.split('_')[0]} {sum(v) / len(v):5.1%}/{max(v):5.1%}" for k, v in errs.items()
    )


def _counterfactuals(rec, mode: str) -> list[str]:
    lines = [f"{mode}: mean/max |error| (cycles, share): model; measured inputs swapped in"]
    for source in rec.SOURCES:
        for what, cost, mut in (
            ("model", False, False),
            ("each setting's cost/cycle", True, False),
            ("GOGC=100 user-class mutator", False, True),
            ("both", True, True),
        ):
            lines.append(f"{rec.SHORT[source]:5} {what:28} {_errors(rec, mode, source, cost, mut)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from support import gc_recordings as rec

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", default=",".join(rec.MODES))
    args = p.parse_args(argv)
    for mode in args.mode.split(","):
        for part in (_inputs, _settings, _goal_term, _counterfactuals):
            print("\n".join(part(rec, mode)))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
