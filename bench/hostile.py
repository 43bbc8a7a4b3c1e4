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
import sys
from pathlib import Path

from bench.common import LARGE_CPU, REPO, pprof_cmd, pyproflab_cmd, run_process

MiB = 1 << 20


def _files(work: Path) -> list[tuple[str, Path]]:
    if str(REPO / "tests") not in sys.path:
        sys.path.insert(0, str(REPO / "tests"))
    from test_hostile_decode import label_bomb, unknown_field_bomb

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
        from bench.bench_decode import synthesize
        from pyproflab.decode import read_profile

        big.write_bytes(synthesize(read_profile(LARGE_CPU), 2_000_000, seed=1))
    out.append(("2,000,000-sample cpu", big))
    return out


def section_hostile(work: Path, runs: int) -> list[str]:
    lines = []
    for name, path in _files(work):
        ours_wall, ours = run_process(pyproflab_cmd("top", str(path), "--format", "csv"))
        peer_wall, peer = run_process(pprof_cmd("-top", str(path)))
        ratio = ours / peer
        verdict = "met" if ratio <= 2.0 else "NOT met"
        lines.append(
            f"{'peak RSS, top: ' + name:<58} ours {ours / MiB:8.1f}MiB  peer {peer / MiB:8.1f}MiB"
            f"  ratio {ratio:6.3f}x  (target <= 2.00x: {verdict}; wall {ours_wall:.2f}s vs "
            f"{peer_wall:.2f}s)"
        )
    return lines
