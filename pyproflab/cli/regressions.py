"""Compare two selections of stored profiles: what got slower or bigger, with statistics.

Each side is a selection of KEY=VALUE words (service, version, instance,
type, since, until, profile_id, or any metadata label), e.g. --base
version=v1 --new version=v2, narrowed by --base-since/--base-until/
--new-since/--new-until and by --type (given to both sides). Per function
(or line), the rate per second of profile duration on each side, the
change with a bootstrap interval, p-values from a permutation test of
Welch's t (or Student's t with --test welch), and Benjamini-Hochberg
q-values over flat and cum of every tested function.
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
            required=True,
            help="the base selection (e.g. version=v1)",
        )
        parser.add_argument(
            "--new",
            nargs="+",
            action="extend",
            default=[],
            metavar="K=V",
            required=True,
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
        parser.add_argument("--rank-by", choices=["flat", "cum"], default="flat")
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
            choices=["permutation", "welch"],
            default="permutation",
            help="source of the p-values: a permutation test of Welch's t over the units' "
            "sides (default), or Student's t (more power with few units, if their values "
            "are near normal)",
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
        from pyproflab.analyses.regressions import regressions
        from pyproflab.errors import UsageError
        from pyproflab.reports.regressions import render_regressions
        from pyproflab.store import Store
        from pyproflab.store.select import Selection

        if args.top is not None and args.top < 0:
            raise UsageError("--top must be >= 0")
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
            )
        common.write_output(
            render_regressions(result, args.format, top=args.top or None), args.output
        )
        return 0
