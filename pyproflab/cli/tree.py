"""Print every node with its callers and callees, as `go tool pprof -tree` does.

Give profile files (several are merged first) or URLs, or select profiles
from a store with --db. pprof's trimming applies by default (80 nodes, node
fraction 0.005, edge fraction 0.001); --no-trim (pprof's -trim=false), or
--nodecount 0 with both fractions 0, shows everything.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common
from pyproflab.cli.common import (
    add_report_options,
    report_profile,
)


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        from pyproflab.analyses.options import TreeOptions

        add_report_options(parser)
        common.add_option_flags(parser, TreeOptions, TRIM, flags=FLAGS)
        parser.add_argument(
            "--trim",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="trim by --nodecount/--nodefraction/--edgefraction, as pprof does by "
            "default; --no-trim shows every node and edge (pprof's -trim=false)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.tree import tree

        # pprof's -trim=false: no node count and no fractions, whatever was given.
        trim = common.given_options(args, TRIM) if args.trim else dict.fromkeys(TRIM, 0)
        result = tree(report_profile(args), **common.graph_options(args), **trim)
        common.write_output(reports.render(result, "text", unit=args.unit), args.output)
        return 0


# pprof's trimming options, by their flags (-nodecount, -nodefraction, -edgefraction).
TRIM = ("nodecount", "node_fraction", "edge_fraction")
FLAGS = {"node_fraction": "--nodefraction", "edge_fraction": "--edgefraction"}
