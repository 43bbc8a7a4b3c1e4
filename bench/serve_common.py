"""What the benchmarks of `pyproflab serve` share (serve_load, serve_faults,
serve_sdk): building the pushers, starting the server and loadgen, reading a
process's memory and CPU, and what the store and the spool hold after a run."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO

PUSHERS = REPO / "tests" / "pushers"
RECORDED = REPO / "tests" / "testdata" / "push"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_pushers(out: Path) -> Path:
    env = dict(os.environ, GOPROXY="off", GOWORK="off", CGO_ENABLED="0", GOTOOLCHAIN="local")
    env.pop("GOFLAGS", None)
    subprocess.run(["go", "build", "-o", f"{out}/", "./cmd/..."], cwd=PUSHERS, env=env, check=True)
    return out


def proc_kib(pid: int, field: str) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else 0


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (of any of its threads)."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of ``pid`` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spool_lag(spool: Path) -> tuple[float, int]:
    """(age in seconds of the oldest ready spool file, ready files), read from the
    folder: the ingest lag as the server's metric defines it, without asking a
    server that may be too starved to answer."""
    names = [n for n in os.listdir(spool / "ready") if n.endswith(".push")]
    if not names:
        return 0.0, 0
    oldest = min(int(n.split("-", 1)[0]) for n in names)
    return max(0.0, time.time() - oldest / 1e9), len(names)


def serve_argv(spool: Path, db: Path, port: int, *extra: str) -> list[str]:
    """`pyproflab serve` on 127.0.0.1:PORT with its ingester, and ``extra`` flags."""
    return [
        sys.executable,
        "-m",
        "pyproflab",
        "serve",
        "--spool",
        str(spool),
        "--db",
        str(db),
        "--listen",
        f"127.0.0.1:{port}",
        *extra,
    ]


def loadgen_argv(
    bins: Path, port: int, instances: int, interval: float, duration: float, out: Path, *extra: str
) -> list[str]:
    """loadgen: INSTANCES simulated instances pushing every INTERVAL s for DURATION s."""
    return [
        str(bins / "loadgen"),
        "-addr",
        f"127.0.0.1:{port}",
        "-recorded",
        str(RECORDED),
        "-instances",
        str(instances),
        "-interval",
        f"{interval}s",
        "-duration",
        f"{duration}s",
        "-out",
        str(out),
        *extra,
    ]


def stored_hashes(db: Path) -> list[str]:
    code = (
        "import json,sys; from pyproflab.store import Store\n"
        f"s = Store.open({str(db)!r}, read_only=True)\n"
        "print(json.dumps(s.profiles().column('content_hash').to_pylist()))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def spooled_hashes(spool: Path) -> set[str]:
    """The content hashes of the profiles still waiting in the spool."""
    import hashlib

    from pyproflab.decode.pprof import decompress
    from pyproflab.sources.spool import Spool

    out = set()
    for _, push in Spool(spool).items():
        if isinstance(push, Exception):
            continue
        for att in push.profiles:
            from pyproflab.sources.push import pprof_bytes

            raw = decompress(pprof_bytes(att.data, source="", max_bytes=1 << 30), source="")
            out.add(hashlib.sha256(raw).hexdigest())
    return out


def drain(spool: Path, timeout: float) -> float:
    t0 = time.monotonic()
    while any((spool / "ready").glob("*.push")) and time.monotonic() - t0 < timeout:
        time.sleep(2)
    return time.monotonic() - t0
