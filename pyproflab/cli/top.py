"""Show the top functions of profiles, as `go tool pprof -top` does.

With pprof's defaults: nodes below 0.5% of the total are trimmed (the header
says how many) and every other node is shown; --no-trim shows them all (whatever
--nodecount says, as pprof's -trim=false) and --nodecount N the first N.

Give profile files to read them directly (several are merged first, as
pprof merges them), or select profiles from a store with --db and the
selection options. Values are exact integers in the sample type's unit in
csv and json; text scales them like pprof.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common
from pyproflab.errors import UsageError


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_report_options(parser)
        parser.add_argument(
            "--nodecount",
            type=int,
            default=None,
            metavar="N",
            help="show at most N rows (default: every node left after trimming, as pprof)",
        )
        parser.add_argument(
            "--nodefraction",
            type=float,
            default=None,
            metavar="F",
            help="hide nodes below F of the total (default 0.005, as pprof)",
        )
        parser.add_argument(
            "--edgefraction",
            type=float,
            default=None,
            metavar="F",
            help="edges below F of the total are left out; they decide inline markers "
            "(default 0.001, as pprof)",
        )
        parser.add_argument(
            "--trim",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="trim by --nodecount/--nodefraction/--edgefraction, as pprof does by "
            "default; --no-trim shows every node (pprof's -trim=false)",
        )
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument(
            "--exact",
            action="store_true",
            help="text: print exact integers in the base unit instead of scaled values",
        )
        common.add_engine_options(parser)

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.top import top

        if args.dataset and args.engine != "spark":
            raise UsageError("--dataset is read by --engine spark")
        if args.nodecount is not None and args.nodecount < 0:
            raise UsageError("--nodecount must be >= 0")
        options = {**common.graph_options(args), **trimming(args, args.nodecount)}
        if args.engine == "spark":
            dataset = common.spark_dataset(args)
            result = top(dataset.merged_profile(common.selection_from_args(args)), **options)
            result.notes.extend(spark_cpu_notes(args, dataset, result.sample_type))
        elif not args.files:  # a store (--db or the default): profile and note, one opening
            with common.open_store(args, read_only=True) as store:
                result = top(common.report_profile(args, store), **options)
                result.notes.extend(cpu_notes(args, store, result.sample_type))
        else:
            result = top(common.report_profile(args), **options)
        text = reports.output(result, args.format, title="top", exact=args.exact, unit=args.unit)
        common.write_output(text, args.output)
        return 0


def cpu_notes(args: argparse.Namespace, store, sample_type) -> list[str]:
    """``analyses.cpu_coverage``'s note on the selected CPU profiles of ``store``
    (open), when the values are CPU time (the header's ``Total samples = ...
    (N%)`` is a rate)."""
    from pyproflab.analyses.cpu_coverage import notes_for
    from pyproflab.store.kinds import one_kind

    if sample_type.type != "cpu":
        return []
    sample = common.parse_sample_index(getattr(args, "sample_index", None))
    selection, _ = one_kind(store, common.selection_from_args(args), sample=sample)
    return notes_for(store, selection)


def spark_cpu_notes(args: argparse.Namespace, dataset, sample_type) -> list[str]:
    """``cpu_notes`` on Spark: the same note from the dataset's profiles and
    metric samples (an export carries them), so --engine spark says what --db says."""
    from pyproflab.analyses import cpu_coverage as cc
    from pyproflab.engines.spark_regressions import SparkReads

    if sample_type.type != "cpu":
        return []
    rows = dataset.cpu_profile_seconds(common.selection_from_args(args))
    if not rows:
        return []
    services = sorted({r["service"] for r in rows}, key=str)
    samples = SparkReads(dataset).counter_samples(cc.PROCESS_CPU, services)
    return cc.notes_of(cc.coverage_of(rows, [r["cpu_ns"] / 1e9 for r in rows], samples))


def trimming(args: argparse.Namespace, nodecount: int | None) -> dict[str, float | int | None]:
    """pprof's rule: with -trim (the default) the node count and fractions given
    or its driver's defaults for -top (every node; ``options.PPROF_NODE_FRACTION``
    /``PPROF_EDGE_FRACTION``: nodes below 0.5% of the total, edges below 0.1%);
    with -trim=false none of the three, whatever was given (its driver zeroes
    -nodecount as well as the fractions)."""
    from pyproflab.analyses.options import PPROF_EDGE_FRACTION, PPROF_NODE_FRACTION

    if not args.trim:
        return {"nodecount": None, "node_fraction": 0.0, "edge_fraction": 0.0}
    node = PPROF_NODE_FRACTION if args.nodefraction is None else args.nodefraction
    edge = PPROF_EDGE_FRACTION if args.edgefraction is None else args.edgefraction
    return {"nodecount": nodecount or None, "node_fraction": node, "edge_fraction": edge}
