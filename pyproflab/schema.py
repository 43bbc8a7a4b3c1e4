"""Arrow schemas, one named constant per table.

Two families:

- ``PROFILE_*``: a single decoded profile in memory (``pyproflab.model.Profile``).
  Ids are the profile's own; strings are resolved from its string table.
- The store's tables are defined in ``pyproflab/store/sql/schema.sql``; the
  ``STORE_*`` constants here are the Arrow shapes that ingest builds before
  handing them to DuckDB, so both sides agree column by column.

Every loader produces exactly these schemas (tests check ``table.schema.equals``).
"""

from __future__ import annotations

import pyarrow as pa

# --- one decoded profile -----------------------------------------------------

LABEL = pa.struct(
    [
        pa.field("key", pa.string(), nullable=False),
        # Exactly one of str and num is set: a string label has num null,
        # a numeric label has str null.
        pa.field("str", pa.string()),
        pa.field("num", pa.int64()),
        pa.field("num_unit", pa.string()),
    ]
)

LINE = pa.struct(
    [
        pa.field("function_id", pa.uint64(), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("column", pa.int64(), nullable=False),
    ]
)

# One row per sample, in file order. location_ids are leaf first; values has
# one entry per sample type; labels is empty (not null) when there are none.
PROFILE_SAMPLES = pa.schema(
    [
        pa.field("location_ids", pa.list_(pa.uint64()), nullable=False),
        pa.field("values", pa.list_(pa.int64()), nullable=False),
        pa.field("labels", pa.list_(LABEL), nullable=False),
    ]
)

# lines: innermost (inlined) function first, the enclosing function last.
PROFILE_LOCATIONS = pa.schema(
    [
        pa.field("id", pa.uint64(), nullable=False),
        pa.field("mapping_id", pa.uint64(), nullable=False),
        pa.field("address", pa.uint64(), nullable=False),
        pa.field("is_folded", pa.bool_(), nullable=False),
        pa.field("lines", pa.list_(LINE), nullable=False),
    ]
)

PROFILE_FUNCTIONS = pa.schema(
    [
        pa.field("id", pa.uint64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("system_name", pa.string(), nullable=False),
        pa.field("filename", pa.string(), nullable=False),
        pa.field("start_line", pa.int64(), nullable=False),
    ]
)

PROFILE_MAPPINGS = pa.schema(
    [
        pa.field("id", pa.uint64(), nullable=False),
        pa.field("memory_start", pa.uint64(), nullable=False),
        pa.field("memory_limit", pa.uint64(), nullable=False),
        pa.field("file_offset", pa.uint64(), nullable=False),
        pa.field("filename", pa.string(), nullable=False),
        pa.field("build_id", pa.string(), nullable=False),
        pa.field("has_functions", pa.bool_(), nullable=False),
        pa.field("has_filenames", pa.bool_(), nullable=False),
        pa.field("has_line_numbers", pa.bool_(), nullable=False),
        pa.field("has_inline_frames", pa.bool_(), nullable=False),
    ]
)
