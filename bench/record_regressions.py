"""Record the regression test data: real CPU profiles of tests/regprog with
regressions of known size planted (tests/testdata/regressions).

Run once; the profiles are committed so the tests are deterministic. Each case
is one run of regprog (its own process, one profile per window):

  base       16 windows of 10 s, version v1 (the A/A data)
  own        8 x 10 s, v2: main.ownWork's own code +30%
  helper     8 x 10 s, v2: main.viaB +30%, all of it in main.helper
  shift      8 x 10 s, v2: main.shiftX +30%, main.shiftY -30% (total unchanged)
  load       8 x 10 s, v2: 30% more requests, no code change

Each two-sample case runs at the same time as its own baseline (8 x 10 s,
v1, instance ``base-CASE``): on a shared machine the speed of each function's
code drifts with what else runs (a first recording, base and case minutes
apart, showed an unchanged function 37% dearer per request), and sides
recorded together drift together.
  transient  12 x 20 s, v1: main.ownWork +30% in window 5 only
  step       12 x 20 s, v1: main.ownWork +15% from window 6 on

    python -m bench.record_regressions --out tests/testdata/regressions [--scale 1.0]

``--scale`` shortens every window (for a quick try). The machine may be busy:
the workload is open loop, so the CPU per second a function uses does not
depend on what else runs, as long as the process gets the CPU it asks for
(about a third of a core). On a shared machine it may not (at a load average of
16 on 2 cores a first recording got half what it asked for): each sidecar's
request counter shows whether the rate was met, and the script says which
windows fell short. Rates per request (``--per requests_total``) do not
depend on it; rates per second do.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROG = REPO / "tests" / "regprog"
RATE = 900

CASES: dict[str, dict[str, object]] = {
    "base": {"windows": 16, "seconds": 10, "version": "v1"},
    "own": {"windows": 8, "seconds": 10, "version": "v2", "own": "1.3"},
    "helper": {"windows": 8, "seconds": 10, "version": "v2", "viab": "1.3"},
    "shift": {"windows": 8, "seconds": 10, "version": "v2", "shiftx": "1.3", "shifty": "0.7"},
    "load": {"windows": 8, "seconds": 10, "version": "v2", "load": "1.3"},
    "transient": {"windows": 12, "seconds": 20, "version": "v1", "own": "1,1,1,1,1,1.3,1"},
    "step": {"windows": 12, "seconds": 20, "version": "v1", "own": "1,1,1,1,1,1,1.15"},
}


def _check_rate(folder: Path, load: float) -> None:
    """Say which windows served fewer than 97% of their requests."""
    for side in sorted(folder.glob("*.json")):
        d = json.loads(side.read_text())
        t0, t1 = (
            datetime.fromisoformat(d[k].replace("Z", "+00:00"))
            for k in ("window_start", "window_end")
        )
        want = RATE * load * (t1 - t0).total_seconds()
        got = d["requests_end"] - d["requests_start"]
        if got < 0.97 * want:
            print(f"{side.name}: {got} requests of {want:.0f} (CPU-starved)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default=",".join(CASES))
    args = ap.parse_args(argv)
    binary = args.out / ".regprog"
    args.out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(binary.resolve()), "."], cwd=PROG, check=True)
    for name in args.only.split(","):
        procs = []
        for run in (name, f"base-{name}") if name in PAIRED else (name,):
            procs.append((run, subprocess.Popen(_command(binary, args, name, run))))
        for run, proc in procs:
            if proc.wait() != 0:
                raise SystemExit(f"regprog failed for {run}")
            _check_rate(args.out / run, float(CASES[name].get("load", "1")) if run == name else 1.0)
    binary.unlink()
    return 0


PAIRED = ("own", "helper", "shift", "load")


def _command(binary: Path, args, name: str, run: str) -> list[str]:
    """regprog's command line for ``run`` of case ``name`` (``base-NAME``: its baseline)."""
    case = CASES[name] if run == name else {**CASES["base"], "windows": CASES[name]["windows"]}
    service = f"regprog-{name}" if name in ("transient", "step") else "regprog"
    seconds = float(case["seconds"]) * args.scale
    cmd = [str(binary), "-out", str(args.out / run), "-prefix", run, "-rate", str(RATE)]
    cmd += ["-service", service, "-instance", run, "-windows", str(case["windows"])]
    cmd += ["-seconds", str(seconds), "-version", str(case["version"])]
    for flag in ("own", "viab", "shiftx", "shifty", "load"):
        if flag in case:
            cmd += [f"-{flag}", str(case[flag])]
    print(" ".join(cmd), file=sys.stderr, flush=True)
    return cmd


if __name__ == "__main__":
    sys.exit(main())
