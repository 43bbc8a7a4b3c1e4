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
- Layout: one function per section (``report_sections``; the GC chart is
  ``gc_timeline``) gathers its data (calling the analysis once) into a
  ``Section``; jinja2 templates (``reports/templates``: the page, one per
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from pyproflab.errors import ProflabError
from pyproflab.reports.flamegraph import FlameGraph, script_json
from pyproflab.reports.report_sections import (
    Section,
    flame_section,
    fleet_section,
    gc_section,
    gogc_section,
    pgo_section,
    regressions_section,
    top_section,
)
from pyproflab.store.select import Selection


@dataclass
class Report:
    """The built report: the page, its sections and how long it took."""

    html: str
    sections: list[Section]
    seconds: float
    charts: int


# --- the page ---------------------------------------------------------------------------


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

    from pyproflab.reports.flamegraph import script as flame_script
    from pyproflab.version import __version__

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
