"""The sample types of profiles to merge, made common as pprof does
(``combineProfiles``' first two steps; ``merge`` does the third).

1. ``compatibilize_sample_types``: keep the sample types whose name occurs in
   every profile (counted over all profiles, so a name repeated within one
   profile counts twice), in the first profile's order; each profile's values
   are re-ordered to them. No common type is an error.
2. ``scale_profiles``: sample types at one position must be compatible (same
   name up to a trailing "s", and equal units or units of one family such as
   bytes/kilobytes or nanoseconds/seconds); values are converted to the
   smallest unit among the profiles and rounded half away from zero, and samples
   whose converted values are all zero are dropped. Periods are converted too.
   Incompatible types raise ``UsageError`` (pprof refuses them the same way).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.analyses._arrays import to_np
from pyproflab.analyses.units import scale
from pyproflab.arrays import from_numpy, list_parts
from pyproflab.errors import UsageError
from pyproflab.model import Profile, ValueType


def common_sample_types(profiles: list[Profile]) -> list[str]:
    """The sample type names every profile has, in the first profile's order."""
    counts = Counter(st.type for p in profiles for st in p.sample_types)
    return [st.type for st in profiles[0].sample_types if counts[st.type] == len(profiles)]


def compatibilize_sample_types(profiles: list[Profile]) -> list[Profile]:
    """Each profile reduced to the common sample types, in the first profile's order."""
    names = common_sample_types(profiles)
    if not names:
        raise UsageError("profiles have empty common sample type list")
    out = []
    for p in profiles:
        remap = []
        for name in names:
            idx = next((i for i, st in enumerate(p.sample_types) if st.type == name), -1)
            if idx < 0:
                raise UsageError(f"{name!r} sample type is not found in profile")
            remap.append(idx)
        if remap == list(range(len(p.sample_types))):
            out.append(p)
            continue
        default = p.default_sample_type if p.default_sample_type in names else names[0]
        out.append(
            dataclasses.replace(
                p,
                sample_types=[p.sample_types[i] for i in remap],
                default_sample_type=default,
                samples=with_values(p.samples, values_matrix(p)[:, remap]),
            )
        )
    return out


def values_matrix(p: Profile) -> np.ndarray:
    """Sample values as an (n_samples, n_types) int64 matrix."""
    n, k = p.samples.num_rows, len(p.sample_types)
    offsets, flat = list_parts(p.samples.column("values"))
    vals = to_np(flat, np.int64)
    if len(vals) != n * k:
        raise UsageError("a sample's value count differs from the number of sample types")
    return vals.reshape(n, k)


def with_values(samples: pa.Table, matrix: np.ndarray) -> pa.Table:
    """``samples`` with its values column replaced by ``matrix`` (n_samples, n_types)."""
    n, k = matrix.shape
    arr = pa.ListArray.from_arrays(
        from_numpy(
            np.arange(0, n * k + 1, max(k, 1))[: n + 1] if k else np.zeros(n + 1, np.int64),
            pa.int32(),
        ),
        from_numpy(matrix.reshape(-1), pa.int64()),
    )
    idx = samples.schema.get_field_index("values")
    return samples.set_column(idx, schema.PROFILE_SAMPLES.field("values"), arr)


def _compatible(a: ValueType | None, b: ValueType | None) -> bool:
    from pyproflab.analyses.units import compatible_units

    if a is None or b is None:
        return True
    if a.type.removesuffix("s") != b.type.removesuffix("s"):
        return False
    return compatible_units(a.unit, b.unit)


def _common_value_type(types: list[ValueType | None], what: str) -> ValueType | None:
    if len(types) <= 1:
        return None
    smallest = types[0]
    for t in types[1:]:
        if not _compatible(smallest, t):
            raise UsageError(f"{what}: incompatible types: {smallest} {t}")
        if t is not None and smallest is not None and scale(1, t.unit, smallest.unit)[0] < 1:
            smallest = t
    return smallest


def scale_profiles(profiles: list[Profile]) -> list[Profile]:
    """Convert every profile's values to common units (pprof's ``ScaleProfiles``)."""
    if not profiles:
        return profiles
    period = _common_value_type([p.period_type for p in profiles if p.period_type], "period type")
    k = len(profiles[0].sample_types)
    for p in profiles[1:]:
        if len(p.sample_types) != k:
            raise UsageError(f"inconsistent samples type count: {k} != {len(p.sample_types)}")
    common = [
        _common_value_type([p.sample_types[i] for p in profiles], "sample types") for i in range(k)
    ]
    out = []
    for p in profiles:
        changes: dict = {}
        if p.period_type is not None and period is not None:
            v, _ = scale(p.period, p.period_type.unit, period.unit)
            changes["period"] = int(v)
            changes["period_type"] = ValueType(p.period_type.type, period.unit)
        ratios = [
            1.0 if c is None else scale(1, st.unit, c.unit)[0]
            for st, c in zip(p.sample_types, common, strict=True)
        ]
        changes["sample_types"] = [
            st if c is None else ValueType(st.type, c.unit)
            for st, c in zip(p.sample_types, common, strict=True)
        ]
        if any(r != 1 for r in ratios):
            m = values_matrix(p).copy()
            keep = np.zeros(len(m), dtype=bool)
            for i, r in enumerate(ratios):
                if r != 1:
                    # Go's math.Round: half away from zero, on float64.
                    col = np.array(
                        [_go_round(float(v) * r) for v in m[:, i].tolist()], dtype=np.int64
                    )
                    m[:, i] = col
                    keep |= col != 0
            samples = with_values(p.samples, m).filter(from_numpy(keep))
            changes["samples"] = samples
        out.append(dataclasses.replace(p, **changes))
    return out


def _go_round(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))
