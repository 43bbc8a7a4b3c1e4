"""Print every node with its callers and callees, as `go tool pprof -tree` does.

Give profile files (several are merged first) or URLs, or select profiles
from a store with --db. pprof's trimming applies by default (80 nodes, node
fraction 0.005, edge fraction 0.001); --nodecount 0 with both fractions 0
shows everything.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common
from pyproflab.cli.common import (
    add_report_options,
    parse_sample_index,
    pprof_filters,
    report_profile,
)


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_report_options(parser)
        for flag, kind, default, text in (
            ("--nodecount", int, 80, "show at most N nodes (0: all)"),
            ("--nodefraction", float, 0.005, "hide nodes below F of the total"),
            ("--edgefraction", float, 0.001, "hide edges below F of the total"),
        ):
            parser.add_argument(flag, type=kind, default=default, metavar="N", help=text)

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.tree import tree
        from pyproflab.errors import UsageError

        if args.nodecount < 0:
            raise UsageError("--nodecount must be >= 0")
        result = tree(
            report_profile(args),
            **graph_options(args),
            nodecount=args.nodecount,
            node_fraction=args.nodefraction,
            edge_fraction=args.edgefraction,
        )
        common.write_output(reports.render(result, "text", unit=args.unit), args.output)
        return 0


def graph_options(args: argparse.Namespace) -> dict:
    """The options of ``add_report_options`` that ``top``/``tree``/``peek`` take."""
    return dict(
        sample_index=parse_sample_index(args.sample_index),
        granularity=args.granularity,
        cum_sort=args.cum,
        focus=args.focus,
        ignore=args.ignore,
        **pprof_filters(args),
    )
