"""Record the PGO check programs' CPU profiles once into tests/testdata/pgo.

    python tests/support/record_pgo_programs.py [--seconds 30] [--tries 3]

Each program of tests/pgoprogs (its ``base`` tree) runs with -cpuprofile until
its profile holds every planted hot edge (``PLANTED``) inside the compiler's
99% cutoff; then it is written trimmed: CPU sample types only, stacks cut to
their two leaf frames (the compiler reads no more: the edges are unchanged),
runtime.asyncPreempt kept (pgo check must leave it out itself), no
safeguards. The tests compare ``pgo check`` with the compiler on these files.
Needs Go.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from support.testenv import go_env  # noqa: E402

PROGRAMS = HERE / "pgoprogs"
OUT = HERE / "testdata" / "pgo"
# program -> (package to build, the (caller, callee) pairs that must be hot)
PLANTED: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "ledger": (
        ".",
        (
            ("main.runBatch", "main.parseFields"),
            ("main.runBatch", "main.checksum"),
            ("main.runBatch", "example.com/ledger/fold.Mix"),
            ("main.runBatch", "main.(*linear).Weigh"),
            ("main.checksum", "main.avalanche"),
        ),
    ),
    "router": (
        "./cmd/routerbench",
        (
            ("example.com/router%2ev2.(*Table).Route", "example.com/router%2ev2.(*Table).match"),
            (
                "example.com/router%2ev2.(*Table).Route",
                "example.com/router%2ev2.(*prefixScorer).Score",
            ),
            ("example.com/router%2ev2.(*Table).match", "example.com/router%2ev2.segmentEqual"),
        ),
    ),
}


def record(go: str, name: str, seconds: float, tmp: Path) -> Path:
    """One raw CPU profile of the program ``name``."""
    package, _ = PLANTED[name]
    src = PROGRAMS / name / "base"
    binary = tmp / name
    env = go_env(tmp)
    subprocess.run([go, "build", "-o", str(binary), package], cwd=src, env=env, check=True)
    raw = tmp / f"{name}.pprof"
    subprocess.run(
        [str(binary), "-d", f"{seconds}s", "-cpuprofile", str(raw)],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=seconds * 3 + 60,
    )
    return raw


def missing(name: str, result) -> list[str]:
    hot = {(e.caller, e.callee) for e in result.edges.hot}
    return [f"{a} -> {b}" for a, b in PLANTED[name][1] if (a, b) not in hot]


def main() -> int:
    from pyproflab.analyses.pgo import pgo_files
    from pyproflab.analyses.pgo_edges import go_binary

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--only", choices=sorted(PLANTED))
    args = ap.parse_args()
    go = go_binary()
    if go is None:
        print("needs Go", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    for name in [args.only] if args.only else sorted(PLANTED):
        with tempfile.TemporaryDirectory() as d:
            for attempt in range(1, args.tries + 1):
                raw = record(go, name, args.seconds, Path(d))
                res = pgo_files([raw], trim_leaf=2, fold_preempt=False, safeguards=[])
                lost = missing(name, res) if res.ok else [res.refusal or "refused"]
                if not lost:
                    out = res.write(OUT / f"{name}.pgo", verify=True)
                    print(f"{name}: {out} ({len(res.edges)} edges, {len(res.edges.hot)} hot)")
                    break
                print(f"{name}: try {attempt}: not hot: {', '.join(lost)}", file=sys.stderr)
            else:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
