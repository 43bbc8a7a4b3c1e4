"""gctrace logs of several processes in one stream, with who wrote each line.

Two shapes a production log takes (issue 35): two processes writing to one
stderr (their lines interleave), and one service restarting (a second
process's cycles follow the first's, its gc numbers starting again at 1).
Each process is tests/gcbench (paced allocation, a known live heap) at a
known GOGC; its stderr is read line by line as it arrives and written to the
one log, so the log is the stream a collector would see, and the truth
(which process wrote each gctrace line) is kept beside it.

Recorded once into tests/testdata/gc/runs/ (``python -m tests.support.gc_runs
record``); tests/sources/test_gctrace_runs.py asserts on the recordings, and
runs a shorter live version of each.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GCBENCH = REPO / "tests" / "gcbench"
RUNS = REPO / "tests" / "testdata" / "gc" / "runs"
GC_LINE = re.compile(r"^gc \d+ @")


@dataclass(frozen=True)
class Proc:
    """One gcbench process: its name in the truth file, GOGC, live heap (MiB),
    allocation rate (MiB/s), run time and start delay (seconds)."""

    name: str
    gogc: int
    live: int
    rate: int
    seconds: float
    delay: float = 0.0


# Interleaved: two processes at once, the second started a second later (so
# the log has both runs' cycles alternating for most of it).
INTERLEAVED = (Proc("A", 50, 16, 100, 6.0), Proc("B", 200, 4, 100, 5.0, delay=1.0))
# Restart: the second process starts when the first has exited.
RESTART = (Proc("A", 100, 8, 100, 3.0), Proc("B", 400, 4, 100, 3.0))


def build(out: Path) -> Path:
    exe = out / "gcbench"
    subprocess.run(
        ["go", "build", "-o", str(exe), "."],
        cwd=GCBENCH,
        check=True,
        timeout=300,
        env=dict(os.environ, GOPROXY="off"),
    )
    return exe


def _start(exe: Path, p: Proc) -> subprocess.Popen:
    env = dict(os.environ, GOGC=str(p.gogc), GODEBUG="gctrace=1", GOMAXPROCS="2")
    env.pop("GOMEMLIMIT", None)
    cmd = [str(exe), "-mode", "rate", "-live", str(p.live), "-rate", str(p.rate)]
    # -work 0: no passes over the scratch buffers, so the allocation rate is
    # met on a busy machine (the GC's cycles are what the log is for).
    cmd += ["-workers", "1", "-work", "0", "-duration", f"{p.seconds}s"]
    return subprocess.Popen(
        cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )


def record(exe: Path, procs: tuple[Proc, ...], sequential: bool) -> tuple[list[str], str]:
    """(the log's lines, the truth: one process name per gctrace line, in order)."""
    lines: list[tuple[str, str]] = []
    lock = threading.Lock()

    def pump(p: Proc, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            # A line without its newline is the last one, cut where the process
            # exited during the runtime's print of it (a live run's ending, seen
            # on a loaded machine); the log keeps whole lines only, so that
            # what the tests count does not depend on when the process exited.
            if not line.endswith("\n"):
                break
            with lock:
                lines.append((p.name, line[:-1]))

    def one(p: Proc) -> None:
        time.sleep(p.delay)
        proc = _start(exe, p)
        pump(p, proc)
        if proc.wait(timeout=p.seconds + 120) != 0:
            raise RuntimeError(f"gcbench {p} exited {proc.returncode}")

    if sequential:
        for p in procs:
            one(p)
    else:
        threads = [threading.Thread(target=one, args=(p,)) for p in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    truth = "".join(name for name, line in lines if GC_LINE.match(line))
    return [line for _, line in lines], truth


def record_all(exe: Path, dest: Path, scale: float = 1.0) -> None:
    """Write ``interleaved.log``/``.truth`` and ``restart.log``/``.truth`` in
    ``dest`` (``scale`` shortens the runs, for a live test)."""
    for name, procs, sequential in (
        ("interleaved", INTERLEAVED, False),
        ("restart", RESTART, True),
    ):
        scaled = tuple(
            Proc(p.name, p.gogc, p.live, p.rate, p.seconds * scale, p.delay * scale) for p in procs
        )
        lines, truth = record(exe, scaled, sequential)
        (dest / f"{name}.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (dest / f"{name}.truth").write_text(truth + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    import tempfile

    if argv != ["record"]:
        print("usage: python -m tests.support.gc_runs record", file=sys.stderr)
        return 2
    RUNS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        record_all(build(Path(tmp)), RUNS)
    print(f"recorded in {RUNS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
