"""Record the Go test programs' profiles once into tests/testdata/go.

A sampled profile differs on every run, and on a loaded machine a short CPU
profile can miss a function the tests look for. So the tests read profiles
recorded once by this script (and committed), never fresh ones; they compare
pyproflab with `go tool pprof` on those same files.

    python tests/support/record_go_profiles.py [--tries N] [--only programs|notesd]

``programs``: profgen's profiles and the GC load program's; ``notesd``: two 5 s
CPU profiles of one demo-fleet notesd v1 under loadgen's request mix, for
tests/analyses/test_pgo_build.py.

Each program runs until its profile shows what the tests rely on (checked with
`go tool pprof`, up to ``--tries`` runs); then the files are written. Needs Go.
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
from support.testenv import GO_PROFILES, GOPROGS, go_env  # noqa: E402

OUT = HERE / "testdata" / "go"
GCLOAD = "gcload.cpu.pb.gz"
# What tests/conformance/test_conformance_top.py asserts of the CPU profile.
CPU_FUNCTIONS = ("main.fib", "main.isEven", "main.isOdd", "main.hashLoop", "main.(*tree).walk")
# The GC categories tests/analyses/test_gc_categories.py asserts non-empty.
GC_CATEGORIES = ("mark_worker_other", "allocation", "mark_assist")


def build(go: str, package: str, out: Path) -> Path:
    binary = out / package
    subprocess.run(
        [go, "build", "-o", str(binary), f"./{package}"],
        cwd=GOPROGS,
        env=go_env(out),
        check=True,
        timeout=600,
    )
    return binary


def cpu_ok(path: Path) -> str:
    """'' when the CPU profile has what the tests rely on, else what it misses."""
    report = oracle.top([path], sample_index=0, unit="count")
    rows = {r.label: r for r in report.rows}
    if sum(r.flat for r in report.rows) < 200:
        return "fewer than 200 samples"
    missing = [f for f in (*CPU_FUNCTIONS, "main.rotate") if f not in rows]
    if missing:
        return f"missing {missing}"
    return "" if rows["main.rotate"].inline == "(inline)" else "main.rotate not inlined"


def gc_ok(path: Path) -> str:
    """'' when every GC category tests/analyses/test_gc_categories.py relies on has samples."""
    from pyproflab import read_profile
    from pyproflab.analyses.gc_categories import gc_categories

    r = gc_categories(read_profile(path))
    marks = ("mark_dedicated", "mark_fractional", "mark_idle")
    empty = [c for c in GC_CATEGORIES if r.value(c, plain=True) <= 0]
    if sum(r.value(c, plain=True) for c in marks) <= 0:
        empty.append("any mark worker")
    return f"no samples in {empty}" if empty else ""


def record(tries: int) -> None:
    go = oracle.go_binary()
    if go is None:
        sys.exit("Go is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        profgen, gcload = build(go, "profgen", work), build(go, "gcload", work)
        for attempt in range(1, tries + 1):
            run = work / f"profgen-{attempt}"
            run.mkdir()
            subprocess.run([str(profgen), "-out", str(run)], check=True, timeout=120)
            why = cpu_ok(run / GO_PROFILES["cpu"][0])
            if not why:
                break
            print(f"profgen run {attempt}: {why}; again", file=sys.stderr)
        else:
            sys.exit(f"profgen: no run in {tries} had what the tests need")
        for attempt in range(1, tries + 1):
            gc = work / f"gcload-{attempt}.pb.gz"
            subprocess.run([str(gcload), "-out", str(gc), "-seconds", "2"], check=True)
            why = gc_ok(gc)
            if not why:
                break
            print(f"gcload run {attempt}: {why}; again", file=sys.stderr)
        else:
            sys.exit(f"gcload: no run in {tries} had what the tests need")
        OUT.mkdir(parents=True, exist_ok=True)
        for name, _ in GO_PROFILES.values():
            shutil.copyfile(run / name, OUT / name)
        shutil.copyfile(gc, OUT / GCLOAD)
    print(f"wrote {len(GO_PROFILES) + 1} profiles to {OUT}")


NOTESD = ("notesd-cpu0.pb.gz", "notesd-cpu1.pb.gz")
# The call site tests/analyses/test_pgo_build.py expects devirtualized.
PLANTED_EDGE = ("main.(*ranker).rank", "main.termScorer.Score")


def notesd_ok(paths: list[Path]) -> str:
    """'' when the profiles give a default.pgo with the planted edge and >10 hot edges."""
    from pyproflab.analyses import pgo

    res = pgo.pgo_files(paths)
    if not res.ok:
        return f"refused: {res.refusal}"
    if not any((e.caller, e.callee) == PLANTED_EDGE for e in res.edges.edges):
        return f"no {PLANTED_EDGE} edge"
    return "" if len(res.edges.hot) > 10 else f"only {len(res.edges.hot)} hot edges"


def record_notesd(tries: int) -> None:
    import time

    from support import fleet_harness as fh

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        bins = fh.build_fleet(d / "bin")
        for attempt in range(1, tries + 1):
            paths = [d / f"{attempt}-{name}" for name in NOTESD]
            with fh.FleetInstance(bins.notesd).start("v1", "pgo-a") as inst:
                with fh.start_load(
                    inst, duration=13, rate_start=400, concurrency=16, loadgen=bins.loadgen
                ) as run:
                    time.sleep(1)
                    for p in paths:
                        p.write_bytes(inst.cpu_profile(5))
                    summary = run.wait()
            why = notesd_ok(paths)
            if summary["errors"] == 0 and summary["requests"] > 1000 and not why:
                break
            print(f"notesd run {attempt}: {why or summary}; again", file=sys.stderr)
        else:
            sys.exit(f"notesd: no run in {tries} had what the tests need")
        OUT.mkdir(parents=True, exist_ok=True)
        for p, name in zip(paths, NOTESD, strict=True):
            shutil.copyfile(p, OUT / name)
    print(f"wrote {len(NOTESD)} notesd profiles to {OUT}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=10)
    ap.add_argument("--only", choices=("programs", "notesd"), default=None)
    args = ap.parse_args()
    if args.only in (None, "programs"):
        record(args.tries)
    if args.only in (None, "notesd"):
        record_notesd(args.tries)


if __name__ == "__main__":
    # Run as a file: tests/ on sys.path, for the support.* imports.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
