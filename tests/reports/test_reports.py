"""Renderings of TopResult: text like pprof, JSON, CSV, HTML (escaped)."""

from __future__ import annotations

import csv
import io
import json

from support.top_unit_helpers import FUNCS, MAPS, build

from pyproflab.analyses import units
from pyproflab.analyses.top import top
from pyproflab.reports import render


def profile():
    funcs = FUNCS + [(9, 'evil<img src=x onerror="1">&', "/x.go")]
    return build(
        samples=[([3, 2, 1], [1_500_000_000]), ([9, 1], [20_000_000]), ([1], [5_000_000])],
        locations=[(1, 1, [(1, 10)]), (2, 1, [(2, 20)]), (3, 1, [(3, 30)]), (9, 1, [(9, 1)])],
        functions=funcs,
        mappings=MAPS,
        duration_nanos=2_000_000_000,
    )


def test_text_layout_like_pprof():
    out = render(top(profile()), "text")
    lines = out.splitlines()
    assert lines[0] == "File: app"
    assert lines[1] == "Type: cpu"
    assert lines[2] == "Duration: 2s, Total samples = 1525ms (76.25%)"
    assert lines[3] == "Showing nodes accounting for 1525ms, 100% of 1525ms total"
    assert lines[4] == "      flat  flat%   sum%        cum   cum%"
    assert lines[5] == "    1500ms 98.36% 98.36%     1500ms 98.36%  main.b"


def test_text_exact():
    out = render(top(profile()), "text", exact=True)
    assert "1500000000 98.36% 98.36% 1500000000 98.36%  main.b" in out


def test_json_exact_and_sorted():
    doc = json.loads(render(top(profile()), "json"))
    assert doc["total"] == 1_525_000_000
    assert doc["rows"][0]["flat"] == 1_500_000_000
    assert list(doc) == sorted(doc)


def test_csv_columns():
    rows = list(csv.reader(io.StringIO(render(top(profile()), "csv"))))
    assert rows[0] == ["flat", "flat_pct", "sum_pct", "cum", "cum_pct", "name", "label", "inline"]
    assert rows[1][0] == "1500000000" and rows[1][5] == "main.b"
    rows = list(csv.reader(io.StringIO(render(top(profile(), granularity="lines"), "csv"))))
    assert rows[0][6:8] == ["file", "line"]
    assert rows[1][6:9] == ["/src/b.go", "30", "main.b /src/b.go:30"]


def test_html_escapes():
    out = render(top(profile()), "html")
    assert "<img" not in out and "&lt;img" in out


def test_html_percentages_are_the_texts():
    """Under 1% pprof prints two significant digits, 100% as such: the HTML cells too
    (they printed 0.02% where text said 0.017%, 100.00% for 100%)."""
    import re

    p = build(
        samples=[([2, 1], [999_830]), ([3, 1], [170])],
        locations=[(1, 1, [(1, 10)]), (2, 1, [(2, 20)]), (3, 1, [(3, 30)])],
        functions=FUNCS,
        mappings=MAPS,
    )
    result = top(p, node_fraction=0)
    text = render(result, "text").splitlines()[-result.rows.num_rows :]
    want = [re.findall(r"\S+%", line) for line in text]
    cells = re.findall(r"<tr>(.*?)</tr>", render(result, "html"))[1:]
    got = [re.findall(r"<td>([^<]*%)</td>", row) for row in cells]
    assert got == want
    assert ["0.017%", "100%", "0.017%"] in want


def test_units():
    assert units.scaled_label(1536, "bytes", "minimum") == "1.50kB"
    assert units.scaled_label(0, "bytes", "minimum") == "0"
    assert units.percentage(1, 3) == "33.33%"
    assert units.percentage(1, 1000) == "  0.1%"
    assert units.percentage(5, 5) == "  100%"


# --- the text grid of the other reports (rich) -----------------------------------------


def test_grid_aligns_by_terminal_cells_and_keeps_names_inert():
    from pyproflab.reports.formatting import grid

    lines = grid(
        ["name", "value"],
        [["[bold]x[/bold]", "1"], ["a\x1b[31mred", "22"], ["日本", "333"], ["", "4"]],
        "lr",
    )
    assert lines == [
        "name            value",
        "[bold]x[/bold]      1",  # rich markup in a name stays text
        "a\\x1b[31mred       22",  # a control character cannot reach the terminal
        "日本              333",  # a wide character takes two cells
        "                    4",
    ]
    assert grid(["a", "b"], [], "rl") == ["a  b"]
    assert grid([], [[], []], "") == ["", "", ""]


def _strict(text: str):
    """Parse as a strict JSON parser does: NaN and Infinity are not JSON."""

    def refuse(token: str):
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_text_writes_what_json_has():
    from datetime import UTC, datetime

    from pyproflab.reports.formatting import json_text

    when = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    doc = {"b": [float("nan"), 1.5, (float("inf"), -float("inf"))], "a": {"t": when, "n": None}}
    text = json_text(doc)
    assert _strict(text) == {
        "a": {"n": None, "t": "2026-11-28T12:00:00+00:00"},
        "b": [None, 1.5, [None, None]],
    }
    assert text.index('"a"') < text.index('"b"') and text.endswith("}\n")


def test_an_undefined_change_is_null_in_json():
    """A relative change with a zero side is undefined (NaN): the JSON says null,
    where it once wrote the NaN token no strict parser reads."""
    from pyproflab.analyses.pgo_effect import Change, PgoEffect

    change = Change("cpu", "cores", 0.0, 1.2, *(3 * [float("nan")]), n_before=3, n_after=3)
    doc = _strict(render(PgoEffect("v1", "v2", cpu=change), "json"))
    assert doc["cpu"]["rel"] is None and doc["cpu"]["after"] == 1.2
