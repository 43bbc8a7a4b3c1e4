"""``over_time``: when did a function's cost change, by how much, and did it stay?

``over_time(store, selection, ...)`` takes one selection (a service's
continuous collection), groups its profiles into collection windows
(``units.time_windows``) and, per function, finds change points in the
series of its rates per window.

Method: circular binary segmentation (Olshen, Venkatraman, Lucito & Wigler
2004, "Circular binary segmentation for the analysis of array-based DNA copy
number data"), with the Poisson likelihood-ratio statistic of the window
counts over their exposures: within a segment, the arc ``[i, j)`` that
differs most from the rest is found (an arc that reaches the end is a step;
one inside is a transient), and it is a change when the maximum statistic
(scaled by the over-dispersion of the fit, at least 1) is extreme among those
of ``permutations`` Poisson series of the segment's constant rate (seeded, per
function from the seed and its name, whatever order the store holds it in):
a resampling reference as in CBS and E-Divisive (Matteson & James 2014),
drawn from the null model rather than by permuting the windows, whose
reference the change itself would inflate.
Segments are split recursively while changes are found. The first test of
every function is corrected by Benjamini–Hochberg at ``fdr``; the splits of a
function found that way are tested at ``fdr``.

Rules:

1. A window's rate is the sum of its profiles' values over the sum of their
   durations (or, with ``per``, of a counter's increase, as ``regressions``);
   with ``measure="share"`` (``auto``'s choice without ``per``, as in
   ``regressions``) over the sum of their totals, so a change of load or
   machine speed between windows is no change point.
2. Each function is followed by its flat or its cum, whichever changes more
   surely (smaller first p; flat on a tie); functions below ``min_share`` of
   the total are not tested.
3. Each change point: the first window after it, its start time, the rates
   before and after (the adjacent segments), the change with its Wald
   interval (``change_lo``, ``change_hi``) and the relative change with one
   on the log ratio (over-dispersion from the segmented fit, at least 1),
   and its status: ``went away`` when a later change returns
   the rate to one consistent with the rate before (and when), the return
   itself ``return``; otherwise ``persisted``.
4. Changes are ranked by the lower end of their size (``|change|`` less its
   interval's half width), the surest first, returns last. A change is
   ``explained_by`` a more credible change (ranked before it) in the same
   window and direction of a function on the same stacks (ancestor or
   descendant).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from scipy import stats as sps

from pyproflab.analyses import stats
from pyproflab.analyses.options import OverTimeOptions
from pyproflab.analyses.regressions import attribution
from pyproflab.analyses.regressions.incidence import node_values
from pyproflab.analyses.regressions.inference import dispersion, log_ratio, rate_change
from pyproflab.analyses.regressions.measure import resolve_measure
from pyproflab.analyses.regressions.reads import reads_of
from pyproflab.analyses.regressions.selection import as_selection, sides_of
from pyproflab.analyses.regressions.units import per_work, time_windows
from pyproflab.display import render
from pyproflab.errors import UsageError
from pyproflab.model import time_of_nanos

CHANGES_SCHEMA = pa.schema(
    [
        pa.field("label", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("window", pa.int64(), nullable=False),
        pa.field("time", pa.timestamp("us", "UTC")),
        pa.field("rate_before", pa.float64()),
        pa.field("rate_after", pa.float64()),
        pa.field("change", pa.float64()),
        pa.field("change_lo", pa.float64()),
        pa.field("change_hi", pa.float64()),
        pa.field("rel", pa.float64()),
        pa.field("rel_lo", pa.float64()),
        pa.field("rel_hi", pa.float64()),
        pa.field("p", pa.float64()),
        pa.field("q", pa.float64()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("until_window", pa.int64()),
        pa.field("until", pa.timestamp("us", "UTC")),
        pa.field("explained_by", pa.string()),
    ]
)


@dataclass
class OverTimeResult:
    """``changes`` (``CHANGES_SCHEMA``, most credible first), ``series`` (per
    function, metric and window: rate), ``windows`` (index, start, end,
    profiles)."""

    changes: pa.Table
    series: pa.Table
    windows: pa.Table
    rate_unit: str
    selection: str
    fdr: float
    permutations: int
    seed: int
    per: str | None = None
    notes: list[str] = field(default_factory=list)

    def findings(self) -> pa.Table:
        """Changes that are not explained by another and not a return."""
        import pyarrow.compute as pc

        return self.changes.filter(
            pc.field("explained_by").is_null() & (pc.field("status") != "return")
        )

    def __len__(self) -> int:
        return self.changes.num_rows

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __str__(self) -> str:
        """The text ``pyproflab regressions --over-time`` prints."""
        return render(self, "text")

    def __repr__(self) -> str:
        return (
            f"OverTimeResult({self.selection}, {self.windows.num_rows} windows, "
            f"{self.changes.num_rows} changes)"
        )


def _f(y: np.ndarray, d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, y * np.log(y / d), 0.0)


def _arcs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """All arcs [i, j) of n windows but the whole."""
    i, j = np.triu_indices(n + 1, 1)
    keep = ~((i == 0) & (j == n))
    return i[keep], j[keep]


def _best_arc(y: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max statistic, argmax arc) per row of ``y`` (rows: series; ``d`` the
    exposures, shared). The statistic is the Poisson likelihood ratio of the
    arc against the rest over the dispersion of that two-rate fit (Pearson
    X^2 / (n - 2), at least 1), so windows that differ by more than Poisson
    noise do not make changes."""
    n = y.shape[1]
    i, j = _arcs(n)
    cy = np.concatenate([np.zeros((y.shape[0], 1)), np.cumsum(y, axis=1)], axis=1)
    cd = np.concatenate([[0.0], np.cumsum(d)])
    yi, di = cy[:, j] - cy[:, i], cd[j] - cd[i]
    yt, dt = cy[:, -1:], cd[-1]
    lr = 2 * (_f(yi, di) + _f(yt - yi, dt - di) - _f(yt, dt))
    k = np.argmax(lr, axis=1)
    rows = np.arange(len(k))
    pos = np.arange(n)
    inside = (pos >= i[k][:, None]) & (pos < j[k][:, None])
    r_in = yi[rows, k] / di[k]
    r_out = (yt[:, 0] - yi[rows, k]) / (dt - di[k])
    mu = d * np.where(inside, r_in[:, None], r_out[:, None])
    phi = np.maximum(dispersion(y, mu, max(n - 2, 1), axis=1), 1.0)
    return lr[rows, k] / phi, k


def arc_test(y: np.ndarray, d: np.ndarray, permutations: int, rng) -> tuple[float, int, int]:
    """(p, i, j): the most different arc [i, j) of the series and its p-value,
    from ``permutations`` Poisson series of the series' constant rate (a
    parametric bootstrap of the maximum over arcs, as CBS's permutation
    reference but not inflated by the change itself)."""
    obs, k = _best_arc(y[None, :], d)
    i, j = _arcs(len(y))
    mu = d * (y.sum() / d.sum())
    null, _ = _best_arc(rng.poisson(mu, (permutations, len(y))).astype(float), d)
    p = (1 + np.sum(null >= obs[0] * (1 - 1e-9))) / (permutations + 1)
    return float(p), int(i[k[0]]), int(j[k[0]])


def segment(y, d, p_first: float, i: int, j: int, fdr: float, permutations: int, rng) -> list[int]:
    """Boundaries (window indices where a new segment starts) of the series."""
    cuts = {c for c in (i, j) if 0 < c < len(y)}
    todo = [(0, i), (i, j), (j, len(y))]
    while todo:
        a, b = todo.pop()
        if b - a < 3:
            continue
        p, ii, jj = arc_test(y[a:b], d[a:b], permutations, rng)
        if p <= fdr:
            new = {a + c for c in (ii, jj) if 0 < c < b - a}
            cuts |= new
            todo += [(a, a + ii), (a + ii, a + jj), (a + jj, b)]
    return sorted(cuts)


def _changes(y, d, cuts, unit_value, confidence) -> list[dict]:
    """Per boundary: rates, relative change with its interval, status."""
    edges = [0, *cuts, len(y)]
    spans = list(zip(edges, edges[1:], strict=False))
    segs = [(y[a:b].sum(), d[a:b].sum()) for a, b in spans]
    mu = np.concatenate([d[a:b] * (ys / ds) for (a, b), (ys, ds) in zip(spans, segs, strict=True)])
    df = max(len(y) - len(segs), 1)
    phi = max(float(dispersion(y, mu, df)), 1.0)
    q = sps.t.ppf(1 - (1 - confidence) / 2, df)
    out = []
    for k in range(len(cuts)):
        (yb, db), (ya, da) = segs[k], segs[k + 1]
        rel, lo, hi = log_ratio(ya, da, yb, db, phi, q)
        ch, se_c = rate_change(ya, da, yb, db, phi, unit_value)
        out.append(
            {
                "window": cuts[k],
                "rate_before": yb / db * unit_value,
                "rate_after": ya / da * unit_value,
                "change": ch,
                "change_lo": ch - q * se_c,
                "change_hi": ch + q * se_c,
                "_sure": abs(ch) - q * se_c,  # the lower end of its size: the ranking's
                "rel": float(rel),
                "rel_lo": float(lo),
                "rel_hi": float(hi),
                "status": "persisted",
                "until_window": None,
                "_seg": k,
            }
        )
    _went_away(out, segs, phi, q)
    return out


def _went_away(out: list[dict], segs, phi: float, q: float) -> None:
    """Mark a change ``went away`` when a later segment's rate is consistent with
    (its interval of the ratio holds 1) the rate before it; that later change
    is its ``return``."""
    for k, c in enumerate(out):
        if c["status"] == "return":
            continue
        yb, db = segs[k]
        for later in out[k + 1 :]:
            ya, da = segs[later["_seg"] + 1]
            _, lo, hi = log_ratio(ya, da, yb, db, phi, q)
            if lo <= 0 <= hi:
                c["status"], c["until_window"] = "went away", later["window"]
                later["status"] = "return"
                break


def _window_series(store, selection, sample_index, granularity, per, measure):
    """Profiles, their windows, per (window, node) flat and cum, and the
    measure: (per-profile denominators, factor, shown unit) (rule 1)."""
    reads = reads_of(store)
    sel = as_selection(selection)
    rows = reads.selected_profiles(sel)
    if not rows:
        raise UsageError(f"no profiles match the selection {sel.describe()}")
    sides = sides_of(rows, [], sample_index, "rate", new_description=sel.describe())
    if not sides.rate:
        raise UsageError(f"over time needs rates; {sides.sample_type.type} is not one")
    win = np.array(time_windows(sides.rows), np.int64)
    nw = int(win.max()) + 1
    if nw < 4:
        raise UsageError(f"over time needs at least 4 collection windows; the selection has {nw}")
    nv = node_values(reads, sides, granularity, True)
    if measure == "share":
        den = (nv.totals / sides.count_scale, 1.0 / sides.count_scale, "share")
    elif per:
        unit = f"{sides.rate_unit.removesuffix('/s')}/{per}"
        den = (per_work(reads, sides.rows, per), sides.factor, unit)
    else:
        den = (sides.durations, sides.factor, sides.rate_unit)
    return sel, sides, win, nw, nv, den


def _windows_table(sides, win: np.ndarray, nw: int) -> pa.Table:
    t0 = np.array([r["time_nanos"] for r in sides.rows], np.int64)
    t1 = t0 + sides.dur_ns.astype(np.int64)
    starts = [time_of_nanos(int(t0[win == w].min())) for w in range(nw)]
    ends = [time_of_nanos(int(t1[win == w].max())) for w in range(nw)]
    return pa.table(
        {
            "window": np.arange(nw),
            "start": pa.array(starts, pa.timestamp("us", "UTC")),
            "end": pa.array(ends, pa.timestamp("us", "UTC")),
            "profiles": np.bincount(win, minlength=nw),
        }
    )


def over_time(
    store, selection, options: OverTimeOptions | None = None, /, **keywords: Any
) -> OverTimeResult:
    """Change points per function in ``selection``'s series of windows (see the
    module rules). The options are ``options.OverTimeOptions`` (defaults and
    ranges there): an options object, or its fields as keywords, or both."""
    o = OverTimeOptions.build(options, **keywords)
    sample_index, granularity, per, seed = o.sample_index, o.granularity, o.per, o.seed
    fdr, confidence, min_share, permutations = o.fdr, o.confidence, o.min_share, o.permutations
    measure = resolve_measure(o.measure, per)
    args = (store, selection, sample_index, granularity, per, measure)
    sel, sides, win, nw, nv, (den, factor, unit) = _window_series(*args)
    d = np.bincount(win, weights=den, minlength=nw)
    unit_value = sides.count_scale * factor
    chosen, series = _first_tests(nv, win, d, sides, unit_value, min_share, permutations, seed)
    q = stats.bh_adjust(np.array([t[3] for t in chosen])) if chosen else np.array([])
    windows = _windows_table(sides, win, nw)
    found = []
    for t, qv in zip(chosen, q.tolist(), strict=True):
        node, metric, y, p, i, j = t
        if qv > fdr:
            continue
        rng = series_rng(seed, nv.inc.labels[node], metric, "splits")
        cuts = segment(y, d, p, i, j, fdr, permutations, rng)
        for c in _changes(y, d, cuts, unit_value, confidence):
            c.update(label=nv.inc.labels[node], metric=metric, p=p, q=qv, _node=node)
            found.append(c)
    changes = _rank(found, nv.inc.paths, windows.column("start").to_pylist())
    notes = [
        f"{nw} windows of {sel.describe()}; circular binary segmentation, Poisson "
        f"likelihood ratio, {permutations} permutations (seed {seed}); BH FDR {fdr:g} "
        f"over {len(chosen)} functions"
    ]
    if not (d > 0).all():
        empty = ", ".join(str(w) for w in np.flatnonzero(d <= 0))
        notes.append(f"window(s) {empty} have no samples: no share there, no change at them")
    return OverTimeResult(
        changes=changes,
        series=series,
        windows=windows,
        rate_unit=unit,
        selection=sel.describe(),
        fdr=fdr,
        permutations=permutations,
        seed=seed,
        per=per,
        notes=notes,
    )


def series_rng(seed: int, label: str, metric: str, part: str) -> np.random.Generator:
    """The random draws of one function's series: from the seed and its name,
    so that a function's p-values do not depend on which functions came before
    it (node numbers follow the order profiles were ingested in: with one
    generator shared in node order, the same store ingested in reverse order
    gave other q-values and other changes)."""
    key = hashlib.sha256(f"{label}\0{metric}\0{part}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(key[:8], "little")])


def _first_tests(nv, win, d, sides, unit_value, min_share, permutations, seed):
    """Per function above ``min_share`` of the total, the first arc test of its
    flat and of its cum series, keeping the one that changes more surely
    (smaller p; flat on a tie; rule 2): ``(node, metric, counts, p, i, j)``;
    and the long table of every tested series' rates per window. Functions
    are taken in name order, each with draws of its own (``series_rng``)."""
    nw, count_scale = len(d), sides.count_scale
    total = float(nv.totals.sum()) or 1.0
    tests, labels, metrics, rates = [], [], [], []
    for metric in ("flat", "cum"):
        y_all = nv.sums(metric, win, nw) / count_scale
        tested = np.flatnonzero(y_all.sum(axis=1) * count_scale / total >= min_share)
        for node in sorted(tested, key=lambda n: (nv.inc.labels[n], n)):
            y = y_all[node]
            rng = series_rng(seed, nv.inc.labels[node], metric, "first")
            p, i, j = arc_test(y, d, permutations, rng)
            tests.append((int(node), metric, y, p, i, j))
            labels += [nv.inc.labels[node]] * nw
            metrics += [metric] * nw
            with np.errstate(divide="ignore", invalid="ignore"):  # an empty window's share
                rates.append(y / d * unit_value)
    best: dict[int, tuple] = {}
    for t in tests:
        if t[0] not in best or t[3] < best[t[0]][3]:
            best[t[0]] = t
    series = pa.table(
        {
            "label": pa.array(labels, pa.string()),
            "metric": pa.array(metrics, pa.string()),
            "window": pa.array(np.tile(np.arange(nw), len(rates)), pa.int64()),
            "rate": pa.array(np.concatenate(rates) if rates else [], pa.float64()),
        }
    )
    return list(best.values()), series


def _rank(found: list[dict], paths, starts) -> pa.Table:
    """Most credible first; a change explained by an earlier one on the same
    stacks, window and direction is marked so (rule 4)."""
    found.sort(key=lambda c: (c["status"] == "return", -c["_sure"], c["label"], c["window"]))
    anc = attribution.ancestors(paths, {c["_node"] for c in found})
    heads: list[dict] = []
    for c in found:
        c["explained_by"] = None
        if c["status"] != "return":
            for h in heads:
                a, b = h["_node"], c["_node"]
                same = h["window"] == c["window"] and np.sign(h["change"]) == np.sign(c["change"])
                if same and (a in anc[b] or b in anc[a]):
                    c["explained_by"] = h["label"]
                    break
            else:
                heads.append(c)
        c["time"] = starts[c["window"]]
        c["until"] = None if c["until_window"] is None else starts[c["until_window"]]
    return pa.table(
        {f.name: [c[f.name] for c in found] for f in CHANGES_SCHEMA}, schema=CHANGES_SCHEMA
    )
