"""The lab notebooks (notebooks/*.ipynb): committed clean, and they run.

Rules checked:

- Each notebook is committed without outputs or execution counts.
- Its first cell is the parameters cell (tag ``parameters``) setting ``STORE``
  and ``SERVICE``; there is markdown explaining the charts.
- Executed headless with nbclient on a short demo run's store (parameters
  injected papermill-style in a cell after the parameters cell), no cell
  errors, nothing printed to stderr (a warning), and every result object renders
  as HTML and every figure as plotly.
- No notebook reaches into private modules (``pyproflab._*`` or ``_name``); the
  only pyproflab import is ``import pyproflab`` and every ``pyproflab.NAME`` it
  uses is in ``pyproflab.__all__`` (docs/python.md says they use only the public API).
- Executed, each notebook leaves its working folder as it found it (notebook 04
  writes its default.pgo to a temporary folder unless OUT is given).
- Exported with nbconvert's HTML exporter (what ``jupyter nbconvert --to html
  --execute`` does) and opened in headless Chromium, every plotly figure of the
  outputs is drawn (counted: plotly's ``.main-svg`` in each figure div), and
  every flame graph of ``pyproflab.flame``, with no script error.
"""

from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path

import pytest
from support.browser.cdp import Browser, chromium_binary  # noqa: E402
from support.browser.stores import demo_store  # noqa: E402
from support.notebooks_helpers import (
    NOTEBOOKS,
    _outputs,
    _read,
    nbformat,
    run_notebook,
)

import pyproflab  # noqa: E402

FLEET_SOURCE = Path(__file__).resolve().parent / "fleet"
NAMES = (
    "01_fleet_overview",
    "02_top_regressions",
    "03_gogc_tradeoffs",
    "04_pgo_export",
    "05_traces",
)
# Notebook 05 reads these recordings when the store (the demo's) holds no trace.
TRACES = Path(__file__).resolve().parent / "testdata" / "traces"


def test_the_notebooks_exist():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    nb = _read(name)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{name} cell {i} has outputs: clear them before committing"
            assert cell.execution_count is None, f"{name} cell {i} has an execution count"


@pytest.mark.parametrize("name", NAMES)
def test_parameters_cell_first_and_markdown(name):
    nb = _read(name)
    first = nb.cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    assert re.search(r"^STORE = ", first.source, re.M) and re.search(
        r"^SERVICE = ", first.source, re.M
    )
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 4
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"pyproflab\._|\bimport _|\.\b_[a-z]\w*\(", code), (
        f"{name} uses private names"
    )


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_import_only_the_public_api(name):
    code = "\n".join(c.source for c in _read(name).cells if c.cell_type == "code")
    tree = ast.parse(code)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert not alias.name.startswith("pyproflab."), f"{name}: import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("pyproflab"), (
                f"{name}: from {node.module} import ..."
            )
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "pyproflab"
        ):
            used.add(node.attr)
    assert used, f"{name} uses nothing of pyproflab"
    assert used <= set(pyproflab.__all__), f"{name} uses {used - set(pyproflab.__all__)}"


def _title(fig: dict) -> str:
    title = fig.get("layout", {}).get("title", "")
    return title.get("text", "") if isinstance(title, dict) else str(title)


def _count_drawn(html_path: Path) -> dict:
    probe = (
        "JSON.stringify({divs: document.querySelectorAll('.plotly-graph-div').length, "
        "drawn: Array.from(document.querySelectorAll('.plotly-graph-div'))"
        ".filter(d => d.querySelector('.main-svg')).length, "
        "flames: document.querySelectorAll('.pyproflab-flame[data-drawn] svg .pf-frame')"
        ".length > 0 ? document.querySelectorAll('.pyproflab-flame[data-drawn]').length : 0})"
    )
    with Browser() as b:
        res = b.open_page(html_path.as_uri(), wait_charts=False, settle=3.0, probe=probe)
    # The exporter's template loads require.js and MathJax from a CDN: offline, those
    # loads fail; nothing of ours may.
    errors = [e for e in res.console_errors if "ERR_NAME_NOT_RESOLVED" not in e]
    errors = [e for e in errors if "ERR_INTERNET_DISCONNECTED" not in e]
    return {**json.loads(res.probe), "errors": errors}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_on_the_demo_store(name, tmp_path):
    store = demo_store()
    work = tmp_path / "work"
    work.mkdir()
    started = time.perf_counter()
    # 04 reads the demo service's source (check, build log): the runs happen in work.
    # (its build log recompiles the standard library with the new profile: minutes)
    extra = {"SOURCE": str(FLEET_SOURCE)} if name == "04_pgo_export" else {}
    timeout = 1200 if extra else 240
    # A cell error raises CellExecutionError.
    nb = run_notebook(name, store, work, timeout=timeout, TRACES=str(TRACES), **extra)
    print(f"{name}: ran in {time.perf_counter() - started:.1f} s")
    assert sorted(p.name for p in work.iterdir()) == [], f"{name} left files behind"
    # A warning or a stray message is what a newcomer sees first (05 printed InputsRefused
    # for the README beside its traces).
    stderr = [
        o.get("text", "")
        for c in nb.cells
        for o in c.get("outputs", [])
        if o.get("name") == "stderr"
    ]
    assert not stderr, f"{name} printed to stderr: {stderr}"
    figures = _outputs(nb, "application/vnd.plotly.v1+json")
    assert figures, f"{name} drew no plotly figure"
    # A figure of no trace, or of traces without points, is drawn as empty axes.
    for i, fig in enumerate(json.loads(f) for f in figures):
        points = [len(t.get("x") or t.get("y") or t.get("values") or []) for t in fig["data"]]
        assert any(points), f"{name}: plotly figure {i} ({_title(fig)}) shows no data"
    html = "\n".join(_outputs(nb, "text/html"))
    expected = {
        "01_fleet_overview": ["pyproflab-top", "pyproflab-gc"],
        "02_top_regressions": ["pyproflab-regressions"],
        "03_gogc_tradeoffs": ["pyproflab-gogc"],
        "04_pgo_export": ["PGO profile"],
        "05_traces": ["pyproflab-flame"],
    }[name]
    for marker in expected:
        assert marker in html, f"{name}: no {marker} HTML repr in the outputs"
    if name == "04_pgo_export":
        text = "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
        assert "verified with go tool preprofile" in text
        assert "hot edges:" in text  # the diff against the v1 profiles' edges
        for marker in ("PGO check", "PGO weightings", "PGO effect", "<th>decision</th>"):
            assert marker in html, f"04: no {marker} in the outputs"
        # Without OUT its default.pgo went to a mkdtemp folder that stayed after the
        # kernel stopped (37 pyproflab-pgo-* folders in /tmp): now one removed at exit.
        reprs = "\n".join(_outputs(nb, "text/plain"))
        (written,) = set(re.findall(r"written to (\S+)/default\.pgo", reprs))
        assert not Path(written).exists(), written
    if chromium_binary() is None:
        pytest.skip("Chromium is not installed (scripts/install-system-deps.sh installs it)")
    from nbconvert import HTMLExporter

    page, _ = HTMLExporter().from_notebook_node(nb)
    out = tmp_path / f"{name}.html"
    out.write_text(page, encoding="utf-8")
    seen = _count_drawn(out)
    flames = html.count('class="pyproflab-flame"')
    want = {"divs": len(figures), "drawn": len(figures), "flames": flames, "errors": []}
    assert seen == want, seen
    if name == "05_traces":
        assert flames == 2  # the sync and sched blocking profiles
    if name == "01_fleet_overview":
        assert flames == 1  # pyproflab.flame: our flame graph, drawn in the exported page


def test_the_per_counter_notebook_02_names_is_in_the_demo_store():
    # Its prose offered per="requests_total", which no demo store holds: copied, the
    # call refused ("no metric samples of it for the selected services").
    text = "\n".join(
        c.source for c in _read("02_top_regressions").cells if c.cell_type == "markdown"
    )
    named = re.findall(r'per="(\w+)"', text)
    assert named
    with pyproflab.open(demo_store(), read_only=True) as lab:
        for counter in named:
            sql = "SELECT count(*) AS n FROM metric_samples WHERE metric = $m"
            assert lab.sql(sql, {"m": counter}).to_pylist()[0]["n"] > 0, counter
