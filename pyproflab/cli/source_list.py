"""Print the source lines of the functions matching REGEX with their flat and
cum values, as `go tool pprof -list=REGEX` does.

Source files are found as pprof finds them: under --source_path (default
the working directory) or its parents, after --trim_path prefixes are
removed. Where a file is not found, its routine says so in one line.
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
        parser.add_argument("regex", metavar="REGEX", help="function names to list (Python re)")
        add_report_options(parser, graph=False)
        for name, text in (
            ("source_path", "where to look for source files (':'-separated)"),
            ("trim_path", "path prefixes to remove from the profile's file names"),
        ):
            flags = [f"--{name}", f"--{name.replace('_', '-')}"]
            parser.add_argument(*flags, dest=name, metavar="PATH", help=text)

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.source_list import source_list
        from pyproflab.cli.overwrite import refuse_output_over

        result = source_list(
            report_profile(args),
            args.regex,
            sample_index=parse_sample_index(args.sample_index),
            source_path=args.source_path,
            trim_path=args.trim_path,
            focus=args.focus,
            ignore=args.ignore,
            **pprof_filters(args),
        )
        # The source files are known once read: -o over one is refused before writing.
        read = [("a source file the command reads", path) for path in result.source_files]
        refuse_output_over(args.output, read)
        common.write_output(reports.render(result, "text", unit=args.unit), args.output)
        return 0
