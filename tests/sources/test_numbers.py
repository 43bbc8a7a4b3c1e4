"""Non-finite, absurd and overflowing values in GC inputs (issue 35, findings 5 and 6):
one line naming the file and the line, exit 2, nothing stored; never a traceback,
never a stored inf, never "0 gc cycles" for a file that is no log."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pyproflab.cli import main
from pyproflab.store.connection import Store

LINE = (
    "gc {n} @{s}s 5%: 0.12+3.6+0.003 ms clock, 0.24+0/0.13/0+0.006 ms cpu, "
    "{start}->80->67 MB, 90 MB goal, 0 MB stacks, 0 MB globals, {p} P"
)


def _log(tmp_path: Path, bad: str) -> Path:
    good = [LINE.format(n=n, s=f"{n}.000", start=70, p=2) for n in range(1, 6)]
    path = tmp_path / "gc.log"
    path.write_text("\n".join([*good, bad, LINE.format(n=7, s="7.000", start=70, p=2)]) + "\n")
    return path


BAD_GCTRACE = {
    "seconds of 25 digits": (LINE.format(n=6, s="9" * 25, start=70, p=2), "seconds 999999999999"),
    "a 5,000-digit size": (
        LINE.format(n=6, s="6.000", start="1" * 5000, p=2),
        "heap_start_mb 111111111111... (5000 digits) out of range",
    ),
    "0 P": (LINE.format(n=6, s="6.000", start=70, p=0), "procs 0 out of range (1 to"),
    "1e400 ms": (
        LINE.format(n=6, s="6.000", start=70, p=2).replace("0.12+3.6", "0.12+1" + "0" * 400),
        "clock_mark_ms 100000000000... (401 digits) out of range",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_GCTRACE))
def test_ingest_gc_refuses_an_absurd_gctrace_value(tmp_path, capsys, case):
    bad, words = BAD_GCTRACE[case]
    log = _log(tmp_path, bad)
    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(log), "--format", "gctrace", "--db", str(db)]
    for extra in ([], ["--lenient"], ["--process-start", "2026-01-01T00:00:00Z"]):
        assert main(argv + extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{log}:6: gctrace line {words}" in err
    assert not db.exists()


@pytest.mark.parametrize("case", sorted(BAD_GCTRACE))
def test_gogc_refuses_an_absurd_gctrace_value(tmp_path, capsys, case):
    bad, words = BAD_GCTRACE[case]
    log = _log(tmp_path, bad)
    assert main(["gogc", "--gctrace", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{log}:6: gctrace line {words}" in err


def test_process_start_past_year_9999_is_one_line(tmp_path, capsys):
    log = _log(tmp_path, LINE.format(n=6, s="3000000000.000", start=70, p=2))
    argv = ["ingest-gc", str(log), "--format", "gctrace", "--db", str(tmp_path / "s.duckdb")]
    assert main([*argv, "--process-start", "9990-01-01T00:00:00Z"]) == 2
    assert f"{log}:6: process start + seconds is past year 9999" in capsys.readouterr().err


def test_binary_garbage_is_not_a_gctrace_log(tmp_path, capsys):
    junk = tmp_path / "junk.log"
    rng = random.Random(35)
    junk.write_bytes(bytes(rng.getrandbits(8) for _ in range(1 << 20)))
    db = tmp_path / "s.duckdb"
    assert main(["ingest-gc", str(junk), "--format", "gctrace", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "binary data (a NUL byte): not a gctrace log" in err
    assert not db.exists()


# --- Prometheus text -----------------------------------------------------------------

HEAD = "# TYPE go_gc_heap_allocs_bytes_total counter\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (HEAD + "go_gc_heap_allocs_bytes_total +Inf\n", 2, "+Inf is not a value a counter"),
        (HEAD + "go_gc_heap_allocs_bytes_total NaN\n", 2, "NaN is not a value a counter"),
        ("# TYPE go_gc_heap_goal_bytes gauge\ngo_gc_heap_goal_bytes -Inf\n", 2, "a Go runtime"),
        (
            '# TYPE h histogram\nh_bucket{le="1"} NaN\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
            2,
            "a histogram's bucket or count",
        ),
        (
            HEAD + "go_gc_heap_allocs_bytes_total 1 1000\ngo_gc_heap_allocs_bytes_total 2 1000\n",
            3,
            "a second sample of the series and time of line 2",
        ),
        (
            'a{x="1",y="2"} 1\nb 2\na{y="2",x="1"} 3\n',
            3,
            "a second sample of the series and time of line 1",
        ),
        # Past year 9999 (15 digits: the scanner's own subset), and at the ends of int64.
        ("a 1 1\nb 1 253402300800000\n", 2, "timestamp 253402300800000 is outside the years 1"),
        ("a 1 -62135596800001\n", 1, "timestamp -62135596800001 is outside the years 1 to"),
        ("a 1 9223372036854775807\n", 1, "is outside the years 1 to 9999"),
    ],
)
def test_ingest_gc_refuses_a_value_the_series_cannot_take(tmp_path, capsys, text, line, words):
    prom = tmp_path / "m.prom"
    prom.write_text(text)
    db = tmp_path / "s.duckdb"
    assert main(["ingest-gc", str(prom), "--format", "prom", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{prom}:{line}: " in err and words in err, err
    assert not db.exists()


def test_values_a_series_can_take_are_kept(tmp_path, capsys):
    prom = tmp_path / "m.prom"
    prom.write_text(
        "# TYPE app_temperature gauge\napp_temperature NaN\n"
        '# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds{quantile="0.5"} NaN\n'
        "go_gc_duration_seconds_sum 0\ngo_gc_duration_seconds_count 0\n"
        "# TYPE go_sched_pauses_total_gc_seconds histogram\n"
        'go_sched_pauses_total_gc_seconds_bucket{le="+Inf"} 3\n'
        "go_sched_pauses_total_gc_seconds_sum NaN\ngo_sched_pauses_total_gc_seconds_count 3\n"
        "a 1 1000\na 2 2000\n"
    )
    db = tmp_path / "s.duckdb"
    assert main(["ingest-gc", str(prom), "--format", "prom", "--db", str(db)]) == 0
    assert capsys.readouterr().out == "1 file, 9 metric samples: 9 new, 0 already present\n"


def test_gogc_refuses_an_infinite_allocation_counter(tmp_path, capsys):
    """It printed "unbounded" on every row and exited 0."""
    snaps = []
    for k in range(2):
        p = tmp_path / f"snap-{k}.prom"
        p.write_text(
            "# TYPE go_gc_cycles_total_gc_cycles_total counter\n"
            f"go_gc_cycles_total_gc_cycles_total {10 * k} {1000 * (k + 1)}\n"
            + HEAD
            + f"go_gc_heap_allocs_bytes_total {'+Inf' if k else '1e9'} {1000 * (k + 1)}\n"
        )
        snaps.append(str(p))
    assert main(["gogc", "--metrics", *snaps]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{snaps[1]}:4: go_gc_heap_allocs_bytes_total: +Inf" in err


def test_a_partial_batch_of_a_long_input_is_never_stored(tmp_path, capsys, monkeypatch):
    """Streamed in batches, one transaction: a bad line after the first batches
    (which were written) leaves the store without any of them."""
    from pyproflab.store import metrics

    real = metrics.StreamedRows.__init__

    def small(self, open_store, batch_rows=1 << 16):
        real(self, open_store, batch_rows=2)

    monkeypatch.setattr(metrics.StreamedRows, "__init__", small)
    log = _log(tmp_path, LINE.format(n=6, s="6.000", start=70, p=0))
    db = tmp_path / "s.duckdb"
    with Store.open(db):
        pass
    assert main(["ingest-gc", str(log), "--format", "gctrace", "--db", str(db)]) == 2
    with Store.open(db, read_only=True) as store:
        assert store.sql("SELECT count(*) FROM gc_cycles").column(0)[0].as_py() == 0
