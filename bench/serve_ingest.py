"""The serve ingester's CPU per profile, on a recorded spool, against its peer.

    python -m bench.serve_ingest [--spool DIR] [--instances 100] [--interval 2]
                                 [--duration 20] [--runs 2] [--out DIR]

Without ``--spool`` it records one first: `pyproflab serve --no-ingest` on a
free loopback port and `loadgen` (INSTANCES simulated instances replaying the
real SDKs' requests, each pushing every INTERVAL s for DURATION s), so each
instance pushes several times. Then, in a fresh process each (no cache warm
from the other), RUNS times alternately, it ingests a copy of the spool into a
new store with ``run_batch`` until the spool is empty, as two peers:

- ``one_by_one``: each profile keyed on its own (``key_together=1``) and the
  decoder's limits checked in full, as the ingester did before issue 32;
- ``together``: the ingester as it is (``KEY_TOGETHER`` profiles keyed as one
  batch, the limits not looked at for a profile smaller than every limit).

For each: the process's CPU seconds (its threads, DuckDB's included) per stored
profile, wall seconds and peak RSS; the ratio of the best runs; and whether
the two stores hold the same rows (every table but ``ingested_at``). Prints one
JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.serve_common import build_pushers, free_port, loadgen_argv, serve_argv

TABLES = ("profiles", "samples", "functions", "mappings", "locations", "stacks", "label_sets")


def record(out: Path, instances: int, interval: float, duration: float) -> Path:
    """A spool of ``loadgen``'s pushes, recorded by a server that does not ingest."""
    bins = build_pushers(out / "bin")
    port, spool = free_port(), out / "recorded"
    with open(out / "record.log", "w") as log:
        server = subprocess.Popen(
            serve_argv(
                spool, out / "unused.duckdb", port, "--no-ingest", "--max-connections", "1024"
            ),
            stderr=log,
        )
        try:
            time.sleep(2)
            subprocess.run(
                loadgen_argv(bins, port, instances, interval, duration, out / "loadgen"),
                capture_output=True,
                check=True,
            )
        finally:
            server.terminate()
            server.wait(timeout=60)
    return spool


def arm(name: str, spool: Path, db: Path) -> dict:
    """Ingest ``spool`` into ``db`` as peer ``name`` (run in its own process)."""
    from pyproflab.decode import limits, pprof
    from pyproflab.serve.ingester import KEY_TOGETHER, run_batch
    from pyproflab.sources.spool import Spool

    together = KEY_TOGETHER
    if name == "one_by_one":
        together = 1
        full = limits.check
        pprof.check_limits = lambda p, s, lim=None, *, size=None: full(p, s, lim)  # type: ignore[assignment]
    sp = Spool(spool)
    t0, w0 = time.process_time(), time.monotonic()
    new = files = 0
    held = 0.0
    while True:
        r = run_batch(sp, str(db), key_together=together)
        if not r.files:
            break
        new, files, held = new + r.new, files + r.files, held + r.held
    cpu, wall = time.process_time() - t0, time.monotonic() - w0
    return {
        "files": files,
        "profiles": new,
        "cpu_ms_per_profile": round(1e3 * cpu / max(new, 1), 3),
        "wall_s": round(wall, 1),
        "store_held_s": round(held, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def rows(db: Path) -> dict[str, list]:
    """Every table's rows (``ingested_at`` left out), sorted."""
    from pyproflab.store import Store

    out = {}
    with Store.open(str(db), read_only=True) as s:
        for t in TABLES:
            cols = s.sql(f"SELECT * FROM {t} LIMIT 0").schema.names
            keep = ", ".join(c for c in cols if c != "ingested_at")
            out[t] = sorted(map(repr, s.sql(f"SELECT {keep} FROM {t}").to_pylist()))
    return out


def run_arm(name: str, spool: Path, work: Path) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copytree(spool, work / "spool")
    cmd = [
        sys.executable,
        "-m",
        "bench.serve_ingest",
        "--arm",
        name,
        "--spool",
        str(work / "spool"),
    ]
    cmd += ["--out", str(work)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=os.getcwd())
    return json.loads(res.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spool", type=Path, default=None, help="a recorded spool (kept as it is)")
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--arm", choices=("one_by_one", "together"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="serve-ingest-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.arm:
        print(json.dumps(arm(args.arm, args.spool, out / "s.duckdb")))
        return 0
    spool = args.spool or record(out, args.instances, args.interval, args.duration)
    runs: dict[str, list[dict]] = {"one_by_one": [], "together": []}
    for _ in range(args.runs):
        for name in runs:
            runs[name].append(run_arm(name, spool, out / name))
    best = {n: min(r, key=lambda x: x["cpu_ms_per_profile"]) for n, r in runs.items()}
    same = rows(out / "one_by_one" / "s.duckdb") == rows(out / "together" / "s.duckdb")
    summary = {
        "spool": str(spool),
        "runs": runs,
        "best_cpu_ms_per_profile": {n: b["cpu_ms_per_profile"] for n, b in best.items()},
        "one_by_one_over_together": round(
            best["one_by_one"]["cpu_ms_per_profile"] / best["together"]["cpu_ms_per_profile"], 2
        ),
        "same_rows": same,
    }
    print(json.dumps(summary, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
