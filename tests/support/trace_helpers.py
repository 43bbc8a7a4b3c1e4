"""Execution-trace fixtures: the committed recordings and the tests' Go tools.

- ``TRACES``: tests/testdata/traces, recorded once from tests/goprogs/traces
  (its README says how); ``TRACE_NAMES`` the recordings by name.
- ``gtimes_bin``: tests/goprogs/traces/gtimes, the independent account of
  each goroutine's time in each state (built once per session; needs the
  module cache that ``make go-deps`` fills, as the build runs offline).
- ``go_trace_pprof(trace, kind, out)``: `go tool trace -pprof=KIND` into a file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.testenv import GOPROGS, go_env

TRACES = Path(__file__).resolve().parents[1] / "testdata" / "traces"
TRACE_NAMES = ("chan", "mutex", "net", "syscall", "gcheavy", "many", "flight", "grpcstreams")
KINDS = ("net", "sync", "syscall", "sched")


def trace_path(name: str) -> Path:
    return TRACES / f"{name}.trace"


@pytest.fixture(scope="session")
def gtimes_bin(go_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bin") / "gtimes"
    env = go_env(out.parent)  # offline: golang.org/x/exp comes from the module cache
    res = subprocess.run(
        [go_bin, "build", "-o", str(out), "./traces/gtimes"],
        cwd=GOPROGS,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        pytest.fail(f"go build of tests/goprogs/traces/gtimes failed:\n{res.stderr}")
    return out


def go_trace_pprof(go_bin: str, trace: Path, kind: str, out: Path) -> Path:
    """`go tool trace -pprof=KIND trace` written to ``out``."""
    with open(out, "wb") as f:
        subprocess.run(
            [go_bin, "tool", "trace", f"-pprof={kind}", str(trace)],
            stdout=f,
            stderr=subprocess.PIPE,
            check=True,
            timeout=300,
        )
    return out


def run_cli(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m pyproflab ARGS` in a fresh process."""
    import sys

    return subprocess.run(
        [sys.executable, "-m", "pyproflab", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(res: subprocess.CompletedProcess, *needles: str) -> str:
    """The one stderr line of a user's mistake (exit 2, no traceback)."""
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def damaged_traces(tmp: Path) -> dict[str, Path]:
    """Truncated (in a batch, or right after the header), bit-flipped, older-format
    and not-a-trace files made from a recording."""
    data = trace_path("chan").read_bytes()
    flipped = bytearray(data)
    for i in range(64, len(flipped), 97):
        flipped[i] ^= 0x40
    out = {
        "truncated": data[: len(data) * 2 // 3],
        "header-only": data[:16],
        "bit-flipped": bytes(flipped),
        "go1.19": b"go 1.19 trace\x00\x00\x00" + data[16:4096],
        "text": b"hello, not a trace\n",
    }
    paths = {}
    for name, b in out.items():
        p = tmp / f"{name}.trace"
        p.write_bytes(b)
        paths[name] = p
    return paths


def cpulimit_store(path: Path):
    """A store holding the CPU-limit story's two recorded runs, instances
    ``quota`` and ``free`` of service ``cpulimit``, each with its cgroup's
    cpu.stat counters around the run as cAdvisor's metric samples."""
    import json
    from datetime import datetime

    import pyarrow as pa

    from pyproflab import schema
    from pyproflab.keying.keys import ProfileMeta
    from pyproflab.store import Store
    from pyproflab.store.metrics import ingest_metric_samples
    from pyproflab.store.traces import ingest_trace

    runs = json.loads((TRACES / "cpulimit.json").read_text())
    store = Store.open(path)
    for name, run in runs.items():
        meta = ProfileMeta(service="cpulimit", instance=name)
        ingest_trace(store, TRACES / f"cpulimit-{name}.trace", meta)
        rows = []
        for key, when in (("cpu_stat_start", "start"), ("cpu_stat_end", "end")):
            t = datetime.fromisoformat(run[when])
            for metric, field in (
                ("container_cpu_cfs_periods_total", "nr_periods"),
                ("container_cpu_cfs_throttled_periods_total", "nr_throttled"),
            ):
                rows.append(
                    {
                        "metric": metric,
                        "labels": [],
                        "type": "counter",
                        "time": t,
                        "value": float(run[key][field]),
                    }
                )
        table = pa.Table.from_pylist(rows, schema.METRIC_SAMPLES)
        ingest_metric_samples(
            store, table, service="cpulimit", version=None, instance=name, source="cpu.stat"
        )
    return store
