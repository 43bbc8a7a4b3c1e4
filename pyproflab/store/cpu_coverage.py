"""The reads of ``analyses.cpu_coverage``: the CPU each selected profile holds
(the process CPU it is set beside is ``store.regressions.counter_samples``)."""

from __future__ import annotations

from typing import Any

from pyproflab.store.connection import Store
from pyproflab.store.select import Selection


def cpu_profile_seconds(store: Store, selection: Selection) -> list[dict[str, Any]]:
    """(profile_id, service, instance, time_nanos, duration_nanos, period, cpu_ns) of
    the selected profiles with a ``cpu``/``nanoseconds`` sample type, by profile id:
    ``cpu_ns`` the sum of that value over the profile's samples (0 when none)."""
    position = "list_position(p.sample_types, {'type': 'cpu', 'unit': 'nanoseconds'})"
    inner, params = selection.query(
        "p.profile_id, p.service, p.instance, p.time_nanos, p.duration_nanos, p.period, "
        f"{position} AS i",
        order_by=None,
    )
    return store.sql(
        "SELECT c.profile_id, any_value(c.service) AS service, "
        "any_value(c.instance) AS instance, any_value(c.time_nanos) AS time_nanos, "
        "any_value(c.duration_nanos) AS duration_nanos, any_value(c.period) AS period, "
        'coalesce(sum(s."values"[c.i]), 0)::BIGINT AS cpu_ns '
        f"FROM ({inner}) c LEFT JOIN samples s ON s.profile_id = c.profile_id "
        "WHERE c.i > 0 GROUP BY c.profile_id ORDER BY c.profile_id",
        params,
    ).to_pylist()
