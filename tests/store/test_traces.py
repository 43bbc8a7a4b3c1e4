"""Storing traces: the helper's tables as the schema says, keyed like profiles,
all or nothing, once per content, recognised by `ingest` by their header."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from support.trace_helpers import damaged_traces, one_line_error, run_cli, trace_path

from pyproflab import schema
from pyproflab.decode.gotrace import read_trace
from pyproflab.errors import TraceError
from pyproflab.keying.keys import ProfileMeta
from pyproflab.store import Store
from pyproflab.store.traces import ingest_trace

pytestmark = pytest.mark.go


def _counts(store: Store) -> dict[str, int]:
    names = ["traces", "profiles", *(f"trace_{n}" for n in schema.TRACE_TABLES)]
    return {n: store.sql(f"SELECT count(*) FROM {n}")[0][0].as_py() for n in names}


def test_the_helper_writes_the_schema_s_tables() -> None:
    tables, profiles = read_trace(trace_path("many"))
    for name, s in schema.TRACE_TABLES.items():
        assert tables[name].schema.equals(s), name
        assert tables[name].num_rows, name  # the many program has every kind of row
    assert sorted(profiles) == ["net", "sched", "sync", "syscall"]


def test_a_trace_is_stored_once_with_its_key(tmp_path: Path) -> None:
    meta = ProfileMeta(service="svc", version="v1", instance="i-1", labels={"zone": "a"})
    with Store.open(tmp_path / "s.duckdb") as store:
        first = ingest_trace(store, trace_path("net"), meta, batch_rows=100)
        assert not first.present and first.rows["transitions"] > 100  # several batches
        again = ingest_trace(store, trace_path("net"), meta)
        assert again.present and again.trace_id == first.trace_id
        row = store.sql("SELECT * FROM traces").to_pylist()[0]
        assert (row["service"], row["version"], row["instance"]) == ("svc", "v1", "i-1")
        assert row["go_version"] == "1.26" and row["profile_ids"] == first.profile_ids
        types = store.sql(
            "SELECT profile_type, service, time FROM profiles ORDER BY profile_id"
        ).to_pylist()
        assert [t["profile_type"] for t in types] == [
            "trace-net",
            "trace-sync",
            "trace-syscall",
            "trace-sched",
        ]
        assert all(t["service"] == "svc" and t["time"] == row["time"] for t in types)
        counts = _counts(store)
        assert counts["trace_transitions"] == first.rows["transitions"]


def test_a_damaged_trace_leaves_nothing(tmp_path: Path) -> None:
    bad = damaged_traces(tmp_path)
    with Store.open(tmp_path / "s.duckdb") as store:
        ingest_trace(store, trace_path("mutex"))
        before = _counts(store)
        for name in ("truncated", "header-only", "bit-flipped", "go1.19", "text"):
            with pytest.raises(TraceError) as e:
                ingest_trace(store, bad[name])
            assert "\n" not in str(e.value) and str(bad[name]) in str(e.value)
            assert _counts(store) == before, name


def test_ingest_recognises_trace_files_by_header(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.bin").write_bytes(trace_path("mutex").read_bytes())  # no .trace suffix
    (folder / "cpu.pb.gz").write_bytes(
        (Path(__file__).resolve().parents[1] / "testdata" / "go" / "cpu.pb.gz").read_bytes()
    )
    db = tmp_path / "s.duckdb"
    res = run_cli("ingest", folder, "--db", db, "--service", "svc", "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().endswith("; 1 trace stored"), res.stdout  # was "1 traces"
    with Store.open(db, read_only=True) as store:
        assert _counts(store)["traces"] == 1
        assert store.sql("SELECT count(*) FROM profiles")[0][0].as_py() == 5  # cpu + 4
    bad = damaged_traces(tmp_path)
    res = run_cli("ingest", bad["truncated"], "--db", db)  # every input refused: exit 2
    assert res.returncode == 2 and "refused" in res.stderr and "truncated" in res.stderr


def test_a_gzipped_trace_is_named_as_one(tmp_path: Path) -> None:
    gz = tmp_path / "chan.trace.gz"
    gz.write_bytes(gzip.compress(trace_path("chan").read_bytes()))
    db = tmp_path / "s.duckdb"
    res = run_cli("ingest", gz, "--db", db)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"refused {gz}: a gzip-compressed Go execution trace" in res.stderr
    assert "gunzip" in res.stderr
    one_line_error(run_cli("trace", "goroutines", gz), str(gz), "gzip-compressed", "gunzip")


def test_an_old_trace_names_its_version(tmp_path: Path) -> None:
    bad = damaged_traces(tmp_path)
    one_line_error(run_cli("trace", "goroutines", bad["go1.19"]), "Go 1.19", "1.22")


def test_ingest_summary_counts_traces_in_words() -> None:
    from pyproflab.store.ingest_report import IngestReport

    assert IngestReport(new=4, traces=1).summary().endswith("; 1 trace stored")
    assert IngestReport(new=8, traces=2).summary().endswith("; 2 traces stored")
    assert "trace" not in IngestReport(new=1).summary()
