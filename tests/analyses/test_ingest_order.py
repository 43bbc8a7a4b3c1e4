"""Analyses give the same answer whatever order a store's profiles were
ingested in: the same profiles stored forwards and backwards (other profile
ids, other row order) are one data set."""

from __future__ import annotations

import numpy as np
import pytest
from support.store_helpers import make_profile

from pyproflab.store import Store
from pyproflab.store.ingest import ProfileMeta, ingest

T0 = 1_700_000_000_000_000_000
FUNCS = ["main.a", "main.b", "main.c", "main.d", "main.e", "main.f"]


def _series_items():
    """Twelve 10 s windows of two instances: main.a steps up at window 6; the
    others are noise, each instance's functions met in a different order."""
    rng = np.random.default_rng(7)
    items = []
    for w in range(12):
        for k, inst in enumerate(("i-1", "i-2")):
            rows = []
            for f in FUNCS if k == 0 else FUNCS[::-1]:
                lam = 60 if (f == "main.a" and w >= 6) else 40
                n = int(rng.poisson(lam))
                rows.append(([f, "main.main"], [n, n * 10**7]))
            t = T0 + w * 10**10 + k * 10**6  # the instances' profiles 1 ms apart
            p = make_profile(rows, time_nanos=t, duration_nanos=10**10)
            items.append((p, ProfileMeta(service="s", version="v", instance=inst)))
    return items


def _stores(items):
    """The items ingested one at a time forwards, and backwards."""
    out = []
    for order in (range(len(items)), range(len(items) - 1, -1, -1)):
        st = Store.open(":memory:")
        for i in order:
            ingest(st, [items[i]], content_hashes=[f"h{i}"])
        out.append(st)
    return out


def test_over_time_does_not_depend_on_ingest_order() -> None:
    """Before: one random generator drawn from in node order (the order
    functions were first stored) gave the reversed store other p-values, so
    other q-values (on the make demo store 0.00565 against 0.00491) and other
    changes (38 rows against 33)."""
    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store.select import Selection

    got = []
    for st in _stores(_series_items()):
        with st:
            res = over_time(st, Selection(service="s"), min_share=0.0)
            got.append((res.findings().to_pylist(), res.series.to_pylist()))
    assert got[0][0], "the planted step is found"
    assert got[0] == got[1]


def _two_versions():
    """Twenty profiles of v1 and twenty of v2 (main.a +50%) of uneven
    durations, every function called from two callers, with noise: float
    sums, edges and draws to compare."""
    rng = np.random.default_rng(11)
    items = []
    for k in range(40):
        version = "v1" if k % 2 == 0 else "v2"
        rows = []
        for f in FUNCS if k % 3 else FUNCS[::-1]:
            for caller in ("main.x", "main.y"):
                lam = 30 if (f == "main.a" and version == "v2") else 20
                n = int(rng.poisson(lam))
                rows.append(([f, caller, "main.main"], [n, n * 10_000_001]))
        t, dur = T0 + (k // 2) * 10**10 + (k % 2) * 10**6, 10**9 + int(rng.integers(10**8))
        p = make_profile(rows, time_nanos=t, duration_nanos=dur)
        meta = ProfileMeta(service="s", version=version, instance=f"i-{k % 4}")
        items.append((p, meta))
    return items


@pytest.mark.parametrize("test", ["quasi-poisson", "permutation"])
def test_regressions_do_not_depend_on_ingest_order(test) -> None:
    """Before: rows in profile-id order (the ingest order) summed floats in
    another order, numbered stacks and nodes by first appearance in that order
    (ties among edges ranked otherwise) and fed the permutations' draws: on the
    make demo store ingested backwards, regressions --test permutation gave
    main.(*api).list flat rel +0.19 against -0.20, and other digits and edge
    orders in every JSON."""
    from pyproflab.analyses.regressions import regressions

    got = []
    for st in _stores(_two_versions()):
        with st:
            res = regressions(st, {"version": "v1"}, {"version": "v2"}, test=test, resamples=200)
            got.append((res.rows.to_pylist(), res.edges.to_pylist()))
    assert got[0][0] and got[0][1]
    assert repr(got[0]) == repr(got[1])  # repr: NaN (no p-value) equals itself


def _fleet_samples(end_200: float) -> list[dict]:
    """Two instances side by side, GOGC=50 and GOGC=200 (most weight), both
    running to about t=1000 s; the GOGC=200 one's last cycle at ``end_200``."""
    out = []
    for run, (setting, w, end) in enumerate(
        (((50.0, None), 1.0, 1000.0), ((200.0, None), 2.0, end_200))
    ):
        for k in range(10):
            t = end - 100.0 * (9 - k)
            out.append(dict(run=run, setting=setting, w=w, t_end=t - 900.0, taken=t))
    return out


def test_gogc_current_setting_is_not_the_last_cycle_of_two_instances() -> None:
    """Before: the current setting was the latest run's, the run whose last
    cycle came last: a matter of milliseconds between instances side by side
    (make demo store: v1-a's GOGC=50 55 ms after v1-b's GOGC=200; 'current
    GOGC=50'), so it flipped with them. Now: the runs overlapping the latest,
    by weight, with a note."""
    from pyproflab.analyses.gogc.samples import Observation

    got = [Observation(_fleet_samples(1000.0 + dt), 1.0, "test") for dt in (-0.05, 0.05)]
    assert [o.current for o in got] == [(200.0, None), (200.0, None)]
    assert any("ran 2 settings (GOGC=50, GOGC=200)" in n for n in got[0].notes), got[0].notes


def test_merged_selection_does_not_depend_on_ingest_order() -> None:
    """Before: a store selection was merged in profile-id order (the ingest
    order), so its samples, and the bytes of `pyproflab merge --db`, came in
    another order from a store ingested backwards (make demo store, block
    profiles: the first sample 41.38s sync.(*Mutex).Lock against another)."""
    from pyproflab.encode import encode_profile
    from pyproflab.store.select import Selection

    got = []
    for st in _stores(_series_items()[:6]):
        with st:
            got.append(encode_profile(st.merged_profile(Selection(service="s")), gzip=False))
    assert got[0] == got[1]


def test_gc_per_profile_rows_do_not_depend_on_ingest_order() -> None:
    """``gc``'s per-profile table (and the report's "GC CPU by category") listed
    profiles by id, so the reversed store listed them backwards. Rows are now
    in the order the data fixes: time taken, then service, instance, type."""
    from pyproflab.analyses.gc import gc

    got = []
    for st in _stores(_series_items()):
        with st:
            rows = gc(st).profiles.to_pylist()
            got.append([(r["instance"], r["window_start"]) for r in rows])
    assert got[0] == got[1]
    assert got[0] == sorted(got[0], key=lambda r: (r[1], r[0]))
