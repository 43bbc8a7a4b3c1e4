"""Arrow schemas, one named constant per table.

Two families:

- ``PROFILE_*``: a single decoded profile in memory (``pyproflab.model.Profile``).
  Ids are the profile's own; strings are resolved from its string table.
- ``STORE_*`` (and ``METRIC_*``, ``GC_*``, ``JOB_*``): the store's tables. These
  constants are the one definition of each table: ingest builds exactly these
  shapes, and ``pyproflab/store/tables.py`` derives the DuckDB DDL from them
  (types, NOT NULL), adding only keys and defaults.

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

# --- the store ---------------------------------------------------------------------
#
# One row per profile in ``profiles``; its samples in ``samples``. Everything a
# sample points at (stacks, locations, functions, mappings, label sets) is
# stored once for the whole store, keyed by a 64-bit hash of its content, so
# the same function seen in a thousand profiles is one row and a fleet-wide
# GROUP BY function is one join. Ids of the dedup tables are computed by ingest
# from content alone (pyproflab/keying/ids.py), so a batch can be keyed before it
# touches the database. In DuckDB uint64 is UBIGINT, a non-nullable field is
# NOT NULL, and timestamps are microseconds in UTC (TIMESTAMPTZ).

TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")

# What every engine's ``counter_samples`` answers (analyses/regressions/reads.py):
# a counter summed over its label sets per instance and time.
COUNTER_SAMPLES = pa.schema(
    [
        ("service", pa.string()),
        ("instance", pa.string()),
        ("time", TIMESTAMP_UTC),
        ("value", pa.float64()),
    ]
)

# key -> value; the one row so far is ('schema_version', '2').
STORE_META = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("value", pa.string(), nullable=False),
    ]
)

VALUE_TYPE = pa.struct([pa.field("type", pa.string()), pa.field("unit", pa.string())])

STORE_PROFILES = pa.schema(
    [
        pa.field("profile_id", pa.int64(), nullable=False),  # assigned at ingest: 1, 2, ...
        # sha256 of the decompressed protobuf
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        # cpu heap allocs goroutine mutex block threadcreate wall other
        pa.field("profile_type", pa.string(), nullable=False),
        # user metadata (--label k=v, a sidecar), not sample labels
        pa.field("labels", pa.map_(pa.string(), pa.string())),
        pa.field("time", TIMESTAMP_UTC),  # time_nanos as a timestamp; null when none
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
        pa.field("window_start", TIMESTAMP_UTC),  # collection window, when collected live
        pa.field("window_end", TIMESTAMP_UTC),
        pa.field("source", pa.string()),  # the path or URL the bytes came from
        pa.field("ingested_at", TIMESTAMP_UTC, nullable=False),
        pa.field("num_samples", pa.int64(), nullable=False),
        # the profile's first mapping (pprof: the main binary); 0 when none
        pa.field("main_mapping_id", pa.uint64(), nullable=False),
    ]
)

# One row per sample of a profile, in file order. ``values`` is aligned with
# profiles.sample_types of its profile (wide, one list column: one row per sample
# rather than one per sample type; the view sample_values is the long form).
# label_set_id 0: the sample has no labels.
STORE_SAMPLES = pa.schema(
    [
        pa.field("profile_id", pa.int64(), nullable=False),
        pa.field("stack_id", pa.uint64(), nullable=False),
        pa.field("label_set_id", pa.uint64(), nullable=False),
        pa.field("values", pa.list_(pa.int64()), nullable=False),
    ]
)

# location_ids leaf first, as in the pprof format.
STORE_STACKS = pa.schema(
    [
        pa.field("stack_id", pa.uint64(), nullable=False),
        pa.field("location_ids", pa.list_(pa.uint64()), nullable=False),
    ]
)

# lines: innermost (inlined) function first, the enclosing function last;
# mapping_id 0: no mapping.
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

# Sample labels (string, or numeric with unit), one set per distinct list.
STORE_LABEL_SETS = pa.schema(
    [
        pa.field("label_set_id", pa.uint64(), nullable=False),
        pa.field("labels", pa.list_(LABEL), nullable=False),
    ]
)

# --- GC metrics (pyproflab/sources parses them, pyproflab/store/metrics.py stores them) ---
#
# METRIC_* rows come from Prometheus (text exposition or the HTTP API);
# GC_* rows from GODEBUG=gctrace=1 logs. Their store tables are created on every
# writable open if missing, so a store made before they existed gets them.

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

# The store's metric_samples rows: METRIC_SAMPLES plus who and where from (source:
# a file path or URL). Prometheus' own instance/job labels are kept when the rows
# came from a server; value keeps NaN and +-Inf. A sample is stored once per
# (service, instance, metric, labels, time) (store/metrics.py: a null service
# matches any).
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
# run numbers the process runs of one log (1, 2, ...: a restart, or another
# process writing to the same stream, is another run; sources/gctrace_runs.py).
GC_CYCLES = pa.schema(
    [
        pa.field("run", pa.int64(), nullable=False),
        pa.field("gc_num", pa.int64(), nullable=False),
        pa.field("seconds", pa.float64(), nullable=False),  # since process start
        pa.field("time", TIMESTAMP_UTC),  # process_start + seconds, when known
        pa.field("cpu_pct", pa.int64(), nullable=False),
        pa.field("clock_sweep_term_ms", pa.float64(), nullable=False),  # STW, wall clock
        pa.field("clock_mark_ms", pa.float64(), nullable=False),  # concurrent mark, wall
        pa.field("clock_mark_term_ms", pa.float64(), nullable=False),  # STW, wall clock
        pa.field("cpu_sweep_term_ms", pa.float64(), nullable=False),
        pa.field("cpu_assist_ms", pa.float64(), nullable=False),  # allocating goroutines
        pa.field("cpu_background_ms", pa.float64(), nullable=False),  # mark workers
        pa.field("cpu_idle_ms", pa.float64(), nullable=False),  # idle mark workers
        pa.field("cpu_mark_term_ms", pa.float64(), nullable=False),
        pa.field("heap_start_mb", pa.int64(), nullable=False),
        pa.field("heap_end_mb", pa.int64(), nullable=False),
        pa.field("heap_live_mb", pa.int64(), nullable=False),
        pa.field("heap_goal_mb", pa.int64(), nullable=False),
        pa.field("stacks_mb", pa.int64()),
        pa.field("globals_mb", pa.int64()),
        pa.field("procs", pa.int64(), nullable=False),  # GOMAXPROCS
        pa.field("forced", pa.bool_(), nullable=False),  # runtime.GC()
    ]
)

# The store's gc_cycles rows: GC_CYCLES plus who and where from (source: the log
# file's or stream's name; ingest refuses a row without one in its own words).
# A cycle is stored once per (service, instance, source, run, gc_num): the same
# line of the same process run of the same log.
STORE_GC_CYCLES = pa.schema(
    [
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        *GC_CYCLES,
        pa.field("source", pa.string()),  # NOT NULL in the store (store/tables.py)
    ]
)

# --- jobs (pyproflab/jobs/state.py) ---------------------------------------------------

# One row per job run that did work; fingerprint identifies its inputs, so a run
# over unchanged inputs is skipped. finished_at/exit_code are null while it runs.
JOB_RUNS = pa.schema(
    [
        pa.field("job", pa.string(), nullable=False),
        pa.field("run_id", pa.int64(), nullable=False),
        pa.field("fingerprint", pa.string(), nullable=False),
        pa.field("started_at", TIMESTAMP_UTC, nullable=False),
        pa.field("finished_at", TIMESTAMP_UTC),
        pa.field("exit_code", pa.int32()),
        pa.field("summary", pa.string()),
    ]
)

# One row per (job, file path, size, mtime) a drop source has seen, with what
# became of it (status).
JOB_FILES = pa.schema(
    [
        pa.field("job", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("mtime_ns", pa.int64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("seen_at", TIMESTAMP_UTC, nullable=False),
    ]
)

# --- Go execution traces (pyproflab-go trace; pyproflab/store/traces.py) --------------

# One row per stored trace: who and when, as profiles are keyed. ``time`` is the
# wall-clock time of its first event (the trace's clock snapshot, Go 1.25+; else
# the collection window's start or the file's mtime); every ``*_ns`` column of
# the trace_* tables counts nanoseconds from that first event. ``profile_ids``
# are its four blocking profiles (net, sync, syscall, sched) in ``profiles``.
STORE_TRACES = pa.schema(
    [
        pa.field("trace_id", pa.int64(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),  # sha256 of the file
        pa.field("service", pa.string()),
        pa.field("version", pa.string()),
        pa.field("instance", pa.string()),
        pa.field("labels", pa.map_(pa.string(), pa.string())),
        pa.field("time", TIMESTAMP_UTC, nullable=False),
        pa.field("duration_ns", pa.int64(), nullable=False),
        pa.field("go_version", pa.string(), nullable=False),  # "1.26": the format's
        pa.field("events", pa.int64(), nullable=False),
        pa.field("generations", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("window_start", TIMESTAMP_UTC),
        pa.field("window_end", TIMESTAMP_UTC),
        pa.field("source", pa.string()),
        pa.field("ingested_at", TIMESTAMP_UTC, nullable=False),
        pa.field("profile_ids", pa.list_(pa.int64()), nullable=False),
    ]
)

_TRACE_FRAME = pa.struct(
    [
        pa.field("func", pa.string(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("line", pa.int64(), nullable=False),
        pa.field("pc", pa.uint64(), nullable=False),
    ]
)
_WAIT = pa.struct(
    [pa.field("reason", pa.string(), nullable=False), pa.field("ns", pa.int64(), nullable=False)]
)


def _trace_table(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=nullable) for n, t, nullable in fields])


_I, _U, _S, _B = pa.int64(), pa.uint64(), pa.string(), pa.int8()

GO_STATES = ("undetermined", "notexist", "runnable", "running", "waiting", "syscall")

# The tables of one trace as the helper writes them (pyproflab/_go/internal/trace;
# a test holds the two equal). Stack ids number the trace's distinct stacks (0:
# none); goroutine, P and M ids are the runtime's (-1: none); task ids -1: none.
# In transitions, from_state/to_state are x/exp/trace's GoState codes, named by
# GO_STATES (the SQL macro go_state(code) names them too): a byte, not a
# string, because transitions are most of a trace's rows and strings most of
# their cost to store. duration_ns is the time spent in from_state since the
# transition into it (null when it came from undetermined/notexist, and for a
# transition from a state to itself, which does not end it); from_stack_id is
# the event stack of the transition into from_state (the stack `go tool trace -pprof` charges that
# time to; its reason is the goroutine's previous row's); stack_id is the
# goroutine's own stack at the transition, ev_stack_id the stack of whoever
# caused it (ev_g/ev_p/ev_m).
TRACE_TABLES: dict[str, pa.Schema] = {
    "stacks": _trace_table(("stack_id", _U, False), ("frames", pa.list_(_TRACE_FRAME), False)),
    "goroutines": _trace_table(
        *[("g", _I, False), ("name", _S, False), ("parent_g", _I, True)],
        *[("created_ns", _I, True), ("started_ns", _I, True), ("ended_ns", _I, True)],
        *[("creation_stack_id", _U, False), ("start_stack_id", _U, False)],
        *[(f"{s}_ns", _I, False) for s in ("running", "runnable", "syscall", "waiting")],
        *[("waiting", pa.list_(_WAIT), False), ("end_state", _S, False)],
    ),
    "transitions": _trace_table(
        *[("t_ns", _I, False), ("g", _I, False), ("from_state", _B, False)],
        *[("to_state", _B, False), ("reason", _S, False), ("duration_ns", _I, True)],
        *[("from_stack_id", _U, False), ("stack_id", _U, False)],
        *[("ev_stack_id", _U, False), ("ev_g", _I, False), ("ev_p", _I, False)],
        ("ev_m", _I, False),
    ),
    "procs": _trace_table(
        *[("p", _I, False), ("state", _S, False), ("start_ns", _I, False)],
        *[("end_ns", _I, False), ("m", _I, False)],
    ),
    # STW ("stop-the-world (reason)"), GC phases ("GC concurrent mark phase"),
    # sweeping and assists: scope global/proc/goroutine; end_ns null: still open.
    "ranges": _trace_table(
        *[("name", _S, False), ("scope", _S, False), ("resource", _I, False)],
        *[("start_ns", _I, False), ("end_ns", _I, True), ("stack_id", _U, False)],
        *[("g", _I, False), ("p", _I, False)],
    ),
    "metrics": _trace_table(("t_ns", _I, False), ("name", _S, False), ("value", _I, False)),
    "tasks": _trace_table(
        *[("task", _I, False), ("parent", _I, True), ("type", _S, False)],
        *[("start_ns", _I, True), ("end_ns", _I, True), ("start_g", _I, False)],
        ("end_g", _I, False),
    ),
    "regions": _trace_table(
        *[("g", _I, False), ("task", _I, False), ("type", _S, False)],
        *[("start_ns", _I, True), ("end_ns", _I, True), ("stack_id", _U, False)],
    ),
    "logs": _trace_table(
        *[("t_ns", _I, False), ("g", _I, False), ("task", _I, False)],
        *[("category", _S, False), ("message", _S, False)],
    ),
    # The four profiles of `go tool trace -pprof=KIND` as rows: kind net sync syscall sched.
    "blocking": _trace_table(
        *[("kind", _S, False), ("stack_id", _U, False), ("count", _I, False)],
        ("delay_ns", _I, False),
    ),
}

# The store's trace_NAME tables: each of TRACE_TABLES with the trace_id first.
STORE_TRACE_TABLES: dict[str, pa.Schema] = {
    name: pa.schema([pa.field("trace_id", pa.int64(), nullable=False), *s])
    for name, s in TRACE_TABLES.items()
}

# --- sources (pyproflab/store/sourced.py) -----------------------------------------------

# One row per item a source delivered into the store (its own key: a Datadog event
# id, a Pyroscope series and window), so a re-run of the source fetches only what
# is new. content_hash: the profile's (null for metric rows); status: new or present.
SOURCE_ITEMS = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("item", pa.string(), nullable=False),
        pa.field("content_hash", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("stored_at", TIMESTAMP_UTC, nullable=False),
    ]
)
