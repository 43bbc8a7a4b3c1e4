"""The real SDKs, live: dd-trace-go's profiler and pyroscope-go push to `pyproflab
serve` (with its ingester) over real HTTP on 127.0.0.1 for a few seconds.

Whatever their number, every profile of every push the server acknowledged is
in the store once, and the store holds nothing that was not sent; the same when
the server is stopped by SIGTERM while they push, after one `spool-ingest`.
(The 2-minute run is bench/serve_sdk.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.push_helpers import (
    TRACE_TYPES,
    expected_hashes,
    is_profile_part,
    pushed,
    split_records,
    stored_rows,
    stored_traces,
    trace_hashes,
)
from support.serve_process import ServeProcess
from support.testenv import REPO

pytestmark = pytest.mark.go


class Serve(ServeProcess):
    """``pyproflab serve`` with its ingester, for at most 2 minutes (started once
    it says where it listens: a fixed 1.5 s sleep let the SDKs' first pushes meet
    a closed port under load)."""

    def __init__(self, spool: Path, db: Path, *flags: str):
        super().__init__(spool, db, *flags, "--duration", "120")

    def stop(self) -> str:
        """SIGTERM; its whole stderr once it has ended."""
        self.proc.terminate()
        return self.rest()


def run_sdks(bins: Path, port: int, cap: Path, seconds: int, period: str) -> None:
    for p in start_sdks(bins, port, cap, seconds, period):
        assert p.wait(timeout=seconds + 60) == 0


def start_sdks(bins: Path, port: int, cap: Path, seconds: int, period: str) -> list:
    return [
        start_ddpush(bins, port, cap, seconds, period),
        start_pyropush(bins, port, cap, seconds, period),
    ]


def start_ddpush(bins: Path, port: int, cap: Path, seconds: int, period: str) -> subprocess.Popen:
    env = dict(os.environ, DD_INSTRUMENTATION_TELEMETRY_ENABLED="false")
    argv = [str(bins / "ddpush"), "-addr", f"127.0.0.1:{port}", "-duration", f"{seconds}s"]
    return subprocess.Popen([*argv, "-period", period, "-capture", str(cap / "dd")], env=env)


def start_pyropush(bins: Path, port: int, cap: Path, seconds: int, period: str) -> subprocess.Popen:
    argv = [str(bins / "pyropush"), "-server", f"http://127.0.0.1:{port}"]
    argv += ["-duration", f"{seconds}s", "-rate", period, "-capture", str(cap / "pyro")]
    return subprocess.Popen(argv)


def wait_drained(spool: Path, timeout: float) -> None:
    end = time.monotonic() + timeout
    while any((spool / "ready").glob("*.push")) and time.monotonic() < end:
        time.sleep(0.2)


def test_live_sdks_every_acknowledged_profile_is_stored(pushers_bin: Path, tmp_path: Path):
    spool, db = tmp_path / "spool", tmp_path / "s.duckdb"
    server = Serve(spool, db)
    try:
        run_sdks(pushers_bin, server.port, tmp_path / "cap", 8, "3s")
        wait_drained(spool, 60)
    finally:
        err = server.stop()
    assert server.proc.returncode == 0, err[-2000:]
    sent = sorted((tmp_path / "cap").glob("*/*.json"))
    acked = [p for p in sent if json.loads(p.read_text())["status"] == 200]
    pushes = [p for p in sent if "/telemetry/" not in json.loads(p.read_text())["url"]]
    assert {p.parent.name for p in acked} == {"dd", "pyro"}, err[-2000:]
    acked_parts = split_records(pushers_bin, acked, tmp_path / "acked")
    sent_parts = split_records(pushers_bin, pushes, tmp_path / "sent")
    want, could = expected_hashes(acked_parts), expected_hashes(sent_parts)
    rows = stored_rows(db)
    stored = {r["content_hash"]: r for r in pushed(rows)}
    n_acked = sum(1 for f in acked_parts.values() for name in f if is_profile_part(name))
    assert len(want) == n_acked and len(stored) == len(pushed(rows)), "a profile counted twice"
    assert set(want) <= set(stored), "an acknowledged profile is missing from the store"
    assert set(stored) <= set(could), "the store holds a profile nobody sent"
    # dd-trace-go sends an execution trace now and then: stored with its blocking profiles.
    traces = stored_traces(db)
    assert trace_hashes(acked_parts) <= {t["content_hash"] for t in traces}
    assert {t["content_hash"] for t in traces} <= trace_hashes(sent_parts)
    made = sorted(r["profile_id"] for r in rows if r["profile_type"] in TRACE_TYPES)
    assert made == sorted(i for t in traces for i in t["profile_ids"])
    assert {r["service"] for r in stored.values()} == {"ddpush", "pyropush"}
    assert not any((spool / "refused").iterdir())


def _wait_acked(cap: Path, n: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        acked = 0
        for p in cap.glob("*/*.json"):
            try:  # a record being written is not read yet
                r = json.loads(p.read_text())
            except ValueError:
                continue
            acked += r["status"] == 200 and "/telemetry/" not in r["url"]
        if acked >= n:
            return
        time.sleep(0.1)


def test_sigterm_mid_push_loses_nothing_acknowledged(pushers_bin: Path, tmp_path: Path):
    """The server (and its ingester) stopped by SIGTERM while both SDKs push:
    after one `spool-ingest`, every acknowledged profile is stored exactly once
    (as many stored as the SDKs' distinct acknowledged parts), nothing unsent
    is, nothing refused."""
    spool, db = tmp_path / "spool", tmp_path / "s.duckdb"
    server = Serve(spool, db)
    try:
        sdks = start_sdks(pushers_bin, server.port, tmp_path / "cap", 14, "2s")
        _wait_acked(tmp_path / "cap", 3, 60)
        err = server.stop()  # SIGTERM, mid-run: the SDKs push for seconds more
        assert [p.wait(timeout=120) for p in sdks] == [0, 0]
    finally:
        server.kill()
    assert server.proc.returncode == 0, err[-2000:]
    res = subprocess.run(
        [sys.executable, "-m", "pyproflab", "spool-ingest", str(spool), "--db", str(db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    sent = sorted((tmp_path / "cap").glob("*/*.json"))
    acked = [p for p in sent if json.loads(p.read_text())["status"] == 200]
    pushes = [p for p in sent if "/telemetry/" not in json.loads(p.read_text())["url"]]
    assert len(pushes) > len(acked) > 0, "the SIGTERM came before or after every push"
    acked_parts = split_records(pushers_bin, acked, tmp_path / "acked")
    want = expected_hashes(acked_parts)
    n_acked = sum(1 for f in acked_parts.values() for name in f if is_profile_part(name))
    could = expected_hashes(split_records(pushers_bin, pushes, tmp_path / "sent"))
    stored = [r["content_hash"] for r in pushed(stored_rows(db))]
    assert len(want) == n_acked, "two acknowledged parts with the same bytes"
    assert set(want) <= set(stored) <= set(could)
    assert len(stored) == len(set(stored))
    assert not any((spool / "refused").iterdir()) and not any((spool / "ready").iterdir())


def test_dd_trace_go_sends_again_a_push_refused_for_its_rate(pushers_bin: Path, tmp_path: Path):
    """dd-trace-go alone against a rate of one request: every later upload is
    refused, and the SDK sends it a second time (its two attempts), as it does
    after a 5xx. Before, the refusal was a 429, which it drops: each refused
    upload was sent once (7 of 18 dd-trace-go uploads lost so in
    bench.serve_refusals at --client-rate 1 --client-burst 2)."""
    from pyproflab.sources.push import parse_datadog

    cap = tmp_path / "cap"
    flags = ("--no-ingest", "--client-rate", "0.001", "--client-burst", "1")
    server = Serve(tmp_path / "spool", tmp_path / "s.duckdb", *flags)
    try:
        # Uploads at about 2, 4, ..., 10 s: four refused ones, the first with 6 s
        # for its second attempt (with 7 s, a loaded machine stretched the SDK's
        # clock past its last attempt: [[200], [503]] once in 8 runs).
        dd = start_ddpush(pushers_bin, server.port, cap, 11, "2s")
        assert dd.wait(timeout=120) == 0
    finally:
        err = server.stop()
    attempts: dict[tuple, list[int]] = {}
    for p in sorted((cap / "dd").glob("*.json")):
        rec = json.loads(p.read_text())
        if "/telemetry/" in rec["url"]:
            continue
        push = parse_datadog(rec["header"]["Content-Type"][0], p.with_suffix(".body").read_bytes())
        attempts.setdefault((push.start_ns, push.end_ns), []).append(rec["status"])
    got = sorted(attempts.values())
    assert [200] in got and len(got) >= 2, (got, err[-2000:])
    refused = [a for a in got if a != [200]]
    assert all(set(a) == {503} for a in refused), got
    assert [503, 503] in refused, got  # the upload at ~4 s, sent again within the 2 s period
