-- GC metrics beside the profiles (pyproflab/store/metrics.py writes them).
-- Loaded after schema.sql on every writable open; CREATE ... IF NOT EXISTS,
-- so a store made before these tables existed gets them on its next open.

-- One row per Prometheus sample: from text exposition (scrapes, saved files)
-- or from a Prometheus server's query_range. labels: the series' labels
-- without __name__, keys ascending (Prometheus' instance/job included when
-- they came from a server). type is the family's: counter gauge summary
-- histogram untyped. A sample is stored once per (instance, metric, labels, time).
CREATE TABLE IF NOT EXISTS metric_samples (
    service  VARCHAR,
    version  VARCHAR,
    instance VARCHAR,
    metric   VARCHAR NOT NULL,
    labels   MAP(VARCHAR, VARCHAR) NOT NULL,
    "type"   VARCHAR NOT NULL,
    time     TIMESTAMPTZ NOT NULL,
    value    DOUBLE NOT NULL,        -- NaN and +-Inf kept as such
    source   VARCHAR                 -- file path or URL
);

-- One row per GODEBUG=gctrace=1 line (pyproflab/sources/gctrace.py). Sizes
-- are MiB as the runtime prints them (bytes >> 20, floored); times are ms.
-- A cycle is stored once per (instance, source, gc_num).
CREATE TABLE IF NOT EXISTS gc_cycles (
    service             VARCHAR,
    version             VARCHAR,
    instance            VARCHAR,
    gc_num              BIGINT NOT NULL,
    seconds             DOUBLE NOT NULL,  -- since the process (runtime) started
    time                TIMESTAMPTZ,      -- process start + seconds, when known
    cpu_pct             BIGINT NOT NULL,  -- cumulative GC CPU % since start
    clock_sweep_term_ms DOUBLE NOT NULL,  -- STW sweep termination, wall clock
    clock_mark_ms       DOUBLE NOT NULL,  -- concurrent mark, wall clock
    clock_mark_term_ms  DOUBLE NOT NULL,  -- STW mark termination, wall clock
    cpu_sweep_term_ms   DOUBLE NOT NULL,
    cpu_assist_ms       DOUBLE NOT NULL,  -- mark assists by allocating goroutines
    cpu_background_ms   DOUBLE NOT NULL,  -- dedicated + fractional mark workers
    cpu_idle_ms         DOUBLE NOT NULL,  -- idle mark workers
    cpu_mark_term_ms    DOUBLE NOT NULL,
    heap_start_mb       BIGINT NOT NULL,
    heap_end_mb         BIGINT NOT NULL,
    heap_live_mb        BIGINT NOT NULL,  -- marked live
    heap_goal_mb        BIGINT NOT NULL,
    stacks_mb           BIGINT,           -- NULL for Go < 1.21 logs
    globals_mb          BIGINT,
    procs               BIGINT NOT NULL,  -- GOMAXPROCS
    forced              BOOLEAN NOT NULL, -- runtime.GC()
    source              VARCHAR NOT NULL  -- the log file (or stream) name
);
