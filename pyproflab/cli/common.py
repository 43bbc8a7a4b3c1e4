"""Plumbing shared by the subcommands: the parser, store and selection options."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from pyproflab.errors import UsageError

DEFAULT_DB = "pyproflab.duckdb"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=None,
        help=f"the store (a DuckDB file; default ./{DEFAULT_DB}, or $PYPROFLAB_DB)",
    )


def db_path(args: argparse.Namespace) -> str:
    return args.db or os.environ.get("PYPROFLAB_DB") or DEFAULT_DB


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("selection (store only)")
    g.add_argument("--service", help="only profiles of this service")
    g.add_argument("--version", dest="sel_version", metavar="VERSION", help="only this version")
    g.add_argument("--instance", help="only this instance")
    g.add_argument(
        "--type",
        dest="profile_type",
        metavar="TYPE",
        help="profile type: cpu heap allocs goroutine mutex block threadcreate wall other",
    )
    g.add_argument(
        "--since", metavar="T", help="profiles taken at or after T (ISO time, or 72h, 30m, 7d ago)"
    )
    g.add_argument("--until", metavar="T", help="profiles taken before T")
    g.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="only profiles with this metadata label (repeatable)",
    )


def parse_kv(items: list[str], what: str = "--label") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def selection_from_args(args: argparse.Namespace):
    """The store Selection that the selection options describe."""
    from pyproflab.store.select import Selection

    return Selection(
        service=args.service,
        version=args.sel_version,
        instance=args.instance,
        profile_type=args.profile_type,
        since=args.since,
        until=args.until,
        labels=parse_kv(args.label) or None,
    )


def one_kind(store, selection, sample=None):
    """The selection narrowed to one kind of profile (``store.kinds``); the note
    saying so goes to stderr."""
    from pyproflab.store.kinds import one_kind as narrow

    narrowed, note = narrow(store, selection, sample=sample)
    if note:
        print(f"pyproflab: note: {note}", file=sys.stderr)
    return narrowed


def has_selection(args: argparse.Namespace) -> bool:
    return any(
        getattr(args, name, None)
        for name in (
            "service",
            "sel_version",
            "instance",
            "profile_type",
            "since",
            "until",
            "label",
        )
    )


def write_output(text: str, path: str | None) -> None:
    """Write report text to ``path`` (atomically) or stdout."""
    if path in (None, "-"):
        sys.stdout.write(text)
        if text and not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, enabled: bool | None = None):
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        pct = int(100 * done / total)
        if pct == self._last and done != total:
            return
        self._last = pct
        width = 30
        filled = width * done // total
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\r" + " " * (len(self.label) + width + 24) + "\r")
        sys.stderr.flush()
