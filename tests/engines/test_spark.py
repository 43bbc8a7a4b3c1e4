"""The Spark engine (pyproflab/engines/spark_*): the same dataset and answers as DuckDB.

One folder of profiles (the repo's recorded fleet of 64 CPU profiles with
sidecars, the recorded Go profiles of other kinds under services with odd and
over-long names or none, a duplicate and a file that is not a profile) is
ingested twice: by the store (``ingest_paths`` then ``export_parquet``) and by
Spark (``ingest_dataset``, local[2]). The datasets must hold the same files and
the same rows (ingested_at aside), and the store must import the Spark one.
Then top of the fleet on Spark must equal the store's and `go tool pprof -top`
over the files, and regressions of its v1 against v2 the store's, row for row.
One Spark session serves the module (support/spark_helpers.py); without Java
or pyspark these tests skip and say which is missing.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.testenv import REPO, assert_same_rows, our_top_keys

TESTDATA = REPO / "tests" / "testdata"
FLEET = sorted((TESTDATA / "fleet_regressions").glob("*.pb.gz"))
LONG_SERVICE = "a service/with=odd %chars é " + "x" * 80


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The profiles both engines ingest (see the module docstring)."""
    root = tmp_path_factory.mktemp("profiles")
    meta = {
        p["file"]: p
        for p in json.loads((TESTDATA / "fleet_regressions" / "recording.json").read_text())[
            "profiles"
        ]
    }
    (root / "fleet").mkdir()
    for f in FLEET:
        shutil.copy(f, root / "fleet" / f.name)
        m = meta[f.name]
        side = {"service": "notesd", "version": m["version"], "instance": m["instance"]}
        (root / "fleet" / (f.name + ".json")).write_text(json.dumps(side))
    shutil.copy(FLEET[0], root / "fleet" / "zz-duplicate.pb.gz")
    (root / "go").mkdir()
    for i, f in enumerate(sorted((TESTDATA / "go").glob("*.pb.gz"))):
        shutil.copy(f, root / "go" / f.name)
        service = [None, LONG_SERVICE, "go tests/€"][i % 3]
        if service:
            (root / "go" / (f.name + ".json")).write_text(json.dumps({"service": service}))
    (root / "go" / "not-a-profile.pb.gz").write_bytes(b"\x1f\x8b this is not gzip")
    return root


@pytest.fixture(scope="module")
def duck(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(store, its export) of the folder."""
    from pyproflab.store import Store
    from pyproflab.store.ingest import ingest_paths
    from pyproflab.store.parquet import export_parquet

    d = tmp_path_factory.mktemp("duck")
    with Store.open(d / "store.duckdb") as store:
        ingest_paths(store, [folder])
        export_parquet(store, d / "dataset")
    return d / "store.duckdb", d / "dataset"


@pytest.fixture(scope="module")
def sparked(spark, folder: Path, tmp_path_factory: pytest.TempPathFactory):
    """(summary, dataset) of the folder ingested on Spark."""
    from pyproflab.engines.spark_ingest import ingest_dataset

    out = tmp_path_factory.mktemp("spark") / "dataset"
    return ingest_dataset(spark, [folder], out), out


def _files(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*.parquet"))


def test_spark_ingest_counts_and_refusals(sparked, duck):
    summary, out = sparked
    marker = json.loads((out / "_pyproflab_dataset.json").read_text())
    want = json.loads((duck[1] / "_pyproflab_dataset.json").read_text())
    assert marker["counts"] == want["counts"]
    assert summary.counts == want["counts"]
    assert summary.counts["profiles"] == len(FLEET) + 11
    assert summary.present == 1
    assert [Path(p).name for p, _ in summary.refused] == ["not-a-profile.pb.gz"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "temporary folders left"


def test_spark_dataset_has_the_export_layout(sparked, duck):
    _, out = sparked
    files = _files(out)
    assert files == _files(duck[1])
    assert any("__HIVE_DEFAULT_PARTITION__" in f for f in files)
    assert any("service=sha256-" in f for f in files)
    assert any("service=go%20tests%2F%E2%82%AC" in f for f in files)


DEDUP_IDS = {
    "stacks": "stack_id",
    "locations": "location_id",
    "functions": "function_id",
    "mappings": "mapping_id",
    "label_sets": "label_set_id",
}


@pytest.mark.parametrize("table", [*DEDUP_IDS, "profiles", "samples"])
def test_spark_rows_equal_the_export(table: str, sparked, duck):
    """Every file: the same rows, ids included, ingested_at aside. Profiles and
    samples in the same order (export orders them); a dedup table by its id,
    since the store's insert order of those rows (an anti-join) is not fixed."""
    _, out = sparked
    names = [f for f in _files(out) if f.split("/")[0].removesuffix(".parquet") == table]
    assert names
    for name in names:
        ours, theirs = pq.read_table(out / name), pq.read_table(duck[1] / name)
        if table == "profiles":
            ours, theirs = ours.drop_columns(["ingested_at"]), theirs.drop_columns(["ingested_at"])
        if table in DEDUP_IDS:
            ours, theirs = ours.sort_by(DEDUP_IDS[table]), theirs.sort_by(DEDUP_IDS[table])
        assert ours.num_rows == theirs.num_rows, name
        assert ours.schema.names == theirs.schema.names, name
        for col in theirs.column_names:
            assert ours.column(col).to_pylist() == theirs.column(col).to_pylist(), f"{name}: {col}"


def test_store_imports_the_spark_dataset(sparked, duck, tmp_path: Path):
    from pyproflab.store import Store
    from pyproflab.store.parquet import import_parquet

    _, out = sparked
    with (
        Store.open(tmp_path / "imported.duckdb") as store,
        Store.open(duck[0], read_only=True) as ref,
    ):
        report = import_parquet(store, out)
        assert report.new == ref.counts()["profiles"]
        assert store.counts() == ref.counts()
        again = import_parquet(store, out)
        assert (again.new, again.present) == (0, report.new)


def test_spark_ingest_refuses_a_used_folder(spark, folder: Path, tmp_path: Path):
    from pyproflab.engines.spark_ingest import ingest_dataset
    from pyproflab.errors import StoreError

    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(StoreError, match="not an empty folder"):
        ingest_dataset(spark, [folder], tmp_path / "used")


def _functions_df(spark, names: list[str]):
    """Exploded functions rows (profile_id, pos, STORE_FUNCTIONS), all with id 7."""
    import pyarrow as pa

    from pyproflab import schema
    from pyproflab.engines import spark_arrow as sa

    rows = [
        {"function_id": 7, "name": n, "system_name": n, "filename": "f.go", "start_line": 1}
        for n in names
    ]
    t = pa.Table.from_pylist(rows, schema=schema.STORE_FUNCTIONS)
    t = t.add_column(0, "pos", pa.array(range(len(rows)), pa.int64()))
    t = t.add_column(0, "profile_id", pa.array(range(1, len(rows) + 1), pa.int64()))
    signed = sa.signed_schema(t.schema)
    return spark.createDataFrame(sa.reinterpret(t, signed), schema=sa.spark_type(signed))


def test_two_rows_with_one_id_fail_the_write(spark, tmp_path: Path):
    """A forged collision (two functions, one id, different names) fails the write;
    the same content twice is one row."""
    from pyproflab import schema
    from pyproflab.engines.spark_ingest import write_first_rows

    args = ("functions", "function_id", schema.STORE_FUNCTIONS, str(tmp_path))
    with pytest.raises(Exception, match="id 7 names two different rows"):
        write_first_rows(_functions_df(spark, ["main.a", "main.b"]), *args)
    (written,) = write_first_rows(_functions_df(spark, ["main.a", "main.a"]), *args)
    assert written["rows"] == 1


# --- top on Spark -----------------------------------------------------------------------


@pytest.mark.parametrize("cum", [False, True], ids=["flat", "cum"])
@pytest.mark.parametrize("index", [0, 1], ids=["samples", "cpu"])
def test_spark_top_equals_store_and_pprof(index: int, cum: bool, spark, sparked, duck, pprof):
    from pyproflab import open_spark
    from pyproflab.analyses.top import top
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    sel = Selection(service="notesd")
    ours = open_spark(spark, sparked[1]).top(sel, sample_index=index, cum_sort=cum)
    with Store.open(duck[0], read_only=True) as store:
        want = top(store.merged_profile(sel), sample_index=index, cum_sort=cum)
    assert ours.rows.equals(want.rows)
    assert ours.total == want.total
    assert_same_rows(our_top_keys(ours), pprof.top(FLEET, sample_index=index, cum=cum), "spark top")


def test_spark_merged_profile_equals_the_store(spark, sparked, duck):
    from pyproflab import open_spark
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    sel = Selection(service="notesd", version="v2")
    ours = open_spark(spark, sparked[1]).merged_profile(sel)
    with Store.open(duck[0], read_only=True) as store:
        want = store.merged_profile(sel)
    for name in ("samples", "locations", "functions", "mappings"):
        assert getattr(ours, name).equals(getattr(want, name)), name
    assert (ours.sample_types, ours.period, ours.duration_nanos, ours.time_nanos) == (
        want.sample_types,
        want.period,
        want.duration_nanos,
        want.time_nanos,
    )


def test_spark_refuses_a_mixed_selection(spark, sparked):
    from pyproflab import open_spark
    from pyproflab.errors import UsageError

    with pytest.raises(UsageError, match="kinds of profile"):
        open_spark(spark, sparked[1]).merged_profile()


def test_cli_top_engine_spark(sparked, pprof):
    """`pyproflab top --engine spark --dataset D --service notesd --nodefraction 0 --format csv`
    (its own JVM) == pprof -top -nodefraction=0, the oracle's flags. Its stderr holds
    nothing of Spark's (helper-85: progress bars, log4j WARN lines, pyspark's pandas
    FutureWarning), only the JVM launcher's own line, which no option turns off."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyproflab",
            "top",
            "--engine",
            "spark",
            "--dataset",
            str(sparked[1]),
            "--service",
            "notesd",
            "--sample-index",
            "1",
            "--nodefraction",
            "0",
            "--format",
            "csv",
            "--spark-conf",
            "spark.sql.shuffle.partitions=2",
            "--spark-conf",
            "spark.ui.enabled=false",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    launcher = "WARNING: Using incubator modules"
    assert [ln for ln in res.stderr.splitlines() if not ln.startswith(launcher)] == []
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    ours = [(r["name"], int(r["flat"]), int(r["cum"]), r.get("inline") or "") for r in rows]
    assert_same_rows(ours, pprof.top(FLEET, sample_index=1), "CLI spark top")


def test_docs_spark_example_runs(spark, tmp_path: Path, monkeypatch):
    """docs/spark.md's example, as written, on the fleet under service ``api``
    (its getOrCreate returns this run's session). A session it starts itself has
    its Python workers on this interpreter: without PYSPARK_PYTHON they ran the
    ``python3`` on PATH (a venv not activated, a kernel of `make lab`), which
    has no pyproflab."""
    import re

    text = (REPO / "docs" / "spark.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    (tmp_path / "profiles").mkdir()
    for f in FLEET[:8]:  # a few: the example's API is what is checked here
        shutil.copy(f, tmp_path / "profiles" / f.name)
        (tmp_path / "profiles" / (f.name + ".json")).write_text('{"service": "api"}')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    ns: dict = {"__name__": "example"}
    exec(compile(code, "docs/spark.md", "exec"), ns)  # noqa: S102
    assert os.environ.get("PYSPARK_PYTHON") == sys.executable
    assert ns["result"].rows.num_rows > 0
    assert ns["profile"].samples.num_rows > 0
    assert (tmp_path / "fleet-dataset" / "_pyproflab_dataset.json").is_file()


def _by_time_taken(files: list[Path]) -> list[Path]:
    """The files in the order a store merges their profiles: by time taken, then
    content hash (the SHA-256 of the decompressed bytes), not by name."""
    import gzip
    import hashlib

    from support.testenv import api_read

    def key(p: Path) -> tuple[int, str]:
        return api_read(p).time_nanos, hashlib.sha256(gzip.decompress(p.read_bytes())).hexdigest()

    return sorted(files, key=key)


def test_spark_merge_to_a_file_equals_pprof_proto(spark, sparked, pprof, tmp_path: Path):
    """The merge written as a pprof file (write_profile of merged_profile on Spark)
    equals `go tool pprof -proto` of the 64 files: sample types, default, header,
    every table with its ids (one binary, so no mapping for pprof to unify), and
    top at every sample index of pprof's merged file."""
    from collections import Counter

    from support import pprof_oracle as oracle
    from support.testenv import api_read, api_top, describe_diff

    import pyproflab
    from pyproflab.store.select import Selection

    merged = pyproflab.open_spark(spark, sparked[1]).merged_profile(Selection(service="notesd"))
    pyproflab.write_profile(merged, tmp_path / "ours.pb.gz")
    ours = api_read(tmp_path / "ours.pb.gz")
    theirs = oracle.merge_proto(_by_time_taken(FLEET), tmp_path / "pprof.pb.gz")
    raw = pprof.raw(theirs)
    assert [(t.type, t.unit) for t in ours.sample_types] == raw.sample_types
    assert (ours.default_sample_type or "") == raw.default_type
    back = api_read(theirs)
    assert (ours.period, ours.time_nanos, ours.duration_nanos) == (
        back.period,
        back.time_nanos,
        back.duration_nanos,
    )
    for name in ("samples", "locations", "functions", "mappings"):
        mine, want_rows = getattr(ours, name).to_pylist(), getattr(back, name).to_pylist()
        for row in (*mine, *want_rows) if name == "samples" else ():
            row["labels"] = sorted(row["labels"], key=repr)  # a map to pprof
        assert mine == want_rows, name
    for index in range(len(raw.sample_types)):
        want = pprof.top(theirs, sample_index=index).multiset()
        mine = Counter(our_top_keys(api_top(ours, sample_index=index)))
        assert mine == want, f"index {index}: {describe_diff(mine, want, 5)}"


def test_cli_spark_refuses_a_folder_that_is_no_dataset(tmp_path: Path):
    """One line, exit 2, before any JVM starts."""
    res = subprocess.run(
        [sys.executable, "-m", "pyproflab", "top", "--engine", "spark", "--dataset", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    assert "not a pyproflab Parquet dataset" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# --- regressions on Spark ---------------------------------------------------------------


def _assert_same_table(ours, want, what: str) -> None:
    """Row for row: floats within 1e-9 relative (NaN where NaN), the rest exact."""
    import numpy as np
    import pyarrow as pa

    assert ours.schema == want.schema, what
    assert ours.num_rows == want.num_rows, what
    for name in want.column_names:
        a, b = ours.column(name), want.column(name)
        if pa.types.is_floating(b.type):
            np.testing.assert_allclose(
                a.to_numpy(zero_copy_only=False),
                b.to_numpy(zero_copy_only=False),
                rtol=1e-9,
                atol=0,
                equal_nan=True,
                err_msg=f"{what}: {name}",
            )
        else:
            assert a.to_pylist() == b.to_pylist(), f"{what}: {name}"


OTHER_OPTIONS = {
    "granularity": "lines",
    "measure": "rate",
    "unit": "instance",
    "test": "permutation",
    "inlines": False,
}


@pytest.mark.parametrize("options", [{}, OTHER_OPTIONS], ids=["defaults", "others"])
def test_spark_regressions_equal_the_store(options: dict, spark, sparked, duck):
    """notesd v1 against v2 with the default options (shares, quasi-Poisson,
    unit profile, functions), and with others: Spark's result equals the
    store's, row for row."""
    from pyproflab import open_spark
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    base, new = Selection(service="notesd", version="v1"), Selection(service="notesd", version="v2")
    ours = open_spark(spark, sparked[1]).regressions(base, new, **options)
    with Store.open(duck[0], read_only=True) as store:
        want = regressions(store, base, new, **options)
    assert want.statistics and want.rows.num_rows > 0
    assert want.edges.num_rows > 0 or options  # 2 instances a side: no edge is significant
    for name in ("rows", "edges", "per_profile", "profiles", "stacks"):
        _assert_same_table(getattr(ours, name), getattr(want, name), name)
    for name in ("labels", "notes", "sample_type", "sample_index", "rate_unit", "n_base", "n_new"):
        assert getattr(ours, name) == getattr(want, name), name
    for name in ("total_base", "total_new", "n_units_base", "n_units_new", "statistics"):
        assert getattr(ours, name) == getattr(want, name), name
    assert ours.rate_factor == pytest.approx(want.rate_factor, rel=1e-9)


def test_spark_regressions_refuse_a_counter(spark, sparked):
    """per=COUNTER needs metric samples, which the dataset has not: one line, no job."""
    from pyproflab import open_spark
    from pyproflab.errors import UsageError
    from pyproflab.store.select import Selection

    dataset = open_spark(spark, sparked[1])
    with pytest.raises(UsageError, match="metric samples"):
        dataset.regressions(Selection(version="v1"), Selection(version="v2"), per="requests")


def test_spark_regressions_per_counter_equal_the_store(spark, tmp_path: Path):
    """per=COUNTER on the exported dataset (issue 35, finding 3): the metric
    samples travel with the profiles, so rates per request on Spark equal the
    store's (the planted load case: its request counter per profile window)."""
    from support import regdata

    from pyproflab import open_spark
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store.parquet import export_parquet
    from pyproflab.store.select import Selection

    if not (regdata.DATA / "load").is_dir():
        pytest.skip("no recorded regression data")
    store = regdata.store_of(tmp_path / "s.duckdb", ["load", "base-load"])
    base, new = Selection(instance="base-load"), Selection(instance="load")
    try:
        export_parquet(store, tmp_path / "ds")
        want = regressions(store, base, new, per="requests_total")
    finally:
        store.close()
    ours = open_spark(spark, tmp_path / "ds").regressions(base, new, per="requests_total")
    assert want.rows.num_rows > 0 and want.n_units_base == ours.n_units_base
    for name in ("rows", "per_profile", "profiles"):
        _assert_same_table(getattr(ours, name), getattr(want, name), name)
    assert ours.rate_unit == want.rate_unit and ours.notes == want.notes


def _regressions_cli(*args: str) -> list[dict[str, str]]:
    """The csv rows of `pyproflab regressions` with notesd v1 as base, v2 as new."""
    sides = ["--base", "service=notesd", "version=v1", "--new", "service=notesd", "version=v2"]
    res = subprocess.run(
        [sys.executable, "-m", "pyproflab", "regressions", *sides, "--format", "csv", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(res.stdout)))


def test_cli_regressions_engine_spark(sparked, duck):
    """`pyproflab regressions --engine spark --dataset D` prints the store's rows
    (`--db`): every field equal, numbers within 1e-9 relative."""
    ours = _regressions_cli(
        "--engine",
        "spark",
        "--dataset",
        str(sparked[1]),
        "--spark-conf",
        "spark.sql.shuffle.partitions=2",
        "--spark-conf",
        "spark.ui.enabled=false",
    )
    want = _regressions_cli("--db", str(duck[0]))
    assert want and len(ours) == len(want)
    for mine, theirs in zip(ours, want, strict=True):
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            try:
                number = float(value)
            except ValueError:
                assert mine[key] == value, key
                continue
            assert float(mine[key]) == pytest.approx(number, rel=1e-9, nan_ok=True), key


def test_cli_regressions_spark_refuses_store_options(tmp_path: Path):
    """--over-time needs the store: one line, exit 2, before any JVM starts."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyproflab",
            "regressions",
            "--engine",
            "spark",
            "--dataset",
            str(tmp_path),
            "--service",
            "notesd",
            "--over-time",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr[-2000:]
    assert "needs the store" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_cli_top_spark_says_what_top_db_says_of_cpu_coverage(spark, tmp_path: Path, capsys):
    """top on the export of a store says what top --db says, the note on CPU
    profiles holding less CPU than their processes used included (cpucover's
    1000 Hz recording: a quarter). Before, Spark left the note out (helper-79:
    the demo store's top --service notesd --type cpu, 75 % of 0.432 cores)."""
    from pyproflab.cli import main

    recorded = TESTDATA / "cpucover" / "hz1000"
    db, ds = tmp_path / "s.duckdb", tmp_path / "ds"
    meta = ["--db", str(db), "--service", "burner", "--instance", "hz1000"]
    assert main(["ingest", *meta, *map(str, sorted(recorded.glob("cpu-*.pb.gz")))]) == 0
    assert main(["ingest-gc", *meta, "--format", "prom", str(recorded / "metrics.prom")]) == 0
    assert main(["export", "--db", str(db), "--parquet", str(ds)]) == 0
    capsys.readouterr()
    outputs = []
    for fmt in ("text", "json"):
        for source in (["--db", str(db)], ["--engine", "spark", "--dataset", str(ds)]):
            assert main(["top", "--service", "burner", *source, "--format", fmt]) == 0
            outputs.append(capsys.readouterr().out)
    assert "CPU profiles hold less CPU than the processes used" in outputs[0]
    assert outputs[1] == outputs[0] and outputs[3] == outputs[2]
