"""The statistics of ``analyses.regressions`` against their references:
quasi-Poisson against statsmodels' GLM, the detectable change against its
formula, and change points on seeded series with known changes."""

from __future__ import annotations

import numpy as np
import pytest

from pyproflab.analyses.regressions import inference
from pyproflab.analyses.regressions.over_time import _changes, arc_test, segment


def test_quasi_poisson_equals_statsmodels_glm() -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(5)
    exposure = rng.uniform(8, 12, 14)
    is_new = np.arange(14) >= 7
    mu = exposure * np.where(is_new, 6.0, 5.0) * rng.gamma(4, 1 / 4, 14)  # over-dispersed
    y = rng.poisson(mu).astype(float)
    fit = inference.quasi_poisson_fit(y[:, None], exposure, is_new)
    X = sm.add_constant(is_new.astype(float))
    glm = sm.GLM(y, X, family=sm.families.Poisson(), offset=np.log(exposure)).fit(scale="X2")
    b = np.log((fit.y_new / fit.d_new) / (fit.y_base / fit.d_base))[0]
    se = np.sqrt(fit.phi_hat * (1 / fit.y_new + 1 / fit.y_base))[0]
    assert b == pytest.approx(glm.params[1], rel=1e-6)
    assert fit.phi_hat[0] == pytest.approx(glm.scale, rel=1e-6)
    assert se == pytest.approx(glm.bse[1], rel=1e-5)


def test_detectable_is_the_power_formula() -> None:
    y = np.array([[200.0], [200.0], [200.0], [200.0]])
    fit = inference.quasi_poisson_fit(y, np.ones(4), np.array([False, False, True, True]))
    assert fit.phi[0] == 1.0  # no spread: sampling noise only
    # se0 = sqrt(1/400 + 1/400); (z_.975 + z_.8) se0 on the log scale.
    want = np.exp((1.959964 + 0.841621) * np.sqrt(2 / 400)) - 1
    assert inference.detectable(fit, 0.05)[0] == pytest.approx(want, rel=1e-5)


def test_quasi_poisson_has_pooled_power_and_holds_its_level() -> None:
    """Poisson units: A/A columns are rejected about 5% of the time (binomial
    bounds for 2000 columns), and a change of the size ``detectable`` names
    (alpha 0.05) is found about 80% of the time, its interval covering it."""
    rng = np.random.default_rng(11)
    is_new = np.arange(16) >= 8
    d = np.full(16, 10.0)
    opts = dict(
        test="quasi-poisson",
        unit_value=1.0,
        confidence=0.95,
        resamples=100,
        seed=0,
        permutations=100,
    )
    y = rng.poisson(40.0, (16, 2000)).astype(float)
    r = inference.compare(y, d, is_new, np.ones(2000, bool), **opts)
    assert 0.03 <= np.mean(r["p"] <= 0.05) <= 0.07
    size = float(np.median(inference.detectable(r["fit"], 0.05)))
    assert 0.2 < size < 0.3
    y2 = y.copy()
    y2[is_new] = rng.poisson(40.0 * (1 + size), (8, 2000))
    r2 = inference.compare(y2, d, is_new, np.ones(2000, bool), **opts)
    assert 0.7 <= np.mean(r2["p"] <= 0.05) <= 0.9
    assert 0.92 <= np.mean((r2["rel_lo"] <= size) & (size <= r2["rel_hi"])) <= 0.98


def test_quasi_poisson_is_honest_when_units_differ_more() -> None:
    """Units spread 4x more than Poisson: the A/A rejection rate stays near 5%."""
    rng = np.random.default_rng(12)
    is_new = np.arange(16) >= 8
    d = np.full(16, 10.0)
    y = rng.poisson(40.0 * rng.gamma(10, 0.1, (16, 2000))).astype(float)
    r = inference.compare(
        y,
        d,
        is_new,
        np.ones(2000, bool),
        test="quasi-poisson",
        unit_value=1.0,
        confidence=0.95,
        resamples=100,
        seed=0,
        permutations=100,
    )
    assert np.mean(r["p"] <= 0.05) <= 0.07


def _series(rates, rng):
    d = np.full(len(rates), 20.0)
    return rng.poisson(np.array(rates) * d).astype(float), d


def test_change_points_step_and_transient() -> None:
    rng = np.random.default_rng(3)
    y, d = _series([8.0] * 6 + [9.2] * 6, rng)  # a +15% step at window 6
    p, i, j = arc_test(y, d, 999, np.random.default_rng(0))
    assert p <= 0.01
    cuts = segment(y, d, p, i, j, 0.05, 999, np.random.default_rng(1))
    ch = _changes(y, d, cuts, 1.0, 0.95)
    assert [c["window"] for c in ch] == [6] and ch[0]["status"] == "persisted"
    assert ch[0]["rel_lo"] <= 0.15 <= ch[0]["rel_hi"]
    y, d = _series([8.0] * 5 + [10.4] + [8.0] * 6, rng)  # +30% in window 5 only
    p, i, j = arc_test(y, d, 999, np.random.default_rng(0))
    cuts = segment(y, d, p, i, j, 0.05, 999, np.random.default_rng(1))
    ch = _changes(y, d, cuts, 1.0, 0.95)
    assert p <= 0.05 and [c["window"] for c in ch] == [5, 6]
    assert ch[0]["status"] == "went away" and ch[0]["until_window"] == 6
    assert ch[1]["status"] == "return"
    # change_lo/hi are the change's interval, a fall's below zero too (change_lo
    # was the lower end of |change|: above the change itself for a fall).
    for c in ch:
        assert c["change_lo"] <= c["change"] <= c["change_hi"], c
    assert ch[0]["change_lo"] > 0 and ch[1]["change_hi"] < 0, ch


def test_flat_series_has_no_change_point() -> None:
    rng = np.random.default_rng(4)
    ps = [arc_test(*_series([8.0] * 12, rng), 199, np.random.default_rng(k))[0] for k in range(200)]
    assert np.mean(np.array(ps) <= 0.05) <= 0.09


def test_over_time_shares_skip_an_empty_window_quietly(recwarn) -> None:
    """A live series' last window can hold only empty profiles: it has no share.
    The change before it is still found, no warning is printed, a note says so."""
    from support.store_helpers import make_profile

    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest
    from pyproflab.store.select import Selection

    t0, items = 1_700_000_000_000_000_000, []
    for w in range(7):
        a = 10 if w < 3 else 30
        rows = [
            (["main.a", "main.main"], [a, a * 10**7]),
            (["main.b", "main.main"], [50, 5 * 10**8]),
        ]
        p = make_profile(rows if w < 6 else [], time_nanos=t0 + w * 10**10, duration_nanos=10**10)
        items.append((p, ProfileMeta(service="s", version="v", instance="i")))
    with Store.open(":memory:") as store:
        ingest(store, items, content_hashes=[f"h{i}" for i in range(len(items))])
        res = over_time(store, Selection(service="s"))
    first = res.findings().to_pylist()[0]
    assert first["label"] == "main.a" and first["window"] == 3
    assert first["rel"] == pytest.approx((30 / 80) / (10 / 60) - 1)
    assert any("window(s) 6 have no samples" in n for n in res.notes), res.notes
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_score_interval_inverts_the_p_value() -> None:
    """The quasi-Poisson relative interval at level 1 - alpha leaves out 0 exactly
    when the score test's p is below alpha: the test inverted, so an FCR interval
    never disagrees with the selection (over-dispersed and not, t and normal)."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        units = int(rng.integers(4, 12))
        is_new = np.arange(units) >= units // 2
        exposure = rng.uniform(5, 15, units)
        rate = rng.uniform(0.5, 30, 40)
        lift = np.where(rng.random(40) < 0.5, rng.uniform(0.7, 1.8, 40), 1.0)
        mu = exposure[:, None] * rate * np.where(is_new[:, None], lift, 1.0)
        counts = rng.poisson(mu * rng.gamma(3, 1 / 3, mu.shape)).astype(float)
        alpha = float(rng.uniform(0.001, 0.2))
        r = inference.compare(
            counts, exposure, is_new, np.ones(40, bool), test="quasi-poisson", unit_value=1.0,
            confidence=0.95, resamples=100, seed=0, permutations=100,
        )  # fmt: skip
        lo, hi = inference.fcr_intervals(
            counts, exposure, is_new, np.ones(40, bool), 1 - alpha,
            test="quasi-poisson", unit_value=1.0, resamples=100, seed=0,
        )  # fmt: skip
        ok = ~np.isnan(lo) & (np.abs(r["p"] - alpha) > 1e-9)
        assert ok.sum() > 20
        np.testing.assert_array_equal(((lo > 0) | (hi < 0))[ok], (r["p"] <= alpha)[ok])


def test_fcr_intervals_cover_at_the_rate_promised() -> None:
    """Benjamini-Yekutieli: over seeded fleets of 200 nodes (20 with a known
    change), the share of selected rows whose FCR interval misses the true
    change, averaged over 300 fleets, stays under the FDR level (0.05); the
    unadjusted 95% intervals of the same rows miss more often."""
    from pyproflab.analyses import stats

    rng = np.random.default_rng(3)
    fdr, nodes, units = 0.05, 200, 8
    is_new = np.arange(units) >= units // 2
    exposure = np.full(units, 10.0)
    miss_fcr, miss_plain = [], []
    for _ in range(300):
        rate = rng.uniform(1, 40, nodes)
        true_rel = np.where(np.arange(nodes) < 20, rng.uniform(0.3, 1.0, nodes), 0.0)
        mu = exposure[:, None] * rate * np.where(is_new[:, None], 1 + true_rel, 1.0)
        counts = rng.poisson(mu).astype(float)
        r = inference.compare(
            counts, exposure, is_new, np.ones(nodes, bool), test="quasi-poisson",
            unit_value=1.0, confidence=0.95, resamples=100, seed=0, permutations=100,
        )  # fmt: skip
        sel = stats.bh_adjust(r["p"]) <= fdr
        if not sel.any():
            continue
        lo, hi = inference.fcr_intervals(
            counts, exposure, is_new, sel, 1 - sel.sum() * fdr / nodes,
            test="quasi-poisson", unit_value=1.0, resamples=100, seed=0,
        )  # fmt: skip
        truth = true_rel[sel]
        miss_fcr.append(np.mean((truth < lo[sel]) | (truth > hi[sel])))
        miss_plain.append(np.mean((truth < r["rel_lo"][sel]) | (truth > r["rel_hi"][sel])))
    assert len(miss_fcr) > 250
    print(f"\nFCR misses {np.mean(miss_fcr):.4f}, unadjusted {np.mean(miss_plain):.4f}")
    assert np.mean(miss_fcr) <= fdr, np.mean(miss_fcr)
    assert np.mean(miss_plain) > np.mean(miss_fcr)


def test_log_ratio_interval_past_float_range_is_unbounded_quietly() -> None:
    """An over-dispersed node seen once on one side has an upper bound past exp's
    range: it is +inf, without numpy's overflow warning (notebook 04's pgo_effect
    printed 'RuntimeWarning: overflow encountered in exp' on the demo store)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rel, lo, hi = inference.log_ratio(
            np.array([1.0]), np.array([1.0]), np.array([0.0]), np.array([1.0]),
            np.array([1e5]), 1.96,
        )  # fmt: skip
    assert rel[0] == pytest.approx(1.0) and lo[0] == -1.0 and hi[0] == np.inf
