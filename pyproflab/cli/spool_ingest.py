"""Move the spool of `pyproflab serve` into a store, in batches.

Each batch is one transaction; the store's lock is held only while a batch
is written. A spool file leaves the spool only once its profiles are in the
store; one that cannot be read, or a profile that is not valid, is refused
with one line and kept in SPOOL/refused/. Without --follow it ingests what
is waiting and exits (2 when every file it took was refused). With --part
I/N it takes only share I of N of the spool (the files whose name's CRC-32
is I mod N), so N of them run side by side; `serve --ingesters N` starts them.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


def _part(text: str) -> tuple[int, int]:
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and int(i) < int(n)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N with 0 <= I < N")
    return int(i), int(n)


def _count(n: int, noun: str) -> str:
    """``1 spool file``, ``2 spool files``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _check_numbers(args: argparse.Namespace) -> None:
    """--wait, --max-bytes and --duration as their help says (each was taken
    silently: --wait -1 or nan, --max-bytes 0 as no flag, --duration without --follow)."""
    from pyproflab.errors import UsageError

    if not 0 <= args.wait < float("inf"):
        raise UsageError(f"--wait must be a number of seconds >= 0, not {args.wait}")
    if args.max_bytes is not None and args.max_bytes < 1:
        raise UsageError(f"--max-bytes must be a whole number >= 1, not {args.max_bytes}")
    if args.duration is not None and not args.follow:
        raise UsageError("--duration is for --follow (without it, what waits is ingested once)")
    if args.duration is not None and not 0 < args.duration < float("inf"):
        raise UsageError(f"--duration must be a number of seconds > 0, not {args.duration}")


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("spool", metavar="SPOOL")
        common.add_db_option(parser, wait=False)  # its own --wait, per batch
        parser.add_argument("--follow", action="store_true", help="keep ingesting as pushes come")
        parser.add_argument("--batch-files", type=int, default=256, metavar="N")  # BATCH_FILES
        parser.add_argument(
            "--max-bytes",
            type=int,
            default=None,
            metavar="N",
            help="refuse profiles larger than N bytes decompressed",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=5.0,
            metavar="S",
            help="seconds to wait for a busy store before trying later",
        )
        parser.add_argument(
            "--part",
            type=_part,
            default=None,
            metavar="I/N",
            help="only share I of N of the spool (0 <= I < N)",
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            metavar="S",
            help="with --follow: stop after S seconds",
        )
        parser.add_argument(
            "--served",
            action="store_true",
            help="run as serve's ingester: SIGTERM is serve's planned stop (exit 0, no message)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.cli import is_terminated

        try:
            return self._run(args)
        except KeyboardInterrupt as e:
            # serve ends its ingesters with SIGTERM at every stop, wherever they
            # are (still importing, or following); the server reports its own end.
            if not (args.served and is_terminated(e)):
                raise
            return 0

    def _run(self, args: argparse.Namespace) -> int:
        import logging
        import sys
        from pathlib import Path

        from pyproflab.decode import DEFAULT_MAX_BYTES
        from pyproflab.errors import UsageError
        from pyproflab.serve.ingester import follow, run_batch
        from pyproflab.sources.spool import Spool, part_role

        if args.batch_files < 1:  # a batch of 0 files takes nothing: "0 spool files"
            raise UsageError(f"--batch-files must be a whole number >= 1, not {args.batch_files}")
        _check_numbers(args)
        if not Path(args.spool).is_dir():
            # Spool() would make one at a mistyped path and find nothing in it;
            # serve makes its spool before it starts its ingesters.
            raise UsageError(
                f"{args.spool}: no such spool folder (pyproflab serve --spool makes it)"
            )
        logging.basicConfig(level=logging.INFO, format="pyproflab spool-ingest: %(message)s")
        spool = Spool(args.spool)
        spool.lock(part_role(args.part))
        kw = {
            "part": args.part,
            "batch_files": args.batch_files,
            "max_bytes": args.max_bytes or DEFAULT_MAX_BYTES,
            "wait": args.wait,
        }
        db = common.db_path(args)
        if args.follow:
            follow(spool, db, stop_after=args.duration, **kw)
            return 0
        files = new = present = refused = 0
        while True:
            r = run_batch(spool, db, **kw)
            if r.busy or not r.files:
                break
            files, new, present, refused = (
                files + r.files,
                new + r.new,
                present + r.present,
                refused + r.refused,
            )
        taken, stored = _count(files, "spool file"), _count(new, "new profile")
        print(f"{taken}: {stored}, {present} present, {refused} refused")
        if files and refused == files:
            # As ingest: nothing taken was stored, so a scheduler must not read success.
            print(
                f"pyproflab: error: every spool file was refused ({refused}): "
                f"see {spool.refused}/ and the .reason beside each",
                file=sys.stderr,
            )
        return 2 if r.busy or (files and refused == files) else 0
