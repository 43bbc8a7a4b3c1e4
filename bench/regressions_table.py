"""The acceptance table of the recorded regression data (tests/testdata/regressions):
per planted case the rank, q, interval and planted size (of the rate; a share
changes by (1 + p) / (1 + p s) - 1 for a function of share s), as shares, per
second and per request; the A/A rate over 100 random window splits; detectable changes; the
over-time cases (transient, step).

    python -m bench.regressions_table [--test quasi-poisson|permutation|welch] [--aa 100]

Prints markdown: one table of the cases, then one line per A/A setting.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support import regdata  # noqa: E402

#: The comparisons: shares (the default measure), rates per second, rates per request.
PER = {"share": ("share", None), "second": ("rate", None), "request": ("rate", "requests_total")}


def _two_sample_rows(store, test: str) -> list[str]:
    """A table row per two-sample case and denominator."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    out = []
    for case, (name, size) in {**regdata.PLANTED, "load": ("(none)", 0.0)}.items():
        for per_name, (measure, per) in PER.items():
            res = regressions(
                store,
                Selection(instance=f"base-{case}"),
                Selection(instance=case),
                per=per,
                measure=measure,
                test=test,
            )
            rows = res.rows.to_pylist()
            sig = sum(bool(r["flat_significant"] or r["cum_significant"]) for r in rows)
            hit = next((r for r in rows if r["label"] == name), None)
            if hit is None:
                out.append(f"| {case} | {per_name} | - | - | - | {size:+.0%} | - | {sig} |")
                continue
            m = hit["evidence_metric"]
            out.append(
                f"| {case} | {per_name} | {hit['rank']} ({m}) | {hit[m + '_q']:.2g} | "
                f"{hit[m + '_rel']:+.1%} [{hit[m + '_rel_lo']:+.1%}, {hit[m + '_rel_hi']:+.1%}]"
                f" | {size:+.0%} | {hit[m + '_detectable']:.0%} | {sig} |"
            )
    return out


def _over_time_rows(store) -> list[str]:
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    out = []
    for case, (window, size) in regdata.OVER_TIME.items():
        for per_name, (measure, per) in PER.items():
            res = over_time(store, Selection(service=f"regprog-{case}"), per=per, measure=measure)
            f = res.findings().to_pylist()
            if not f:
                out.append(
                    f"| {case} | {per_name} | none | - | - | {size:+.0%} @ {window} | - | 0 |"
                )
                continue
            rank = next((k + 1 for k, c in enumerate(f) if c["label"] == "main.ownWork"), None)
            c = f[(rank or 1) - 1]
            out.append(
                f"| {case} | {per_name} | {rank} ({c['label']} @ {c['window']}, {c['status']}) | "
                f"{c['q']:.2g} | {c['rel']:+.1%} [{c['rel_lo']:+.1%}, {c['rel_hi']:+.1%}] | "
                f"{size:+.0%} @ {window} | - | {len(f)} |"
            )
    return out


def aa_rate(
    store, per: str | None, test: str, splits: int = 100, instance: str = "base", measure="rate"
) -> tuple[int, float]:
    """(splits with any significant row, median detectable change of main.ownWork)
    over ``splits`` random 8/8 splits of ``instance``'s 16 windows (``base``:
    quiet machine, ``busy``: beside 3 busy-looping processes)."""
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.select import Selection

    alarms, det = 0, []
    for a, b in regdata.aa_splits(store, instance, splits):
        t = regressions(
            store,
            Selection(profile_ids=a),
            Selection(profile_ids=b),
            per=per,
            test=test,
            measure=measure,
        ).rows
        sig = t.column("flat_significant").to_numpy() | t.column("cum_significant").to_numpy()
        alarms += bool(sig.any())
        own = next(x for x in t.to_pylist() if x["label"] == "main.ownWork")
        det.append(own["flat_detectable"])
    return alarms, float(np.median(det))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", default="quasi-poisson")
    ap.add_argument("--aa", type=int, default=100, help="A/A splits (0: none)")
    args = ap.parse_args(argv)
    cases = ["base", "busy", "transient", "step"] + [
        f"{p}{c}" for c in ("own", "helper", "shift", "load") for p in ("", "base-")
    ]
    store = regdata.store_of(Path(tempfile.mkdtemp()) / "s.duckdb", cases)
    print(f"test: {args.test}\n")
    print("| case | per | rank of the plant | q | rel [95%] | planted | detectable | sig. rows |")
    print("|---|---|---|---|---|---|---|---|")
    for line in _two_sample_rows(store, args.test) + _over_time_rows(store):
        print(line, flush=True)
    for instance in ("base", "busy") if args.aa else ():
        for per_name, (measure, per) in PER.items():
            alarms, det = aa_rate(store, per, args.test, args.aa, instance, measure)
            print(
                f"\nA/A {instance} per {per_name}: {alarms}/{args.aa} splits "
                f"with a significant row; "
                f"main.ownWork (10% of CPU) detectable at 80% power: median {det:.0%}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
