-- The pyproflab store, schema version 1.
--
-- One row per profile in `profiles`; its samples in `samples`. Everything a
-- sample points at (stacks, locations, functions, mappings, label sets) is
-- stored once for the whole store, keyed by a 64-bit hash of its content, so
-- the same function seen in a thousand profiles is one row and a fleet-wide
-- GROUP BY function is one join. Ids of the dedup tables are computed by
-- ingest from content alone (see pyproflab/store/ids.py), so a batch can be
-- keyed before it touches the database.

CREATE TABLE IF NOT EXISTS store_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

CREATE TABLE IF NOT EXISTS profiles (
    profile_id          BIGINT PRIMARY KEY,      -- assigned at ingest, 1, 2, ...
    content_hash        VARCHAR NOT NULL UNIQUE, -- sha256 of the decompressed protobuf
    service             VARCHAR,
    version             VARCHAR,
    instance            VARCHAR,
    profile_type        VARCHAR NOT NULL,        -- cpu heap allocs goroutine mutex block threadcreate wall other
    labels              MAP(VARCHAR, VARCHAR),   -- user metadata (--label k=v, sidecar), not sample labels
    time                TIMESTAMPTZ,             -- time_nanos as a timestamp; NULL when the profile has none
    time_nanos          BIGINT NOT NULL,
    duration_nanos      BIGINT NOT NULL,
    period              BIGINT NOT NULL,
    period_type         VARCHAR,
    period_unit         VARCHAR,
    sample_types        STRUCT("type" VARCHAR, unit VARCHAR)[] NOT NULL,
    default_sample_type VARCHAR NOT NULL,
    comments            VARCHAR[] NOT NULL,
    drop_frames         VARCHAR NOT NULL,
    keep_frames         VARCHAR NOT NULL,
    doc_url             VARCHAR NOT NULL,
    window_start        TIMESTAMPTZ,             -- collection window, when collected live
    window_end          TIMESTAMPTZ,
    source              VARCHAR,                 -- path or URL the bytes came from
    ingested_at         TIMESTAMPTZ NOT NULL,
    num_samples         BIGINT NOT NULL,
    main_mapping_id     UBIGINT NOT NULL DEFAULT 0 -- the profile's first mapping (pprof: the main binary); 0 none
);

-- One row per sample of a profile, in file order. `values` is aligned with
-- profiles.sample_types of its profile (wide in one list column: one row per
-- sample rather than one per sample type; the view sample_values is long).
CREATE TABLE IF NOT EXISTS samples (
    profile_id   BIGINT NOT NULL,
    stack_id     UBIGINT NOT NULL,
    label_set_id UBIGINT NOT NULL,   -- 0: the sample has no labels
    "values"     BIGINT[] NOT NULL
);

-- location_ids leaf first, as in the pprof format.
CREATE TABLE IF NOT EXISTS stacks (
    stack_id     UBIGINT NOT NULL,
    location_ids UBIGINT[] NOT NULL
);

-- lines: innermost (inlined) function first, the enclosing function last.
CREATE TABLE IF NOT EXISTS locations (
    location_id UBIGINT NOT NULL,
    mapping_id  UBIGINT NOT NULL,    -- 0: no mapping
    address     UBIGINT NOT NULL,
    is_folded   BOOLEAN NOT NULL,
    lines       STRUCT(function_id UBIGINT, line BIGINT, "column" BIGINT)[] NOT NULL
);

CREATE TABLE IF NOT EXISTS functions (
    function_id UBIGINT NOT NULL,
    name        VARCHAR NOT NULL,
    system_name VARCHAR NOT NULL,
    filename    VARCHAR NOT NULL,
    start_line  BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS mappings (
    mapping_id        UBIGINT NOT NULL,
    memory_start      UBIGINT NOT NULL,
    memory_limit      UBIGINT NOT NULL,
    file_offset       UBIGINT NOT NULL,
    filename          VARCHAR NOT NULL,
    build_id          VARCHAR NOT NULL,
    has_functions     BOOLEAN NOT NULL,
    has_filenames     BOOLEAN NOT NULL,
    has_line_numbers  BOOLEAN NOT NULL,
    has_inline_frames BOOLEAN NOT NULL
);

-- Sample labels (string, or numeric with unit), one set per distinct list.
CREATE TABLE IF NOT EXISTS label_sets (
    label_set_id UBIGINT NOT NULL,
    labels       STRUCT("key" VARCHAR, str VARCHAR, num BIGINT, num_unit VARCHAR)[] NOT NULL
);
