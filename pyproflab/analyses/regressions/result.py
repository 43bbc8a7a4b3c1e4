"""The result of ``regressions``: its row schema and ``RegressionsResult``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pyproflab.analyses.regressions.incidence import NodeValues
from pyproflab.analyses.regressions.selection import Sides
from pyproflab.analyses.rows import NODE_FIELDS, RowsResult
from pyproflab.display import render
from pyproflab.errors import UsageError
from pyproflab.model import ValueType

#: Per metric (flat, cum) statistics columns, in order.
METRIC_COLUMNS = (
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
    "detectable",
)

#: Per metric, the Benjamini–Yekutieli FCR interval of the relative change of a
#: selected (significant) row at ``RegressionsResult.fcr_confidence``; null otherwise.
FCR_COLUMNS = ("rel_fcr_lo", "rel_fcr_hi")

ROWS_SCHEMA = pa.schema(
    [
        pa.field("rank", pa.int64(), nullable=False),
        *NODE_FIELDS,
        *[
            pa.field(f"{m}_{s}", pa.int64(), nullable=False)
            for m in ("flat", "cum")
            for s in ("base", "new", "diff")
        ],
        *[pa.field(f"{m}_{c}", pa.float64()) for m in ("flat", "cum") for c in METRIC_COLUMNS],
        *[pa.field(f"{m}_{c}", pa.float64()) for m in ("flat", "cum") for c in FCR_COLUMNS],
        *[
            pa.field(f"{m}_{c}", pa.bool_(), nullable=False)
            for m in ("flat", "cum")
            for c in ("tested", "significant")
        ],
        # increase / decrease (a significant change of flat or cum) or none.
        pa.field("direction", pa.string(), nullable=False),
        # The metric (flat or cum) whose interval gives the evidence, and its
        # conservative end (lower end for increases, minus the upper for decreases).
        pa.field("evidence_metric", pa.string(), nullable=False),
        pa.field("evidence", pa.float64()),
        # Label of the finding this row's change is explained by (a deeper or
        # calling node carrying the same change), else null.
        pa.field("explained_by", pa.string()),
        # Label of the node the cost moved from/to when this row is half of a
        # cost shift (total of the pair unchanged), else null.
        pa.field("shift_with", pa.string()),
    ]
)

EDGES_SCHEMA = pa.schema(
    [
        pa.field("caller", pa.string(), nullable=False),
        pa.field("callee", pa.string(), nullable=False),
        pa.field("base", pa.int64(), nullable=False),
        pa.field("new", pa.int64(), nullable=False),
        *[pa.field(c, pa.float64()) for c in METRIC_COLUMNS],
        pa.field("significant", pa.bool_(), nullable=False),
    ]
)


@dataclass
class RegressionsResult(RowsResult):
    """Per-node comparison of two sides (see ``pyproflab.analyses.regressions``).

    ``rows`` (``ROWS_SCHEMA``): ranked nodes; ``edges`` (``EDGES_SCHEMA``):
    caller -> callee edges into the nodes whose flat changed, with the same
    statistics; ``per_profile``: the long per-profile values (profile_id,
    side, node, label, flat, cum, rate columns); ``profiles``: each profile's
    side, duration and total; ``stacks``: per distinct stack its node path
    (root first) and merged value per side, for the flame graph.
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
    per: str | None = None
    # The level of the FCR intervals (1 - R fdr / m), None when no row is selected.
    fcr_confidence: float | None = None
    edges: pa.Table = field(default_factory=lambda: EDGES_SCHEMA.empty_table())
    notes: list[str] = field(default_factory=list)

    def increases(self) -> pa.Table:
        """The rows that grew significantly (flat or cum), less the halves of
        cost shifts (the pair's total is unchanged): what ``--fail-on-change``
        counts."""
        import pyarrow.compute as pc

        rows = self.rows.filter(pc.field("direction") == "increase")
        return rows.filter(pc.field("shift_with").is_null())

    def significant(self, metric: str = "flat") -> pa.Table:
        """The rows whose ``metric`` change is significant at ``fdr``."""
        import pyarrow.compute as pc

        return self.rows.filter(pc.field(f"{metric}_significant"))

    def findings(self, direction: str = "increase") -> pa.Table:
        """Significant rows of ``direction`` not explained by another row."""
        import pyarrow.compute as pc

        return self.rows.filter(
            (pc.field("direction") == direction) & pc.field("explained_by").is_null()
        )

    def distribution(self, label: str) -> pa.Table:
        """Per-profile values of the node printed as ``label``: the base side's
        profiles first, then the new side's (each in the result's profile order), so
        a chart of it reads base then new, left to right."""
        import pyarrow.compute as pc

        rows = self.per_profile.filter(pc.field("label") == label)
        # The sides are computed new first (as pprof's -diff_base puts the source first).
        is_new = np.asarray(pc.equal(rows.column("side"), "new"), dtype=bool)
        return rows.take(np.argsort(is_new, kind="stable"))

    def figure_top(self, n: int = 20, metric: str | None = None):
        """Plotly figure: the top ``n`` changes with their intervals."""
        m = metric or (self.rank_by if self.rank_by in ("flat", "cum") else "flat")
        if m not in ("flat", "cum"):  # was a KeyError on 'bogus_change'
            raise UsageError(f"metric={m!r}: expected 'flat' or 'cum'")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:  # n=-1 left out one row
            raise UsageError(f"n={n!r}: expected a whole number >= 1")
        return render(self, "figure_top", n=n, metric=m)

    def figure_flame(self, *, min_fraction: float = 0.001, max_nodes: int = 3000):
        """Differential flame graph (``analyses.flame``, the one the report draws):
        width from the new side's value, colour from the change of each call path's
        rate (the base's values scaled by new duration / base duration). Paths below
        ``min_fraction`` of the new total are left out. Shows itself in Jupyter,
        ``.html()`` for a page."""
        from pyproflab.analyses.flame import paths_flame_graph

        new_acc: dict[tuple[str, ...], int] = {}
        base_acc: dict[tuple[str, ...], int] = {}
        new_total = base_total = 0
        for path, b, nv in zip(
            self.stacks.column("path").to_pylist(),
            self.stacks.column("base").to_pylist(),
            self.stacks.column("new").to_pylist(),
            strict=True,
        ):
            names = tuple(self.labels[i] for i in path)  # root first
            new_total, base_total = new_total + abs(nv), base_total + abs(b)
            for depth in range(1, len(names) + 1):
                key = names[:depth]
                new_acc[key] = new_acc.get(key, 0) + abs(nv)
                base_acc[key] = base_acc.get(key, 0) + abs(b)
        scale = self.duration_new / self.duration_base if self.duration_base else 1.0
        st = self.sample_type
        return paths_flame_graph(
            new_acc,
            new_total,
            st.type,
            st.unit,
            base=(base_acc, base_total),
            base_scale=scale,
            title=f"{st.type} per second of profile, coloured by change from the base",
            min_fraction=min_fraction,
            max_nodes=max_nodes,
        )

    def _repr_html_(self) -> str:
        return render(self, "html", top=50)

    def __str__(self) -> str:
        """The text report, its first 30 rows (``print(result)``)."""
        return render(self, "text")

    def __repr__(self) -> str:
        return (
            f"RegressionsResult({self.sample_type}, {self.granularity}, "
            f"base={self.n_base} profiles, new={self.n_new} profiles, "
            f"{self.rows.num_rows} rows)"
        )


def detail_tables(sides: Sides, nv: NodeValues, denominators, factor) -> tuple[pa.Table, ...]:
    """The result's detail tables: long per-profile values, the profiles, and
    per stack the merged values of each side."""
    side = np.where(sides.is_new, "new", "base")
    per_profile = pa.table(
        {
            "profile_id": sides.pids[nv.pp],
            "side": side[nv.pp],
            "node": nv.node,
            "label": [nv.inc.labels[i] for i in nv.node.tolist()],
            "flat": nv.flat,
            "cum": nv.cum,
            "flat_rate": nv.flat * factor / denominators[nv.pp],
            "cum_rate": nv.cum * factor / denominators[nv.pp],
        }
    )
    profiles = pa.table(
        {
            "profile_id": sides.pids,
            "side": side,
            "duration_s": sides.dur_ns / 1e9,
            "total": nv.totals.astype(np.int64),
        }
    )
    stacks = pa.table(
        {
            "path": pa.array(nv.inc.paths, pa.list_(pa.int64())),
            "base": nv.stack_base,
            "new": nv.stack_new,
        }
    )
    return per_profile, profiles, stacks
