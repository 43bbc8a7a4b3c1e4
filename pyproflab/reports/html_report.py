"""``pyproflab report``: one self-contained, offline HTML file about a selection of a store.

Rules:

- One file: plotly.js is embedded once (no CDN, no ``<script src>``, no
  external style or font); each chart is a ``<div class="chart">`` holding
  one plotly div and the script that draws it.
- Sections, in order: fleet summary, top CPU functions, flame graph of the
  merged CPU and of alloc_space, regressions (the newest version against the
  one before it, ``workflows.comparison``), GC share over time per
  instance, the GOGC curve and recommendation, the PGO summary. A section that
  has nothing to show (no CPU profiles, one version, no GC tables or data, no
  Go) stays in the file with a note saying why.
- Every section names the command that gives the same data as text or JSON.
- Layout: one function per section gathers its data (calling the analysis once)
  into a ``Section``; jinja2 templates (``reports/templates``: the page, one per
  section) lay it out, with autoescaping on, so a value reaches the page as text
  unless the code wraps it in ``Markup`` (plotly.js, plotly's chart HTML, the
  tables our report functions already escaped, the manifest JSON).
- Untrusted text (names from profiles, label values, store paths) reaches the
  page only escaped: ``html.escape`` in markup; plotly text via
  ``flame.plotly_text``; JSON inside ``<script>`` with ``<``, ``>``, ``&`` and
  U+2028/9 as ``\\uXXXX`` (plotly's own JSON does the same), so no name can
  end a script block early or inject markup.
- A section about one kind of profile (CPU, alloc_space) merges only one
  mergeable kind of it (``store.kinds.one_kind``): a profile of another period
  or sample type is left out with a note, it does not take the section down.
- GC sections need GC data: with no rows in metric_samples or gc_cycles they
  say so in one line and draw nothing.
- Text for the offline page never points at Python (no ``.to_pandas()``): rows
  a table cuts are behind the section's command.
- A section fails only on a user-level problem (``ProflabError``), which
  becomes its note; anything else is a bug and propagates.
"""

from __future__ import annotations

import functools
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from pyproflab import workflows
from pyproflab.errors import ProflabError
from pyproflab.reports.flame import plotly_text
from pyproflab.reports.flamegraph import FlameGraph, flame_graph, script_json
from pyproflab.store import queries
from pyproflab.store.kinds import one_kind
from pyproflab.store.select import Selection

# Default GOGC budget when none is given: relative to today's peak memory, so
# the recommendation answers "what does 50% more memory buy?".
DEFAULT_BUDGET = "1.5x"

_CPU_GC = "go_cpu_classes_gc_total_cpu_seconds_total"
_CPU_TOTAL = "go_cpu_classes_total_cpu_seconds_total"
_CPU_IDLE = "go_cpu_classes_idle_cpu_seconds_total"


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


@dataclass
class Report:
    """The built report: the page, its sections and how long it took."""

    html: str
    sections: list[Section]
    seconds: float
    charts: int


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


def _series(rows: list[dict[str, Any]]) -> dict[tuple, list[tuple[datetime, float]]]:
    """(instance, metric) -> [(time, value)] of its fullest label series."""
    by: dict[tuple, dict[str, list]] = {}
    for r in rows:
        key = (r["service"], r["version"], r["instance"], r["metric"])
        by.setdefault(key, {}).setdefault(r["labels"], []).append((r["time"], r["value"]))
    out = {}
    for key, series in by.items():
        best = max(series.items(), key=lambda kv: (len(kv[1]), kv[0]))[1]
        out[key] = sorted(best)
    return out


def gc_share_points(store, sel: Selection) -> dict[tuple, list[tuple[datetime, float]]]:
    """Runtime view between consecutive scrapes, per (service, version, instance):
    GC CPU / busy CPU (the increase of the go_cpu_classes counters, as ``gc`` computes
    ``gc_cpu_fraction_busy`` over a window). Steps with a counter reset are skipped."""
    if "metric_samples" not in queries.table_names(store):
        return {}
    inst = store.profiles(sel).select(["instance"]).column(0).to_pylist()
    inst = sorted({i for i in inst if i is not None})
    if not inst:
        return {}
    service = sel.service if isinstance(sel.service, str) else None
    rows = queries.instance_metric_samples(
        store, [_CPU_GC, _CPU_TOTAL, _CPU_IDLE], inst, service
    ).to_pylist()
    series = _series(rows)
    out: dict[tuple, list[tuple[datetime, float]]] = {}
    for (svc, ver, ins, metric), pts in series.items():
        if metric != _CPU_GC:
            continue
        total = dict(series.get((svc, ver, ins, _CPU_TOTAL), []))
        idle = dict(series.get((svc, ver, ins, _CPU_IDLE), []))
        line = []
        for (t0, g0), (t1, g1) in zip(pts, pts[1:], strict=False):
            if not all(t in total and t in idle for t in (t0, t1)):
                continue
            dg, dt, di = g1 - g0, total[t1] - total[t0], idle[t1] - idle[t0]
            if dg < 0 or dt <= 0 or di < 0 or dt - di <= 0:
                continue
            line.append((t0 + (t1 - t0) / 2, dg / (dt - di)))
        if line:
            out[(svc, ver, ins)] = line
    return out


_NO_GC = (
    "the store has no GC data (no rows in metric_samples or gc_cycles): collect with "
    "`pyproflab collect` or load with `pyproflab ingest-gc`"
)

# One colour per instance, shared by its runtime line and its profile markers.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


def _profile_time(r: dict[str, Any]) -> datetime | None:
    """Where a profile sits on a time axis: the middle of its collection window,
    else the time it was taken (files carry no window), else nowhere."""
    if r.get("window_start") is not None and r.get("window_end") is not None:
        return r["window_start"] + (r["window_end"] - r["window_start"]) / 2
    return r.get("time")


def _gc_figure(runtime: dict[tuple, list], marks: list[dict[str, Any]]):
    """The GC share chart: a line per instance (runtime view) and that instance's
    profile markers in the same colour."""
    import plotly.graph_objects as go

    def label(inst: Any) -> str:
        return "(no instance)" if inst is None else str(inst)

    instances = sorted({k[2] for k in runtime} | {r["instance"] for r in marks}, key=label)
    colour = {inst: _PALETTE[i % len(_PALETTE)] for i, inst in enumerate(instances)}
    fig = go.Figure()
    for key in sorted(runtime, key=lambda k: tuple(map(str, k))):
        pts, inst = runtime[key], key[2]
        name = plotly_text(f"{label(inst)} runtime")
        fig.add_trace(
            go.Scatter(
                x=[t for t, _ in pts],
                y=[100 * v for _, v in pts],
                mode="lines+markers",
                line={"color": colour[inst]},
                marker={"color": colour[inst]},
                name=name,
                legendgroup=plotly_text(label(inst)),
                hovertemplate="%{y:.1f}%<extra>" + name + "</extra>",
            )
        )
    for inst in instances:
        rs = [(t, r) for r in marks if r["instance"] == inst if (t := _profile_time(r))]
        for col, what, symbol in (
            ("profile_gc_share", "profile view", "diamond"),
            ("profile_gc_mark_share", "profile mark", "circle-open"),
        ):
            if not rs:
                continue
            name = plotly_text(f"{label(inst)} {what}")
            fig.add_trace(
                go.Scatter(
                    x=[t for t, _ in rs],
                    y=[100 * (r[col] or 0) for _, r in rs],
                    mode="markers",
                    marker={"symbol": symbol, "size": 12, "color": colour[inst]},
                    name=name,
                    legendgroup=plotly_text(label(inst)),
                    hovertemplate="%{y:.1f}%<extra>" + name + "</extra>",
                )
            )
    return fig


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
    fig = _gc_figure(runtime, marks)
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


# --- the page ---------------------------------------------------------------------------


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


def _figure_html(fig, div_id: str) -> str:
    if isinstance(fig, FlameGraph):
        return fig.html(div_id, with_script=False)
    import plotly.io as pio

    return pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def build_report(
    store,
    selection: Selection | None = None,
    *,
    db: str = "pyproflab.duckdb",
    title: str | None = None,
    budget: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Build the report page (see the module rules). ``db`` is the store path shown in
    the page and in the commands; ``budget`` is the GOGC memory budget; ``progress``
    is called with (sections done, sections) as each section is built."""
    import plotly
    from plotly.offline import get_plotlyjs

    from pyproflab import __version__
    from pyproflab.reports.flamegraph import script as flame_script

    started = time.perf_counter()
    sel = selection or Selection()
    sections = []
    makers: list[tuple[Callable[..., Section], tuple]] = [
        (fleet_section, ()),
        (top_section, ()),
        (flame_section, ()),
        (regressions_section, ()),
        (gc_section, ()),
        (gogc_section, (budget,)),
        (pgo_section, ()),
    ]
    for i, (make, extra) in enumerate(makers):
        if progress:
            progress(i, len(makers))
        sections.append(_guard(make, store, sel, db, *extra))
    if progress:
        progress(len(makers), len(makers))

    heading = title or "pyproflab report"
    charts = {
        sec.id: [(name, Markup(_figure_html(fig, f"chart-{name}"))) for name, fig in sec.figures]
        for sec in sections
    }
    manifest = [
        {
            "id": sec.id,
            "title": sec.title,
            "commands": sec.commands,
            "skipped": sec.skipped,
            "notes": sec.notes,
            "charts": [n for n, _ in sec.figures],
        }
        for sec in sections
    ]
    page = (
        _templates()
        .get_template("report.html.j2")
        .render(
            heading=heading,
            # plotly.js, embedded once; it contains no "</script" (checked by the tests).
            plotlyjs=Markup(get_plotlyjs()),
            flamejs=Markup(flame_script()),
            db=db,
            selection=sel.describe() or "everything",
            generated=f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S}",
            version=__version__,
            plotly_version=plotly.__version__,
            sections=sections,
            charts=charts,
            manifest=Markup(
                script_json({"db": db, "selection": sel.describe(), "sections": manifest})
            ),
        )
    )
    n_charts = sum(len(c) for c in charts.values())
    return Report(page, sections, time.perf_counter() - started, n_charts)


@functools.cache
def _templates():
    """The report's jinja2 environment: templates from the package, autoescaping on
    (every value is text unless passed as ``Markup``), undefined names an error."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("pyproflab.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
    )


def _guard(make, store, sel: Selection, db: str, *args: Any) -> Section:
    try:
        return make(store, sel, db, *args)
    except ProflabError as e:
        name = make.__name__.removesuffix("_section")
        return Section(name, name, []).skip(f"{name}: {e}")
