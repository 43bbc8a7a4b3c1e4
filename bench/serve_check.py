"""The server's receive-time profile check (``check_profile``), now against before.

    python -m bench.serve_check [--reps 7]

Over the profile parts of the recorded SDK pushes (tests/testdata/push: 40),
CPU seconds per part, best of REPS passes, for three peers measured in the
same run, interleaved: ``size_only`` (``check_size``, the check before the
parse was added), ``two_pass`` (the check as it was: ``check_size``, then the
ingester's steps inflating the part again) and ``check_profile`` (as it is:
each layer inflated once). Prints one JSON summary with the ratio
two_pass / check_profile.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyproflab.decode.pprof import decompress, parse_raw
from pyproflab.sources.multipart import parse_multipart
from pyproflab.sources.push import WHOLE_CHECK, check_profile, check_size, pprof_bytes

PUSHES = Path(__file__).resolve().parents[1] / "tests" / "testdata" / "push"
CAP = 256 << 20  # serve's --max-profile-mib default


def parts() -> list[tuple[str, bytes]]:
    out = []
    for rec_path in sorted(PUSHES.glob("*/*.json")):
        ctype = json.loads(rec_path.read_text())["header"]["Content-Type"][0]
        for p in parse_multipart(rec_path.with_suffix(".body").read_bytes(), ctype):
            if p.name.endswith(".pprof") or p.name == "profile":
                out.append((p.name, p.data))
    return out


def two_pass(data: bytes, *, source: str, max_bytes: int) -> None:
    """``check_profile`` before it inflated each layer once (commit 970f9ee)."""
    if check_size(data, source=source, max_bytes=max_bytes) > WHOLE_CHECK:
        return
    raw = pprof_bytes(data, source=source, max_bytes=max_bytes)
    raw = decompress(raw, source=source, max_bytes=max_bytes)
    parse_raw(decompress(raw, source=source, max_bytes=max_bytes), source=source)


PEERS = {"size_only": check_size, "two_pass": two_pass, "check_profile": check_profile}


def measure(reps: int) -> dict:
    """CPU µs a part, best of ``reps`` interleaved passes, for each peer."""
    work = parts()
    best = {name: float("inf") for name in PEERS}
    for _ in range(reps):
        for name, check in PEERS.items():  # interleaved: the machine's load hits all three
            t = time.process_time()
            for source, data in work:
                check(data, source=source, max_bytes=CAP)
            best[name] = min(best[name], (time.process_time() - t) / len(work))
    us = {name: round(v * 1e6, 1) for name, v in best.items()}
    ratio = round(best["two_pass"] / best["check_profile"], 2)
    return {"parts": len(work), "reps": reps, "us_per_part": us, "ratio": ratio}


def section(work: Path, runs: int) -> list[str]:
    """`make bench`'s serve-check section (15 passes whatever ``runs`` says)."""
    r = measure(15)
    us = r["us_per_part"]
    return [
        f"serve check_profile over {r['parts']} pushed parts, best of {r['reps']}: "
        f"{us['check_profile']} us/part, two-pass before {us['two_pass']} "
        f"({r['ratio']}x), size check alone {us['size_only']}"
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    print(json.dumps(measure(args.reps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
