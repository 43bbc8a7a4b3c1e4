"""Show the top functions of profiles, as `go tool pprof -top` does.

Give profile files to read them directly (several are merged first, as
pprof merges them), or select profiles from a store with --db and the
selection options. Values are exact integers in the sample type's unit in
csv and json; text scales them like pprof.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pyproflab.cli import common
from pyproflab.errors import UsageError


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        add_report_options(parser)
        parser.add_argument(
            "--nodecount",
            type=int,
            default=None,
            metavar="N",
            help="show at most N rows (default: all in csv/json, 30 in text)",
        )
        parser.add_argument(
            "--nodefraction",
            type=float,
            default=0.0,
            metavar="F",
            help="hide nodes below F of the total (pprof's default is 0.005; ours 0: all)",
        )
        parser.add_argument(
            "--edgefraction",
            type=float,
            default=0.001,
            metavar="F",
            help="edges below F of the total are left out (they decide inline markers)",
        )
        parser.add_argument(
            "--trim",
            action="store_true",
            help="pprof's defaults: --nodefraction 0.005 --edgefraction 0.001",
        )
        parser.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
        parser.add_argument(
            "--exact",
            action="store_true",
            help="text: print exact integers in the base unit instead of scaled values",
        )
        add_engine_options(parser)

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.analyses.top import top
        from pyproflab.errors import UsageError
        from pyproflab.reports import render_top

        if args.dataset and args.engine != "spark":
            raise UsageError("--dataset is read by --engine spark")
        profile = spark_profile(args) if args.engine == "spark" else report_profile(args)
        sample_index = parse_sample_index(args.sample_index)
        nodecount = args.nodecount
        if nodecount is None and args.format == "text":
            nodecount = 30
        if nodecount is not None and nodecount < 0:
            raise UsageError("--nodecount must be >= 0")
        result = top(
            profile,
            sample_index=sample_index,
            granularity=args.granularity,
            nodecount=nodecount or None,
            cum_sort=args.cum,
            focus=args.focus,
            ignore=args.ignore,
            node_fraction=0.005 if args.trim else args.nodefraction,
            edge_fraction=0.001 if args.trim else args.edgefraction,
            **pprof_filters(args),
        )
        text = render_top(result, args.format, exact=args.exact, unit=args.unit)
        common.write_output(text, args.output)
        return 0


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
    return SparkDataset(local_session(conf=conf), args.dataset)


def spark_profile(args: argparse.Namespace):
    """The merged selection of ``--dataset``, on Spark."""
    return spark_dataset(args).merged_profile(common.selection_from_args(args))


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
    common.add_db_option(parser)
    common.add_selection_options(parser)
    parser.add_argument(
        "--sample-index",
        metavar="NAME|N",
        help="sample type to show (default: the profile's default, else the last)",
    )
    if graph:
        parser.add_argument("--cum", action="store_true", help="sort by cumulative value")
        parser.add_argument(
            "--granularity", choices=["functions", "lines", "files"], default="functions"
        )
    parser.add_argument(
        "--focus",
        metavar="REGEX",
        help="only samples with a frame matching REGEX (Python re syntax)",
    )
    parser.add_argument(
        "--ignore", metavar="REGEX", help="drop samples with a frame matching REGEX"
    )
    add_pprof_filters(parser)
    for name, text in (
        ("diff_base", "subtract these profiles; percentages are shares of the base"),
        ("base", "subtract these profiles (as pprof -base)"),
    ):
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        parser.add_argument(*flags, dest=name, action="append", metavar="FILE", help=text)
    parser.add_argument(
        "--unit", metavar="UNIT", help="text: print values in UNIT (ms, s, MB, ...), as -unit"
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")


PPROF_FILTERS = (
    ("tagfocus", "KEY=VALUE", "only samples with this label (regexes, or a range: 1kb:, :64b)"),
    ("tagignore", "KEY=VALUE", "drop samples with this label (as --tagfocus)"),
    ("hide", "REGEX", "remove frames matching REGEX from the stacks"),
    ("show", "REGEX", "keep only frames matching REGEX in the stacks"),
    ("show_from", "REGEX", "drop the frames above (callers of) the first match from the root"),
    ("tagshow", "REGEX", "keep only the labels whose key matches REGEX (as printed by traces)"),
    ("taghide", "REGEX", "drop the labels whose key matches REGEX (as printed by traces)"),
)


def add_pprof_filters(parser: argparse.ArgumentParser) -> None:
    """pprof's sample and frame filters, by pprof's names (see analyses.pprof_filters)."""
    for name, metavar, text in PPROF_FILTERS:
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        parser.add_argument(*flags, dest=name, metavar=metavar, help=text)


def pprof_filters(args: argparse.Namespace) -> dict[str, str | None]:
    return {name: getattr(args, name, None) for name, _, _ in PPROF_FILTERS}


def parse_sample_index(value: str | None) -> int | str | None:
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def report_profile(args: argparse.Namespace):
    """``load_profile``, refusing files given together with a store selection."""
    if args.files and (args.db or common.has_selection(args)):
        raise UsageError("give profile files or --db with a selection, not both")
    return load_profile(args)


def load_profile(args: argparse.Namespace):
    """The profile that --db/selection or the files describe (merged if several)."""
    if args.files:
        from pyproflab.files import read_and_merge

        profile = read_and_merge(args.files, seconds=getattr(args, "seconds", None))
        base = getattr(args, "diff_base", None) or getattr(args, "base", None)
        if base:
            from pyproflab.analyses.diff import subtract

            if args.diff_base and args.base:
                raise UsageError("give --diff_base or --base, not both")
            profile = subtract(profile, read_and_merge(base), diff_base=bool(args.diff_base))
        return profile
    from pyproflab.store import Store

    with Store.open(common.db_path(args), read_only=True) as store:
        sel = common.selection_from_args(args)
        sample = parse_sample_index(getattr(args, "sample_index", None))
        return store.merged_profile(common.one_kind(store, sel, sample))
