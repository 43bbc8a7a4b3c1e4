"""Merge profiles into one pprof file that `go tool pprof` and `go build -pgo` read.

Give files, or select profiles from a store with --db and the selection
options. Profiles with different sample types are merged on the types they
all share, in the first profile's order (what `go tool pprof A B` does).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("files", nargs="*", metavar="FILE", help="pprof files")
        common.add_db_option(parser)
        common.add_selection_options(parser)
        parser.add_argument(
            "-o",
            "--output",
            required=True,
            metavar="OUT",
            help="the merged profile (gzipped unless it ends in .pb or .pprof)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import sys

        from pyproflab.cli.common import load_profile
        from pyproflab.encode import write_profile
        from pyproflab.errors import UsageError

        if args.files and (args.db or common.has_selection(args)):
            raise UsageError("give profile files or --db with a selection, not both")
        profile = load_profile(args)
        gz = not args.output.endswith((".pb", ".pprof"))
        try:
            write_profile(profile, args.output, gzip=gz)
        except OSError as e:
            raise UsageError(f"{args.output}: cannot write: {e.strerror or e}") from None
        print(
            f"wrote {args.output}: {profile.num_samples} samples, "
            f"{len(profile.sample_types)} sample types",
            file=sys.stderr,
        )
        return 0
