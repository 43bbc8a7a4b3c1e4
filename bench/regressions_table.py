"""The acceptance table of the recorded regression data (tests/testdata/regressions):
per planted case the rank, q, interval and planted size, per second and per
request; the A/A rate over 100 random window splits; detectable changes.

    python -m bench.regressions_table
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import regdata  # noqa: E402

CASES = {**regdata.PLANTED, "load": ("(none)", 0.0)}


def main() -> int:
    from pyproflab.analyses.regressions import regressions
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    cases = ["base", "transient", "step"] + [
        f"{p}{c}" for c in ("own", "helper", "shift", "load") for p in ("", "base-")
    ]
    store = regdata.store_of(Path(tempfile.mkdtemp()) / "s.duckdb", cases)
    print("case, per, first row, metric, rank of the plant, q, rel [interval], planted, detectable")
    for case, (name, size) in CASES.items():
        for per in (None, "requests_total"):
            res = regressions(
                store,
                Selection(instance=f"base-{case}"),
                Selection(instance=case),
                per=per,
                test="quasi-poisson",
            )
            rows = res.rows.to_pylist()
            top = rows[0]
            hit = next((r for r in rows if r["label"] == name), top)
            m = hit["evidence_metric"]
            sig = sum(bool(r["flat_significant"] or r["cum_significant"]) for r in rows)
            print(
                f"{case:7s} {'request' if per else 'second':8s} {top['label']:16s} {m:5s} "
                f"{hit['rank']:3d} {hit[m + '_q']:.3g} {hit[m + '_rel']:+.1%} "
                f"[{hit[m + '_rel_lo']:+.1%}, {hit[m + '_rel_hi']:+.1%}] {size:+.0%} "
                f"{hit[m + '_detectable']:.0%}  significant rows {sig}"
            )
    ids = np.array(
        store.sql("SELECT profile_id FROM profiles WHERE instance = 'base' ORDER BY time_nanos")
        .column("profile_id")
        .to_pylist()
    )
    for per in (None, "requests_total"):
        rng = np.random.default_rng(13)
        alarms, det = 0, []
        for _ in range(100):
            pick = rng.permutation(len(ids))
            r = regressions(
                store,
                Selection(profile_ids=sorted(ids[pick[:8]].tolist())),
                Selection(profile_ids=sorted(ids[pick[8:]].tolist())),
                per=per,
                test="quasi-poisson",
            )
            t = r.rows
            alarms += bool(
                (
                    t.column("flat_significant").to_numpy() | t.column("cum_significant").to_numpy()
                ).any()
            )
            own = next(x for x in t.to_pylist() if x["label"] == "main.ownWork")
            det.append(own["flat_detectable"])
        print(
            f"A/A per {'request' if per else 'second'}: {alarms}/100 splits with a "
            "significant row; "
            f"main.ownWork detectable median {np.median(det):.0%}"
        )
    for case in ("transient", "step"):
        for per in (None, "requests_total"):
            res = over_time(store, Selection(service=f"regprog-{case}"), per=per)
            f = res.findings().to_pylist()
            own = [c for c in f if c["label"] == "main.ownWork"]
            print(
                f"over time {case} per {'request' if per else 'second'}: {len(f)} findings; "
                f"ownWork: {[(c['window'], round(c['rel'], 3), c['status']) for c in own]}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
