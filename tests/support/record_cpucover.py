"""Record tests/goprogs/cpucover once into tests/testdata/cpucover.

    python tests/support/record_cpucover.py [--seconds 3] [--profiles 2]

For each run of ``RUNS`` the CPU burner takes ``--profiles`` CPU profiles of
``--seconds`` each at its rate (``runtime.SetCPUProfileRate``) and scrapes its
own process CPU (``process_cpu_seconds_total`` from getrusage) every 500 ms,
before the first profile and after the last: ``NAME/cpu-*.pb.gz`` and
``NAME/metrics.prom``. How much of its CPU a profile records above the kernel's
tick depends on the host's tick, so the tests read this recording
(tests/analyses/test_cpu_coverage.py), never a fresh run. Needs Go.
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

from support import pprof_oracle as oracle  # noqa: E402
from support.testenv import GOPROGS, go_env  # noqa: E402

OUT = HERE / "testdata" / "cpucover"
#: Directory -> the burner's flags: one goroutine burning without pause at each
#: rate, and one running 0.5 ms in every 2 ms (a server's bursts) at 100 Hz.
RUNS = {
    "hz100": ["-hz", "100"],
    "hz250": ["-hz", "250"],
    "hz1000": ["-hz", "1000"],
    "burst100": ["-hz", "100", "-run", "500us", "-pause", "1500us"],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--profiles", type=int, default=2)
    args = ap.parse_args()
    go = oracle.go_binary()
    if go is None:
        print("record_cpucover: needs Go", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "cpucover"
        subprocess.run(
            [go, "build", "-o", str(binary), "./cpucover"],
            cwd=GOPROGS,
            env=go_env(Path(tmp)),
            check=True,
            timeout=600,
        )
        for name, flags in RUNS.items():
            out = Path(tmp) / name
            out.mkdir()
            run = [str(binary), *flags, "-seconds", str(args.seconds)]
            run += ["-profiles", str(args.profiles), "-out", str(out)]
            subprocess.run(run, check=True, capture_output=True, timeout=600)
            shutil.rmtree(OUT / out.name, ignore_errors=True)
            shutil.copytree(out, OUT / out.name)
            print(f"wrote {OUT / out.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
