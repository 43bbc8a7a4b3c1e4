"""One self-contained HTML report of a selection: works offline, plotly embedded.

Sections: fleet summary, top CPU functions, flame graphs of the merged CPU
and alloc_space, regressions between the first and last version (when there
are two or more), GC share over time per instance, the GOGC curve and
recommendation, the PGO summary. A section without data says why; each names
the command that gives its data as text or JSON.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        common.add_selection_options(parser)
        parser.add_argument(
            "-o",
            "--output",
            metavar="FILE",
            default="report.html",
            help="the HTML file to write (default report.html; - for stdout)",
        )
        parser.add_argument("--title", help="the page title (default: pyproflab report)")
        parser.add_argument(
            "--budget",
            metavar="SIZE",
            help="memory budget for the GOGC recommendation (e.g. 2GiB, or "
            "1.5x the current peak; default 1.5x)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import sys
        import time

        from pyproflab.analyses.gogc import Budget
        from pyproflab.errors import UsageError
        from pyproflab.reports.html_report import render_report
        from pyproflab.workflows.report import sections

        try:  # a bad --budget is the user's mistake, not a skipped section
            Budget.parse(args.budget)
        except UsageError as e:
            raise UsageError(f"--budget: {e}") from None
        started = time.perf_counter()
        db = common.db_path(args)
        sel = common.selection_from_args(args)
        with common.open_store(args, read_only=True) as store:
            found = sections(
                store,
                sel,
                db,
                budget=args.budget,
                progress=common.Progress("report", unit="section"),
            )
        if all(s.skipped for s in found):  # a mistyped selection, an empty store
            where = f"in {db}" if sel.everything else f"match {sel.describe()}"
            raise UsageError(f"no profiles or GC data {where}: nothing to report")
        report = render_report(found, db=db, selection=sel.describe(), title=args.title)
        common.write_output(report.html, args.output)
        if args.output not in (None, "-"):
            skipped = [s.id for s in report.sections if s.skipped]
            print(
                f"wrote {args.output}: {len(report.html.encode()) / 1e6:.2f} MB, "
                f"{report.charts} charts, {len(report.sections)} sections"
                + (f" ({', '.join(skipped)} skipped)" if skipped else "")
                + f", built in {time.perf_counter() - started:.2f} s",
                file=sys.stderr,
            )
        return 0
