"""What ``pyproflab report`` finds, section by section: the analyses it runs, not the page.

One function per section, in the page's order, runs its analysis once and
gathers the results into a ``Section``, with the command that gives the same
data as text or JSON; ``reports.html_report`` renders the sections. Rules:

- Sections: fleet summary, top CPU functions, flame graphs of the merged CPU
  and of alloc_space, regressions (the newest version against the one before
  it, ``comparison``), GC share over time per instance, execution traces
  (CPU starvation, scheduler latency, STW; left out of a store that holds no
  trace), the GOGC curve and recommendation, the PGO summary. A section that
  has nothing to show (no CPU profiles, one version, no GC tables or data, no
  Go) is skipped with a note saying why.
- A section about one kind of profile (CPU, alloc_space) merges only one
  mergeable kind of it (``store.kinds.one_kind``): a profile of another period
  or sample type is left out with a note, it does not take the section down.
- GC sections need GC data: with no rows in metric_samples or gc_cycles they
  say so in one line.
- A section fails only on a user-level problem (``ProflabError``), which
  becomes its note; anything else is a bug and propagates.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyproflab import workflows
from pyproflab.errors import ProflabError, StoreIOError
from pyproflab.store import queries
from pyproflab.store.kinds import one_kind
from pyproflab.store.select import Selection

# Default GOGC budget when none is given: relative to today's peak memory, so
# the recommendation answers "what does 50% more memory buy?".
DEFAULT_BUDGET = "1.5x"


@dataclass
class Section:
    """One part of the report: what it found, and the command that gives its data."""

    id: str
    title: str
    commands: list[str]
    found: dict[str, Any] = field(default_factory=dict)  # results and facts, by name
    notes: list[str] = field(default_factory=list)  # plain text
    skipped: bool = False

    def skip(self, why: str) -> Section:
        self.skipped = True
        self.notes.append(why)
        return self


def sections(
    store,
    sel: Selection,
    db: str,
    *,
    budget: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Section]:
    """Every section of ``sel`` (module rules); ``db`` is the store path the
    commands name; ``progress`` is called with (sections done, sections)."""
    makers: list[tuple[Callable[..., Section], tuple]] = [
        (fleet_section, ()),
        (top_section, ()),
        (flame_section, ()),
        (regressions_section, ()),
        (gc_section, ()),
        *([(traces_section, ())] if has_traces(store) else []),
        (gogc_section, (budget,)),
        (pgo_section, ()),
    ]
    out = []
    for i, (make, extra) in enumerate(makers):
        if progress:
            progress(i, len(makers))
        out.append(_guard(make, store, sel, db, *extra))
    if progress:
        progress(len(makers), len(makers))
    return out


def _guard(make, store, sel: Selection, db: str, *args: Any) -> Section:
    try:
        return make(store, sel, db, *args)
    except StoreIOError:
        raise  # a damaged store stops the report: never a skipped section
    except ProflabError as e:
        name = make.__name__.removesuffix("_section")
        return Section(name, name, []).skip(f"{name}: {e}")


# --- the command lines each section points to ---------------------------------------


def _flags(sel: Selection, db: str) -> list[str]:
    out = ["--db", db]
    for attr, flag in (
        ("service", "--service"),
        ("version", "--version"),
        ("instance", "--instance"),
        ("profile_type", "--type"),
    ):
        v = getattr(sel, attr)
        if isinstance(v, str):
            out += [flag, v]
    for attr in ("since", "until"):
        v = getattr(sel, attr)
        if v is not None:
            out += [f"--{attr}", v.isoformat() if isinstance(v, datetime) else str(v)]
    for k, v in (sel.labels or {}).items():
        out += ["--label", f"{k}={v}"]
    return out


def _kv(sel: Selection) -> list[str]:
    out = []
    for attr, key in (
        ("service", "service"),
        ("version", "version"),
        ("instance", "instance"),
        ("profile_type", "type"),
    ):
        v = getattr(sel, attr)
        if isinstance(v, str):
            out.append(f"{key}={v}")
    for k, v in (sel.labels or {}).items():
        out.append(f"{k}={v}")
    return out


def _cmd(*words: str) -> str:
    return shlex.join(["pyproflab", *words])


# --- helpers --------------------------------------------------------------------------


_with = workflows.narrow


def _gc_rows(store) -> dict[str, int]:
    """Rows of each GC table the store has (metric_samples, gc_cycles)."""
    return queries.metric_table_rows(store)


def _one(store, sel: Selection, s: Section, sample: str | None = None) -> Selection:
    """``sel`` narrowed to one mergeable kind; the section notes what was left out."""
    narrowed, note = one_kind(store, sel, sample=sample, force=True)
    if note:
        s.notes.append(note)
    return narrowed


# --- sections ---------------------------------------------------------------------------


def fleet_section(store, sel: Selection, db: str) -> Section:
    """``found``: profiles (count), groups (service, version, instance, profiles,
    time span, types), labels (key, values), gc_rows (table, rows)."""
    s = Section("fleet", "Fleet summary", [_cmd("profiles", *_flags(sel, db), "--format", "json")])
    prof = store.profiles(sel).to_pylist()
    if not prof:
        return s.skip(f"no profiles match {sel.describe()}")
    groups: dict[tuple, dict[str, Any]] = {}
    labels: dict[str, set[str]] = {}
    for p in prof:
        key = (p["service"], p["version"], p["instance"])
        g = groups.setdefault(key, {"types": {}, "first": None, "last": None})
        g["types"][p["profile_type"]] = g["types"].get(p["profile_type"], 0) + 1
        t = p["time"] or p["window_start"]
        if t is not None:
            g["first"] = t if g["first"] is None else min(g["first"], t)
            g["last"] = t if g["last"] is None else max(g["last"], t)
        for k, v in p["labels"] or []:
            labels.setdefault(k, set()).add(v)
    rows = []
    for (svc, ver, inst), g in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        types = ", ".join(f"{t} {n}" for t, n in sorted(g["types"].items()))
        span = (
            f"{g['first']:%Y-%m-%d %H:%M:%S} .. {g['last']:%H:%M:%S}"
            if g["first"] is not None
            else ""
        )
        rows.append([svc, ver, inst, sum(g["types"].values()), span, types])
    s.found = {
        "profiles": len(prof),
        "groups": rows,
        "labels": [[k, ", ".join(sorted(v))] for k, v in sorted(labels.items())],
        "gc_rows": [[t, n] for t, n in _gc_rows(store).items()],
    }
    return s


def top_section(store, sel: Selection, db: str, rows: int = 25) -> Section:
    """``found``: top (the merged CPU profiles' ``TopResult`` as pprof's, with the note of
    ``analyses.cpu_coverage`` when they hold clearly less CPU than was used)."""
    from pyproflab.analyses.cpu_coverage import notes_for
    from pyproflab.analyses.top import pprof_top

    cpu = _with(sel, profile_type="cpu")
    s = Section(
        "top",
        "Top CPU functions (merged)",
        [_cmd("top", *_flags(cpu, db), "--nodecount", str(rows), "--format", "json")],
    )
    if store.profiles(cpu).num_rows == 0:
        return s.skip("no CPU profiles in the selection")
    chosen = _one(store, cpu, s)
    s.found["top"] = pprof_top(store.merged_profile(chosen), rows)
    s.found["top"].notes.extend(notes_for(store, chosen))
    return s


def _flame(store, sel: Selection, s: Section, sample: str, name: str, title: str) -> bool:
    """Add one flame graph of ``sel``'s ``sample`` to ``s.found["graphs"]``; a
    profile problem becomes a note (the other graph of the section still draws)."""
    from pyproflab.analyses.flame import flame_graph

    try:
        profile = store.merged_profile(_one(store, sel, s, sample))
        s.found.setdefault("graphs", []).append((name, flame_graph(profile, sample, title=title)))
    except StoreIOError:
        raise  # a damaged store stops the report: never a skipped section
    except ProflabError as e:
        s.notes.append(f"no {sample} flame graph: {e}")
        return False
    return True


def flame_section(store, sel: Selection, db: str) -> Section:
    """``found``: graphs, a list of (name, ``FlameGraph``): merged CPU, then
    alloc_space of the allocs (else heap) profiles."""
    cpu = _with(sel, profile_type="cpu")
    s = Section(
        "flame",
        "Flame graphs: merged CPU and alloc_space",
        [
            _cmd("merge", *_flags(cpu, db), "-o", "cpu.pb.gz"),
            _cmd("top", *_flags(cpu, db), "--cum", "--format", "json"),
        ],
    )
    if store.profiles(cpu).num_rows:
        _flame(store, cpu, s, "cpu", "flame-cpu", "merged CPU (cpu, nanoseconds)")
    else:
        s.notes.append("no CPU profiles in the selection: no CPU flame graph")
    for ptype in ("allocs", "heap"):
        mem = _with(sel, profile_type=ptype)
        if store.profiles(mem).num_rows:
            s.commands.append(
                _cmd(
                    "top",
                    *_flags(mem, db),
                    "--sample-index",
                    "alloc_space",
                    "--cum",
                    "--format",
                    "json",
                )
            )
            title = f"merged {ptype} profiles: alloc_space (bytes allocated)"
            if _flame(store, mem, s, "alloc_space", f"flame-{ptype}", title):
                break
    else:
        s.notes.append("no allocs or heap profiles with alloc_space in the selection")
    if not s.found.get("graphs"):
        s.skipped = True
    return s


def regressions_section(store, sel: Selection, db: str) -> Section:
    """``found``: base and new (the versions), regressions (``RegressionsResult``)
    and flame (the differential ``FlameGraph`` of the two sides)."""
    from pyproflab.analyses.regressions import regressions

    cpu = _with(sel, profile_type="cpu")
    s = Section("regressions", "Regressions between versions (CPU)", [])
    by_service = workflows.versions(store, cpu)
    # The first service with two versions to compare.
    found = next(((k, v) for k, v in by_service.items() if len(v.names) >= 2), None)
    if found is None:
        versions = sorted({v for vs in by_service.values() for v in vs.names})
        s.commands.append(
            _cmd(
                "regressions",
                "--db",
                db,
                "--base",
                "version=OLD",
                "--new",
                "version=NEW",
                "--type",
                "cpu",
                "--format",
                "json",
            )
        )
        apart = ", no two of one service" if len(by_service) > 1 else ""
        return s.skip(
            f"the selection's CPU profiles have {len(versions)} version(s) "
            f"({', '.join(versions) or 'none'}){apart}: nothing to compare"
        )
    svc, ordering = found
    pair = workflows.comparison(ordering)
    assert pair is not None
    if pair.note:
        s.notes.append(pair.note)
    if len(by_service) > 1:
        s.notes.append(f"{len(by_service)} services; comparing the versions of {svc}")
        cpu = _with(cpu, service=svc)
    base, new = _with(cpu, version=pair.base), _with(cpu, version=pair.new)
    s.commands.append(
        _cmd(
            "regressions", "--db", db, "--base", *_kv(base), "--new", *_kv(new), "--format", "json"
        )
    )
    base, new = _one(store, base, s, "cpu"), _one(store, new, s, "cpu")
    result = regressions(store, base, new)
    s.found = {
        "base": pair.base,
        "new": pair.new,
        "regressions": result,
        "flame": _diff_flame(store, base, new, result),
    }
    return s


def _diff_flame(store, base: Selection, new: Selection, result):
    """The new side's CPU, coloured by change from the base side's, per second of
    profile on each side (the base scaled by new duration / base duration)."""
    from pyproflab.analyses.flame import flame_graph

    scale = result.duration_new / result.duration_base if result.duration_base else 1.0
    return flame_graph(
        store.merged_profile(new),
        "cpu",
        base=store.merged_profile(base),
        base_scale=scale,
        title="CPU per second, coloured by change from the base version",
    )


_NO_GC = (
    "the store has no GC data (no rows in metric_samples or gc_cycles): collect with "
    "`pyproflab collect` or load with `pyproflab ingest-gc`"
)


def gc_section(store, sel: Selection, db: str) -> Section:
    """``found``: gc (``GcResult``), runtime (``gc_timeline.gc_share_series``) and
    marks (the ``gc`` rows of the profiles with a GC share, each with its place
    in time, ``at``, or None: where the chart puts its markers)."""
    from pyproflab.analyses.gc import gc
    from pyproflab.analyses.gc_timeline import gc_share_series, profile_time
    from pyproflab.store.select import no_profiles

    s = Section(
        "gc", "GC share over time per instance", [_cmd("gc", *_flags(sel, db), "--format", "json")]
    )
    if not any(_gc_rows(store).values()):
        return s.skip(_NO_GC)
    if not store.profiles(sel).num_rows:  # the series follow the profiles' instances
        return s.skip(str(no_profiles(store, sel, "GC metrics alone: the gogc section")))
    runtime = gc_share_series(store, sel)
    result = gc(store, sel)
    marks = [
        r | {"at": profile_time(r)}
        for r in result.profiles.to_pylist()
        if r["profile_gc_share"] is not None
    ]
    s.notes += result.notes
    if not runtime and not any(m["at"] for m in marks):
        return s.skip(
            "no GC CPU metrics (go_cpu_classes_*) and no CPU profiles for the selected instances"
        )
    s.found = {"gc": result, "runtime": runtime, "marks": marks}
    return s


def has_traces(store) -> bool:
    """Whether the store holds any execution trace (else no trace section)."""
    from pyproflab.store.traces import select_traces

    return "traces" in queries.table_names(store) and bool(select_traces(store).num_rows)


def traces_section(store, sel: Selection, db: str) -> Section:
    """``found``: sched (``SchedLatency``: its findings name each starved
    instance in one line, none for the others), stw (``StwReport``) and sync
    (``TopResult`` by cum of the merged ``trace-sync`` profiles: where the
    goroutines blocked on channels, selects and locks; absent when none is
    stored) of the selected traces (the selection's service, version,
    instance, time, labels)."""
    from pyproflab.analyses.gotrace import SchedOptions
    from pyproflab.analyses.gotrace_answers import answer
    from pyproflab.analyses.gotrace_stw import StwOptions
    from pyproflab.store.traces import select_traces

    s = Section(
        "traces",
        "Execution traces: scheduler latency, blocking and stop-the-world pauses",
        [
            _cmd("trace", "sched", *_flags(sel, db), "--format", "json"),
            _cmd("trace", "stw", *_flags(sel, db), "--format", "json"),
        ],
    )
    tsel = Selection(
        service=sel.service,
        version=sel.version,
        instance=sel.instance,
        since=sel.since,
        until=sel.until,
        labels=sel.labels,
    )
    if not select_traces(store, tsel).num_rows:
        return s.skip("no execution traces stored for this selection (pyproflab ingest TRACE)")
    s.found = {
        "sched": answer("sched", store=store, selection=tsel, options=SchedOptions()),
        "stw": answer("stw", store=store, selection=tsel, options=StwOptions()),
    }
    _sync_top(store, tsel, s, db)
    return s


def _sync_top(store, tsel: Selection, s: Section, db: str, rows: int = 15) -> None:
    """The merged trace-sync profiles' top by cum (``s.found["sync"]``): the runtime's waits
    (``runtime.selectgo``) flat, by cum where goroutines waited (founding story: gRPC)."""
    from pyproflab.analyses.top import pprof_top

    sync = _with(tsel, profile_type="trace-sync")
    if not store.profiles(sync).num_rows:
        return
    flags = ("--cum", "--nodecount", str(rows), "--format", "json")
    s.commands.append(_cmd("top", *_flags(sync, db), *flags))
    s.found["sync"] = pprof_top(store.merged_profile(_one(store, sync, s)), rows, cum_sort=True)


def gogc_section(store, sel: Selection, db: str, budget: str | None) -> Section:
    """``found``: gogc (``GogcResult`` under ``budget``, else ``DEFAULT_BUDGET``)."""
    from pyproflab.analyses.gogc import gogc

    used = budget or DEFAULT_BUDGET
    # gogc selects its GC data by service, version and instance only (and refuses
    # the rest): the command shown runs as printed.
    whole = Selection(service=sel.service, version=sel.version, instance=sel.instance)
    s = Section(
        "gogc",
        "GOGC trade-off and recommendation",
        [_cmd("gogc", *_flags(whole, db), "--budget", used, "--format", "json")],
    )
    if not any(_gc_rows(store).values()):
        return s.skip(_NO_GC)
    if whole != sel:
        s.notes.append(
            "the time window, labels and type of the selection do not apply here: the model "
            "uses every stored GC cycle of its services, versions and instances"
        )
    try:
        result = gogc(store, whole, budget=used)
    except StoreIOError:
        raise  # a damaged store stops the report: never a skipped section
    except ProflabError as e:
        return s.skip(f"no GOGC model: {e}")
    if budget is None:
        s.notes.append(
            f"no --budget given: the recommendation is under {DEFAULT_BUDGET} today's peak memory"
        )
    s.found["gogc"] = result
    return s


def pgo_section(store, sel: Selection, db: str) -> Section:
    """``found``: pgo (``PgoResult`` of the CPU profiles, checked by Go)."""
    from pyproflab.analyses import pgo_edges
    from pyproflab.analyses.pgo import pgo

    cpu = _with(sel, profile_type="cpu")
    s = Section(
        "pgo",
        "PGO summary (default.pgo hot edges)",
        [_cmd("pgo", *_flags(cpu, db), "-o", "default.pgo", "--format", "json")],
    )
    if pgo_edges.go_binary() is None:
        return s.skip(
            "Go is not installed: the PGO profile cannot be checked with "
            "go tool preprofile, so it is not summarised"
        )
    if store.profiles(cpu).num_rows == 0:
        return s.skip("no CPU profiles in the selection")
    result = pgo(store, _one(store, cpu, s, "cpu"))
    if not result.ok:
        return s.skip(f"no PGO profile: {result.refusal}")
    s.found["pgo"] = result
    return s
