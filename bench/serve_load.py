"""Load on `pyproflab serve`: simulated instances replaying the real SDKs' requests.

    python -m bench.serve_load [--instances 1000] [--interval 10] [--duration 300]
                               [--drain 900] [--ingesters N] [--out DIR]

Builds tests/pushers, starts `pyproflab serve` (with its ingesters,
``--ingesters N``: serve's own flag) on a free loopback port, and runs
`loadgen`: INSTANCES simulated instances (half dd-trace-go uploads, half
pyroscope-go pushes, each a recorded request with its own tags and profile
times), each pushing once every INTERVAL seconds for DURATION seconds from its
own 127.1.x.y address. Every 5 s it reads the spool folder (depth, and the
ingest lag: the oldest waiting file's age, as the server's metric has it; a
starved server may not answer /metrics in time) and the RSS and CPU of the
server and of each ingester. After the load it waits up to DRAIN seconds for
the spool to empty, then checks that every profile of every acknowledged push
is in the store or still waiting in the spool (and nothing is stored twice).
Prints one JSON summary: acknowledgement latency (p50, p99, max, from
loadgen's clock), statuses, peak RSS of each process (VmHWM), CPU seconds of
each, the ingest lag's maximum, at 60 s and 180 s, its last value under load
and after the drain, the drain time, lost and duplicated profiles, and the
load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.serve_common import (
    build_pushers,
    children,
    cpu_seconds,
    drain,
    free_port,
    loadgen_argv,
    proc_kib,
    serve_argv,
    spool_lag,
    spooled_hashes,
    stored_hashes,
)


class Watch:
    """Every ``every`` seconds: the ingest lag and depth from the spool folder, and
    the processes' memory and CPU."""

    def __init__(self, spool: Path, server_pid: int, every: float = 5.0):
        self.spool, self.pid, self.every = spool, server_pid, every
        self.samples: list[dict] = []
        self.peak = {"server_kib": 0, "ingester_kib": 0}
        self.cpu = {"server_s": 0.0, "ingester_s": 0.0}
        self.each: dict[int, dict] = {}  # ingester pid -> its peak KiB and CPU s
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.wait(self.every):
            try:
                lag, files = spool_lag(self.spool)
            except OSError:
                continue
            self.peak["server_kib"] = max(self.peak["server_kib"], proc_kib(self.pid, "VmHWM"))
            self.cpu["server_s"] = max(self.cpu["server_s"], cpu_seconds(self.pid))
            for c in children(self.pid):
                one = self.each.setdefault(c, {"peak_mib": 0.0, "cpu_s": 0.0})
                one["peak_mib"] = max(one["peak_mib"], round(proc_kib(c, "VmHWM") / 1024, 1))
                one["cpu_s"] = max(one["cpu_s"], round(cpu_seconds(c), 1))
            if self.each:  # the ingesters together (a restarted one counts again)
                peaks = sum(e["peak_mib"] for e in self.each.values()) * 1024
                self.peak["ingester_kib"] = max(self.peak["ingester_kib"], int(peaks))
                self.cpu["ingester_s"] = sum(e["cpu_s"] for e in self.each.values())
            self.samples.append(
                {"t": round(time.monotonic() - t0, 1), "lag_s": round(lag, 1), "spool_files": files}
            )

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=30)


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return r.read().decode()


def histogram_quantile(text: str, q: float) -> float | None:
    """The upper bound of the ack histogram's bucket holding quantile ``q``."""
    buckets = []
    for line in text.splitlines():
        m = re.match(r'pyproflab_serve_ack_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
        if m:
            buckets.append((float(m.group(1)), float(m.group(2))))
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    return next(le for le, n in buckets if n >= q * total)


def _lag_at(samples: list[dict], t: float) -> float | None:
    """The lag of the sample nearest ``t`` seconds after the start."""
    near = min(samples, key=lambda s: abs(s["t"] - t), default=None)
    return near["lag_s"] if near else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--drain", type=float, default=900.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--ingesters", type=int, default=1, help="serve --ingesters N")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra serve flag")
    args = ap.parse_args(argv)
    args.serve_arg += ["--ingesters", str(args.ingesters)]
    out = args.out or Path(tempfile.mkdtemp(prefix="serve-load-"))
    out.mkdir(parents=True, exist_ok=True)
    bins = build_pushers(out / "bin")
    port, spool, db = free_port(), out / "spool", out / "s.duckdb"
    load_before = os.getloadavg()
    server = subprocess.Popen(
        serve_argv(spool, db, port, "--max-connections", "1024", *args.serve_arg),
        stderr=open(out / "serve.log", "w"),  # noqa: SIM115
    )
    time.sleep(2)
    watch = Watch(spool, server.pid)
    try:
        gen = subprocess.run(
            loadgen_argv(bins, port, args.instances, args.interval, args.duration, out),
            capture_output=True,
            text=True,
            check=True,
        )
        load_after = os.getloadavg()
        under_load = list(watch.samples)
        try:
            server_hist = metrics_text(port)
        except OSError:  # a server too starved to answer within the timeout
            server_hist = ""
        drained = drain(spool, args.drain)
        lag_drained = spool_lag(spool)[0]
    finally:
        watch.stop()
        server.terminate()
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:  # nothing acknowledged is lost by a kill
            server.kill()
            server.wait()
    waiting = spooled_hashes(spool)  # what the drain left, if it timed out
    acked = (out / "acked.txt").read_text().split()
    stored = stored_hashes(db)
    summary = {
        "loadgen": json.loads(gen.stdout),
        "server_ack_p99_s": histogram_quantile(server_hist, 0.99),
        "peak_rss_mib": {k.replace("_kib", ""): round(v / 1024, 1) for k, v in watch.peak.items()},
        "cpu_s": {k: round(v, 1) for k, v in watch.cpu.items()},
        "profiles_still_spooled": len(waiting),
        "lag_max_s": max((s["lag_s"] for s in under_load), default=0.0),
        "lag_at_s": {str(t): _lag_at(under_load, t) for t in (60, 180)},
        "lag_last_s": under_load[-1]["lag_s"] if under_load else 0.0,
        "lag_after_drain_s": round(lag_drained, 1),
        "ingesters": {str(pid): v for pid, v in watch.each.items()},
        "spool_files_max": max((s["spool_files"] for s in under_load), default=0),
        "drain_s": round(drained, 1),
        "acked_profiles": len(acked),
        "stored_profiles": len(stored),
        "lost": len(set(acked) - set(stored) - waiting),
        "duplicated": len(stored) - len(set(stored)),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "samples": watch.samples,
    }
    (out / "result.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=2))
    print(f"details: {out}/result.json, {out}/serve.log", file=sys.stderr)
    return 0 if summary["lost"] == 0 and summary["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
