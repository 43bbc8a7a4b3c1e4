"""The Store: opening, session settings, errors at the boundary, SQL, views and macros."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from support.store_helpers import make_profile
from support.testenv import CORPUS, SKIP_NO_CORPUS

from pyproflab.errors import StoreError
from pyproflab.store import Store, tables
from pyproflab.store.connection import SCHEMA_VERSION
from pyproflab.store.ingest import ProfileMeta, ingest, ingest_paths

TABLES = ("profiles", "samples", "stacks", "locations", "functions", "mappings", "label_sets")


def test_open_memory_creates_schema() -> None:
    with Store.open(":memory:") as store:
        assert store.counts() == dict.fromkeys(TABLES, 0)
        rows = store.sql("SELECT value FROM store_meta WHERE key = 'schema_version'")
        assert rows.column(0).to_pylist() == [str(SCHEMA_VERSION)]


def test_session_settings() -> None:
    with Store.open(":memory:") as store:
        row = store.sql(
            "SELECT current_setting('TimeZone') AS tz, "
            "current_setting('python_enable_replacements') AS repl"
        ).to_pylist()[0]
        assert row == {"tz": "UTC", "repl": False}
        shadow = pa.table({"x": [1]})  # noqa: F841 - must NOT be visible to SQL
        with pytest.raises(StoreError):
            store.sql("SELECT * FROM shadow")
        with store.registered(shadow=pa.table({"x": [1, 2]})):
            assert store.sql("SELECT sum(x) FROM shadow").column(0)[0].as_py() == 3


def test_file_store_reopen_read_only(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store.open(db) as store:
        ingest(store, [(make_profile([(["main.a", "main.main"], [1, 10])]), ProfileMeta())])
    with Store.open(db, read_only=True) as store:
        assert store.counts()["profiles"] == 1
        assert store.read_only
        with pytest.raises(StoreError, match="read-only"):
            ingest(store, [(make_profile([(["main.b"], [1, 10])]), ProfileMeta())])


def test_open_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing.duckdb"
    with pytest.raises(StoreError, match="missing.duckdb: no such store"):
        Store.open(missing, read_only=True)
    with pytest.raises(StoreError, match="no such store"):
        Store.open(missing, create=False)
    assert not missing.exists()
    junk = tmp_path / "junk.duckdb"
    junk.write_text("hello, I am not a database\n" * 200)
    with pytest.raises(StoreError) as e:
        Store.open(junk)
    assert str(junk) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(StoreError, match="is a directory"):
        Store.open(tmp_path)


def test_read_only_plain_duckdb_is_not_a_store(tmp_path: Path) -> None:
    db = tmp_path / "plain.duckdb"
    duckdb.connect(str(db)).close()
    with pytest.raises(StoreError, match="not a pyproflab store"):
        Store.open(db, read_only=True)


def test_from_connection_adopts_and_leaves_open() -> None:
    con = duckdb.connect(":memory:")
    store = Store.from_connection(con)
    assert store.counts()["profiles"] == 0
    store.close()
    assert con.execute("SELECT count(*) FROM profiles").fetchone() == (0,)
    Store.from_connection(con).close()  # schema present: adopted again as is


def test_sql_binds_parameters_and_translates_errors() -> None:
    with Store.open(":memory:") as store:
        tricky = "x'); DROP TABLE profiles; --"
        got = store.sql("SELECT ? AS v, $2::INT AS n", [tricky, 5]).to_pylist()
        assert got == [{"v": tricky, "n": 5}]
        assert store.sql("SELECT $a AS a", {"a": 1}).to_pylist() == [{"a": 1}]
        with pytest.raises(StoreError, match="query failed") as e:
            store.sql("SELEC nonsense")
        assert isinstance(e.value.__cause__, duckdb.Error)
    with pytest.raises(StoreError, match="closed"):
        store.sql("SELECT 1")


# --- views and macros, on a real profile --------------------------------------------

PROFILE1 = CORPUS / "parca/pkg/query/testdata/profile1.pb.gz"


@pytest.fixture(scope="module")
def real_store():
    if not PROFILE1.is_file():
        pytest.skip(SKIP_NO_CORPUS)
    store = Store.open(":memory:")
    report = ingest_paths(store, [PROFILE1], ProfileMeta(service="conprof"))
    assert report.new == 1
    yield store
    store.close()


def test_sample_values_is_long(real_store: Store) -> None:
    t = real_store.sql(
        "SELECT sample_type, unit, sum(value) AS total, count(*) AS n FROM sample_values "
        "GROUP BY ALL ORDER BY sample_type"
    ).to_pylist()
    samples = real_store.sql(
        'SELECT sum("values"[1]) AS s, sum("values"[2]) AS c, count(*) AS n FROM samples'
    ).to_pylist()[0]
    assert t == [
        {"sample_type": "cpu", "unit": "nanoseconds", "total": samples["c"], "n": samples["n"]},
        {"sample_type": "samples", "unit": "count", "total": samples["s"], "n": samples["n"]},
    ]


def test_location_lines_and_stack_frames(real_store: Store) -> None:
    lines = real_store.sql("SELECT * FROM location_lines")
    assert set(lines.column_names) >= {
        "location_id",
        "line_index",
        "function_id",
        "name",
        "system_name",
        "filename",
        "line",
        "column",
        "start_line",
        "mapping_filename",
    }
    n_lines = real_store.sql("SELECT sum(greatest(len(lines), 1)) FROM locations")
    assert lines.num_rows == n_lines.column(0)[0].as_py()
    frames = real_store.sql("SELECT count(*) AS n, min(position) AS lo FROM stack_frames")
    total = real_store.sql("SELECT sum(len(location_ids)) FROM stacks").column(0)[0].as_py()
    assert frames.to_pylist() == [{"n": total, "lo": 0}]


def test_stack_macros(real_store: Store) -> None:
    rows = real_store.sql(
        "SELECT stack(stack_id) AS st, leaf_func(stack_id) AS leaf, root_func(stack_id) AS root "
        "FROM (SELECT DISTINCT stack_id FROM samples)"
    ).to_pylist()
    assert rows
    for r in rows:
        assert r["leaf"] == r["st"][0] and r["root"] == r["st"][-1]
    # pprof -top's flat column, by function: what leaf_func sums to.
    top = real_store.sql(
        'SELECT leaf_func(stack_id) AS f, sum("values"[2]) AS flat FROM samples '
        "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"
    ).to_pylist()
    assert top == [{"f": "syscall.Syscall", "flat": 160_000_000}]


def _bare(t: pa.DataType) -> pa.DataType:
    """A type without its child fields' names and null flags (DuckDB names a
    list's item ``l`` and returns every child nullable)."""
    if pa.types.is_map(t):
        return pa.map_(_bare(t.key_type), _bare(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(_bare(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(f.name, _bare(f.type)) for f in t])
    return t


@pytest.mark.parametrize("table", tables.ALL, ids=lambda t: t.name)
def test_each_table_is_its_arrow_schema(table: tables.Table) -> None:
    """The DDL derived from ``pyproflab.schema`` makes exactly that table: same
    columns in order, the Arrow types back on a read, NOT NULL where not nullable."""
    with Store.open(":memory:") as store:
        # JOBS and SOURCES are made on demand (by the first job, the first keyed ingest).
        store.execute(tables.ddl(tables.JOBS + tables.SOURCES))
        read = store.sql(f"SELECT * FROM {table.name} LIMIT 0").schema
        cols = store.sql(
            "SELECT column_name, is_nullable FROM duckdb_columns() "
            "WHERE table_name = ? ORDER BY column_index",
            [table.name],
        ).to_pylist()
    assert read.names == table.columns.names
    for f in table.columns:
        assert _bare(read.field(f.name).type) == _bare(f.type), f.name
    not_null = {c["column_name"] for c in cols if not c["is_nullable"]}
    extra = {c for c, sql in table.column_sql.items() if "NOT NULL" in sql or "PRIMARY" in sql}
    assert not_null == {f.name for f in table.columns if not f.nullable} | extra | set(
        table.primary_key
    )


def test_ddl_has_no_type_it_cannot_map() -> None:
    with pytest.raises(TypeError, match="no DuckDB type"):
        tables.duckdb_type(pa.float16())


def test_merging_two_period_types_says_what_to_narrow() -> None:
    """Heap profiles of Go (space/bytes) and of another runtime (no period type)
    share a profile type: the error names both period types and how to narrow
    the selection, not 'select one profile type' (one was selected)."""
    from pyproflab.store.merge import merge_headers

    heap = [{"type": "inuse_space", "unit": "bytes"}]
    rows = [
        {"profile_id": 1, "period_type": "space", "period_unit": "bytes", "sample_types": heap},
        {"profile_id": 2, "period_type": None, "period_unit": None, "sample_types": heap},
    ]
    with pytest.raises(StoreError) as e:
        merge_headers(rows)
    msg = str(e.value)
    assert "space/bytes (profile 1) and none (profile 2)" in msg
    assert "one period type (by service, instance or profile id" in msg
    assert "select one profile type" not in msg


class _Interrupting:
    """A connection that ends every query as DuckDB ends one on Ctrl-C: it takes
    SIGINT itself and raises InterruptException (running the statement) or
    RuntimeError 'Query interrupted' (fetching its rows), never KeyboardInterrupt."""

    def __init__(self, con, error: BaseException) -> None:
        self._con, self.error = con, error

    def sql(self, *args, **kwargs):
        raise self.error

    execute = sql

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


@pytest.mark.parametrize(
    "error",
    [duckdb.InterruptException("INTERRUPT Error: Interrupted!"), RuntimeError("Query interrupted")],
    ids=["running", "fetching"],
)
def test_ctrl_c_in_a_query_is_an_interrupt_not_an_error(tmp_path: Path, error) -> None:
    """pyproflab report under SIGINT at chosen moments: at 2.5 s it wrote the
    report without one chart and exited 0 (the interrupt had become a StoreError,
    which skips a section); at 8 s it printed a traceback ('RuntimeError: Query
    interrupted') and exited 2 as a bug. Either is Ctrl-C: KeyboardInterrupt."""
    with Store.open(tmp_path / "s.duckdb") as store:
        store.con = _Interrupting(store.con, error)
        with pytest.raises(KeyboardInterrupt):
            store.sql("SELECT 1")
        with pytest.raises(KeyboardInterrupt):
            store.execute("SELECT 1")
