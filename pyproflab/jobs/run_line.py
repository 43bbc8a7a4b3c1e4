"""The run's line, the one a scheduler logs: what the sources did not store,
what the analyses found and what they skipped, what retention removed.

Rule: everything that makes a run less than its job asked for (a refused
file, a failed fetch or scrape, a skipped collect target, a failed source,
an analysis that did not run) is counted on the line, not only in
``summary.json`` or on stderr: exit 0 with "N new profiles, 0 findings" is
read as "all of it stored and analysed".
"""

from __future__ import annotations

from typing import Any

from pyproflab.jobs.sources import Log
from pyproflab.jobs.spec import JobSpec

#: Skipped analyses named on the line; the rest are counted (each is logged).
SKIPS_NAMED = 3


def removed(summary: dict[str, Any]) -> str:
    """What retention removed, for the run's line ("" when nothing): a run whose
    input is unchanged writes no outputs, and its deletions were otherwise only in
    ``--summary``."""
    rep = summary.get("retention") or {}
    kinds = ("profiles", "traces", "metric_rows")
    parts = [f"{rep[k]} {k.replace('_', ' ')}" for k in kinds if rep.get(k)]
    return f", retention removed {', '.join(parts)}" if parts else ""


def refused(summary: dict[str, Any]) -> str:
    """What the sources did not store, for the run's line ("" when nothing): a
    refused file or profile (drop, pull) or a failed fetch (collect) is not an
    error of the run (exit 0 or 1), so without this the line a scheduler logs
    read as if every input had been stored. A collect target skipped (its
    auth_env unset) or a failed /metrics scrape, and a source that failed as a
    whole (exit 2), are counted too: the line said nothing of them."""
    sources = summary["sources"]
    counts = (
        (sum(len(s.get("refused") or ()) + int(s.get("failed") or 0) for s in sources), "refused"),
        (sum(int(s.get("targets_skipped") or 0) for s in sources), "target skipped"),
        (sum(int(s.get("scrapes_failed") or 0) for s in sources), "scrape failed"),
        (sum("error" in s for s in sources), "source failed"),
    )
    return "".join(f", {n} {_plural(what, n)}" for n, what in counts if n)


def _plural(what: str, n: int) -> str:
    """'target skipped' -> 'targets skipped' for n != 1 ('refused' stays)."""
    noun, _, rest = what.partition(" ")
    return what if n == 1 or not rest else f"{noun}s {rest}"


def new_profiles(n: int) -> str:
    """'1 new profile', '0 new profiles', '24 new profiles'."""
    return f"{n} new profile{'s' * (n != 1)}"


def skipped(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The analyses asked for that did not run, as (what, why): a skipped
    analysis (one version only, a mistyped ``per`` counter, no GC data, a
    refused PGO input) is not an error of the run, so without saying so the
    run's "0 findings" read as an answer it never computed. A skipped PGO
    names the earlier run's profile its ``default.pgo`` still points to."""
    out = []
    for key in ("regressions", "over_time", "pgo"):
        for item in summary.get(key) or ():
            if "skipped" in item:
                name = f"{key.replace('_', '-')} of {item['service'] or 'all'}"
                kept = f" ({item['kept']} kept)" if item.get("kept") else ""
                out.append((name, f"{item['skipped']}{kept}"))
    if "skipped" in (summary.get("gogc") or {}):
        out.append(("gogc", str(summary["gogc"]["skipped"])))
    return out


def findings_part(spec: JobSpec, findings: int, summary: dict[str, Any], log: Log) -> str:
    """The run line's findings ("3 findings over 10%"), then the analyses that
    did not run, each reason logged (none when the run failed: its error says
    why), then any default.pgo that failed its check."""
    thr = spec.regressions.threshold_pct if spec.regressions else None
    part = f"{findings} findings" + (f" over {thr:g}%" if thr is not None else "")
    missed = [] if "error" in summary else skipped(summary)
    for what, why in missed:
        log(f"{what} skipped: {why}")
    if missed:  # named up to SKIPS_NAMED: a fleet of services makes no endless line
        names = [w for w, _ in missed[:SKIPS_NAMED]]
        names += [f"{len(missed) - SKIPS_NAMED} more"] * (len(missed) > SKIPS_NAMED)
        part += f", {len(missed)} skipped ({', '.join(names)})"
    return part + _pgo_mismatch(summary, log)


def _pgo_mismatch(summary: dict[str, Any], log: Log) -> str:
    """The default.pgo files ``go tool preprofile`` read otherwise than pyproflab
    computed them (a MISMATCH): the pgo command warns, a job
    kept it in summary.json alone and said '0 findings ...; exit 0'."""
    bad = [i for i in summary.get("pgo") or () if str(i.get("verify")).startswith("MISMATCH")]
    for item in bad:
        log(f"pgo of {item['service'] or 'all'}: {item['verify']}")
    names = ", ".join(str(i["service"] or "all") for i in bad)
    return f", default.pgo of {names} failed its check" if bad else ""
