"""Read profiles into a store.

PATH may be a file, a folder (walked), a glob, or a Parquet dataset written
by `pyproflab export`. Each profile is stored once: a file whose decoded
content is already in the store is counted as present. A file that is not a
valid profile is refused with its reason; the others are still stored, and
the store never holds part of a profile.

Exit codes: 0 when every profile named is now in the store (new or already
present; refused files are listed, and fail the run only with ``--strict``);
2 when no file was a profile to store (every one refused, or none found), and
then a store this command would have created is not left behind; 2 as well,
before anything is stored, when a PATH named outright (not a glob) does not
exist: a mistyped name is a mistake, not a refused file; and so when every
PATH names the store itself (or its .wal, .lock): ingest does not read its
own store (beside other inputs, those are refused). A Parquet
dataset read whole is not "nothing": its GC metric rows and traces are kept
even when it holds no profile, and a dataset already in the store exits 0.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import argtypes, common
from pyproflab.cli.newstore import removed_if_empty

# Refusals that mean a path named no file at all (not a file that is not a profile).
_NO_FILE = ("no files match", "no such file or folder")


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH")
        common.add_db_option(parser)
        parser.add_argument("--service")
        parser.add_argument("--version", dest="meta_version", metavar="VERSION")
        parser.add_argument("--instance")
        parser.add_argument(
            "--label",
            action="append",
            default=[],
            metavar="K=V",
            help="metadata label for every profile (repeatable)",
        )
        parser.add_argument(
            "--path-template",
            metavar="TEMPLATE",
            help="fill metadata from paths, e.g. "
            "'{service}/{version}/{instance}/{type}-{time}.pb.gz'",
        )
        parser.add_argument(
            "--max-bytes",
            type=int,
            default=None,
            metavar="N",
            help="refuse profiles larger than N bytes decompressed (default 1 GiB)",
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            metavar="N",
            help="processes decoding files (default: one per core; 1: in this process)",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            metavar="N",
            help="at most N profiles stored per transaction (default 64)",
        )
        parser.add_argument(
            "--batch-mib",
            type=int,
            default=None,
            metavar="N",
            help="a transaction closes once its profiles' rows reach N MiB; "
            "memory follows it (default 32)",
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="exit 2 if any file is refused (default: exit 0 and list them)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import sys

        from pyproflab import forkserver
        from pyproflab.errors import UsageError
        from pyproflab.keying.paths import held_nothing

        if args.max_bytes is not None and args.max_bytes < 1:
            raise UsageError(f"--max-bytes must be a whole number >= 1, not {args.max_bytes}")
        for flag in ("batch_size", "batch_mib", "workers"):
            value = getattr(args, flag)
            if value is not None and value < 1:  # 0 was taken as the default, silently
                name = argtypes.flag_of(flag)
                raise UsageError(f"{name} must be a whole number >= 1, not {value}")
        _refuse_missing(args.paths)
        db = common.db_path(args)
        _refuse_own_store(args.paths, db)
        if args.workers != 1 and _may_pool(args.paths):
            # The workers' server imports on another core while this process does.
            forkserver.start(forkserver.INGEST_PRELOAD)
        report = _ingest(args, db)
        # A dataset's GC metric rows and traces are data too, without any profile.
        added = report.new or report.metric_rows or report.traces
        stored_none = not (added or report.present)
        if (
            stored_none
            and all(reason in _NO_FILE for _, reason in report.refused)
            and not _named_datasets(args.paths)  # read whole: all of it is in the store
        ):
            # A scheduled job must see that it ingested nothing: exit 2, not "0 new".
            raise UsageError(
                f"{' '.join(args.paths)}: no profile files found "
                f"({'; '.join(r for _, r in report.refused) or held_nothing(args.paths)})"
            )
        for path, reason in report.refused:
            print(f"refused {path}: {reason}", file=sys.stderr)
        print(report.summary())
        if stored_none and report.refused:
            return 2  # every input refused: nothing of them is in the store
        return 2 if (args.strict and report.refused) else 0


def _refuse_missing(paths: list[str]) -> None:
    """A path named outright (not a glob) that does not exist is a mistyped name:
    one line and exit 2 before anything is stored, as for a single path (beside
    others it was one 'refused' line under an exit 0 that looked like success)."""
    import os

    from pyproflab.errors import UsageError
    from pyproflab.keying.paths import is_glob

    for p in paths:
        if not is_glob(p) and not os.path.exists(p):
            raise UsageError(f"{p}: no such file or folder; nothing stored")


def _refuse_own_store(paths: list[str], db: str) -> None:
    """Paths that all name the store being written (or the files it keeps) are
    one line and exit 2, before the store is opened: ingest does not read its
    own store (read, it was 'not a pprof profile', exit 2, and the file was
    rewritten). Beside other inputs they are refused (``OWN_FILE``)."""
    import os

    from pyproflab.errors import UsageError
    from pyproflab.store.lock import store_files

    own = {os.path.realpath(f) for f in store_files(db)}
    named = {os.path.realpath(p) for p in paths}
    if named <= own:
        what = "the store itself" if named == {os.path.realpath(db)} else "the store's own files"
        raise UsageError(
            f"{' '.join(paths)}: {what} (--db {db}); ingest does not read its own store; "
            "nothing stored"
        )


def _ingest(args: argparse.Namespace, db: str):
    """Lab.ingest of the arguments into ``db``; a store this made and stored
    nothing in (nothing to store, a refused dataset, a usage error) is removed."""
    import warnings

    from pyproflab.lab import Lab
    from pyproflab.store.ingest_report import InputsRefused

    labels = common.parse_kv(args.label)
    with (
        removed_if_empty(db),
        Lab(common.open_store(args, path=db)) as lab,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", InputsRefused)  # run() prints each refusal
        warnings.showwarning = _one_line  # a DatedAhead: one line, not Python's two
        return lab.ingest(
            args.paths,
            service=args.service,
            version=args.meta_version,
            instance=args.instance,
            labels=labels or None,
            path_template=args.path_template,
            max_bytes=args.max_bytes,
            progress=common.Progress("ingesting", unit="file"),
            workers=args.workers,
            batch_size=args.batch_size,
            batch_bytes=args.batch_mib * 2**20 if args.batch_mib else None,
        )


def _one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the CLI's other warnings are: ``pyproflab: warning: ...``."""
    import sys

    print(f"pyproflab: warning: {message}", file=sys.stderr)


def _may_pool(paths: list[str]) -> bool:
    """Whether the paths may name enough files for ingest's worker pool: a folder
    or a glob may; fewer than ``forkserver.POOL_MIN_FILES`` plain files never do
    (a trace's ingest, then, starts no server: 136 MiB of processes for nothing)."""
    import os

    from pyproflab import forkserver

    return not all(os.path.isfile(p) for p in paths) or len(paths) >= forkserver.POOL_MIN_FILES


def _named_datasets(paths: list[str]) -> bool:
    """Whether ``paths`` name a Parquet dataset (its rows may all be present already)."""
    from pyproflab.keying.paths import expand_paths

    return bool(expand_paths(paths)[1])
