"""Go execution traces (as `go tool trace`): blocking profiles and tables.

  trace pprof FILE --kind net|sync|syscall|sched -o OUT.pb.gz
      one blocking profile, equal to `go tool trace -pprof=KIND FILE`
  trace goroutines|sched|stw|tasks|leaks [FILE] [--db DB --service ...]
      per-goroutine time in each state; scheduler latency (percentiles per
      window, the longest waits, CPU starvation); stop-the-world pauses and GC
      phases per window (with the store's gctrace); user task and region
      latency per type; goroutine counts over time and leak suspects.
      From one trace FILE, or from the traces a store holds (`pyproflab
      ingest` stores trace files, recognised by their header).

Reading a trace needs Go (the helper pyproflab-go is built on first use).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pyproflab.cli import common
from pyproflab.errors import UsageError

QUESTIONS = ("goroutines", "sched", "stw", "tasks", "leaks")

# The questions' option flags: (flag, add_argument keywords). Each default is the
# options class's (analyses.gotrace, gotrace_stw), which the help repeats (a test
# holds them equal; the analyses are not imported to build the parser).
_WINDOW = (
    "--window",
    {"dest": "window_s", "type": float, "metavar": "SECONDS", "help": "window length (default 1)"},
)
_TOP = "--top", {"dest": "top", "type": int, "metavar": "N"}
FLAGS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "goroutines": (
        (
            "--sort",
            {
                "dest": "sort",
                "metavar": "COLUMN",
                "help": "g, the goroutine id, or running_ns, runnable_ns, syscall_ns or "
                "waiting_ns, largest first (default g)",
            },
        ),
        (_TOP[0], {**_TOP[1], "help": "only the first N goroutines (default all)"}),
    ),
    "sched": (
        _WINDOW,
        (_TOP[0], {**_TOP[1], "help": "the N longest waits listed (default 10)"}),
        (
            "--starved-p99-ms",
            {
                "dest": "starved_p99_ms",
                "type": float,
                "metavar": "MS",
                "help": "a trace whose p99 wait reaches MS is named CPU starvation (default 10)",
            },
        ),
    ),
    "stw": (_WINDOW,),
    "leaks": (
        (
            "--windows",
            {
                "dest": "windows",
                "type": int,
                "metavar": "N",
                "help": "the trace is cut into N equal windows (default 10)",
            },
        ),
        (
            "--min-growth",
            {
                "dest": "min_growth",
                "type": int,
                "metavar": "N",
                "help": "a group never falling grows by N or more to be a suspect (default 10)",
            },
        ),
    ),
}


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the usage lines
        sub = parser.add_subparsers(
            dest="trace_command", metavar="ACTION", parser_class=common.OneLineParser
        )
        sub.required = True
        pp = sub.add_parser("pprof", help="write one blocking profile (go tool trace -pprof)")
        pp.add_argument("file", metavar="FILE")
        pp.add_argument("--kind", required=True, choices=["net", "sync", "syscall", "sched"])
        pp.add_argument("-o", "--output", required=True, metavar="OUT.pb.gz")
        for name in QUESTIONS:
            q = sub.add_parser(name, help=f"the trace's {name} table")
            q.add_argument("file", nargs="?", metavar="FILE", help="a trace file (else --db)")
            common.add_db_option(q)
            common.add_selection_options(q)
            _hide(q, "profile_type")  # traces have no type: --type is refused (run)
            q.add_argument("--format", choices=["text", "json", "csv"], default="text")
            q.add_argument("--table", help="csv: which table (default: the main one)")
            q.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
            # Not given (None): the question's options class's default
            # (analyses.gotrace, gotrace_stw), written there once and shown here.
            for flag, kw in FLAGS.get(name, ()):
                q.add_argument(flag, default=None, **kw)

    def run(self, args: argparse.Namespace) -> int:
        if args.trace_command == "pprof":
            return _pprof(args)
        from pyproflab.analyses.gotrace_answers import answer
        from pyproflab.reports import render

        name = args.trace_command
        if args.table and args.format != "csv":  # it was dropped without a word
            raise UsageError("--table is for --format csv (text and json give every table)")
        if args.profile_type is not None:
            raise UsageError(
                "--type: traces have no profile type (select them by --service, "
                "--version, --instance, --since, --until or --label)"
            )
        options = question_options(args)
        if args.file is not None:
            if common.has_selection(args) or args.db:
                raise UsageError("give a trace FILE or --db with a selection, not both")
            result = answer(name, path=args.file, options=options)
        else:
            with common.open_store(args, read_only=True) as store:
                sel = common.selection_from_args(args)
                result = answer(name, store=store, selection=sel, options=options)
        common.write_output(render(result, args.format, table=args.table), args.output)
        return 0


def _hide(parser: argparse.ArgumentParser, dest: str) -> None:
    """Leave the option of ``dest`` out of the help (it is still parsed)."""
    for action in parser._actions:
        if action.dest == dest:
            action.help = argparse.SUPPRESS


def _pprof(args: argparse.Namespace) -> int:
    from pyproflab.decode.gotrace import read_trace
    from pyproflab.jobs.outputs import write_atomic

    _check_output(args.output)  # before the trace is read: a large one takes minutes
    _, profiles = read_trace(args.file, only=[f"pprof-{args.kind}"], needed_by="trace pprof")
    try:
        write_atomic(args.output, profiles[args.kind])
    except OSError as e:  # a full disk, no permission: one line, as write_output says it
        raise UsageError(f"{args.output}: cannot write: {e.strerror or e}") from None
    return 0


def _check_output(path: str) -> None:
    """Refuse an output in a missing folder or naming a folder, as ``write_profile`` does."""
    target = Path(path)
    if not target.parent.is_dir():
        raise UsageError(f"{path}: folder {target.parent} does not exist")
    if target.is_dir():
        raise UsageError(f"{path}: is a directory")


def question_options(args: argparse.Namespace) -> Any:
    """The options object of the question asked with the flags given, each
    checked as ``gotrace_answers.options_of`` checks a notebook's keywords (a
    mistake is one line naming the flag); the others take the class's defaults
    (None for tasks)."""
    from pyproflab.analyses.gotrace_answers import ANSWERS, options_of

    flags = {kw["dest"]: flag for flag, kw in FLAGS.get(args.trace_command, ())}
    given = {k: getattr(args, k) for k in flags if getattr(args, k) is not None}
    if given:
        return options_of(args.trace_command, spelled=flags.__getitem__, **given)
    cls = ANSWERS[args.trace_command][2]
    return None if cls is type(None) else cls()
