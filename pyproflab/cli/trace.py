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
            if name in ("sched", "stw"):
                q.add_argument("--window", type=float, default=1.0, metavar="SECONDS")
            if name == "sched":
                q.add_argument("--top", type=int, default=10, help="longest waits listed")
                q.add_argument("--starved-p99-ms", type=float, default=10.0)
            if name == "goroutines":
                q.add_argument("--sort", default="g", help="g, running_ns, runnable_ns, ...")
                q.add_argument("--top", type=int, default=None)
            if name == "leaks":
                q.add_argument("--windows", type=int, default=10)
                q.add_argument("--min-growth", type=int, default=10)

    def run(self, args: argparse.Namespace) -> int:
        if args.trace_command == "pprof":
            return _pprof(args)
        from pyproflab.analyses import gotrace, gotrace_stw
        from pyproflab.analyses.gotrace_answers import answer
        from pyproflab.errors import UsageError
        from pyproflab.reports.gotrace import render

        name = args.trace_command
        options = {
            "goroutines": lambda: gotrace.GoroutineOptions(sort=args.sort, top=args.top),
            "sched": lambda: gotrace.SchedOptions(
                window_s=args.window, top=args.top, starved_p99_ms=args.starved_p99_ms
            ),
            "stw": lambda: gotrace_stw.StwOptions(window_s=args.window),
            "tasks": lambda: None,
            "leaks": lambda: gotrace.LeakOptions(windows=args.windows, min_growth=args.min_growth),
        }[name]()
        if getattr(args, "window", 1.0) <= 0:
            raise UsageError("--window must be > 0 seconds")
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
