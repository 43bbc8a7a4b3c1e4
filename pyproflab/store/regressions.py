"""The queries of the regression analysis (``analyses.regressions``).

Rules: parameters are bound; Arrow tables the caller passes are registered
under private names for the one query that joins them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab.schema import COUNTER_SAMPLES
from pyproflab.store.connection import Store
from pyproflab.store.queries import table_names


def selected_profiles(store: Store, selection) -> list[dict[str, Any]]:
    """Header columns, service, instance and content hash of the profiles
    ``selection`` matches, by profile id."""
    from pyproflab.store.merge import HEADER_COLUMNS

    columns = f"{HEADER_COLUMNS}, p.service, p.instance, p.content_hash"
    return store.sql(*selection.query(columns)).to_pylist()


def stack_sums(store: Store, pids: np.ndarray, positions: list[int]) -> pa.Table:
    """Per (profile, stack): ``v`` the sum of the value at 1-based ``positions``
    (one per profile) and ``a`` the sum of its absolute values; in profile order,
    stacks in order of first appearance."""
    sel = pa.table({"profile_id": pa.array(pids), "i": pa.array(positions, pa.int32())})
    query = (
        'SELECT s.profile_id, s.stack_id, sum(s."values"[sel.i])::BIGINT AS v, '
        'sum(abs(s."values"[sel.i]))::BIGINT AS a '
        "FROM samples s JOIN _pyproflab_rsel sel ON s.profile_id = sel.profile_id "
        "WHERE s.profile_id BETWEEN ? AND ? GROUP BY s.profile_id, s.stack_id "
        "ORDER BY s.profile_id, min(s.rowid)"
    )
    with store.registered(_pyproflab_rsel=sel):
        return store.sql(query, [int(pids.min()), int(pids.max())])


def value_total(store: Store, pids: np.ndarray, positions: list[int]) -> float:
    """Sum over the profiles' samples of the value at 1-based ``positions``
    (one per profile)."""
    sel = pa.table({"profile_id": pa.array(pids), "i": pa.array(positions, pa.int32())})
    with store.registered(_pyproflab_rsel=sel):
        got = store.sql(
            'SELECT sum(abs(s."values"[sel.i]))::DOUBLE AS v FROM samples s '
            "JOIN _pyproflab_rsel sel ON s.profile_id = sel.profile_id "
            "WHERE s.profile_id BETWEEN ? AND ?",
            [int(pids.min()), int(pids.max())],
        )
    return float(got.column("v")[0].as_py() or 0.0)


def node_sums(store: Store, values: pa.Table, incidence: pa.Table) -> pa.Table:
    """Per (p, node): flat (sum of ``v`` over stacks where the node is the leaf)
    and cum (over stacks holding it). ``values``: (p, stack_id, v);
    ``incidence``: (stack_id, node, leaf), one row per distinct pair."""
    with store.registered(_pyproflab_rinc=incidence, _pyproflab_ragg=values):
        return store.sql(
            "SELECT a.p, i.node, coalesce(sum(a.v) FILTER (WHERE i.leaf), 0)::BIGINT AS flat, "
            "sum(a.v)::BIGINT AS cum FROM _pyproflab_ragg a JOIN _pyproflab_rinc i "
            "USING (stack_id) GROUP BY a.p, i.node ORDER BY a.p, i.node"
        )


def counter_samples(store: Store, metric: str, services: list[str | None]) -> pa.Table:
    """(service, instance, time, value) of counter ``metric`` for ``services``,
    summed over its label sets per instance and time, in time order; no rows
    when the store has no ``metric_samples`` table (an adopted store may lack it)."""
    if "metric_samples" not in table_names(store):
        return COUNTER_SAMPLES.empty_table()
    return store.sql(
        'SELECT service, instance, "time", sum(value) AS value FROM metric_samples '
        "WHERE metric = ? AND list_contains(?, service) "
        'GROUP BY service, instance, "time" ORDER BY service, instance, "time"',
        [metric, [s for s in services if s is not None]],
    )
