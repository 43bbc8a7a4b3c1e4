"""Record the execution traces of tests/goprogs/traces once into tests/testdata/traces.

    python tests/support/record_traces.py [--only NAME ...]

Every program but ``cpulimit`` traces its own workload (``-o``); ``flight``
writes a flight-recorder snapshot. ``cpulimit`` is the CPU-limit story, run
twice with GOMAXPROCS=2 in a cgroup v1 CPU group of its own
(``/sys/fs/cgroup/cpu/pyproflab-trace-quota``; root only): once with
cpu.cfs_quota_us 25000 of a 100000 µs period (0.25 CPU), once without a quota
(-1). The group's cpu.shares is the maximum, so on a busy shared machine the
neighbours do not starve either run (Linux's autogroups would otherwise hand
a session a small share whatever its nice level). The group's cpu.stat
(nr_periods, nr_throttled) is read before and after each run and written with
the run's times to ``cpulimit.json``, which the tests store as the cAdvisor
counters ``container_cpu_cfs_periods_total`` and
``container_cpu_cfs_throttled_periods_total`` of each instance. The group is
removed afterwards. Needs Go.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
GOPROGS = HERE / "goprogs"
OUT = HERE / "testdata" / "traces"
PROGRAMS = (
    "chan",
    "mutex",
    "net",
    "syscall",
    "gcheavy",
    "many",
    "flight",
    "grpcstreams",
    "cpulimit",
)
CGROUP = Path("/sys/fs/cgroup/cpu/pyproflab-trace-quota")
QUOTA_US, PERIOD_US = 25_000, 100_000
# The group's weight against the rest of the machine (cgroup v1's maximum):
# on a busy shared host the quota, not the neighbours, must be what differs
# between the two runs.
SHARES = 262144
TRACE_S = 2  # seconds traced, as the founding story's 2-second traces
RATE = 200  # requests a second, each about 1.5 ms of CPU: 0.3 CPU


def build(name: str, bindir: Path) -> Path:
    out = bindir / name
    subprocess.run(["go", "build", "-o", str(out), f"./traces/{name}"], cwd=GOPROGS, check=True)
    return out


def cpu_stat() -> dict[str, int]:
    lines = (CGROUP / "cpu.stat").read_text().split("\n")
    return {k: int(v) for k, v in (ln.split() for ln in lines if ln.strip())}


def _run_in_group(binary: Path, out: Path, quota_us: int) -> dict:
    """One run of the service in the group with this quota (-1: none) under the
    load (sent from outside the group), and the group's cpu.stat around it."""
    (CGROUP / "cpu.cfs_quota_us").write_text(str(quota_us))
    before, start = cpu_stat(), datetime.now(UTC)
    cmd = f'echo $$ > {CGROUP}/cgroup.procs && exec "$0" -serve -d {TRACE_S}s -o "$1"'
    server = subprocess.Popen(
        ["sh", "-c", cmd, str(binary), str(out)],
        env={**os.environ, "GOMAXPROCS": "2"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        load = subprocess.run(
            [str(binary), "-load", url, "-d", f"{TRACE_S + 0.5}s", "-rate", str(RATE)],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    after, end = cpu_stat(), datetime.now(UTC)
    return {
        "cpu_quota": quota_us / PERIOD_US if quota_us > 0 else None,
        "gomaxprocs": 2,
        "rate": RATE,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "cpu_stat_start": before,
        "cpu_stat_end": after,
        "load": load.stdout.strip(),
    }


def run_cpulimit(binary: Path) -> dict:
    """The quota run and the free run, in the same group (see the module doc)."""
    CGROUP.mkdir(exist_ok=True)
    try:
        (CGROUP / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (CGROUP / "cpu.shares").write_text(str(SHARES))
        return {
            "quota": _run_in_group(binary, OUT / "cpulimit-quota.trace", QUOTA_US),
            "free": _run_in_group(binary, OUT / "cpulimit-free.trace", -1),
        }
    finally:
        CGROUP.rmdir()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", default=list(PROGRAMS), choices=PROGRAMS)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            binary = build(name, Path(tmp))
            if name == "cpulimit":
                manifest = run_cpulimit(binary)
                (OUT / "cpulimit.json").write_text(json.dumps(manifest, indent=1) + "\n")
                print(json.dumps(manifest, indent=1))
            else:
                subprocess.run([str(binary), "-o", str(OUT / f"{name}.trace")], check=True, cwd=tmp)
            print(f"recorded {name}")


if __name__ == "__main__":
    main()
