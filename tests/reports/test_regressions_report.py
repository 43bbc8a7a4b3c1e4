"""The regressions report says what it shows (issue 34, defect 2).

On the recorded demo run (v1 against v2, shares, the quasi-Poisson test):

- the chart of the top flat changes draws only rows whose flat share changed,
  and its caption, title and axis name the measure (share), the intervals
  (Wald, unadjusted) as the analysis computed them, never "cores" or "bootstrap";
- the text and HTML tables label the intervals: "unadj." for each row's own,
  and the FCR interval of the selected rows in a column of its own.
"""

from __future__ import annotations

import pytest
from support.browser.stores import demo_store


@pytest.fixture(scope="module")
def result():
    from pyproflab.analyses.regressions import regressions
    from pyproflab.store import Selection, Store

    with Store.open(demo_store(), read_only=True) as s:
        return regressions(
            s,
            Selection(version="v1", profile_type="cpu"),
            Selection(version="v2", profile_type="cpu"),
        )


def test_chart_draws_what_its_caption_says(result) -> None:
    pytest.importorskip("plotly")
    from pyproflab.reports.regressions import figure_caption

    assert result.measure == "share" and result.test == "quasi-poisson"
    fig = result.figure_top(n=15, metric="flat")
    xs = list(fig.data[0].x)
    assert xs and all(x != 0 for x in xs)
    flat = {r["label"]: r["flat_change"] for r in result.rows.to_pylist()}
    assert sorted(abs(x) for x in xs)[::-1] == pytest.approx(
        sorted((100 * abs(v) for v in flat.values() if v), reverse=True)[: len(xs)]
    )  # percentage points
    words = " ".join([fig.layout.title.text, fig.layout.xaxis.title.text, figure_caption(result)])
    assert "share" in words and "Wald" in words and "unadjusted" in words
    assert "cores" not in words and "bootstrap" not in words


def test_chart_is_in_the_unit_its_axis_names(result) -> None:
    """Shares are drawn in percentage points, as the axis says and the text prints
    them (+5.28 pp): the dots were fractions of 1 under that axis (0.0433 for +4.33 pp)."""
    pytest.importorskip("plotly")
    from pyproflab.reports.formatting import plotly_text

    fig = result.figure_top(n=5, metric="flat")
    assert "percentage points" in fig.layout.xaxis.title.text
    by_label = {plotly_text(r["label"]): r for r in result.rows.to_pylist()}
    labels = [by_label[t] for t in fig.layout.yaxis.ticktext]
    for x, plus, minus, r in zip(
        fig.data[0].x,
        fig.data[0].error_x.array,
        fig.data[0].error_x.arrayminus,
        labels,
        strict=True,
    ):
        assert x == pytest.approx(100 * r["flat_change"])
        assert x + plus == pytest.approx(100 * r["flat_change_hi"])
        assert x - minus == pytest.approx(100 * r["flat_change_lo"])


def test_tables_label_their_intervals(result) -> None:
    from pyproflab.reports import render

    text = render(result, "text")
    assert "95% interval, unadj." in text and "rel interval, unadj." in text
    assert "FCR rel interval" in text
    assert "Intervals: 'unadj.' is each row's own 95% Wald interval" in text
    html = render(result, "html")
    assert "95% interval, unadj." in html and "FCR rel interval" in html


def test_html_table_has_the_texts_columns_and_cells(result) -> None:
    """The HTML table (notebook, report) is the text's: the same heads and, row by row,
    the same cells (it lacked the unadjusted rel interval and detect columns, and left
    'sig' blank for an untested row where text says 'untested')."""
    import html
    import re

    from pyproflab.reports import render
    from pyproflab.reports.regressions import _cells, _head

    markup = render(result, "html")
    heads = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", markup)]
    assert heads == _head(result)
    rows = re.findall(r"<tr>(<td>.*?)</tr>", markup)
    got = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)] for row in rows]
    assert got == _cells(result, result.rows.to_pylist())
    assert any(r[10] == "untested" for r in got) or all(result.rows.column("flat_tested"))


def test_text_header_gives_each_sides_total_in_its_unit(result) -> None:
    """The Base and New lines printed the totals as raw integers of the sample
    type's unit ("26 profiles, 523.3s, total 34120000000"); they are scaled as
    pprof's labels are and say what they total."""
    from pyproflab.analyses.units import label
    from pyproflab.reports.regressions import header_lines

    base, new = header_lines(result)[1:3]
    assert result.sample_type.unit == "nanoseconds"
    for line, total in ((base, result.total_base), (new, result.total_new)):
        assert line.endswith(f"s, {label(total, 'nanoseconds')} of cpu"), line
        assert str(total) not in line and " profiles over " in line


def test_over_time_text_says_its_times_are_utc():
    """Over-time text printed its window and change times in UTC without saying so,
    beside ``top``'s header in the local zone (as pprof's): a reader in Los Angeles
    took 2023-11-14 22:13:20 for local time, 8 hours off."""
    from datetime import UTC, datetime

    from support.store_helpers import make_profile

    from pyproflab.analyses.regressions.over_time import over_time
    from pyproflab.reports import render
    from pyproflab.store import Store
    from pyproflab.store.ingest import ProfileMeta, ingest
    from pyproflab.store.select import Selection

    t0 = 170_000_000 * 10**10
    items = []
    for w in range(7):
        a = 10 if w < 3 else 30
        rows = [(["main.a", "main.main"], [a, a * 10**7]), (["main.b", "main.main"], [50, 10**9])]
        p = make_profile(rows, time_nanos=t0 + w * 10**10, duration_nanos=10**10)
        items.append((p, ProfileMeta(service="s", version="v", instance="i")))
    with Store.open(":memory:") as store:
        ingest(store, items, content_hashes=[f"h{i}" for i in range(len(items))])
        res = over_time(store, Selection(service="s"))
    first = datetime.fromtimestamp(t0 // 10**9, UTC)
    lines = render(res, "text").splitlines()
    assert f"windows {first:%Y-%m-%d %H:%M:%S} .. " in lines[0] and " UTC, rates" in lines[0]
    head = next(line for line in lines if "window" in line and "status" in line)
    assert head.split()[:2] == ["time", "(UTC)"]
    assert "time (UTC)" in render(res, "html")
