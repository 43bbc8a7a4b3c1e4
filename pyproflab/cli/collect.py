"""Collect profiles and /metrics from live Go services into a store.

TARGETS is a TOML file of [[target]] tables (service, version, instance, url,
optional auth_env naming the environment variable that holds the whole
Authorization header value, optional types). For --seconds N every target
gets a CPU profile and allocs/mutex/block deltas over N seconds, heap and
goroutine snapshots when the window ends, and /metrics scrapes every
--metrics-interval seconds through the window. Raw bodies are kept in a
content-addressed archive (ARCHIVE/ab/abcd....pb.gz) and ingested with their
window. Each failed fetch is one line on stderr; the others still land.

Exit codes: 0 everything was collected; 1 some fetches or scrapes failed
(the rest were stored; see the lines on stderr); 2 a usage error (bad
targets file or flag, missing store folder).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import argtypes, common
from pyproflab.cli.newstore import removed_if_empty


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.add_argument("targets", metavar="TARGETS.toml")
        common.add_db_option(parser)
        parser.add_argument(
            "--seconds",
            type=argtypes.at_least(1),
            default=10,
            metavar="N",
            help="the window: CPU profile and delta profiles over N seconds (default 10)",
        )
        parser.add_argument(
            "--types",
            default="cpu,heap,allocs,goroutine,mutex,block",
            metavar="LIST",
            help="profile types for targets without their own (default: all six)",
        )
        parser.add_argument(
            "--archive",
            metavar="DIR",
            help="content-addressed archive of the raw bodies (default: <db folder>/archive)",
        )
        parser.add_argument(
            "--metrics-interval",
            type=argtypes.interval,
            default=2.0,
            metavar="S",
            help="scrape /metrics every S seconds through the window; 0 turns it off (default 2)",
        )
        parser.add_argument(
            "--timeout",
            type=argtypes.seconds,
            default=10.0,
            metavar="S",
            help="connect/read timeout in seconds, on top of N for windowed requests (default 10)",
        )
        parser.add_argument(
            "--retries",
            type=argtypes.at_least(0),
            default=2,
            metavar="N",
            help="retries of a transient fault (refused, timeout, 5xx) with backoff (default 2)",
        )
        parser.add_argument(
            "--concurrency",
            type=argtypes.at_least(1),
            default=16,
            metavar="N",
            help="requests at once (default 16; windowed requests beyond it start late)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import sys
        from pathlib import Path

        from pyproflab.collect import collect
        from pyproflab.errors import UsageError
        from pyproflab.sources.targets import load_targets, parse_types

        # Everything a user can get wrong is checked before the store is opened.
        targets = load_targets(args.targets)
        try:
            types = parse_types(args.types)
        except ValueError as e:
            raise UsageError(str(e)) from None
        db = common.db_path(args)
        archive = Path(args.archive) if args.archive else Path(db).parent / "archive"
        made_archive = not archive.exists()
        try:
            archive.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(
                f"{archive}: cannot create the archive folder: {e.strerror or e}"
            ) from None

        # A store made for nothing (no profile, no metric) is not left behind.
        with removed_if_empty(db), common.open_store(args) as store:
            report = collect(
                store,
                targets,
                seconds=args.seconds,
                types=types,
                archive_dir=archive,
                metrics_interval=args.metrics_interval or None,
                timeout=args.timeout,
                retries=args.retries,
                concurrency=args.concurrency,
                progress=common.Progress("collecting", unit="fetch"),
            )
        for line in report.errors():
            print(f"collect: {line}", file=sys.stderr)
        print(report.summary())
        if report.new or report.present or report.metric_samples:
            return report.exit_code
        if made_archive and archive.is_dir() and not any(archive.iterdir()):
            archive.rmdir()  # nor an archive folder made for nothing
        return 2  # nothing came: the collection failed as a whole (a job's source fails so)
