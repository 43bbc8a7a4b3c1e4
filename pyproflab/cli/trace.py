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
from typing import Any

from pyproflab.cli import common

QUESTIONS = ("goroutines", "sched", "stw", "tasks", "leaks")


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
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
            q.add_argument("--format", choices=["text", "json", "csv"], default="text")
            q.add_argument("--table", help="csv: which table (default: the main one)")
            q.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
            # Not given (None): the question's options class's default
            # (analyses.gotrace, gotrace_stw), written there once.
            if name in ("sched", "stw"):
                q.add_argument("--window", dest="window_s", type=float, metavar="SECONDS")
            if name == "sched":
                q.add_argument("--top", type=int, help="longest waits listed")
                q.add_argument("--starved-p99-ms", type=float)
            if name == "goroutines":
                q.add_argument("--sort", help="g, running_ns, runnable_ns, ...")
                q.add_argument("--top", type=int)
            if name == "leaks":
                q.add_argument("--windows", type=int)
                q.add_argument("--min-growth", type=int)

    def run(self, args: argparse.Namespace) -> int:
        if args.trace_command == "pprof":
            return _pprof(args)
        from pyproflab.analyses.gotrace_answers import answer
        from pyproflab.errors import UsageError
        from pyproflab.reports import render

        name = args.trace_command
        options = question_options(args)
        if getattr(options, "window_s", 1.0) <= 0:
            raise UsageError("--window must be > 0 seconds")
        for flag, low in (("--windows", 1), ("--min-growth", 0), ("--top", 0)):
            value = getattr(options, flag[2:].replace("-", "_"), None)
            if value is not None and value < low:
                raise UsageError(f"{flag} must be >= {low}, not {value}")
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


def _pprof(args: argparse.Namespace) -> int:
    from pyproflab.decode.gotrace import read_trace
    from pyproflab.jobs.outputs import write_atomic

    _, profiles = read_trace(args.file, only=[f"pprof-{args.kind}"], needed_by="trace pprof")
    write_atomic(args.output, profiles[args.kind])
    return 0


def question_options(args: argparse.Namespace) -> Any:
    """The options object of the question asked (``gotrace_answers.ANSWERS``) with the
    flags given; the others take the class's defaults (None for tasks)."""
    from dataclasses import fields

    from pyproflab.analyses.gotrace_answers import ANSWERS

    cls = ANSWERS[args.trace_command][2]
    if cls is type(None):
        return None
    given = {f.name: getattr(args, f.name, None) for f in fields(cls)}
    return cls(**{k: v for k, v in given.items() if v is not None})
