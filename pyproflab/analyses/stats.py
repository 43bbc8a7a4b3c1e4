"""Small statistics helpers (NumPy, distributions from scipy.stats).

- ``ratio_variance``: the linearised (sandwich) variance of a ratio-of-sums
  estimator ``sum(v) / sum(d)`` over independent units (profiles).
- ``welch_t``: Welch's two-sample statistic and Welch–Satterthwaite degrees
  of freedom from two estimates and their variances.
- ``t_two_sided_p``: the two-sided p-value of Student's t (scipy.stats).
- ``bh_adjust``: Benjamini–Hochberg adjusted p-values (q-values), NaN kept.
- ``bootstrap_ratio``: stratified bootstrap of ``sum(v)/sum(d)`` per column,
  resampling rows (profiles) with replacement, seeded.
- ``permutation_p``: two-sided p-values of a permutation test of the Welch
  statistic above over the units' side labels: exact (every split) when there
  are at most ``permutations`` splits, else that many random splits.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats as sps


def ratio_variance(values: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Variance of ``R = sum(v)/sum(d)`` per column of ``values`` (rows: units).

    Rule: ``var(R) ~= sum(z_i^2) / (n (n-1))`` with ``z_i = (v_i - R d_i) / mean(d)``.
    With equal durations this is the usual variance of a mean. NaN when n < 2.
    """
    n = values.shape[0]
    if n < 2:
        return np.full(values.shape[1], np.nan)
    dsum = durations.sum()
    r = values.sum(axis=0) / dsum
    z = (values - np.outer(durations, r)) / (dsum / n)
    return (z * z).sum(axis=0) / (n * (n - 1))


def welch_t(
    delta: np.ndarray, var_a: np.ndarray, var_b: np.ndarray, n_a: int, n_b: int
) -> tuple[np.ndarray, np.ndarray]:
    """(t, df) for a difference with per-side variances of the two estimates."""
    se2 = var_a + var_b
    with np.errstate(divide="ignore", invalid="ignore"):
        t = delta / np.sqrt(se2)
        df = se2 * se2 / (var_a * var_a / max(n_a - 1, 1) + var_b * var_b / max(n_b - 1, 1))
    # A side without variance contributes nothing to df; all-zero variance: t is 0 or inf.
    df = np.where(np.isfinite(df), df, float(max(n_a + n_b - 2, 1)))
    return t, np.maximum(df, 1.0)


def t_two_sided_p(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (scipy); NaN stays NaN."""
    return 2.0 * sps.t.sf(np.abs(np.asarray(t, float)), np.asarray(df, float))


def bh_adjust(p: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values over the non-NaN entries (NaN stays NaN)."""
    p = np.asarray(p, float)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return q
    order = ok[np.argsort(p[ok], kind="stable")]
    ranked = p[order] * m / np.arange(1, m + 1)
    # Step-up: q_(i) = min over j >= i of p_(j) m / j.
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    q[order] = np.minimum(ranked, 1.0)
    return q


def bootstrap_ratio(values: np.ndarray, durations: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``sum(v)/sum(d)`` per resample (rows of ``counts``: how often each unit is drawn)
    and column of ``values``: shape (resamples, columns)."""
    num = counts @ values
    den = counts @ durations
    return num / den[:, None]


def resample_counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) draw counts of n units resampled with replacement."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(float)


def split_welch_t(groups: np.ndarray, values: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Welch's t of ``R_new - R_base`` per split and column: (splits, columns).

    ``groups`` (splits, units): 1 where a unit is on the new side. Same rules
    as ``ratio_variance``/``welch_t``; no variance on either side gives t = 0
    for no difference and +-inf otherwise. Callers centre ``values`` (subtract
    a pooled ratio times the durations) so that equal ratios cancel exactly.
    """
    g = groups.astype(float)
    # Per split, the new side's sums (unit count, durations, v, v^2, v d, d^2);
    # the base side's are the totals minus those: half the matrix products.
    per_unit = np.stack([np.ones(len(durations)), durations, durations * durations], axis=1)
    sums_n = g @ per_unit
    sums_b = per_unit.sum(axis=0) - sums_n
    per_value = (values, values * values, values * durations[:, None])
    mats_n = [g @ m for m in per_value]
    mats_b = [m.sum(axis=0) - mn for m, mn in zip(per_value, mats_n, strict=True)]
    out = []
    for (n, dsum, dd), (s1, s2, sd) in ((sums_n.T, mats_n), (sums_b.T, mats_b)):
        r = s1 / dsum[:, None]
        # sum_i (v_i - r d_i)^2 over the side, expanded into sums over the units.
        ss = s2 - 2 * r * sd + r * r * dd[:, None]
        var = np.maximum(ss, 0.0) / ((dsum / n)[:, None] ** 2) / (n * (n - 1))[:, None]
        out.append((r, var))
    (rn, vn), (rb, vb) = out
    change = rn - rb
    se2 = vn + vb
    with np.errstate(divide="ignore", invalid="ignore"):
        t = change / np.sqrt(se2)
    return np.where(se2 > 0, t, np.where(change == 0, 0.0, np.copysign(np.inf, change)))


def permutation_p(
    values: np.ndarray,
    durations: np.ndarray,
    is_new: np.ndarray,
    permutations: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, int, bool]:
    """(p per column, splits used, exact) of the permutation test of Welch's t.

    Rule: the units' side labels are exchangeable under no difference, so the
    observed |t| is ranked among the |t| of other splits with the same side
    sizes. Exact: all C(n, k) splits when there are at most ``permutations``,
    p = #{|t*| >= |t|} / C(n, k) (the observed split is one of them). Else
    ``permutations`` random splits and p = (1 + #{|t*| >= |t|}) / (1 + B).
    Ties count as at least as extreme (a relative tolerance of 1e-9).
    """
    n, k = len(is_new), int(is_new.sum())
    pooled = values.sum(axis=0) / durations.sum()
    centred = values - np.outer(durations, pooled)
    # Rounding residue of equal ratios is no difference.
    centred[np.abs(centred) <= 1e-12 * np.abs(values).max(axis=0, initial=0.0)] = 0.0
    t_obs = np.abs(split_welch_t(is_new[None, :], centred, durations)[0])
    bar = t_obs * (1.0 - 1e-9)
    total = math.comb(n, k)
    exact = total <= permutations
    ge = np.zeros(values.shape[1], np.int64)
    block = max(1, min(1024, 2_000_000 // max(n, 1)))
    if exact:
        combos = itertools.combinations(range(n), k)
        done = 0
        while done < total:
            chunk = list(itertools.islice(combos, block))
            groups = np.zeros((len(chunk), n), np.uint8)
            groups[np.repeat(np.arange(len(chunk)), k), np.concatenate(chunk)] = 1
            ge += (np.abs(split_welch_t(groups, centred, durations)) >= bar).sum(axis=0)
            done += len(chunk)
        return ge / total, total, True
    done = 0
    while done < permutations:
        m = min(block, permutations - done)
        ranks = np.argsort(rng.random((m, n)), axis=1).argsort(axis=1)
        groups = (ranks < k).astype(np.uint8)
        ge += (np.abs(split_welch_t(groups, centred, durations)) >= bar).sum(axis=0)
        done += m
    return (ge + 1) / (permutations + 1), permutations, False
