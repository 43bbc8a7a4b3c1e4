"""Read GC metrics into a store: Prometheus text, gctrace logs, or a Prometheus server.

  pyproflab ingest-gc FILE... --format prom|gctrace [--service S --version V --instance I]
            [--time T] [--process-start T] [--lenient]
  pyproflab ingest-gc --prometheus URL --since T [--until T] [--step 15s]
            [--query PROMQL]... [--map PROM_INSTANCE=INSTANCE]...

Prometheus text goes to metric_samples (samples without a timestamp get
--time, else the file's modification time); gctrace logs go to gc_cycles
(--process-start gives each cycle its absolute time). A log holding several
process runs (a restart, or two processes writing to one stream) keeps each
as a run of its own. From a server, the GC
metric families (or each --query) are fetched with query_range over
[--since, --until] every --step; a series' Prometheus instance label becomes
our instance through --map, else stays as it is, with its job as service.

Files are read as they are stored, in one transaction (memory holds a batch,
whatever the size of the files): on a bad line anywhere, or an unreachable
server, nothing is stored (one line naming the file and the line, exit 2). Rows already in the
store are counted, not stored again. One summary line.
"""

from __future__ import annotations

import argparse
from typing import Any

from pyproflab.cli import common
from pyproflab.cli.newstore import removed_if_empty


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.add_argument("files", nargs="*", metavar="FILE")
        common.add_db_option(parser)
        parser.add_argument(
            "--format",
            choices=("prom", "gctrace"),
            help="what the files are: Prometheus text exposition or gctrace logs",
        )
        parser.add_argument("--service")
        parser.add_argument("--version", dest="meta_version", metavar="VERSION")
        parser.add_argument("--instance")
        parser.add_argument(
            "--time",
            metavar="T",
            help="time of prom samples without a timestamp (ISO, UTC unless it has an offset; "
            "default: file mtime)",
        )
        parser.add_argument(
            "--process-start",
            metavar="T",
            help="when the gctrace'd process started (gives cycles a time; ISO, UTC unless "
            "it has an offset: ps -o lstart prints local time)",
        )
        parser.add_argument(
            "--lenient",
            action="store_true",
            help="gctrace: skip lines split by other output (counted) instead of refusing the file",
        )
        g = parser.add_argument_group("from a Prometheus server")
        g.add_argument("--prometheus", metavar="URL", help="base URL, e.g. http://127.0.0.1:9090")
        g.add_argument(
            "--since",
            metavar="T",
            help="window start (ISO time, UTC unless it has an offset; or 30m, 2h ago)",
        )
        g.add_argument("--until", metavar="T", help="window end (default now)")
        g.add_argument("--step", default="15s", help="resolution (default 15s)")
        g.add_argument(
            "--query",
            action="append",
            default=[],
            metavar="PROMQL",
            help="instead of the GC metric families (repeatable)",
        )
        g.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="PROM=INSTANCE",
            help="Prometheus instance label -> our instance (repeatable)",
        )
        g.add_argument(
            "--timeout", type=float, default=30.0, metavar="SECONDS", help="per request, in all"
        )
        g.add_argument(
            "--max-mib", type=int, default=256, metavar="N", help="largest answer (default 256)"
        )

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.errors import UsageError

        if args.prometheus:
            if args.files:
                raise UsageError("give FILEs or --prometheus, not both")
            return self._from_server(args)
        if not args.files:
            raise UsageError("nothing to read: give FILEs (with --format) or --prometheus URL")
        if not args.format:
            raise UsageError("--format prom|gctrace is required with FILEs")
        return self._from_files(args)

    def _from_files(self, args: argparse.Namespace) -> int:
        import sys

        from pyproflab.errors import UsageError
        from pyproflab.sources.base import ItemMeta
        from pyproflab.sources.metric_files import MetricFileSource
        from pyproflab.store.select import parse_time
        from pyproflab.store.sourced import stream_source

        if args.format == "prom" and args.process_start:
            raise UsageError("--process-start is for --format gctrace")
        if args.format == "gctrace" and args.time:
            raise UsageError("--time is for --format prom")
        source = MetricFileSource(
            args.files,
            args.format,
            ItemMeta(service=args.service, version=args.meta_version, instance=args.instance),
            default_time=parse_time(args.time) if args.time else None,
            process_start=parse_time(args.process_start) if args.process_start else None,
            lenient=args.lenient,
        )
        # Read as stored, in one transaction: a bad line anywhere stores nothing,
        # and a store made for it is not left behind.
        db = common.db_path(args)
        with removed_if_empty(db):
            report = stream_source(lambda: common.open_store(args, path=db), source)
        added = report.metric_rows
        for e in source.skipped:
            print(f"skipped {e}", file=sys.stderr)
        what = "metric samples" if args.format == "prom" else "gc cycles"
        tail = f", {len(source.skipped)} malformed lines skipped" if args.lenient else ""
        files = f"{len(args.files)} file{'s' if len(args.files) != 1 else ''}"
        runs = ""
        if args.format == "gctrace":
            n_runs = len(source.runs)
            if n_runs > len(args.files):
                runs = f" ({n_runs} process runs)"
                if args.process_start:
                    print(
                        "note: --process-start dates the first run of each log; "
                        "the later runs (other processes) have no time",
                        file=sys.stderr,
                    )
        print(
            f"{files}, {source.rows} {what}{runs}: {added} new, "
            f"{source.rows - added} already present{tail}"
        )
        return 0

    def _from_server(self, args: argparse.Namespace) -> int:
        from datetime import UTC, datetime

        from pyproflab.errors import UsageError
        from pyproflab.sources.base import Request
        from pyproflab.sources.prometheus_server import DEFAULT_GC_QUERIES, PrometheusSource
        from pyproflab.store.select import parse_time

        if args.format or args.time or args.process_start or args.lenient:
            raise UsageError("--format, --time, --process-start and --lenient are for FILEs")
        if not args.since:
            raise UsageError("--since is required with --prometheus")
        if args.instance:
            raise UsageError("with --prometheus, name instances with --map PROM=INSTANCE")
        if args.max_mib < 1:
            raise UsageError(f"--max-mib must be a whole number >= 1, not {args.max_mib}")
        if not 0 < args.timeout < float("inf"):
            raise UsageError(f"--timeout must be a number of seconds above 0, not {args.timeout}")
        start = parse_time(args.since)
        end = parse_time(args.until) if args.until else datetime.now(UTC)
        if end <= start:
            raise UsageError("--until must be after --since")
        source = PrometheusSource(
            args.prometheus,
            args.step,
            queries=args.query or DEFAULT_GC_QUERIES,
            instances=common.parse_kv(args.map, "--map"),
            timeout=args.timeout,
            max_bytes=args.max_mib << 20,
            service=args.service,
            version=args.meta_version,
        )
        added = _store_all(args, source, Request(since=start, until=end))
        n, series = source.rows, len(source.series)
        print(f"{series} series, {n} metric samples: {added} new, {n - added} already present")
        return 0


def _store_all(args: argparse.Namespace, source: Any, request: Any) -> int:
    """Every item of ``source``, all read first, then stored in ONE transaction
    (nothing is stored if any fails); returns the rows added."""
    from pyproflab.errors import UsageError
    from pyproflab.sources.base import prefetch
    from pyproflab.store.sourced import ingest_source

    fetched = prefetch(source, request)  # before the store is opened: a failure creates none
    with common.open_store(args) as store:
        report = ingest_source(store, fetched, batch_size=2**62, batch_bytes=2**62)
    if report.refused:
        what, why = report.refused[0]
        raise UsageError(f"{what}: {why}")
    return report.metric_rows
