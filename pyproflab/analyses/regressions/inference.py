"""Stage 4 of ``regressions``: per node and metric, the change, its interval,
its p-value and the smallest change detectable (rule 5 of
``pyproflab.analyses.regressions``).

Three tests:

- ``quasi-poisson`` (default): per unit ``i`` the sample count ``y_i``
  (values / the value of one sample) over exposure ``d_i`` (seconds, work
  units or 1) follows ``E y_i = d_i r_side`` with ``Var y_i = phi E y_i``.
  ``phi`` is Pearson's X^2 / (units - 2) (the quasi-Poisson estimate, as
  statsmodels' GLM with ``scale="X2"``). When ``phi <= 1`` the units differ
  only by sampling noise: ``phi = 1`` and normal quantiles, the power of the
  pooled counts. When ``phi > 1`` (units differ more, e.g. a GC cycle more or
  less per window) the estimate is used with Student's t on units - 2
  degrees of freedom. p: the score test of equal rates (conditional on the
  total, ``y_new ~ Binomial(Y, D_new / D)`` inflated by ``phi``), which
  needs no count to be non-zero. Intervals: Wald on the log ratio (relative)
  and on the difference of rates (absolute, delta method).
- ``permutation``: Welch's t on the ratio estimator, its p from the
  permutation distribution over the units' sides (``stats.permutation_p``);
  percentile bootstrap intervals.
- ``welch``: the same t from Student's t; bootstrap intervals.

FCR intervals (Benjamini and Yekutieli 2005): after BH selects R of m tests
at level q, each selected row's relative change gets an interval at level
1 - R q / m; over the selected rows the expected share of intervals that miss
their change is at most q. With the quasi-Poisson test the interval inverts
the score test the p-value comes from (the ratios it does not reject, a
Wilson interval widened by ``phi``), so a row is selected exactly when its
FCR interval leaves out 0 (no change); with the permutation and Welch tests
it is the bootstrap's at that level.

Detectable: the smallest relative increase the quasi-Poisson test finds with
80% power at level ``alpha`` (the caller passes FDR / number of tests: the BH
threshold of a finding that is alone), given the base side's counts, the
new side's exposure and ``phi``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from pyproflab.analyses import stats


@dataclass
class Fit:
    """Quasi-Poisson fit per column: totals, exposures, dispersion."""

    y_base: np.ndarray
    y_new: np.ndarray
    d_base: float
    d_new: float
    phi_hat: np.ndarray  # Pearson X^2 / df, NaN when df < 1
    df: int

    @property
    def phi(self) -> np.ndarray:
        return np.where(np.isnan(self.phi_hat), 1.0, np.maximum(self.phi_hat, 1.0))

    @property
    def over(self) -> np.ndarray:
        """Columns whose units differ more than sampling noise (t quantiles)."""
        return np.nan_to_num(self.phi_hat, nan=0.0) > 1.0

    def quantile(self, prob: float) -> np.ndarray:
        df = max(self.df, 1)
        return np.where(self.over, sps.t.ppf(prob, df), sps.norm.ppf(prob))

    def sf2(self, z: np.ndarray) -> np.ndarray:
        """Two-sided tail probability of |z|."""
        df = max(self.df, 1)
        return np.where(self.over, 2 * sps.t.sf(np.abs(z), df), 2 * sps.norm.sf(np.abs(z)))


def dispersion(counts: np.ndarray, mu: np.ndarray, df: int, axis: int = 0) -> np.ndarray:
    """Pearson's X^2 / ``df`` of ``counts`` around their fitted means ``mu``,
    summed along ``axis`` (the units); NaN when ``df < 1``. Cells with no
    expected count add nothing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x2 = np.where(mu > 0, (counts - mu) ** 2 / mu, 0.0).sum(axis=axis)
    return x2 / df if df >= 1 else np.full(np.shape(x2), np.nan)


def log_ratio(y_new, d_new, y_base, d_base, phi, q) -> tuple[np.ndarray, ...]:
    """(rel, rel_lo, rel_hi): the ratio of the rates ``y/d`` minus 1 and its Wald
    interval on the log scale at quantile ``q``, variance ``phi`` times the
    Poisson one. A zero count is taken as half a sample (no infinite log); a
    bound past the float range is infinite (an unbounded interval), quietly."""
    yn, yb = np.maximum(y_new, 0.5), np.maximum(y_base, 0.5)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = np.log(yn / d_new) - np.log(yb / d_base)
        se = np.sqrt(phi * (1 / yn + 1 / yb))
        return np.exp(b) - 1, np.exp(b - q * se) - 1, np.exp(b + q * se) - 1


def rate_change(y_new, d_new, y_base, d_base, phi, unit_value) -> tuple[np.ndarray, np.ndarray]:
    """(change, standard error): the difference of the rates ``y/d`` in shown
    units, its variance ``phi`` times the Poisson one (delta method)."""
    change = (y_new / d_new - y_base / d_base) * unit_value
    se = np.sqrt(phi * (y_new / d_new**2 + y_base / d_base**2)) * unit_value
    return change, se


def quasi_poisson_fit(counts: np.ndarray, exposure: np.ndarray, is_new: np.ndarray) -> Fit:
    """Fit ``E y = d r_side`` per column of ``counts`` (rows: units)."""
    yb, yn = counts[~is_new].sum(axis=0), counts[is_new].sum(axis=0)
    db, dn = float(exposure[~is_new].sum()), float(exposure[is_new].sum())
    rates = np.where(is_new[:, None], yn / dn, yb / db)
    phi_hat = dispersion(counts, exposure[:, None] * rates, len(is_new) - 2)
    return Fit(yb, yn, db, dn, phi_hat, len(is_new) - 2)


def detectable(fit: Fit, alpha: float, power: float = 0.8) -> np.ndarray:
    """Smallest relative increase found with ``power`` at two-sided ``alpha``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        se0 = np.sqrt(fit.phi * (1.0 / fit.y_base + fit.d_base / (fit.d_new * fit.y_base)))
        out = np.exp((fit.quantile(1 - alpha / 2) + fit.quantile(power)) * se0) - 1.0
    return np.where(fit.y_base > 0, out, np.nan)


def _quasi_poisson(counts, exposure, is_new, confidence, unit_value) -> dict[str, np.ndarray]:
    fit = quasi_poisson_fit(counts, exposure, is_new)
    yb, yn, db, dn, phi = fit.y_base, fit.y_new, fit.d_base, fit.d_new, fit.phi
    total = yb + yn
    share = dn / (db + dn)
    q = fit.quantile(1 - (1 - confidence) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (yn - total * share) / np.sqrt(phi * total * share * (1 - share))
        p = np.where(total > 0, fit.sf2(z), 1.0)
        _, rel_lo, rel_hi = log_ratio(yn, dn, yb, db, phi, q)
        change, se_c = rate_change(yn, dn, yb, db, phi, unit_value)
    ok = yb > 0
    return {
        "p": p,
        "change_lo": change - q * se_c,
        "change_hi": change + q * se_c,
        "rel_lo": np.where(ok, rel_lo, np.nan),
        "rel_hi": np.where(ok, rel_hi, np.nan),
        "fit": fit,
    }


def _percentiles(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column, ignoring NaN (e.g. a zero base rate)."""
    a = (1.0 - level) / 2.0 * 100.0
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(x, a, axis=0), np.nanpercentile(x, 100.0 - a, axis=0)


def _bootstrap(values, exposure, is_new, confidence, resamples, seed) -> dict[str, np.ndarray]:
    """Percentile bootstrap of the change and ratio, units resampled within sides."""
    rng = np.random.default_rng(seed)
    ub, un = int((~is_new).sum()), int(is_new.sum())
    cb = stats.resample_counts(rng, ub, resamples)
    cn = stats.resample_counts(rng, un, resamples)
    mb, mn, db, dn = values[~is_new], values[is_new], exposure[~is_new], exposure[is_new]
    ncol = values.shape[1]
    out = {k: np.full(ncol, np.nan) for k in ("change_lo", "change_hi", "rel_lo", "rel_hi")}
    for start in range(0, ncol, 512):  # chunks bound the memory
        sl = slice(start, start + 512)
        bb = stats.bootstrap_ratio(mb[:, sl], db, cb)
        bn = stats.bootstrap_ratio(mn[:, sl], dn, cn)
        out["change_lo"][sl], out["change_hi"][sl] = _percentiles(bn - bb, confidence)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bb != 0, bn / bb - 1.0, np.nan)
        out["rel_lo"][sl], out["rel_hi"][sl] = _percentiles(ratio, confidence)
    return out


def compare(
    values: np.ndarray,
    exposure: np.ndarray,
    is_new: np.ndarray,
    tested: np.ndarray,
    *,
    test: str,
    unit_value: float,
    confidence: float,
    resamples: int,
    seed: int,
    permutations: int,
) -> dict:
    """Statistics per column of ``values`` (rows: units, in sample counts).

    ``unit_value`` converts a count rate into the shown unit (cores, B/s).
    Returns the columns ``change_lo/hi``, ``rel_lo/hi``, ``p`` (NaN where not
    ``tested``), the quasi-Poisson ``fit`` (always: it gives ``detectable``)
    and, for the permutation test, ``splits`` and ``exact``.
    """
    qp = _quasi_poisson(values, exposure, is_new, confidence, unit_value)
    out: dict = {"fit": qp["fit"], "splits": 0, "exact": False}
    if test == "quasi-poisson":
        out.update({k: qp[k] for k in ("change_lo", "change_hi", "rel_lo", "rel_hi")})
        p = qp["p"]
    else:
        out.update(_bootstrap(values * unit_value, exposure, is_new, confidence, resamples, seed))
        mb, mn = values[~is_new], values[is_new]
        db, dn = exposure[~is_new], exposure[is_new]
        change = mn.sum(axis=0) / dn.sum() - mb.sum(axis=0) / db.sum()
        if test == "welch":
            t, df = stats.welch_t(
                change,
                stats.ratio_variance(mn, dn),
                stats.ratio_variance(mb, db),
                len(dn),
                len(db),
            )
            p = 2 * sps.t.sf(np.abs(t), df)
            # No variance on either side: a difference is certain, none is not one.
            p = np.where(np.isnan(p) & (change == 0), 1.0, p)
        else:
            p = np.full(values.shape[1], np.nan)
            if tested.any():
                p[tested], out["splits"], out["exact"] = stats.permutation_p(
                    values[:, tested],
                    exposure,
                    is_new,
                    permutations,
                    np.random.default_rng(seed),
                )
    rel = np.isnan(qp["rel_lo"])
    out["rel_lo"] = np.where(rel, np.nan, out["rel_lo"])
    out["rel_hi"] = np.where(rel, np.nan, out["rel_hi"])
    out["p"] = np.where(tested, p, np.nan)
    return out


def score_ratio_interval(fit: Fit, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rel_lo, rel_hi): the ratios r_new / r_base, minus 1, that the score test of
    ``_quasi_poisson`` does not reject at quantile ``q`` (NaN where the base has
    no sample). Conditional on the total Y, y_new ~ Binomial(Y, pi) with
    pi = rho d_new / (rho d_new + d_base), its variance inflated by ``phi``:
    |y_new - Y pi| <= q sqrt(phi Y pi (1 - pi)) is a quadratic in pi."""
    yb, yn = fit.y_base, fit.y_new
    total = yb + yn
    k = q**2 * fit.phi * total
    a, b = total**2 + k, 2 * yn * total + k
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(k * (k + 4 * yn * yb))
        pi_lo, pi_hi = (b - root) / (2 * a), (b + root) / (2 * a)
        to_rel = lambda pi: pi * fit.d_base / ((1 - pi) * fit.d_new) - 1.0  # noqa: E731
        ok = (yb > 0) & (total > 0)
        return np.where(ok, to_rel(pi_lo), np.nan), np.where(ok, to_rel(pi_hi), np.nan)


def fcr_intervals(
    values: np.ndarray,
    exposure: np.ndarray,
    is_new: np.ndarray,
    selected: np.ndarray,
    level: float,
    *,
    test: str,
    unit_value: float,
    resamples: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(rel_lo, rel_hi) at ``level`` (1 - R q / m) for the ``selected`` columns of
    ``values`` (rows: units, in sample counts), NaN for the others (module rules)."""
    lo, hi = np.full(values.shape[1], np.nan), np.full(values.shape[1], np.nan)
    if not selected.any():
        return lo, hi
    cols = values[:, selected]
    if test == "quasi-poisson":
        fit = quasi_poisson_fit(cols, exposure, is_new)
        lo[selected], hi[selected] = score_ratio_interval(fit, fit.quantile(1 - (1 - level) / 2))
    else:
        boot = _bootstrap(cols * unit_value, exposure, is_new, level, resamples, seed)
        lo[selected], hi[selected] = boot["rel_lo"], boot["rel_hi"]
    return lo, hi
