"""Peak memory of `pyproflab top FILE` beside `go tool pprof -top FILE` on hostile
and huge profiles (issue 17): the target is at most 2x pprof's peak RSS.

- label bomb: 2,000 samples sharing one label whose value is a 1 MiB string
  (1.2 KB gzipped);
- unknown-field bomb: a valid profile followed by 64 MiB of unknown varint
  fields (a few KB gzipped);
- 2,000,000 samples: distinct deep stacks over large.cpu's locations.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from bench.common import LARGE_CPU, REPO, pyproflab_cmd

MiB = 1 << 20


def _files(work: Path) -> list[tuple[str, Path]]:
    if str(REPO / "tests") not in sys.path:
        sys.path.insert(0, str(REPO / "tests"))
    from support.profile_builders import label_bomb, unknown_field_bomb

    out = []
    for name, make in (
        ("label bomb (2,000 samples x 1 MiB label)", lambda: label_bomb(MiB, 2000)),
        ("unknown-field bomb (64 MiB of unknown fields)", lambda: unknown_field_bomb(64 * MiB)),
    ):
        path = work / (name.split(" (")[0].replace(" ", "-") + ".pb.gz")
        if not path.exists():
            path.write_bytes(gzip.compress(make(), mtime=0))
        out.append((name, path))
    big = work / "cpu-2m.pb.gz"
    if not big.exists():
        # In a child: a big parent would be counted in every later child's peak
        # RSS (Linux children start with the parent's high-water mark).
        code = (
            "from bench.bench_decode import synthesize\n"
            "from pyproflab.decode import read_profile\n"
            f"open({str(big)!r}, 'wb').write(synthesize(read_profile({str(LARGE_CPU)!r}), "
            "2_000_000, seed=1))\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    out.append(("2,000,000-sample cpu", big))
    return out


# Runs a command, polling its private (anonymous) resident memory every half
# millisecond, and prints its wall time, peak RSS and the largest private memory
# seen: a fresh small process, so the peak is the command's own and not
# inherited from the bench. Polling can miss a short spike: a lower bound.
_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "anon = 0\n"
    "while p.poll() is None:\n"
    "    try:\n"
    "        for line in open(f'/proc/{p.pid}/status'):\n"
    "            if line.startswith('RssAnon:'):\n"
    "                anon = max(anon, int(line.split()[1]))\n"
    "    except (OSError, ValueError):\n"
    "        pass\n"
    "    time.sleep(0.0005)\n"
    "assert p.returncode == 0, p.returncode\n"
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(time.perf_counter() - t, rss, anon)\n"
)


def _measure(cmd: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS, peak private memory seen), bytes, of ``cmd``."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *cmd], check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), int(out[1]) * 1024, int(out[2]) * 1024


def _pprof_binary() -> list[str]:
    """pprof itself, not `go tool pprof` (a go process that runs pprof as its
    child), so that both tools are one process whose memory can be read."""
    path = subprocess.run(
        ["go", "tool", "-n", "pprof"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return [path, "-symbolize=none"]


def _tiny(work: Path) -> Path:
    """A real 4 KiB CPU profile: what each tool costs before a profile costs anything."""
    path = work / "tiny.pb.gz"
    if not path.exists():
        path.write_bytes((REPO / "tests" / "testdata" / "go" / "cpu.pb.gz").read_bytes())
    return path


TINY = "tiny real profile (4 KiB)"


def _verdict(name: str, ratio: float) -> str:
    """The target is on the hostile files; the tiny profile is each tool's floor."""
    if name == TINY:
        return "each tool's floor, no target"
    return f"target <= 2.00x: {'met' if ratio <= 2.0 else 'NOT met'}"


def section_hostile(work: Path, runs: int) -> list[str]:
    """Peak RSS (the target's measure) and peak private memory (RSS less the
    shared library pages every process maps: for pyproflab about 80 MiB of
    pyarrow and numpy before a byte is read) of `top`, against pprof's."""
    pprof = _pprof_binary()
    lines = []
    for name, path in [(TINY, _tiny(work)), *_files(work)]:
        ours_wall, ours, ours_anon = _measure(pyproflab_cmd("top", str(path), "--format", "csv"))
        peer_wall, peer, peer_anon = _measure([*pprof, "-top", str(path)])
        ratio = ours / peer
        lines.append(
            f"{'peak RSS, top: ' + name:<58} ours {ours / MiB:8.1f}MiB  peer {peer / MiB:8.1f}MiB"
            f"  ratio {ratio:6.3f}x  ({_verdict(name, ratio)}; wall {ours_wall:.2f}s vs "
            f"{peer_wall:.2f}s)"
        )
        lines.append(
            f"{'  private memory, top: ' + name:<58} ours {ours_anon / MiB:8.1f}MiB  "
            f"peer {peer_anon / MiB:8.1f}MiB  ratio {ours_anon / max(peer_anon, 1):6.3f}x"
        )
    return lines
