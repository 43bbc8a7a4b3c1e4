"""GC cost per profile and per instance: the profile view beside the runtime's.

For each selected profile, the GC metrics of its instance over its time
window (GC cycles per minute, heap live and goal, allocation rate, STW pause
total and p99, GC CPU fraction from the runtime's CPU classes, GOGC and
GOMEMLIMIT, gctrace cycles) and, for CPU profiles, GC CPU by category from
the stacks. text: GC share per instance (profile view vs runtime view) and
the category breakdown; json: every table; csv: one table (--table).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        common.add_selection_options(parser)
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument(
            "--table",
            choices=["profiles", "instances", "categories"],
            default="profiles",
            help="csv: which table to write (default: profiles)",
        )
        parser.add_argument(
            "--no-categories",
            action="store_true",
            help="skip the CPU profiles' stacks (runtime view only; faster)",
        )
        parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.gc import gc

        sel = common.selection_from_args(args)
        with common.open_store(args, read_only=True) as store:
            result = gc(store, sel, categories=not args.no_categories)
        text = reports.output(result, args.format, title="gc", table=args.table)
        common.write_output(text, args.output)
        return 0
