"""Record the regression test data: real CPU profiles of tests/regprog with
regressions of known size planted (tests/testdata/regressions).

Run once; the profiles are committed so the tests are deterministic. Each case
is one run of regprog (its own process, one profile per window):

  base       16 windows of 10 s, version v1 (the A/A data)
  own        8 x 10 s, v2: main.ownWork's own code +30%
  helper     8 x 10 s, v2: main.viaB +30%, all of it in main.helper
  shift      8 x 10 s, v2: main.shiftX +30%, main.shiftY -30% (total unchanged)
  load       8 x 10 s, v2: 30% more requests, no code change
  busy       16 x 10 s, v1, beside 3 busy-looping processes on the 2 cores
             (the A/A data of a busy machine)

Each two-sample case alternates with its own baseline (8 x 10 s, v1, instance
``base-CASE``), one window per process, in the order base, case, case, base,
base, case, ... (ABBA): only one process runs at a time, and a drift of the
machine over the minutes of a case falls on both sides alike. Two processes
run at once were tried (each near a core, on a 2-core machine whose two CPUs
share a physical core): an unchanged function then cost 10% more per request
in one process than in the other, a process effect no statistics over one
process a side can tell from a regression.
  transient  12 x 90 s, v1: main.ownWork +30% in window 6 only
  step       16 x 30 s, v1: main.ownWork +15% from window 8 on

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
#: Requests per second at load 1: about 0.9 of a core (a request takes ~0.37
#: ms), so a 10%-of-CPU function has ~90 samples per 10 s profile. At 900/s (a
#: third of a core) the smallest change 8 + 8 profiles could show at 80% power
#: was 42-52%, above the planted 30%.
RATE = 2400

CASES: dict[str, dict[str, object]] = {
    "base": {"windows": 16, "seconds": 10, "version": "v1"},
    "busy": {"windows": 16, "seconds": 10, "version": "v1", "hogs": 3},
    "own": {"windows": 8, "seconds": 10, "version": "v2", "own": "1.3"},
    "helper": {"windows": 8, "seconds": 10, "version": "v2", "viab": "1.3"},
    "shift": {"windows": 8, "seconds": 10, "version": "v2", "shiftx": "1.3", "shifty": "0.7"},
    # Below a core at 1.3 times the rate: past one core the process's threads
    # share a physical core and every request costs more CPU (+11% per request
    # measured at 3,120/s), a real cost of load but not the no-change this
    # case plants.
    "load": {"windows": 8, "seconds": 10, "version": "v2", "load": "1.3", "rate": 1500},
    # The step: 16 x 30 s (about 240 samples of main.ownWork a window), chosen
    # before recording for power: 12 x 20 s put the +15% step at 3.2 sigma,
    # under what a scan over every arc and 20 functions finds at FDR 5%.
    # The transient: 12 x 90 s. A simulation of the arc test on Poisson series
    # of this design (bench/overtime_power.py) finds a +30% one-window
    # transient at FDR 5% over 19 functions in 96.5% of series; 16 x 30 s
    # found it in 36.5% (and missed it in the recording that used it).
    "transient": {"windows": 12, "seconds": 90, "version": "v1", "own": "1,1,1,1,1,1,1.3,1"},
    "step": {"windows": 16, "seconds": 30, "version": "v1", "own": "1,1,1,1,1,1,1,1,1.15"},
}


def _check_rate(folder: Path, rate: float, load: float) -> None:
    """Say which windows served fewer than 97% of their requests."""
    for side in sorted(folder.glob("*.json")):
        d = json.loads(side.read_text())
        t0, t1 = (
            datetime.fromisoformat(d[k].replace("Z", "+00:00"))
            for k in ("window_start", "window_end")
        )
        want = rate * load * (t1 - t0).total_seconds()
        got = d["requests_end"] - d["requests_start"]
        if got < 0.97 * want:
            print(f"{side.name}: {got} requests of {want:.0f} (CPU-starved)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument(
        "--only",
        default="own,helper,shift,load,transient,step,base,busy",
        help="cases in order; NAME+NAME runs cases at the same time",
    )
    args = ap.parse_args(argv)
    binary = args.out / ".regprog"
    args.out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(binary.resolve()), "."], cwd=PROG, check=True)
    for group in args.only.split(","):
        procs = []
        hogs = [
            _hog() for name in group.split("+") for _ in range(int(str(CASES[name].get("hogs", 0))))
        ]
        for name in group.split("+"):
            if name in PAIRED:
                _alternate(binary, args, name)
            else:
                procs.append((name, subprocess.Popen(_command(binary, args, name, name))))
        for name, proc in procs:
            if proc.wait() != 0:
                raise SystemExit(f"regprog failed for {name}")
        for name in group.split("+"):
            for run in (name, f"base-{name}") if name in PAIRED else (name,):
                load = float(str(CASES[name].get("load", "1"))) if run == name else 1.0
                _check_rate(args.out / run, _rate(name), load)
        for hog in hogs:
            hog.kill()
            hog.wait()
    binary.unlink()
    return 0


PAIRED = ("own", "helper", "shift", "load")


def _alternate(binary: Path, args, name: str) -> None:
    """Case ``name`` and its baseline, one window per process, ABBA order."""
    for w in range(int(str(CASES[name]["windows"]))):
        runs = (f"base-{name}", name) if w % 2 == 0 else (name, f"base-{name}")
        for run in runs:
            subprocess.run(_command(binary, args, name, run, first=w, windows=1), check=True)


def _hog() -> subprocess.Popen:
    """A process that spins on one core (a busy machine's other work)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _rate(name: str) -> float:
    return float(str(CASES[name].get("rate", RATE)))


def _command(
    binary: Path, args, name: str, run: str, first: int = 0, windows: int | None = None
) -> list[str]:
    """regprog's command line for ``run`` of case ``name`` (``base-NAME``: its
    baseline): all its windows, or ``windows`` of them from window ``first``."""
    case = CASES[name] if run == name else {**CASES["base"], "windows": CASES[name]["windows"]}
    service = f"regprog-{name}" if name in ("transient", "step") else "regprog"
    seconds = float(case["seconds"]) * args.scale
    cmd = [str(binary), "-out", str(args.out / run), "-prefix", run, "-rate", str(_rate(name))]
    cmd += ["-service", service, "-instance", run, "-first", str(first)]
    cmd += ["-windows", str(case["windows"] if windows is None else windows)]
    cmd += ["-seconds", str(seconds), "-version", str(case["version"])]
    for flag in ("own", "viab", "shiftx", "shifty", "load"):
        if flag in case:
            cmd += [f"-{flag}", str(case[flag])]
    print(" ".join(cmd), file=sys.stderr, flush=True)
    return cmd


if __name__ == "__main__":
    sys.exit(main())
