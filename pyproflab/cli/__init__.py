"""The ``pyproflab`` command line: a table of subcommands, one module each.

``main(argv) -> int`` never lets a user's mistake become a traceback: a
``ProflabError`` (bad file, bad flag, missing or busy store) is printed as one
line on stderr and returns its exit code (2); so is stdout that cannot be
written (a full disk under ``> out.txt``). Anything else is a bug: its
traceback is printed, and the exit code is 2 too, never Python's 1, which
means "findings" to a scheduler (``job``, ``regressions --fail-on-change``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from pyproflab.cli import common
from pyproflab.cli.common import OneLineParser
from pyproflab.cli.overwrite import refuse_output_over_input
from pyproflab.errors import ProflabError

# name -> (module, one-line help). Command modules import only argparse at
# the top and load heavy libraries inside run(), so building every parser is
# cheap and `pyproflab top FILE` never pays for DuckDB or pandas.
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": (
        "pyproflab.cli.ingest",
        "read profiles (files, folders, globs, Parquet) into a store",
    ),
    "top": ("pyproflab.cli.top", "top functions by flat or cum, as go tool pprof -top"),
    "traces": ("pyproflab.cli.traces", "every sample's stack and labels, as go tool pprof -traces"),
    "tree": ("pyproflab.cli.tree", "every node's callers and callees, as go tool pprof -tree"),
    "peek": ("pyproflab.cli.peek", "callers and callees of matching nodes, as pprof -peek"),
    "list": ("pyproflab.cli.source_list", "annotated source lines, as go tool pprof -list"),
    "merge": ("pyproflab.cli.merge", "merge profiles into one pprof file"),
    "export": ("pyproflab.cli.export", "write the store as a Parquet dataset"),
    "profiles": ("pyproflab.cli.profiles", "list the profiles in a store"),
    "ingest-gc": ("pyproflab.cli.gcdata", "read GC metrics (Prometheus text or API, gctrace logs)"),
    "gc": ("pyproflab.cli.gc", "GC cost per profile and instance: profile view vs runtime view"),
    "collect": ("pyproflab.cli.collect", "fetch profiles and /metrics from live Go services"),
    "pull": ("pyproflab.cli.pull", "pull profiles from Datadog, Pyroscope or Parca into a store"),
    "regressions": ("pyproflab.cli.regressions", "what got slower between two selections"),
    "pgo": ("pyproflab.cli.pgo", "write a checked default.pgo for go build -pgo; pgo diff OLD NEW"),
    "gogc": ("pyproflab.cli.gogc", "GOGC / GOMEMLIMIT trade-off: predicted GC CPU and heap"),
    "job": ("pyproflab.cli.job", "run a scheduled job: ingest, analyse, write outputs, once"),
    "report": ("pyproflab.cli.report", "one offline HTML report: top, flame graphs, GC, PGO"),
    "serve": ("pyproflab.cli.serve", "receive profiles pushed by dd-trace-go and pyroscope-go"),
    "spool-ingest": ("pyproflab.cli.spool_ingest", "move the spool of serve into a store"),
    "trace": ("pyproflab.cli.trace", "Go execution traces: blocking profiles, scheduler latency"),
}
# The commands that decode profiles take the decode limits as flags.
# (`job run` adds them to its own subcommand.)
DECODING = ("ingest", "top", "traces", "tree", "peek", "list", "merge", "collect", "pgo")


def build_parser() -> argparse.ArgumentParser:
    from pyproflab.version import __version__

    parser = OneLineParser(
        prog="pyproflab",
        description="Analyse pprof profiles from fleets of Go services.",
    )
    parser.add_argument("--version", action="version", version=f"pyproflab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        cls = importlib.import_module(module).Command
        p = sub.add_parser(name, help=help_text, description=(cls.__doc__ or "").strip())
        cls().prepare_parser(p)
        if name in DECODING:
            common.add_limit_options(p)
        p.set_defaults(_command=cls)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so it unwinds as Ctrl-C does.
    ``seen``: whether one came during this command. DuckDB, running a query
    when the handler raises, ends the query with its own interrupt, and the
    Terminated is lost: ``is_terminated`` asks both."""

    seen = False


def is_terminated(e: KeyboardInterrupt) -> bool:
    """Whether an interrupt unwinding the command is a SIGTERM's (see Terminated)."""
    return isinstance(e, Terminated) or Terminated.seen


def _terminated(signum: int, frame: object) -> None:
    Terminated.seen = True
    raise Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM (a scheduler's stop, ``timeout``) unwinds the command as Ctrl-C
    does: by default it killed the process where it stood, leaving the worker
    pool's processes blocked on its queues for ever (a timeout 60 ingest left
    them, holding its stdout open). Only in the main thread, over the default."""
    import signal
    import threading

    ours = threading.current_thread() is threading.main_thread()
    ours = ours and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if ours:
        Terminated.seen = False
        signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _Stdout:
    """sys.stdout for a command's run: its write or flush failing (a full disk
    under ``> out.txt``, a quota) is a UsageError naming stdout, one line and
    exit 2, not a traceback called a bug. A closed pipe stays BrokenPipeError
    (``| head``: nothing to report). Everything else is the stream's own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write(self, text: str) -> int:
        return self._guard(self._inner.write, text)

    def flush(self) -> None:
        self._guard(self._inner.flush)

    @staticmethod
    def _guard(call: Any, *args: Any) -> Any:
        from pyproflab.errors import UsageError

        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise UsageError(f"stdout: cannot write: {e.strerror or e}") from None


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[None]:
    inner = sys.stdout
    sys.stdout = _Stdout(inner)
    try:
        yield
        sys.stdout.flush()  # here, not at the interpreter's exit (exit 120)
    finally:
        sys.stdout = inner


def _what_was_done(e: KeyboardInterrupt) -> str:
    """An interrupt's message (ingest: how many profiles it stored), if any."""
    return f": {e}" if str(e) else ""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        refuse_output_over_input(args)
        with _sigterm_unwinds(), common.limit_options(args), _guarded_stdout():
            return int(args._command().run(args) or 0)
    except ProflabError as e:
        print(f"pyproflab: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        if is_terminated(e):
            print(f"pyproflab: terminated{_what_was_done(e)}", file=sys.stderr)
            return 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
        print(f"pyproflab: interrupted{_what_was_done(e)}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `pyproflab top … | head`: the reader left; nothing to report.
        return 0
    except Exception:
        import traceback

        traceback.print_exc()
        print(
            "pyproflab: error: an internal error (a bug: see the traceback above)", file=sys.stderr
        )
        return 2


class _AtExit:
    """Ctrl-C while the interpreter shuts down, after the command returned. It
    killed the process silently (exit -2, 254 through a wrapper: the
    interpreter puts SIGINT's default action back once its last Python code
    ran) or printed an "Exception ignored in atexit callback" traceback and
    exited 0. Armed by ``run``: an interrupt is said in one line, cleanups
    (atexit callbacks: the store lock, worker pools) still run whole, and the
    exit is 130 (a second interrupt: at once); past the last callback, where
    nothing of pyproflab's is left to run, SIGINT is ignored."""

    armed = False
    noted = False

    @classmethod
    def arm(cls, code: int) -> None:
        import signal

        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return  # started with SIGINT ignored (a background job), or a caller's own
        cls.armed, cls.noted = True, code == 130  # said already: a next one exits
        signal.signal(signal.SIGINT, cls._interrupted)

    @classmethod
    def _interrupted(cls, signum: int, frame: object) -> None:
        import os

        if cls.noted:
            os._exit(130)
        cls.noted = True
        os.write(2, b"pyproflab: interrupted while exiting (the command had finished)\n")

    @classmethod
    def last(cls) -> None:
        """The last atexit callback (registered first, at import)."""
        import os
        import signal

        if not cls.armed:
            return
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # kept through the teardown
        if cls.noted:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(130)


atexit.register(_AtExit.last)


def run() -> None:
    try:
        code = main()
        _AtExit.arm(code)
    except KeyboardInterrupt:  # between main's return and arm
        print("pyproflab: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)
