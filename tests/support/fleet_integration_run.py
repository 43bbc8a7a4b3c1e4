"""The fleet integration run (tests/test_fleet_integration.py): live, recorded, replayed.

``live_run(tmp)`` runs the whole loop against real processes: two notesd
instances (GOGC 50 and 200, gctrace to a file each, pprof behind a bearer token)
scraped every second by a real Prometheus while loadgen ramps load at them and
``collect`` takes profiles and /metrics; then Prometheus' ``query_range`` is
imported and the gctrace logs ingested. Needs Go and /usr/bin/prometheus.

A live run's numbers depend on the machine's load (how many scrapes, cycles
and samples a window catches), so the tests check one run recorded here
(``python tests/support/fleet_integration_run.py --record``: profiles as a Parquet
dataset, metric_samples and gc_cycles as Parquet files, the archived CPU
profiles, and run.json), replayed by ``load_run``. The same checks on a live
run are the ``fleet-integration`` bench section (``python -m bench --only
fleet-integration``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from support.prometheus_server_helpers import PROMETHEUS, SKIP_NO_PROMETHEUS, prometheus

__all__ = ["PROMETHEUS", "SKIP_NO_PROMETHEUS", "live_run", "load_run", "save_run"]

RECORDED = Path(__file__).resolve().parents[1] / "testdata" / "fleet_integration"
METRIC_TABLES = ("metric_samples", "gc_cycles")
SERVICE = "notesd"
TOKEN = "integration-test-token"
AUTH_ENV = "PYPROFLAB_IT_AUTH"
LOAD_SECONDS = 20.0
CPU_SECONDS = 10
CYCLES_Q = "go_gc_cycles_total_gc_cycles_total"
STAMP_Q = f"timestamp({CYCLES_Q})"


@dataclass
class Fetch:
    """What the checks read of one collect fetch."""

    profile_type: str
    archive_path: str | None


@dataclass
class Run:
    """What the loop left behind for the checks."""

    db: Path
    instances: list[tuple[str, str, str]]  # (version, instance, Prometheus' instance label)
    errors: list[str]  # collect's
    fetches: list[Fetch]
    imported: int
    load_errors: tuple[int, int] = (0, 0)  # loadgen's (errors, requests)


def wait_scraped(base: str, n: int, timeout: float = 120.0) -> None:
    """Wait until Prometheus has scraped ``n`` targets successfully (it applies a
    new configuration's targets only some seconds after it reports ready)."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(base + "/api/v1/targets?state=active", timeout=5) as r:
            active = json.load(r)["data"]["activeTargets"]
        if sum(t.get("health") == "up" for t in active) >= n:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"prometheus scraped fewer than {n} targets in {timeout} s")
        time.sleep(0.2)


def scrapes(base: str, seconds: int = 60) -> dict[str, list[tuple[float, float]]]:
    """Prometheus' instance label -> (stamp in Unix s, GC cycle count) of each of
    its scrapes in the last ``seconds`` that a query answers (stored, not just taken)."""
    query = urllib.parse.urlencode({"query": f"{CYCLES_Q}[{seconds}s]"})
    with urllib.request.urlopen(f"{base}/api/v1/query?{query}", timeout=5) as r:
        result = json.load(r)["data"]["result"]
    return {s["metric"]["instance"]: [(float(t), float(v)) for t, v in s["values"]] for s in result}


def idle_scrapes(points: list[tuple[float, float]], after: float) -> int:
    """How many of the last scrapes stamped after ``after`` saw the last one's
    cycle count (no cycle ended between them: the instance idle)."""
    counts = [v for t, v in points if t > after]
    idle = 0
    for v in reversed(counts):
        if v != counts[-1]:
            break
        idle += 1
    return idle


def wait_idle(
    base: str, instances: list[str], after: float, n: int, timeout: float = 120.0
) -> None:
    """Wait until a query answers, for each of ``instances``, ``n`` scrapes in a
    row stamped after ``after`` (Unix s) with the same cycle count: the idle,
    quiet scrapes the checks' window edges need, before the load and after it.
    Fixed sleeps of 2.5 s gave them by chance: in the recorded run and a live
    one the GOGC=50 instance had one scrape after its last cycle (it cycled
    on 1.5 s past the load), and a Prometheus that lags on a crowded box (2
    cores shared) leaves none."""
    deadline = time.monotonic() + timeout
    while True:
        got = {i: idle_scrapes(points, after) for i, points in scrapes(base).items()}
        if all(got.get(i, 0) >= n for i in instances):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"prometheus answered {got} of {n} idle scrapes in {timeout} s")
        time.sleep(0.2)


def live_run(tmp: Path) -> Run:
    """One live run into ``tmp`` (see the module docstring)."""
    from pyproflab.collect import collect
    from pyproflab.sources.base import ItemMeta, Request
    from pyproflab.sources.metric_files import MetricFileSource
    from pyproflab.sources.prometheus_server import (
        DEFAULT_GC_QUERIES,
        InstanceInfo,
        PrometheusSource,
    )
    from pyproflab.sources.targets import Target
    from pyproflab.store.connection import Store
    from pyproflab.store.sourced import ingest_source
    from support import fleet_harness as fh

    bins = fh.build_fleet()
    db = tmp / "fleet.duckdb"
    specs = [
        fh.InstanceSpec("v1", "it-a", gogc=50, token=TOKEN, gctrace=True),
        fh.InstanceSpec("v2", "it-b", gogc=200, token=TOKEN, gctrace=True),
    ]
    os.environ[AUTH_ENV] = f"Bearer {TOKEN}"
    try:
        with (
            Store.open(db) as store,
            fh.start_fleet(specs, binaries=bins, workdir=tmp / "fleet", max_lifetime=150) as fleet,
            prometheus(tmp, [inst.addr for inst in fleet], job=SERVICE) as prom,
        ):
            wait_scraped(prom, len(fleet))
            start = datetime.now(UTC)
            addrs = [inst.addr for inst in fleet]
            wait_idle(prom, addrs, start.timestamp(), 3)  # quiet window edges before the load
            with fh.start_load(
                list(fleet),
                duration=LOAD_SECONDS,
                rate_start=150,
                rate_end=600,
                max_requests=20_000,
                loadgen=bins.loadgen,
            ) as load:
                time.sleep(3)
                targets = [
                    Target(SERVICE, i.version, i.instance, i.base_url, auth_env=AUTH_ENV)
                    for i in fleet
                ]
                report = collect(
                    store,
                    targets,
                    seconds=CPU_SECONDS,
                    types=("cpu", "heap", "allocs"),
                    archive_dir=tmp / "archive",
                    metrics_interval=2.0,
                )
                summary = load.wait()
            load_errors = (summary["errors"], summary["requests"])
            # and after it: three, so that the import's 1 s steps up to ``end`` reach two.
            wait_idle(prom, addrs, time.time(), 3)
            end = datetime.now(UTC)
            mapping = {i.addr: InstanceInfo(SERVICE, i.version, i.instance) for i in fleet}
            prom_source = PrometheusSource(
                prom,
                "1s",
                queries=(*DEFAULT_GC_QUERIES, STAMP_Q),
                instances=mapping,
                only_mapped=True,
            )
            imported = ingest_source(
                store, prom_source, Request(since=start, until=end), batch_size=2**62
            ).metric_rows
            fleet.stop()  # the gctrace logs are complete once the processes are gone
            for inst in fleet:
                logs = MetricFileSource(
                    [str(inst.stderr)],
                    "gctrace",
                    ItemMeta(service=SERVICE, version=inst.version, instance=inst.instance),
                    process_start=datetime.fromtimestamp(inst.started_at, UTC),
                    lenient=True,
                )
                ingest_source(store, logs)
                if logs.skipped:  # a split line would lose a cycle
                    raise RuntimeError(f"{inst.stderr}: {logs.skipped}")
            instances = [(i.version, i.instance, i.addr) for i in fleet]
    finally:
        os.environ.pop(AUTH_ENV, None)
    fetches = [Fetch(f.profile_type, f.archive_path) for f in report.fetches]
    return Run(db, instances, report.errors(), fetches, imported, load_errors)


def save_run(run: Run, dest: Path = RECORDED) -> None:
    """``run`` as files in ``dest`` (replaced)."""
    import duckdb

    from pyproflab.store import Store
    from pyproflab.store.parquet import export_parquet

    shutil.rmtree(dest, ignore_errors=True)
    with Store.open(run.db, read_only=True) as store:
        export_parquet(store, dest / "profiles")
    (dest / "metrics").mkdir()
    (dest / "cpu").mkdir()
    with duckdb.connect(str(run.db), read_only=True) as con:
        for table in METRIC_TABLES:
            out = dest / "metrics" / f"{table}.parquet"
            con.execute(f"COPY (SELECT * FROM {table} ORDER BY ALL) TO '{out}'")
    fetches = []  # the CPU ones, which the checks read
    for f in run.fetches:
        if f.profile_type == "cpu" and f.archive_path:
            shutil.copy(f.archive_path, dest / "cpu" / Path(f.archive_path).name)
            fetches.append(
                {"profile_type": "cpu", "archive_path": f"cpu/{Path(f.archive_path).name}"}
            )
    meta = {
        "instances": run.instances,
        "errors": run.errors,
        "fetches": fetches,
        "imported": run.imported,
        "load_errors": list(run.load_errors),
    }
    (dest / "run.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def load_run(tmp: Path, src: Path = RECORDED) -> Run:
    """The recorded run in a new store under ``tmp``; archive paths point into ``src``."""
    import pyarrow.parquet as pq

    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_gc_rows, ingest_metric_rows
    from pyproflab.store.parquet import import_parquet

    db = tmp / "fleet.duckdb"
    with Store.open(db) as store:
        import_parquet(store, src / "profiles")
        ingest_metric_rows(store, pq.read_table(src / "metrics" / "metric_samples.parquet"))
        ingest_gc_rows(store, pq.read_table(src / "metrics" / "gc_cycles.parquet"))
    meta = json.loads((src / "run.json").read_text())
    fetches = [
        Fetch(f["profile_type"], str(src / f["archive_path"]) if f["archive_path"] else None)
        for f in meta["fetches"]
        if f["profile_type"] == "cpu"
    ]
    instances = [tuple(i) for i in meta["instances"]]
    return Run(db, instances, meta["errors"], fetches, meta["imported"], tuple(meta["load_errors"]))


if __name__ == "__main__":
    # Run as a file: tests/ on sys.path, for the support.* imports.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/support/fleet_integration_run.py --record")
    with tempfile.TemporaryDirectory() as d:
        run = live_run(Path(d))
        save_run(run)
    print(f"recorded in {RECORDED}: {run.imported} points imported, load errors {run.load_errors}")
