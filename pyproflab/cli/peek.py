"""Print the callers and callees of the functions matching REGEX, as
`go tool pprof -peek=REGEX` does (nothing is trimmed).

Give the regex, then profile files (several are merged first) or URLs, or
select profiles from a store with --db.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common
from pyproflab.cli.common import add_report_options, report_profile


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("regex", metavar="REGEX", help="node names to show (Python re)")
        add_report_options(parser)

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.tree import peek

        result = peek(report_profile(args), args.regex, **common.graph_options(args))
        common.write_output(reports.render(result, "text", unit=args.unit), args.output)
        return 0
