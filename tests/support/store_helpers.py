"""Helpers for the store tests: tiny in-memory profiles and a canonical form.

(No tests here; the name only puts the file among the store's test files.)
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from pyproflab import schema
from pyproflab.model import Profile, ValueType

CPU_TYPES = [ValueType("samples", "count"), ValueType("cpu", "nanoseconds")]
CPU_PERIOD = ValueType("cpu", "nanoseconds")


def make_profile(
    samples: list[tuple[list[str], list[int]] | tuple[list[str], list[int], list[dict]]],
    *,
    sample_types: list[ValueType] | None = None,
    period_type: ValueType | None = CPU_PERIOD,
    period: int = 10_000_000,
    time_nanos: int = 1_700_000_000_000_000_000,
    duration_nanos: int = 1_000_000_000,
    default_sample_type: str = "",
    comments: list[str] | None = None,
    id_base: int = 1,
) -> Profile:
    """A Profile from (stack of function names leaf first, values[, labels]) rows.

    One function and one location per name; ids start at ``id_base`` so two
    profiles of the same content can have different ids.
    """
    names: list[str] = []
    for row in samples:
        for n in row[0]:
            if n not in names:
                names.append(n)
    fid = {n: id_base + i for i, n in enumerate(names)}
    lid = {n: 10 * id_base + 100 + i for i, n in enumerate(names)}
    functions = pa.table(
        {
            "id": pa.array([fid[n] for n in names], pa.uint64()),
            "name": names,
            "system_name": names,
            "filename": [f"{n.split('.')[0]}.go" for n in names],
            "start_line": pa.array([10] * len(names), pa.int64()),
        },
        schema=schema.PROFILE_FUNCTIONS,
    )
    locations = pa.table(
        {
            "id": pa.array([lid[n] for n in names], pa.uint64()),
            "mapping_id": pa.array([7] * len(names), pa.uint64()),
            "address": pa.array([0x1000 + 16 * i for i in range(len(names))], pa.uint64()),
            "is_folded": [False] * len(names),
            "lines": [[{"function_id": fid[n], "line": 20, "column": 0}] for n in names],
        },
        schema=schema.PROFILE_LOCATIONS,
    )
    mappings = pa.table(
        {
            "id": pa.array([7], pa.uint64()),
            "memory_start": pa.array([0x1000], pa.uint64()),
            "memory_limit": pa.array([0x9000], pa.uint64()),
            "file_offset": pa.array([0], pa.uint64()),
            "filename": ["/bin/app"],
            "build_id": ["abc"],
            "has_functions": [True],
            "has_filenames": [True],
            "has_line_numbers": [True],
            "has_inline_frames": [False],
        },
        schema=schema.PROFILE_MAPPINGS,
    )
    rows = {
        "location_ids": [[lid[n] for n in r[0]] for r in samples],
        "values": [list(r[1]) for r in samples],
        "labels": [list(r[2]) if len(r) > 2 else [] for r in samples],  # type: ignore[misc]
    }
    return Profile(
        sample_types=list(sample_types or CPU_TYPES),
        samples=pa.table(rows, schema=schema.PROFILE_SAMPLES),
        locations=locations,
        functions=functions,
        mappings=mappings,
        period_type=period_type,
        period=period,
        time_nanos=time_nanos,
        duration_nanos=duration_nanos,
        comments=list(comments or []),
        default_sample_type=default_sample_type,
    )


def label(key: str, value: str | int, unit: str | None = None) -> dict:
    if isinstance(value, int):
        return {"key": key, "str": None, "num": value, "num_unit": unit}
    return {"key": key, "str": value, "num": None, "num_unit": None}


def canonical(profile: Profile, *, merge: bool = True) -> Counter | list:
    """Samples by content: ((locations as (address, folded, ((function, line), …)), …),
    sorted labels) -> summed values; with ``merge=False`` the list in order."""
    fn = {r["id"]: r["name"] for r in profile.functions.to_pylist()}
    locs = {
        r["id"]: (
            r["address"],
            r["is_folded"],
            tuple((fn.get(ln["function_id"]), ln["line"]) for ln in r["lines"]),
        )
        for r in profile.locations.to_pylist()
    }
    out: list = []
    for s in profile.samples.to_pylist():
        key = (
            tuple(locs[i] for i in s["location_ids"]),
            tuple(sorted((lb["key"], lb["str"], lb["num"], lb["num_unit"]) for lb in s["labels"])),
        )
        out.append((key, tuple(s["values"])))
    if not merge:
        return out
    acc: dict = {}
    for key, vals in out:
        cur = acc.setdefault(key, [0] * len(vals))
        for i, v in enumerate(vals):
            cur[i] += v
    return Counter({k: tuple(v) for k, v in acc.items() if any(v)})


def check_ids(profile: Profile) -> None:
    """A Profile's location/function/mapping ids are non-zero and unique, and
    every reference resolves."""
    for t in (profile.locations, profile.functions, profile.mappings):
        got = t.column("id").to_pylist()
        assert 0 not in got and len(set(got)) == len(got)
    loc_ids = set(profile.locations.column("id").to_pylist())
    fn_ids = set(profile.functions.column("id").to_pylist())
    map_ids = set(profile.mappings.column("id").to_pylist()) | {0}
    for ids in profile.samples.column("location_ids").to_pylist():
        assert set(ids) <= loc_ids
    for r in profile.locations.to_pylist():
        assert r["mapping_id"] in map_ids
        assert {ln["function_id"] for ln in r["lines"]} <= fn_ids
    for name, s in (
        ("samples", schema.PROFILE_SAMPLES),
        ("locations", schema.PROFILE_LOCATIONS),
        ("functions", schema.PROFILE_FUNCTIONS),
        ("mappings", schema.PROFILE_MAPPINGS),
    ):
        assert getattr(profile, name).schema.equals(s), name
