"""`pyproflab trace`: pprof files, tables in text, JSON and CSV, from a file or a store."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC
from pathlib import Path

import pytest
from support.trace_helpers import damaged_traces, one_line_error, run_cli, trace_path

from pyproflab.analyses.gotrace_answers import answer
from pyproflab.reports import render

pytestmark = pytest.mark.go


def test_goroutines_json_rows(tmp_path: Path) -> None:
    res = run_cli("trace", "goroutines", trace_path("mutex"), "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    keys = {"g", "name", "running_ns", "runnable_ns", "syscall_ns", "waiting_ns"}
    assert rows and all(keys <= set(r) for r in rows)
    workers = [r for r in rows if r["name"] == "main.worker"]
    assert len(workers) == 8 and all(r["waiting"].get("sync", 0) > 0 for r in workers)


def test_a_wait_without_a_reason_is_named_alike_in_every_format() -> None:
    """A goroutine parked before the trace began has no waiting reason: every format
    calls it "unknown" (CSV wrote '=200350401', a spreadsheet formula, where text
    printed '? 200.35ms' and JSON the key "")."""
    result = answer("goroutines", path=trace_path("mutex"))
    rows = json.loads(render(result, "json"))
    parked = [r for r in rows if r["name"] == "runtime.bgsweep"]
    assert parked and set(parked[0]["waiting"]) == {"unknown"}
    cells = {r["g"]: r["waiting"] for r in csv.DictReader(io.StringIO(render(result, "csv")))}
    assert cells[str(parked[0]["g"])] == f"unknown={parked[0]['waiting']['unknown']}"
    assert not [c for c in cells.values() if c.startswith("=")]
    text = render(result, "text")
    assert "runtime.bgsweep" in text and "? " not in text and "unknown 200.35ms" in text


def test_every_question_in_every_format() -> None:
    for q in ("goroutines", "sched", "stw", "tasks", "leaks"):
        result = answer(q, path=trace_path("many"))
        assert render(result, "text").strip(), q
        json.loads(render(result, "json"))
        assert len(list(csv.reader(io.StringIO(render(result, "csv"))))) > 1, q
    res = run_cli("trace", "tasks", trace_path("many"), "--format", "csv")
    assert res.returncode == 0 and res.stdout.startswith("kind,type,count"), res.stderr


def test_csv_times_are_iso_8601_as_in_json(tmp_path: Path) -> None:
    """Every CSV writes times as JSON does (``gc``'s did; ``profiles``' and the
    trace tables' wrote Python's '2026-11-24 01:40:07+00:00')."""
    from datetime import datetime

    windows = answer("sched", path=trace_path("many")).windows
    text = render(answer("sched", path=trace_path("many")), "csv")
    row = next(csv.DictReader(io.StringIO(text)))
    assert row["window_start"] == windows["window_start"][0].as_py().isoformat()
    assert "T" in row["window_start"]
    db = tmp_path / "s.duckdb"
    assert run_cli("ingest", trace_path("many"), "--db", db).returncode == 0
    res = run_cli("profiles", "--db", db, "--format", "csv")
    times = [r["time"] for r in csv.DictReader(io.StringIO(res.stdout))]
    assert times and all(datetime.fromisoformat(t) and "T" in t for t in times), times


def test_pprof_and_store_answers(tmp_path: Path) -> None:
    out = tmp_path / "sync.pb.gz"
    res = run_cli("trace", "pprof", trace_path("chan"), "--kind", "sync", "-o", out)
    assert res.returncode == 0 and out.stat().st_size > 0, res.stderr
    db = tmp_path / "s.duckdb"
    assert run_cli("ingest", trace_path("many"), "--db", db, "--instance", "i-9").returncode == 0
    res = run_cli("trace", "sched", "--db", db, "--instance", "i-9", "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["per_trace"][0]["instance"] == "i-9" and doc["per_trace"][0]["count"] > 0
    res = run_cli("top", "--db", db, "--type", "trace-sync", "--format", "json")
    assert res.returncode == 0, res.stderr
    one_line_error(run_cli("trace", "sched", "--db", db, "--instance", "nope"), "no traces")


def test_bad_traces_are_one_line(tmp_path: Path) -> None:
    bad = damaged_traces(tmp_path)
    one_line_error(run_cli("trace", "sched", bad["truncated"]), str(bad["truncated"]))
    one_line_error(run_cli("trace", "stw", bad["text"]), "not a Go execution trace")
    one_line_error(
        run_cli("trace", "pprof", bad["bit-flipped"], "--kind", "net", "-o", tmp_path / "x"),
        str(bad["bit-flipped"]),
    )


def test_pprof_output_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    """`-o` into a missing folder or onto a folder was a traceback
    (FileNotFoundError naming the temporary file), after reading the whole trace."""
    missing = tmp_path / "nope" / "sync.pb.gz"
    res = run_cli("trace", "pprof", trace_path("chan"), "--kind", "sync", "-o", missing)
    one_line_error(res, str(missing), "does not exist")
    res = run_cli("trace", "pprof", trace_path("chan"), "--kind", "sync", "-o", tmp_path)
    one_line_error(res, str(tmp_path), "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_help_keeps_the_usage_lines_of_its_description():
    """`trace --help` ran the description's usage lines into one paragraph
    ('... -o OUT.pb.gz one blocking profile, equal to ... trace goroutines|...')."""
    res = run_cli("trace", "--help")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "  trace pprof FILE --kind net|sync|syscall|sched -o OUT.pb.gz" in lines, res.stdout
    assert any(ln.startswith("  trace goroutines|sched|stw|tasks|leaks [FILE]") for ln in lines)


def test_type_is_not_offered_for_traces(tmp_path: Path) -> None:
    """`trace sched --help` listed `--type TYPE  profile type: cpu heap ...`, which
    every trace question refuses ('traces are selected by ...', naming no flag)."""
    res = run_cli("trace", "sched", "--help")
    assert res.returncode == 0 and "--type" not in res.stdout, res.stdout
    db = tmp_path / "s.duckdb"
    assert run_cli("ingest", trace_path("mutex"), "--db", db).returncode == 0
    one_line_error(run_cli("trace", "sched", "--db", db, "--type", "cpu"), "--type")


def test_a_stored_trace_without_an_instance_is_named_by_its_file(tmp_path: Path) -> None:
    """`ingest traces/ --service api` stores no instance: `trace stw --db` then
    began "trace 1: 1 stop-the-world pauses", neither naming the file nor in English."""
    db = tmp_path / "s.duckdb"
    assert run_cli("ingest", trace_path("mutex"), "--db", db, "--service", "api").returncode == 0
    res = run_cli("trace", "stw", "--db", db)
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert first.startswith(f"{trace_path('mutex')}: 1 stop-the-world pause, "), first


def test_goroutines_text_headings_are_each_once() -> None:
    """The goroutines table's text heading read '... waiting  waiting': the total
    (waiting_ns) and its reasons (waiting) both lost to the same word."""
    text = render(answer("goroutines", path=trace_path("mutex")), "text")
    heading = re.split(r"\s{2,}", text.splitlines()[1].strip())  # cells are 2+ spaces apart
    assert len(heading) == len(set(heading)) and "waiting" in heading, heading


def test_tasks_of_a_trace_without_any_keep_their_columns() -> None:
    """A trace with no user task or region (mutex.trace) still has the table's
    header: CSV was one empty line, text a bare "rows:"."""
    result = answer("tasks", path=trace_path("mutex"))
    assert result.rows.num_rows == 0
    header = "kind,type,count,total_ns,p50_ns,p90_ns,p99_ns,max_ns,incomplete"
    assert render(result, "csv") == header + "\n"
    shown = [c.removesuffix("_ns") for c in header.split(",")]  # the cells carry the unit
    assert render(result, "text").splitlines()[1].split() == shown
    assert json.loads(render(result, "json")) == []


@pytest.mark.parametrize(
    ("question", "flag", "value", "expected"),
    [
        ("leaks", "--windows", "0", "0: expected a whole number >= 1"),
        ("leaks", "--min-growth", "-1", "-1: expected a whole number >= 0"),
        ("sched", "--top", "-1", "-1: expected a whole number >= 0"),
        ("goroutines", "--top", "-1", "-1: expected a whole number >= 0"),
        # These four were tracebacks: OverflowError, OverflowError, ZeroDivisionError
        # (a window under a nanosecond is none), ValueError; a negative
        # --starved-p99-ms named every trace starved.
        ("sched", "--window", "inf", "inf: expected a number > 0"),
        ("stw", "--window", "nan", "nan: expected a number > 0"),
        ("sched", "--window", "1e-12", "1e-12: expected at least 1e-09 s (one nanosecond)"),
        (
            "goroutines",
            "--sort",
            "x",
            "'x': expected one of g, running_ns, runnable_ns, syscall_ns, waiting_ns",
        ),
        ("sched", "--starved-p99-ms", "-1", "-1.0: expected a number > 0"),
    ],
)
def test_an_option_out_of_range_is_one_line(question, flag, value, expected, capsys) -> None:
    """``leaks --windows 0`` was a traceback (ZeroDivisionError); a negative --top
    listed nothing, or all but the last, as if it were a figure. Each names its flag."""
    from pyproflab.cli import main

    assert main(["trace", question, str(trace_path("many")), flag, value]) == 2
    err = capsys.readouterr().err
    assert err == f"pyproflab: error: {flag}={expected}\n"


def test_table_is_for_csv(capsys) -> None:
    """``--table`` with text or json was dropped without a word."""
    from pyproflab.cli import main

    assert main(["trace", "sched", str(trace_path("many")), "--table", "windows"]) == 2
    assert "--table is for --format csv" in capsys.readouterr().err


@pytest.mark.parametrize("question", ["goroutines", "sched", "stw", "leaks"])
def test_every_option_flag_says_its_default(question) -> None:
    """Each question's flags had no help (``--window SECONDS`` and
    ``--starved-p99-ms STARVED_P99_MS`` alone): each now says what it does and
    its default, the options class's."""
    import dataclasses

    from pyproflab.analyses.gotrace_answers import ANSWERS
    from pyproflab.cli.trace import FLAGS

    defaults = {f.name: f.default for f in dataclasses.fields(ANSWERS[question][2])}
    for flag, kw in FLAGS[question]:
        default = defaults[kw["dest"]]
        shown = "all" if default is None else f"{default:g}" if kw.get("type") else default
        assert f"(default {shown})" in kw["help"], flag


@pytest.mark.parametrize("fmt", ["text", "html"])
def test_durations_are_headed_without_their_column_unit(fmt) -> None:
    """Text and HTML print durations scaled (``121.50s``) under the JSON/CSV names:
    ``total_ns 121.50s``, ``p99_ns 1.01s``, ``wait_ns 1.20s`` read as nanoseconds."""
    result = answer("sched", path=trace_path("cpulimit-quota"))
    out = render(result, fmt)
    for name in ("count", "total", "p50", "p99", "max", "wait"):
        assert (name in out.split()) if fmt == "text" else (f"<th>{name}</th>" in out), name
    assert "_ns" not in out and "1.01s" in out


def test_wall_clock_columns_say_utc() -> None:
    """`trace stw` showed a pause "at 22:22:08.121", a UTC clock time with no zone,
    beside `top`'s header in the local zone: read in Los Angeles, 8 hours off."""
    result = answer("stw", path=trace_path("mutex"))
    at = result.pauses.column("at")[0].as_py()
    lines = render(result, "text").splitlines()
    i = lines.index("pauses:")
    assert re.split(r"\s{2,}", lines[i + 1].strip())[-1] == "at (UTC)"
    assert lines[i + 2].endswith(at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3])
    assert "<th>at (UTC)</th>" in render(result, "html")
