"""Predict GC CPU and heap for candidate GOGC values and memory limits; recommend one.

Inputs come from any GC source, no profile needed: gctrace logs
(--gctrace LOG...), Prometheus text snapshots (--metrics FILE...), or the
store's gctrace cycles and GC metrics (--db with --service/--version/
--instance). These use the fitted model (floating garbage, CPU saturation,
the memory limit; every prediction with an interval; the recommendation is
chosen on the upper bound of peak memory and any raise carries a
GOMEMLIMIT). --model improved|plain with --db uses the earlier join of
profiles and metrics. Or explicitly from observed figures: --gogc,
--gc-cycles-per-min and --gc-cpu-share (GC CPU over process CPU), plus
optionally --heap-goal or --live-heap, --roots, --process-cpu. The
recommendation is the candidate with the lowest predicted GC CPU whose peak
memory stays within --budget minus --headroom.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common

_EXPLICIT = ("gogc", "gc_cycles_per_min", "gc_cpu_share")
_FIGURES = ("gc_cycles_per_min", "gc_cpu_share", "heap_goal", "live_heap", "process_cpu")


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        common.add_selection_options(parser)
        f = parser.add_argument_group("GC files (no store)")
        f.add_argument("--gctrace", nargs="+", metavar="LOG", help="GODEBUG=gctrace=1 logs")
        f.add_argument(
            "--metrics", nargs="+", metavar="FILE", help="Prometheus text snapshots of one instance"
        )
        _add_explicit_inputs(parser)
        _add_prediction_options(parser)
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.gogc import GcInputs, gogc, parse_limit, parse_size
        from pyproflab.errors import UsageError

        files = bool(args.gctrace or args.metrics)
        figures = [n for n in _FIGURES if getattr(args, n) is not None]
        # --process-cpu also completes GC files or a store (gctrace does not show it).
        explicit = any(n != "process_cpu" for n in figures) or bool(
            figures and not files and not args.db
        )
        if files and (explicit or args.db):
            raise UsageError("give GC files, a store, or explicit figures: one of them")
        store_path = not explicit and (args.gogc is None or args.db)
        if files or (store_path and args.model in (None, "fitted")):
            from pyproflab.cli.gogc_fitted import run_fitted

            return run_fitted(args)
        if args.model == "fitted":
            raise UsageError("the fitted model needs GC files (--gctrace, --metrics) or --db")
        args.model = args.model or "improved"
        given = [n for n in _EXPLICIT if getattr(args, n) is not None]
        opts = dict(
            candidates=args.candidates,
            memory_limits=args.memory_limit,
            budget=args.budget,
            headroom=args.headroom,
            model=args.model,
        )
        if given:
            if len(given) < len(_EXPLICIT):
                missing = sorted(set(_EXPLICIT) - set(given))
                raise UsageError(
                    "explicit inputs need --gogc, --gc-cycles-per-min and "
                    "--gc-cpu-share; missing "
                    + ", ".join("--" + m.replace("_", "-") for m in missing)
                )
            if common.has_selection(args) or args.db:
                raise UsageError("give explicit inputs or a store selection, not both")
            inputs = GcInputs.from_observed(
                gogc=args.gogc,
                gc_cycles_per_min=args.gc_cycles_per_min,
                gc_cpu_share=args.gc_cpu_share,
                heap_goal_bytes=parse_size(args.heap_goal) if args.heap_goal else None,
                live_heap_bytes=parse_size(args.live_heap) if args.live_heap else None,
                roots_bytes=parse_size(args.roots) if args.roots else 0.0,
                process_cpu_cores=args.process_cpu,
                memory_limit_bytes=parse_limit(args.current_limit),
                fixed_fraction=args.fixed_fraction,
                mark_alloc_ratio=args.mark_alloc_ratio,
            )
            result = gogc(inputs=inputs, **opts)
        else:
            import os

            from pyproflab.store import Store

            path = common.db_path(args)
            if not os.path.exists(path):
                raise UsageError(
                    f"{path}: no such store (or give explicit inputs: --gogc, "
                    "--gc-cycles-per-min, --gc-cpu-share)"
                )
            with Store.open(path, read_only=True) as store:
                result = gogc(store, common.selection_from_args(args), **opts)
        common.write_output(reports.output(result, args.format, title="gogc"), args.output)
        return 0


def _add_explicit_inputs(parser: argparse.ArgumentParser) -> None:
    """The observed figures for the earlier model (no store); --peak-rss and
    --process-cpu also complete GC files or a store."""
    e = parser.add_argument_group("explicit inputs (no store)")
    e.add_argument("--gogc", metavar="N|off", help="the current GOGC")
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
    e.add_argument("--live-heap", metavar="SIZE", help="observed marked live heap")
    e.add_argument("--roots", metavar="SIZE", help="GC roots: goroutine stacks + globals")
    e.add_argument(
        "--peak-rss",
        metavar="SIZE",
        help="with GC files or --db: the peak memory (RSS) seen at the current setting, "
        "e.g. the container's (else from Prometheus, or 1.4x the heap goal)",
    )
    e.add_argument(
        "--process-cpu",
        type=float,
        metavar="CORES",
        help="observed process CPU in cores (else CPU is relative); with GC files "
        "or --db, its CPU at the current setting (gctrace does not show it), as the "
        "Go runtime counts it (CPU classes total - idle): the container's can be lower "
        "when Ps idle, which makes the GC share high",
    )
    e.add_argument(
        "--current-limit", metavar="SIZE|off", help="the current GOMEMLIMIT (default off)"
    )
    e.add_argument(
        "--fixed-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="share of the GC cost per cycle that is fixed (default 0)",
    )
    e.add_argument(
        "--mark-alloc-ratio",
        type=float,
        default=0.0,
        metavar="K",
        help="bytes allocated while marking per byte of scan work (improved "
        "model; default 0: unknown)",
    )


def _add_prediction_options(parser: argparse.ArgumentParser) -> None:
    """What to predict (candidates, limits), the budget the advice must fit, the model."""
    p = parser.add_argument_group("prediction")
    p.add_argument(
        "--candidates",
        default="25,50,100,150,200,300,400,800,off",
        metavar="LIST",
        help="GOGC values to predict (default %(default)s)",
    )
    p.add_argument(
        "--memory-limit",
        metavar="LIST",
        help="memory limits to predict, e.g. 1GiB,1.5GiB,off (default: current)",
    )
    p.add_argument(
        "--budget",
        metavar="SIZE",
        help="memory budget (container limit), e.g. 2GiB, or 2x the current peak",
    )
    p.add_argument(
        "--headroom",
        default="10%",
        metavar="PCT|SIZE",
        help="kept free out of the budget (default %(default)s)",
    )
    p.add_argument(
        "--model",
        choices=["fitted", "improved", "plain"],
        help="fitted (default for GC files and --db) or the earlier improved/plain "
        "(default for explicit figures)",
    )
