"""Compare two selections of stored profiles: what got slower or bigger, with statistics.

Each side is a selection of KEY=VALUE words (service, version, instance,
type, since, until, profile_id, or any metadata label), e.g. --base
version=v1 --new version=v2, narrowed by --base-since/--base-until/
--new-since/--new-until and by --type (given to both sides). Per function
(or line), the rate per second of profile duration (or per unit of work
with --per COUNTER) on each side, the change with its interval, p-values
from a permutation test of Welch's t (or --test quasi-poisson on the
sample counts, or welch), Benjamini-Hochberg q-values over flat and cum of every tested
function, and the smallest change detectable with 80% power. Rows are
ranked by evidence (the conservative end of the interval), increases
first; decreases are listed apart; callers a finding explains are grouped
under it and cost shifts are labelled.

With --over-time, one selection (--service S [--since 7d] or --select
K=V...) is followed through its collection windows instead: per function,
the change points of its rate (circular binary segmentation with
permutation tests), each with its time, size, interval and whether it
persisted or went away. --fail-on-change exits 1 when a change that
persisted is an increase.
"""

from __future__ import annotations

import argparse

from pyproflab.cli import common


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        parser.add_argument(
            "--base",
            nargs="+",
            action="extend",
            default=[],
            metavar="K=V",
            help="the base selection (e.g. version=v1)",
        )
        parser.add_argument(
            "--new",
            nargs="+",
            action="extend",
            default=[],
            metavar="K=V",
            help="the new selection (e.g. version=v2)",
        )
        for side in ("base", "new"):
            parser.add_argument(
                f"--{side}-since",
                metavar="T",
                help=f"{side} profiles taken at or after T (ISO, or 72h ago)",
            )
            parser.add_argument(
                f"--{side}-until", metavar="T", help=f"{side} profiles taken before T"
            )
        parser.add_argument(
            "--over-time",
            action="store_true",
            help="change points over time in one selection instead of two sides",
        )
        parser.add_argument("--service", help="over time: the service to follow")
        parser.add_argument("--since", metavar="T", help="over time: profiles at or after T")
        parser.add_argument(
            "--select",
            nargs="+",
            action="extend",
            default=[],
            metavar="K=V",
            help="over time: more selection words (instance=..., version=...)",
        )
        parser.add_argument(
            "--fail-on-change",
            action="store_true",
            help="over time: exit 1 when an increase persisted",
        )
        parser.add_argument(
            "--type",
            dest="profile_type",
            metavar="TYPE",
            help="profile type for both sides (e.g. cpu)",
        )
        parser.add_argument(
            "--sample-index", metavar="NAME|N", help="sample type (default: the profiles' default)"
        )
        parser.add_argument(
            "--granularity", choices=["functions", "lines", "files"], default="functions"
        )
        parser.add_argument(
            "--noinlines",
            action="store_true",
            help="count inlined calls as their caller's (pprof -noinlines)",
        )
        parser.add_argument(
            "--measure",
            choices=["rate", "share"],
            default="rate",
            help="compare rates per second (default) or shares of the total",
        )
        parser.add_argument(
            "--rank-by",
            choices=["evidence", "flat", "cum"],
            default="evidence",
            help="order: by the conservative end of the change's interval, increases first "
            "(default), or by |change| of flat or cum",
        )
        parser.add_argument(
            "--per",
            metavar="COUNTER",
            help="rates per unit of work: the increase of this counter (stored from "
            "/metrics, e.g. a request counter) over each profile's window",
        )
        parser.add_argument(
            "--unit",
            choices=["profile", "instance", "window"],
            default="profile",
            help="independent unit of the statistics: each profile (default), each "
            "instance's profiles summed, or the profiles taken together (a collection "
            "round) summed",
        )
        parser.add_argument(
            "--fdr",
            type=float,
            default=0.05,
            metavar="Q",
            help="false discovery rate for significance (default 0.05)",
        )
        parser.add_argument("--confidence", type=float, default=0.95, metavar="C")
        parser.add_argument("--resamples", type=int, default=2000, metavar="N")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--test",
            choices=["permutation", "quasi-poisson", "welch"],
            default="permutation",
            help="source of the p-values: a permutation test of Welch's t over the units' "
            "sides (default), quasi-Poisson on the sample counts (over-dispersion estimated "
            "from the units), or Student's t",
        )
        parser.add_argument(
            "--permutations",
            type=int,
            default=10_000,
            metavar="N",
            help="splits of the units for the permutation test; all of them when there are "
            "fewer (default 10000)",
        )
        parser.add_argument(
            "--min-share",
            type=float,
            default=0.005,
            metavar="F",
            help="test only nodes with at least this share of the pooled total (default 0.005)",
        )
        parser.add_argument(
            "--top",
            type=int,
            default=None,
            metavar="N",
            help="show at most N rows (default: 30 in text, all otherwise)",
        )
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.errors import UsageError

        if args.top is not None and args.top < 0:
            raise UsageError("--top must be >= 0")
        if args.over_time:
            return self._over_time(args)
        if not args.base or not args.new:
            raise UsageError("--base and --new are required (or --over-time with --service)")
        return self._two_sides(args)

    def _over_time(self, args: argparse.Namespace) -> int:
        from pyproflab.analyses.regressions.over_time import over_time
        from pyproflab.errors import UsageError
        from pyproflab.reports.regressions import render_over_time
        from pyproflab.store import Store
        from pyproflab.store.select import Selection

        if args.base or args.new:
            raise UsageError("--over-time follows one selection; drop --base/--new")
        sel = Selection.from_kv(args.select)
        if args.service:
            sel.service = args.service
        if args.since:
            sel.since = args.since
        sel.profile_type = sel.profile_type or args.profile_type or "cpu"
        if not sel.service:
            raise UsageError("--over-time needs --service S (or --select service=S)")
        sample_index = args.sample_index
        if sample_index is not None and sample_index.isdigit():
            sample_index = int(sample_index)
        with Store.open(common.db_path(args), read_only=True) as store:
            result = over_time(
                store,
                sel,
                sample_index=sample_index,
                granularity=args.granularity,
                fdr=args.fdr,
                confidence=args.confidence,
                min_share=args.min_share,
                seed=args.seed,
                per=args.per,
            )
        common.write_output(render_over_time(result, args.format), args.output)
        ups = [
            c
            for c in result.findings().to_pylist()
            if c["status"] == "persisted" and c["change"] > 0
        ]
        return 1 if args.fail_on_change and ups else 0

    def _two_sides(self, args: argparse.Namespace) -> int:
        from pyproflab.analyses.regressions import regressions
        from pyproflab.reports.regressions import render_regressions
        from pyproflab.store import Store
        from pyproflab.store.select import Selection

        sides = {}
        for side in ("base", "new"):
            sel = Selection.from_kv(getattr(args, side))
            since, until = getattr(args, f"{side}_since"), getattr(args, f"{side}_until")
            if since is not None:
                sel.since = since
            if until is not None:
                sel.until = until
            if args.profile_type and sel.profile_type is None:
                sel.profile_type = args.profile_type
            sides[side] = sel
        sample_index = args.sample_index
        if sample_index is not None and sample_index.isdigit():
            sample_index = int(sample_index)
        with Store.open(common.db_path(args), read_only=True) as store:
            result = regressions(
                store,
                common.one_kind(store, sides["base"], sample_index),
                common.one_kind(store, sides["new"], sample_index),
                sample_index=sample_index,
                granularity=args.granularity,
                fdr=args.fdr,
                confidence=args.confidence,
                resamples=args.resamples,
                seed=args.seed,
                min_share=args.min_share,
                rank_by=args.rank_by,
                unit=args.unit,
                inlines=not args.noinlines,
                measure=args.measure,
                test=args.test,
                permutations=args.permutations,
                per=args.per,
            )
        common.write_output(
            render_regressions(result, args.format, top=args.top or None), args.output
        )
        return 0
