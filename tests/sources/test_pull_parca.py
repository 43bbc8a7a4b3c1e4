"""``pyproflab pull parca`` against a protocol-faithful Parca test server
(tests/support/fake_parca.py: QueryService over Connect with JSON), serving
real Go CPU profiles recorded in tests/testdata/go and one of Parca's own
(../shared/corpus).

Exact (one profile per series and window, byte-for-byte the served files;
top equals go tool pprof over them), idempotent, kill-safe, faults, a bearer
token from the environment written nowhere, pull + pgo equal to pgo over the
files, and a job kind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fake_services import serve
from support.pull_helpers import (
    CPU_FILES,
    VERSIONS,
    assert_jobs_write_no_secret,
    assert_no_secret,
    assert_pgo_equal,
    assert_top_per_version,
    cli,
    profile_count,
    served_hashes,
    stored,
    version_of,
)
from support.testenv import CORPUS, REPO

pytestmark = pytest.mark.go

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
QUERY = CPU + '{job="notes-api"}'
STEP = 600_000
TOKEN = "Bearer parca-SECRET-token-31"


def _manifest(files: list[Path] = CPU_FILES, **settings) -> dict:
    """CPU_FILES labelled by version (v1, v2), any further file v3."""
    base = (int(time.time() * 1000) // STEP - 12) * STEP
    profiles = [
        {
            "file": str(f),
            "type": CPU,
            "labels": {
                "job": "notes-api",
                "service": "notes-api",
                "instance": f"i-{i % 2}",
                "version": version_of(i) if i < len(CPU_FILES) else "v3",
            },
            "time_ms": base + i * STEP + STEP // 3,
        }
        for i, f in enumerate(files)
    ]
    outside = [{**profiles[0], "labels": {"job": "other", "instance": "i-9"}}]
    return {"profiles": profiles + outside, **settings}


def _pull(url: str, db: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = ["pull", "parca", url, "--query", QUERY, "--since", "6h", "--step", "10m"]
    return cli(*args, "--db", str(db), "--retries", "2", *extra, env=env)


def test_pull_is_exact_and_idempotent(tmp_path):
    files = list(CPU_FILES)
    corpus = CORPUS / "parca/pkg/query/testdata/profile1.pb.gz"
    if corpus.is_file():
        files.append(corpus)  # Parca's own recording, when ../shared is there
    db = tmp_path / "p.duckdb"
    with serve("parca", _manifest(files), tmp_path) as s:
        first = _pull(s.url, db)
        assert first.returncode == 0, first.stderr
        assert f"{len(files)} new, 0 already present, 0 refused" in first.stdout
        asked = s.requests("/Query", end=True)  # the windows with data, and empty neighbours
        second = _pull(s.url, db)
        assert second.returncode == 0 and "0 new, 0 already present" in second.stdout
        assert s.requests("/Query", end=True) == asked  # no window asked again, empty ones neither
    rows = stored(db)
    assert {r["content_hash"] for r in rows} == served_hashes(files)
    groups = {
        **VERSIONS,
        **({"v3": files[len(CPU_FILES) :]} if len(files) > len(CPU_FILES) else {}),
    }
    assert {(r["service"], r["version"]) for r in rows} == {("notes-api", v) for v in groups}
    assert_top_per_version(db, "parca pull", groups)


def test_token_from_the_environment_is_written_nowhere(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("parca", _manifest(authorization=TOKEN), tmp_path) as s:
        res = _pull(s.url, db, "--auth-env", "PARCA_TOKEN", env={"PARCA_TOKEN": TOKEN})
        assert res.returncode == 0, res.stderr
        assert all(e["auth"] for e in s.log())
        bad = _pull(s.url, tmp_path / "b.duckdb")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        f"pyproflab: error: parca:{s.url}: POST /parca.query.v1alpha1.QueryService/"
        f"ProfileTypes: HTTP 401 from {s.url}/parca.query.v1alpha1.QueryService/ProfileTypes"
        ": unauthorized"  # the server's reason (Connect's message)
    )
    wal = [p for p in tmp_path.glob("*.duckdb*") if p.is_file()]
    assert_no_secret(TOKEN.split()[1], [res.stdout, res.stderr, bad.stderr], wal)


def test_kill_part_way_then_rerun(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("parca", _manifest(), tmp_path) as s:
        s.faults([{"path": "/Query", "end": True, "kind": "hang", "after": 3, "times": 1}])
        args = ["pull", "parca", s.url, "--query", QUERY, "--since", "6h", "--step", "10m",
                "--db", str(db), "--batch-size", "2", "--timeout", "120"]  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "pyproflab", *args], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 300  # bounds a hang only
            while s.requests("/Query", end=True) < 4 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert s.requests("/Query", end=True) == 4
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        # Whole batches only: what is stored is whole served profiles.
        rows = stored(db)
        assert {r["content_hash"] for r in rows} <= served_hashes(CPU_FILES)
        assert len(rows) < len(CPU_FILES)
        s.faults([])
        again = _pull(s.url, db)
        assert again.returncode == 0, again.stderr
        assert f"{len(CPU_FILES) - len(rows)} new, 0 already present" in again.stdout
    assert_top_per_version(db, "parca pull after a kill")


def test_faults(tmp_path):
    with serve("parca", _manifest(), tmp_path) as s:
        s.faults([
            {"path": "QueryRange", "kind": "status", "status": 429, "retry_after": "1"},
            {"path": "/Query", "end": True, "kind": "status", "status": 500, "times": 2},
        ])  # fmt: skip
        res = _pull(s.url, tmp_path / "a.duckdb")
        assert res.returncode == 0, res.stderr
        assert "HTTP 429" in res.stderr and "HTTP 500" in res.stderr and "5 new" in res.stdout
        windows = s.requests("/Query", end=True) - 2  # each window once, and the two 500s

        s.faults([{"path": "/Query", "end": True, "kind": "html", "times": 1}])
        res = _pull(s.url, tmp_path / "b.duckdb")
        assert res.returncode == 1
        refused = [ln for ln in res.stderr.splitlines() if ln.startswith("refused ")]
        assert len(refused) == 1
        assert refused[0].endswith(
            "POST /parca.query.v1alpha1.QueryService/Query: expected application/json, "
            "got text/html"
        )
        # The page may have been a data window's or an empty one's: the rest landed.
        new = int(res.stdout.split(": ")[1].split(" new")[0])
        assert new in (4, 5)
        res = _pull(s.url, tmp_path / "b.duckdb")
        assert res.returncode == 0 and f"{5 - new} new, 0 already present" in res.stdout

        # Every merge truncated, then every merge over the cap: each window one
        # refused line naming it and the request (truncation retried, the cap not).
        for fault, extra, why in (
            ({"kind": "truncate"}, (), "short body from"),
            ({"kind": "huge", "bytes": 3 << 20}, ("--max-mib", "1"), "larger than 1048576 bytes"),
        ):
            s.faults([{"path": "/Query", "end": True, "times": 1000, **fault}])
            res = _pull(s.url, tmp_path / f"{fault['kind']}.duckdb", *extra)
            assert res.returncode == 2, res.stderr  # nothing landed: the pull failed
            refused = [ln for ln in res.stderr.splitlines() if ln.startswith("refused ")]
            assert len(refused) == windows, res.stderr
            assert all(
                "POST /parca.query.v1alpha1.QueryService/Query: " in ln and why in ln
                for ln in refused
            ), refused
            assert f"0 new, 0 already present, {windows} refused" in res.stdout

        s.faults([{"path": "QueryRange", "kind": "slow", "times": 3}])
        t0 = time.monotonic()
        res = _pull(s.url, tmp_path / "c.duckdb", "--timeout", "1")
        # Bounds a hang only (the slow body lasts 1000 s); the line below proves the timeout.
        assert res.returncode == 2 and time.monotonic() - t0 < 600
        assert "QueryRange: timed out after 1 s" in res.stderr


def test_pull_then_pgo_equals_pgo_of_the_files(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("parca", _manifest(), tmp_path) as s:
        assert _pull(s.url, db).returncode == 0
    assert_pgo_equal(db, CPU_FILES, tmp_path, "--service", "notes-api")


def test_a_job_pulls_incrementally(tmp_path):
    with serve("parca", _manifest(), tmp_path) as s:
        job = tmp_path / "job.toml"
        job.write_text(
            '[job]\nname = "parca"\nstore = "s.duckdb"\noutput = "out"\n'
            f'[[source]]\nkind = "parca"\nurl = "{s.url}"\nquery = \'{QUERY}\'\n'
            'since = "6h"\nstep = "10m"\n'
        )
        asked = []
        for _ in range(2):
            res = cli("job", "run", str(job))
            assert res.returncode == 0, res.stderr
            asked.append(s.requests("/Query", end=True))
        assert asked[0] == asked[1] >= len(CPU_FILES)
    assert profile_count(tmp_path / "s.duckdb") == len(CPU_FILES)


def test_profile_types_labels_and_services_on_offer(tmp_path):
    from datetime import UTC, datetime, timedelta

    from pyproflab.sources.base import Request
    from pyproflab.sources.parca import ParcaSource

    with serve("parca", _manifest(), tmp_path) as s:
        source = ParcaSource(s.url, QUERY)
        now = datetime.now(UTC)
        offer = source.offer(Request(since=now - timedelta(hours=6), until=now))
        names = source.labels()
        versions = source.values("version")
    assert offer.profile_types == (CPU,) and offer.services == ("notes-api",)
    assert {"job", "service", "version", "instance"} <= set(names)
    assert versions == ["v1", "v2"]


def test_jobs_write_no_secret(tmp_path):
    keys = f'query = \'{QUERY}\'\nsince = "6h"\nstep = "10m"\nretries = 1\n'
    with serve("parca", _manifest(authorization=TOKEN), tmp_path) as s:
        assert_jobs_write_no_secret(s, tmp_path, "parca", keys, TOKEN)
