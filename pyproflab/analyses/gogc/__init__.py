"""The GOGC / GOMEMLIMIT model: what each setting would do to a Go service's
heap, GC cycles and GC CPU, with intervals, and the setting to run under a
memory budget. One model, fitted on every setting the data show.

The modules, each stating its rules:

- ``samples`` (gctrace) and ``prometheus``: samples per cycle or per interval,
  each tagged with the setting it ran at and its process run, weighed by the
  seconds it stands for; ``inputs``: files, the store (with the fallback
  between sources) and figures given by hand; ``container``: the container's
  memory limit, CPU quota and throttling; ``pauses``: gctrace's pauses as the
  runtime's CPU classes count them, where /metrics beside the log have them.
- ``pacer``: one setting's steady state (the GC guide's goal, the pacer's
  trigger and runway, floating garbage from the mark's length at the
  background workers' 25 %, GC CPU per cycle as fixed + per scanned byte + per
  heap byte, the mutator's CPU with sweeping, CPU saturation at GOMAXPROCS,
  the memory limit and its 50 % CPU limiter).
- ``cost``: GC CPU per cycle's fixed and per-byte terms, the fixed one with
  the range the observed settings leave it (non-negative terms within the
  runs' spread).
- ``fit``: the parameters from all observed settings at once, each term
  identified or given a range; residuals that make observed settings exact.
- ``predict``: points and intervals (spread across runs, unidentified terms at
  the ends of their ranges, distance from what was seen), the advice chosen on
  the upper bound of peak memory, and the canary plan; ``canary``: the
  canary that measured the prediction, whose refit the plan's claim is.
- ``options``: the one options object and the parsers of its values.

A gctrace log holds the GC's CPU but not the process's: where the process runs
below GOMAXPROCS, give ``--process-cpu`` or Prometheus beside the log; the
output says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyproflab.analyses.gogc import container as ct
from pyproflab.analyses.gogc import predict as pr
from pyproflab.analyses.gogc.inputs import (
    check_process_cpu,
    from_figures,
    observe,
    observe_store,
    read_gctrace_files,
    read_metric_files,
)
from pyproflab.analyses.gogc.options import (
    DEFAULT_CANDIDATES,
    Budget,
    GogcOptions,
    parse_candidates,
    parse_gogc,
    parse_limit,
    parse_size,
)
from pyproflab.analyses.gogc.samples import (
    Observation,
    Setting,
    setting_label,
    with_peak_rss,
    with_process_cpu,
)
from pyproflab.display import render
from pyproflab.errors import UsageError

MiB = float(1 << 20)
_VALUES = [f"{k}{s}" for k in pr.KEYS for s in ("", "_lo", "_hi")]
ADVICE_SCHEMA = pa.schema(
    [
        pa.field("gogc", pa.float64()),
        pa.field("gogc_label", pa.string()),
        pa.field("memory_limit_bytes", pa.float64()),
        pa.field("governed_by", pa.string()),
        pa.field("status", pa.string()),
        *(pa.field(k, pa.float64()) for k in _VALUES),
        pa.field("distance", pa.float64()),
        pa.field("current", pa.bool_()),
        pa.field("observed", pa.bool_()),
        pa.field("within_budget", pa.bool_()),
        pa.field("recommended", pa.bool_()),
    ]
)


@dataclass
class GogcResult:
    """Predictions with intervals per setting, the advice and the canary plan.

    ``table`` follows ``ADVICE_SCHEMA``; ``recommendation`` is its recommended
    row (None without a budget or a fit); ``canary`` the plan (None when the
    advice needs none); ``model`` the fit (its terms say which the data
    identified); ``findings`` the container's; ``observation`` says where
    each input came from.
    """

    observation: Observation
    model: pr.Model
    table: pa.Table
    budget_bytes: float | None = None
    budget_source: str | None = None
    usable_bytes: float | None = None
    recommendation: dict[str, Any] | None = None
    canary: dict[str, Any] | None = None
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        return self.table.to_pylist()

    def to_pandas(self):
        return self.table.to_pandas()

    def to_arrow(self):
        """The settings' table (as ``to_pandas``; every result with a table has both)."""
        return self.table

    @property
    def current(self) -> dict[str, Any]:
        return next(r for r in self.rows() if r["current"])

    def figure(self):
        """The observed samples against the fit, and the predictions with intervals."""
        return render(self, "figure")

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __str__(self) -> str:
        """The text ``pyproflab gogc`` prints (``print(lab.gogc())``)."""
        return render(self, "text")

    def __repr__(self) -> str:
        rec = self.recommendation
        what = (
            f"recommend {setting_label((rec['gogc'], rec['memory_limit_bytes']))}"
            if rec
            else ("no recommendation")
        )
        return f"GogcResult({self.table.num_rows} settings, {what})"


def container_of(obs: Observation, opts: GogcOptions) -> ct.Container:
    """The container: flags, then the cgroup, then cAdvisor's metrics (``container``)."""
    given = ct.Container(memory_limit=opts.container_memory, cpu_limit=opts.cpu_limit)
    if opts.container_memory is not None:
        given.source["memory limit"] = "--container-memory"
    if opts.cpu_limit is not None:
        given.source["CPU limit"] = "--cpu-limit"
    cg = ct.from_cgroup(opts.cgroup) if opts.cgroup else None
    return given.merge(cg).merge(obs.container)


def _budget(res_cur: dict[str, Any], opts: GogcOptions, box: ct.Container) -> tuple[Any, Any]:
    if opts.budget is not None:
        return opts.budget.resolve(res_cur["peak_memory"]), str(opts.budget)
    if box.memory_limit is not None:
        return box.memory_limit, f"the container's memory limit ({box.source['memory limit']})"
    return None, None


def advise(obs: Observation, options: GogcOptions | None = None) -> GogcResult:
    """Predict every candidate setting and choose one (``predict`` rules)."""
    opts = options or GogcOptions()
    if opts.process_cpu is not None:
        check_process_cpu(obs, opts.process_cpu)
        with_process_cpu(obs, opts.process_cpu)
    if opts.peak_rss is not None:
        with_peak_rss(obs, opts.peak_rss)
    box = container_of(obs, opts)
    model = pr.Model.build(obs)
    cur = obs.current
    budget, how = _budget(model.predict(*cur), opts, box)  # type: ignore[misc]
    usable = opts.usable(budget) if budget is not None else None
    limits = list(opts.memory_limits) if opts.memory_limits is not None else [cur[1]]  # type: ignore[index]
    pairs = pr.candidate_settings(cur, opts.candidates, limits, usable)
    if opts.settings is not None:
        pairs = list(dict.fromkeys([cur, *opts.settings]))  # type: ignore[list-item]
    seen = set(obs.settings)
    rows = []
    for g, lim in pairs:
        r = model.predict(g, lim)
        r.update(
            gogc=g,
            gogc_label="off" if g is None else f"{g:g}",
            memory_limit_bytes=lim,
            current=(g, lim) == cur,
            observed=(g, lim) in seen,
            recommended=False,
        )
        r["within_budget"] = usable is not None and pr.fits_budget(cur, r, usable)
        rows.append(r)
    rec = pr.recommend(rows, usable)
    canary = pr.canary_plan(model, rec)
    notes = list(obs.notes) + _notes(obs, model, rows, rec, usable) + _canary_notes(obs, canary)
    notes = list(dict.fromkeys(notes))  # the fit repeats the observation's notes it keeps
    table = pa.table(
        {f.name: [r.get(f.name) for r in rows] for f in ADVICE_SCHEMA}, schema=ADVICE_SCHEMA
    )
    return GogcResult(
        obs,
        model,
        table,
        budget,
        how,
        usable,
        dict(rec) if rec else None,
        canary,
        ct.findings(box, obs.procs, cpu_known=not _cpu_from_gctrace(obs)),
        notes,
    )


def _canary_notes(obs: Observation, canary: dict | None) -> list[str]:
    """gctrace does not show GOMEMLIMIT: a canary's goals held by its limit read
    as a lower GOGC (queue's GOGC=400 with 256 MiB was refitted as GOGC 165 and
    175, service's 400 with 160 MiB as 200 to 400)."""
    if canary is None or canary["setting"][1] is None:
        return []
    if not obs.provenance.get("memory limit", "").startswith("none (assumed"):
        return []
    return [
        "gctrace does not show GOMEMLIMIT: store the canary's /metrics beside its log "
        "(ingest-gc --format prom) for the refit, else the goals its limit holds read as "
        "a lower GOGC, a setting it did not run"
    ]


def _cpu_from_gctrace(obs: Observation) -> bool:
    """Whether the process's CPU was inferred from gctrace (no figure gave it)."""
    return obs.provenance.get("mutator CPU", "").startswith("gctrace")


# The model's terms as the notes name them: the user reads words, not the
# symbols of the fit's rules (c0, theta, b_nat, ...).
TERM_WORDS = {
    "c0": "fixed GC cost",
    "theta": "per-byte GC cost",
    "sweep": "sweeping cost",
    "cycle_cpu": "mutator CPU per GC cycle",
    "b_nat": "floating garbage",
    "squeeze": "squeezed marks",
    "peak_cons": "runway at other settings",
}
# A reference to the rules of the fit's docstrings ("(rule 2b)") or a symbol ("(κ)").
_RULE_REF = re.compile(r"\s*\((?:rule \w+|κ)\)")


def _plain(how: str) -> str:
    """A term's ``how`` without references to the fit's rules and symbols."""
    return _RULE_REF.sub("", how)


def _notes(
    obs: Observation, model: pr.Model, rows: list[dict], rec: dict | None, usable: float | None
) -> list[str]:
    out = list(model.fit.notes)
    used = ", ".join(
        f"{setting_label(sf.setting)} ({sf.cycles} cycles, "
        f"{sf.runs} run{'s' if sf.runs != 1 else ''})"
        for sf in model.fit.observed
    )
    out.append(f"fitted on {len(model.fit.observed)} observed setting(s): {used}")
    loose = [t for t in model.fit.terms.values() if not t.identified]
    if loose:
        out.append(
            "not identified by the observed settings, given a range that widens every "
            "interval: "
            + "; ".join(f"{TERM_WORDS.get(t.name, t.name)} ({_plain(t.how)})" for t in loose)
        )
    if _cpu_from_gctrace(obs):
        out.append(
            "gctrace does not hold the process's CPU: "
            + (
                "the process is taken as using all of GOMAXPROCS (no idle mark workers seen)"
                if model.fit.params.saturated
                else "the mutator's CPU is what the GC workers leave while marking, too much "
                "when Ps idle"
            )
            + "; give --process-cpu (or Prometheus beside the log) for the GC share"
        )
    if usable is None:
        out.append("no budget given and no container memory limit known: no recommendation")
    elif rec is None:
        out.append("no candidate's upper bound of peak memory fits the budget")
    elif pr.is_raise(obs.current, rec["gogc"]):
        out.append(
            f"{setting_label((rec['gogc'], None))} is a raise: set GOMEMLIMIT="
            f"{rec['memory_limit_bytes'] / MiB:.0f}MiB with it (at most the budget minus "
            "headroom), so a growing live heap makes the GC work harder instead of the "
            "container being killed"
        )
    if (wide := pr.wide_note(rec)) is not None:
        out.append(wide)
    if any(r["status"] == "near-limit" for r in rows):
        out.append(
            "some limits leave the live heap too little room: the GC would run near its "
            "50% CPU limiter (a death spiral); they are never recommended"
        )
    return out


def refuse_unused(selection) -> None:
    """A selection field ``observe_store`` does not use (a time window, labels, a
    profile type) is refused in one line: the advice would be about every stored
    cycle of the service, version and instance (it was, without a word)."""
    unused = [
        k
        for k in ("since", "until", "labels", "profile_type", "profile_ids")
        if getattr(selection, k, None) is not None
    ]
    if unused:
        raise UsageError(
            f"gogc: {unused[0]} is not used: the advice models every stored GC cycle "
            "and metric sample of the service, version and instance"
        )


def gogc(
    store=None,
    selection=None,
    *,
    observation: Observation | None = None,
    options: GogcOptions | None = None,
    **kw: Any,
) -> GogcResult:
    """The advice for the store's selection (service, version, instance), or for
    an observation made elsewhere. ``kw``: ``GogcOptions.parse``'s words."""
    opts = options or GogcOptions.parse(**kw)
    if options is not None and kw:
        raise UsageError("give GOGC options as an options object or as words, not both")
    if observation is None:
        if store is None:
            raise UsageError("give GC data: a store, files or figures")
        sel = selection
        observation = observe_store(
            store,
            service=getattr(sel, "service", None),
            version=getattr(sel, "version", None),
            instance=getattr(sel, "instance", None),
            gogc=opts.gogc,
            memory_limit=opts.current_limit,
        )
    return advise(observation, opts)


__all__ = [
    "ADVICE_SCHEMA",
    "DEFAULT_CANDIDATES",
    "Budget",
    "GogcOptions",
    "GogcResult",
    "Observation",
    "Setting",
    "advise",
    "from_figures",
    "gogc",
    "observe",
    "observe_store",
    "parse_candidates",
    "parse_gogc",
    "refuse_unused",
    "parse_limit",
    "parse_size",
    "read_gctrace_files",
    "read_metric_files",
    "setting_label",
]
