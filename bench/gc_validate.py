"""Print the fitted GOGC model's predictions against the recorded gcbench runs.

Calibrated on the GOGC=100 runs only, from gctrace only, from Prometheus
only and from both together, for both modes: predicted, measured (mean over runs),
error and the interval, per setting and figure; then the mean absolute and
largest errors of heap goal, cycles per minute and GC CPU share.

    python -m bench.gc_validate [--mode cpu,rate] [--source gctrace,prometheus,gctrace+prometheus]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"


def main(argv: list[str] | None = None) -> int:
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from support import gc_recordings as rec

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", default="cpu,rate")
    p.add_argument("--source", default=",".join(rec.SOURCES))
    p.add_argument("--compact", action="store_true", help="one line per setting")
    args = p.parse_args(argv)
    for mode in args.mode.split(","):
        for source in args.source.split(","):
            rows = rec.table(mode, source)
            print(rec.format_compact(rows) if args.compact else rec.format_rows(rows))
            for metric in ("goal", "cycles_per_min", "gc_share"):
                errs = [abs(r.error) for r in rows if r.metric == metric and r.label != "gogc100"]
                print(
                    f"  {mode} {source} {metric}: mean |error| {100 * sum(errs) / len(errs):.1f}%, "
                    f"max {100 * max(errs):.1f}%"
                )
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
