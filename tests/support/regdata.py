"""The recorded regression test data (tests/testdata/regressions): real CPU
profiles of tests/regprog with regressions of known size planted, recorded
once by ``python -m bench.record_regressions`` (see there for the cases).

``store_of(path, cases)`` ingests the cases' profiles (metadata from their
sidecars) and each window's request counter (``requests_total`` at the
window's start and end) into a new store.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pyarrow as pa

DATA = Path(__file__).resolve().parents[1] / "testdata" / "regressions"
#: The planted relative change of each two-sample case's slowed function.
PLANTED = {
    "own": ("main.ownWork", 0.30),
    "helper": ("main.viaB", 0.30),
    "shift": ("main.shiftX", 0.30),
}
#: The over-time cases: main.ownWork's planted change and its first window.
OVER_TIME = {"transient": (6, 0.30), "step": (8, 0.15)}


def aa_splits(store, instance: str, splits: int, seed: int = 13):
    """``splits`` random halvings of ``instance``'s windows (profile ids, by
    time), as (a, b) lists of profile ids; the same splits for the same seed."""
    import numpy as np

    from pyproflab.store.select import Selection

    rows = store.profiles(Selection(instance=instance)).sort_by("time_nanos")
    ids = np.array(rows.column("profile_id").to_pylist())
    rng = np.random.default_rng(seed)
    for _ in range(splits):
        pick = rng.permutation(len(ids))
        half = len(ids) // 2
        yield sorted(ids[pick[:half]].tolist()), sorted(ids[pick[half:]].tolist())


def sidecars(case: str) -> list[tuple[Path, dict]]:
    return [
        (p.with_suffix(""), json.loads(p.read_text()))
        for p in sorted((DATA / case).glob("*.pb.gz.json"))
    ]


def store_of(path: Path, cases: list[str]):
    """A store at ``path`` holding ``cases`` and their request counters."""
    from pyproflab import schema
    from pyproflab.store import Store
    from pyproflab.store.ingest import ingest_paths
    from pyproflab.store.metrics import ingest_metric_samples

    store = Store.open(path)
    for case in cases:
        report = ingest_paths(store, [DATA / case])
        assert not report.refused, report.refused
        for _, side in sidecars(case):
            times = [
                datetime.fromisoformat(side[k].replace("Z", "+00:00"))
                for k in ("window_start", "window_end")
            ]
            table = pa.table(
                {
                    "metric": ["requests_total"] * 2,
                    "labels": pa.array([[], []], schema.METRIC_LABELS),
                    "type": ["counter"] * 2,
                    "time": pa.array(times, schema.TIMESTAMP_UTC),
                    "value": [float(side["requests_start"]), float(side["requests_end"])],
                },
                schema=schema.METRIC_SAMPLES,
            )
            ingest_metric_samples(
                store,
                table,
                service=side["service"],
                version=side["version"],
                instance=side["instance"],
                source=side.get("window_start"),
            )
    return store
