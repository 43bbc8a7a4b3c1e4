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

# A decoded profile's labels: the same fields with every string a dictionary
# index into the profile's strings, so a value shared by many samples is held
# once (a 1 MiB label on 2,000 samples costs 1 MiB, not 2 GiB).
INTERNED = pa.dictionary(pa.int32(), pa.string())
PROFILE_LABEL = pa.struct(
    [
        pa.field("key", INTERNED, nullable=False),
        pa.field("str", INTERNED),
        pa.field("num", pa.int64()),
        pa.field("num_unit", INTERNED),
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
        pa.field("labels", pa.list_(PROFILE_LABEL), nullable=False),
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

# --- the store (pyproflab/store/sql/schema.sql) -------------------------------
#
# Arrow shapes of the rows ingest hands to DuckDB, column for column with
# schema.sql. uint64 is UBIGINT; timestamps are microseconds in UTC (TIMESTAMPTZ).

TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")

VALUE_TYPE = pa.struct([pa.field("type", pa.string()), pa.field("unit", pa.string())])

STORE_PROFILES = pa.schema(
    [
        pa.field("profile_id", pa.int64(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        pa.field("profile_type", pa.string(), nullable=False),
        pa.field("labels", pa.map_(pa.string(), pa.string())),
        pa.field("time", TIMESTAMP_UTC),
        pa.field("time_nanos", pa.int64(), nullable=False),
        pa.field("duration_nanos", pa.int64(), nullable=False),
        pa.field("period", pa.int64(), nullable=False),
        pa.field("period_type", pa.string()),
        pa.field("period_unit", pa.string()),
        pa.field("sample_types", pa.list_(VALUE_TYPE), nullable=False),
        pa.field("default_sample_type", pa.string(), nullable=False),
        pa.field("comments", pa.list_(pa.string()), nullable=False),
        pa.field("drop_frames", pa.string(), nullable=False),
        pa.field("keep_frames", pa.string(), nullable=False),
        pa.field("doc_url", pa.string(), nullable=False),
        pa.field("window_start", TIMESTAMP_UTC),
        pa.field("window_end", TIMESTAMP_UTC),
        pa.field("source", pa.string()),
        pa.field("ingested_at", TIMESTAMP_UTC, nullable=False),
        pa.field("num_samples", pa.int64(), nullable=False),
        pa.field("main_mapping_id", pa.uint64(), nullable=False),
    ]
)

STORE_SAMPLES = pa.schema(
    [
        pa.field("profile_id", pa.int64(), nullable=False),
        pa.field("stack_id", pa.uint64(), nullable=False),
        pa.field("label_set_id", pa.uint64(), nullable=False),
        pa.field("values", pa.list_(pa.int64()), nullable=False),
    ]
)

STORE_STACKS = pa.schema(
    [
        pa.field("stack_id", pa.uint64(), nullable=False),
        pa.field("location_ids", pa.list_(pa.uint64()), nullable=False),
    ]
)

STORE_LOCATIONS = pa.schema(
    [
        pa.field("location_id", pa.uint64(), nullable=False),
        pa.field("mapping_id", pa.uint64(), nullable=False),
        pa.field("address", pa.uint64(), nullable=False),
        pa.field("is_folded", pa.bool_(), nullable=False),
        pa.field("lines", pa.list_(LINE), nullable=False),
    ]
)

STORE_FUNCTIONS = pa.schema(
    [pa.field("function_id", pa.uint64(), nullable=False)] + list(PROFILE_FUNCTIONS)[1:]
)

STORE_MAPPINGS = pa.schema(
    [pa.field("mapping_id", pa.uint64(), nullable=False)] + list(PROFILE_MAPPINGS)[1:]
)

STORE_LABEL_SETS = pa.schema(
    [
        pa.field("label_set_id", pa.uint64(), nullable=False),
        pa.field("labels", pa.list_(LABEL), nullable=False),
    ]
)

# --- GC metrics (pyproflab/sources, pyproflab/store/sql/gc.sql) --------------
#
# METRIC_* rows come from Prometheus (text exposition or the HTTP API);
# GC_* rows from GODEBUG=gctrace=1 logs.

# labels: a map with keys in ascending order (so equal label sets are equal
# maps); the metric name is not among them (no ``__name__``). ``metric`` is the
# sample's own name (``x_bucket``, ``x_sum``, ``x_count`` for a histogram
# ``x``); ``type`` is its family's: counter gauge summary histogram untyped.
METRIC_LABELS = pa.map_(pa.string(), pa.string())

METRIC_SAMPLES = pa.schema(
    [
        pa.field("metric", pa.string(), nullable=False),
        pa.field("labels", METRIC_LABELS, nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("time", TIMESTAMP_UTC, nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ]
)

METRIC_TYPES = ("counter", "gauge", "summary", "histogram", "untyped")

# The store's metric_samples rows: METRIC_SAMPLES plus who and where from.
STORE_METRIC_SAMPLES = pa.schema(
    [
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        *METRIC_SAMPLES,
        pa.field("source", pa.string()),
    ]
)

# One row per gctrace line. Heap, stack and globals sizes are MiB as the
# runtime prints them (bytes >> 20, floored); times are milliseconds; cpu_pct
# is the integer cumulative GC CPU percentage since the process started.
# stacks_mb / globals_mb are null for Go < 1.21 logs, which do not print them.
GC_CYCLES = pa.schema(
    [
        pa.field("gc_num", pa.int64(), nullable=False),
        pa.field("seconds", pa.float64(), nullable=False),  # since process start
        pa.field("time", TIMESTAMP_UTC),  # process_start + seconds, when known
        pa.field("cpu_pct", pa.int64(), nullable=False),
        pa.field("clock_sweep_term_ms", pa.float64(), nullable=False),
        pa.field("clock_mark_ms", pa.float64(), nullable=False),
        pa.field("clock_mark_term_ms", pa.float64(), nullable=False),
        pa.field("cpu_sweep_term_ms", pa.float64(), nullable=False),
        pa.field("cpu_assist_ms", pa.float64(), nullable=False),
        pa.field("cpu_background_ms", pa.float64(), nullable=False),
        pa.field("cpu_idle_ms", pa.float64(), nullable=False),
        pa.field("cpu_mark_term_ms", pa.float64(), nullable=False),
        pa.field("heap_start_mb", pa.int64(), nullable=False),
        pa.field("heap_end_mb", pa.int64(), nullable=False),
        pa.field("heap_live_mb", pa.int64(), nullable=False),
        pa.field("heap_goal_mb", pa.int64(), nullable=False),
        pa.field("stacks_mb", pa.int64()),
        pa.field("globals_mb", pa.int64()),
        pa.field("procs", pa.int64(), nullable=False),
        pa.field("forced", pa.bool_(), nullable=False),
    ]
)

STORE_GC_CYCLES = pa.schema(
    [
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        *GC_CYCLES,
        pa.field("source", pa.string()),
    ]
)
