"""Write a CPU profile for `go build -pgo` (default.pgo), checked so it cannot silently do nothing.

  pyproflab pgo --db DB --service S [--since 72h] [--top 5 | --all] -o DIR/default.pgo
  pyproflab pgo FILE... -o OUT
  pyproflab pgo diff OLD NEW        (hot edges added, removed, re-weighted)
  pyproflab pgo check PROFILE --source DIR   (is the profile still true of the source?)
  pyproflab pgo weights FILE... | --db DB ...  (the hot edges under each --weight)
  pyproflab pgo effect --db DB --before K=V... --after K=V... [--build-log LOG |
                       --source DIR --pgo default.pgo [--package ./cmd/app]]

Only samples/count and cpu/nanoseconds are kept, labels and all-zero samples
dropped; functions on the safeguard list are renamed so the compiler cannot
match them. A profile Go would reject or ignore (no CPU sample type, no
samples, zero weight, no start lines, no call edges, unreadable input) is not
written: by default a warning and exit 0 (a CI build goes on without PGO),
with --fail an error and exit 2. With Go installed, the written file is
checked with `go tool preprofile` and its hot call edges are reported.

--weight: none (a plain sum, as pprof merges), duration (each profile per
second) or instance (each instance counts once). Samples in
runtime.asyncPreempt count for the function they interrupted (preemption
is not a call; --keep-preempt keeps them).

pgo check reads the Go module at --source (with go/parser, through the Go
helper) and says, for each hot edge (the compiler's 99% cutoff), whether the
compiler still applies it: the caller still exists by name and the line at
its call-site offset still calls a hot callee. It prints the share of the hot
weight that applies and a verdict (current, aging, stale); with
--fail-under PCT it exits 1 when the share is under PCT.

pgo effect compares the stored profiles of two builds (--before and --after
selections, KEY=VALUE words as in regressions): the CPU change with its
interval and the functions that changed (the regressions analysis), the
memory side (heap in use and allocated, goroutines, goroutine stack memory,
the CPU of stack growth), and the compiler's own list of PGO-driven
inlinings and devirtualizations, read from a build log (go build -pgo=P
-gcflags=-m -d=pgodebug=1) or from that build run on --source.
"""

from __future__ import annotations

import argparse

from pyproflab.analyses.options import PgoOptions
from pyproflab.cli import common, pgo_tools

# PgoOptions' fields that are flags of their own (fold_preempt is --keep-preempt's).
FLAGS = ("top", "weight", "trim_leaf", "max_edges")
_KV = {"nargs": "+", "action": "extend", "default": [], "metavar": "K=V"}
_SAFEGUARD_HELP = "do not rename runtime.gopark and grpc's loopyWriter.processData"

# (group, flags, add_argument keywords): every option once, grouped as --help shows them.
OPTIONS: list[tuple[str, tuple[str, ...], dict]] = [
    ("pgo", ("-o", "--output"), {"metavar": "OUT", "help": "the PGO profile to write"}),
    (
        "pgo",
        ("--all",),
        {"action": "store_true", "help": "every selected CPU profile (over --top)"},
    ),
    (
        "pgo",
        ("--keep-preempt",),
        {
            "action": "store_true",
            "help": "keep samples in runtime.asyncPreempt as they are (not calls)",
        },
    ),
    (
        "pgo",
        ("--safeguard",),
        {
            "action": "append",
            "default": [],
            "metavar": "FUNC",
            "help": "also keep this function out of the hot edges (repeatable)",
        },
    ),
    ("pgo", ("--no-default-safeguards",), {"action": "store_true", "help": _SAFEGUARD_HELP}),
    (
        "pgo",
        ("--fail",),
        {"action": "store_true", "help": "exit 2 when the profile is refused (default: warn)"},
    ),
    (
        "pgo",
        ("--no-verify",),
        {"action": "store_true", "help": "do not run go tool preprofile on the output"},
    ),
    (
        "output",
        ("--format",),
        {"choices": ("text", "json"), "default": "text", "help": "the report on stdout"},
    ),
    (
        "output",
        ("--edges",),
        {"type": int, "default": 20, "metavar": "N", "help": "edges shown (0: all)"},
    ),
    (
        "pgo check, effect",
        ("--source",),
        {"metavar": "DIR", "help": "the Go module (check against it; effect: build it)"},
    ),
    (
        "pgo check, effect",
        ("--fail-under",),
        {
            "type": float,
            "metavar": "PCT",
            "help": "exit 1 when under PCT%% of the hot weight applies",
        },
    ),
    ("pgo check, effect", ("--before",), {**_KV, "help": "the build without (e.g. version=v1)"}),
    ("pgo check, effect", ("--after",), {**_KV, "help": "the build with PGO"}),
    (
        "pgo check, effect",
        ("--build-log",),
        {"metavar": "LOG", "help": "go build -pgo -gcflags='-m -d=pgodebug=1' output"},
    ),
    (
        "pgo check, effect",
        ("--pgo",),
        {"metavar": "PROFILE", "help": "effect: build --source with this profile for the log"},
    ),
    (
        "pgo check, effect",
        ("--per",),
        {"metavar": "COUNTER", "help": "effect: CPU per unit of this stored counter's increase"},
    ),
    (
        "pgo check, effect",
        ("--package",),
        {"default": ".", "metavar": "PKG", "help": "effect: the package to build (default .)"},
    ),
]


class Command:
    __doc__ = __doc__

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.add_argument(
            "files",
            nargs="*",
            metavar="FILE",
            help="pprof CPU profiles (or: diff OLD NEW, check PROFILE, weights FILE...)",
        )
        common.add_db_option(parser)
        common.add_selection_options(parser)
        parser.set_defaults(since="72h")  # datadog-pgo's window
        groups: dict[str, argparse._ArgumentGroup] = {}
        for group, flags, kw in OPTIONS:
            if group not in groups:
                groups[group] = parser.add_argument_group(group)
            groups[group].add_argument(*flags, **kw)
        # The analysis's options, with their defaults and ranges from PgoOptions.
        common.add_option_flags(groups["pgo"], PgoOptions, FLAGS)
        diff = groups.get("pgo diff") or parser.add_argument_group("pgo diff, weights")
        common.add_option_flags(diff, PgoOptions, ["min_change"])

    def run(self, args: argparse.Namespace) -> int:
        from pyproflab.errors import UsageError

        try:
            return self._run(args)
        except UsageError as e:  # "trim_leaf: must be ..." named the keyword, not the flag
            name, sep, rest = str(e).partition(": ")
            if sep and name in (*FLAGS, "min_change"):
                raise UsageError(f"--{name.replace('_', '-')}: {rest}") from None
            raise

    def _run(self, args: argparse.Namespace) -> int:
        from pyproflab.errors import UsageError

        if args.edges < 0:
            raise UsageError(f"--edges must be >= 0 (0: all), not {args.edges}")
        if args.files and args.files[0] == "diff":
            return self.diff(args)
        if args.files and args.files[0] in pgo_tools.TOOLS:
            return pgo_tools.TOOLS[args.files[0]](args)
        if args.files:
            _refuse_a_mistyped_subcommand(args.files[0])
        if not args.output:
            raise UsageError("-o/--output is required (e.g. -o cmd/app/default.pgo)")
        if args.files and (args.db or _has_store_selection(args)):
            raise UsageError("give profile files or --db with a selection, not both")
        given = common.given_options(args, FLAGS)
        PgoOptions.build(**given)  # each given option checks itself
        top = {"top": given.pop("top")} if "top" in given else {}  # a store's only
        options = {**pgo_tools.merge_options(args), **given}
        if args.files:
            from pyproflab.analyses.pgo import pgo_files

            result = pgo_files(args.files, **options)
        else:
            from pyproflab.analyses.pgo import pgo

            with common.open_store(args, read_only=True) as store:
                sel = common.selection_from_args(args)
                result = pgo(store, sel, all=args.all, **top, **options)
        return self.finish(result, args)

    def finish(self, result, args: argparse.Namespace) -> int:
        import os
        import sys

        from pyproflab import reports
        from pyproflab.analyses.pgo import PgoRefusedError

        if result.ok:
            gz = not args.output.endswith((".pb", ".pprof"))
            result.write(args.output, verify=not args.no_verify, gzip=gz)
        text = reports.render(result, args.format, edges=args.edges)
        if result.ok:
            common.write_output(text, None)
            if result.verify_note and result.verify_note.startswith("MISMATCH"):
                print(f"pyproflab: warning: {result.verify_note}", file=sys.stderr)
            return 0
        if args.format == "json":
            common.write_output(text, None)
        message = f"not writing {args.output}: {result.refusal}"
        if os.path.exists(args.output):  # an older profile, still what go build -pgo reads
            message += f"; the {args.output} already there is left as it was"
        if args.fail:
            raise PgoRefusedError(message)
        print(f"pyproflab: warning: {message} (exit 0 without --fail)", file=sys.stderr)
        return 0

    def diff(self, args: argparse.Namespace) -> int:
        from pyproflab import reports
        from pyproflab.analyses.pgo_edges import diff_edges, read_edges
        from pyproflab.errors import UsageError

        paths = args.files[1:]
        if len(paths) != 2:
            raise UsageError("pgo diff takes two files: OLD NEW")
        old, new = (read_edges(p) for p in paths)
        d = diff_edges(old, new, **common.given_options(args, ["min_change"]))
        d.old_name, d.new_name = paths
        common.write_output(reports.render(d, args.format), args.output)
        return 0


def _refuse_a_mistyped_subcommand(first: str) -> None:
    """A first word that is no file and one edit from a subcommand (``pgo chek``)
    was meant as that subcommand: said in one line (a UsageError), instead of
    "-o/--output is required" or a merge refusing "chek: no such file"."""
    import os

    from pyproflab.errors import UsageError

    if os.path.lexists(first):
        return
    for name in ("diff", *pgo_tools.TOOLS):
        if _one_edit(first, name):
            raise UsageError(f"{first}: no such file; did you mean 'pgo {name}'?")


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` is ``b`` with one letter added, dropped, changed, or two
    neighbours swapped."""
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
        return len(diff) == 1 or (swapped and a[diff[1]] == b[diff[0]])
    short, long = sorted((a, b), key=len)
    return len(long) == len(short) + 1 and any(
        long[:i] + long[i + 1 :] == short for i in range(len(long))
    )


def _has_store_selection(args: argparse.Namespace) -> bool:
    # --since has a default here (72h), so it alone does not mean "store".
    return any(
        getattr(args, n, None)
        for n in ("service", "sel_version", "instance", "profile_type", "until", "label")
    )
