"""Helpers of tests/sources/test_prometheus_server.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROMETHEUS = Path("/usr/bin/prometheus")


SKIP_NO_PROMETHEUS = (
    "/usr/bin/prometheus not installed (scripts/install-system-deps.sh installs "
    "Debian's prometheus package)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status
    except OSError:
        return 0


@contextmanager
def prometheus(
    tmp: Path, targets: list[str], *, job: str = "fakesvc", ready_timeout: float = 300.0
) -> Iterator[str]:
    """Run /usr/bin/prometheus on 127.0.0.1 scraping ``targets`` (host:port) as ``job``
    every second; yields its base URL once ready; stops it by PID (SIGTERM, then
    SIGKILL). Shared by the fleet integration test."""
    port = free_port()
    config = tmp / "prometheus.yml"
    listed = ", ".join(f"'{t}'" for t in targets)
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        "    static_configs:\n"
        f"      - targets: [{listed}]\n"
    )
    log_path = tmp / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + ready_timeout
            while get(base + "/-/ready") != 200:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"prometheus exited with {proc.returncode}: {log_path.read_text()[-2000:]}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"prometheus not ready after {ready_timeout:g} s")
                time.sleep(0.2)
            yield base
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(5)
