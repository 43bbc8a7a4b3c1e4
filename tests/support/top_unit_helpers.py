"""Helpers of tests/analyses/test_top_unit.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import pyarrow as pa

from pyproflab import schema
from pyproflab.model import Profile, ValueType


def build(samples, locations, functions, mappings=(), types=(("cpu", "nanoseconds"),), **kw):
    """A Profile from plain tuples.

    samples: (location ids leaf first, values[, labels]); locations: (id, mapping,
    [(function id, line)]); functions: (id, name, file[, start line]);
    mappings: (id, file).
    """
    srows = [
        {
            "location_ids": list(s[0]),
            "values": list(s[1]),
            "labels": list(s[2]) if len(s) > 2 else [],
        }
        for s in samples
    ]
    lrows = [
        {
            "id": i,
            "mapping_id": m,
            "address": 0x1000 + i,
            "is_folded": False,
            "lines": [{"function_id": f, "line": ln, "column": 0} for f, ln in lines],
        }
        for i, m, lines in locations
    ]
    frows = [
        {
            "id": f[0],
            "name": f[1],
            "system_name": f[1],
            "filename": f[2],
            "start_line": f[3] if len(f) > 3 else 0,
        }
        for f in functions
    ]
    mrows = [
        {
            "id": i,
            "memory_start": 0x1000 * i,
            "memory_limit": 0x1000 * i + 0x1000,
            "file_offset": 0,
            "filename": f,
            "build_id": "",
            "has_functions": True,
            "has_filenames": True,
            "has_line_numbers": True,
            "has_inline_frames": True,
        }
        for i, f in mappings
    ]
    return Profile(
        sample_types=[ValueType(t, u) for t, u in types],
        samples=pa.Table.from_pylist(srows, schema=schema.PROFILE_SAMPLES),
        locations=pa.Table.from_pylist(lrows, schema=schema.PROFILE_LOCATIONS),
        functions=pa.Table.from_pylist(frows, schema=schema.PROFILE_FUNCTIONS),
        mappings=pa.Table.from_pylist(mrows, schema=schema.PROFILE_MAPPINGS),
        period_type=ValueType("cpu", "nanoseconds"),
        period=10_000_000,
        **kw,
    )


def keys(result):
    cols = [result.rows.column(c).to_pylist() for c in ("label", "flat", "cum", "inline")]
    return list(zip(*cols, strict=True))


FUNCS = [
    (1, "main.main", "/src/main.go"),
    (2, "main.a", "/src/a.go"),
    (3, "main.b", "/src/b.go"),
    (4, "main.c", "/src/c.go"),
]


MAPS = [(1, "/bin/app")]
