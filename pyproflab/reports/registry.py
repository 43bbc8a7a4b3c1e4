"""Which report function renders what, for the result objects' own methods.

See ``pyproflab.display``: a result's ``_repr_html_`` or ``figure()`` asks for a
kind by name; this table answers with a function of this layer. Importing it
only fills the table; the modules named here load when first used.
"""

from __future__ import annotations

from pyproflab.display import register

A = "pyproflab.analyses."
R = "pyproflab.reports."

register(A + "top.TopResult", "html", R + "html", "render_html", max_rows=200)
register(A + "top.TopResult", "header_lines", R + "text", "header_lines")
register(A + "top.TopResult", "text", R + "text", "render_text")
register(A + "gc.GcResult", "html", R + "gc", "render_gc_html")
register(A + "gc_categories.GcCategoriesResult", "html", R + "gc", "categories_html")
register(A + "gogc.GogcResult", "html", R + "gogc", "render_gogc_html")
register(A + "gogc.GogcResult", "figure", R + "gogc", "gogc_figure")
register(A + "gogc_model.FittedAdvice", "html", R + "gogc_fitted", "render_html_div")
register(A + "gogc_model.FittedAdvice", "figure", R + "gogc_fitted", "fitted_figure")
register(A + "regressions.RegressionsResult", "html", R + "regressions", "render_html", max_rows=50)
register(A + "regressions.RegressionsResult", "figure_top", R + "regressions", "figure_top")
register(A + "regressions.RegressionsResult", "figure_flame", R + "regressions", "figure_flame")
register(A + "pgo.PgoResult", "html", R + "pgo", "render_html")
register(A + "pgo_edges.EdgeDiff", "text", R + "pgo", "diff_text")
