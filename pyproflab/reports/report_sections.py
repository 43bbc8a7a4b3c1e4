"""The sections of ``pyproflab report``, in the page's order: one function per
section runs its analysis once and gathers what its template shows into a
``Section``, with the command that gives the same data as text or JSON. The
rules they follow are ``html_report``'s (which builds the page from them).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from markupsafe import Markup

from pyproflab import workflows
from pyproflab.errors import ProflabError
from pyproflab.reports.flame import plotly_text
from pyproflab.reports.flamegraph import FlameGraph, flame_graph
from pyproflab.reports.gc_timeline import gc_share_figure, gc_share_points
from pyproflab.store import queries
from pyproflab.store.kinds import one_kind
from pyproflab.store.select import Selection

# Default GOGC budget when none is given: relative to today's peak memory, so
# the recommendation answers "what does 50% more memory buy?".
DEFAULT_BUDGET = "1.5x"


@dataclass
class Section:
    """One part of the report: its markup, its figures, the command that gives its data."""

    id: str
    title: str
    commands: list[str]
    ctx: dict[str, Any] = field(default_factory=dict)  # what its template shows
    figures: list[tuple[str, Any]] = field(default_factory=list)  # (name, plotly figure)
    notes: list[str] = field(default_factory=list)  # plain text
    skipped: bool = False

    def skip(self, why: str) -> Section:
        self.skipped = True
        self.notes.append(why)
        return self


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


_MORE = "the command below gives every row"


# --- sections ---------------------------------------------------------------------------


def fleet_section(store, sel: Selection, db: str) -> Section:
    s = Section("fleet", "Fleet summary", [_cmd("profiles", *_flags(sel, db), "--format", "json")])
    prof = store.profiles(sel).to_pylist()
    if not prof:
        return s.skip(f"no profiles match the selection ({sel.describe() or 'everything'})")
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
    s.ctx = {
        "profiles": len(prof),
        "groups": rows,
        "labels": [[k, ", ".join(sorted(v))] for k, v in sorted(labels.items())],
        "gc_rows": [[t, n] for t, n in _gc_rows(store).items()],
    }
    return s


def top_section(store, sel: Selection, db: str, rows: int = 25) -> Section:
    from pyproflab.analyses.top import top
    from pyproflab.reports.html import render_html

    cpu = _with(sel, profile_type="cpu")
    s = Section(
        "top",
        "Top CPU functions (merged)",
        [_cmd("top", *_flags(cpu, db), "--nodecount", str(rows), "--format", "json")],
    )
    if store.profiles(cpu).num_rows == 0:
        return s.skip("no CPU profiles in the selection")
    result = top(store.merged_profile(_one(store, cpu, s)), nodecount=rows)
    s.ctx["table"] = Markup(render_html(result, more=_MORE))
    return s


def _flame(store, sel: Selection, s: Section, sample: str, name: str, title: str) -> bool:
    """Add one flame graph of ``sel``'s ``sample`` to ``s``; a profile problem becomes
    a note (the other graph of the section still draws)."""
    try:
        profile = store.merged_profile(_one(store, sel, s, sample))
        s.figures.append((name, flame_graph(profile, sample, title=title)))
    except ProflabError as e:
        s.notes.append(f"no {sample} flame graph: {e}")
        return False
    return True


def flame_section(store, sel: Selection, db: str) -> Section:
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
    if not s.figures:
        s.skipped = True
    return s


def regressions_section(store, sel: Selection, db: str) -> Section:
    from pyproflab.analyses.regressions import regressions
    from pyproflab.reports.regressions import render_html

    cpu = _with(sel, profile_type="cpu")
    s = Section("regressions", "Regressions between versions (CPU)", [])
    by_service = workflows.versions(store, cpu)
    # The first service with two versions to compare.
    found = next(((k, v) for k, v in by_service.items() if len(v) >= 2), None)
    if found is None:
        versions = sorted({v for vs in by_service.values() for v in vs})
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
    svc, versions = found
    pair = workflows.comparison(versions)
    assert pair is not None
    base_v, new_v = pair.base, pair.new
    if pair.note:
        s.notes.append(pair.note)
    if len(by_service) > 1:
        s.notes.append(f"{len(by_service)} services; comparing the versions of {svc}")
        cpu = _with(cpu, service=svc)
    base, new = _with(cpu, version=base_v), _with(cpu, version=new_v)
    s.commands.append(
        _cmd(
            "regressions", "--db", db, "--base", *_kv(base), "--new", *_kv(new), "--format", "json"
        )
    )
    base, new = _one(store, base, s, "cpu"), _one(store, new, s, "cpu")
    result = regressions(store, base, new)
    s.figures.append(("regressions-top", result.figure_top(n=15)))
    s.figures.append(("regressions-flame", _diff_flame(store, base, new, result)))
    s.ctx = {
        "base": base_v,
        "new": new_v,
        "table": Markup(render_html(result, max_rows=15, more=_MORE)),
    }
    return s


_NO_GC = (
    "the store has no GC data (no rows in metric_samples or gc_cycles): collect with "
    "`pyproflab collect` or load with `pyproflab ingest-gc`"
)


def gc_section(store, sel: Selection, db: str) -> Section:
    from pyproflab.analyses.gc import gc
    from pyproflab.reports.gc import render_gc_html

    s = Section(
        "gc", "GC share over time per instance", [_cmd("gc", *_flags(sel, db), "--format", "json")]
    )
    if not any(_gc_rows(store).values()):
        return s.skip(_NO_GC)
    runtime = gc_share_points(store, sel)
    result = gc(store, sel)
    marks = [r for r in result.profiles.to_pylist() if r["profile_gc_share"] is not None]
    fig = gc_share_figure(runtime, marks)
    if not fig.data:
        s.notes += result.notes
        return s.skip(
            "no GC CPU metrics (go_cpu_classes_*) and no CPU profiles for the selected instances"
        )
    fig.update_layout(
        title="GC CPU share over time",
        yaxis_title="% of busy CPU",
        xaxis_title="time (UTC)",
        height=420,
    )
    s.figures.append(("gc-share", fig))
    s.ctx["table"] = Markup(render_gc_html(result, python=False))
    s.notes += result.notes
    return s


def gogc_section(store, sel: Selection, db: str, budget: str | None) -> Section:
    from pyproflab.analyses.gogc import gogc
    from pyproflab.reports.gogc import recommendation_line, render_gogc_html

    used = budget or DEFAULT_BUDGET
    s = Section(
        "gogc",
        "GOGC trade-off and recommendation",
        [_cmd("gogc", *_flags(sel, db), "--budget", used, "--format", "json")],
    )
    if not any(_gc_rows(store).values()):
        return s.skip(_NO_GC)
    try:
        result = gogc(store, sel, budget=used)
    except ProflabError as e:
        return s.skip(f"no GOGC model: {e}")
    if budget is None:
        s.notes.append(
            f"no --budget given: the recommendation is under {DEFAULT_BUDGET} today's peak memory"
        )
    s.figures.append(("gogc-curve", result.figure()))
    s.ctx = {
        "recommendation": recommendation_line(result),
        "table": Markup(render_gogc_html(result)),
    }
    return s


def pgo_section(store, sel: Selection, db: str, edges: int = 15) -> Section:
    import plotly.graph_objects as go

    from pyproflab.analyses.pgo import pgo
    from pyproflab.analyses.pgo_edges import go_binary
    from pyproflab.reports.pgo import render_html

    cpu = _with(sel, profile_type="cpu")
    s = Section(
        "pgo",
        "PGO summary (default.pgo hot edges)",
        [_cmd("pgo", *_flags(cpu, db), "-o", "default.pgo", "--format", "json")],
    )
    if go_binary() is None:
        return s.skip(
            "Go is not installed: the PGO profile cannot be checked with "
            "go tool preprofile, so it is not summarised"
        )
    if store.profiles(cpu).num_rows == 0:
        return s.skip("no CPU profiles in the selection")
    result = pgo(store, _one(store, cpu, s, "cpu"))
    if not result.ok:
        return s.skip(f"no PGO profile: {result.refusal}")
    hot = result.edges.edges[:edges][::-1]  # plotly draws the first bar at the bottom
    names = [plotly_text(f"{e.caller} -> {e.callee} (+{e.offset})") for e in hot]
    fig = go.Figure(
        go.Bar(
            x=[e.share for e in hot],
            y=list(range(len(hot))),
            orientation="h",
            marker={"color": ["#d62728" if e.hot else "#7f7f7f" for e in hot]},
            hovertext=[
                f"{n}<br>weight {e.weight}, {e.share:.2f}%" for n, e in zip(names, hot, strict=True)
            ],
            hoverinfo="text",
        )
    )
    fig.update_layout(
        title=f"Top {len(hot)} call edges by weight (red: inside the compiler's 99% hot cutoff)",
        xaxis_title="share of edge weight (%)",
        yaxis={"tickvals": list(range(len(hot))), "ticktext": names},
        height=max(300, 26 * len(hot) + 120),
        margin={"l": 420},
    )
    s.figures.append(("pgo-edges", fig))
    s.ctx = {
        "inputs": len(result.inputs),
        "edges": len(result.edges),
        "hot": len(result.edges.hot),
        "table": Markup(render_html(result, edges=edges)),
    }
    return s


def _diff_flame(store, base: Selection, new: Selection, result) -> FlameGraph:
    """The new side's CPU, coloured by change from the base side's, per second of
    profile on each side (the base scaled by new duration / base duration)."""
    scale = result.duration_new / result.duration_base if result.duration_base else 1.0
    return flame_graph(
        store.merged_profile(new),
        "cpu",
        base=store.merged_profile(base),
        base_scale=scale,
        title="CPU per second, coloured by change from the base version",
    )
