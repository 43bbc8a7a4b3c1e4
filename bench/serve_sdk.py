"""The real SDKs live against `pyproflab serve` for minutes (the acceptance run).

    python -m bench.serve_sdk [--seconds 130] [--period 10] [--out DIR]

Builds tests/pushers and starts `pyproflab serve` with its ingester on a free
loopback port; ddpush (dd-trace-go's profiler) and pyropush (pyroscope-go)
push to it for SECONDS seconds, each recording every request it sent and the
status it got (at its transport: the bytes the SDK handed to net/http). Then
it waits for the spool to drain and checks:

- every profile of every acknowledged request is in the store, with its
  service, version and instance; the store holds nothing that was not sent;
- every execution trace of an acknowledged request is stored (its sha256),
  with its four blocking profiles, and no other trace is;
- per service and profile type, every sample index, `pyproflab top --db`
  equals `go tool pprof -top` over the same profiles, split from the recorded
  bodies by the Go program `attachments` (Go's mime/multipart, zstd).

Prints one JSON summary (requests sent/acknowledged, profiles sent/stored,
comparisons made and differing).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.common import REPO
from bench.serve_common import build_pushers, drain, free_port, serve_argv

if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))
from support import pprof_oracle as oracle  # noqa: E402
from support.push_helpers import (  # noqa: E402
    TRACE_TYPES,
    expected_hashes,
    pushed,
    split_records,
    stored_traces,
    trace_hashes,
)


def stored(db: Path) -> list[dict]:
    code = (
        "import json; from pyproflab.store import Store\n"
        f"s = Store.open({str(db)!r}, read_only=True)\n"
        "cols = ['content_hash', 'service', 'version', 'instance', 'profile_type']\n"
        "t = s.profiles().select(cols)\n"
        "print(json.dumps(t.to_pylist()))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def cli_top(db: Path, service: str, ptype: str, index: int) -> Counter:
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
        check=True,
    )
    rows = Counter()
    for row in csv.DictReader(io.StringIO(res.stdout)):
        name, marker = row.get("label") or row["name"], row.get("inline") or ""
        for m in ("(partial-inline)", "(inline)"):
            if name.endswith(" " + m):
                name, marker = name[: -len(m) - 1], m
        rows[(name, int(row["flat"]), int(row["cum"]), marker)] += 1
    return rows


def run_sdks(bins: Path, port: int, cap: Path, seconds: int, period: int) -> None:
    env = dict(os.environ, DD_INSTRUMENTATION_TELEMETRY_ENABLED="false")
    procs = [
        subprocess.Popen(
            [
                str(bins / "ddpush"),
                "-addr",
                f"127.0.0.1:{port}",
                "-duration",
                f"{seconds}s",
                "-period",
                f"{period}s",
                "-capture",
                str(cap / "dd"),
            ],
            env=env,
        ),
        subprocess.Popen(
            [
                str(bins / "pyropush"),
                "-server",
                f"http://127.0.0.1:{port}",
                "-duration",
                f"{seconds}s",
                "-rate",
                f"{period}s",
                "-capture",
                str(cap / "pyro"),
            ],
        ),
    ]
    for p in procs:
        p.wait(timeout=seconds + 120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=130)
    ap.add_argument("--period", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="serve-sdk-"))
    bins = build_pushers(out / "bin")
    port, spool, db = free_port(), out / "spool", out / "s.duckdb"
    server = subprocess.Popen(
        serve_argv(spool, db, port),
        stderr=open(out / "serve.log", "w"),  # noqa: SIM115
    )
    try:
        time.sleep(2)
        t0 = time.monotonic()
        run_sdks(bins, port, out / "cap", args.seconds, args.period)
        ran = time.monotonic() - t0
        drain(spool, 600)
    finally:
        server.terminate()
        server.wait(timeout=120)
    records = sorted((out / "cap").glob("*/*.json"))
    recs = {p: json.loads(p.read_text()) for p in records}
    pushes = [p for p, r in recs.items() if "/telemetry/" not in r["url"]]
    acked = [p for p in pushes if recs[p]["status"] == 200]
    acked_parts = split_records(bins, acked, out / "acked")
    sent_parts = split_records(bins, pushes, out / "sent")
    want, could = expected_hashes(acked_parts), expected_hashes(sent_parts)
    all_rows = stored(db)
    rows = pushed(all_rows)
    have = {r["content_hash"] for r in rows}
    traces = stored_traces(db)
    traces_have = {t["content_hash"] for t in traces}
    made = sum(r["profile_type"] in TRACE_TYPES for r in all_rows)
    groups: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for r in rows:
        if r["content_hash"] in could:
            groups[(r["service"], r["profile_type"])].append(could[r["content_hash"]])
    compared, differing = 0, []
    for (service, ptype), files in sorted(groups.items()):
        for index, (_, unit) in enumerate(oracle.sample_types(files[0])):
            theirs = oracle.top(sorted(files), sample_index=index, unit=unit).multiset()
            compared += 1
            if cli_top(db, service, ptype, index) != theirs:
                differing.append(f"{service} {ptype}[{index}]")
    summary = {
        "seconds_pushing": round(ran, 1),
        "requests_sent": {k: sum(p.parent.name == k for p in pushes) for k in ("dd", "pyro")},
        "requests_acked": {k: sum(p.parent.name == k for p in acked) for k in ("dd", "pyro")},
        "profiles_in_acked_requests": len(want),
        "profiles_stored": len(have),
        "acked_missing_from_store": len(set(want) - have),
        "stored_not_sent": len(have - set(could)),
        "traces_in_acked_requests": len(trace_hashes(acked_parts)),
        "traces_stored": len(traces_have),
        "acked_traces_missing": len(trace_hashes(acked_parts) - traces_have),
        "traces_stored_not_sent": len(traces_have - trace_hashes(sent_parts)),
        "trace_profiles_stored": made,
        "services": sorted({(r["service"], r["version"], r["instance"]) for r in rows}),
        "top_comparisons": compared,
        "top_differing": differing,
    }
    print(json.dumps(summary, indent=2))
    ok = (
        not summary["acked_missing_from_store"]
        and not summary["stored_not_sent"]
        and not differing
        and not summary["acked_traces_missing"]
        and not summary["traces_stored_not_sent"]
        and made == 4 * len(traces_have)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
