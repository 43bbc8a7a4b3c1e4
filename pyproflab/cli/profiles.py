"""List the profiles in a store, with their metadata.

A selection that matches nothing (a mistyped service, a window outside the
data) says so on stderr: the listing is empty, the exit code 0, and an empty
table alone read as "this service has no profiles".
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        common.add_selection_options(parser)
        parser.add_argument("--format", choices=["text", "json", "csv"], default="text")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab import reports

        with common.open_store(args, read_only=True) as store:
            table = store.profiles(common.selection_from_args(args))
        cols = [
            c
            for c in (
                "profile_id",
                "service",
                "version",
                "instance",
                "profile_type",
                "time",
                "duration_nanos",
                "num_samples",
                "source",
            )
            if c in table.column_names
        ]
        common.write_output(reports.render(table.select(cols), args.format), None)
        if table.num_rows == 0:
            import sys

            sel = common.selection_from_args(args)
            said = (
                "the store holds no profiles"
                if sel.everything
                else f"no profiles match {sel.describe()}"
            )
            print(f"pyproflab: note: {said}", file=sys.stderr)
        return 0
