"""Record the real SDKs' pushes once into tests/testdata/push.

The SDKs push sampled profiles on timers, so the tests replay requests
recorded once (and committed) instead of fresh ones. This script builds
tests/pushers, starts `pyproflab serve` (spool only) on a free port, runs

- ddpush (dd-trace-go's profiler) without execution traces, period 3 s;
- ddpush again with its defaults, keeping its first upload (which carries a
  go.trace attachment);
- pyropush (pyroscope-go), upload rate 3 s;

and copies every request the server answered 200 into ``dd/`` and ``pyro/``
(NNNNNN.json: method, URL, headers, status; NNNNNN.body: the bytes as the SDK
handed them to net/http). The recorded URL's host is replaced by
``recorded.invalid``. Needs Go and the module cache (make go-deps).

    python tests/support/record_pushes.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from support.push_helpers import PUSHERS, RECORDED  # noqa: E402
from support.testenv import go_env  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_ok(src: Path, dst: Path, keep: int | None = None) -> int:
    dst.mkdir(parents=True, exist_ok=True)
    n = len(list(dst.glob("*.json")))
    kept = 0
    for p in sorted(src.glob("*.json")):
        rec = json.loads(p.read_text())
        if rec["status"] != 200 or (keep is not None and kept >= keep):
            continue
        n, kept = n + 1, kept + 1
        rec["url"] = "http://recorded.invalid/" + rec["url"].split("/", 3)[3]
        rec["seq"] = n
        (dst / f"{n:06d}.json").write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
        shutil.copyfile(p.with_suffix(".body"), dst / f"{n:06d}.body")
    return kept


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="record-pushes-"))
    subprocess.run(
        ["go", "build", "-o", f"{tmp}/", "./cmd/..."], cwd=PUSHERS, env=go_env(tmp), check=True
    )
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pyproflab",
            "serve",
            "--spool",
            str(tmp / "spool"),
            "--no-ingest",
            "--listen",
            f"127.0.0.1:{port}",
            "--duration",
            str(args.seconds * 4 + 30),
        ]
    )
    time.sleep(2)
    d = f"{args.seconds}s"
    env = dict(
        os.environ,
        DD_PROFILING_EXECUTION_TRACE_ENABLED="false",
        DD_INSTRUMENTATION_TELEMETRY_ENABLED="false",
    )
    runs = [
        (
            [
                f"{tmp}/ddpush",
                "-addr",
                f"127.0.0.1:{port}",
                "-duration",
                d,
                "-period",
                "3s",
                "-capture",
                f"{tmp}/cap/dd",
            ],
            env,
        ),
        (
            [
                f"{tmp}/ddpush",
                "-addr",
                f"127.0.0.1:{port}",
                "-duration",
                "5s",
                "-period",
                "3s",
                "-instance",
                "dd-2",
                "-capture",
                f"{tmp}/cap/ddtrace",
            ],
            dict(os.environ, DD_INSTRUMENTATION_TELEMETRY_ENABLED="false"),
        ),
        (
            [
                f"{tmp}/pyropush",
                "-server",
                f"http://127.0.0.1:{port}",
                "-duration",
                d,
                "-rate",
                "3s",
                "-capture",
                f"{tmp}/cap/pyro",
            ],
            None,
        ),
    ]
    procs = [subprocess.Popen(argv, env=e) for argv, e in runs]
    for p in procs:
        p.wait(timeout=args.seconds * 4 + 30)
    server.terminate()
    server.wait(timeout=30)
    if RECORDED.exists():
        shutil.rmtree(RECORDED)
    n_dd = copy_ok(tmp / "cap" / "dd", RECORDED / "dd")
    n_tr = copy_ok(tmp / "cap" / "ddtrace", RECORDED / "dd", keep=1)
    n_py = copy_ok(tmp / "cap" / "pyro", RECORDED / "pyro")
    print(f"recorded {n_dd} + {n_tr} dd-trace-go uploads and {n_py} pyroscope-go pushes")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
