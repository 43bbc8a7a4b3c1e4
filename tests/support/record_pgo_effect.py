"""Record tests/pgoprogs/effect once, built without and with PGO, into
tests/testdata/pgo/effect (and its profile, tests/testdata/pgo/effect.pgo).

    python tests/support/record_pgo_effect.py [--windows 8] [--window 6] [--rate 1500]

1. Build the program without PGO; run it flat out for 20 s under a CPU
   profile; write the PGO profile with ``pyproflab pgo`` (its defaults, stacks
   cut to two leaf frames).
2. Build it again with ``-pgo=`` that profile.
3. Run the two builds in turn, ``--windows`` times each (the order swapped
   every time, so both meet the machine's load alike), each run one window
   of ``--window`` seconds at ``--rate`` batches a second: a CPU, heap and
   goroutine profile and the mean goroutine stack memory (Prometheus text)
   per window, into effect/nopgo/ and effect/pgo/ as KIND-N.pb.gz and
   metrics-N.prom.

The tests ingest the windows (version nopgo and pgo) and assert on them, never
on a fresh run. Needs Go.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from support.testenv import go_env  # noqa: E402

SOURCE = HERE / "pgoprogs" / "effect"
OUT = HERE / "testdata" / "pgo"
BUILDS = ("nopgo", "pgo")
KINDS = (("cpu", "pb.gz"), ("heap", "pb.gz"), ("goroutine", "pb.gz"), ("metrics", "prom"))


def build(go: str, out: Path, pgo: str, tmp: Path) -> Path:
    subprocess.run(
        [go, "build", f"-pgo={pgo}", "-o", str(out), "."],
        cwd=SOURCE,
        env=go_env(tmp),
        check=True,
        timeout=1800,
    )
    return out


def main() -> int:
    from pyproflab.analyses.pgo import pgo_files
    from pyproflab.analyses.pgo_edges import go_binary

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--window", type=float, default=6.0, help="seconds")
    ap.add_argument("--rate", type=int, default=1500, help="batches per second")
    args = ap.parse_args()
    go = go_binary()
    if go is None:
        print("needs Go", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        nopgo = build(go, tmp / "nopgo", "off", tmp)
        flat = tmp / "flat.pprof"
        subprocess.run(
            [str(nopgo), "-cpuprofile", str(flat), "-window", "20s"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        res = pgo_files([flat], trim_leaf=2)
        profile = res.write(OUT / "effect.pgo")
        print(f"{profile}: {len(res.edges)} edges, {len(res.edges.hot)} hot")
        binaries = {"nopgo": nopgo, "pgo": build(go, tmp / "pgo", str(profile), tmp)}
        dest = OUT / "effect"
        shutil.rmtree(dest, ignore_errors=True)
        for w in range(args.windows):
            order = BUILDS if w % 2 == 0 else BUILDS[::-1]
            for name in order:
                run = tmp / f"{name}-{w}"
                subprocess.run(
                    [
                        str(binaries[name]),
                        "-out",
                        str(run),
                        "-windows",
                        "1",
                        "-window",
                        f"{args.window}s",
                        "-rate",
                        str(args.rate),
                    ],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                (dest / name).mkdir(parents=True, exist_ok=True)
                for kind, ext in KINDS:
                    shutil.copyfile(run / f"{kind}-0.{ext}", dest / name / f"{kind}-{w}.{ext}")
            print(f"window {w} recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
