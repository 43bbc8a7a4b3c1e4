"""What the real SDKs lose to `pyproflab serve`'s refusals.

    python -m bench.serve_refusals [--seconds 40] [--period 2] [--out DIR] -- SERVE_FLAGS...

Starts `pyproflab serve --no-ingest SERVE_FLAGS` (e.g. ``--client-rate 2
--client-burst 5``) on a free loopback port; ddpush (dd-trace-go) and pyropush
(pyroscope-go) push to it for SECONDS seconds, recording every request at
their transport and the status it got. Prints one JSON summary per SDK:
requests by status, profiles sent and acknowledged (distinct content hashes of
their profile parts, split by Go's own mime/multipart), lost (sent, never
acknowledged), and for dd-trace-go its uploads by number of attempts (a retry
sends the same profiles again).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import REPO
from bench.serve_common import build_pushers, free_port, serve_argv
from bench.serve_sdk import run_sdks

if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))
from support.push_helpers import expected_hashes, split_records  # noqa: E402


def summary(bins: Path, cap: Path, work: Path) -> dict:
    out = {}
    for sdk in ("dd", "pyro"):
        recs = [p for p in sorted((cap / sdk).glob("*.json")) if "/telemetry/" not in p.read_text()]
        status = Counter(str(json.loads(p.read_text())["status"] or "error") for p in recs)
        parts = split_records(bins, recs, work / sdk)
        hashes = {p.stem: set(expected_hashes({p.stem: parts[p.stem]})) for p in recs}
        acked = [p for p in recs if json.loads(p.read_text())["status"] == 200]
        sent = set().union(*hashes.values()) if hashes else set()
        got = set().union(*(hashes[p.stem] for p in acked)) if acked else set()
        row = {"requests": dict(status), "profiles_sent": len(sent), "acked": len(got)}
        row["lost"] = len(sent - got)
        if sdk == "dd":
            attempts = Counter(frozenset(h) for h in hashes.values())
            row["uploads_by_attempts"] = dict(Counter(attempts.values()))
        out[sdk] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=40)
    ap.add_argument("--period", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("serve_flags", nargs="*")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="serve-refusals-"))
    bins = build_pushers(out / "bin")
    port = free_port()
    with open(out / "serve.log", "w") as log:
        server = subprocess.Popen(
            serve_argv(
                out / "spool", out / "unused.duckdb", port, "--no-ingest", *args.serve_flags
            ),
            stderr=log,
        )
        try:
            time.sleep(2)
            run_sdks(bins, port, out / "cap", args.seconds, args.period)
        finally:
            server.terminate()
            server.wait(timeout=60)
    result = {"serve_flags": args.serve_flags, "seconds": args.seconds, "period": args.period}
    result.update(summary(bins, out / "cap", out / "split"))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
