"""``pyproflab report``: one self-contained, offline HTML file of what
``workflows.report`` found about a selection of a store.

Rules:

- One file: plotly.js is embedded once (no CDN, no ``<script src>``, no
  external style or font); each chart is a ``<div class="chart">`` holding
  one plotly div and the script that draws it.
- Sections, in ``workflows.report``'s order; a section it skipped stays in
  the file with its note saying why. Every section names the command that
  gives the same data as text or JSON.
- Layout: one function per section (``report_sections``; the GC chart is
  ``gc_timeline``) turns its results into what its template shows and its
  figures; jinja2 templates (``reports/templates``: the page, one per section)
  lay it out, with autoescaping on, so a value reaches the page as text
  unless the code wraps it in ``Markup`` (plotly.js, plotly's chart HTML, the
  tables our renderers already escaped, the manifest JSON).
- Untrusted text (names from profiles, label values, store paths) reaches the
  page only escaped: ``html.escape`` in markup; plotly text via
  ``formatting.plotly_text``; JSON inside ``<script>`` with ``<``, ``>``, ``&``
  and U+2028/9 as ``\\uXXXX`` (plotly's own JSON does the same), so no name can
  end a script block early or inject markup.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup

from pyproflab.analyses.flame import FlameGraph
from pyproflab.reports import report_sections
from pyproflab.reports.flamegraph import script_json


@dataclass
class Report:
    """The rendered report: the page, its sections, how long rendering took and
    how many charts it draws."""

    html: str
    sections: list
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


def render_report(
    sections, *, db: str = "pyproflab.duckdb", selection: str = "", title: str | None = None
) -> Report:
    """The report page of ``sections`` (``workflows.report.sections``; see the
    module rules). ``db`` is the store path shown in the page; ``selection``
    describes the selection (empty: everything)."""
    import plotly
    from plotly.offline import get_plotlyjs

    from pyproflab.reports.flamegraph import script as flame_script
    from pyproflab.version import __version__

    started = time.perf_counter()
    shown = {}
    for sec in sections:
        shown[sec.id] = getattr(report_sections, sec.id)(sec.found) if not sec.skipped else ({}, [])
    heading = title or "pyproflab report"
    charts = {
        sid: [(name, Markup(_figure_html(fig, f"chart-{name}"))) for name, fig in figures]
        for sid, (_, figures) in shown.items()
    }
    manifest = [
        {
            "id": sec.id,
            "title": sec.title,
            "commands": sec.commands,
            "skipped": sec.skipped,
            "notes": sec.notes,
            "charts": [n for n, _ in shown[sec.id][1]],
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
            selection=selection or "everything",
            generated=f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S}",
            version=__version__,
            plotly_version=plotly.__version__,
            # Each section as its template reads it: its fields and its ``ctx``.
            sections=[vars(sec) | {"ctx": shown[sec.id][0]} for sec in sections],
            charts=charts,
            manifest=Markup(script_json({"db": db, "selection": selection, "sections": manifest})),
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
