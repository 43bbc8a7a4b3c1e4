"""`make bench`'s trace section: ingesting a 100 MB execution trace (its tables
and all four blocking profiles, `pyproflab ingest`) beside `go tool trace
-pprof=sched` on the same file, and hostile traces.

Targets (issue 30): the ingest within 2x the command's time at no more than
its peak RSS; a hostile trace (truncated, bit-flipped, a huge string table, 10
million events) gives one line or is read in at most 2x the command's memory.

Each command runs in a fresh process; its peak memory is the peak sum of the
resident memory of it and its children (the helper runs beside Python),
polled every 20 ms (a lower bound); its CPU is the user + system time of the
whole tree. Wall time on a shared machine follows the neighbours: the CPU
times are the steadier ratio and are printed beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, pyproflab_cmd

MiB = 1 << 20

_MEASURE = r"""
import os, resource, subprocess, sys, time
def tree_rss(pid):
    kids = {}
    for p in os.listdir('/proc'):
        if p.isdigit():
            try:
                with open(f'/proc/{p}/stat') as f:
                    kids.setdefault(int(f.read().rsplit(')', 1)[1].split()[1]), []).append(int(p))
            except OSError:
                pass
    total, todo = 0, [pid]
    while todo:
        q = todo.pop()
        try:
            for line in open(f'/proc/{q}/status'):
                if line.startswith('VmRSS:'):
                    total += int(line.split()[1])
        except OSError:
            pass
        todo += kids.get(q, [])
    return total
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
peak = 0
while p.poll() is None:
    peak = max(peak, tree_rss(p.pid))
    time.sleep(0.02)
err = p.stderr.read().strip().splitlines()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(time.perf_counter() - t, peak * 1024, ru.ru_utime + ru.ru_stime, p.returncode)
print(err[-1] if err else '')
"""


def measure(cmd: list[str]) -> tuple[float, int, float, int, str]:
    """(wall s, peak tree RSS bytes, CPU s, exit code, last stderr line) of ``cmd``."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *cmd], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    wall, rss, cpu, code = out[0].split()
    return float(wall), int(rss), float(cpu), int(code), out[1]


def make_traces(work: Path) -> dict[str, Path]:
    """The 100 MB trace, a huge-string-table trace, and damaged copies (cached in ``work``)."""
    binary = work / "bigload"
    if not binary.exists():
        subprocess.run(
            ["go", "build", "-o", str(binary), "./traces/bigload"],
            cwd=REPO / "tests" / "goprogs",
            check=True,
        )
    big, strings = work / "big-100MB.trace", work / "strings.trace"
    if not big.exists():
        subprocess.run([str(binary), "-o", str(big), "-size", str(100 * 10**6)], check=True)
    if not strings.exists():
        subprocess.run(
            [str(binary), "-o", str(strings), "-strings", "60000", "-strlen", "1024"], check=True
        )
    data = big.read_bytes()
    cut, flipped = work / "big-truncated.trace", work / "big-flipped.trace"
    cut.write_bytes(data[: len(data) // 2])
    b = bytearray(data)
    for i in range(4096, len(b), 1 << 20):
        b[i] ^= 0x5A
    flipped.write_bytes(bytes(b))
    return {"big": big, "strings": strings, "truncated": cut, "bit-flipped": flipped}


def _row(name: str, ours: tuple, peer: tuple, size: int | None = None) -> str:
    wall, rss, cpu, code, err = ours
    pwall, prss, pcpu, pcode, perr = peer
    what = "ok" if code == 0 else f"exit {code}: {err[:100]}"
    speed = f", {size / 1e6 / wall:.1f} MB/s" if size and code == 0 else ""
    return (
        f"{name}: ours {wall:.1f} s wall, {cpu:.1f} s CPU, peak {rss / MiB:.0f} MiB{speed} "
        f"({what}) | go tool trace -pprof=sched {pwall:.1f} s wall, {pcpu:.1f} s CPU, peak "
        f"{prss / MiB:.0f} MiB ({'ok' if pcode == 0 else 'exit ' + str(pcode)}) | ratio wall "
        f"{wall / pwall:.2f}x, CPU {cpu / pcpu:.2f}x, RSS {rss / prss:.2f}x"
    )


def section_trace(work: Path, runs: int) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    traces = make_traces(work)
    lines = []
    for name, path in traces.items():
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            db = Path(tmp) / "t.duckdb"
            peer = measure(["go", "tool", "trace", "-pprof=sched", str(path)])
            ours = measure(pyproflab_cmd("ingest", str(path), "--db", str(db), "--strict"))
            label = {"big": "ingest 100 MB trace (tables + 4 profiles)"}.get(
                name, f"hostile {name}"
            )
            lines.append(_row(label, ours, peer, os.path.getsize(path)))
    return lines
