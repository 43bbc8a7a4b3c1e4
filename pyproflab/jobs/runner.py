"""Running a job: sources -> ingest -> retention -> analyses -> outputs -> record.

Rules:

- The store is opened read-write, so the job holds the store lock for the
  whole run: a second job (or any writer) gets "store is busy" at once or
  waits ``wait`` seconds; a stale lock of a killed run is taken over and the
  summary says so.
- Ingest is incremental and all-or-nothing per batch (``store.ingest``):
  drop-folder files already handled (same path, size and mtime) are not read
  again; profiles are deduplicated by content hash.
- Exactly once: the analysed input is fingerprinted (``state.fingerprint``).
  When a finished run has the same fingerprint, nothing is analysed or
  written and the exit code is that run's, unless that run failed (exit 2):
  its input is analysed again. A run killed before it finished is resumed
  under its run id, so its outputs get the same names: a rerun never leaves
  a duplicate set. A run that fails (an error, not a kill) is recorded as
  failed, its record written last: nothing after it can fail.
- Outputs are written atomically, and the stable ``latest`` names move only
  after all of a run's files are on disk (``outputs``).
- Exit codes: 0 done, 1 done with findings over the job's thresholds,
  2 error: a bad spec, a source that failed as a whole (a collect source
  none of whose fetches succeeded, a pull source that matched nothing or
  whose every profile was refused), a selection matching none of the
  store's profiles, an output that could not be written, or a crash.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyproflab import workflows
from pyproflab.errors import ProflabError, StoreIOError, UsageError
from pyproflab.jobs import outputs, run_line, state
from pyproflab.jobs.retention import apply_retention
from pyproflab.jobs.sources import Log, run_sources
from pyproflab.jobs.spec import JobSpec
from pyproflab.reports.formatting import json_text
from pyproflab.store.connection import Store
from pyproflab.store.select import Selection
from pyproflab.store.verify import verify

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _stderr(line: str) -> None:
    print(f"job: {line}", file=sys.stderr, flush=True)


@dataclass
class JobResult:
    """What a run did: its exit code, one summary line and the summary document."""

    exit_code: int
    line: str
    summary: dict[str, Any] = field(default_factory=dict)


def _safe(name: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name or "all").strip("_") or "all"


# --- analyses -----------------------------------------------------------------------


def _findings(res, metric: str, threshold_pct: float) -> list[tuple[dict, str]]:
    """(row, metric) of the findings (see ``RegressionsSpec``)."""
    out = []
    for row in res.rows.to_pylist():
        if metric == "evidence":
            m = row["evidence_metric"]
            if row["direction"] != "increase" or row["explained_by"] or row["shift_with"]:
                continue
        else:
            m = metric
        rel = row[f"{m}_rel"]
        if row[f"{m}_significant"] and rel is not None and rel * 100 > threshold_pct:
            out.append((row, m))
    return out


def _services(
    store: Store, sel: Selection, profile_type: str | None, order: str
) -> dict[str | None, workflows.Ordering]:
    """Each service of the selection with profiles of ``profile_type``, and its
    versions oldest first (``workflows.versions``); a service none of whose
    profiles has a version maps to [] (``versions`` leaves it out, and a drop
    laid out without {version} ran no comparison and said "0 findings").
    Profiles without a service are not listed so: a selection cannot single
    them out, and their PGO would take every service's."""
    out: dict[str | None, workflows.Ordering] = {
        svc: workflows.Ordering()
        for svc in workflows.unversioned(store, sel, profile_type)
        if svc is not None
    }
    return out | workflows.versions(store, sel, profile_type, order)


def _regressions(
    store: Store, spec: JobSpec, sel: Selection, out: outputs.OutputSet, summary: dict[str, Any]
) -> int:
    from pyproflab import reports
    from pyproflab.analyses.regressions import regressions

    r = spec.regressions
    assert r is not None
    findings = 0
    for svc, vers in _services(store, sel, r.profile_type, r.order).items():
        item: dict[str, Any] = {"service": svc}
        summary["regressions"].append(item)
        pair = workflows.comparison(vers)
        if pair is None:
            item["skipped"] = (
                f"only one version ({vers.names[0]})"
                if vers.names
                else f"no version on its {r.profile_type} profiles"
            )
            continue
        item.update(base=pair.base, new=pair.new)
        base = workflows.narrow(sel, service=svc, version=pair.base, profile_type=r.profile_type)
        new = workflows.narrow(sel, service=svc, version=pair.new, profile_type=r.profile_type)
        try:
            res = regressions(store, base, new, r.options, rank_by=r.metric)
        except StoreIOError:
            raise  # a damaged store fails the run (exit 2), never a skipped step
        except ProflabError as e:
            item["skipped"] = str(e)
            continue
        hits = _findings(res, r.metric, r.threshold_pct)
        item.update(
            profiles_base=res.n_base,
            profiles_new=res.n_new,
            statistics=res.statistics,
            notes=([pair.note] if pair.note else []) + list(res.notes),
            findings=[
                {
                    "name": h["label"],
                    "metric": m,
                    "rel_pct": round(h[f"{m}_rel"] * 100, 2),
                    "q": h[f"{m}_q"],
                }
                for h, m in hits[:50]
            ],
        )
        findings += len(hits)
        kind = f"regressions-{_safe(svc)}"
        for fmt in spec.formats:
            ext = {"text": "txt"}.get(fmt, fmt)
            out.write(kind, ext, reports.output(res, fmt, title="regressions"))
    if r.over_time:
        findings += _over_time(store, spec, sel, out, summary)
    return findings


def _over_time(
    store: Store, spec: JobSpec, sel: Selection, out: outputs.OutputSet, summary: dict[str, Any]
) -> int:
    """Change points per service over ``over_time_since``; persisted increases
    above the threshold are findings."""
    from pyproflab import reports
    from pyproflab.analyses.regressions.over_time import over_time

    r = spec.regressions
    assert r is not None
    findings = 0
    summary["over_time"] = []
    for svc in _services(store, sel, r.profile_type, r.order):
        item: dict[str, Any] = {"service": svc}
        summary["over_time"].append(item)
        narrowed = workflows.narrow(
            sel, service=svc, profile_type=r.profile_type, since=r.over_time_since
        )
        try:
            o = r.options
            res = over_time(
                store, narrowed, fdr=o.fdr, min_share=o.min_share, granularity=o.granularity
            )
        except StoreIOError:
            raise  # a damaged store fails the run (exit 2), never a skipped step
        except ProflabError as e:
            item["skipped"] = str(e)
            continue
        hits = [
            c
            for c in res.findings().to_pylist()
            if c["status"] == "persisted" and c["rel"] * 100 > r.threshold_pct
        ]
        item["findings"] = [
            {
                "name": c["label"],
                "time": str(c["time"]),
                "rel_pct": round(c["rel"] * 100, 2),
                "q": c["q"],
            }
            for c in hits[:50]
        ]
        findings += len(hits)
        for fmt in spec.formats:
            ext = {"text": "txt"}.get(fmt, fmt)
            text = reports.output(res, fmt, title="regressions over time")
            out.write(f"over-time-{_safe(svc)}", ext, text)
    return findings


def _gogc(
    store: Store, spec: JobSpec, sel: Selection, out: outputs.OutputSet, summary: dict[str, Any]
) -> None:
    from pyproflab import reports
    from pyproflab.analyses.gogc import gogc

    g = spec.gogc
    assert g is not None
    kw: dict[str, Any] = {"budget": g.budget, "headroom": g.headroom}
    if g.candidates:
        kw["candidates"] = g.candidates
    try:
        res = gogc(store, sel, **kw)
    except StoreIOError:
        raise  # a damaged store fails the run (exit 2), never a skipped step
    except ProflabError as e:
        summary["gogc"] = {"skipped": str(e)}
        return
    rec = res.recommendation
    summary["gogc"] = {
        "recommendation": rec.get("gogc_label") if rec else None,
        "notes": list(res.notes),
    }
    for fmt in spec.formats:
        out.write("gogc", {"text": "txt"}.get(fmt, fmt), reports.output(res, fmt, title="gogc"))


def _pgo(
    store: Store, spec: JobSpec, sel: Selection, out: outputs.OutputSet, summary: dict[str, Any]
) -> None:
    from pyproflab import reports
    from pyproflab.analyses.pgo import pgo

    p = spec.pgo
    assert p is not None
    order = spec.regressions.order if spec.regressions else "ingest"
    by_service = _services(store, sel, "cpu", order) or {None: workflows.Ordering()}
    for svc, vers in by_service.items():
        newest = vers.names[-1] if (p.version == "newest" and vers.names) else None
        version = newest
        chosen = workflows.narrow(sel, service=svc, version=version)
        item: dict[str, Any] = {"service": svc, "version": version}
        if newest and len(vers.names) > 1 and vers.tied(vers.names[-2], newest):
            item["note"] = (
                f"{version} started together with {vers.names[-2]}: the newest is "
                "taken from their names"
            )
        summary["pgo"].append(item)
        kind = "default" if len(by_service) == 1 else f"default-{_safe(svc)}"
        try:
            res = pgo(store, chosen, top=p.top)
            why = res.refusal
        except StoreIOError:
            raise  # a damaged store fails the run (exit 2), never a skipped step
        except ProflabError as e:
            res, why = None, str(e)
        if why is not None or res is None:
            # The stable name keeps an earlier run's profile on purpose: a PGO
            # build is better with a slightly old profile than with none.
            item.update(skipped=why, kept=out.current(f"{kind}.pgo"))
            continue
        out.write_file(kind, "pgo", lambda path, res=res: res.write(path, verify=p.verify))
        item.update(inputs=len(res.inputs), edges=len(res.edges), verify=res.verify_note)
        out.write(f"pgo-{_safe(svc)}", "json", reports.render(res, "json"))


# --- the run ------------------------------------------------------------------------


def _analyse_and_write(
    store: Store, spec: JobSpec, sel: Selection, out: outputs.OutputSet, summary: dict[str, Any]
) -> int:
    """Run the job's analyses, each writing its outputs; the number of findings."""
    findings = 0
    if spec.regressions is not None:
        findings = _regressions(store, spec, sel, out, summary)
    if spec.gogc is not None:
        _gogc(store, spec, sel, out, summary)
    if spec.pgo is not None:
        _pgo(store, spec, sel, out, summary)
    return findings


def _unchanged(
    job: str,
    prev: dict[str, Any] | None,
    source_failed: bool,
    ingested: int,
    summary: dict[str, Any],
) -> JobResult | None:
    """The result of a run whose input a finished run already analysed (its exit
    code, or 2 when a source failed now), or None when there is work to do. A
    run that failed (exit 2: a source failed) did not do the work: the same
    input is analysed again under a new run, never "unchanged"."""
    if prev is None or prev["finished_at"] is None or int(prev["exit_code"] or 0) == EXIT_ERROR:
        return None
    code = EXIT_ERROR if source_failed else int(prev["exit_code"] or 0)
    line = (
        f"{job}: unchanged since run {prev['run_id']} "
        f"({prev['finished_at']:%Y-%m-%d %H:%M:%SZ}); {run_line.new_profiles(ingested)}"
        f"{run_line.refused(summary)}, nothing written{run_line.removed(summary)}; exit {code}"
    )
    summary.update(unchanged_since=prev["run_id"], exit_code=code)
    return JobResult(code, line, summary)


def _analysed_nothing(
    store: Store, spec: JobSpec, sel: Selection, summary: dict[str, Any]
) -> str | None:
    """Why a run whose analyses had no input is a failure (None: it had some):
    a selection matching none of the profiles the store holds (nor GC data, for
    gogc) is a mistyped or outdated one, and "0 findings" would hide it. A
    store holding no profile yet (a new job, an empty drop folder) is not."""
    asked = (spec.regressions, spec.gogc, spec.pgo)
    if summary.get("profiles") or all(a is None for a in asked):
        return None
    if spec.gogc is not None and "skipped" not in summary.get("gogc", {}):
        return None
    held = store.counts()["profiles"]
    if not held:
        return None
    gc = " nor any GC data" if spec.gogc is not None else ""
    return (
        f"the selection ({sel.describe() or 'all'}) matches none of the store's "
        f"{held} profiles{gc}: nothing analysed"
    )


def _write_run(
    store: Store,
    spec: JobSpec,
    sel: Selection,
    out: outputs.OutputSet,
    summary: dict[str, Any],
    source_failed: bool,
) -> tuple[int, int]:
    """Run the analyses, write their outputs and the summary, and publish them,
    withdrawing the stable names of earlier runs' reports this one did not
    write (``outputs`` rules): (findings, exit code). The code is 2 when a
    source failed, else 1 with findings, else 0. A failed write (a full disk)
    is one line."""
    try:
        findings = _analyse_and_write(store, spec, sel, out, summary)
        if nothing := _analysed_nothing(store, spec, sel, summary):
            summary["error"] = nothing
        failed = source_failed or bool(nothing)
        code = EXIT_ERROR if failed else (EXIT_FINDINGS if findings else EXIT_OK)
        summary.update(findings=findings, exit_code=code, finished_at=datetime.now(UTC).isoformat())
        summary["withdrawn"] = out.stale()  # reports of an earlier run, not of this one
        text = json_text(summary, indent=2)
        out.write("summary", "json", text)
        out.publish(summary["withdrawn"])
    except OSError as e:
        raise ProflabError(
            f"{spec.name}: cannot write the job's outputs in {out.folder}: {e.strerror or e}"
        ) from None
    return findings, code


def run_job(
    spec: JobSpec, *, wait: float | None = None, log: Log = _stderr, now: datetime | None = None
) -> JobResult:
    """Run ``spec`` once (see the module rules). ProflabErrors propagate (exit 2)."""
    started = now or datetime.now(UTC)
    out_dir = Path(spec.output)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{out_dir}: cannot create the output folder: {e.strerror or e}") from None
    summary: dict[str, Any] = {
        "job": spec.name,
        "store": spec.store,
        "output": str(out_dir),
        "started_at": started.isoformat(),
        "sources": [],
        "regressions": [],
        "pgo": [],
    }
    with Store.open(spec.store, wait=spec.wait if wait is None else wait) as store:
        verify(store)  # a damaged block stops the run before anything is written
        if store.lock is not None and store.lock.took_over:
            held = store.lock.took_over
            summary["stale_lock"] = held
            log(f"took over a stale lock of pid {held.get('pid')} (since {held.get('since')})")
        outputs.clean_temp(out_dir)
        state.ensure_tables(store)

        # 1. sources, each on its own: one failing does not stop the others.
        source_failed = run_sources(store, spec, summary, log)

        # 2. retention, before the fingerprint: dropped profiles are not analysed.
        if spec.retention.max_age_days is not None:
            rep = apply_retention(
                store, spec.retention.max_age_days, metrics=spec.retention.metrics, now=started
            )
            summary["retention"] = rep.to_dict()

        # 3. exactly once: the same input as a finished run -> nothing to do.
        sel = Selection(**spec.selection)
        fp, n_profiles = state.fingerprint(
            store, sel, spec.spec_hash, with_metrics=spec.gogc is not None
        )
        summary.update(fingerprint=fp, profiles=n_profiles)
        prev = state.find_run(store, spec.name, fp)
        ingested = sum(s.get("new", 0) for s in summary["sources"])
        unchanged = _unchanged(spec.name, prev, source_failed, ingested, summary)
        if unchanged is not None:
            return unchanged
        if (
            prev is not None and prev["finished_at"] is None
        ):  # a killed run of this input: finish it, same names
            run_id, stamp_time = int(prev["run_id"]), prev["started_at"]
            summary["resumed"] = True
        else:
            run_id, stamp_time = state.start_run(store, spec.name, fp, started), started
        stamp = outputs.make_stamp(stamp_time.astimezone(UTC), run_id)
        summary.update(run_id=run_id, stamp=stamp)
        out = outputs.OutputSet(
            out_dir, stamp, {"job": spec.name, "run_id": run_id, "stamp": stamp}
        )

        # 4. analyses, each writing its outputs, then the run's record, last:
        # a run that fails before it (a full disk, a bug) is recorded as failed.
        try:
            findings, code = _write_run(store, spec, sel, out, summary, source_failed)
            if "error" in summary:
                log(summary["error"])
            summary["pruned"] = outputs.prune(out_dir, spec.retention.keep_runs)
            line = (
                f"{spec.name}: run {run_id}: {run_line.new_profiles(ingested)}"
                f"{run_line.refused(summary)}, "
                f"{n_profiles} selected, {run_line.findings_part(spec, findings, summary, log)}, "
                f"{len(out.written)} outputs in {out_dir}{run_line.removed(summary)}; exit {code}"
            )
        except Exception as e:
            _record_failure(store, spec.name, run_id, summary, e)
            raise
        state.finish_run(store, spec.name, run_id, code, summary)
    return JobResult(code, line, summary)


def _record_failure(
    store: Store, job: str, run_id: int, summary: dict[str, Any], error: Exception
) -> None:
    """Record a run that failed after it started as finished with exit 2, so the
    next run analyses its input again (never "unchanged"); when even that
    cannot be written (the store's disk is full), the run stays unfinished and
    the next one resumes it."""
    summary.update(exit_code=EXIT_ERROR, error=str(error) or type(error).__name__)
    try:
        state.finish_run(store, job, run_id, EXIT_ERROR, summary)
    except ProflabError:
        pass
