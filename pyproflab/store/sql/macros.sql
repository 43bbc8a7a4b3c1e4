-- Views and macros over the store, in the spirit of sqlprof. Recreated on
-- every writable open (CREATE OR REPLACE), so they always match this release.

-- One row per sample and sample type (the long form of samples."values").
CREATE OR REPLACE VIEW sample_values AS
SELECT profile_id, stack_id, label_set_id,
       sample_types[i]."type" AS sample_type,
       sample_types[i].unit   AS unit,
       "values"[i]            AS value
FROM (
    SELECT s.profile_id, s.stack_id, s.label_set_id, s."values", p.sample_types,
           unnest(range(1, len(s."values") + 1)) AS i
    FROM samples s
    JOIN profiles p ON p.profile_id = s.profile_id
);

-- One row per line of a location: line_index 0 is the innermost (inlined)
-- function, the last the enclosing one. A location without lines (not
-- symbolized) has one row, line_index 0, with NULL function columns.
CREATE OR REPLACE VIEW location_lines AS
WITH expanded AS (
    SELECT location_id, mapping_id, address,
           unnest(range(len(lines))) AS line_index,
           unnest(lines)             AS ln
    FROM locations
    WHERE len(lines) > 0
    UNION ALL
    SELECT location_id, mapping_id, address, 0 AS line_index,
           NULL::STRUCT(function_id UBIGINT, line BIGINT, "column" BIGINT) AS ln
    FROM locations
    WHERE len(lines) = 0
)
SELECT e.location_id, e.line_index, e.ln.function_id AS function_id,
       f.name, f.system_name, f.filename,
       e.ln.line AS line, e.ln."column" AS "column", f.start_line,
       m.filename AS mapping_filename, e.mapping_id, e.address
FROM expanded e
LEFT JOIN functions f ON f.function_id = e.ln.function_id
LEFT JOIN mappings m ON m.mapping_id = e.mapping_id AND e.mapping_id <> 0;

-- One row per location of a stack: position 0 is the leaf.
CREATE OR REPLACE VIEW stack_frames AS
SELECT stack_id,
       unnest(range(len(location_ids))) AS position,
       unnest(location_ids)             AS location_id
FROM stacks;

-- Function names of a stack, leaf first, inline frames expanded (innermost
-- first within a location); an unsymbolized frame shows its address in hex.
CREATE OR REPLACE MACRO stack(sid) AS (
    SELECT list(coalesce(ll.name, printf('0x%x', ll.address))
                ORDER BY sf.position, ll.line_index)
    FROM stack_frames sf
    JOIN location_lines ll ON ll.location_id = sf.location_id
    WHERE sf.stack_id = sid
);

-- The function where the samples of a stack were taken (leaf, innermost inline).
CREATE OR REPLACE MACRO leaf_func(sid) AS (stack(sid)[1]);

-- The outermost function of a stack (for Go, usually runtime.goexit or main).
CREATE OR REPLACE MACRO root_func(sid) AS (stack(sid)[-1]);

-- The name of a goroutine state code of trace_transitions (schema.GO_STATES).
CREATE OR REPLACE MACRO go_state(code) AS
    (['undetermined', 'notexist', 'runnable', 'running', 'waiting', 'syscall'])[code + 1];
