"""Whose GC metrics a stored row is: two services may each run an instance of one name."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from pyproflab.cli import main as cli_main

DATA = Path(__file__).resolve().parents[1] / "testdata" / "gc"
PROM = DATA / "prometheus-2.42-metrics.prom"
GCTRACE = DATA / "gctrace-go1.26.log"


def _ingest(db: Path, capsys, *args: str) -> str:
    assert cli_main(["ingest-gc", "--db", str(db), *args]) == 0
    return capsys.readouterr().out


def _by_service(db: Path, table: str) -> dict:
    with duckdb.connect(str(db), read_only=True) as con:
        return dict(con.sql(f"SELECT service, count(*) FROM {table} GROUP BY ALL").fetchall())


@pytest.mark.parametrize(
    ("fmt", "path", "when", "table"),
    [
        ("prom", PROM, "--time", "metric_samples"),
        ("gctrace", GCTRACE, "--process-start", "gc_cycles"),
    ],
)
def test_two_services_pod_0_are_two_instances(tmp_path, capsys, fmt, path, when, table):
    # Services api and db each run pod-0, scraped at one time (a Prometheus range
    # query's steps are the same for every series) or logging to files of one name:
    # db's rows were "0 new, 295 already present" and never stored (api's stood for them).
    db = tmp_path / "s.duckdb"
    common = ["--format", fmt, "--instance", "pod-0", when, "2026-11-01T10:00Z", str(path)]
    first = _ingest(db, capsys, "--service", "api", *common)
    n = int(re.search(r"(\d+) new", first).group(1))
    assert n > 0
    assert f"{n} new, 0 already present" in _ingest(db, capsys, "--service", "db", *common)
    assert _by_service(db, table) == {"api": n, "db": n}
    # The same service again is what it was: already present.
    assert f"0 new, {n} already present" in _ingest(db, capsys, "--service", "db", *common)
    # Rows stored without a service are still the same rows as one's with it.
    assert f"0 new, {n} already present" in _ingest(db, capsys, *common)
