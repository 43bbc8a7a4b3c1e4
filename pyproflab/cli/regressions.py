"""Compare two selections of stored profiles: what got slower or bigger, with statistics.

Each side is a selection of KEY=VALUE words (service, version, instance,
type, since, until, profile_id, or any metadata label), e.g. --base
version=v1 --new version=v2, narrowed by --base-since/--base-until/
--new-since/--new-until and by --type (given to both sides). Per function
(or line), its share of each side's total (the default, --measure auto; a
rate per second of profile duration with --measure rate, or per unit of
work with --per COUNTER), the change with its interval, p-values
from a quasi-Poisson test of the sample counts (or --test permutation, a
permutation test of Welch's t, or welch), Benjamini-Hochberg q-values over
flat and cum of every tested function, and the smallest change detectable
with 80% power. Rows are
ranked by evidence (the conservative end of the interval), increases
first; decreases are listed apart; callers a finding explains are grouped
under it and cost shifts are labelled.

With --over-time, one selection (--service S [--since 7d] or --select
K=V...) is followed through its collection windows instead: per function,
the change points of its rate (circular binary segmentation with
permutation tests), each with its time, size, interval and whether it
persisted or went away. The options only two sides use (--resamples,
--rank-by, --unit, --test, --noinlines) are refused there.

--fail-on-change exits 1 when an increase is found: for two sides, a
significant increase of flat or cum that is not half of a cost shift; over
time, an increase that persisted.

With --engine spark --dataset PATH, the two sides are read from a Parquet
dataset (pyproflab export --parquet, or the Spark ingest) and summed on
Spark, with the same result as the store's. Select one kind of profile
(--type cpu): unlike the store, Spark does not narrow a mixed selection.
--per reads the dataset's metric samples (an export carries them);
--over-time needs the store.
"""

from __future__ import annotations

import argparse

from pyproflab.analyses.options import OverTimeOptions, RegressionsOptions
from pyproflab.cli import argtypes, common
from pyproflab.cli.common import add_engine_options, spark_dataset

_KV = {"nargs": "+", "action": "extend", "default": [], "metavar": "K=V"}

# (group, flags, add_argument keywords): every option once, grouped as --help shows them.
OPTIONS: list[tuple[str, tuple[str, ...], dict]] = [
    ("two sides", ("--base",), {**_KV, "help": "the base selection (e.g. version=v1)"}),
    ("two sides", ("--new",), {**_KV, "help": "the new selection (e.g. version=v2)"}),
    *[
        ("two sides", (f"--{side}-{end}",), {"metavar": "T", "help": f"{side} profiles {how}"})
        for side in ("base", "new")
        for end, how in (
            ("since", "taken at or after T (ISO, UTC unless it has an offset; or 72h ago)"),
            ("until", "before T"),
        )
    ],
    (
        "over time",
        ("--over-time",),
        {"action": "store_true", "help": "change points in one selection instead of two sides"},
    ),
    ("over time", ("--service",), {"help": "the service to follow"}),
    ("over time", ("--since",), {"metavar": "T", "help": "profiles at or after T"}),
    ("over time", ("--select",), {**_KV, "help": "more selection words (instance=...)"}),
    (
        "output",
        ("--fail-on-change",),
        {
            "action": "store_true",
            "help": "exit 1 when an increase is found (two sides: significant, not a cost "
            "shift; over time: one that persisted)",
        },
    ),
    ("output", ("--top",), {"type": int, "metavar": "N", "help": "show at most N rows"}),
    ("output", ("--format",), {"choices": ["text", "json", "csv", "html"], "default": "text"}),
    ("output", ("-o", "--output"), {"metavar": "FILE", "help": "write here, not to stdout"}),
]


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        common.add_db_option(parser)
        groups: dict[str, argparse._ArgumentGroup] = {}
        for group, flags, kw in OPTIONS:
            if group not in groups:
                groups[group] = parser.add_argument_group(group)
            groups[group].add_argument(*flags, **kw)
        analysis = parser.add_argument_group("analysis")
        names = [n for n in RegressionsOptions.names() if n != "inlines"]
        common.add_option_flags(analysis, RegressionsOptions, names)
        analysis.add_argument(
            "--noinlines",
            dest="inlines",
            action="store_const",
            const=False,
            default=None,
            help="count inlined calls as their caller's",
        )
        common.add_type_option(analysis, "profile type for both sides (e.g. cpu)")
        add_engine_options(parser.add_argument_group("engine"), "sum the two sides")

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.errors import UsageError

        if args.top is not None and args.top < 0:
            raise UsageError("--top must be >= 0")
        if args.dataset and args.engine != "spark":
            raise UsageError("--dataset is read by --engine spark")
        if args.engine == "spark" and args.over_time:
            raise UsageError("--over-time needs the store (--db), not --engine spark")
        if args.over_time:
            two_sided = set(RegressionsOptions.names()) - set(OverTimeOptions.names())
            given = sorted(n for n in two_sided if getattr(args, n, None) is not None)
            if given:
                flags = ", ".join(
                    "--noinlines" if n == "inlines" else argtypes.flag_of(n) for n in given
                )
                raise UsageError(f"{flags}: two sides' options; --over-time does not use them")
            return self._over_time(args)
        if not args.base or not args.new:
            raise UsageError("--base and --new are required (or --over-time with --service)")
        # Taken silently, these would leave a user's narrowing out of both sides.
        given = [f for f in ("service", "since", "select") if getattr(args, f)]
        if given:
            flags = ", ".join(f"--{f}" for f in given)
            raise UsageError(
                f"{flags}: over-time's one selection; for two sides put it in --base and "
                "--new (e.g. --base service=api version=v1), or --base-since/--new-since"
            )
        return self._two_sides(args)

    def _over_time(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.regressions.over_time import over_time
        from pyproflab.errors import UsageError
        from pyproflab.store.select import Selection

        if args.base or args.new:
            raise UsageError("--over-time follows one selection; drop --base/--new")
        sel = Selection.from_kv(args.select, "--select")
        sel.service = args.service or sel.service
        sel.since = args.since or sel.since
        sel.profile_type = sel.profile_type or args.profile_type or "cpu"
        if not sel.service:
            raise UsageError("--over-time needs --service S (or --select service=S)")
        with common.open_store(args, read_only=True) as store:
            result = over_time(store, sel, over_time_options(args))
        top = {"top": args.top} if args.top else {}
        text = reports.output(result, args.format, title="regressions over time", **top)
        common.write_output(text, args.output)
        ups = [
            c
            for c in result.findings().to_pylist()
            if c["status"] == "persisted" and c["change"] > 0
        ]
        return 1 if args.fail_on_change and ups else 0

    def _two_sides(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.regressions import regressions
        from pyproflab.store.select import Selection

        sides = {}
        for side in ("base", "new"):
            sel = Selection.from_kv(getattr(args, side), f"--{side}")
            since, until = getattr(args, f"{side}_since"), getattr(args, f"{side}_until")
            sel.since = sel.since if since is None else since
            sel.until = sel.until if until is None else until
            sel.profile_type = sel.profile_type or args.profile_type
            sides[side] = sel
        opts = regressions_options(args)
        if args.engine == "spark":
            result = spark_dataset(args).regressions(sides["base"], sides["new"], opts)
        else:
            with common.open_store(args, read_only=True) as store:
                result = regressions(
                    store,
                    common.one_kind(store, sides["base"], opts.sample_index),
                    common.one_kind(store, sides["new"], opts.sample_index),
                    opts,
                )
        # Without --top, text shows its first rows (the renderer's default), the others all.
        top = {"top": args.top} if args.top else {}
        text = reports.output(result, args.format, title="regressions", **top)
        common.write_output(text, args.output)
        return 1 if args.fail_on_change and result.increases().num_rows else 0


def regressions_options(args: argparse.Namespace) -> RegressionsOptions:
    """The two sides' analysis options: those given, the rest the analysis's defaults."""
    return RegressionsOptions.build(**common.given_options(args, RegressionsOptions.names()))


def over_time_options(args: argparse.Namespace) -> OverTimeOptions:
    """--over-time's analysis options: those given, the rest its defaults."""
    return OverTimeOptions.build(**common.given_options(args, OverTimeOptions.names()))
