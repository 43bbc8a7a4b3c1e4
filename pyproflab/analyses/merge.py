"""Merge profiles in memory as ``go tool pprof -proto A B …`` does.

Steps and rules (pprof's ``combineProfiles``):

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
3. ``Merge``: period types and sample types must then be equal. Header: period
   is the maximum, time the earliest (pprof's loop, which favours non-zero
   values), duration the sum, comments de-duplicated, default type / doc URL /
   drop and keep frames from the first profile that has them.
   Samples whose values are all zero are dropped. Mappings are de-duplicated by
   (size rounded up to 4 KiB, offset, build id or else file), functions by
   (start line, name, system name, file), locations by (address relative to
   the mapping, mapping, lines, folded), samples by (locations, labels), whose
   values are then added. Ids are given in order of first use, as pprof does.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.analyses._arrays import IdIndex, to_np
from pyproflab.analyses.units import scale
from pyproflab.arrays import empty_lists, from_numpy, list_parts
from pyproflab.errors import UsageError
from pyproflab.model import Profile, ValueType


def merge(profiles: list[Profile]) -> Profile:
    """One profile combining ``profiles`` exactly as pprof merges them (see module rules)."""
    if not profiles:
        raise UsageError("no profiles to merge")
    profiles = compatibilize_sample_types(list(profiles))
    profiles = scale_profiles(profiles)
    return _merge(profiles)


# --- sample types -------------------------------------------------------------------


def common_sample_types(profiles: list[Profile]) -> list[str]:
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
                samples=_with_values(p.samples, _values_matrix(p)[:, remap]),
            )
        )
    return out


def _values_matrix(p: Profile) -> np.ndarray:
    """Sample values as an (n_samples, n_types) int64 matrix."""
    n, k = p.samples.num_rows, len(p.sample_types)
    offsets, flat = list_parts(p.samples.column("values"))
    vals = to_np(flat, np.int64)
    if len(vals) != n * k:
        raise UsageError("a sample's value count differs from the number of sample types")
    return vals.reshape(n, k)


def _with_values(samples: pa.Table, matrix: np.ndarray) -> pa.Table:
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
            m = _values_matrix(p).copy()
            keep = np.zeros(len(m), dtype=bool)
            for i, r in enumerate(ratios):
                if r != 1:
                    # Go's math.Round: half away from zero, on float64.
                    col = np.array(
                        [_go_round(float(v) * r) for v in m[:, i].tolist()], dtype=np.int64
                    )
                    m[:, i] = col
                    keep |= col != 0
            samples = _with_values(p.samples, m).filter(from_numpy(keep))
            changes["samples"] = samples
        out.append(dataclasses.replace(p, **changes))
    return out


def _go_round(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


# --- the merge itself ---------------------------------------------------------------


def _check_compatible(a: Profile, b: Profile) -> None:
    pa_, pb = a.period_type, b.period_type
    if (pa_ is None) != (pb is None) or (pa_ is not None and pa_ != pb):
        raise UsageError(f"incompatible period types {pa_} and {pb}")
    if a.sample_types != b.sample_types:
        raise UsageError(
            f"incompatible sample types {[str(t) for t in a.sample_types]} and "
            f"{[str(t) for t in b.sample_types]}"
        )


def _header(srcs: list[Profile]) -> dict:
    for s in srcs[1:]:
        _check_compatible(srcs[0], s)
    time_nanos = duration = period = 0
    comments: list[str] = []
    seen: set[str] = set()
    default = doc = ""
    for s in srcs:
        if time_nanos == 0 or s.time_nanos < time_nanos:
            time_nanos = s.time_nanos
        duration += s.duration_nanos
        if period == 0 or period < s.period:
            period = s.period
        for c in s.comments:
            if c not in seen:
                seen.add(c)
                comments.append(c)
        default = default or s.default_sample_type
        doc = doc or s.doc_url
    first = srcs[0]
    return dict(
        sample_types=list(first.sample_types),
        period_type=first.period_type,
        period=period,
        time_nanos=time_nanos,
        duration_nanos=duration,
        comments=comments,
        drop_frames=first.drop_frames,
        keep_frames=first.keep_frames,
        default_sample_type=default,
        doc_url=doc,
    )


def _label_key(labels: list[dict]) -> tuple:
    """Canonical labels as pprof keys samples: string labels by key (values in
    order), numeric labels by key with their units; empty labels dropped."""
    strs: dict[str, list[str]] = {}
    nums: dict[str, list[int]] = {}
    units: dict[str, list[str]] = {}
    for lb in labels:
        key = lb["key"]
        if lb["str"] is not None and lb["str"] != "":
            strs.setdefault(key, []).append(lb["str"])
        elif (lb["num"] or 0) != 0 or lb["num_unit"]:
            vals = nums.setdefault(key, [])
            if lb["num_unit"]:
                u = units.setdefault(key, [])
                u.extend([""] * (len(vals) - len(u)))
                u.append(lb["num_unit"])
            vals.append(lb["num"] or 0)
    for key, u in units.items():
        u.extend([""] * (len(nums[key]) - len(u)))
    return (
        tuple((k, tuple(strs[k])) for k in sorted(strs)),
        tuple((k, tuple(nums[k]), tuple(units.get(k, ()))) for k in sorted(nums)),
    )


class _Merger:
    def __init__(self) -> None:
        self.mappings: list[dict] = []
        self.mapping_keys: dict[tuple, int] = {}  # key -> merged id
        self.functions: list[dict] = []
        self.function_keys: dict[tuple, int] = {}
        self.locations: list[dict] = []
        self.location_keys: dict[tuple, int] = {}

    def map_mapping(self, m: dict | None) -> tuple[int, int]:
        """(merged mapping id or 0, address offset)."""
        if m is None:
            return 0, 0
        size = m["memory_limit"] - m["memory_start"]
        size = (size + 0xFFF) - ((size + 0xFFF) % 0x1000)
        key = (size & 0xFFFFFFFFFFFFFFFF, m["file_offset"], m["build_id"] or m["filename"])
        mid = self.mapping_keys.get(key)
        if mid is not None:
            merged = self.mappings[mid - 1]
            return mid, merged["memory_start"] - m["memory_start"]
        mid = len(self.mappings) + 1
        self.mappings.append({**m, "id": mid})
        self.mapping_keys[key] = mid
        return mid, 0

    def map_function(self, f: dict | None) -> int:
        if f is None:
            return 0
        key = (f["start_line"], f["name"], f["system_name"], f["filename"])
        fid = self.function_keys.get(key)
        if fid is None:
            fid = len(self.functions) + 1
            self.functions.append({**f, "id": fid})
            self.function_keys[key] = fid
        return fid


def _merge(srcs: list[Profile]) -> Profile:
    header = _header(srcs)
    mg = _Merger()
    sample_keys: dict[tuple, int] = {}
    out_locs: list[list[int]] = []
    out_labels: list[list[dict]] = []
    group_of: list[np.ndarray] = []
    all_values: list[np.ndarray] = []

    for src in srcs:
        maps = {m["id"]: m for m in src.mappings.to_pylist()}
        map_cache: dict[int, tuple[int, int]] = {}
        if not mg.mappings and src.mappings.num_rows:
            first = src.mappings.slice(0, 1).to_pylist()[0]
            map_cache[first["id"]] = mg.map_mapping(first)
        funcs = {f["id"]: f for f in src.functions.to_pylist()}
        func_cache: dict[int, int] = {}

        values = _values_matrix(src)
        nonzero = np.flatnonzero((values != 0).any(axis=1)) if values.size else np.zeros(0, int)
        offsets, flat = list_parts(src.samples.column("location_ids"))
        flat_ids = to_np(flat, np.uint64)
        # Locations in order of first use by the kept samples (pprof maps them lazily).
        counts = np.diff(offsets)
        used_mask = np.repeat(np.isin(np.arange(len(counts)), nonzero), counts)
        used_ids = flat_ids[used_mask]
        _, first_pos = np.unique(used_ids, return_index=True)
        order_ids = used_ids[np.sort(first_pos)]
        loc_index = IdIndex(to_np(src.locations.column("id"), np.uint64))
        loc_rows = loc_index.rows(order_ids)
        locs = src.locations.take(from_numpy(np.maximum(loc_rows, 0))).to_pylist()
        merged_of: dict[int, int] = {}
        for lid, row, loc in zip(order_ids.tolist(), loc_rows.tolist(), locs, strict=True):
            if row < 0:
                continue
            mid_src = loc["mapping_id"]
            if mid_src not in map_cache:
                map_cache[mid_src] = mg.map_mapping(maps.get(mid_src))
            mid, offset = map_cache[mid_src]
            address = (loc["address"] + offset) & 0xFFFFFFFFFFFFFFFF
            lines = []
            for ln in loc["lines"]:
                fid = ln["function_id"]
                if fid not in func_cache:
                    func_cache[fid] = mg.map_function(funcs.get(fid))
                lines.append(
                    {"function_id": func_cache[fid], "line": ln["line"], "column": ln["column"]}
                )
            key_addr = address
            if mid:
                key_addr = (address - mg.mappings[mid - 1]["memory_start"]) & 0xFFFFFFFFFFFFFFFF
            key = (key_addr, mid, _lines_key(lines), loc["is_folded"])
            merged = mg.location_keys.get(key)
            if merged is None:
                merged = len(mg.locations) + 1
                mg.location_keys[key] = merged
                mg.locations.append(
                    {
                        "id": merged,
                        "mapping_id": mid,
                        "address": address,
                        "is_folded": loc["is_folded"],
                        "lines": lines,
                    }
                )
            merged_of[lid] = merged

        # Samples: key = merged location ids + canonical labels.
        lookup_keys = np.array(list(merged_of), dtype=np.uint64)
        lookup_vals = np.array(list(merged_of.values()), dtype=np.int64)
        srt = np.argsort(lookup_keys)
        lookup_keys, lookup_vals = lookup_keys[srt], lookup_vals[srt]
        mapped = np.zeros(len(flat_ids), dtype=np.int64)
        if len(lookup_keys):
            pos = np.minimum(np.searchsorted(lookup_keys, flat_ids), len(lookup_keys) - 1)
            hit = lookup_keys[pos] == flat_ids
            mapped = np.where(hit, lookup_vals[pos], 0)
        labels_col = src.samples.column("labels")
        has_labels = np.diff(list_parts(labels_col)[0]) > 0
        groups = np.empty(len(nonzero), dtype=np.int64)
        for j, s in enumerate(nonzero.tolist()):
            ids = mapped[offsets[s] : offsets[s + 1]]
            ids = ids[ids != 0]
            lbls = labels_col[s].as_py() if has_labels[s] else []
            key = (ids.tobytes(), _label_key(lbls) if lbls else ())
            g = sample_keys.get(key)
            if g is None:
                g = len(out_locs)
                sample_keys[key] = g
                out_locs.append(ids.tolist())
                out_labels.append(lbls)
            groups[j] = g
        group_of.append(groups)
        all_values.append(values[nonzero])

    k = len(header["sample_types"])
    summed = np.zeros((len(out_locs), k), dtype=np.int64)
    for groups, vals in zip(group_of, all_values, strict=True):
        if len(groups):
            np.add.at(summed, groups, vals)

    n = len(out_locs)
    loc_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, out_locs), dtype=np.int64, count=n), out=loc_offsets[1:])
    flat_locs = np.fromiter(
        itertools.chain.from_iterable(out_locs), np.uint64, int(loc_offsets[-1])
    )
    label_type = schema.PROFILE_SAMPLES.field("labels").type
    samples = pa.Table.from_arrays(
        [
            pa.ListArray.from_arrays(
                from_numpy(loc_offsets, pa.int32()), from_numpy(flat_locs, pa.uint64())
            ),
            pa.ListArray.from_arrays(
                from_numpy(np.arange(n + 1, dtype=np.int64) * k, pa.int32()),
                from_numpy(summed.reshape(-1), pa.int64()),
            ),
            # pa.array only when there are labels (it loads pandas, see pyproflab.arrays).
            pa.array(out_labels, label_type)
            if any(out_labels)
            else empty_lists(n, label_type.value_type),
        ],
        schema=schema.PROFILE_SAMPLES,
    )
    result = Profile(
        samples=samples,
        locations=pa.Table.from_pylist(mg.locations, schema=schema.PROFILE_LOCATIONS),
        functions=pa.Table.from_pylist(mg.functions, schema=schema.PROFILE_FUNCTIONS),
        mappings=pa.Table.from_pylist(mg.mappings, schema=schema.PROFILE_MAPPINGS),
        **header,
    )
    if len(summed) and not (summed != 0).any(axis=1).all():
        # Samples that cancelled out: pprof merges the result once more to drop them.
        return _merge([result])
    return result


def _lines_key(lines: list[dict]) -> str:
    """pprof's location key for lines. Its slots overlap (line i's column slot is
    line i+1's function slot), so it is reproduced slot for slot."""
    slots = [""] * (len(lines) * 3)
    for i, ln in enumerate(lines):
        if ln["function_id"]:
            slots[i * 2] = format(ln["function_id"], "x")
        slots[i * 2 + 1] = _hex(ln["line"])
        slots[i * 2 + 2] = _hex(ln["column"])
    return "|".join(slots)


def _hex(v: int) -> str:
    return format(v, "x") if v >= 0 else "-" + format(-v, "x")
