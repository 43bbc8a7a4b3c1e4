"""Figures that show in JupyterLab and survive export to HTML, offline.

plotly's default in a kernel is its mime type only (``application/vnd.plotly.v1+json``):
JupyterLab draws it, but ``jupyter nbconvert --to html`` cannot represent it and
drops every figure. Rule: ``use_offline_figures`` makes each figure carry both the
mime type (for JupyterLab) and an HTML form; the first figure's HTML embeds
plotly.js once (no CDN), the later ones use it. Nothing changes until it is called
(importing pyproflab leaves plotly's settings alone).
"""

from __future__ import annotations

RENDERER = "plotly_mimetype+notebook"


def use_offline_figures() -> None:
    """Make plotly figures render as mime type and as offline HTML (see the module rules)."""
    import plotly.io as pio

    pio.renderers.default = RENDERER
