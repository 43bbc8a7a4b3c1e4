"""PGO benchmark (not a timed test): `python -m bench.bench_pgo [--quick]`.

Figures:

1. `pyproflab pgo` against `go tool pprof -proto` on the same 50 CPU profiles
   (profgen, 0.4 s each): median wall time, ratio. pyproflab is timed
   in-process (read, strip, merge, check edges, write) and as a CLI process.
2. Build time of the demo service (tests/fleet cmd/notesd) with `-a`
   (everything recompiled), `-pgo=off` against `-pgo=default.pgo`.
3. The hot endpoint (`GET /notes/search`) of notesd built without and with
   the profile: both instances run side by side, closed-loop load from
   threads goes to one, then the other, alternated for several rounds;
   requests per second, the PGO/no-PGO ratio per round and the median.
4. Build time against edge count (`section_size`, `make bench` section
   pgo-size): tests/pgoprogs/router's cmd/routerbench built with `-a`
   (every package compiled, the standard library too) with `-pgo=off` and
   with synthetic profiles of 1,000 to 100,000 call edges between the
   program's own functions (tests/support/pgo_synth.py; names from `go tool
   nm`, so each package's compile finds callers of its own and looks their
   callees up; not the runtime's, see `section_size`), seconds and the ratio
   to -pgo=off, alternated.

The profile for 2 and 3 comes from notesd itself under loadgen's mix
(2 × 10 s CPU profiles), through `pgo_files`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.common import REPO, median_time

sys.path.insert(0, str(REPO / "tests"))

GO = os.environ.get("GO", "go")
FLEET = REPO / "tests" / "fleet"
QUERIES = ["alpha beta", "gamma", "delta epsilon", "note", "zeta eta theta"]


def _profgen_profiles(tmp: Path, n: int, seconds: float) -> list[Path]:
    exe = tmp / "profgen"
    subprocess.run(
        [GO, "build", "-o", str(exe), "./profgen"], cwd=REPO / "tests" / "goprogs", check=True
    )
    out = tmp / "prof"
    subprocess.run(
        [str(exe), "-out", str(out), "-cpu-profiles", str(n), "-cpu-seconds", str(seconds)],
        check=True,
        capture_output=True,
    )
    files = [out / "cpu.pb.gz"] + [out / f"cpu{i}.pb.gz" for i in range(2, n + 1)]
    return [f for f in files if f.exists()]


def bench_merge(tmp: Path, n: int, seconds: float, repeat: int) -> None:
    from pyproflab.analyses.pgo import pgo_files

    files = _profgen_profiles(tmp, n, seconds)
    print(f"[1] {len(files)} CPU profiles (profgen, {seconds}s each)")

    def ours() -> None:
        pgo_files(files).write(tmp / "ours.pgo", verify=False)

    def cli() -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pyproflab",
                "pgo",
                *map(str, files),
                "-o",
                str(tmp / "cli.pgo"),
                "--no-verify",
                "--format",
                "json",
            ],
            check=True,
            capture_output=True,
        )

    def pprof() -> None:
        subprocess.run(
            [GO, "tool", "pprof", "-proto", "-output", str(tmp / "pprof.pb.gz"), *map(str, files)],
            check=True,
            capture_output=True,
        )

    t_ours = median_time(ours, repeat=repeat)
    t_cli = median_time(cli, repeat=repeat)
    t_pprof = median_time(pprof, repeat=repeat)
    print(f"    pyproflab pgo (in-process): {t_ours:.3f}s   CLI process: {t_cli:.3f}s")
    print(f"    go tool pprof -proto:       {t_pprof:.3f}s")
    print(
        f"    ratio pyproflab/pprof: in-process {t_ours / t_pprof:.2f}, CLI {t_cli / t_pprof:.2f}"
    )


def _fleet_profile(tmp: Path, seconds: int) -> tuple[Path, object]:
    from support import fleet_harness as fh

    from pyproflab.analyses.pgo import pgo_files

    bins = fh.build_fleet(tmp / "bin")
    paths = []
    with fh.FleetInstance(bins.notesd).start("v1", "bench") as inst:
        with fh.start_load(
            inst, duration=2 * seconds + 3, rate_start=500, concurrency=16, loadgen=bins.loadgen
        ) as run:
            time.sleep(1)
            for i in range(2):
                p = tmp / f"fleet{i}.pb.gz"
                p.write_bytes(inst.cpu_profile(seconds))
                paths.append(p)
            run.wait()
    res = pgo_files(paths)
    out = res.write(tmp / "default.pgo")
    print(
        f"    profile: {res.edges.total} edge weight, {len(res.edges.hot)} hot edges; "
        f"{res.verify_note}"
    )
    return out, bins


def bench_build(tmp: Path, profile: Path) -> None:
    print("[2] build time of cmd/notesd with -a (all packages recompiled)")
    times = {}
    for pgo in ("off", str(profile)):
        t = time.perf_counter()
        subprocess.run(
            [GO, "build", "-a", "-o", str(tmp / "nd"), f"-pgo={pgo}", "./cmd/notesd"],
            cwd=FLEET,
            check=True,
            capture_output=True,
        )
        times[pgo] = time.perf_counter() - t
    off, on = times["off"], times[str(profile)]
    print(f"    -pgo=off {off:.1f}s   -pgo=default.pgo {on:.1f}s   overhead {on / off - 1:+.0%}")


def _hammer(url: str, seconds: float, threads: int) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * threads

    def work(k: int) -> None:
        i = k
        while time.monotonic() < stop:
            q = QUERIES[i % len(QUERIES)].replace(" ", "+")
            with urllib.request.urlopen(f"{url}/notes/search?q={q}&limit=20", timeout=10) as r:
                r.read()
            counts[k] += 1
            i += 1

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / seconds


def bench_endpoint(tmp: Path, profile: Path, rounds: int, seconds: float) -> None:
    from support import fleet_harness as fh

    print(f"[3] GET /notes/search, closed loop, {rounds} alternated rounds of {seconds}s each")
    plain = fh.build_fleet(tmp / "bin")
    pgo = fh.build_fleet(tmp / "bin-pgo", pgo=profile)
    with (
        fh.FleetInstance(plain.notesd).start("v1", "nopgo") as a,
        fh.FleetInstance(pgo.notesd).start("v1", "pgo") as b,
    ):
        _hammer(a.base_url, 1, 4)
        _hammer(b.base_url, 1, 4)  # warm-up
        ratios, ra, rb = [], [], []
        for r in range(rounds):
            order = [(a, ra), (b, rb)] if r % 2 == 0 else [(b, rb), (a, ra)]
            for inst, acc in order:
                acc.append(_hammer(inst.base_url, seconds, 4))
            ratios.append(rb[-1] / ra[-1])
        print(
            f"    no PGO: {statistics.median(ra):.0f} req/s   PGO: {statistics.median(rb):.0f} "
            f"req/s   PGO/no-PGO per round: {', '.join(f'{x:.3f}' for x in ratios)}"
        )
        print(
            f"    median ratio {statistics.median(ratios):.3f} "
            f"({statistics.median(ratios) - 1:+.1%} throughput)"
        )


SIZES = (1_000, 10_000, 100_000)
ROUTER = REPO / "tests" / "pgoprogs" / "router" / "base"


def section_size(work: Path, runs: int = 1, sizes: tuple[int, ...] = SIZES) -> list[str]:
    """Build seconds of cmd/routerbench with -a: -pgo=off against profiles of
    ``sizes`` call edges (figure 4); ``runs`` alternated rounds, medians."""
    from support.pgo_synth import edge_profile

    work.mkdir(parents=True, exist_ok=True)
    exe = work / "routerbench"
    subprocess.run([GO, "build", "-o", str(exe), "./cmd/routerbench"], cwd=ROUTER, check=True)
    nm = subprocess.run([GO, "tool", "nm", str(exe)], capture_output=True, text=True, check=True)
    # Not the runtime's: random hot lines inside it make the compiler inline into
    # functions where write barriers are prohibited, and the build fails (Go 1.26).
    runtime = ("runtime.", "runtime/", "internal/", "sync/atomic.")
    names = sorted(
        {
            ln.split()[-1]
            for ln in nm.stdout.splitlines()
            if " T " in ln and not ln.split()[-1].startswith(runtime)
        }
    )
    profiles = {"off": "off"}
    for n in sizes:
        path = work / f"edges-{n}.pgo"
        path.write_bytes(edge_profile(names, n, seed=n))
        profiles[f"{n:,} edges ({path.stat().st_size / 1e6:.1f} MB)"] = str(path)
    times: dict[str, list[float]] = {k: [] for k in profiles}
    for _ in range(max(runs, 1)):
        for label, pgo in profiles.items():
            t = time.perf_counter()
            subprocess.run(
                [GO, "build", "-a", "-o", os.devnull, f"-pgo={pgo}", "./cmd/routerbench"],
                cwd=ROUTER,
                check=True,
                capture_output=True,
            )
            times[label].append(time.perf_counter() - t)
    off = statistics.median(times["off"])
    out = [
        f"pgo-size: go build -a of tests/pgoprogs/router (cmd/routerbench, {len(names)} functions)"
    ]
    for label, ts in times.items():
        t = statistics.median(ts)
        out.append(f"  -pgo={label:<28} {t:7.1f} s   {t / off:5.2f}x of -pgo=off")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats and rounds")
    ap.add_argument("--skip-build", action="store_true", help="skip the -a build timing")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pgo-") as d:
        tmp = Path(d)
        bench_merge(tmp, 50, 0.4, 3 if args.quick else 5)
        print("[2,3] demo service profile (tests/fleet cmd/notesd under loadgen)")
        profile, _ = _fleet_profile(tmp, 5 if args.quick else 10)
        if not args.skip_build:
            bench_build(tmp, profile)
        bench_endpoint(tmp, profile, 4 if args.quick else 8, 3 if args.quick else 5)


if __name__ == "__main__":
    main()
