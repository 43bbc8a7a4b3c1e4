"""Stage 1 of ``regressions``: the two sides, their sample type and how values
become rates (see rules 1 and 4 of ``pyproflab.analyses.regressions``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pyproflab.analyses.graph import resolve_sample_index
from pyproflab.analyses.regressions.reads import ProfileReads
from pyproflab.analyses.units import scale
from pyproflab.errors import UsageError
from pyproflab.model import Profile, ValueType

NON_RATE_TYPES = ("goroutine", "threadcreate")


class TwoSided:
    """Mixin: how many of the rows are on each side (``is_new``)."""

    is_new: np.ndarray

    @property
    def n_new(self) -> int:
        return int(self.is_new.sum())

    @property
    def n_base(self) -> int:
        return int((~self.is_new).sum())


@dataclass
class Sides(TwoSided):
    """The profiles of both sides, new first (as ``go tool pprof -diff_base``)."""

    rows: list[dict[str, Any]]
    is_new: np.ndarray
    pids: np.ndarray
    header: dict[str, Any]
    index_lists: list[list[int]]
    sample_type: ValueType
    sample_index: int
    rate: bool
    rate_unit: str
    factor: float
    dur_ns: np.ndarray
    durations: np.ndarray  # the denominators of the rates, per profile
    count_scale: float  # value of one sample (see ``count_scale``; set after the values)
    base_description: str
    new_description: str
    notes: list[str] = field(default_factory=list)


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


def count_scale(reads: ProfileReads, sides: Sides, totals_value: float) -> float:
    """The value one sample adds, so values / scale are sample counts.

    Rule: when the profiles have another sample type counted in ``count``
    (CPU's samples, heap's objects) and the chosen one is not a count, the
    chosen total over that one's total (CPU: the period, 1e7 ns); else the
    profiles' period when its unit is the sample type's; else 1.
    ``totals_value``: the chosen type's total over the selected profiles.
    """
    st = sides.sample_type
    types = sides.header["sample_types"]
    counted = [i for i, t in enumerate(types) if t.unit == "count" and t != st]
    if st.unit != "count" and counted and totals_value > 0:
        positions = [idx[counted[0]] + 1 for idx in sides.index_lists]
        n = reads.value_total(sides.pids, positions)
        if n > 0:
            return totals_value / n
    periods = [r["period"] or 0 for r in sides.rows if r["period_unit"] == st.unit]
    if st.unit != "count" and len(periods) == len(sides.rows) and min(periods) > 0:
        return float(max(periods))
    return 1.0


def as_selection(selection):
    """A ``Selection`` as given, or built from a dict of its fields (None: all)."""
    from pyproflab.store.select import Selection

    return Selection.of(selection)


def select_sides(
    reads: ProfileReads, base, new, sample_index: int | str | None, measure: str
) -> Sides:
    """Both sides' profiles, the chosen sample type and the rate rule."""
    base, new = as_selection(base), as_selection(new)
    rows_b, rows_n = reads.selected_profiles(base), reads.selected_profiles(new)
    for side, rows, sel in (("base", rows_b, base), ("new", rows_n, new)):
        if not rows:
            raise UsageError(f"no profiles match the {side} selection {sel.describe()}")
    both = {r["profile_id"] for r in rows_b} & {r["profile_id"] for r in rows_n}
    if both:
        raise UsageError(
            f"{len(both)} profiles are in both the base and the new selection "
            f"(e.g. profile {min(both)}); make the selections disjoint"
        )
    return sides_of(rows_n, rows_b, sample_index, measure, base.describe(), new.describe())


def in_data_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Profile rows by time taken, then content hash: not by profile id, which
    follows the order they were ingested in. Sums of floats, the first
    appearance of each stack (node numbers, ties in the ranking) and the
    resampling draws follow this order: by id, the same profiles ingested in
    reverse gave other digits, other edge orders and other permutation p-values."""
    return sorted(rows, key=lambda r: (r["time_nanos"] or 0, r.get("content_hash") or ""))


def sides_of(
    rows_n: list[dict[str, Any]],
    rows_b: list[dict[str, Any]],
    sample_index: int | str | None,
    measure: str,
    base_description: str = "",
    new_description: str = "",
) -> Sides:
    """``Sides`` of the profile rows of each side (new first), each side in the
    order the data fixes, by time taken and content (``in_data_order``)."""
    from pyproflab.store.merge import merge_headers

    # New first: pprof's -diff_base puts the source first.
    all_rows = in_data_order(rows_n) + in_data_order(rows_b)
    header, index_lists = merge_headers(all_rows)
    types = header["sample_types"]
    empty = Profile.empty(types)
    if header["default_sample_type"]:
        empty = dataclasses.replace(empty, default_sample_type=header["default_sample_type"])
    index = resolve_sample_index(empty, sample_index)
    st = types[index]
    dur_ns = np.array([r["duration_nanos"] or 0 for r in all_rows], np.float64)
    not_rate = st.type.startswith("inuse_") or st.type in NON_RATE_TYPES
    rate = bool((dur_ns > 0).all()) and not not_rate
    shown_unit, factor = rate_unit_of(st, rate)
    notes: list[str] = []
    if not rate and measure == "rate":
        why = (
            "it is not a rate"
            if (dur_ns > 0).all() or not_rate
            else "some profiles have no duration"
        )
        notes.append(
            f"{st.type} is compared as the per-profile value ({shown_unit}), not a rate "
            f"per second: {why}"
        )
    return Sides(
        rows=all_rows,
        is_new=np.arange(len(all_rows)) < len(rows_n),
        pids=np.array([r["profile_id"] for r in all_rows], np.int64),
        header=header,
        index_lists=index_lists,
        sample_type=st,
        sample_index=index,
        rate=rate,
        rate_unit=shown_unit,
        factor=factor,
        dur_ns=dur_ns,
        durations=dur_ns / 1e9 if rate else np.ones(len(all_rows)),
        count_scale=1.0,
        base_description=base_description,
        new_description=new_description,
        notes=notes,
    )


def without_empty(sides: Sides, keep: np.ndarray, sample_index, measure: str) -> Sides:
    """The sides with only the profiles ``keep`` marks (share mode leaves out
    empty ones: a share of nothing is undefined), with a note saying how many
    were left out; a side left empty is an error."""
    rows_n = [r for r, k, n in zip(sides.rows, keep, sides.is_new, strict=True) if k and n]
    rows_b = [r for r, k, n in zip(sides.rows, keep, sides.is_new, strict=True) if k and not n]
    for side, rows in (("base", rows_b), ("new", rows_n)):
        if not rows:
            raise UsageError(f"measure=share: every profile of the {side} side is empty")
    out = sides_of(
        rows_n, rows_b, sample_index, measure, sides.base_description, sides.new_description
    )
    dropped_b = int((~keep & ~sides.is_new).sum())
    dropped_n = int((~keep & sides.is_new).sum())
    out.notes.append(
        f"left out {dropped_b} base and {dropped_n} new profiles with no samples "
        "(a share of an empty profile is undefined)"
    )
    return out
