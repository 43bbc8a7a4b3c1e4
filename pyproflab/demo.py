"""The main job on the embedded default store (``make demo``).

Builds the small Go program in ``tests/goprogs``, runs it as two instances
to write real CPU, heap and other profiles, ingests them into the default
store (``./pyproflab.duckdb``) and prints the top functions. Run again, it
finds the earlier profiles already present and adds the new ones.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pyproflab.errors import ProflabError, UsageError

REPO = Path(__file__).resolve().parents[1]
GOPROGS = REPO / "tests" / "goprogs"


def build_profgen(workdir: Path) -> Path:
    if shutil.which("go") is None:
        raise UsageError("the demo needs Go on PATH (https://go.dev/dl/)")
    if not GOPROGS.is_dir():
        raise UsageError(f"{GOPROGS}: not found; run the demo from a pyproflab checkout")
    binary = workdir / "bin" / "profgen"
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(binary), "./profgen"], cwd=GOPROGS, check=True)
    return binary


def run_instances(binary: Path, workdir: Path, cpu_seconds: int) -> list[tuple[str, Path]]:
    """Run two instances side by side; each writes its profiles into its own folder."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    procs = []
    for i, seed in enumerate((1, 2), start=1):
        out = workdir / "profiles" / stamp / f"instance-{i}"
        out.mkdir(parents=True, exist_ok=True)
        cmd = [str(binary), "-out", str(out), "-cpu-seconds", str(cpu_seconds), "-seed", str(seed)]
        procs.append((f"instance-{i}", out, subprocess.Popen(cmd)))
    try:
        for name, _, proc in procs:
            if proc.wait(timeout=120) != 0:
                raise UsageError(f"profgen {name} failed with exit code {proc.returncode}")
    finally:
        for _, _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [(name, out) for name, out, _ in procs]


def main(argv: list[str] | None = None) -> int:
    from pyproflab.lab import Lab
    from pyproflab.reports import render_top

    parser = argparse.ArgumentParser(prog="python -m pyproflab.demo", description=__doc__)
    parser.add_argument("--db", default="pyproflab.duckdb")
    parser.add_argument("--workdir", default=".demo")
    parser.add_argument("--cpu-seconds", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir).resolve()
    try:
        binary = build_profgen(workdir)
        instances = run_instances(binary, workdir, args.cpu_seconds)
        with Lab.open(args.db) as lab:
            for name, folder in instances:
                report = lab.ingest(folder, service="profgen", version="demo", instance=name)
                print(f"{name}: {report.summary()}")
            print(f"\nstore {os.path.abspath(args.db)}")
            for ptype, index in (("cpu", None), ("heap", "inuse_space"), ("allocs", "alloc_space")):
                result = lab.top(
                    service="profgen", profile_type=ptype, sample_index=index, nodecount=15
                )
                print(f"\n== top {ptype} functions, all instances ==")
                print(render_top(result, "text"))
    except ProflabError as e:
        print(f"pyproflab demo: error: {e}", file=sys.stderr)
        return e.exit_code
    except subprocess.CalledProcessError as e:
        print(f"pyproflab demo: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
