"""Stage 3 of ``regressions``: the independent units of the statistics and the
denominators of the rates (rule 5 of ``pyproflab.analyses.regressions``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab.analyses.regressions.reads import ProfileReads
from pyproflab.analyses.regressions.selection import TwoSided
from pyproflab.errors import UsageError


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


def per_work(reads: ProfileReads, rows: list[dict[str, Any]], counter: str) -> np.ndarray:
    """Per profile: the increase of counter ``counter`` over its window.

    Rule: the window is [time, time + duration] of the profile; the counter's
    samples (``metric_samples``, summed over label sets) of the profile's
    service and instance are interpolated linearly at both ends, so scrapes
    need not line up with profiles but must bracket them. A counter with no
    sample at all is a UsageError naming it; a profile without a positive
    increase is one naming the profile.
    """
    tab = reads.counter_samples(counter, sorted({r["service"] for r in rows}, key=str))
    if not tab.num_rows:  # a mistyped name: no sample of it for any selected service
        raise UsageError(
            f"per-work counter {counter!r} (--per, per=): no metric samples of it for the "
            "selected services (pyproflab ingest-gc stores /metrics; lab.sql lists "
            "metric_samples' names)"
        )
    series: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    keys = list(
        zip(tab.column("service").to_pylist(), tab.column("instance").to_pylist(), strict=True)
    )
    t = tab.column("time").cast(pa.timestamp("ns", "UTC")).cast(pa.int64()).to_numpy()
    v = tab.column("value").to_numpy()
    for k in dict.fromkeys(keys):
        m = np.array([x == k for x in keys])
        series[k] = (t[m], v[m])
    out = np.zeros(len(rows))
    for i, r in enumerate(rows):
        ts, vs = series.get((r["service"], r["instance"]), (np.array([]), np.array([])))
        t0 = r["time_nanos"] or 0
        t1 = t0 + (r["duration_nanos"] or 0)
        if len(ts) and t0 and t1 > t0 and ts[0] <= t0 and ts[-1] >= t1:
            out[i] = np.interp(t1, ts, vs) - np.interp(t0, ts, vs)
        if not out[i] > 0:
            raise UsageError(
                f"counter {counter!r} has no samples bracketing profile {r['profile_id']} "
                f"(service {r['service']!r}, instance {r['instance']!r}) with an increase"
            )
    return out


@dataclass
class Units(TwoSided):
    """Per unit: side, denominator (seconds, work or 1) and, per metric, the
    summed values (rows: units)."""

    is_new: np.ndarray
    denominators: np.ndarray
    of_profile: np.ndarray  # unit index per profile

    def sum(self, per_profile: np.ndarray) -> np.ndarray:
        """(units, columns) sums of a (profiles, columns) matrix."""
        out = np.zeros((len(self.is_new), per_profile.shape[1]))
        np.add.at(out, self.of_profile, per_profile)
        return out


def group_units(
    rows: list[dict[str, Any]], is_new: np.ndarray, denominators: np.ndarray, unit: str
) -> Units:
    """Profiles, or instances or time windows (their profiles summed), as units."""
    if unit not in ("instance", "window"):
        return Units(is_new, denominators, np.arange(len(rows)))
    keys: list[tuple[bool, str | None, str] | tuple[bool, int]]
    if unit == "instance":
        keys = [
            (bool(is_new[i]), r["service"], r["instance"] or f"#{r['profile_id']}")
            for i, r in enumerate(rows)
        ]
    else:
        keys = [(bool(is_new[i]), w) for i, w in enumerate(time_windows(rows))]
    ids: dict[tuple, int] = {}
    of = np.array([ids.setdefault(k, len(ids)) for k in keys], np.int64)
    u_new = np.array([k[0] for k in ids], bool)
    return Units(u_new, np.bincount(of, weights=denominators, minlength=len(ids)), of)
