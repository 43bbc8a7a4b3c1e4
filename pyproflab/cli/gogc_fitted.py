"""`pyproflab gogc` with the fitted model: inputs from GC files or the store."""

from __future__ import annotations

import argparse
import os

from pyproflab.cli import common
from pyproflab.errors import UsageError


def _observation(args: argparse.Namespace):
    from pyproflab.analyses import gogc_inputs as gi
    from pyproflab.analyses.gogc import parse_gogc, parse_limit

    gogc = parse_gogc(args.gogc) if args.gogc is not None else "auto"
    limit = parse_limit(args.current_limit) if args.current_limit is not None else "auto"
    if args.gctrace or args.metrics:
        cycles = gi.read_gctrace_files(args.gctrace) if args.gctrace else None
        samples = gi.read_metric_files(args.metrics) if args.metrics else None
        return gi.observe(cycles=cycles, samples=samples, gogc=gogc, memory_limit=limit)
    from pyproflab.store import Store

    path = common.db_path(args)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such store (or give --gctrace LOG or --metrics FILE)")
    with Store.open(path, read_only=True) as store:
        return gi.observe_store(
            store,
            service=args.service,
            version=args.sel_version,
            instance=args.instance,
            gogc=gogc,
            memory_limit=limit,
        )


def _budget(args: argparse.Namespace, obs) -> tuple[float | None, float]:
    """(budget bytes, headroom fraction); ``2x`` is twice the current predicted peak."""
    from pyproflab.analyses.gogc import parse_fraction, parse_size
    from pyproflab.analyses.gogc_model import predict_setting

    headroom = parse_fraction(args.headroom)
    if args.budget is None:
        return None, headroom
    text = args.budget.strip().lower()
    if text.endswith("x"):
        try:
            k = float(text[:-1])
        except ValueError:
            raise UsageError(f"bad budget {args.budget!r}") from None
        return k * predict_setting(obs, obs.gogc, obs.memory_limit)["peak_memory"], headroom
    return parse_size(args.budget), headroom


def run_fitted(args: argparse.Namespace) -> int:
    from pyproflab import reports
    from pyproflab.analyses.gogc import parse_candidates, parse_limit
    from pyproflab.analyses.gogc_model import advise

    obs = _observation(args)
    if args.peak_rss:
        from pyproflab.analyses.gogc import parse_size
        from pyproflab.analyses.gogc_inputs import with_peak_rss

        obs = with_peak_rss(obs, parse_size(args.peak_rss))
    if getattr(args, "process_cpu", None) is not None:
        from pyproflab.analyses.gogc_inputs import with_process_cpu

        obs = with_process_cpu(obs, args.process_cpu)
    budget, headroom = _budget(args, obs)
    limits = None
    if args.memory_limit:
        limits = list(dict.fromkeys(parse_limit(x) for x in args.memory_limit.split(",")))
    advice = advise(
        obs, parse_candidates(args.candidates), limits, budget=budget, headroom=headroom
    )
    common.write_output(reports.output(advice, args.format, title="gogc"), args.output)
    return 0
