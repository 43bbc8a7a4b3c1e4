"""Show the top functions of profiles, as `go tool pprof -top` does.

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
            help="show at most N rows (default: all in csv/json, 30 in text)",
        )
        parser.add_argument(
            "--nodefraction",
            type=float,
            default=0.0,
            metavar="F",
            help="hide nodes below F of the total (pprof's default is 0.005; ours 0: all)",
        )
        parser.add_argument(
            "--edgefraction",
            type=float,
            default=0.001,
            metavar="F",
            help="edges below F of the total are left out (they decide inline markers)",
        )
        parser.add_argument(
            "--trim",
            action="store_true",
            help="pprof's defaults: --nodefraction 0.005 --edgefraction 0.001",
        )
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument(
            "--exact",
            action="store_true",
            help="text: print exact integers in the base unit instead of scaled values",
        )
        common.add_engine_options(parser)

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.analyses.top import top
        from pyproflab.reports import render_top

        if args.dataset and args.engine != "spark":
            raise UsageError("--dataset is read by --engine spark")
        profile = (
            common.spark_profile(args) if args.engine == "spark" else common.report_profile(args)
        )
        sample_index = common.parse_sample_index(args.sample_index)
        nodecount = args.nodecount
        if nodecount is None and args.format == "text":
            nodecount = 30
        if nodecount is not None and nodecount < 0:
            raise UsageError("--nodecount must be >= 0")
        result = top(
            profile,
            sample_index=sample_index,
            granularity=args.granularity,
            nodecount=nodecount or None,
            cum_sort=args.cum,
            focus=args.focus,
            ignore=args.ignore,
            node_fraction=0.005 if args.trim else args.nodefraction,
            edge_fraction=0.001 if args.trim else args.edgefraction,
            **common.pprof_filters(args),
        )
        text = render_top(result, args.format, exact=args.exact, unit=args.unit)
        common.write_output(text, args.output)
        return 0
