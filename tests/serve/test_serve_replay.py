"""The real SDKs' recorded pushes, replayed to `pyproflab serve`: every profile
they held is stored once, with its tags, and `top --db` equals `go tool pprof
-top` over the same bytes (split from the recorded bodies by Go's own
mime/multipart and zstd, not by pyproflab).

Recordings: tests/testdata/push (tests/support/record_pushes.py): dd-trace-go
v2.12.0's profiler (3 uploads without and 1 with an execution trace) and
pyroscope-go v1.5.0 (20 pushes: cpu, heap, mutex, block, goroutine).
The execution trace goes to the store (with its four blocking profiles,
``trace-*``) when the Go helper can run, else beside the spool.
"""

from __future__ import annotations

import csv
import hashlib
import io
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from support.push_helpers import (
    RECORDED,
    TRACE_TYPES,
    drain,
    expected_hashes,
    is_profile_part,
    proto_sha256,
    pushed,
    records,
    replay,
    running_server,
    split_records,
    stored_rows,
    stored_traces,
    trace_hashes,
)
from support.testenv import REPO, Pprof, api_top, assert_same_rows, our_top_keys

pytestmark = pytest.mark.go

DD = records(RECORDED / "dd")
PYRO = records(RECORDED / "pyro")


@pytest.fixture(scope="module")
def served(pushers_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    """Every recording replayed to a server, the spool drained into a store;
    (db, spool, the Go oracle's parts of each record)."""
    tmp = tmp_path_factory.mktemp("replay")
    spool, db = tmp / "spool", tmp / "s.duckdb"
    with running_server(spool) as server:
        statuses = [replay(server.server_address[1], r, b)[0] for _, r, b in DD + PYRO]
    assert statuses == [200] * len(DD + PYRO)
    assert drain(spool, db) == len(DD + PYRO)
    parts = {
        "dd": split_records(pushers_bin, [p for p, _, _ in DD], tmp / "oracle" / "dd"),
        "pyro": split_records(pushers_bin, [p for p, _, _ in PYRO], tmp / "oracle" / "pyro"),
    }
    return db, spool, parts


def test_recordings_hold_what_the_tests_rely_on():
    assert len(DD) == 4 and len(PYRO) >= 15
    assert all(r["url"].endswith("/profiling/v1/input") for _, r, _ in DD)
    assert all("/ingest?" in r["url"] for _, r, _ in PYRO)
    assert sum(b"go.trace" in b for _, _, b in DD) == 1


def test_every_profile_is_stored_once_with_its_tags(served):
    db, _, parts = served
    rows = stored_rows(db)
    want = {**expected_hashes(parts["dd"]), **expected_hashes(parts["pyro"])}
    assert sorted(r["content_hash"] for r in pushed(rows)) == sorted(want)
    for r in rows:
        labels = dict(r["labels"])
        if r["service"] == "ddpush":
            assert r["version"] == "v1.2.3" and r["instance"] in ("dd-1", "dd-2")
            assert labels["env"] == "test" and labels["team"] == "lab"
            assert labels["host"] == r["instance"] and labels["runtime-id"]
        else:
            assert r["service"] == "pyropush", r
            assert r["version"] == "v2.0.0" and r["instance"] == "pyro-1"
            assert labels["team"] == "lab" and labels["__session_id__"]
        # Kept as sent: pyroscope-go's `until` is sometimes a truncated time before `from`.
        assert r["window_start"] is not None and r["window_end"] is not None


def test_execution_traces_are_stored_with_their_tags(served):
    """The one upload with a trace: the trace (its bytes as Go split them) is in
    the store with the upload's tags, and its four blocking profiles beside it."""
    db, spool, parts = served
    traces = stored_traces(db)
    want = trace_hashes(parts["dd"])
    assert [t["content_hash"] for t in traces] == list(want) and len(want) == 1
    (trace,) = traces
    assert trace["service"] == "ddpush" and trace["version"] == "v1.2.3"
    assert trace["instance"] in ("dd-1", "dd-2")
    made = [r for r in stored_rows(db) if r["profile_type"] in TRACE_TYPES]
    assert {r["profile_type"] for r in made} == TRACE_TYPES
    assert sorted(trace["profile_ids"]) == sorted(r["profile_id"] for r in made)
    assert all(r["instance"] == trace["instance"] for r in made)
    assert not (spool / "traces").exists()


def test_without_the_go_helper_traces_are_kept_beside_the_spool(
    served, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """The same upload, ingested where the trace reader cannot run: its profiles
    are stored, its trace is a file under SPOOL/traces/SERVICE, none refused."""
    _, _, parts = served
    monkeypatch.setenv("PYPROFLAB_GO_HELPER", str(tmp_path / "absent"))
    spool, db = tmp_path / "spool", tmp_path / "s.duckdb"
    with_trace = [(p, r, b) for p, r, b in DD if b"go.trace" in b]
    with running_server(spool) as server:
        assert [replay(server.server_address[1], r, b)[0] for _, r, b in with_trace] == [200]
    assert drain(spool, db) == 1
    kept = {
        hashlib.sha256(f.read_bytes()).hexdigest() for f in (spool / "traces" / "ddpush").iterdir()
    }
    assert kept == trace_hashes(parts["dd"]) and not stored_traces(db)
    assert len(stored_rows(db)) >= 4 and not list((spool / "refused").glob("*.push"))


def _cli_top(db: Path, service: str, ptype: str, index: int) -> list[tuple]:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyproflab",
            "top",
            "--db",
            str(db),
            "--service",
            service,
            "--type",
            ptype,
            "--sample-index",
            str(index),
            # the oracle's flags: every node, edges at pprof's default -edgefraction
            # (they decide the inline markers; --no-trim would zero it as -trim=false)
            "--nodefraction",
            "0",
            "--nodecount",
            "1000000",
            "--format",
            "csv",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rows = []
    for row in csv.DictReader(io.StringIO(res.stdout)):
        name, marker = row.get("label") or row["name"], row.get("inline") or ""
        for m in ("(partial-inline)", "(inline)"):
            if name.endswith(" " + m):
                name, marker = name[: -len(m) - 1], m
        rows.append((name, int(row["flat"]), int(row["cum"]), marker))
    return rows


def _groups(db: Path, parts) -> dict[tuple[str, str], list[Path]]:
    by_hash = {**expected_hashes(parts["dd"]), **expected_hashes(parts["pyro"])}
    groups: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for r in pushed(stored_rows(db)):
        groups[(r["service"], r["profile_type"])].append(by_hash[r["content_hash"]])
    return groups


def test_store_top_equals_pprof_over_the_captured_bytes(served, pprof: Pprof):
    """Per service and profile type, every sample index: the store's merged
    profile's top == `go tool pprof -top` over the pushed files."""
    from pyproflab.store import Store
    from pyproflab.store.select import Selection

    db, _, parts = served
    groups = _groups(db, parts)
    assert {t for _, t in groups} >= {"cpu", "heap", "mutex", "block", "goroutine"}
    checked = 0
    with Store.open(db, read_only=True) as store:
        for (service, ptype), files in sorted(groups.items()):
            merged = store.merged_profile(Selection(service=service, profile_type=ptype))
            for index in range(len(pprof.sample_types(files[0]))):
                report = pprof.top(sorted(files), sample_index=index)
                ours = our_top_keys(api_top(merged, sample_index=index))
                assert_same_rows(ours, report, f"{service} {ptype}[{index}]")
                checked += 1
    assert checked >= 15


@pytest.mark.parametrize(
    ("service", "ptype", "index"), [("ddpush", "cpu", 1), ("pyropush", "heap", 1)]
)
def test_top_db_cli_equals_pprof(served, pprof: Pprof, service, ptype, index):
    """The same through `pyproflab top --db`."""
    db, _, parts = served
    files = sorted(_groups(db, parts)[(service, ptype)])
    report = pprof.top(files, sample_index=index)
    assert_same_rows(_cli_top(db, service, ptype, index), report, f"CLI {service} {ptype}[{index}]")


def test_replaying_again_stores_nothing_new(served, tmp_path):
    db, _, _ = served
    before = len(stored_rows(db))
    with running_server(tmp_path / "spool") as server:
        for _, r, b in DD[:2] + PYRO[:3]:
            assert replay(server.server_address[1], r, b)[0] == 200
    assert drain(tmp_path / "spool", db) == 5
    assert len(stored_rows(db)) == before


def test_the_oracle_sees_every_profile_part(served):
    """The Go split finds a profile in every pyroscope push and several per dd upload."""
    _, _, parts = served
    assert all(any(map(is_profile_part, files)) for files in parts["pyro"].values())
    assert all(sum(map(is_profile_part, files)) >= 4 for files in parts["dd"].values())
    assert all(len(proto_sha256(f)) == 64 for files in parts["dd"].values() for f in files.values())
