"""Receive the profiles that dd-trace-go's and pyroscope-go's profilers push.

Point dd-trace-go's profiler at it as the agent (WithAgentAddr HOST:PORT: it
posts to /profiling/v1/input) and pyroscope-go at it as the server
(ServerAddress http://HOST:PORT: it posts to /ingest). A push is answered
200 only once its bytes are in the spool folder (written, fsynced, renamed);
with --db an ingester beside the server moves the spool into the store in
batches. Without --token or --tokens it listens on 127.0.0.1 only.
Its own metrics are on /metrics.
"""

from __future__ import annotations

import argparse
import math
import shutil
from pathlib import Path

from pyproflab.cli import argtypes, common


def add_spool_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spool", required=True, metavar="DIR", help="the spool folder")


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_spool_options(parser)
        common.add_db_option(parser, wait=False)  # its ingester waits (spool-ingest)
        parser.add_argument(
            "--listen",
            default="127.0.0.1:4040",
            metavar="HOST:PORT",
            help="the address to listen on (default 127.0.0.1:4040)",
        )
        parser.add_argument("--token", help="bearer token every push must carry")
        parser.add_argument(
            "--tokens", metavar="FILE", help="per-service tokens: one 'SERVICE TOKEN' a line"
        )
        parser.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this cert")
        parser.add_argument("--tls-key", metavar="PEM", help="its private key")
        parser.add_argument(
            "--no-ingest", action="store_true", help="only spool; ingest with spool-ingest or a job"
        )
        parser.add_argument(
            "--ingesters",
            type=int,
            default=1,
            metavar="N",
            help="ingester processes, each on its own share of the spool (one per ~300 "
            "profiles/s; default 1)",
        )
        parser.add_argument(
            "--ingest-batch-files",
            type=int,
            default=256,  # the ingester's BATCH_FILES
            metavar="N",
            help="spool files per store transaction (the store's lock is held for one; "
            "default 256)",
        )
        _add_limits(parser)
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            metavar="S",
            help="stop after S seconds (default: until SIGTERM)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import logging

        from pyproflab.errors import UsageError
        from pyproflab.serve.guard import Tokens
        from pyproflab.serve.run import ingester_argvs, serve
        from pyproflab.serve.server import Options, listen_check
        from pyproflab.sources.spool import Spool

        logging.basicConfig(level=logging.INFO, format="pyproflab serve: %(message)s")
        host, sep, port = args.listen.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise UsageError(f"--listen {args.listen!r}: expected HOST:PORT (a port up to 65535)")
        if args.ingesters < 1:
            raise UsageError(f"--ingesters {args.ingesters}: expected 1 or more")
        if args.ingest_batch_files < 1:  # its ingesters would take nothing, forever
            raise UsageError(f"--ingest-batch-files {args.ingest_batch_files}: expected 1 or more")
        _check_limits(args)
        if bool(args.tls_cert) != bool(args.tls_key):
            raise UsageError("--tls-cert and --tls-key go together")
        opts = Options(
            host=host.strip("[]") or "127.0.0.1",
            port=int(port),
            max_body=args.max_body_mib << 20,
            max_profile_bytes=args.max_profile_mib << 20,
            max_connections=args.max_connections,
            client_rate=args.client_rate,
            client_burst=args.client_burst,
            idle=args.idle,
            deadline=args.deadline,
            retry_after=args.retry_after,
            drain=args.drain,
            max_tag_value=args.max_tag_value,
            certfile=args.tls_cert,
            keyfile=args.tls_key,
        )
        tokens = Tokens.load(args.token, args.tokens)
        listen_check(opts.host, tokens)  # before the spool: a refused serve makes none
        if not args.no_ingest:
            _check_store(common.db_path(args))
        made = not Path(args.spool).exists()
        try:
            spool = Spool(
                args.spool,
                max_bytes=args.spool_max_mib << 20,
                min_free=args.spool_min_free_mib << 20,
            )
        except OSError as e:  # a file of that name, no permission: was a traceback
            if made:  # nothing of it is left behind
                shutil.rmtree(args.spool, ignore_errors=True)
            why = e.strerror or str(e)
            raise UsageError(f"--spool {args.spool}: cannot make the spool there: {why}") from None
        children = None
        if not args.no_ingest:
            extra = ["--max-bytes", str(opts.max_profile_bytes)]
            extra += ["--batch-files", str(args.ingest_batch_files)]
            children = ingester_argvs(args.spool, common.db_path(args), extra, args.ingesters)
        try:
            serve(opts, spool, tokens, ingesters=children, duration=args.duration)
        except UsageError:  # the address is taken: it never served, so no spool stays
            if made and not _holds_pushes(Path(args.spool)):
                shutil.rmtree(args.spool, ignore_errors=True)
            raise
        return 0


#: each limit's least value: (flag's attribute, least, whether the least is allowed)
_LIMITS = (
    ("max_body_mib", 0, False),
    ("max_profile_mib", 0, False),
    ("max_connections", 0, False),
    ("client_rate", 0, True),  # 0: no limit
    ("client_burst", 0, False),
    ("deadline", 0, False),
    ("idle", 0, False),
    ("spool_max_mib", 0, False),
    ("spool_min_free_mib", 0, True),
    ("retry_after", 0, True),
    ("drain", 0, True),
    ("max_tag_value", 0, False),
    ("duration", 0, False),
)


def _check_limits(args: argparse.Namespace) -> None:
    """A limit of nothing is refused in one line (``--max-connections 0`` served
    no one, ``--deadline 0`` timed every request out), as are infinities and NaN."""
    from pyproflab.errors import UsageError

    for name, least, allowed in _LIMITS:
        v = getattr(args, name)
        if v is None:
            continue
        if not math.isfinite(v) or v < least or (v == least and not allowed):
            flag = argtypes.flag_of(name)
            expected = f"{least} or more" if allowed else f"more than {least}"
            raise UsageError(f"{flag} {v}: expected {expected}")


def _check_store(db: str) -> None:
    """The ingesters' store, looked at before serving: a folder, a missing folder
    or a file that is no DuckDB database stops ``serve`` now (it acknowledged
    pushes while every ingester it restarted failed on it). A missing store is
    made by the first batch. Only the file's header is read: opening the store
    here would load DuckDB into the server (+49 MiB RSS) and wait on a job."""
    from pyproflab.errors import UsageError

    p = Path(db)
    if p.is_dir():
        raise UsageError(f"{db}: is a directory, not a store")
    if not p.exists():
        if not p.parent.is_dir():
            raise UsageError(f"{db}: folder {p.parent} does not exist")
        return
    try:
        with open(p, "rb") as f:
            head = f.read(12)
    except OSError as e:
        raise UsageError(f"{db}: cannot read: {e.strerror or e}") from None
    if head[8:12] != b"DUCK":  # DuckDB's magic, after the header's checksum
        raise UsageError(f"{db}: not a DuckDB store")


def _holds_pushes(spool: Path) -> bool:
    """Whether a spool holds any file but its locks (what a push or a refusal wrote)."""
    return any(p.is_file() and not p.name.endswith(".lock") for p in spool.rglob("*"))


def _add_limits(parser: argparse.ArgumentParser) -> None:
    """The server's limits, each with what passing it answers and its default."""
    g = parser.add_argument_group("limits")
    g.add_argument(
        "--max-body-mib",
        type=int,
        default=32,
        metavar="N",
        help="a larger push is answered 413 before it is read (default 32)",
    )
    g.add_argument(
        "--max-profile-mib",
        type=int,
        default=256,
        metavar="N",
        help="each profile at most N MiB decompressed, else 413 (default 256)",
    )
    g.add_argument(
        "--max-connections",
        type=int,
        default=256,
        metavar="N",
        help="open connections; more are answered 503 (default 256)",
    )
    g.add_argument(
        "--client-rate",
        type=float,
        default=20.0,
        metavar="R",
        help="requests a second per client address, else 503 (0: no limit; default 20)",
    )
    g.add_argument(
        "--client-burst",
        type=float,
        default=60.0,
        metavar="N",
        help="requests a client address may send at once above --client-rate (default 60)",
    )
    g.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds for one whole request (default 30)",
    )
    g.add_argument(
        "--idle",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds a kept-alive connection may wait (default 5)",
    )
    _add_spool_limits(g)


def _add_spool_limits(g: argparse._ArgumentGroup) -> None:
    """The spool's limits, the drain and the tag cap (the limits group's rest)."""
    g.add_argument(
        "--spool-max-mib",
        type=int,
        default=1024,
        metavar="N",
        help="a spool this large answers pushes 503 (default 1024)",
    )
    g.add_argument(
        "--spool-min-free-mib",
        type=int,
        default=64,
        metavar="N",
        help="with less free disk under the spool, pushes are answered 503 (default 64)",
    )
    g.add_argument(
        "--retry-after",
        type=float,
        default=10.0,
        metavar="S",
        help="the Retry-After of a full spool's 503 (default 10)",
    )
    g.add_argument(
        "--drain",
        type=float,
        default=5.0,
        metavar="S",
        help="on SIGTERM, seconds the pushes in flight get to finish (then 503; the "
        "process exits within S+2 s; default 5)",
    )
    g.add_argument(
        "--max-tag-value",
        type=int,
        default=256,
        metavar="BYTES",
        help="each tag value is cut to BYTES (default 256)",
    )
