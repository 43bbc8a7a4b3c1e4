"""The words after ``pyproflab pgo`` that are not a merge: ``check``,
``weights`` and ``effect`` (their options are the pgo command's; see its help)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from pyproflab.cli import common


def run_check(args: argparse.Namespace) -> int:
    """``pgo check PROFILE --source DIR``: exit 1 under --fail-under."""
    from pyproflab import reports
    from pyproflab.analyses.pgo_check import check
    from pyproflab.errors import UsageError

    paths = args.files[1:]
    if len(paths) != 1 or not args.source:
        raise UsageError("pgo check takes one profile and --source DIR (a Go module's root)")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:  # NaN too
        raise UsageError(f"--fail-under must be a percentage in [0, 100], not {args.fail_under:g}")
    result = check(paths[0], args.source)
    common.write_output(reports.render(result, args.format, edges=args.edges), args.output)
    if args.fail_under is not None and (result.share or 0.0) < args.fail_under:
        return 1
    return 0


def run_weights(args: argparse.Namespace) -> int:
    """``pgo weights FILE...`` or ``pgo weights --db DB SELECTION``."""
    from pyproflab import reports
    from pyproflab.analyses.pgo_weights import compare_weights
    from pyproflab.errors import UsageError

    options = merge_options(args)
    paths = args.files[1:]
    if paths:
        change = common.given_options(args, ["min_change"])  # else PgoOptions'
        result = compare_weights(files=paths, **change, **options)
    else:
        with common.open_store(args, read_only=True) as store:
            result = compare_weights(
                store,
                common.selection_from_args(args),
                all=args.all,
                **common.given_options(args, ["min_change", "top"]),  # else PgoOptions'
                **options,
            )
    refusal = result.results["none"].refusal  # the plain sum refuses only what it was given
    if refusal is not None:
        raise UsageError(refusal)
    common.write_output(reports.render(result, args.format), args.output)
    return 0


def run_effect(args: argparse.Namespace) -> int:
    """``pgo effect --before K=V... --after K=V... [--build-log LOG | --source DIR --pgo P]``."""
    from pyproflab import reports
    from pyproflab.analyses.pgo_effect import EffectOptions, build_log, pgo_effect, read_build_log
    from pyproflab.errors import UsageError
    from pyproflab.store.select import Selection

    if not args.before or not args.after:
        raise UsageError("pgo effect needs --before K=V... and --after K=V...")
    if args.build_log and (args.source or args.pgo):
        raise UsageError("give --build-log LOG, or --source DIR with --pgo PROFILE, not both")
    log = None
    if args.build_log:
        log = read_build_log(args.build_log)
    elif args.source or args.pgo:
        if not (args.source and args.pgo):
            raise UsageError("--source DIR and --pgo PROFILE go together")
        log = build_log(args.source, args.pgo, args.package)
    before = Selection.from_kv(args.before, "--before")
    after = Selection.from_kv(args.after, "--after")
    with common.open_store(args, read_only=True) as store:
        for flag, sel in (("--before", before), ("--after", after)):
            if not store.profiles(sel).num_rows:  # a typo, as regressions says
                raise UsageError(f"no profiles match the {flag} selection {sel.describe()}")
        result = pgo_effect(store, before, after, EffectOptions(per=args.per), log=log)
    common.write_output(reports.render(result, args.format), args.output)
    return 0


def merge_options(args: argparse.Namespace) -> dict:
    """The merge's options from the flags (safeguards, trimming, preemption)."""
    safeguards: list | None = [] if args.no_default_safeguards else None
    if args.safeguard:
        from pyproflab.analyses.pgo import DEFAULT_SAFEGUARDS

        base = safeguards if safeguards is not None else list(DEFAULT_SAFEGUARDS)
        safeguards = [*base, *args.safeguard]
    return {
        "safeguards": safeguards,
        "trim_leaf": args.trim_leaf,
        "fold_preempt": not args.keep_preempt,
        "max_edges": args.max_edges,
    }


TOOLS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": run_check,
    "weights": run_weights,
    "effect": run_effect,
}
