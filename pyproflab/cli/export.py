"""Write the store as a Parquet dataset (samples and profiles partitioned by
service and date); `pyproflab ingest DIR` reads it back into any store."""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        parser.add_argument("--parquet", required=True, metavar="DIR", help="output folder")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.store.parquet import export_parquet

        with common.open_store(args, read_only=True) as store:
            summary = export_parquet(store, args.parquet)
        print(summary)
        return 0
