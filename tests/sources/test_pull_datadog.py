"""``pyproflab pull datadog`` against a protocol-faithful Datadog test server
(tests/support/fake_datadog.py: the API datadog-pgo uses, serving real Go
CPU profiles recorded in tests/testdata/go).

Exact (the range's profiles, no others; top equals go tool pprof over the
served files), idempotent (a second pull downloads nothing), kill-safe (a
pull killed mid-way leaves whole profiles; a re-run completes), the faults
(pagination, 429 with Retry-After, 5xx, slow and truncated bodies, HTML
instead of JSON, a body over the cap, a hanging listing), secrets never
written, a job source kind, and pull + pgo equal to pgo over the files.
"""

from __future__ import annotations

import json
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
    HEAP_FILE,
    assert_no_secret,
    assert_pgo_equal,
    assert_top_per_version,
    cli,
    on_a_terminal,
    oracle_top,
    profile_count,
    served_hashes,
    store_top,
    stored,
    version_of,
)
from support.testenv import REPO, assert_same_rows

pytestmark = pytest.mark.go

API_KEY = "dd-api-Zq8sSECRETkey1"
APP_KEY = "dd-app-Wx3vSECRETkey2"
KEYS = {"DD_API_KEY": API_KEY, "DD_APP_KEY": APP_KEY, "DD_SITE": ""}
QUERY = "service:notes-api env:prod"
HOUR = 3_600_000
HEAP = {"delta-heap.pprof": str(HEAP_FILE)}


def _manifest(page_size: int = 2) -> dict:
    now = int(time.time() * 1000)
    tags = ["service:notes-api", "env:prod", "runtime:go"]
    events = [
        {
            "event": f"ev-{i}",
            "profile": f"pr-{i}",
            "time_ms": now - (i + 1) * HOUR,
            "tags": [*tags, f"version:{version_of(i)}", f"host:h{i % 2}", f"runtime-id:rt-{i}"],
            "cpu_cores": float(i + 1),
            "files": {
                "cpu.pprof": str(f),
                **({"delta-heap.pprof": str(HEAP_FILE)} if i == 0 else {}),
            },
        }
        for i, f in enumerate(CPU_FILES)
    ]
    outside = [  # too old, another service
        {**events[0], "event": "ev-old", "profile": "pr-old", "time_ms": now - 100 * HOUR},
        {**events[1], "event": "ev-other", "profile": "pr-other",
         "tags": ["service:other", "env:prod", "runtime:go", "host:h9"]},
    ]  # fmt: skip
    return {"api_key": API_KEY, "app_key": APP_KEY, "page_size": page_size,
            "profiles": events + outside}  # fmt: skip


def _pull(url: str, db: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = ["pull", "datadog", "--query", QUERY, "--since", "72h", "--db", str(db)]
    return cli(*args, "--base-url", url, "--retries", "2", *extra, env={**KEYS, **(env or {})})


def test_pull_is_exact_idempotent_and_writes_no_secret(tmp_path):
    db = tmp_path / "dd.duckdb"
    with serve("datadog", _manifest(), tmp_path) as s:
        first = _pull(s.url, db)
        assert first.returncode == 0, first.stderr
        assert f"datadog:{s.url}: 5 new, 0 already present, 0 refused" in first.stdout
        log = s.log()
        assert sum(e["path"].endswith("/list") for e in log) == 3  # pages of 2
        assert sum(e["path"].endswith("/download") for e in log) == 5
        assert all(e["api_key"] and e["app_key"] for e in log)
        second = _pull(s.url, db)
        assert second.returncode == 0, second.stderr
        assert "0 new, 0 already present, 0 refused; 5 fetched before, skipped" in second.stdout
        assert s.requests("/download") == 5  # nothing downloaded again
        # A query matching no event (a misspelt service): before, "0 new", exit 0.
        typo = cli(
            *("pull", "datadog", "--query", "service:notes-apj", "--since", "72h"),
            *("--db", str(tmp_path / "typo.duckdb"), "--base-url", s.url),
            env=KEYS,
        )
        assert typo.returncode == 2, typo.stdout + typo.stderr
        assert not typo.stdout, typo.stdout  # was "...: 0 new, 0 already present, 0 refused"
        assert (
            typo.stderr.startswith(
                f"pyproflab: error: datadog:{s.url}: nothing matched the request "
                "in this time range ("
            )
            and typo.stderr.count("\n") == 1
        )
        assert not (tmp_path / "typo.duckdb").exists()
    assert profile_count(db) == len(CPU_FILES)
    assert_top_per_version(db, "datadog pull")
    rows = stored(db)
    assert {r["content_hash"] for r in rows} == served_hashes(CPU_FILES)  # byte for byte
    assert sorted((r["service"], r["version"], r["instance"]) for r in rows) == [
        ("notes-api", "v1", "h0"), ("notes-api", "v1", "h0"), ("notes-api", "v1", "h1"),
        ("notes-api", "v2", "h0"), ("notes-api", "v2", "h1"),
    ]  # fmt: skip
    wal = [p for p in tmp_path.glob("dd.duckdb*") if p.is_file()]
    texts = [first.stdout, first.stderr, second.stdout, second.stderr]
    for secret in (API_KEY, APP_KEY):
        assert_no_secret(secret, texts, wal)


def test_top_n_by_cpu_and_all_types(tmp_path):
    db = tmp_path / "dd.duckdb"
    with serve("datadog", _manifest(), tmp_path) as s:
        res = _pull(s.url, db, "--top", "2", "--types", "all")
        assert res.returncode == 0, res.stderr
        assert s.requests("/list") == 1
    # The two with most CPU cores (ev-4, ev-3); ev-0's heap is not among them.
    assert profile_count(db) == 2
    assert_same_rows(store_top(db), oracle_top(CPU_FILES[3:]), "datadog --top 2")


def test_kill_part_way_leaves_whole_profiles_and_a_rerun_completes(tmp_path):
    db = tmp_path / "dd.duckdb"
    with serve("datadog", _manifest(), tmp_path) as s:
        s.faults([{"path": "/download", "kind": "hang", "after": 2, "times": 1}])
        args = ["pull", "datadog", "--query", QUERY, "--since", "72h", "--db", str(db),
                "--base-url", s.url, "--batch-size", "1", "--timeout", "120"]  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-m", "pyproflab", *args],
            cwd=REPO,
            env={**os.environ, **KEYS},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 300  # bounds a hang only
            while s.requests("/download") < 3 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert s.requests("/download") == 3, "the pull never reached its third download"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        # Two profiles committed, whole: their content is exactly two served files'.
        rows = stored(db)
        assert len(rows) == 2 and {r["content_hash"] for r in rows} <= served_hashes(CPU_FILES)
        s.faults([])
        again = _pull(s.url, db)
        assert again.returncode == 0, again.stderr
        assert "3 new, 0 already present" in again.stdout
    assert_top_per_version(db, "datadog pull after a kill")


def test_faults_retry_or_one_line_naming_the_source_and_request(tmp_path):
    with serve("datadog", _manifest(page_size=100), tmp_path) as s:
        # 429 with Retry-After and 503s: retried, then everything lands.
        s.faults([
            {"path": "/list", "kind": "status", "status": 429, "retry_after": "1"},
            {"path": "/download", "kind": "status", "status": 503, "times": 2},
        ])  # fmt: skip
        t0 = time.monotonic()
        res = _pull(s.url, tmp_path / "a.duckdb")
        assert res.returncode == 0, res.stderr
        assert time.monotonic() - t0 >= 1.0
        assert "HTTP 429" in res.stderr and "retry 1" in res.stderr
        assert s.requests("/list") == 2 and s.requests("/download") == 7

        # A proxy's HTML login page instead of JSON: one line, exit 2, no retry.
        s.faults([{"path": "/list", "kind": "html"}])
        res = _pull(s.url, tmp_path / "b.duckdb")
        assert res.returncode == 2
        assert res.stderr.strip().splitlines()[-1] == (
            f"pyproflab: error: datadog:{s.url}: POST /api/unstable/profiles/list: "
            "expected application/json, got text/html"
        )
        assert not (tmp_path / "b.duckdb").exists()  # a failed pull leaves no store it made

        # Truncated, slow and oversized downloads: each one line, the rest stored.
        s.faults([
            {"path": "/pr-0/download", "kind": "truncate", "times": 10},
            {"path": "/pr-1/download", "kind": "slow", "times": 10},
            {"path": "/pr-2/download", "kind": "huge", "bytes": 3 << 20, "times": 10},
        ])  # fmt: skip
        t0 = time.monotonic()
        res = _pull(s.url, tmp_path / "c.duckdb", "--timeout", "2", "--max-mib", "1")
        took = time.monotonic() - t0
        assert res.returncode == 1, res.stderr
        refused = sorted(ln for ln in res.stderr.splitlines() if ln.startswith("refused "))
        assert len(refused) == 3, res.stderr
        assert "pr-0/download: short body from" in refused[0] and "(after 3 attempts)" in refused[0]
        assert "pr-1/download: timed out after 2 s" in refused[1]
        assert "pr-2/download: body larger than 1048576 bytes" in refused[2]
        assert "2 new, 0 already present, 3 refused" in res.stdout
        # Bounds a hang only (the slow body lasts 1000 s; its "timed out after 2 s"
        # line above is the proof the deadline fired): under load the pull's own
        # start-up is many seconds, so 60 s decided pass/fail by the clock.
        assert took < 600, f"the slow body held the pull {took:.0f} s"

        # Every download refused: nothing of the range landed, the pull failed.
        s.faults([{"path": "/download", "kind": "status", "status": 500, "times": 100}])
        res = _pull(s.url, tmp_path / "e.duckdb", "--retries", "0")
        assert res.returncode == 2, res.stderr
        assert "0 new, 0 already present, 5 refused" in res.stdout
        assert not (tmp_path / "e.duckdb").exists()

        # A listing that never answers: bounded by --timeout and the retries.
        s.faults([{"path": "/list", "kind": "hang", "times": 5}])
        t0 = time.monotonic()
        res = _pull(s.url, tmp_path / "d.duckdb", "--timeout", "1", "--retries", "1")
        # Bounds a hang only (the listing hangs 3600 s); the line below proves the timeout.
        assert res.returncode == 2 and time.monotonic() - t0 < 600
        assert "POST /api/unstable/profiles/list: timed out after 1 s" in res.stderr
        assert "(after 2 attempts)" in res.stderr


def test_missing_keys_are_one_line_naming_the_variable(tmp_path):
    res = cli(
        "pull", "datadog", "--query", QUERY, "--since", "1h", "--db", str(tmp_path / "x.duckdb"),
        "--base-url", "http://127.0.0.1:9", env={"DD_API_KEY": "", "DD_APP_KEY": ""},
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "pyproflab: error: datadog:http://127.0.0.1:9: environment variable DD_API_KEY "
        "(the Datadog API key) is not set"
    )
    assert not (tmp_path / "x.duckdb").exists()  # no store made for a pull that failed


def test_pull_then_pgo_equals_pgo_of_the_files(tmp_path):
    db = tmp_path / "dd.duckdb"
    with serve("datadog", _manifest(), tmp_path) as s:
        assert _pull(s.url, db).returncode == 0
    assert_pgo_equal(db, CPU_FILES, tmp_path, "--service", "notes-api")


def _job_file(tmp_path, url: str):
    """A job pulling QUERY from the test server at ``url`` into ``tmp_path``."""
    job = tmp_path / "job.toml"
    job.write_text(
        f'[job]\nname = "dd"\nstore = "s.duckdb"\noutput = "out"\n'
        f'[[source]]\nkind = "datadog"\nquery = "{QUERY}"\nsince = "72h"\n'
        f'base_url = "{url}"\n'
    )
    return job


def test_a_job_pulls_incrementally(tmp_path):
    with serve("datadog", _manifest(), tmp_path) as s:
        job = _job_file(tmp_path, s.url)
        first = cli("job", "run", str(job), env=KEYS)
        assert first.returncode == 0, first.stderr
        second = cli("job", "run", str(job), env=KEYS)
        assert second.returncode == 0, second.stderr
        assert s.requests("/download") == len(CPU_FILES)
    summaries = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").rglob("*.json"))]
    texts = [first.stdout, first.stderr, second.stdout, second.stderr]
    texts += [json.dumps(x) for x in summaries]
    assert any('"new": 5' in t for t in texts), texts
    # Everything the job wrote (store, logs, summaries, reports); the test server's
    # manifest holds the keys it expects.
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "manifest" not in p.name]
    assert any(p.parent != tmp_path for p in written)
    for secret in (API_KEY, APP_KEY):
        assert_no_secret(secret, texts, written)


def test_a_job_whose_pull_gets_nothing_fails(tmp_path):
    """A job's pull source that refused every profile, or matched nothing,
    failed as a whole, as the pull command says (exit 2): before, both ran on
    with "new": 0 and exited 0."""
    with serve("datadog", _manifest(), tmp_path) as s:
        s.faults([{"path": "/download", "kind": "status", "status": 500, "times": 100}])
        runs = {}
        for name, query, retries in (("refused", QUERY, 0), ("typo", "service:notes-apj", 2)):
            job = tmp_path / f"{name}.toml"
            job.write_text(
                f'[job]\nname = "{name}"\nstore = "{name}.duckdb"\noutput = "out"\n'
                f'[[source]]\nkind = "datadog"\nquery = "{query}"\nsince = "72h"\n'
                f'base_url = "{s.url}"\nretries = {retries}\n'
            )
            runs[name] = cli("job", "run", str(job), env=KEYS)
    refused, typo = runs["refused"], runs["typo"]
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"datadog source failed: datadog:{s.url}: every profile refused (5)" in (refused.stderr)
    assert typo.returncode == 2, typo.stdout + typo.stderr
    assert f"datadog:{s.url}: nothing matched the request in this time range" in typo.stderr


def test_progress_on_a_terminal_only(tmp_path):
    """On a terminal, a pull shows a progress bar counting the profiles it means to
    fetch (tqdm's, label "pulling"); piped (a log, CI) a short pull prints none;
    with nothing left to fetch (a re-run), no bar either."""
    db = tmp_path / "dd.duckdb"
    with serve("datadog", _manifest(), tmp_path) as s:
        args = ["pull", "datadog", "--query", QUERY, "--since", "72h", "--db", str(db),
                "--base-url", s.url]  # fmt: skip
        code, out, terminal = on_a_terminal(*args, env=KEYS)
        assert code == 0 and "5 new" in out, terminal
        assert "pulling:" in terminal and "0/5 [" in terminal and "profile/s]" in terminal
        again = on_a_terminal(*args, env=KEYS)
        assert again[0] == 0 and "0 new" in again[1], again[2]
        assert "pulling" not in again[2]
        piped = _pull(s.url, tmp_path / "piped.duckdb")
        assert piped.returncode == 0 and "5 new" in piped.stdout, piped.stderr
        assert "pulling" not in piped.stderr


def test_a_job_downloading_stored_profiles_again_counts_none_new(tmp_path):
    """A store whose pull keys are under another name of the source (the name a
    base_url had before it was the URL) downloads every profile once more: the
    run's line counts what was new (0), not what was downloaded (5)."""
    import duckdb

    with serve("datadog", _manifest(), tmp_path) as s:
        job = _job_file(tmp_path, s.url)
        assert "5 new profiles" in cli("job", "run", str(job), env=KEYS).stdout
        with duckdb.connect(str(tmp_path / "s.duckdb")) as con:
            con.execute("UPDATE source_items SET source = 'datadog:datadoghq.com'")
        again = cli("job", "run", str(job), env=KEYS)
        assert s.requests("/download") == 2 * len(CPU_FILES)
    assert again.returncode == 0, again.stderr
    assert "; 0 new profiles, nothing written; exit 0" in again.stdout, again.stdout
    assert profile_count(tmp_path / "s.duckdb") == len(CPU_FILES)


def test_a_base_url_is_the_source_named_and_stored(tmp_path):
    """`pull datadog --base-url URL` named and stored its profiles' source as
    "datadog:datadoghq.com", a site no request went to: the source is the URL used."""
    db = tmp_path / "dd.duckdb"
    with serve("datadog", _manifest(), tmp_path) as s:
        res = _pull(s.url, db)
    assert res.returncode == 0, res.stderr
    assert f"datadog:{s.url}: 5 new, 0 already present, 0 refused" in res.stdout, res.stdout
    assert "datadoghq.com" not in res.stdout + res.stderr
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        sources = [r[0] for r in con.execute("SELECT source FROM profiles").fetchall()]
    assert len(sources) == 5 and all(
        x.startswith(f"datadog:{s.url}/api/ui/profiling/profiles/") for x in sources
    ), sources


def test_an_http_error_says_what_its_body_says(tmp_path):
    """A 403 or 429 said only "HTTP 403 from URL": Datadog's body, which says
    why ({"errors": ["Forbidden"]}: a bad key), was read and dropped. The line
    now ends with it; a text body's first line is bounded, its control
    characters dropped, and a key the server echoes back is not shown."""
    with serve("datadog", _manifest(), tmp_path) as s:
        bad_key = _pull(s.url, tmp_path / "a.duckdb", env={"DD_API_KEY": "dd-wrong-key"})
        echoed = "\x1b[31mrate limited\x1b[0m for key " + API_KEY + " " + "x" * 300
        s.faults([{"path": "/list", "kind": "status", "status": 429, "text": echoed + "\nmore"}])
        limited = _pull(s.url, tmp_path / "b.duckdb", "--retries", "0")
    list_url = f"{s.url}/api/unstable/profiles/list"
    assert bad_key.returncode == 2 and bad_key.stderr == (
        f"pyproflab: error: datadog:{s.url}: POST /api/unstable/profiles/list: "
        f"HTTP 403 from {list_url}: Forbidden\n"
    )
    assert limited.returncode == 2 and limited.stderr.count("\n") == 1, limited.stderr
    reason = limited.stderr.split(f"HTTP 429 from {list_url}: ", 1)[1].rstrip("\n")
    assert reason.startswith("[31mrate limited[0m for key *** xxx") and reason.endswith("x…")
    assert len(reason) == 200 and "\x1b" not in reason and "more" not in reason
    assert_no_secret(API_KEY, [limited.stderr], [])
