"""``lab.profiles(...)`` and ``lab.sql(...)`` in a notebook showed pyarrow's repr:
the schema, then each column's values on one line (``profile_id: [[1,2,3,...]]``,
a profile list of 26 columns as 26 lines of hashes and lists). After
``pyproflab.notebook()``, IPython shows an Arrow table as an HTML table of its
first rows; the value is still a ``pyarrow.Table``, and its repr pyarrow's.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from support.testenv import RECORDED_GO

import pyproflab
from pyproflab.reports.tables import render_html


@pytest.fixture
def shell():
    """An IPython shell as a kernel has one; plotly's renderer put back after."""
    import plotly.io as pio
    from IPython.core.interactiveshell import InteractiveShell

    renderer = pio.renderers.default
    shell = InteractiveShell.instance()
    try:
        yield shell
    finally:
        InteractiveShell.clear_instance()
        pio.renderers.default = renderer


def _cells(page: str) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    return [re.findall(r"<td>(.*?)</td>", r) for r in rows]


def test_lab_tables_show_as_rows_in_a_notebook(shell) -> None:
    lab = pyproflab.open(":memory:")
    lab.ingest([RECORDED_GO / "cpu.pb.gz", RECORDED_GO / "heap.pb.gz"], service="a<b>")
    pyproflab.notebook()
    profiles = lab.profiles()
    counted = lab.sql("SELECT profile_type, count(*) AS n FROM profiles GROUP BY 1 ORDER BY 1")
    assert isinstance(profiles, pa.Table) and repr(counted).startswith("pyarrow.Table")
    page = shell.display_formatter.format(counted)[0]["text/html"]
    assert "2 rows, 2 columns" in page and "<th>n<br><small>int64</small></th>" in page
    assert _cells(page) == [["cpu", "1"], ["heap", "1"]]
    page = shell.display_formatter.format(profiles)[0]["text/html"]
    assert f"2 rows, {profiles.num_columns} columns" in page
    service = profiles.column_names.index("service")
    assert [row[service] for row in _cells(page)] == ["a&lt;b&gt;"] * 2  # escaped


def test_a_long_table_shows_its_first_rows_and_cut_cells() -> None:
    table = pa.table({"x": list(range(100)), "x2": ["v" * 200] * 100})
    page = render_html(table)
    assert "100 rows, 2 columns; the first 30 shown" in page
    cells = _cells(page)
    assert [c[0] for c in cells] == [str(i) for i in range(30)]
    assert cells[0][1] == "v" * 79 + "\u2026"
    dup = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    assert _cells(render_html(dup)) == [["1", "2"]]  # columns of one name both shown
