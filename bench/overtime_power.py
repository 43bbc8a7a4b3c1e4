"""Power of ``over_time``'s first arc test for a planted one-window transient,
by simulation, to choose a recording design before recording.

    python -m bench.overtime_power [--series 200] [--designs 16x30,12x90]

Each simulated series has ``windows`` windows of ``seconds`` s: a function
with ``samples`` samples per 30 s (Poisson), ``size`` more in the middle
window, and the rest of the process (``total`` samples per 30 s) as the share
denominator, as ``over_time`` uses by default. A series counts as found when
the arc test (999 Poisson references, as ``over_time``) puts the arc on
exactly the planted window with p at most ``fdr / functions``, the
Benjamini-Hochberg bound for the first of ``functions`` tests when the others
are null. Prints one line per design: the share of series found.
"""

from __future__ import annotations

import argparse

import numpy as np


def found_share(
    windows: int,
    seconds: float,
    *,
    series: int,
    samples: float,
    total: float,
    size: float,
    fdr: float,
    functions: int,
    seed: int,
) -> float:
    """The share of ``series`` simulated series whose transient is found."""
    from pyproflab.analyses.regressions.over_time import arc_test

    rng = np.random.default_rng(seed)
    plant = windows // 2
    lam = np.full(windows, samples * seconds / 30)
    lam[plant] *= 1 + size
    rest = np.full(windows, (total - samples) * seconds / 30)
    hits = 0
    for _ in range(series):
        y = rng.poisson(lam).astype(float)
        d = y + rng.poisson(rest)
        p, i, j = arc_test(y, d, 999, rng)
        hits += p <= fdr / functions and (i, j) == (plant, plant + 1)
    return hits / series


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", default="16x30,16x60,12x90", help="WINDOWSxSECONDS,...")
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--samples", type=float, default=240, help="the function's samples per 30 s")
    ap.add_argument("--total", type=float, default=2700, help="the process's samples per 30 s")
    ap.add_argument("--size", type=float, default=0.30)
    ap.add_argument("--fdr", type=float, default=0.05)
    ap.add_argument("--functions", type=int, default=19)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    for design in args.designs.split(","):
        windows, seconds = design.split("x")
        share = found_share(
            int(windows),
            float(seconds),
            series=args.series,
            samples=args.samples,
            total=args.total,
            size=args.size,
            fdr=args.fdr,
            functions=args.functions,
            seed=args.seed,
        )
        found = f"found in {share:.1%} of {args.series} series"
        print(f"{windows} x {seconds} s: transient +{args.size:.0%} {found}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
