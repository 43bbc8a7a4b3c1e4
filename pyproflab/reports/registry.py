"""The renderers: which function renders each kind of result in each format.

The one table of ``pyproflab.display``'s interface (read it there): a renderer
is ``function(result, /, **options)``, returning the text of a format (text,
json, csv; html is a ``<div>``) or a figure. Importing this module changes
nothing; the modules named here load when they first render. Adding a result:
its renderers in ``reports/NAME.py``, one row per format here.
"""

from __future__ import annotations

A = "pyproflab.analyses."
R = "pyproflab.reports."


def _rows(cls: str, module: str, **functions: str) -> dict[tuple[str, str], tuple[str, str]]:
    return {(cls, kind): (R + module, fn) for kind, fn in functions.items()}


# (result class "module.QualName", format or kind) -> (module, function)
RENDERERS: dict[tuple[str, str], tuple[str, str]] = {
    **_rows(
        A + "top.TopResult",
        "top",
        text="render_text",
        json="render_json",
        csv="render_csv",
        html="render_html",
        header_lines="header_lines",
    ),
    **_rows(A + "tree.TreeResult", "tree", text="render_tree_text", html="render_tree_html"),
    **_rows(
        A + "source_list.ListResult",
        "source_list",
        text="render_list_text",
        html="render_list_html",
    ),
    **_rows(A + "traces.TracesResult", "traces", text="render_text"),
    **_rows(A + "flame.FlameGraph", "flamegraph", html="render_html"),
    **_rows(
        A + "gc.GcResult",
        "gc",
        text="render_text",
        json="render_json",
        csv="render_csv",
        html="render_gc_html",
    ),
    **_rows(A + "gc_categories.GcCategoriesResult", "gc", html="categories_html"),
    **_rows(
        A + "gogc.GogcResult",
        "gogc",
        text="render_text",
        json="render_json",
        csv="render_csv",
        html="render_gogc_html",
        figure="gogc_figure",
    ),
    **_rows(
        A + "regressions.result.RegressionsResult",
        "regressions",
        text="render_text",
        json="render_json",
        csv="render_csv",
        html="render_html",
        figure_top="figure_top",
    ),
    **_rows(
        A + "regressions.over_time.OverTimeResult",
        "regressions",
        text="render_over_time_text",
        json="render_over_time_json",
        csv="render_over_time_csv",
        html="render_over_time_html",
    ),
    **_rows(A + "pgo.PgoResult", "pgo", text="render_text", json="render_json", html="render_html"),
    **_rows(A + "pgo_edges.EdgeDiff", "pgo", text="diff_text", json="render_diff_json"),
    **_rows(
        A + "pgo_check.PgoCheckResult",
        "pgo_check",
        text="render_text",
        json="render_json",
        html="render_html",
    ),
    **_rows(
        A + "pgo_weights.WeightComparison",
        "pgo_weights",
        text="render_text",
        json="render_json",
        html="render_html",
    ),
    **_rows(
        A + "pgo_effect.PgoEffect",
        "pgo_effect",
        text="render_text",
        json="render_json",
        html="render_html",
    ),
    # The execution-trace questions' results (analyses.gotrace_answers): each a TraceAnswer.
    **_rows(
        A + "gotrace_data.TraceAnswer",
        "gotrace",
        text="render_text",
        json="render_json",
        csv="render_csv",
        html="render_html",
    ),
    # Plain Arrow tables (the store's profile list, ...).
    **_rows(
        "pyarrow.lib.Table",
        "tables",
        text="render_text",
        json="render_json",
        csv="render_csv",
        html="render_html",
    ),
}
