"""``regressions``: what got slower (or bigger) between two selections of profiles.

``regressions(store, base, new, ...)`` compares the profiles of two store
selections node by node (functions, or lines with ``granularity="lines"``).

Rules:

1. Sample types are those common to every profile of both sides (new side
   first, as ``go tool pprof -diff_base=BASE NEW`` combines them); the sample
   index is chosen as in ``top``. Nodes are named exactly as ``top`` names them
   (its node-building code is reused), after the new side's ``drop_frames``.
2. Per profile and node, flat and cum are computed in one pass over all
   selected profiles' samples (SQL join of (profile, stack) sums with the
   stack -> node incidence), so hundreds of profiles cost one query.
3. Merged values: ``flat_base``/``flat_new``/``cum_*`` are exact integers of
   each merged side, and ``flat_diff = flat_new - flat_base`` (and cum) are
   what ``go tool pprof -top -diff_base=BASE NEW`` prints for the merged
   sides; ``total_base`` is its total (the diff base's).
4. Rates: when every profile has a duration and the type is a rate (not
   ``inuse_*``, goroutine or threadcreate), a side's rate is
   sum(values) / sum(durations): CPU time becomes cores, bytes become B/s.
   Otherwise the per-profile mean value is used and ``notes`` say so.
   Shares are of each merged side's total (sum of |value|, as pprof).
5. Statistics (both sides need >= 2 units; else the plain diff and a note):
   the independent units are profiles, or (``unit``) instances or time
   windows, each the sum of its profiles' values and durations. The change
   is ``rate_new - rate_base`` and ``rate_new / rate_base - 1``; intervals
   are percentile bootstrap intervals (``resamples`` resamples of units with
   replacement within each side, seeded ``seed``). The test statistic is
   Welch's t on the ratio estimator's linearised (sandwich) variance, which
   weights units by duration and allows unequal counts and durations. Its
   p-value comes, by default (``test="permutation"``), from a permutation
   test over the units' side labels (exact with at most ``permutations``
   splits): valid whatever the shape of the per-unit values, such as the two
   modes one GC cycle more or less makes in a window, where Student's t is
   far too sure with few units. ``test="welch"`` takes it from Student's t
   (more power with few units, if the per-unit values are near normal).
   Benjamini–Hochberg over every test in the table, flat and cum of each
   tested node as one family (the table flags both, so its false-discovery
   promise covers both; two families would double the false alarms of an
   A/A comparison); ``*_significant`` is ``q <= fdr``. Nodes whose pooled
   share (both sides) is below ``min_share`` are reported but not tested
   (independent filtering), so thousands of rare frames do not dilute the
   correction.
6. Rows are ranked by |change| of ``rank_by`` (flat or cum), then label.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from pyproflab.analyses import filters, stats
from pyproflab.analyses.graph import (
    GRANULARITIES,
    build_nodes,
    expand_frames,
    resolve_sample_index,
)
from pyproflab.analyses.units import scale
from pyproflab.display import render
from pyproflab.errors import UsageError
from pyproflab.model import Profile, ValueType

Side = Literal["base", "new"]
#: Independent units of the statistics (see ``regressions``).
UNITS = ("profile", "instance", "window")
NON_RATE_TYPES = ("goroutine", "threadcreate")

ROWS_SCHEMA = pa.schema(
    [
        pa.field("rank", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("label", pa.string(), nullable=False),
        *[
            pa.field(f"{m}_{s}", pa.int64(), nullable=False)
            for m in ("flat", "cum")
            for s in ("base", "new", "diff")
        ],
        *[
            pa.field(f"{m}_{c}", pa.float64())
            for m in ("flat", "cum")
            for c in (
                "rate_base",
                "rate_new",
                "share_base",
                "share_new",
                "p50_base",
                "p50_new",
                "change",
                "change_lo",
                "change_hi",
                "rel",
                "rel_lo",
                "rel_hi",
                "p",
                "q",
            )
        ],
        pa.field("flat_tested", pa.bool_(), nullable=False),
        pa.field("flat_significant", pa.bool_(), nullable=False),
        pa.field("cum_tested", pa.bool_(), nullable=False),
        pa.field("cum_significant", pa.bool_(), nullable=False),
    ]
)


@dataclass
class RegressionsResult:
    """Per-node comparison of two sides (see the module rules).

    ``rows`` (``ROWS_SCHEMA``): ranked nodes; ``per_profile``: the long
    per-profile values (profile_id, side, node, label, flat, cum, rate columns);
    ``profiles``: each profile's side, duration and total; ``stacks``: per
    distinct stack its node path (root first) and merged value per side, for
    the flame graph.
    """

    rows: pa.Table
    per_profile: pa.Table
    profiles: pa.Table
    stacks: pa.Table
    labels: list[str]
    sample_type: ValueType
    sample_index: int
    granularity: str
    rate: bool
    rate_unit: str
    rate_factor: float
    n_base: int
    n_new: int
    duration_base: float
    duration_new: float
    total_base: int
    total_new: int
    statistics: bool
    fdr: float
    confidence: float
    resamples: int
    seed: int
    min_share: float
    rank_by: str
    unit: str = "profile"
    inlines: bool = True
    measure: str = "rate"
    test: str = "permutation"
    permutations: int = 0
    n_units_base: int = 0
    n_units_new: int = 0
    base_description: str = ""
    new_description: str = ""
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return self.rows.num_rows

    def to_arrow(self) -> pa.Table:
        return self.rows

    def to_pandas(self):
        return self.rows.to_pandas()

    def significant(self, metric: str = "flat") -> pa.Table:
        """The rows whose ``metric`` change is significant at ``fdr``."""
        import pyarrow.compute as pc

        return self.rows.filter(pc.field(f"{metric}_significant"))

    def distribution(self, label: str) -> pa.Table:
        """Per-profile values of the node printed as ``label`` (both sides)."""
        import pyarrow.compute as pc

        return self.per_profile.filter(pc.field("label") == label)

    def figure_top(self, n: int = 20, metric: str | None = None):
        """Plotly figure: the top ``n`` changes with their intervals."""
        return render(self, "figure_top", n=n, metric=metric or self.rank_by)

    def figure_flame(self, **options: Any):
        """Plotly differential flame graph (width: new side; colour: change)."""
        return render(self, "figure_flame", **options)

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __repr__(self) -> str:
        return (
            f"RegressionsResult({self.sample_type}, {self.granularity}, "
            f"base={self.n_base} profiles, new={self.n_new} profiles, "
            f"{self.rows.num_rows} rows)"
        )


# --- helpers --------------------------------------------------------------------------


def rate_unit_of(sample_type: ValueType, rate: bool) -> tuple[str, float]:
    """(display unit, factor from the sample unit) for rates or per-profile values."""
    unit = sample_type.unit
    seconds, got = scale(1, unit, "s")
    if got == "s":  # a time unit
        if not rate:
            return "s", seconds
        return ("cores" if sample_type.type in ("cpu", "wall") else "s/s"), seconds
    nbytes, got = scale(1, unit, "B")
    if got == "B":
        return ("B/s" if rate else "B"), nbytes
    base = "" if unit in ("count", "") else unit
    return ((f"{base}/s" if base else "/s") if rate else (base or "count")), 1.0


def time_windows(rows: list[dict[str, Any]]) -> list[int]:
    """Window number per profile row (``time_nanos``, ``duration_nanos``).

    Rule: in order of start time, a profile joins the current window when it
    starts before half of that window's first profile has elapsed, else it
    opens the next window. Profiles taken together (a collector's round over
    the fleet) share a window; consecutive rounds do not.
    """
    missing = [r["profile_id"] for r in rows if not r["time_nanos"]]
    if missing:
        raise UsageError(f"unit=window needs each profile's time; profile {missing[0]} has none")
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["time_nanos"], i))
    out = [0] * len(rows)
    window, start, reach = -1, 0, -1
    for i in order:
        t = rows[i]["time_nanos"]
        if window < 0 or t >= start + reach:
            window, start = window + 1, t
            reach = max((rows[i]["duration_nanos"] or 0) // 2, 1)
        out[i] = window
    return out


def _selected_rows(store, selection) -> list[dict[str, Any]]:
    from pyproflab.store.merge import HEADER_COLUMNS

    where, params = selection.where()
    return store.sql(
        f"SELECT {HEADER_COLUMNS}, p.service, p.instance FROM profiles p "
        f"WHERE {where} "
        "ORDER BY p.profile_id",
        params,
    ).to_pylist()


@dataclass
class _Incidence:
    labels: list[str]
    names: list[str]
    files: list[str | None]
    lines: list[int | None]
    stack_ids: np.ndarray  # distinct store stack ids, in profile order
    pair_stack: np.ndarray  # (stack, node) pairs: index into stack_ids
    pair_node: np.ndarray
    pair_leaf: np.ndarray
    paths: list[list[int]]  # per stack: nodes root first


def _noinlines(profile: Profile) -> Profile:
    """Each location keeps only its last (outermost) line, as pprof's -noinlines."""
    import pyarrow.compute as pc

    from pyproflab import schema

    col = profile.locations.column("lines").combine_chunks()
    n = pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False)
    keep = np.minimum(n, 1)
    starts = pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False).cumsum() - 1
    flat = col.flatten()
    take = starts[n > 0]
    offsets = np.zeros(len(n) + 1, np.int32)
    np.cumsum(keep, out=offsets[1:])
    lines = pa.ListArray.from_arrays(pa.array(offsets), flat.take(pa.array(take)))
    idx = profile.locations.schema.get_field_index("lines")
    locs = profile.locations.set_column(
        idx,
        schema.PROFILE_LOCATIONS.field("lines"),
        lines.cast(schema.PROFILE_LOCATIONS.field("lines").type),
    )
    return dataclasses.replace(profile, locations=locs)


def _incidence(
    store,
    stack_ids: np.ndarray,
    header: dict,
    main_mapping: int,
    granularity: str,
    inlines: bool = True,
) -> _Incidence:
    """Node paths of the distinct stacks, via ``analyses.graph``."""
    from pyproflab.store.merge import assemble

    n = len(stack_ids)
    values = pa.ListArray.from_arrays(
        pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(np.ones(n, np.int64))
    )
    prof = assemble(store, stack_ids, np.zeros(n, np.uint64), values, header, main_mapping)
    work = filters.remove_uninteresting(prof)
    if not inlines:
        work = _noinlines(work)
    nodes = build_nodes(work, granularity)
    fr = expand_frames(work, nodes, np.ones(n, np.int64), np.ones(n, bool))
    nn = max(nodes.count, 1)
    first = np.ones(len(fr.sample), bool)
    first[1:] = fr.sample[1:] != fr.sample[:-1]
    leaf = np.full(n, -1, np.int64)
    leaf[fr.sample[first]] = fr.node[first]
    pair = np.unique(fr.sample.astype(np.int64) * nn + fr.node)
    ps, pn = pair // nn, pair % nn
    # Paths for the flame graph: frames are leaf first within each stack.
    paths: list[list[int]] = [[] for _ in range(n)]
    for s, nd in zip(fr.sample.tolist(), fr.node.tolist(), strict=True):
        paths[s].append(nd)
    for p in paths:
        p.reverse()
    labels = [nodes.label(i) for i in range(nodes.count)]
    return _Incidence(
        labels=labels,
        names=[nodes.name[i] or labels[i] for i in range(nodes.count)],
        files=[
            (nodes.file[i] or None) if granularity in ("lines", "files") else None
            for i in range(nodes.count)
        ],
        lines=[
            (nodes.lineno[i] or None) if granularity == "lines" else None
            for i in range(nodes.count)
        ],
        stack_ids=stack_ids,
        pair_stack=ps,
        pair_node=pn,
        pair_leaf=leaf[ps] == pn,
        paths=paths,
    )


def _percentiles(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval per column, ignoring NaN (e.g. a zero base rate)."""
    a = (1.0 - level) / 2.0 * 100.0
    with np.errstate(invalid="ignore"), _quiet():
        lo = np.nanpercentile(x, a, axis=0)
        hi = np.nanpercentile(x, 100.0 - a, axis=0)
    return lo, hi


class _quiet:
    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


# --- the analysis ------------------------------------------------------------------


def regressions(
    store,
    base,
    new,
    *,
    sample_index: int | str | None = None,
    granularity: str = "functions",
    fdr: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    min_share: float = 0.005,
    rank_by: str = "flat",
    unit: str = "profile",
    inlines: bool = True,
    measure: str = "rate",
    test: str = "permutation",
    permutations: int = 10_000,
) -> RegressionsResult:
    """Compare the profiles selected by ``base`` and ``new`` (``Selection``s) per node.

    See the module docstring for the rules. ``sample_index``: number or name
    (default: the profiles' default type). ``granularity``: functions, lines
    or files. ``rank_by``: flat or cum. ``unit``: the independent unit of the
    statistics, ``profile`` (default), ``instance`` (a service instance's
    profiles summed, values and durations: use it when profiles of one
    instance are correlated) or ``window`` (the profiles of a side taken
    together, summed: a collector's round over the fleet shares its load and
    GC cycles; see ``time_windows``). ``test``: ``permutation`` (default) or
    ``welch``, the source of the p-values; ``permutations``: at most this many
    splits of the units (all of them when there are fewer).
    """
    from pyproflab.store.merge import merge_headers
    from pyproflab.store.select import Selection

    if granularity not in GRANULARITIES:
        raise UsageError(
            f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}"
        )
    if rank_by not in ("flat", "cum"):
        raise UsageError(f"rank_by must be flat or cum, not {rank_by!r}")
    if not 0 < fdr < 1 or not 0 < confidence < 1:
        raise UsageError("fdr and confidence must be between 0 and 1")
    if unit not in UNITS:
        raise UsageError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
    if measure not in ("rate", "share"):
        raise UsageError(f"measure must be rate or share, not {measure!r}")
    if resamples < 100:
        raise UsageError("resamples must be at least 100")
    if test not in ("permutation", "welch"):
        raise UsageError(f"test must be permutation or welch, not {test!r}")
    if permutations < 100:
        raise UsageError("permutations must be at least 100")
    base = base if isinstance(base, Selection) else Selection(**(base or {}))
    new = new if isinstance(new, Selection) else Selection(**(new or {}))
    rows_b, rows_n = _selected_rows(store, base), _selected_rows(store, new)
    for side, rows, sel in (("base", rows_b, base), ("new", rows_n, new)):
        if not rows:
            raise UsageError(f"no profiles match the {side} selection {sel.describe()}")
    both = {r["profile_id"] for r in rows_b} & {r["profile_id"] for r in rows_n}
    if both:
        raise UsageError(
            f"{len(both)} profiles are in both the base and the new selection "
            f"(e.g. profile {min(both)}); make the selections disjoint"
        )

    all_rows = rows_n + rows_b  # new first: pprof's -diff_base puts the source first
    header, index_lists = merge_headers(all_rows)
    types = header["sample_types"]
    index = resolve_sample_index(
        Profile.empty(types)
        if not header["default_sample_type"]
        else dataclasses.replace(
            Profile.empty(types), default_sample_type=header["default_sample_type"]
        ),
        sample_index,
    )
    st = types[index]

    n_new, n_base = len(rows_n), len(rows_b)
    pids = np.array([r["profile_id"] for r in all_rows], np.int64)
    is_new = np.arange(len(all_rows)) < n_new
    dur_ns = np.array([r["duration_nanos"] or 0 for r in all_rows], np.float64)
    notes: list[str] = []
    rate = (
        bool((dur_ns > 0).all())
        and not st.type.startswith("inuse_")
        and st.type not in NON_RATE_TYPES
    )
    shown_unit, factor = rate_unit_of(st, rate)
    if not rate and measure == "rate":
        why = (
            "it is not a rate"
            if (dur_ns > 0).all() or st.type.startswith("inuse_") or st.type in NON_RATE_TYPES
            else "some profiles have no duration"
        )
        notes.append(
            f"{st.type} is compared as the per-profile value ({shown_unit}), not a rate "
            f"per second: {why}"
        )
    durations = dur_ns / 1e9 if rate else np.ones(len(all_rows))

    # One pass over the samples: (profile, stack) sums of the chosen value.
    sel = pa.table(
        {
            "profile_id": pa.array(pids),
            "i": pa.array([idx[index] + 1 for idx in index_lists], pa.int32()),
        }
    )
    query = (
        'SELECT s.profile_id, s.stack_id, sum(s."values"[sel.i])::BIGINT AS v, '
        'sum(abs(s."values"[sel.i]))::BIGINT AS a '
        "FROM samples s JOIN _pyproflab_rsel sel ON s.profile_id = sel.profile_id "
        "WHERE s.profile_id BETWEEN ? AND ? GROUP BY s.profile_id, s.stack_id "
        "ORDER BY s.profile_id, min(s.rowid)"
    )
    with store.registered(_pyproflab_rsel=sel):
        agg = store.sql(query, [int(pids.min()), int(pids.max())])
    if agg.num_rows == 0:
        raise UsageError("the selected profiles have no samples")
    a_pid = agg.column("profile_id").to_numpy()
    a_stack = agg.column("stack_id").to_numpy().astype(np.uint64)
    a_v = agg.column("v").to_numpy()
    pos_of = {int(p): i for i, p in enumerate(pids.tolist())}
    a_prof = np.array([pos_of[p] for p in a_pid.tolist()], np.int64)
    totals = np.bincount(
        a_prof, weights=agg.column("a").to_numpy().astype(float), minlength=len(pids)
    )
    total_new = int(agg.column("a").to_numpy()[is_new[a_prof]].sum())
    total_base = int(agg.column("a").to_numpy()[~is_new[a_prof]].sum())

    if measure == "share":
        # Denominator: each profile's total (sum of |value|), so values become shares.
        durations, factor, shown_unit = totals.astype(float), 1.0, "share"
        if not (durations > 0).all():
            raise UsageError("measure=share needs every profile to have a non-zero total")
        notes.append("compared as shares of each side's profile totals, not rates")
    nz = a_v != 0
    uniq, first = np.unique(a_stack[nz], return_index=True)
    stack_order = uniq[np.argsort(first, kind="stable")]
    one_type = dict(header, sample_types=[st], default_sample_type=st.type)
    inc = _incidence(
        store, stack_order, one_type, all_rows[0]["main_mapping_id"], granularity, inlines
    )
    n_nodes = len(inc.labels)

    # Per (profile, node) flat and cum, exact, in SQL.
    inc_table = pa.table(
        {
            "stack_id": pa.array(stack_order[inc.pair_stack], pa.uint64()),
            "node": pa.array(inc.pair_node, pa.int64()),
            "leaf": pa.array(inc.pair_leaf),
        }
    )
    agg_nz = pa.table(
        {
            "p": pa.array(a_prof[nz]),
            "stack_id": pa.array(a_stack[nz], pa.uint64()),
            "v": pa.array(a_v[nz], pa.int64()),
        }
    )
    with store.registered(_pyproflab_rinc=inc_table, _pyproflab_ragg=agg_nz):
        pn = store.sql(
            "SELECT a.p, i.node, coalesce(sum(a.v) FILTER (WHERE i.leaf), 0)::BIGINT AS flat, "
            "sum(a.v)::BIGINT AS cum FROM _pyproflab_ragg a JOIN _pyproflab_rinc i "
            "USING (stack_id) GROUP BY a.p, i.node ORDER BY a.p, i.node"
        )
    pp = pn.column("p").to_numpy().astype(np.int64)
    node = pn.column("node").to_numpy().astype(np.int64)
    flat = pn.column("flat").to_numpy().astype(np.int64)
    cum = pn.column("cum").to_numpy().astype(np.int64)

    merged: dict[str, np.ndarray] = {}
    for name, vals in (("flat", flat), ("cum", cum)):
        for side, mask in (("new", is_new[pp]), ("base", ~is_new[pp])):
            m = np.zeros(n_nodes, np.int64)
            np.add.at(m, node[mask], vals[mask])
            merged[f"{name}_{side}"] = m
    present = np.flatnonzero(
        (merged["flat_new"] != 0)
        | (merged["flat_base"] != 0)
        | (merged["cum_new"] != 0)
        | (merged["cum_base"] != 0)
    )

    # Dense per-profile matrices over the present nodes (rows: profiles).
    col = np.full(n_nodes, -1, np.int64)
    col[present] = np.arange(len(present))
    mats = {}
    for name, vals in (("flat", flat), ("cum", cum)):
        m = np.zeros((len(pids), len(present)))
        np.add.at(m, (pp, col[node]), vals.astype(float) * factor)
        mats[name] = m
    # Units of the statistics: profiles, or instances or windows (their profiles summed).
    if unit in ("instance", "window"):
        if unit == "instance":
            keys = [
                (bool(is_new[i]), r["service"], r["instance"] or f"#{r['profile_id']}")
                for i, r in enumerate(all_rows)
            ]
        else:
            keys = [(bool(is_new[i]), w) for i, w in enumerate(time_windows(all_rows))]
        ids: dict[tuple, int] = {}
        u_of = np.array([ids.setdefault(k, len(ids)) for k in keys], np.int64)
        u_new = np.array([k[0] for k in ids], bool)
        u_dur = np.bincount(u_of, weights=durations, minlength=len(ids))
        for name in list(mats):
            m = np.zeros((len(ids), len(present)))
            np.add.at(m, u_of, mats[name])
            mats[name] = m
    else:
        u_new, u_dur = is_new, durations
    dn, db = u_dur[u_new], u_dur[~u_new]
    un, ub = int(u_new.sum()), int((~u_new).sum())
    word = unit

    statistics = ub >= 2 and un >= 2
    if not statistics:
        notes.append(
            f"no statistics are possible with one {word} on a side (base: {ub}, "
            f"new: {un}); showing the plain diff of the merged sides"
        )
    rng = np.random.default_rng(seed)
    cb = stats.resample_counts(rng, ub, resamples) if statistics else None
    cn = stats.resample_counts(rng, un, resamples) if statistics else None
    pooled_total = float(total_new + total_base) or 1.0
    splits, exact = 0, False

    cols: dict[str, Any] = {}
    for name in ("flat", "cum"):
        mb, mn = mats[name][~u_new], mats[name][u_new]
        rb, rn = mb.sum(axis=0) / db.sum(), mn.sum(axis=0) / dn.sum()
        change = rn - rb
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(rb != 0, rn / rb - 1.0, np.nan)
        cols[f"{name}_rate_base"], cols[f"{name}_rate_new"] = rb, rn
        cols[f"{name}_share_base"] = merged[f"{name}_base"][present] / (total_base or 1)
        cols[f"{name}_share_new"] = merged[f"{name}_new"][present] / (total_new or 1)
        cols[f"{name}_p50_base"] = np.median(mb / db[:, None], axis=0)
        cols[f"{name}_p50_new"] = np.median(mn / dn[:, None], axis=0)
        cols[f"{name}_change"], cols[f"{name}_rel"] = change, rel
        pooled = np.abs(merged[f"{name}_base"][present]) + np.abs(merged[f"{name}_new"][present])
        tested = (pooled / pooled_total >= min_share) & statistics
        nan = np.full(len(present), np.nan)
        lo, hi, rlo, rhi, p = nan.copy(), nan.copy(), nan.copy(), nan.copy(), nan.copy()
        if statistics and test == "welch":
            t, df = stats.welch_t(
                change, stats.ratio_variance(mn, dn), stats.ratio_variance(mb, db), un, ub
            )
            pt = stats.t_two_sided_p(t, df)
            # No variance on either side: a difference is certain, no difference is not one.
            pt = np.where(np.isnan(pt) & (change == 0), 1.0, pt)
            p[tested] = pt[tested]
        elif statistics and tested.any():
            # The same seed for flat and cum: both are judged on the same splits.
            p[tested], splits, exact = stats.permutation_p(
                mats[name][:, tested], u_dur, u_new, permutations, np.random.default_rng(seed)
            )
        if statistics:
            for start in range(0, len(present), 512):  # chunks bound the memory
                sl = slice(start, start + 512)
                bb = stats.bootstrap_ratio(mb[:, sl], db, cb)
                bn = stats.bootstrap_ratio(mn[:, sl], dn, cn)
                lo[sl], hi[sl] = _percentiles(bn - bb, confidence)
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(bb != 0, bn / bb - 1.0, np.nan)
                rlo[sl], rhi[sl] = _percentiles(ratio, confidence)
            rlo = np.where(np.isnan(rel), np.nan, rlo)
            rhi = np.where(np.isnan(rel), np.nan, rhi)
        cols[f"{name}_change_lo"], cols[f"{name}_change_hi"] = lo, hi
        cols[f"{name}_rel_lo"], cols[f"{name}_rel_hi"] = rlo, rhi
        cols[f"{name}_p"] = p
        cols[f"{name}_tested"] = tested
    # One BH family: flat and cum of every tested node.
    q_both = stats.bh_adjust(np.concatenate([cols["flat_p"], cols["cum_p"]]))
    for name, q in zip(("flat", "cum"), np.split(q_both, 2), strict=True):
        cols[f"{name}_q"] = q
        cols[f"{name}_significant"] = cols[f"{name}_tested"] & (np.nan_to_num(q, nan=1.0) <= fdr)

    labels = [inc.labels[i] for i in present.tolist()]
    key = np.abs(cols[f"{rank_by}_change"])
    order = sorted(range(len(present)), key=lambda i: (-key[i], labels[i]))
    order_np = np.array(order, np.int64)
    table: dict[str, Any] = {
        "rank": np.arange(1, len(order) + 1),
        "name": [inc.names[present[i]] for i in order],
        "file": [inc.files[present[i]] for i in order],
        "line": [inc.lines[present[i]] for i in order],
        "label": [labels[i] for i in order],
    }
    for name in ("flat", "cum"):
        b, nw = merged[f"{name}_base"][present], merged[f"{name}_new"][present]
        table[f"{name}_base"], table[f"{name}_new"] = b[order_np], nw[order_np]
        table[f"{name}_diff"] = (nw - b)[order_np]
    for fld in ROWS_SCHEMA:
        if fld.name not in table:
            v = cols[fld.name]
            table[fld.name] = v[order_np] if len(order_np) else v[:0]
    rows = pa.table({f.name: table[f.name] for f in ROWS_SCHEMA}, schema=ROWS_SCHEMA)

    # Long per-profile values (non-zero entries) and the profiles.
    side = np.where(is_new, "new", "base")
    per_profile = pa.table(
        {
            "profile_id": pids[pp],
            "side": side[pp],
            "node": node,
            "label": [inc.labels[i] for i in node.tolist()],
            "flat": flat,
            "cum": cum,
            "flat_rate": flat * factor / durations[pp],
            "cum_rate": cum * factor / durations[pp],
        }
    )
    profiles = pa.table(
        {
            "profile_id": pids,
            "side": side,
            "duration_s": dur_ns / 1e9,
            "total": totals.astype(np.int64),
        }
    )
    # Per distinct stack: merged value per side (for the flame graph).
    spos = {int(s): i for i, s in enumerate(stack_order.tolist())}
    s_idx = np.array([spos[int(s)] for s in a_stack[nz].tolist()], np.int64)
    sv_new = np.zeros(len(stack_order), np.int64)
    sv_base = np.zeros(len(stack_order), np.int64)
    newmask = is_new[a_prof[nz]]
    np.add.at(sv_new, s_idx[newmask], a_v[nz][newmask])
    np.add.at(sv_base, s_idx[~newmask], a_v[nz][~newmask])
    stacks = pa.table(
        {"path": pa.array(inc.paths, pa.list_(pa.int64())), "base": sv_base, "new": sv_new}
    )

    if statistics:
        if test == "welch":
            how = "Welch t on the ratio estimator, from Student's t"
        else:
            how = (
                f"permutation test of Welch t over the {word}s' sides ("
                + (f"all {splits} splits" if exact else f"{splits} random splits, seed {seed}")
                + ")"
            )
        notes.append(
            f"intervals: {confidence:.0%} percentile bootstrap over {word}s "
            f"({resamples} resamples, seed {seed}); p: {how}; "
            f"BH FDR {fdr:g} over flat and cum of the nodes with >= {min_share:.2%} of the "
            "pooled total"
        )
        n_tests = int(rows.column("flat_tested").to_numpy().sum())
        n_tests += int(rows.column("cum_tested").to_numpy().sum())
        if test == "permutation" and splits:
            # Mirrored splits of equal sides have the same |t|.
            p_min = (2 if exact and ub == un else 1) / (splits if exact else splits + 1)
            if p_min * n_tests > fdr:
                notes.append(
                    f"with {ub} and {un} {word}s no permutation p-value is below "
                    f"{p_min:.2g}, so at FDR {fdr:g} over {n_tests} tests a node is "
                    f"significant only alongside others; compare more {word}s"
                    + ("" if exact else " or raise permutations")
                    + ", or use test='welch' if the per-unit values are near normal"
                )
    return RegressionsResult(
        rows=rows,
        per_profile=per_profile,
        profiles=profiles,
        stacks=stacks,
        labels=inc.labels,
        sample_type=st,
        sample_index=index,
        granularity=granularity,
        rate=rate,
        rate_unit=shown_unit,
        rate_factor=factor,
        n_base=n_base,
        n_new=n_new,
        duration_base=float(dur_ns[~is_new].sum() / 1e9),
        duration_new=float(dur_ns[is_new].sum() / 1e9),
        total_base=total_base,
        total_new=total_new,
        statistics=statistics,
        fdr=fdr,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        min_share=min_share,
        rank_by=rank_by,
        unit=unit,
        inlines=inlines,
        measure=measure,
        test=test,
        permutations=splits,
        n_units_base=ub,
        n_units_new=un,
        base_description=base.describe(),
        new_description=new.describe(),
        notes=notes,
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
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest
    from pyproflab.store.select import Selection

    if not base or not new:
        raise UsageError("both sides need at least one profile")
    with Store.open(":memory:") as store:
        bi = base_instances or [None] * len(base)
        ni = new_instances or [None] * len(new)
        items = [
            (p, ProfileMeta(version="base", instance=i)) for p, i in zip(base, bi, strict=True)
        ]
        items += [(p, ProfileMeta(version="new", instance=i)) for p, i in zip(new, ni, strict=True)]
        # Distinct identities: equal profiles on a side are still separate observations.
        hashes = [f"regressions-{i}" for i in range(len(items))]
        ingest(store, items, content_hashes=hashes)
        return regressions(store, Selection(version="base"), Selection(version="new"), **options)
