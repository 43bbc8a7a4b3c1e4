"""The GODEBUG=gctrace=1 parser and gc_cycles ingest, on captured and live output."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pyproflab import schema
from pyproflab.errors import MetricsError
from pyproflab.sources.gctrace import parse_gctrace, read_gctrace
from pyproflab.store.connection import Store
from pyproflab.store.metrics import ingest_gc_cycles

GC_DATA = Path(__file__).resolve().parents[1] / "testdata" / "gc"
CAPTURED = GC_DATA / "gctrace-go1.26.log"
START = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)

LINE = (
    "gc 6 @0.009s 5%: 0.12+3.6+0.003 ms clock, 0.24+0/0.13/0+0.006 ms cpu, "
    "17->80->67 MB, 20 MB goal, 0 MB stacks, 0 MB globals, 2 P"
)


def test_captured_log_one_row_per_cycle():
    t = read_gctrace(CAPTURED, process_start=START)
    assert t.schema.equals(schema.GC_CYCLES)
    # gcprog printed "numgc 20 forced 2" for this run.
    assert t.column("gc_num").to_pylist() == list(range(1, 21))
    assert t.column("forced").to_pylist() == [False] * 18 + [True, True]
    # gc 18 @0.016s 7%: 0.021+0.57+0.036 ms clock, 0.042+0.014/0.25/0+0.073 ms cpu,
    #     10->14->7 MB, 12 MB goal, 0 MB stacks, 0 MB globals, 2 P
    row = t.to_pylist()[17]
    assert row == {
        "run": 1,
        "gc_num": 18,
        "seconds": 0.016,
        "time": START + timedelta(milliseconds=16),
        "cpu_pct": 7,
        "clock_sweep_term_ms": 0.021,
        "clock_mark_ms": 0.57,
        "clock_mark_term_ms": 0.036,
        "cpu_sweep_term_ms": 0.042,
        "cpu_assist_ms": 0.014,
        "cpu_background_ms": 0.25,
        "cpu_idle_ms": 0.0,
        "cpu_mark_term_ms": 0.073,
        "heap_start_mb": 10,
        "heap_end_mb": 14,
        "heap_live_mb": 7,
        "heap_goal_mb": 12,
        "stacks_mb": 0,
        "globals_mb": 0,
        "procs": 2,
        "forced": False,
    }


def test_without_process_start_time_is_null():
    t = parse_gctrace([LINE], source="s")
    assert t.column("time").to_pylist() == [None]
    assert t.column("seconds").to_pylist() == [0.009]


def test_other_lines_are_skipped():
    text = "\n".join(
        [
            "GC forced",
            LINE.replace("gc 6", "gc 7") + " (forced)",
            "scvg: 0 MB released",
            "scvg: inuse: 3, idle: 60, sys: 63, released: 60, consumed: 3 (MB)",
            "round 3 done",
            "gcmark: something else",
            "  gc 8 @120.5s 1%: 0.01+1.0+0.02 ms clock, 0.04+0.1/0.2/0.3+0.05 ms cpu, "
            "4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 4 P\r",
            "",
        ]
    )
    t = parse_gctrace(text, source="s")
    assert t.column("gc_num").to_pylist() == [7, 8]
    assert t.column("forced").to_pylist() == [True, False]


def test_very_large_heap_and_long_phases():
    line = (
        "gc 123456 @86400.123s 12%: 1.5+2345+3.2 ms clock, 96+1200/4500/800+200 ms cpu, "
        "262144->270000->131072 MB, 268435 MB goal, 512 MB stacks, 64 MB globals, 256 P"
    )
    r = parse_gctrace([line], source="s", process_start=START).to_pylist()[0]
    assert r["gc_num"] == 123456
    assert r["heap_start_mb"] == 262144 and r["heap_goal_mb"] == 268435
    assert r["clock_mark_ms"] == 2345.0 and r["cpu_background_ms"] == 4500.0
    assert r["procs"] == 256 and r["stacks_mb"] == 512 and r["globals_mb"] == 64
    assert r["time"] == START + timedelta(seconds=86400.123)


def test_older_format_without_stacks_and_globals():
    line = (
        "gc 1 @0.004s 2%: 0.010+0.29+0.002 ms clock, 0.041+0.10/0.21/0.30+0.010 ms cpu, "
        "4->4->0 MB, 5 MB goal, 4 P"
    )
    r = parse_gctrace([line], source="s").to_pylist()[0]
    assert r["stacks_mb"] is None and r["globals_mb"] is None and r["procs"] == 4


def test_annotation_after_percentage_is_accepted():
    line = LINE.replace("5%:", "5% (checking for goroutine leaks):")
    assert parse_gctrace([line], source="s").column("gc_num").to_pylist() == [6]


@pytest.mark.parametrize(
    "bad",
    [
        LINE.replace("17->80->67 MB", "17->80 MB"),
        LINE.replace(" ms clock", " us clock"),
        LINE.replace("2 P", "two P"),
        LINE + " trailing",
        "gc 7 @0.5s",
    ],
)
def test_malformed_gctrace_line_names_source_and_line(bad):
    with pytest.raises(MetricsError) as ei:
        parse_gctrace(["hello", LINE, bad], source="svc.log")
    assert ei.value.line == 3
    assert str(ei.value).startswith("svc.log:3: malformed gctrace line")


def test_ingest_gc_cycles_idempotent():
    t = read_gctrace(CAPTURED, process_start=START)
    with Store.open(":memory:") as store:
        kw = {"service": "api", "version": "v1", "instance": "i-1"}
        assert ingest_gc_cycles(store, t, source="a.log", **kw) == 20
        assert ingest_gc_cycles(store, t, source="a.log", **kw) == 0
        # The same cycle numbers from another log (another process) are other cycles.
        assert ingest_gc_cycles(store, t, source="b.log", **kw) == 20
        assert (
            ingest_gc_cycles(
                store, t.slice(0, 3), source="b.log", instance="i-2", service="api", version="v1"
            )
            == 3
        )
        row = store.sql(
            "SELECT * FROM gc_cycles WHERE source = ? AND gc_num = 19", ["a.log"]
        ).to_pylist()[0]
        assert row["service"] == "api" and row["forced"] is True
        assert row["heap_goal_mb"] == 15 and row["time"] == START + timedelta(seconds=0.016)
        assert store.sql("SELECT count(*) FROM gc_cycles").column(0)[0].as_py() == 43


@pytest.fixture(scope="module")
def gcprog(tmp_path_factory) -> Path:
    if shutil.which("go") is None:
        pytest.skip("Go is not installed (`go` not on PATH); the live gctrace test needs it")
    out = tmp_path_factory.mktemp("gcprog") / "gcprog"
    subprocess.run(
        ["go", "build", "-o", str(out), "."], cwd=GC_DATA / "gcprog", check=True, timeout=120
    )
    return out


def test_live_go_program(gcprog):
    """Run a Go program with GODEBUG=gctrace=1 and parse its stderr: one row per
    cycle the runtime counted, the forced ones marked."""
    env = dict(os.environ, GODEBUG="gctrace=1")
    start = datetime.now(UTC)
    proc = subprocess.run(
        [str(gcprog), "-rounds", "30", "-forced", "3", "-mb", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    words = proc.stdout.split()
    numgc, nforced = int(words[1]), int(words[3])
    t = parse_gctrace(proc.stderr.splitlines(), source="gcprog stderr", process_start=start)
    assert t.num_rows == numgc
    assert t.column("gc_num").to_pylist() == list(range(1, numgc + 1))
    assert sum(t.column("forced").to_pylist()) == nforced == 3
    assert t.column("forced").to_pylist()[-3:] == [True, True, True]
    rows = t.to_pylist()
    assert all(r["heap_live_mb"] <= r["heap_end_mb"] for r in rows)
    assert all(r["procs"] >= 1 for r in rows)
    assert all(r["time"] >= start for r in rows)
    seconds = [r["seconds"] for r in rows]
    assert seconds == sorted(seconds)


INTERLEAVED = GC_DATA / "gctrace-interleaved.log"  # gcprog printed: numgc 17 forced 2


def test_split_line_raises_or_is_collected():
    """Program output on stderr split a gctrace line: strict parsing names it;
    with an errors list the other cycles are kept and the loss is counted."""
    with pytest.raises(MetricsError) as ei:
        read_gctrace(INTERLEAVED)
    assert ei.value.line == 2 and "gc 2round 0 done" in str(ei.value)
    errors: list[MetricsError] = []
    t = read_gctrace(INTERLEAVED, errors=errors)
    assert [e.line for e in errors] == [2]
    assert t.num_rows + len(errors) == 17
    assert 2 not in t.column("gc_num").to_pylist()


@pytest.mark.parametrize("line", ["gc 5 items collected", "gcprog started", "gc: ok"])
def test_lines_that_only_look_alike_are_skipped(line):
    assert parse_gctrace([line], source="s").num_rows == 0


# --- the CLI ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")],
)
def test_a_log_with_a_byte_order_mark_is_read_in_its_encoding(tmp_path, encoding, bom):
    # Windows shells write redirected output with a BOM (PowerShell 5: UTF-16).
    text = CAPTURED.read_text()
    log = tmp_path / "gc.log"
    log.write_bytes(bom + text.replace("\n", "\r\n").encode(encoding))
    want = read_gctrace(CAPTURED, process_start=START)
    assert read_gctrace(log, process_start=START).equals(want)


def test_cli_ingest_gctrace(tmp_path, capsys):
    from pyproflab.cli import main

    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(CAPTURED), "--format", "gctrace", "--db", str(db)]
    argv += ["--service", "gcprog", "--version", "v1", "--instance", "i-1"]
    argv += ["--process-start", "2025-03-01T12:00:00Z"]
    assert main(argv) == 0
    assert capsys.readouterr().out == "1 file, 20 gc cycles: 20 new, 0 already present\n"
    assert main(argv) == 0
    assert capsys.readouterr().out == "1 file, 20 gc cycles: 0 new, 20 already present\n"
    with Store.open(db, read_only=True) as store:
        row = store.sql(
            "SELECT service, version, instance, source, time FROM gc_cycles WHERE gc_num = 1"
        ).to_pylist()[0]
    assert row == {
        "service": "gcprog",
        "version": "v1",
        "instance": "i-1",
        "source": str(CAPTURED),
        "time": START,
    }


def test_cli_bad_file_stores_nothing(tmp_path, capsys):
    from pyproflab.cli import main

    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(CAPTURED), str(INTERLEAVED), "--format", "gctrace"]
    assert main(argv + ["--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{INTERLEAVED}:2: malformed gctrace line" in err
    assert not db.exists()
    with Store.open(db) as store:
        pass
    assert main(argv + ["--db", str(db)]) == 2
    with Store.open(db, read_only=True) as store:
        assert store.sql("SELECT count(*) FROM gc_cycles").column(0)[0].as_py() == 0
    # --lenient keeps the rest and says how many lines it skipped.
    assert main(argv + ["--db", str(db), "--lenient"]) == 0
    out = capsys.readouterr()
    assert (
        out.out == "2 files, 36 gc cycles: 36 new, 0 already present, 1 malformed lines skipped\n"
    )
    assert "skipped" in out.err


def test_cli_ingest_prom_text(tmp_path, capsys):
    from pyproflab.cli import main

    prom = GC_DATA / "prometheus-2.42-metrics.prom"
    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(prom), "--format", "prom", "--db", str(db), "--instance", "p-1"]
    assert main(argv + ["--time", "2025-03-01T12:00:00Z"]) == 0
    assert capsys.readouterr().out == "1 file, 295 metric samples: 295 new, 0 already present\n"
    with Store.open(db, read_only=True) as store:
        got = store.sql("SELECT DISTINCT time, instance FROM metric_samples").to_pylist()
    assert got == [{"time": START, "instance": "p-1"}]
    # A gctrace log is not Prometheus text: one line naming file and line, exit 2.
    assert main(["ingest-gc", str(CAPTURED), "--format", "prom", "--db", str(db)]) == 2
    assert f"{CAPTURED}:1: expected integer as timestamp" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "nothing to read"),
        (["x.log"], "--format"),
        (["x.log", "--format", "gctrace"], "no such file"),
        ([str(CAPTURED), "--format", "gctrace", "--time", "1h"], "--time is for"),
        ([str(CAPTURED), "--format", "prom", "--process-start", "1h"], "--process-start is for"),
        (["--prometheus", "http://127.0.0.1:1"], "--since is required"),
        ([str(CAPTURED), "--prometheus", "http://127.0.0.1:1"], "not both"),
    ],
)
def test_cli_usage_errors(tmp_path, capsys, args, words):
    from pyproflab.cli import main

    assert main(["ingest-gc", "--db", str(tmp_path / "s.duckdb"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


@pytest.mark.parametrize("fmt", ["gctrace", "prom"])
def test_cli_file_with_nothing_of_its_format_is_refused(fmt, tmp_path, capsys):
    """The Prometheus snapshot given as --format gctrace (or an empty file as
    prom) said "0 gc cycles", exit 0, and made the store: a wrong file or format
    is one line naming it, exit 2, nothing stored; the other files neither."""
    from pyproflab.cli import main

    nothing = tmp_path / "nothing.txt"
    if fmt == "gctrace":
        shutil.copy(GC_DATA / "prometheus-2.42-metrics.prom", nothing)
        good, when = CAPTURED, ["--process-start", "2025-03-01T12:00:00Z"]
    else:
        nothing.write_text("", encoding="utf-8")
        good, when = GC_DATA / "prometheus-2.42-metrics.prom", ["--time", "2025-03-01T12:00:00Z"]
    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(good), str(nothing), "--format", fmt, "--db", str(db), *when]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"pyproflab: error: {nothing}: no "), err
    assert not db.exists()
