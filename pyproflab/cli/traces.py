"""Print every sample's stack with its labels, as `go tool pprof -traces` does.

Give profile files (several are merged first) or http(s) URLs; --diff_base
or --base subtract other profiles first, as pprof does (the base's samples
are printed with their values negated, labelled pprof::base).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common
from pyproflab.cli.common import add_base_options, add_pprof_filters


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="pprof files or URLs")
        parser.add_argument(
            "--sample-index", metavar="NAME|N", help="sample type (default as top chooses)"
        )
        parser.add_argument("--focus", metavar="REGEX", help="only samples with a matching frame")
        parser.add_argument("--ignore", metavar="REGEX", help="drop samples with a matching frame")
        add_pprof_filters(parser)
        add_base_options(parser)
        parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.traces import traces
        from pyproflab.cli.common import load_profile, parse_sample_index, pprof_filters

        profile = load_profile(args)
        options = {"focus": args.focus, "ignore": args.ignore, **pprof_filters(args)}
        common.warn_unmatched(profile, options)
        result = traces(profile, parse_sample_index(args.sample_index), **options)
        common.write_output(reports.render(result, "text"), args.output)
        return 0
