"""The join of profiles with GC metrics: exact rates from a store filled by hand.

Real profiles (profgen's, and the GC-heavy gcload CPU profile of
test_gc_categories) are ingested with an instance and a collection window;
metric_samples and gc_cycles rows with known values are inserted directly, so
every computed number is known in advance.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from pyproflab import read_profile
from pyproflab.analyses.gc import (
    CATEGORIES_SCHEMA,
    INSTANCES_SCHEMA,
    PROFILES_SCHEMA,
    RUNTIME_COMPARABLE,
    gc,
)
from pyproflab.analyses.gc_categories import CATEGORY_NAMES, gc_categories
from pyproflab.analyses.gc_windows import counter_increase, histogram_quantile
from pyproflab.errors import StoreError
from pyproflab.store import Selection, Store
from pyproflab.store.ingest import ProfileMeta, ingest

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
END = T0 + timedelta(seconds=60)
STEP = 10  # seconds between scrapes
MiB = 2**20


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def insert(store: Store, table: str, rows: list[dict]) -> None:
    schema = store.sql(f"SELECT * FROM {table} LIMIT 0").schema
    data = pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema
    )
    with store.registered(gc_test_rows=data):
        store.execute(f"INSERT INTO {table} SELECT * FROM gc_test_rows")


def sample(
    instance: str,
    metric: str,
    t: float,
    value: float,
    *,
    labels=None,
    mtype: str = "counter",
    service: str = "api",
) -> dict:
    return {
        "service": service,
        "version": "v1",
        "instance": instance,
        "metric": metric,
        "labels": list((labels or {}).items()),
        "type": mtype,
        "time": at(t),
        "value": value,
        "source": "test",
    }


def i1_metrics() -> list[dict]:
    """Instance i-1: scrapes at -10 … 70 s; the window [0, 60] sees 7 of them."""
    rows = []
    times = list(range(-10, 71, STEP))
    in_window = [t for t in times if 0 <= t <= 60]
    # A counter with a reset at 30 s: increase 2+3+1+2+3+4 = 15 over 60 s.
    cycles = dict(zip(in_window, [100, 102, 105, 1, 3, 6, 10], strict=True))
    cycles.update({-10: 90, 70: 50})
    for t in times:
        rows.append(sample("i-1", "go_gc_cycles_total_gc_cycles_total", t, cycles[t]))
        rows.append(sample("i-1", "go_gc_heap_allocs_bytes_total", t, 1e6 * (t + 10) / STEP))
        rows.append(sample("i-1", "go_gc_heap_live_bytes", t, (t + 20) * MiB, mtype="gauge"))
        rows.append(sample("i-1", "go_gc_heap_goal_bytes", t, 100 * MiB, mtype="gauge"))
        frac = min(max(t, 0), 60) / 60  # counters run linearly across the window
        rows.append(sample("i-1", "go_cpu_classes_gc_total_cpu_seconds_total", t, 6 * frac))
        rows.append(sample("i-1", "go_cpu_classes_total_cpu_seconds_total", t, 120 * frac))
        rows.append(sample("i-1", "go_cpu_classes_idle_cpu_seconds_total", t, 60 * frac))
        name = "go_sched_pauses_total_gc_seconds"
        for le, n in (("1e-05", 10), ("0.0001", 80), ("0.001", 100), ("+Inf", 100)):
            rows.append(
                sample("i-1", f"{name}_bucket", t, n * frac, labels={"le": le}, mtype="histogram")
            )
        rows.append(sample("i-1", f"{name}_sum", t, 0.05 * frac, mtype="histogram"))
        rows.append(sample("i-1", f"{name}_count", t, 100 * frac, mtype="histogram"))
    # A second, sparser copy of one gauge (a Prometheus server's, with job): ignored.
    for t in (0, 60):
        rows.append(
            sample("i-1", "go_gc_heap_live_bytes", t, 1.0, labels={"job": "prom"}, mtype="gauge")
        )
    # Settings: scraped only before the window opened.
    rows.append(sample("i-1", "go_gc_gogc_percent", -10, 50, mtype="gauge"))
    rows.append(sample("i-1", "go_gc_gomemlimit_bytes", -10, float(2**63 - 1), mtype="gauge"))
    # Another service's instance of the same name: never mixed in.
    rows.append(sample("i-1", "go_gc_cycles_total_gc_cycles_total", 30, 1e9, service="other"))
    # Another instance: never mixed in.
    rows.append(sample("i-2", "go_gc_cycles_total_gc_cycles_total", 10, 7))
    return rows


def cycle(instance: str, gc_num: int, t: float, live: int, goal: int, source: str = "a.log"):
    return {
        "service": "api",
        "version": "v1",
        "instance": instance,
        "run": 1,
        "gc_num": gc_num,
        "seconds": 100 + t,
        "time": at(t),
        "cpu_pct": 1,
        "clock_sweep_term_ms": 0.0,
        "clock_mark_ms": 1.0,
        "clock_mark_term_ms": 0.0,
        "cpu_sweep_term_ms": 0.0,
        "cpu_assist_ms": 0.0,
        "cpu_background_ms": 1.0,
        "cpu_idle_ms": 0.0,
        "cpu_mark_term_ms": 0.0,
        "heap_start_mb": goal,
        "heap_end_mb": goal,
        "heap_live_mb": live,
        "heap_goal_mb": goal,
        "stacks_mb": 0,
        "globals_mb": 0,
        "procs": 2,
        "forced": False,
        "source": source,
    }


@pytest.fixture
def store(go_profiles: dict[str, Path], gc_cpu_profile: Path):  # noqa: F811
    with Store.open(":memory:") as s:
        meta = {"service": "api", "version": "v1", "window_start": T0, "window_end": END}
        ingest(
            s,
            [
                (read_profile(gc_cpu_profile), ProfileMeta(instance="i-1", **meta)),
                (read_profile(go_profiles["heap"]), ProfileMeta(instance="i-1", **meta)),
                (read_profile(go_profiles["cpu2"]), ProfileMeta(instance="i-2", **meta)),
                (read_profile(go_profiles["goroutine"]), ProfileMeta(service="api")),
            ],
        )
        insert(s, "metric_samples", i1_metrics())
        insert(
            s,
            "gc_cycles",
            [
                cycle("i-1", 7, -5, 3, 6),  # before the window
                cycle("i-1", 8, 5, 4, 8),
                cycle("i-1", 9, 25, 5, 10),
                cycle("i-1", 9, 25, 5, 10, source="copy.log"),  # the same cycle logged twice
                cycle("i-1", 10, 55, 6, 12),
                cycle("i-2", 3, 30, 1, 2),
            ],
        )
        yield s


def by_instance(table: pa.Table) -> dict:
    return {r["instance"]: r for r in table.to_pylist()}


def test_pure_helpers() -> None:
    assert counter_increase([100, 102, 105, 1, 3, 6, 10]) == 15
    assert counter_increase([5]) is None
    assert counter_increase([1, math.nan, 4]) == 3
    q = histogram_quantile(0.99, [(1e-5, 10), (1e-4, 80), (1e-3, 100), (math.inf, 100)])
    assert q == pytest.approx(1e-4 + 9e-4 * 19 / 20, rel=1e-12)
    # The rank in +Inf: the upper bound of the last finite bucket.
    assert histogram_quantile(0.99, [(1.0, 50), (2.0, 98), (math.inf, 100)]) == 2.0
    assert histogram_quantile(0.5, [(1.0, 0), (math.inf, 0)]) is None
    assert histogram_quantile(0.5, [(1.0, 3)]) is None  # no +Inf bucket


def test_runtime_view_per_profile(store: Store, gc_cpu_profile: Path) -> None:  # noqa: F811
    res = gc(store)
    assert res.profiles.schema == PROFILES_SCHEMA
    rows = res.profiles.to_pylist()
    cpu = next(r for r in rows if r["instance"] == "i-1" and r["profile_type"] == "cpu")
    heap = next(r for r in rows if r["instance"] == "i-1" and r["profile_type"] != "cpu")
    for r in (cpu, heap):  # the same instance and window: the same runtime view
        assert r["window_start"] == T0 and r["window_end"] == END
        assert r["scrapes"] == 7
        assert r["gc_cycles"] == 15
        assert r["gc_cycles_per_min"] == pytest.approx(15.0, rel=1e-12)
        assert r["alloc_bytes"] == pytest.approx(6e6, rel=1e-12)
        assert r["alloc_bytes_per_sec"] == pytest.approx(1e5, rel=1e-12)
        assert r["heap_live_mean_bytes"] == pytest.approx(50 * MiB, rel=1e-12)
        assert r["heap_live_last_bytes"] == 80 * MiB
        assert r["heap_goal_mean_bytes"] == 100 * MiB and r["heap_goal_last_bytes"] == 100 * MiB
        assert r["stw_pauses"] == pytest.approx(100, rel=1e-12)
        assert r["stw_pause_total_seconds"] == pytest.approx(0.05, rel=1e-12)
        assert r["stw_pause_p99_seconds"] == pytest.approx(1e-4 + 9e-4 * 19 / 20, rel=1e-9)
        assert r["gc_cpu_seconds"] == pytest.approx(6, rel=1e-12)
        assert r["total_cpu_seconds"] == pytest.approx(120, rel=1e-12)
        assert r["gc_cpu_fraction"] == pytest.approx(0.05, rel=1e-12)
        assert r["gc_cpu_fraction_busy"] == pytest.approx(0.1, rel=1e-12)
        assert r["gogc_percent"] == 50 and r["gomemlimit_bytes"] == float(2**63 - 1)
        assert r["gctrace_cycles"] == 3
        assert r["gctrace_heap_live_mean_mb"] == pytest.approx(5.0)
        assert r["gctrace_heap_goal_mean_mb"] == pytest.approx(10.0)
    # Profile view: only the CPU profile, equal to gc_categories on the file.
    expect = gc_categories(read_profile(gc_cpu_profile))
    assert cpu["profile_cpu_ns"] == expect.total and cpu["profile_gc_cpu_ns"] == expect.gc > 0
    assert cpu["profile_gc_share"] == pytest.approx(expect.gc_share)
    for name in CATEGORY_NAMES:
        assert cpu[f"gc_{name}_ns"] == expect.value(name)
    mark = sum(expect.value(n) for n in RUNTIME_COMPARABLE)
    assert cpu["profile_gc_mark_share"] == pytest.approx(mark / expect.total)
    assert 0 < cpu["profile_gc_mark_share"] < cpu["profile_gc_share"]
    assert heap["profile_cpu_ns"] is None and heap["profile_gc_share"] is None
    assert res.categories.schema == CATEGORIES_SCHEMA
    assert res.categories.num_rows == len(CATEGORY_NAMES) * 2  # two CPU profiles
    assert any("go_gc_heap_live_bytes: 2 series" in n for n in res.notes)


def test_missing_metrics_are_null_with_notes(store: Store) -> None:
    res = gc(store)
    rows = res.profiles.to_pylist()
    i2 = next(r for r in rows if r["instance"] == "i-2")
    assert i2["scrapes"] == 1
    assert i2["gc_cycles"] is None and i2["gc_cycles_per_min"] is None  # one sample only
    assert i2["heap_live_mean_bytes"] is None and i2["gc_cpu_fraction"] is None
    assert i2["gogc_percent"] is None and i2["stw_pause_p99_seconds"] is None
    assert i2["gctrace_cycles"] == 1
    assert i2["profile_gc_share"] is not None  # its CPU profile still has a profile view
    nowhere = next(r for r in rows if r["instance"] is None)
    assert nowhere["window_start"] is not None  # time + duration of the profile
    assert all(
        nowhere[f.name] is None
        for f in PROFILES_SCHEMA
        if f.name in ("scrapes", "gc_cycles", "gogc_percent", "gctrace_cycles")
    )
    notes = "\n".join(res.notes)
    assert "profile without an instance" in notes
    assert "go_gc_cycles_total_gc_cycles_total: fewer than two samples" in notes
    assert "go_gc_gogc_percent: no sample at or before the window end" in notes


def test_instances_summary(store: Store) -> None:
    res = gc(store)
    assert res.instances.schema == INSTANCES_SCHEMA
    inst = by_instance(res.instances)
    assert set(inst) == {"i-1", "i-2", None}
    i1 = inst["i-1"]
    assert (i1["profiles"], i1["cpu_profiles"]) == (2, 1)
    assert i1["window_start"] == T0 and i1["window_end"] == END
    assert i1["gc_cycles_per_min"] == pytest.approx(15.0, rel=1e-12)
    assert i1["gc_cpu_fraction_busy"] == pytest.approx(0.1, rel=1e-12)
    cpu = next(
        r
        for r in res.profiles.to_pylist()
        if r["instance"] == "i-1" and r["profile_cpu_ns"] is not None
    )
    assert i1["profile_gc_share"] == pytest.approx(cpu["profile_gc_share"])
    assert i1["profile_gc_cpu_ns"] == cpu["profile_gc_cpu_ns"]


def test_selection_and_lab(store: Store) -> None:
    from pyproflab.lab import Lab

    res = gc(store, Selection(instance="i-1", profile_type="cpu"))
    assert res.profiles.num_rows == 1 and res.instances.num_rows == 1
    lab = Lab(store)
    got = lab.gc(instance="i-2", categories=False)
    assert got.profiles.column("instance").to_pylist() == ["i-2"]
    assert got.profiles.column("profile_gc_share").to_pylist() == [None]
    assert got.to_pandas().shape[0] == 1 and got.to_arrow() is got.profiles
    # A selection of no profile is refused as top refuses it, not an empty table
    # (the CLI exited 2 while lab.gc returned 0 rows and a note).
    with pytest.raises(StoreError, match=r"^no profiles match service=nope \(for GC metrics"):
        lab.gc(service="nope")


def test_store_without_metric_tables(go_profiles: dict[str, Path]) -> None:
    with Store.open(":memory:") as s:
        ingest(
            s,
            [
                (
                    read_profile(go_profiles["cpu"]),
                    ProfileMeta(instance="i-9", window_start=T0, window_end=END),
                )
            ],
        )
        s.execute("DROP TABLE IF EXISTS metric_samples")
        s.execute("DROP TABLE IF EXISTS gc_cycles")
        res = gc(s)
        row = res.profiles.to_pylist()[0]
        assert row["gc_cycles"] is None and row["gctrace_cycles"] is None
        assert row["profile_cpu_ns"] > 0
        assert any("no metric_samples table" in n for n in res.notes)
        assert any("no gc_cycles table" in n for n in res.notes)


def test_renderings_and_html_escaping(store: Store) -> None:
    from pyproflab.reports import render

    ingest(store, [(read_profile_any(store), ProfileMeta(instance="<b>&x", service="api"))])
    res = gc(store)
    text = render(res, "text")
    assert "GC share per instance" in text and "i-1" in text and "15.0" in text
    assert "10.0%" in text and "5.0%" in text  # runtime busy and all for i-1
    doc = json.loads(render(res, "json"))
    assert {"instances", "profiles", "categories", "notes"} <= set(doc)
    i1 = next(r for r in doc["profiles"] if r["instance"] == "i-1")
    assert i1["gc_cycles_per_min"] == pytest.approx(15.0) and i1["window_start"].startswith(
        "2026-11-01T10:00:00"
    )
    csv_text = render(res, "csv")
    assert csv_text.splitlines()[0].split(",") == PROFILES_SCHEMA.names
    assert render(res, "csv", table="instances").splitlines()[0].startswith("service,")
    odd = next(r for r in res.profiles.to_pylist() if r["instance"] == "<b>&x")
    assert odd["gctrace_cycles"] is None  # no gctrace logs of that instance at all
    page = res._repr_html_()
    assert "<b>&x" not in page and "&lt;b&gt;&amp;x" in page
    cats = next(iter(res.category_results.values()))
    assert "<table>" in cats._repr_html_()


def read_profile_any(store: Store):
    """One stored profile back (for a row with an odd instance name)."""
    pid = store.sql("SELECT min(profile_id) FROM profiles").column(0)[0].as_py()
    p = store.profile(pid)
    p.comments = ["another copy"]  # a different content hash
    return p


def test_cli(store: Store, tmp_path: Path, capsys) -> None:
    from pyproflab.cli import main

    db = tmp_path / "fleet.duckdb"
    store.execute(f"ATTACH '{db}' AS f")  # a file copy of the filled store
    store.execute("COPY FROM DATABASE memory TO f")
    store.execute("DETACH f")
    assert main(["gc", "--db", str(db), "--instance", "i-1"]) == 0
    out = capsys.readouterr().out
    assert "i-1" in out and "i-2" not in out and "profile view" in out
    assert main(["gc", "--db", str(db), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["profiles"]) == 4
    assert main(["gc", "--db", str(db), "--format", "csv", "--table", "categories"]) == 0
    assert capsys.readouterr().out.startswith("profile_id,category,")
    assert main(["gc", "--db", str(tmp_path / "missing.duckdb")]) == 2
    assert "no such store" in capsys.readouterr().err


def test_demo_notes_agree_with_the_rows_shown() -> None:
    """On the recorded demo run (heap and goroutine snapshots at the end of each
    instance's last window, no scrape inside them), the notes name the snapshots'
    own rows, and say the instance rows have the runtime view, as they do: never
    "runtime-view columns are NULL" beside instance rows that show values."""
    from support.browser.stores import demo_store

    with Store.open(demo_store(), read_only=True) as s:
        res = gc(s)
    instances = res.instances.to_pylist()
    assert instances and all(r["gc_cpu_fraction"] is not None for r in instances)
    notes = "\n".join(res.notes)
    assert "runtime-view columns are NULL" not in notes, notes
    snapshots = [r for r in res.profiles.to_pylist() if r["profile_type"] in ("heap", "goroutine")]
    assert snapshots and all(r["gc_cpu_fraction"] is None for r in snapshots)
    assert f"{len(snapshots)} goroutine/heap snapshots (each an instant) hold no" in notes
    assert "the instance rows, over all of an instance's profiles, have it" in notes
    windowed = [r for r in res.profiles.to_pylist() if r["profile_type"] == "cpu"]
    assert all(r["gc_cpu_fraction"] is not None for r in windowed)


def test_profiles_without_a_scrape_are_named(
    go_profiles: dict[str, Path],
    gc_cpu_profile: Path,  # noqa: F811
) -> None:
    """Profiles whose window holds no scrape of their instance (i-1's second
    window, after its last scrape; i-3, never scraped) are named in one note, with
    which of their instances' rows have the runtime view: never "runtime-view
    columns are NULL" beside instance rows that show values."""
    late = {"window_start": at(200), "window_end": at(230)}
    with Store.open(":memory:") as s:
        ingest(
            s,
            [
                (
                    read_profile(gc_cpu_profile),
                    ProfileMeta(instance="i-1", window_start=T0, window_end=END),
                ),
                (read_profile(go_profiles["cpu2"]), ProfileMeta(instance="i-1", **late)),
                (read_profile(go_profiles["mutex"]), ProfileMeta(instance="i-1", **late)),
            ],
        )
        insert(s, "metric_samples", [r for r in i1_metrics() if r["instance"] == "i-1"])
        res = gc(s, categories=False)
        rows = res.profiles.to_pylist()
        assert sorted(r["scrapes"] for r in rows) == [0, 0, 7]
        assert [r["scrapes"] for r in res.instances.to_pylist()] == [8]  # 0 ... 230: 8 scrapes
        notes = "\n".join(res.notes)
        assert "runtime-view columns are NULL" not in notes, notes
        assert (
            "2 cpu/mutex profiles of i-1 hold no /metrics scrape of their instance in their "
            "window: no runtime view in their per-profile rows; the instance rows, over all "
            "of an instance's profiles, have it"
        ) in res.notes, res.notes

        # i-3, never scraped: its row has no runtime view either, and the note says so.
        ingest(
            s,
            [(read_profile(go_profiles["cpu"]), ProfileMeta(instance="i-3", **late))],
        )
        res = gc(s, categories=False)
        assert (
            "3 cpu/mutex profiles of i-1, i-3 hold no /metrics scrape of their instance in "
            "their window: no runtime view in their per-profile rows; the rows of i-1 have "
            "it, over all of an instance's profiles; those of i-3 do not"
        ) in res.notes, res.notes
        res = gc(s, Selection(instance="i-3"), categories=False)
        assert (
            "1 cpu profile of i-3 holds no /metrics scrape of its instance in its window: "
            "no runtime view in its per-profile row; nor do the rows of its instance"
        ) in res.notes, res.notes
