"""``regressions``: what got slower (or bigger) between two selections of profiles.

``regressions(store, base, new, ...)`` compares the profiles of two store
selections node by node (functions, or lines with ``granularity="lines"``),
as a pipeline of stages: ``selection`` (the sides), ``incidence`` (exact
per-profile values), ``units`` (the independent units and denominators),
``inference`` (tests and intervals), ``attribution`` (order, grouping, cost
shifts) and ``result``. The stages read profiles through ``reads`` (the
DuckDB store's queries, or another engine's: Spark over the Parquet
dataset). ``over_time`` finds change points in one selection's series of
collection windows.

Rules:

1. Sample types are those common to every profile of both sides (new side
   first, as ``go tool pprof -diff_base=BASE NEW`` combines them); the sample
   index is chosen as in ``top``. Nodes are named exactly as ``top`` names them
   (its node-building code is reused), after the new side's ``drop_frames``.
2. Per profile and node, flat and cum are computed in one pass over all
   selected profiles' samples (SQL join of (profile, stack) sums with the
   stack -> node incidence), so hundreds of profiles cost one query; the
   same for caller -> callee edges (the value of the stacks through each).
3. Merged values: ``flat_base``/``flat_new``/``cum_*`` are exact integers of
   each merged side, and ``flat_diff = flat_new - flat_base`` (and cum) are
   what ``go tool pprof -top -diff_base=BASE NEW`` prints for the merged
   sides; ``total_base`` is its total (the diff base's).
4. Measure: ``measure="auto"`` (the default) compares shares, or rates per
   unit of work when ``per`` is given. Shares (``measure="share"``): each
   profile's values over its total, as ``go tool pprof -normalize``, and as
   FBDetect's per-subroutine share of fleet CPU: a factor common to every
   function of a profile (load, a faster or busier machine, a longer window)
   cancels. The price: a change of every function alike is no row's change
   (a note gives the totals' change per second, with its interval), and one
   function's rise takes a little off the others' shares (+30% of a 10%
   function: -3%). On the recorded planted cases shares find the callee's
   +30% that rates per request miss (the sides' machine speed differed 6%).
   Rates (``measure="rate"``): when every profile has a duration and the type is a rate (not
   ``inuse_*``, goroutine or threadcreate), a side's rate is
   sum(values) / sum(durations): CPU time becomes cores, bytes become B/s.
   With ``per=COUNTER`` the denominator is the increase of that counter
   (from ``metric_samples``, e.g. requests) over each profile's window: cost
   per unit of work, so more load with the same code is no change.
   Otherwise the per-profile mean value is used and ``notes`` say so.
   Shares are of each merged side's total (sum of |value|, as pprof).
   CPU in cores (either measure): when a side's profiles hold clearly less
   CPU than its processes' ``process_cpu_seconds_total`` says over the same
   windows (``analyses.cpu_coverage``: a sampling rate above the kernel's
   tick), one note gives each such side's figures and the likely cause.
5. Statistics (both sides need >= 2 units; else the plain diff and a note):
   the independent units are profiles, or (``unit``) instances or time
   windows, each the sum of its profiles' values and denominators. The
   change is ``rate_new - rate_base`` and ``rate_new / rate_base - 1``.
   ``test="quasi-poisson"`` (the default) tests the sample counts (see
   ``inference``): the power of the pooled counts when units differ only by
   sampling noise, over-dispersion estimated from the units when they differ
   more, Wald intervals. On the recorded planted cases it holds the A/A rate
   (3 of 100 window splits, per second and per request) and finds what the
   permutation test finds with smaller q. ``test="permutation"``: Welch t,
   p from permutations of the units' sides, bootstrap intervals (no model of
   the counts; p can go no lower than one over the splits).
   ``test="welch"``: Student's t.
   Benjamini–Hochberg over every test in the table, flat and cum of each
   tested node as one family; ``*_significant`` is ``q <= fdr``. The
   ``*_rel_lo/hi`` intervals are each row's own (unadjusted, at
   ``confidence``); the selected rows also get Benjamini–Yekutieli FCR
   intervals, ``*_rel_fcr_lo/hi`` at ``fcr_confidence`` = 1 - R fdr / m,
   which leave out 0 exactly when a row is selected (quasi-Poisson; see
   ``inference``).
   Nodes whose pooled share (both sides) is below ``min_share`` are reported
   but not tested (independent filtering). ``*_detectable`` is the smallest
   relative increase found with 80% power at level FDR / tests.
6. Order (``rank_by="evidence"``, the default): significant increases first,
   by the conservative end of the change's interval (its lower end, the
   larger of flat and cum, in rate units), then unchanged rows, then
   decreases (by minus the upper end). ``rank_by`` flat or cum: by |change|
   of that metric, then label.
7. Grouping: a significant row whose interval holds the change of an earlier
   finding of the same direction on the same stacks (ancestor or descendant)
   is ``explained_by`` it: the deepest credible change is reported once.
   ``edges`` gives the caller -> callee edges into every node with a
   significant flat change and into every callee of a node whose cum changed
   significantly but not its flat (its change lies in its callees), with the
   same statistics (one BH family of their own), so a shared callee's change
   is attributed to the call path that carries it.
8. Cost shift: an increase and a decrease with a common ancestor whose cum
   did not change, summing to zero within their intervals, are marked
   ``shift_with`` each other (one refactor, not a regression).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab.analyses import stats
from pyproflab.analyses.options import RANK_BY, UNITS, RegressionsOptions
from pyproflab.analyses.regressions import attribution, inference
from pyproflab.analyses.regressions.incidence import NodeValues, node_values
from pyproflab.analyses.regressions.measure import (
    MEASURES,
    coverage_note,
    denominators_of,
    resolve_measure,
)
from pyproflab.analyses.regressions.reads import reads_of
from pyproflab.analyses.regressions.result import (
    EDGES_SCHEMA,
    FCR_COLUMNS,
    METRIC_COLUMNS,
    ROWS_SCHEMA,
    RegressionsResult,
    detail_tables,
)
from pyproflab.analyses.regressions.selection import (
    NON_RATE_TYPES,
    Sides,
    rate_unit_of,
    select_sides,
    without_empty,
)
from pyproflab.analyses.regressions.units import Units, group_units, time_windows
from pyproflab.errors import UsageError
from pyproflab.model import Profile

__all__ = [
    "EDGES_SCHEMA",
    "MEASURES",
    "NON_RATE_TYPES",
    "ROWS_SCHEMA",
    "RANK_BY",
    "UNITS",
    "RegressionsResult",
    "rate_unit_of",
    "regressions",
    "regressions_of_profiles",
    "time_windows",
]


def _merged(nv: NodeValues, sides: Sides) -> dict[str, np.ndarray]:
    """Per node, the exact merged flat and cum of each side (rule 3)."""
    out = {}
    for name in ("flat", "cum"):
        s = np.rint(nv.sums(name, sides.is_new.astype(np.int64), 2)).astype(np.int64)
        out[f"{name}_base"], out[f"{name}_new"] = s[:, 0], s[:, 1]
    return out


def _matrices(nv: NodeValues, n_profiles: int, present: np.ndarray) -> dict:
    """Dense (profiles, present nodes) flat and cum, and (profiles, edges) values."""
    per = np.arange(n_profiles)
    mats = {name: nv.sums(name, per, n_profiles)[present].T for name in ("flat", "cum")}
    mats["edge"] = nv.sums("edge_cum", per, n_profiles).T
    return mats


def _side_rates(m: np.ndarray, units: Units, unit_value: float) -> dict[str, np.ndarray]:
    """Each side's rate (its units' values over their denominators), the change
    and the relative change (NaN where the base rate is 0)."""
    d, new = units.denominators, units.is_new
    rb = m[~new].sum(axis=0) / d[~new].sum() * unit_value
    rn = m[new].sum(axis=0) / d[new].sum() * unit_value
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(rb != 0, rn / rb - 1.0, np.nan)
    return {"rate_base": rb, "rate_new": rn, "change": rn - rb, "rel": rel}


def _metric_columns(name, mats, units: Units, merged, present, totals, opts) -> dict:
    """Rates, shares, medians, change, intervals and p of one metric."""
    m = units.sum(mats[name]) / opts["count_scale"]
    d, new = units.denominators, units.is_new
    unit_value = opts["count_scale"] * opts["factor"]
    pooled = np.abs(merged[f"{name}_base"][present]) + np.abs(merged[f"{name}_new"][present])
    tested = (pooled / (float(totals[0] + totals[1]) or 1.0) >= opts["min_share"]) & opts["stat"]
    c: dict[str, Any] = _side_rates(m, units, unit_value)
    with np.errstate(divide="ignore", invalid="ignore"):
        c["p50_base"] = np.median(m[~new] / d[~new][:, None], axis=0) * unit_value
        c["p50_new"] = np.median(m[new] / d[new][:, None], axis=0) * unit_value
    c["share_base"] = merged[f"{name}_base"][present] / (totals[0] or 1)
    c["share_new"] = merged[f"{name}_new"][present] / (totals[1] or 1)
    nan = np.full(len(present), np.nan)
    c.update(change_lo=nan, change_hi=nan, rel_lo=nan, rel_hi=nan, p=nan, detectable=nan)
    c["tested"], c["fit"], c["splits"], c["exact"] = tested, None, 0, False
    c["counts"] = m
    if opts["stat"]:
        r = inference.compare(m, d, new, tested, unit_value=unit_value, **opts["test_opts"])
        c.update({k: r[k] for k in ("change_lo", "change_hi", "rel_lo", "rel_hi", "p")})
        c["fit"], c["splits"], c["exact"] = r["fit"], r["splits"], r["exact"]
    return c


def _statistics(mats, units: Units, merged, present, totals, opts) -> tuple[dict, dict]:
    """Per-metric columns with q-values over one BH family, plus facts."""
    per = {
        n: _metric_columns(n, mats, units, merged, present, totals, opts) for n in ("flat", "cum")
    }
    q = stats.bh_adjust(np.concatenate([per["flat"]["p"], per["cum"]["p"]]))
    n_tests = int(per["flat"]["tested"].sum() + per["cum"]["tested"].sum())
    cols: dict[str, Any] = {}
    for name, qm in zip(("flat", "cum"), np.split(q, 2), strict=True):
        c = per[name]
        c["q"] = qm
        c["significant"] = c["tested"] & (np.nan_to_num(qm, nan=1.0) <= opts["fdr"])
        if c["fit"] is not None and n_tests:
            c["detectable"] = inference.detectable(c["fit"], opts["fdr"] / n_tests)
    selected = int(per["flat"]["significant"].sum() + per["cum"]["significant"].sum())
    fcr = 1 - selected * opts["fdr"] / n_tests if selected else None
    for name, c in per.items():
        c["rel_fcr_lo"], c["rel_fcr_hi"] = inference.fcr_intervals(
            c["counts"], units.denominators, units.is_new, c["significant"], fcr or 0.0,
            **{k: opts["test_opts"][k] for k in ("test", "resamples", "seed")},
            unit_value=opts["count_scale"] * opts["factor"],
        )  # fmt: skip
        for k in (*METRIC_COLUMNS, *FCR_COLUMNS, "tested", "significant"):
            cols[f"{name}_{k}"] = c[k]
    facts = {"splits": per["flat"]["splits"], "exact": per["flat"]["exact"], "n_tests": n_tests}
    return cols, facts | {"fcr_confidence": fcr}


def _edges(nv: NodeValues, mats, units: Units, cols, present, opts) -> pa.Table:
    """Statistics of the caller -> callee edges into the nodes that carry a
    significant change (rule 7)."""
    targets = {int(present[i]) for i in np.flatnonzero(cols["flat_significant"])}
    # A node whose cum changed but not its flat has the change in its callees:
    # they are targets too, so a shared callee's change is split by its callers.
    in_callees = cols["cum_significant"] & ~cols["flat_significant"]
    callers = {int(present[i]) for i in np.flatnonzero(in_callees)}
    targets |= {b for a, b in nv.inc.edges if a in callers and a != b}
    pick = [k for k, (_, b) in enumerate(nv.inc.edges) if b in targets]
    if not pick or not opts["stat"]:
        return EDGES_SCHEMA.empty_table()
    e = units.sum(mats["edge"][:, pick]) / opts["count_scale"]
    unit_value = opts["count_scale"] * opts["factor"]
    tested = np.ones(len(pick), bool)
    r = inference.compare(
        e, units.denominators, units.is_new, tested, unit_value=unit_value, **opts["test_opts"]
    )
    q = stats.bh_adjust(r["p"])
    lab, new, nan = nv.inc.labels, units.is_new, np.full(len(pick), np.nan)
    t = {
        **_side_rates(e, units, unit_value),
        **{k: r[k] for k in ("change_lo", "change_hi", "rel_lo", "rel_hi", "p")},
        "caller": [lab[nv.inc.edges[k][0]] for k in pick],
        "callee": [lab[nv.inc.edges[k][1]] for k in pick],
        "base": np.rint(e[~new].sum(axis=0) * opts["count_scale"]).astype(np.int64),
        "new": np.rint(e[new].sum(axis=0) * opts["count_scale"]).astype(np.int64),
        **{k: nan for k in ("share_base", "share_new", "p50_base", "p50_new")},
        "q": q,
        "detectable": inference.detectable(r["fit"], opts["fdr"] / len(pick)),
        "significant": np.nan_to_num(q, nan=1.0) <= opts["fdr"],
    }
    tab = pa.table({f.name: t[f.name] for f in EDGES_SCHEMA}, schema=EDGES_SCHEMA)
    return tab.sort_by([("change_lo", "descending")])


def _rows(nv: NodeValues, present, merged, cols, rank_by: str) -> pa.Table:
    """The ranked rows table (rules 6-8)."""
    inc = nv.inc
    labels = [inc.labels[i] for i in present.tolist()]
    cols["direction"] = attribution.directions(cols)
    cols["evidence"], cols["evidence_metric"] = attribution.evidence(cols, cols["direction"])
    by_ev = attribution.order(labels, cols, "evidence")
    cols["explained_by"] = attribution.explained(by_ev, present, inc.paths, cols, labels)
    cols["shift_with"] = attribution.shifts(by_ev, present, inc.paths, cols, labels)
    if rank_by == "evidence":
        order = attribution.grouped_order(by_ev, cols, labels)
    else:
        order = attribution.order(labels, cols, rank_by)
    table: dict[str, Any] = {
        "rank": np.arange(1, len(order) + 1),
        "name": [inc.names[present[i]] for i in order],
        "file": [inc.files[present[i]] for i in order],
        "line": [inc.lines[present[i]] for i in order],
        "label": [labels[i] for i in order],
    }
    for name in ("flat", "cum"):
        b, nw = merged[f"{name}_base"][present], merged[f"{name}_new"][present]
        table[f"{name}_base"], table[f"{name}_new"] = b[order], nw[order]
        table[f"{name}_diff"] = (nw - b)[order]
    for fld in ROWS_SCHEMA:
        if fld.name not in table:
            v = cols[fld.name]
            table[fld.name] = [v[i] for i in order] if isinstance(v, list) else v[order]
    return pa.table({f.name: table[f.name] for f in ROWS_SCHEMA}, schema=ROWS_SCHEMA)


def _notes(notes, opts, facts, units: Units, unit: str, rows: pa.Table) -> None:
    """What the statistics were, and when they cannot find anything."""
    ub, un = units.n_base, units.n_new
    if not opts["stat"]:
        notes.append(
            f"no statistics are possible with one {unit} on a side (base: {ub}, "
            f"new: {un}); showing the plain diff of the merged sides"
        )
        return
    t = opts["test_opts"]
    seed, splits, exact = t["seed"], facts["splits"], facts["exact"]
    if t["test"] == "quasi-poisson":
        how = "quasi-Poisson score test on the sample counts; Wald intervals"
    elif t["test"] == "welch":
        how = "Welch t on the ratio estimator, from Student's t"
    else:
        how = (
            f"permutation test of Welch t over the {unit}s' sides ("
            + (f"all {splits} splits" if exact else f"{splits} random splits, seed {seed}")
            + ")"
        )
    if t["test"] != "quasi-poisson":
        how += (
            f"; {t['confidence']:.0%} percentile bootstrap intervals over {unit}s "
            f"({t['resamples']} resamples, seed {seed})"
        )
    tested = f">= {opts['min_share']:.2%} of the pooled total"
    if not facts["n_tests"]:
        notes.append(
            f"units: {ub} base and {un} new {unit}s; no node has {tested}, so nothing "
            "was tested (lower --min-share / min_share=)"
        )
        return
    notes.append(
        f"units: {ub} base and {un} new {unit}s; p: {how}; BH FDR {opts['fdr']:g} "
        f"over flat and cum of the nodes with {tested}; detectable: smallest increase "
        f"found with 80% power at level FDR/{facts['n_tests']}"
    )
    if t["test"] == "permutation" and splits:
        # Mirrored splits of equal sides have the same |t|.
        p_min = (2 if exact and ub == un else 1) / (splits if exact else splits + 1)
        if p_min * facts["n_tests"] > opts["fdr"]:
            notes.append(
                f"with {ub} and {un} {unit}s no permutation p-value is below "
                f"{p_min:.2g}, so at FDR {opts['fdr']:g} over {facts['n_tests']} tests a node "
                f"is significant only alongside others; compare more {unit}s"
                + ("" if exact else " or raise permutations")
                + ", or use the default quasi-Poisson test"
            )
    shifts = [r for r in rows.to_pylist() if r["shift_with"] and r["direction"] == "increase"]
    for r in shifts:
        notes.append(f"cost shift: {r['shift_with']} -> {r['label']} (their total is unchanged)")


def regressions(
    store, base, new, options: RegressionsOptions | None = None, /, **keywords: Any
) -> RegressionsResult:
    """Compare the profiles selected by ``base`` and ``new`` (``Selection``s) per node.

    See the module docstring for the rules. ``store``: a DuckDB ``Store``, or
    another engine's ``reads.ProfileReads`` (``SparkDataset.regressions``).
    ``sample_index``: number or name (default: the profiles' default type).
    ``granularity``: functions, lines or files. ``rank_by``: evidence
    (default), flat or cum. ``unit``: the independent unit of the
    statistics, ``profile`` (default), ``instance`` (a service instance's
    profiles summed: use it when profiles of one instance are correlated) or
    ``window`` (the profiles of a side taken together, summed; see
    ``time_windows``). ``test``: ``quasi-poisson``
    (default), ``permutation`` (at most ``permutations`` splits) or ``welch``.
    ``measure``: auto, share or rate (rule 4); ``per``: a counter in
    ``metric_samples``, its increase over each profile the denominator.
    The options are ``options.RegressionsOptions`` (defaults and ranges there):
    an options object, or its fields as keywords, or both (keywords win).
    """
    opts = RegressionsOptions.build(options, **keywords)
    sample_index, granularity, inlines = opts.sample_index, opts.granularity, opts.inlines
    measure = resolve_measure(opts.measure, opts.per)
    settings = opts.keywords() | {"measure": measure}
    permutations = settings.pop("permutations")
    del settings["sample_index"]
    reads = reads_of(store)
    sides = select_sides(reads, base, new, sample_index, measure)
    nv = node_values(reads, sides, granularity, inlines)
    if measure == "share" and not (nv.totals > 0).all():
        sides = without_empty(sides, nv.totals > 0, sample_index, measure)
        nv = node_values(reads, sides, granularity, inlines)
    return _compare(reads, sides, nv, settings, permutations)


def _compare(reads, sides: Sides, nv: NodeValues, settings: dict, permutations: int):
    """The stages after the node values (rules 3-8), and the result."""
    denominators, factor, shown_unit = denominators_of(
        reads, sides, nv, settings["measure"], settings["per"]
    )
    coverage_note(reads, sides, nv)
    merged = _merged(nv, sides)
    present = np.flatnonzero(np.any([merged[k] != 0 for k in merged], axis=0))
    totals = (int(nv.totals[~sides.is_new].sum()), int(nv.totals[sides.is_new].sum()))
    units = group_units(sides.rows, sides.is_new, denominators, settings["unit"])
    mats = _matrices(nv, len(sides.pids), present)
    stat = units.n_base >= 2 and units.n_new >= 2
    opts = {
        "count_scale": sides.count_scale,
        "factor": factor,
        "min_share": settings["min_share"],
        "stat": stat,
        "fdr": settings["fdr"],
        "test_opts": {k: settings[k] for k in ("test", "confidence", "resamples", "seed")}
        | {"permutations": permutations},
    }
    cols, facts = _statistics(mats, units, merged, present, totals, opts)
    rows = _rows(nv, present, merged, cols, settings["rank_by"])
    edges = _edges(nv, mats, units, cols, present, opts)
    per_profile, profiles, stacks = detail_tables(sides, nv, denominators, factor)
    _notes(sides.notes, opts, facts, units, settings["unit"], rows)
    return RegressionsResult(
        **settings,
        rows=rows,
        per_profile=per_profile,
        profiles=profiles,
        stacks=stacks,
        labels=nv.inc.labels,
        sample_type=sides.sample_type,
        sample_index=sides.sample_index,
        rate=sides.rate,
        rate_unit=shown_unit,
        rate_factor=factor,
        n_base=sides.n_base,
        n_new=sides.n_new,
        duration_base=float(sides.dur_ns[~sides.is_new].sum() / 1e9),
        duration_new=float(sides.dur_ns[sides.is_new].sum() / 1e9),
        total_base=totals[0],
        total_new=totals[1],
        statistics=stat,
        permutations=facts["splits"],
        fcr_confidence=facts["fcr_confidence"],
        n_units_base=units.n_base,
        n_units_new=units.n_new,
        base_description=sides.base_description,
        new_description=sides.new_description,
        edges=edges,
        notes=sides.notes,
    )


def regressions_of_profiles(
    base: list[Profile],
    new: list[Profile],
    *,
    base_instances: list[str] | None = None,
    new_instances: list[str] | None = None,
    **options: Any,
) -> RegressionsResult:
    """``regressions`` of two lists of in-memory profiles (via a throw-away store);
    ``*_instances`` name each profile's instance (for ``unit="instance"``)."""
    from pyproflab.sources.base import Item, ItemMeta, Prefetched, ProfileItem
    from pyproflab.store import Store
    from pyproflab.store.select import Selection
    from pyproflab.store.sourced import ingest_source

    if not base or not new:
        raise UsageError("both sides need at least one profile")
    with Store.open(":memory:") as store:
        bi: Sequence[str | None] = base_instances or [None] * len(base)
        ni: Sequence[str | None] = new_instances or [None] * len(new)
        sides = [("base", p, i) for p, i in zip(base, bi, strict=True)]
        sides += [("new", p, i) for p, i in zip(new, ni, strict=True)]
        # Distinct identities: equal profiles on a side are still separate observations.
        items: list[Item] = [
            ProfileItem(ItemMeta(version=v, instance=i), profile=p, content_hash=f"regressions-{n}")
            for n, (v, p, i) in enumerate(sides)
        ]
        ingest_source(store, Prefetched("profiles", items), batch_size=len(items))
        return regressions(store, Selection(version="base"), Selection(version="new"), **options)
