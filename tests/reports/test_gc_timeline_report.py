"""The report's GC share chart keeps instance names out of plotly's hover
templates: a name is data, and ``%{y}`` in one was substituted."""

from __future__ import annotations

from datetime import UTC, datetime

from pyproflab.reports.gc_timeline import gc_share_figure


def test_an_instance_name_is_not_read_as_a_hover_template():
    at = datetime(2026, 11, 22, 10, tzinfo=UTC)
    name = "i-%{y}<b>"
    runtime = {("api", "v1", name): [(at, 0.125)]}
    marks = [{"instance": name, "at": at, "profile_gc_share": 0.2, "profile_gc_mark_share": 0.1}]
    fig = gc_share_figure(runtime, marks)
    assert len(fig.data) == 3
    for trace in fig.data:
        assert "%{y}<" not in trace.hovertemplate.replace("%{y:.1f}", "")
        assert trace.hovertemplate == "%{y:.1f}%<extra>%{fullData.name}</extra>"
        assert trace.name.startswith("i-%{y}&lt;b&gt; ")  # escaped for plotly's text
