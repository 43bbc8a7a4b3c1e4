"""Run a declarative job: collect or pick up profiles, ingest, analyse, write outputs.

`pyproflab job run JOB.toml` runs the job once (see docs/jobs.md): sources,
incremental ingest, retention, regressions of the newest version against
the previous one, the GOGC recommendation and default.pgo, written under
timestamped names with stable `latest` names. Running it again on the same
input changes nothing. Exit codes: 0 done, 1 findings over the job's
thresholds, 2 error (including a busy store, or a crash: never 1).
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(
            dest="job_command", metavar="ACTION", parser_class=common.OneLineParser
        )
        sub.required = True
        run = sub.add_parser("run", help="run a job once")
        run.add_argument("job", metavar="JOB.toml")
        run.add_argument(
            "--wait",
            type=float,
            default=None,
            metavar="SECONDS",
            help="wait up to SECONDS for a busy store (default: the job's "
            "[job] wait, else fail at once)",
        )
        run.add_argument(
            "--summary", metavar="FILE", help="also write the JSON summary here (atomically)"
        )
        common.add_limit_options(run)

    def run(self, args: argparse.Namespace) -> int:
        import sys
        import traceback

        from pyproflab.errors import ProflabError, UsageError
        from pyproflab.jobs import EXIT_ERROR, load_job, run_job
        from pyproflab.jobs.outputs import write_atomic
        from pyproflab.reports.formatting import json_text
        from pyproflab.store.lock import StoreBusyError

        if args.wait is not None and args.wait < 0:
            raise UsageError("--wait must be >= 0")
        spec = load_job(args.job)  # every key checked: a bad one is one line, exit 2
        try:
            result = run_job(spec, wait=args.wait)
        except StoreBusyError as e:
            raise e.with_hint() from None  # this command has --wait
        except ProflabError:
            raise  # one line, exit 2
        except Exception:
            # Unattended: an unexpected failure must exit 2, never Python's 1
            # (which means "findings" here); the traceback goes to stderr.
            traceback.print_exc()
            print(
                f"pyproflab: error: job {spec.name} failed (see the traceback above)",
                file=sys.stderr,
            )
            return EXIT_ERROR
        if args.summary:
            write_atomic(
                args.summary,
                json_text(result.summary, indent=2),
            )
        print(result.line, flush=True)
        return result.exit_code
