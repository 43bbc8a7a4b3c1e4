"""Predict heap, GC cycles and GC CPU for candidate GOGC values and memory limits; recommend one.

The GC data, no profile needed: the store's gctrace cycles and GC metrics
(--db with --service/--version/--instance), gctrace logs (--gctrace LOG...),
Prometheus text snapshots (--metrics FILE...), or figures given by hand
(--gogc, --gc-cycles-per-min and --gc-cpu-share, optionally --heap-goal or
--live-heap, --roots, --process-cpu). The model is fitted on every setting
the data show (instances at different settings, or a setting that changed);
every prediction has an interval, and the recommendation, chosen on the
upper bound of peak memory, is the candidate with the lowest GC CPU within
--budget minus --headroom (by default the container's memory limit, when
known). A raise comes with a GOMEMLIMIT. When the recommendation lies beyond
what was observed, a canary plan says which setting to try on one instance
and for how many cycles. gctrace does not show the process's CPU: give
--process-cpu, or Prometheus beside the log.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import argtypes, common

# GogcOptions' defaults as --help shows them (analyses.gogc.options).
CANDIDATES, HEADROOM = "25,50,100,150,200,300,400,800,off", "10%"

_FIGURES = ("gc_cycles_per_min", "gc_cpu_share", "heap_goal", "live_heap", "roots")


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        common.add_selection_options(parser)
        f = parser.add_argument_group("GC files (no store)")
        # extend: `--gctrace a --gctrace b` is both logs (with nargs alone, the last list won).
        f.add_argument(
            "--gctrace", nargs="+", action="extend", metavar="LOG", help="GODEBUG=gctrace=1 logs"
        )
        f.add_argument(
            "--metrics",
            nargs="+",
            action="extend",
            metavar="FILE",
            help="Prometheus text snapshots of one instance",
        )
        f.add_argument(
            "--lenient",
            action="store_true",
            help="gctrace: skip lines split by other output (counted) instead of refusing the log",
        )
        _add_figures(parser)
        _add_current(parser)
        _add_container(parser)
        _add_prediction(parser)
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses import gogc as model
        from pyproflab.errors import UsageError

        files = bool(args.gctrace or args.metrics)
        figures = [n for n in _FIGURES if getattr(args, n) is not None]
        if sum(map(bool, (files, figures, args.db))) > 1:
            raise UsageError("give GC files, a store, or figures: one of them")
        opts = model.GogcOptions.parse(
            candidates=args.candidates,
            memory_limits=args.memory_limit,
            budget=args.budget,
            headroom=args.headroom,
            gogc=args.gogc if (args.gogc is not None and not figures) else None,
            current_limit=args.current_limit,
            process_cpu=args.process_cpu if not figures else None,
            peak_rss=args.peak_rss,
            cpu_limit=args.cpu_limit,
            container_memory=args.container_memory,
            cgroup=args.cgroup,
        )
        if args.lenient and not args.gctrace:
            raise UsageError("--lenient is for --gctrace logs")
        if figures:
            obs = _from_figures(args, model)
        elif files:
            skipped: list = []
            obs = model.observe(
                cycles=_read_logs(args, model, skipped) if args.gctrace else None,
                samples=model.read_metric_files(args.metrics) if args.metrics else None,
                gogc=opts.gogc,
                memory_limit=opts.current_limit,
            )
            if skipped:
                obs.notes.insert(0, _skipped_note(skipped))
        else:
            obs = _from_store(args, opts, model)
        result = model.advise(obs, opts)
        common.write_output(reports.output(result, args.format, title="gogc"), args.output)
        return 0


def _read_logs(args: argparse.Namespace, model, skipped: list):
    """The logs' cycles; with --lenient, each skipped line said on stderr (as
    ingest-gc) and added to ``skipped``."""
    import sys

    cycles = model.read_gctrace_files(args.gctrace, skipped if args.lenient else None)
    for e in skipped:
        print(f"skipped {e}", file=sys.stderr)
    return cycles


def _skipped_note(skipped: list) -> str:
    """The advice's note of the lines --lenient skipped: the output (a file, a
    job's log) says it covers less than the logs, not stderr alone."""
    n = len(skipped)
    return (
        f"{n} malformed gctrace line{'s' if n > 1 else ''} skipped (--lenient); first: {skipped[0]}"
    )


def _from_figures(args: argparse.Namespace, model):
    from pyproflab.errors import UsageError

    missing = [
        argtypes.flag_of(n)
        for n in ("gogc", "gc_cycles_per_min", "gc_cpu_share")
        if getattr(args, n) is None
    ]
    if missing:
        raise UsageError(
            "figures need --gogc, --gc-cycles-per-min and --gc-cpu-share; missing "
            + ", ".join(missing)
        )
    if common.has_selection(args):
        raise UsageError("give figures or a store selection, not both")
    size = lambda v: model.parse_size(v) if v is not None else None  # noqa: E731
    return model.from_figures(
        gogc=model.parse_gogc(args.gogc),
        gc_cycles_per_min=args.gc_cycles_per_min,
        gc_cpu_share=args.gc_cpu_share,
        heap_goal=size(args.heap_goal),
        live_heap=size(args.live_heap),
        roots=size(args.roots) or 0.0,
        process_cpu=args.process_cpu,
        memory_limit=model.parse_limit(args.current_limit),
    )


def _from_store(args: argparse.Namespace, opts, model):
    import os

    from pyproflab.errors import UsageError

    path = common.db_path(args)
    if not os.path.exists(path):
        raise UsageError(
            f"{path}: no such store (or give --gctrace LOG, --metrics FILE or figures)"
        )
    model.refuse_unused(common.selection_from_args(args))
    with common.open_store(args, read_only=True) as store:
        return model.observe_store(
            store,
            service=args.service,
            version=args.sel_version,
            instance=args.instance,
            gogc=opts.gogc,
            memory_limit=opts.current_limit,
        )


def _add_figures(parser: argparse.ArgumentParser) -> None:
    e = parser.add_argument_group("figures given by hand (no store, no files)")
    e.add_argument(
        "--gc-cycles-per-min", type=float, metavar="N", help="observed GC cycles per minute"
    )
    e.add_argument(
        "--gc-cpu-share",
        type=float,
        metavar="F",
        help="observed GC CPU over process CPU (0.416 for 41.6%%)",
    )
    e.add_argument("--heap-goal", metavar="SIZE", help="observed heap goal (e.g. 512MiB)")
    e.add_argument("--live-heap", metavar="SIZE", help="observed marked heap")
    e.add_argument("--roots", metavar="SIZE", help="GC roots: goroutine stacks + globals")


def _add_current(parser: argparse.ArgumentParser) -> None:
    c = parser.add_argument_group("the current setting and what the data lack")
    c.add_argument("--gogc", metavar="N|off", help="the current GOGC (else from the data)")
    c.add_argument(
        "--current-limit", metavar="SIZE|off", help="the current GOMEMLIMIT (else from the data)"
    )
    c.add_argument(
        "--process-cpu",
        type=float,
        metavar="CORES",
        help="the process's CPU at the current setting, as the Go runtime counts it (CPU "
        "classes total - idle); gctrace does not show it",
    )
    c.add_argument(
        "--peak-rss", metavar="SIZE", help="the peak memory (RSS) seen at the current setting"
    )


def _add_container(parser: argparse.ArgumentParser) -> None:
    c = parser.add_argument_group("the container (else from cAdvisor's metrics, when stored)")
    c.add_argument(
        "--container-memory", metavar="SIZE", help="its memory limit (the default budget)"
    )
    c.add_argument("--cpu-limit", type=float, metavar="CORES", help="its CPU quota in cores")
    c.add_argument(
        "--cgroup", metavar="DIR|NAME", help="read both from a cgroup (v2 dir, or v1 name)"
    )


def _add_prediction(parser: argparse.ArgumentParser) -> None:
    p = parser.add_argument_group("prediction")
    p.add_argument(
        "--candidates",
        metavar="LIST",
        # Not given (None): GogcOptions' default, which the help shows (a test holds
        # them equal; the gogc package is not imported to build the parser).
        help=f"GOGC values to predict (default {CANDIDATES})",
    )
    p.add_argument(
        "--memory-limit",
        metavar="LIST",
        help="memory limits to predict, e.g. 1GiB,1.5GiB,off (default: current)",
    )
    p.add_argument(
        "--budget",
        metavar="SIZE",
        help="memory budget, e.g. 2GiB, or 2.5x the current peak (default: the container's "
        "memory limit)",
    )
    p.add_argument(
        "--headroom",
        metavar="PCT|SIZE",
        help=f"kept free out of the budget (default {HEADROOM})".replace("%", "%%"),
    )
