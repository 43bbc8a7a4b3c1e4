"""A fleet of 1,000 CPU profiles: the store's top equals `go tool pprof -top` over the files.

The profiles are derived from profgen's two real CPU profiles (tests/support/gen_profiles.py:
random subsets of samples, rescaled, each distinct), ingested into one store
file, and compared through the API (Store.merged_profile + top) and the CLI
(`pyproflab top --db`). pprof reads and merges all 1,000 files itself.
Budget: about 2-3 minutes in all (marked slow; `make test-fast` leaves it out).
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support import pprof_oracle as oracle
from support.gen_profiles import derive_cpu_profiles
from support.testenv import REPO, Pprof, api_store_merged, api_top, assert_same_rows, our_top_keys

pytestmark = [pytest.mark.slow, pytest.mark.go]

FLEET_SIZE = 1000


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def fleet(go_profiles, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """1,000 distinct CPU profiles derived from profgen's cpu and cpu2."""
    t0 = time.monotonic()
    paths = derive_cpu_profiles(
        [go_profiles["cpu"], go_profiles["cpu2"]], FLEET_SIZE, tmp_path_factory.mktemp("fleet")
    )
    print(f"generated {len(paths)} profiles in {time.monotonic() - t0:.1f}s")
    return paths


@pytest.fixture(scope="module")
def fleet_db(fleet: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet ingested into one store file with `pyproflab ingest`."""
    db = tmp_path_factory.mktemp("store") / "fleet.duckdb"
    t0 = time.monotonic()
    res = cli("ingest", str(fleet[0].parent), "--db", str(db), "--service", "fleet", "--strict")
    print(f"ingested in {time.monotonic() - t0:.1f}s: {res.stdout.strip()}")
    assert res.returncode == 0, f"pyproflab ingest failed: {res.stderr[-2000:]}"
    return db


@pytest.fixture(scope="module")
def fleet_oracle(fleet: list[Path], pprof: Pprof) -> dict[int, oracle.TopReport]:
    """pprof -top over all 1,000 files, per sample index (0 samples/count, 1 cpu/nanoseconds)."""
    t0 = time.monotonic()
    reports = {i: pprof.top(fleet, sample_index=i) for i in (0, 1)}
    print(f"go tool pprof over {len(fleet)} files: {time.monotonic() - t0:.1f}s")
    return reports


def test_fleet_profiles_are_distinct_and_readable(fleet: list[Path], pprof: Pprof):
    """The generator makes distinct files that pprof reads, and the fleet total adds up."""
    assert len(fleet) == FLEET_SIZE
    assert len({p.read_bytes() for p in fleet}) == FLEET_SIZE
    sample = fleet[:: FLEET_SIZE // 10]
    totals = [pprof.top(p, sample_index=1).total for p in sample]
    assert all(t and t > 0 for t in totals) and len(set(totals)) > 1
    merged_total = pprof.top(sample, sample_index=1).total
    assert merged_total == sum(totals)


@pytest.mark.parametrize("index", [0, 1], ids=["samples", "cpu"])
def test_fleet_top_api(index: int, fleet_db: Path, fleet_oracle):
    """Store.merged_profile(everything) then top == pprof -top over the 1,000 files."""
    t0 = time.monotonic()
    result = api_top(api_store_merged(fleet_db), sample_index=index)
    print(f"store merge + top: {time.monotonic() - t0:.1f}s")
    assert_same_rows(our_top_keys(result), fleet_oracle[index], f"fleet top index {index}")


@pytest.mark.parametrize("index", [0, 1], ids=["samples", "cpu"])
def test_fleet_top_cli(index: int, fleet_db: Path, fleet_oracle):
    """`pyproflab top --db DB --nodefraction 0 --format csv` == pprof -top -nodefraction=0
    over the 1,000 files (the oracle's flags: every node, pprof's default edge fraction)."""
    res = cli(
        "top",
        "--db",
        str(fleet_db),
        "--sample-index",
        str(index),
        "--nodefraction",
        "0",
        "--format",
        "csv",
    )
    assert res.returncode == 0, f"pyproflab top --db failed: {res.stderr[-2000:]}"
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    ours = []
    for row in rows:
        name = row.get("label") or row["name"]
        marker = row.get("inline") or ""
        for m in ("(partial-inline)", "(inline)"):
            if name.endswith(" " + m):
                name, marker = name[: -len(m) - 1], m
        ours.append((name, int(row["flat"]), int(row["cum"]), marker))
    assert_same_rows(ours, fleet_oracle[index], f"fleet CLI top index {index}")


def test_fleet_store_counts(fleet_db: Path, fleet: list[Path]):
    """All 1,000 are stored once: ingesting them again adds nothing."""
    res = cli("ingest", str(fleet[0].parent), "--db", str(fleet_db), "--service", "fleet")
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout.lower()
    assert "1000" in out and ("present" in out or "already" in out), out
    assert Counter(p.suffix for p in fleet) == {".gz": FLEET_SIZE}
