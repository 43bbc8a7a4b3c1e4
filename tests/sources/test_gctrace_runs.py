"""gctrace logs of several process runs: restarts and interleaved processes
(issue 35, finding 1). Recorded by tests/support/gc_runs.py: tests/gcbench at a
known GOGC per process, with who wrote each gctrace line (``*.truth``)."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pyproflab import schema
from pyproflab.analyses.gogc.samples import from_gctrace
from pyproflab.cli import main
from pyproflab.sources.gctrace import parse_gctrace, read_gctrace
from pyproflab.sources.gctrace_runs import MAX_OPEN, RunSplitter
from pyproflab.store.connection import Store
from pyproflab.store.metrics import gc_cycle_rows
from tests.support import gc_runs

RUNS = gc_runs.RUNS
# (log, the GOGC of each process in the order it first printed)
LOGS = {"interleaved": (50, 200), "restart": (100, 400)}


def _truth(name: str) -> list[int]:
    """The run of each gctrace line: its process, numbered by first appearance."""
    letters = (RUNS / f"{name}.truth").read_text().strip()
    order = list(dict.fromkeys(letters))
    return [order.index(c) + 1 for c in letters]


def _gc_lines(path) -> int:
    return sum(1 for line in open(path) if re.match(r"gc \d+ @", line))


@pytest.mark.parametrize("name", sorted(LOGS))
def test_recorded_log_splits_into_its_processes(name):
    t = read_gctrace(RUNS / f"{name}.log")
    assert t.num_rows == _gc_lines(RUNS / f"{name}.log")
    assert t.column("run").to_pylist() == _truth(name)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_ingest_gc_stores_every_cycle_of_every_run(tmp_path, capsys, name):
    log = RUNS / f"{name}.log"
    n = _gc_lines(log)
    db = tmp_path / "s.duckdb"
    argv = ["ingest-gc", str(log), "--format", "gctrace", "--db", str(db), "--instance", "i"]
    assert main(argv) == 0
    assert (
        capsys.readouterr().out
        == f"1 file, {n} gc cycles (2 process runs): {n} new, 0 already present\n"
    )
    assert main(argv) == 0
    assert (
        capsys.readouterr().out
        == f"1 file, {n} gc cycles (2 process runs): 0 new, {n} already present\n"
    )
    with Store.open(db, read_only=True) as store:
        rows = gc_cycle_rows(store, instance="i")
    assert rows.num_rows == n
    truth = _truth(name)
    for run, gogc in enumerate(LOGS[name], start=1):
        mine = rows.filter(pc.equal(rows.column("run"), run))
        assert mine.num_rows == truth.count(run)
        # Each run's own GOGC comes back from its heap goals (MiB floors on a
        # 4-16 MiB heap: within 10%), where one mixed series gave nonsense.
        (setting,) = from_gctrace(mine).settings
        assert setting[0] == pytest.approx(gogc, rel=0.1)


LINE = (
    "gc {n} @{s}s 5%: 0.1+1.0+0.01 ms clock, 0.2+0.1/0.5/0+0.02 ms cpu, "
    "{start}->{end}->{live} MB, {goal} MB goal, 0 MB stacks, 0 MB globals, 2 P"
)


def _line(n, s, start, end, live, goal):
    return LINE.format(n=n, s=s, start=start, end=end, live=live, goal=goal)


def _runs(*lines):
    return parse_gctrace(list(lines), source="t").column("run").to_pylist()


def test_gc_numbers_starting_again_start_a_run():
    assert _runs(
        _line(1, 0.1, 4, 5, 3, 6), _line(2, 0.2, 6, 7, 3, 6), _line(1, 0.05, 4, 5, 3, 6)
    ) == [1, 1, 2]


def test_time_going_back_starts_a_run():
    assert _runs(_line(7, 9.0, 4, 5, 3, 6), _line(8, 1.0, 6, 7, 3, 6)) == [1, 2]


def test_a_heap_of_another_process_starts_a_run():
    # gc 9 follows gc 8 in number and time, but its goal (50) is below what gc 8
    # marked (800): the runtime never sets a goal below the marked heap.
    big = _line(8, 10.0, 1000, 1100, 800, 1600)
    assert _runs(big, _line(9, 10.5, 60, 70, 40, 50)) == [1, 2]
    # ... nor starts a cycle with less heap than the previous one marked.
    assert _runs(big, _line(9, 10.5, 700, 900, 500, 1700)) == [1, 2]
    # Its own next cycle continues it.
    assert _runs(big, _line(9, 10.5, 1500, 1600, 790, 1600)) == [1, 1]


def test_lost_lines_do_not_start_a_run():
    # gc 4-6 missing (split by other output): the heap may have changed since.
    assert _runs(_line(3, 1.0, 40, 50, 30, 60), _line(7, 2.0, 6, 7, 3, 6)) == [1, 1]


def test_interleaved_lines_follow_their_process():
    a = [_line(n, 1.0 + n, 50, 60, 30, 45) for n in range(10, 14)]
    b = [_line(n, 0.5 + n, 8, 9, 4, 12) for n in range(3, 7)]
    mixed = [x for pair in zip(a, b, strict=True) for x in pair]
    assert _runs(*mixed) == [1, 2] * 4


@pytest.mark.parametrize(("restarts", "run"), [(MAX_OPEN - 1, 1), (MAX_OPEN, MAX_OPEN + 2)])
def test_old_runs_are_closed_beyond_max_open(restarts, run):
    kw = dict(heap_start_mb=5, heap_live_mb=3, heap_goal_mb=6, procs=2)
    split = RunSplitter()
    assert split.run_of(gc_num=100, seconds=5.0, **kw) == 1
    for _ in range(restarts):  # processes whose clocks are past 6 s
        split.run_of(gc_num=1, seconds=7.0, **kw)
    # gc 101 continues run 1 while it is open; once closed it starts a run.
    assert split.run_of(gc_num=101, seconds=6.0, **kw) == run


def test_process_start_dates_run_one_only():
    start = datetime(2025, 3, 1, tzinfo=UTC)
    t = parse_gctrace(
        [_line(1, 0.5, 4, 5, 3, 6), _line(1, 0.25, 4, 5, 3, 6)], source="t", process_start=start
    )
    assert t.column("run").to_pylist() == [1, 2]
    assert t.column("time").to_pylist()[1] is None and t.column("time")[0].as_py() > start


def test_store_made_before_runs_reads_and_upgrades(tmp_path):
    """A gc_cycles table without ``run`` (a store from before): read-only its
    rows read as run 1; the first writable open adds the column (run 1), and
    the log's second run can then be ingested beside them."""
    import duckdb

    db = tmp_path / "old.duckdb"
    log = RUNS / "restart.log"
    t = read_gctrace(log)
    first = t.filter(pc.equal(t.column("run"), 1))
    with Store.open(db):
        pass
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER TABLE gc_cycles DROP COLUMN run")
        cols = [f.name for f in schema.STORE_GC_CYCLES if f.name != "run"]
        meta = {"service": None, "version": None, "instance": "i", "source": str(log.resolve())}
        old = pa.table(
            {c: meta[c] if c in meta else first.column(c) for c in cols}
            | {c: pa.array([meta[c]] * first.num_rows, pa.string()) for c in meta}
        )
        con.register("old", old)
        con.execute(f"INSERT INTO gc_cycles ({', '.join(cols)}) SELECT {', '.join(cols)} FROM old")
    with Store.open(db, read_only=True) as store:
        got = gc_cycle_rows(store)
    assert got.num_rows == first.num_rows and set(got.column("run").to_pylist()) == {1}
    assert (
        main(["ingest-gc", str(log), "--format", "gctrace", "--db", str(db), "--instance", "i"])
        == 0
    )
    with Store.open(db, read_only=True) as store:
        got = gc_cycle_rows(store)
    assert got.column("run").to_pylist() == sorted(_truth("restart"))


def test_live_processes_every_cycle_stored(tmp_path):
    """Shorter live runs of both shapes: every gctrace line is stored, each run's
    gc numbers rise and its seconds never go back; a restart splits exactly."""
    if shutil.which("go") is None:
        pytest.skip("Go is not installed (`go` not on PATH); the live gctrace test needs it")
    gc_runs.record_all(gc_runs.build(tmp_path), tmp_path, scale=0.4)
    for name in LOGS:
        log = tmp_path / f"{name}.log"
        t = read_gctrace(log)
        assert t.num_rows == _gc_lines(log) == len((tmp_path / f"{name}.truth").read_text().strip())
        with Store.open(":memory:") as store:
            from pyproflab.store.metrics import ingest_gc_cycles

            assert (
                ingest_gc_cycles(store, t, service=None, version=None, instance="i", source=name)
                == t.num_rows
            )
        for run in set(t.column("run").to_pylist()):
            rows = t.filter(pc.equal(t.column("run"), run)).to_pylist()
            assert all(a["gc_num"] < b["gc_num"] for a, b in zip(rows, rows[1:], strict=False))
            assert all(a["seconds"] <= b["seconds"] for a, b in zip(rows, rows[1:], strict=False))
    restart = read_gctrace(tmp_path / "restart.log").column("run").to_pylist()
    letters = (tmp_path / "restart.truth").read_text().strip()
    assert restart == [1 if c == "A" else 2 for c in letters]
