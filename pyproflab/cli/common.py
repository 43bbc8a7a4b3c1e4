"""Plumbing shared by the subcommands: the parser, store and selection options,
the pprof-like reports' options (files or a selection, filters, a base) and the
profile they describe, and the Spark engine's options."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pyproflab.errors import StoreError, UsageError

if TYPE_CHECKING:  # imported where used: the CLI starts without the analyses
    from pyproflab.analyses.options import Options
DEFAULT_DB = "pyproflab.duckdb"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def add_db_option(parser: argparse.ArgumentParser, *, wait: bool = True) -> None:
    """``--db PATH``, and ``--wait SECONDS`` for a command that opens the store
    itself (``open_store``)."""
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=None,
        help=f"the store (a DuckDB file; default ./{DEFAULT_DB}, or $PYPROFLAB_DB)",
    )
    if wait:
        parser.add_argument(
            "--wait",
            type=float,
            default=0.0,
            metavar="SECONDS",
            help="wait up to SECONDS for a store another process holds (default: fail at once)",
        )


def db_path(args: argparse.Namespace) -> str:
    return args.db or os.environ.get("PYPROFLAB_DB") or DEFAULT_DB


def wait_seconds(args: argparse.Namespace) -> float:
    """``--wait``: seconds, finite and >= 0 (0 without the option)."""
    wait = getattr(args, "wait", None) or 0.0
    if not 0.0 <= wait < float("inf"):
        raise UsageError(f"--wait must be a number of seconds >= 0, not {wait}")
    return wait


def open_store(args: argparse.Namespace, *, read_only: bool = False, path: str | None = None):
    """The store of ``--db`` (or ``path``), waiting up to ``--wait`` seconds for
    one another process holds; a busy store is one line that suggests ``--wait``.
    A store opened to write is read whole first, once per process
    (``store.verify``): a damaged block stops the command before it commits."""
    from pyproflab.store import Store
    from pyproflab.store.lock import StoreBusyError
    from pyproflab.store.verify import verify

    name = path or db_path(args)
    try:
        store = Store.open(name, read_only=read_only, wait=wait_seconds(args))
    except StoreBusyError as e:
        raise e.with_hint() from None
    except StoreError as e:  # a newcomer's first command, in a folder without a store
        if name != DEFAULT_DB or Path(name).exists():
            raise
        hint = "the default: --db names another; `pyproflab ingest FILES` or `make demo` makes one"
        raise StoreError(f"{e} in {os.getcwd()} ({hint})") from None
    if not read_only and name not in _VERIFIED:
        try:
            verify(store)
        except BaseException:
            store.close()
            raise
        _VERIFIED.add(name)
    return store


# The stores this process has verified (a command that opens its store per batch
# reads it whole once).
_VERIFIED: set[str] = set()


def add_type_option(parser, help: str) -> None:
    """``--type TYPE`` (dest ``profile_type``) on a parser or argument group."""
    parser.add_argument("--type", dest="profile_type", metavar="TYPE", help=help)


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("selection (store only)")
    g.add_argument("--service", help="only profiles of this service")
    g.add_argument("--version", dest="sel_version", metavar="VERSION", help="only this version")
    g.add_argument("--instance", help="only this instance")
    add_type_option(
        g, "profile type: cpu heap allocs goroutine mutex block threadcreate wall other"
    )
    g.add_argument(
        "--since", metavar="T", help="profiles taken at or after T (ISO, UTC if no offset; 72h ago)"
    )
    g.add_argument("--until", metavar="T", help="profiles taken before T (as --since)")
    g.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="only profiles with this metadata label (repeatable)",
    )


# (limit name, flag, help): decode/limits.py's FLAGS, spelled out here so that
# building the parser imports no numpy or pyarrow.
LIMIT_FLAGS = (
    ("samples", "--max-samples", "samples in one profile"),
    ("stack_depth", "--max-stack-depth", "locations in one sample's stack"),
    ("labels", "--max-labels", "labels on one sample"),
    ("label_value", "--max-label-value", "bytes of one string label value"),
    ("symbol", "--max-symbol", "bytes of one function, file or mapping name"),
)


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """The decode limits as flags; a profile over one is refused whole."""
    g = parser.add_argument_group(
        "decode limits (a profile over one is refused; 0 turns one off; "
        "defaults from $PYPROFLAB_LIMITS)"
    )
    for name, flag, what in LIMIT_FLAGS:
        g.add_argument(flag, dest=f"limit_{name}", type=int, metavar="N", help=f"most {what}")


@contextmanager
def limit_options(args: argparse.Namespace) -> Iterator[None]:
    """While a command runs, the limit flags given in ``args`` are the limits of
    this process and of the processes it starts (ingest's workers): they are
    merged over ``$PYPROFLAB_LIMITS`` and written to it, and the variable is put
    back afterwards. UsageError on a negative one."""
    given = {}
    for name, flag, _ in LIMIT_FLAGS:
        value = getattr(args, f"limit_{name}", None)
        if value is None:
            continue
        if value < 0:
            raise UsageError(f"{flag} must be a whole number >= 0, not {value}")
        given[name] = value
    if not given:
        yield
        return
    from dataclasses import replace

    from pyproflab.decode.limits import ENV, Limits

    before = os.environ.get(ENV)
    os.environ[ENV] = replace(Limits.from_env(), **given).to_text()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


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


def warn_unmatched(profile, options: dict[str, str | None]) -> None:
    """pprof's warning on stderr for each filter that matched nothing in ``profile``
    (``options``: focus, ignore and pprof's filters by name), e.g. "TagShow
    expression matched no samples"; the report is printed all the same."""
    if not any(options.values()):
        return
    from pyproflab.analyses.pprof_filters import unmatched

    for name in unmatched(profile, **options):
        print(f"{name} expression matched no samples", file=sys.stderr)


def write_output(text: str, path: str | None) -> None:
    """Write report text to ``path`` (atomically) or stdout."""
    if path in (None, "-"):
        sys.stdout.write(text)
        if text and not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        return
    from pyproflab.newfiles import create_temp_file

    target = os.path.abspath(path)
    tmp = None
    try:
        fd, tmp = create_temp_file(os.path.dirname(target), f".{os.path.basename(target)}.", ".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException as e:
        # Never a temporary file left behind: a full disk, an interrupt.
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(e, OSError):
            raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None
        raise


class Progress:
    """Progress on stderr: on a terminal a tqdm bar (count, rate, ETA); otherwise,
    as in a scheduled job's log, one line every ``interval`` seconds and one at the
    end, so a long run shows it is alive without flooding the log. tqdm rather than
    rich: rate and ETA are built in and it brings no other packages."""

    def __init__(
        self, label: str, enabled: bool | None = None, interval: float = 10.0, unit: str = "step"
    ):
        self.label = label
        self.unit = unit
        self.tty = sys.stderr.isatty() if enabled is None else enabled
        self.interval = interval
        self._bar: Any = None
        self._start = time.monotonic()
        self._next = self._start + interval

    def __call__(self, done: int, total: int) -> None:
        if total <= 0:
            return
        if self.tty:
            self._draw(done, total)
            return
        now = time.monotonic()
        if now < self._next and done < total:
            return
        if done >= total and now - self._start < self.interval:
            return  # a short run needs no log line
        self._next = now + self.interval
        elapsed = max(now - self._start, 1e-9)
        rate = done / elapsed
        eta = f", about {(total - done) / rate:.0f} s left" if rate and done < total else ""
        print(
            f"{self.label}: {done}/{total} {self.unit}s, {rate:.1f} {self.unit}s/s{eta}",
            file=sys.stderr,
            flush=True,
        )

    def _draw(self, done: int, total: int) -> None:
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, desc=self.label, unit=self.unit, file=sys.stderr, leave=False
            )
        self._bar.update(done - self._bar.n)
        if done >= total:
            self._bar.close()


def add_engine_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    spark_does: str = "merge the selection",
) -> None:
    """--engine, --dataset and --spark-conf; ``spark_does`` says what Spark does."""
    parser.add_argument(
        "--engine",
        choices=["duckdb", "spark"],
        default="duckdb",
        help=f"spark: {spark_does} of a Parquet dataset (--dataset) on Spark",
    )
    parser.add_argument(
        "--dataset", metavar="PATH", help="with --engine spark: the dataset export/Spark wrote"
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --engine spark: a Spark setting of the session it starts (repeatable)",
    )


def spark_dataset(args: argparse.Namespace):
    """The ``SparkDataset`` of ``--dataset`` (engines.spark_query) in a session
    with ``--spark-conf``; a folder that is not a dataset, or files or --db
    given too, are refused before a JVM starts."""
    if getattr(args, "files", None) or args.db:
        raise UsageError("--engine spark reads --dataset PATH, not files or --db")
    if not args.dataset:
        raise UsageError("--engine spark needs --dataset PATH")
    conf = dict(kv.partition("=")[::2] for kv in args.spark_conf)
    from pyproflab.engines.spark_query import SparkDataset, check_dataset
    from pyproflab.engines.spark_session import local_session

    check_dataset(Path(args.dataset))  # before a JVM starts
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        raise UsageError(
            f"--engine spark needs pyspark (pip install 'pyproflab[spark]'): {e}"
        ) from None
    return SparkDataset(local_session(conf=conf, quiet=True), args.dataset)


def add_report_options(parser: argparse.ArgumentParser, *, graph: bool = True) -> None:
    """What every pprof-like report takes: files or a store selection, the sample
    type, sort and granularity (``graph``), pprof's filters, a base, -unit and -o."""
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="pprof files or http(s) URLs such as http://host:6060/debug/pprof/profile",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        metavar="N",
        help="for URLs: ask for an N-second profile (the seconds parameter, as pprof)",
    )
    from pyproflab.analyses.options import TopOptions

    add_db_option(parser)
    add_selection_options(parser)
    add_option_flags(parser, TopOptions, ["sample_index"])
    if graph:
        add_option_flags(
            parser, TopOptions, ["cum_sort", "granularity"], flags={"cum_sort": "--cum"}
        )
    add_option_flags(parser, TopOptions, ["focus", "ignore"])
    add_pprof_filters(parser)
    add_base_options(parser)
    parser.add_argument(
        "--unit", metavar="UNIT", help="text: print values in UNIT (ms, s, MB, ...), as -unit"
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")


def add_base_options(parser: argparse.ArgumentParser) -> None:
    """pprof's --diff_base and --base (files or URLs, repeatable)."""
    for name, text in (
        ("diff_base", "subtract these profiles; percentages are shares of the base"),
        ("base", "subtract these profiles (as pprof -base)"),
    ):
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        parser.add_argument(*flags, dest=name, action="append", metavar="FILE", help=text)


def add_pprof_filters(parser: argparse.ArgumentParser) -> None:
    """pprof's sample and frame filters, by pprof's names (``options.FILTERS``,
    their help in ``options.TopOptions``; see analyses.pprof_filters)."""
    from pyproflab.analyses.options import FILTERS, TopOptions

    for name in FILTERS:
        meta = TopOptions.meta(name)
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        parser.add_argument(*flags, dest=name, metavar=meta["metavar"], help=meta["help"])


def pprof_filters(args: argparse.Namespace) -> dict[str, str | None]:
    from pyproflab.analyses.options import FILTERS

    return {name: getattr(args, name, None) for name in FILTERS}


def graph_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``add_report_options`` given that ``top``/``tree``/``peek``
    take (the others are the analysis's defaults)."""
    from pyproflab.analyses.options import FILTERS

    names = ("sample_index", "granularity", "cum_sort", "focus", "ignore", *FILTERS)
    return given_options(args, names)


def parse_sample_index(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def report_profile(args: argparse.Namespace, store=None):
    """``load_profile``, refusing files given together with a store selection."""
    if args.files and (args.db or has_selection(args)):
        raise UsageError("give profile files or --db with a selection, not both")
    profile = load_profile(args, store)
    warn_unmatched(profile, {"focus": args.focus, "ignore": args.ignore, **pprof_filters(args)})
    return profile


def load_profile(args: argparse.Namespace, store=None):
    """The profile that --db/selection or the files describe (merged if several);
    ``store``: the store already open (a command that asks it more)."""
    if args.files:
        from pyproflab.analyses.diff import with_base
        from pyproflab.files import read_and_merge

        profile = read_and_merge(args.files, seconds=getattr(args, "seconds", None))
        bases = {n: getattr(args, n, None) for n in ("diff_base", "base")}
        if all(bases.values()):
            raise UsageError("give --diff_base or --base, not both")
        return with_base(profile, **{n: read_and_merge(b) for n, b in bases.items() if b})
    if store is None:
        with open_store(args, read_only=True) as opened:
            return load_profile(args, opened)
    sel = selection_from_args(args)
    sample = parse_sample_index(getattr(args, "sample_index", None))
    return store.merged_profile(one_kind(store, sel, sample))


# --- an analysis's options as flags ---------------------------------------------------


def add_option_flags(
    parser, options: type[Options], names: Iterable[str], *, flags: dict[str, str] | None = None
) -> None:
    """A flag for each field ``names`` of the options class ``options``: ``--NAME``
    with dashes (or ``flags[name]``), type, choices and help from the field; its
    default None, "not given": the analysis takes the class's (shown in the help)."""
    defaults = options.defaults()
    for name in names:
        meta, (accepted, _) = options.meta(name), options.kind(name)
        flag = (flags or {}).get(name) or "--" + name.replace("_", "-")
        text = meta["help"]
        if defaults[name] is not None and not isinstance(defaults[name], bool):
            text = f"{text} (default {defaults[name]})" if text else f"default {defaults[name]}"
        kw: dict[str, Any] = {"dest": name, "default": None, "help": text or None}
        if accepted == {bool}:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = int if accepted == {int} else float if float in accepted else str
            if meta["choices"] is not None:
                kw["choices"] = list(meta["choices"])
            elif meta["metavar"]:
                kw["metavar"] = meta["metavar"]
        parser.add_argument(flag, **kw)


def given_options(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The options among ``names`` given on the command line (not None), a
    sample index given as digits a number."""
    out = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    if isinstance(out.get("sample_index"), str) and out["sample_index"].isdigit():
        out["sample_index"] = int(out["sample_index"])
    return out
