"""Figures that show in JupyterLab and survive export to HTML, offline; Arrow tables as tables.

plotly's default in a kernel is its mime type only (``application/vnd.plotly.v1+json``):
JupyterLab draws it, but ``jupyter nbconvert --to html`` cannot represent it and
drops every figure. Rule: ``use_offline_figures`` makes each figure carry both the
mime type (for JupyterLab) and an HTML form; the first figure's HTML embeds
plotly.js once (no CDN), the later ones use it. Nothing changes until it is called
(importing pyproflab leaves plotly's settings alone).

``show_tables`` makes IPython show an Arrow table (``lab.profiles``,
``lab.sql``, a profile's tables) as the HTML table of its first rows
(``reports.tables.render_html``) instead of pyarrow's column dump; ``print``
and ``repr`` stay pyarrow's, and the tables stay ``pyarrow.Table`` (callers
use ``num_rows``, ``to_pandas()``, ``to_pylist()``). Outside IPython it does
nothing.
"""

from __future__ import annotations

RENDERER = "plotly_mimetype+notebook"


def use_offline_figures() -> None:
    """Make plotly figures render as mime type and as offline HTML (see the module rules)."""
    import plotly.io as pio

    pio.renderers.default = RENDERER


def show_tables() -> None:
    """Show Arrow tables as HTML tables in IPython (see the module rules)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import pyarrow as pa

    from pyproflab.reports.tables import render_html

    shell.display_formatter.formatters["text/html"].for_type(pa.Table, render_html)
