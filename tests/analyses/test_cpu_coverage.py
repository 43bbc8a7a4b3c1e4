"""CPU profiles against their processes' CPU (analyses.cpu_coverage), on a real
Go CPU burner (tests/goprogs/cpucover) recorded by tests/support/record_cpucover.py
at 100, 250 and 1000 Hz, and at 100 Hz in short bursts, with its own
process_cpu_seconds_total scrapes: above the kernel's tick (250 a second where it
was recorded) the profiles hold a quarter of the CPU, in bursts half, and the
rates in cores that regressions and top print say so."""

from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from pyproflab._proto import profile_pb2
from pyproflab.analyses import cpu_coverage as cc
from pyproflab.analyses.regressions import regressions
from pyproflab.cli import main
from pyproflab.store import Store
from pyproflab.store.select import Selection

RECORDED = Path(__file__).resolve().parents[1] / "testdata" / "cpucover"
RATES = (100, 250, 1000)
SHORT = "CPU profiles hold less CPU than the processes used"


def _ingest(db: Path, name: str, version: str, *, metrics: bool = True) -> None:
    """The recording ``name`` as service burner, instance ``name``, ``version``."""
    meta = ["--db", str(db), "--service", "burner", "--version", version, "--instance", name]
    files = sorted(str(p) for p in (RECORDED / name).glob("cpu-*.pb.gz"))
    assert main(["ingest", *meta, *files]) == 0
    if metrics:
        prom = str(RECORDED / name / "metrics.prom")
        assert main(["ingest-gc", *meta, "--format", "prom", prom]) == 0


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cpucover") / "s.duckdb"
    for hz in RATES:
        _ingest(path, f"hz{hz}", f"v{hz}")
    _ingest(path, "burst100", "burst")
    return path


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """The same profiles without any process CPU."""
    path = tmp_path_factory.mktemp("cpucover-bare") / "s.duckdb"
    for hz in RATES:
        _ingest(path, f"hz{hz}", f"v{hz}", metrics=False)
    return path


def _scrapes(hz: int) -> list[tuple[int, float]]:
    """(time in ns, value) of the recorded metrics file, read here on its own."""
    out = []
    for line in (RECORDED / f"hz{hz}" / "metrics.prom").read_text().splitlines():
        if line.startswith("process_cpu_seconds_total "):
            _, v, ms = line.split()
            out.append((int(ms) * 1_000_000, float(v)))
    return out


def _profiles(hz: int) -> list:
    """The recorded profiles, read with the protobuf classes (not our decoder)."""
    out = []
    for path in sorted((RECORDED / f"hz{hz}").glob("cpu-*.pb.gz")):
        p = profile_pb2.Profile()
        p.ParseFromString(gzip.decompress(path.read_bytes()))
        out.append(p)
    return out


@pytest.mark.parametrize("hz", RATES)
def test_figures_match_the_recording(db, hz):
    """The profiled CPU is the profiles' cpu values; the process's CPU over each
    window lies between the counter's increase over the scrapes inside it and over
    the two that bracket it."""
    profiles = _profiles(hz)
    scrapes = _scrapes(hz)
    with Store.open(db, read_only=True) as store:
        got = cc.cpu_coverage(store, Selection(version=f"v{hz}"))
    assert got is not None and got.profiles == got.profiles_selected == len(profiles)
    cpu = sum(sum(s.value[1] for s in p.sample) for p in profiles) / 1e9
    assert got.profiled_seconds == pytest.approx(cpu)
    low = high = 0.0
    for p in profiles:
        t0, t1 = p.time_nanos, p.time_nanos + p.duration_nanos
        inner = [v for t, v in scrapes if t0 <= t <= t1]
        low += inner[-1] - inner[0] if len(inner) > 1 else 0.0
        before = [v for t, v in scrapes if t <= t0][-1]
        after = [v for t, v in scrapes if t >= t1][0]
        high += after - before
    assert low <= got.process_seconds <= high
    assert got.rates_hz == (float(hz),) * len(profiles)


def test_a_rate_above_the_tick_is_short_and_the_tick_rates_are_not(db):
    with Store.open(db, read_only=True) as store:
        got = {hz: cc.cpu_coverage(store, Selection(version=f"v{hz}")) for hz in RATES}
    assert not got[100].short and not got[250].short
    assert got[1000].short
    # Above the tick the profiles hold about tick / rate: well under the rule's 80 %.
    assert got[1000].ratio < 0.5 < 0.9 < got[100].ratio


def test_regressions_note_names_the_short_side_once(db):
    with Store.open(db, read_only=True) as store:
        result = regressions(store, Selection(version="v100"), Selection(version="v1000"))
        rate = regressions(
            store, Selection(version="v100"), Selection(version="v1000"), measure="rate"
        )
    for r in (result, rate):
        notes = [n for n in r.notes if n.startswith(SHORT)]
        assert len(notes) == 1, r.notes
        assert "new: " in notes[0] and "base: " not in notes[0]
        assert "at 1000 Hz" in notes[0] and "kernel's tick" in notes[0]


def test_bursts_fall_short_at_100_hz_and_the_note_does_not_blame_the_rate(db):
    """One goroutine running 0.5 ms in every 2 ms: Linux checks its CPU timer only
    at the ticks it is running, so even 100 Hz loses samples."""
    with Store.open(db, read_only=True) as store:
        got = cc.cpu_coverage(store, Selection(version="burst"))
        result = regressions(store, Selection(version="v100"), Selection(version="burst"))
    assert got is not None and got.short and got.rates_hz == (100.0, 100.0)
    notes = [n for n in result.notes if n.startswith(SHORT)]
    assert len(notes) == 1 and "at 100 Hz" in notes[0] and "bursts shorter" in notes[0]
    assert "near or above the kernel's tick" not in notes[0]


def test_regressions_says_nothing_when_the_rates_agree(db):
    with Store.open(db, read_only=True) as store:
        result = regressions(store, Selection(version="v100"), Selection(version="v250"))
    assert not [n for n in result.notes if n.startswith(SHORT)]


def test_no_process_cpu_no_note(bare):
    with Store.open(bare, read_only=True) as store:
        assert cc.cpu_coverage(store, Selection(version="v1000")) is None
        result = regressions(store, Selection(version="v100"), Selection(version="v1000"))
    assert not [n for n in result.notes if n.startswith(SHORT)]


def test_a_store_without_metric_tables_says_nothing(db, tmp_path):
    import duckdb

    path = tmp_path / "adopted.duckdb"
    shutil.copyfile(db, path)
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE metric_samples CASCADE")
    with Store.open(path, read_only=True) as store:
        assert cc.cpu_coverage(store, Selection(version="v1000")) is None
        result = regressions(store, Selection(version="v100"), Selection(version="v1000"))
    assert not [n for n in result.notes if n.startswith(SHORT)]


def test_lab_and_report_top_carry_the_note(db):
    from pyproflab.lab import Lab
    from pyproflab.workflows.report import top_section

    with Store.open(db, read_only=True) as store:
        lab = Lab(store)
        assert [n for n in lab.top(version="v1000").notes if n.startswith(SHORT)]
        assert not lab.top(version="v100").notes
        section = top_section(store, Selection(version="v1000"), str(db))
    assert [n for n in section.found["top"].notes if n.startswith(SHORT)]
    assert f"Note: {SHORT}" in str(section.found["top"])


def test_pgo_inputs_cores_carry_the_note(db):
    from pyproflab.analyses.pgo import pgo

    with Store.open(db, read_only=True) as store:
        short = pgo(store, Selection(version="v1000"))
        fine = pgo(store, Selection(version="v100"))
    assert [n for n in short.notes if n.startswith(SHORT) and "1000 Hz" in n]
    assert not [n for n in fine.notes if n.startswith(SHORT)]


def test_top_db_prints_the_note_under_its_rate(db, bare, capsys):
    for path, hz, want in ((db, 1000, True), (db, 100, False), (bare, 1000, False)):
        assert main(["top", "--db", str(path), "--version", f"v{hz}"]) == 0
        lines = capsys.readouterr().out.splitlines()
        notes = [n for n in lines if n.startswith(f"Note: {SHORT}")]
        assert len(notes) == int(want), (path, hz, lines[:8])
        if want:  # right under pprof's Duration line, whose percentage is the rate
            assert lines[lines.index(notes[0]) - 1].startswith("Duration: ")


def _samples(points: list[tuple[float, float]]) -> pa.Table:
    """A counter's samples at (seconds, value)."""
    return pa.table(
        {
            "service": ["s"] * len(points),
            "instance": ["i"] * len(points),
            "time": pa.array([int(t * 1e6) for t, _ in points], pa.timestamp("us", "UTC")),
            "value": [v for _, v in points],
        }
    )


def _row(start_s: float, seconds: float, hz: int = 1000) -> dict:
    return {
        "service": "s",
        "instance": "i",
        "time_nanos": int(start_s * 1e9),
        "duration_nanos": int(seconds * 1e9),
        "period": 1_000_000_000 // hz,
    }


def test_only_bracketed_windows_without_a_restart_count():
    # Scrapes every 10 s at 1 core; a restart (the counter drops) between 30 and 40 s.
    points = [(t, float(t)) for t in (0, 10, 20, 30)] + [(40, 5.0), (50, 15.0)]
    rows = [_row(5, 10), _row(25, 10), _row(41, 5), _row(45, 10)]
    got = cc.coverage_of(rows, [2.5, 2.5, 1.25, 2.5], _samples(points))
    # Window 2 holds the restart, window 4 ends after the last scrape.
    assert got is not None and got.profiles == 2 and got.profiles_selected == 4
    assert got.process_seconds == pytest.approx(10 + 5)  # interpolated at both ends
    assert got.profiled_seconds == pytest.approx(3.75)
    assert got.ratio == pytest.approx(0.25) and got.short
    assert cc.coverage_of(rows[3:], [2.5], _samples(points)) is None


def test_too_few_periods_is_not_short():
    # 0.05 s of process CPU at 1000 Hz is 50 periods: too few to call a shortfall.
    got = cc.coverage_of([_row(1, 1)], [0.01], _samples([(0, 0.0), (2, 0.1)]))
    assert got is not None and got.ratio == pytest.approx(0.2)
    assert not got.short and math.isfinite(got.process_cores)


def test_top_db_opens_the_store_once(db, capsys, monkeypatch):
    """The profile and the note come from one opening of the store: a second
    one (cli/top.py opened it again for the note) could meet a store a writer
    took in between (busy: exit 2 after top was computed) or changed."""
    from pyproflab.store import Store

    opened: list[str] = []
    real = Store.open.__func__

    def counting(cls, path, **keywords):
        opened.append(str(path))
        return real(cls, path, **keywords)

    monkeypatch.setattr(Store, "open", classmethod(counting))
    assert main(["top", "--db", str(db), "--version", "v1000"]) == 0
    assert f"Note: {SHORT}" in capsys.readouterr().out
    assert opened == [str(db)]


def test_top_on_the_default_store_prints_the_note_as_top_db(db, tmp_path, capsys, monkeypatch):
    # The README tour's `pyproflab top --type cpu` reads ./pyproflab.duckdb without --db:
    # it printed no note where `top --db pyproflab.duckdb` printed it (args.db was None).
    monkeypatch.delenv("PYPROFLAB_DB", raising=False)
    shutil.copy(db, tmp_path / "pyproflab.duckdb")
    monkeypatch.chdir(tmp_path)
    outputs = []
    for args in (["--db", "pyproflab.duckdb"], []):
        assert main(["top", *args, "--version", "v1000"]) == 0
        outputs.append(capsys.readouterr().out)
    assert f"Note: {SHORT}" in outputs[0]
    assert outputs[1] == outputs[0]
