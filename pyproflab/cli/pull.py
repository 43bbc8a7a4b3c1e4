"""Pull profiles from a continuous profiler into a store: Datadog, Pyroscope or Parca.

  pyproflab pull datadog --query 'service:notes-api env:prod' --since 72h --db DB
            [--site datadoghq.eu] [--top N] [--types cpu,heap|all]
  pyproflab pull pyroscope URL --query 'TYPE{service_name="api"}' --since 24h
            [--step 1h] [--tenant ID] [--go-pgo N] [--legacy]
  pyproflab pull parca URL --query 'TYPE{job="api"}' --since 24h [--step 1h]

Each pull is incremental: what a pull stored before is not fetched again, and a
profile whose bytes are in the store is never stored twice. Every request is
bounded (--timeout, --max-mib) and retried on 429 and 5xx (--retries, honouring
Retry-After); one failed download is one line on stderr and the pull goes on.
Credentials come from the environment (Datadog: DD_API_KEY and DD_APP_KEY;
--auth-env names the variable of an Authorization value) and are written
nowhere. Exit codes: 0 all stored; 1 some profiles were refused (listed on
stderr); 2 the pull failed (a usage error, the listing failed, every profile
refused).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import argtypes, common
from pyproflab.cli.newstore import removed_if_empty


def _datadog(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query", required=True, help="Datadog profile query, e.g. 'service:x env:y'")
    p.add_argument("--site", help="Datadog site (default $DD_SITE, else datadoghq.com)")
    p.add_argument(
        "--top", type=argtypes.at_least(1), metavar="N", help="only the N profiles with most CPU"
    )
    p.add_argument(
        "--types", default="cpu", help="cpu, heap, mutex, block, goroutine or all (default cpu)"
    )
    p.add_argument(
        "--instance-tag", default="host", help="the tag naming the instance (default host)"
    )
    p.add_argument("--any-runtime", action="store_true", help="do not add runtime:go")
    p.add_argument("--base-url", help="the API's URL instead of https://app.SITE (a proxy)")


def _windowed(p: argparse.ArgumentParser, kind: str) -> None:
    p.add_argument("url", metavar="URL", help=f"the {kind} server's base URL")
    p.add_argument("--query", required=True, help="PROFILE_TYPE{label selector}")
    p.add_argument("--step", default="1h", help="one profile per series per window (default 1h)")
    p.add_argument("--auth-env", metavar="VAR", help="variable holding the Authorization value")


def _pyroscope(p: argparse.ArgumentParser) -> None:
    _windowed(p, "Pyroscope")
    p.add_argument("--tenant", help="X-Scope-OrgID of a multi-tenant server")
    p.add_argument(
        "--go-pgo",
        type=argtypes.at_least(1, 1000),
        metavar="N",
        help="goPgo: keep N leaf frames (1-1000)",
    )
    p.add_argument("--legacy", action="store_true", help="use /pyroscope/render (older servers)")


def _parca(p: argparse.ArgumentParser) -> None:
    _windowed(p, "Parca")


KINDS = {"datadog": _datadog, "pyroscope": _pyroscope, "parca": _parca}


def _flag(flag: str, parse, text: str):
    """``parse(text)``, its one-line error naming ``flag`` ("bad time 'x'" named none)."""
    from pyproflab.errors import UsageError

    try:
        return parse(text)
    except UsageError as e:
        raise UsageError(f"{flag}: {e}") from None


# Where a URL's credentials go on this command line (a job's key is auth_env).
_AUTH_ENV_FLAG = (
    "put the Authorization value in an environment variable and name it with --auth-env"
)


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        sub = parser.add_subparsers(dest="kind", metavar="SERVICE", parser_class=type(parser))
        sub.required = True
        for name, add in KINDS.items():
            p = sub.add_parser(name, help=f"pull from {name}")
            add(p)
            common.add_db_option(p)
            p.add_argument(
                "--since",
                required=True,
                help="from (ISO time, UTC unless it has an offset; or 72h ago)",
            )
            p.add_argument("--until", help="to (default now)")
            p.add_argument(
                "--timeout",
                type=argtypes.seconds,
                default=30.0,
                metavar="S",
                help="seconds for each request, all of it (default 30)",
            )
            p.add_argument(
                "--retries",
                type=argtypes.at_least(0),
                default=3,
                metavar="N",
                help="of 429, 5xx, network failures (default 3)",
            )
            p.add_argument(
                "--max-mib",
                type=argtypes.at_least(1),
                default=256,
                metavar="N",
                help="largest body in MiB (default 256)",
            )
            p.add_argument(
                "--batch-size",
                type=argtypes.at_least(1),
                default=16,
                metavar="N",
                help="profiles per store transaction (default 16)",
            )

    def run(self, args: argparse.Namespace) -> int:
        import sys
        from datetime import UTC, datetime

        from pyproflab.errors import UsageError
        from pyproflab.sources.base import Request
        from pyproflab.sources.http import Retries
        from pyproflab.sources.pull import PullOptions, pull_source
        from pyproflab.store.select import parse_duration, parse_time
        from pyproflab.store.sourced import ingest_source

        since = _flag("--since", parse_time, args.since)
        until = _flag("--until", parse_time, args.until) if args.until else datetime.now(UTC)
        if until <= since:
            raise UsageError("--until must be after --since")
        options = PullOptions(
            timeout=args.timeout,
            max_bytes=args.max_mib << 20,
            retries=Retries(retries=args.retries),
            on_retry=lambda line: print(line, file=sys.stderr, flush=True),
            url_advice=_AUTH_ENV_FLAG if "auth_env" in vars(args) else None,
        )
        values = vars(args)
        if "step" in values:
            values["step"] = _flag("--step", parse_duration, args.step).total_seconds()
        source = pull_source(args.kind, values, options)
        db = common.db_path(args)
        # A store made for nothing (a failed or empty pull) is not left behind.
        with removed_if_empty(db), common.open_store(args, path=db) as store:
            report = ingest_source(
                store,
                source,
                Request(since=since, until=until),
                batch_size=args.batch_size,
                progress=common.Progress("pulling", unit="profile"),
            )
        for what, why in report.refused:
            print(f"refused {what}: {why}", file=sys.stderr)
        failed = report.failed_whole()
        if report.listed != 0:  # nothing listed: the error line alone says it (docs/pull.md)
            print(f"{source.name}: {report.summary()}")
        if failed:  # nothing of the range landed: a scheduled pull must not look fine
            a, b = (f"{t.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}" for t in (since, until))
            span = f"{a} to {b}"
            print(f"pyproflab: error: {source.name}: {failed} ({span})", file=sys.stderr)
            return 2
        return 1 if report.refused else 0
