"""``pyproflab pull pyroscope`` against a protocol-faithful Pyroscope test server
(tests/support/fake_pyroscope.py: the Connect query API with JSON, and the
legacy render), serving real Go CPU profiles recorded in tests/testdata/go.

Exact (one profile per series and window: the range's, no others; top equals
go tool pprof over the served files), idempotent, kill-safe, the goPgo
selector, the tenant header, an Authorization value from the environment
written nowhere, the legacy render for an older server, faults, a job kind,
and pull + pgo equal to pgo over the files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from support.fake_services import serve
from support.pull_helpers import (
    CPU_FILES,
    assert_jobs_write_no_secret,
    assert_no_secret,
    assert_pgo_equal,
    assert_top_per_version,
    cli,
    oracle_top,
    profile_count,
    store_top,
    stored,
)
from support.testenv import REPO

pytestmark = pytest.mark.go

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
QUERY = CPU + '{service_name="notes-api"}'
STEP = 600_000  # ms: the pulls' --step 10m
TOKEN = "Bearer pyro-SECRET-token-77"


def _manifest(**settings) -> dict:
    base = (int(time.time() * 1000) // STEP - 12) * STEP  # two hours ago, aligned
    series = [("v1", "i-1"), ("v1", "i-1"), ("v1", "i-1"), ("v2", "i-2"), ("v2", "i-2")]
    profiles = [
        {
            "file": str(f),
            "type": CPU,
            "labels": {"service_name": "notes-api", "version": v, "instance": inst},
            "time_ms": base + i * STEP + STEP // 2,
        }
        for i, (f, (v, inst)) in enumerate(zip(CPU_FILES, series, strict=True))
    ]
    outside = [
        {**profiles[0], "labels": {"service_name": "other", "instance": "i-9"}},
        {**profiles[1], "time_ms": base - 100 * STEP},
    ]
    return {"profiles": profiles + outside, "tenant": "acme", **settings}


def _pull(url: str, db: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = ["pull", "pyroscope", url, "--query", QUERY, "--since", "6h", "--step", "10m"]
    return cli(*args, "--db", str(db), "--tenant", "acme", "--retries", "2", *extra, env=env)


def test_pull_is_exact_idempotent_and_tenant_scoped(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(), tmp_path) as s:
        first = _pull(s.url, db)
        assert first.returncode == 0, first.stderr
        assert "5 new, 0 already present, 0 refused" in first.stdout
        assert s.requests("SelectMergeProfile") == 5
        assert all(e["tenant"] for e in s.log())
        second = _pull(s.url, db)
        assert second.returncode == 0 and "0 new, 0 already present" in second.stdout
        assert s.requests("SelectMergeProfile") == 5  # no window asked again
        assert "fetched before, skipped" in second.stdout
        typo_query = CPU + '{service_name="notes-apj"}'
        typo = cli("pull", "pyroscope", s.url, "--query", typo_query, "--since", "6h",
                   "--db", str(tmp_path / "t.duckdb"), "--tenant", "acme")  # fmt: skip
        assert typo.returncode == 2, typo.stdout + typo.stderr  # before: "0 new", exit 0
        assert ": nothing matched the request in this time range (" in typo.stderr
        untenanted = cli("pull", "pyroscope", s.url, "--query", QUERY, "--since", "6h",
                         "--db", str(tmp_path / "x.duckdb"))  # fmt: skip
        assert untenanted.returncode == 2
        assert "POST /querier.v1.QuerierService/ProfileTypes: HTTP 401" in untenanted.stderr
    assert profile_count(db) == len(CPU_FILES)
    assert_top_per_version(db, "pyroscope pull")
    rows = stored(db)
    assert sorted((r["version"], r["instance"]) for r in rows) == [
        ("v1", "i-1"), ("v1", "i-1"), ("v1", "i-1"), ("v2", "i-2"), ("v2", "i-2")
    ]  # fmt: skip
    # The JSON protocol re-encodes each profile: its bytes are not the served file's,
    # its content is (the top above; pgo below).
    assert len({r["content_hash"] for r in rows}) == len(CPU_FILES)


def test_go_pgo_selector_and_authorization_from_the_environment(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(authorization=TOKEN), tmp_path) as s:
        res = _pull(s.url, db, "--go-pgo", "2", "--auth-env", "PYRO_AUTH", env={"PYRO_AUTH": TOKEN})
        assert res.returncode == 0, res.stderr
        assert all(e["auth"] for e in s.log())
        missing = _pull(
            s.url, tmp_path / "y.duckdb", "--auth-env", "PYRO_AUTH", env={"PYRO_AUTH": ""}
        )
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith(
        "environment variable PYRO_AUTH (the Authorization value) is not set"
    )
    con = duckdb.connect(str(db), read_only=True)
    try:
        longest = con.execute("SELECT max(len(location_ids)) FROM stacks").fetchone()[0]
        leaf_lines = con.execute(
            "SELECT DISTINCT l.lines[1].line FROM stacks s "
            "JOIN locations l ON l.location_id = s.location_ids[1]"
        ).fetchall()
    finally:
        con.close()
    assert longest == 2 and leaf_lines == [(0,)]
    wal = [p for p in tmp_path.glob("p.duckdb*") if p.is_file()]
    assert_no_secret(TOKEN.split()[1], [res.stdout, res.stderr, missing.stderr], wal)


def test_windows_of_another_step_or_view_are_refused_not_counted_twice(tmp_path):
    """A store pulled with --step 10m, pulled again with the default 1h, stored
    the hour windows beside the ten-minute ones: `top --db` then summed v1's
    profiles twice (duration 47.19 s for 28.7 s of profiles). Each overlapping
    window is now refused in one line, and the store is as it was; so is a
    --go-pgo view of the same windows."""
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(), tmp_path) as s:
        assert _pull(s.url, db).returncode == 0
        before = store_top(db)
        count = profile_count(db)
        args = ["pull", "pyroscope", s.url, "--query", QUERY, "--since", "6h", "--db", str(db)]
        hourly = cli(*args, "--tenant", "acme")
        go_pgo = _pull(s.url, db, "--go-pgo", "2")
    for res in (hourly, go_pgo):
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and "every profile refused" in lines[-1], res.stderr
        assert all("of this series stored before" in ln for ln in lines[:-1]), lines
        assert len(lines) > 1
    assert profile_count(db) == count and store_top(db) == before


def test_an_older_server_is_read_through_the_legacy_render(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(legacy=True), tmp_path) as s:
        res = _pull(s.url, db)
        assert res.returncode == 0, res.stderr
        assert s.requests("/pyroscope/render") >= 5
    assert profile_count(db) == len(CPU_FILES)
    # The flame graph keeps function names only: flat and cum per function still equal
    # pprof's (the inline markers a flame graph cannot carry aside).
    ours = sorted((n, f, c) for n, f, c, _ in store_top(db, sample_index=0))
    theirs = sorted((r.label, r.flat, r.cum) for r in oracle_top(CPU_FILES).rows)
    assert ours == theirs


def test_the_legacy_render_asks_for_every_node_and_refuses_a_cut_graph(tmp_path):
    """The render sent no max-nodes, so the server cut each flame graph to its
    default node limit: a server whose default is 40 nodes (the published one is
    8192, the recorded profiles have 145 to 428) gave a store whose `top` held
    'other' (flat 5.46 s of 12.25 s). max-nodes is now sent; a server whose maximum
    is below it answers 400: one line, nothing stored."""
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(legacy=True, max_nodes_default=40), tmp_path) as s:
        res = _pull(s.url, db)
        assert res.returncode == 0, res.stderr
    ours = sorted((n, f, c) for n, f, c, _ in store_top(db, sample_index=0))
    assert ours == sorted((r.label, r.flat, r.cum) for r in oracle_top(CPU_FILES).rows)
    capped = tmp_path / "c.duckdb"
    with serve("pyroscope", _manifest(legacy=True, max_nodes_max=40), tmp_path) as s:
        res = _pull(s.url, capped)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "GET /pyroscope/render: HTTP 400 from " in res.stderr
    assert f"refuses the render with max-nodes={1 << 20}" in res.stderr
    assert not capped.exists()


def test_kill_part_way_then_rerun(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(), tmp_path) as s:
        s.faults([{"path": "SelectMergeProfile", "kind": "hang", "after": 2, "times": 1}])
        args = ["pull", "pyroscope", s.url, "--query", QUERY, "--since", "6h", "--step", "10m",
                "--tenant", "acme", "--db", str(db), "--batch-size", "1",
                "--timeout", "120"]  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "pyproflab", *args], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 300  # bounds a hang only
            while s.requests("SelectMergeProfile") < 3 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert s.requests("SelectMergeProfile") == 3
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        assert profile_count(db) == 2
        s.faults([])
        again = _pull(s.url, db)
        assert again.returncode == 0 and "3 new, 0 already present" in again.stdout, again.stderr
    assert_top_per_version(db, "pyroscope pull after a kill")


def test_faults(tmp_path):
    with serve("pyroscope", _manifest(), tmp_path) as s:
        s.faults([
            {"path": "ProfileTypes", "kind": "status", "status": 429, "retry_after": "1"},
            {"path": "SelectMergeProfile", "kind": "status", "status": 503, "times": 2},
            {"path": "SelectMergeProfile", "kind": "truncate", "after": 1, "times": 1},
        ])  # fmt: skip
        res = _pull(s.url, tmp_path / "a.duckdb")
        assert res.returncode == 0, res.stderr
        assert "HTTP 429" in res.stderr and "HTTP 503" in res.stderr and "short body" in res.stderr
        assert "5 new" in res.stdout

        s.faults([{"path": "Series", "kind": "html"}])
        res = _pull(s.url, tmp_path / "b.duckdb")
        assert res.returncode == 2
        assert (
            res.stderr.strip()
            .splitlines()[-1]
            .endswith(
                "POST /querier.v1.QuerierService/Series: expected application/json, got text/html"
            )
        )

        s.faults([
            {"path": "SelectMergeProfile", "kind": "huge", "bytes": 3 << 20, "times": 1},
            {"path": "SelectMergeProfile", "kind": "slow", "times": 3},
        ])  # fmt: skip
        t0 = time.monotonic()
        res = _pull(s.url, tmp_path / "c.duckdb", "--max-mib", "1", "--timeout", "2")
        assert res.returncode == 1, res.stderr
        refused = [ln for ln in res.stderr.splitlines() if ln.startswith("refused ")]
        assert len(refused) == 2, res.stderr
        assert "body larger than 1048576 bytes" in refused[0]
        assert "timed out after 2 s" in refused[1] and "(after 3 attempts)" in refused[1]
        assert "3 new, 0 already present, 2 refused" in res.stdout
        # Bounds a hang only (the slow body lasts 1000 s); "timed out after 2 s" proves the timeout.
        assert time.monotonic() - t0 < 600


def test_pull_then_pgo_equals_pgo_of_the_files(tmp_path):
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(), tmp_path) as s:
        assert _pull(s.url, db).returncode == 0
    assert_pgo_equal(db, CPU_FILES, tmp_path, "--service", "notes-api")


def test_a_job_pulls_incrementally(tmp_path):
    with serve("pyroscope", _manifest(), tmp_path) as s:
        job = tmp_path / "job.toml"
        job.write_text(
            '[job]\nname = "pyro"\nstore = "s.duckdb"\noutput = "out"\n'
            f'[[source]]\nkind = "pyroscope"\nurl = "{s.url}"\nquery = \'{QUERY}\'\n'
            'since = "6h"\nstep = "10m"\ntenant = "acme"\n'
        )
        for _ in range(2):
            res = cli("job", "run", str(job))
            assert res.returncode == 0, res.stderr
        assert s.requests("SelectMergeProfile") == len(CPU_FILES)
    assert profile_count(tmp_path / "s.duckdb") == len(CPU_FILES)


def test_profile_types_labels_and_services_on_offer(tmp_path):
    from datetime import UTC, datetime, timedelta

    from pyproflab.sources.base import Request
    from pyproflab.sources.pyroscope import PyroscopeSource

    with serve("pyroscope", _manifest(), tmp_path) as s:
        source = PyroscopeSource(s.url, QUERY, tenant="acme")
        now = datetime.now(UTC)
        offer = source.offer(Request(since=now - timedelta(hours=6), until=now))
        names = source.label_names()
        versions = source.label_values("version")
    assert offer.profile_types == (CPU,) and offer.services == ("notes-api",)
    assert {"service_name", "version", "instance"} <= set(names)
    assert versions == ["v1", "v2"]


def test_jobs_write_no_secret(tmp_path):
    keys = f'query = \'{QUERY}\'\nsince = "6h"\nstep = "10m"\ntenant = "acme"\nretries = 1\n'
    with serve("pyroscope", _manifest(authorization=TOKEN), tmp_path) as s:
        assert_jobs_write_no_secret(s, tmp_path, "pyroscope", keys, TOKEN)


def test_a_render_pull_and_a_connect_pull_of_one_server_are_not_counted_twice(tmp_path):
    """A --legacy render pull beside a Connect pull of the same server and service
    stored both: `top --db --type cpu` showed Total samples 24.50 s, the 12.25 s
    of the five profiles twice. The second pull (either way round) is now
    refused in one line naming both pulls, before anything is fetched; the store
    is as it was."""
    pulls = {"--legacy": "legacy /pyroscope/render pull of " + QUERY,
             "": "Connect (querier.v1) pull of "}  # fmt: skip
    for first, second in (("--legacy", ""), ("", "--legacy")):
        db = tmp_path / f"p{len(first)}.duckdb"
        with serve("pyroscope", _manifest(), tmp_path) as s:
            assert _pull(s.url, db, *[first][: len(first)]).returncode == 0
            count, before = profile_count(db), store_top(db, "--type", "cpu", sample_index=0)
            merges = s.requests("SelectMergeProfile") + s.requests("/pyroscope/render")
            res = _pull(s.url, db, *[second][: len(second)])
            assert s.requests("SelectMergeProfile") + s.requests("/pyroscope/render") == merges
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, res.stderr
        assert f"windows this {pulls[second]}" in lines[0], lines
        assert f"overlap windows of the {pulls[first]}" in lines[0], lines
        assert profile_count(db) == count
        assert store_top(db, "--type", "cpu", sample_index=0) == before


def test_one_server_under_another_url_is_the_same_source(tmp_path):
    """The server pulled with --step 10m through http://127.0.0.1:PORT, then with
    the default 1h through http://LOCALHOST:PORT/, was two sources: "2 new", the
    hour windows stored beside the ten-minute ones, their samples counted twice.
    It is one source now, and the second pull is refused."""
    db = tmp_path / "p.duckdb"
    with serve("pyroscope", _manifest(), tmp_path) as s:
        assert _pull(s.url, db).returncode == 0
        count, before = profile_count(db), store_top(db)
        other = s.url.replace("127.0.0.1", "LOCALHOST") + "/"
        res = cli("pull", "pyroscope", other, "--query", QUERY, "--since", "6h", "--db", str(db),
                  "--tenant", "acme")  # fmt: skip
    assert res.returncode == 2 and "of this series stored before" in res.stderr, res.stderr
    assert f"pyroscope:{s.url} " in res.stderr
    assert profile_count(db) == count and store_top(db) == before
