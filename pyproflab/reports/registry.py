"""Which report function renders what, for the result objects' own methods.

See ``pyproflab.display``: a result's ``_repr_html_`` or ``figure()`` asks for a
kind by name; ``RENDERERS`` answers with a function of this layer. It is a
plain table: importing this module changes nothing, and ``display`` reads it
when a result first renders; the modules named here load when first used.
"""

from __future__ import annotations

from typing import Any

A = "pyproflab.analyses."
R = "pyproflab.reports."

# (result class "module.QualName", kind) -> (module, function, default keyword arguments)
RENDERERS: dict[tuple[str, str], tuple[str, str, dict[str, Any]]] = {
    (A + "top.TopResult", "html"): (R + "html", "render_html", {"max_rows": 200}),
    (A + "top.TopResult", "header_lines"): (R + "text", "header_lines", {}),
    (A + "top.TopResult", "text"): (R + "text", "render_text", {}),
    (A + "tree.TreeResult", "text"): (R + "tree", "render_tree_text", {}),
    (A + "source_list.ListResult", "text"): (R + "source_list", "render_list_text", {}),
    (A + "gc.GcResult", "html"): (R + "gc", "render_gc_html", {}),
    (A + "gc_categories.GcCategoriesResult", "html"): (R + "gc", "categories_html", {}),
    (A + "gogc.GogcResult", "html"): (R + "gogc", "render_gogc_html", {}),
    (A + "gogc.GogcResult", "figure"): (R + "gogc", "gogc_figure", {}),
    (A + "regressions.result.RegressionsResult", "html"): (
        R + "regressions",
        "render_html",
        {"max_rows": 50},
    ),
    (A + "regressions.result.RegressionsResult", "figure_top"): (
        R + "regressions",
        "figure_top",
        {},
    ),
    (A + "regressions.result.RegressionsResult", "figure_flame"): (
        R + "regressions",
        "figure_flame",
        {},
    ),
    (A + "regressions.over_time.OverTimeResult", "html"): (
        R + "regressions",
        "render_over_time_html",
        {},
    ),
    (A + "pgo.PgoResult", "html"): (R + "pgo", "render_html", {}),
    (A + "pgo_edges.EdgeDiff", "text"): (R + "pgo", "diff_text", {}),
}
