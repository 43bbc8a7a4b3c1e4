"""Untrusted names stay text: in the HTML report, the notebook HTML reprs and figure text.

The store (tests/support/browser/stores.py ``evil_store``) is the demo store plus copies
of its CPU and allocs profiles in which ``main.scoreNote`` is named
``<img src=x onerror=alert(1)>`` and the next hottest function
``main.filterChain</script><script>alert(2)</script>`` (file names too), with
the metadata label ``team="><svg onload=alert(3)>``.

Statically: no ``<img>``/``<svg>`` element and no ``on*`` attribute comes out of
the markup, the raw strings never appear (only escaped: ``&lt;`` in markup,
``\\u003c`` in JSON inside ``<script>``), and the page has exactly the script
blocks it should (an early ``</script>`` would add one). Plotly figures: no
string of the figure JSON holds a raw tag. In Chromium: no dialog opens (hooked
``alert`` and the DevTools dialog event), no console error, and the names are
visible as text, in the tables and in the flame graph's labels.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.browser.cdp import Browser, chromium_binary
from support.browser.stores import EVIL_IMG, EVIL_LABEL, EVIL_SCRIPT, EVIL_STRINGS, evil_store
from support.report_helpers import CHARTS, manifest, parse

from pyproflab.cli import main

RAW_TAG = re.compile(r"<\s*/?\s*(img|svg|script)\b", re.I)
FUNCTION_NAMES = (EVIL_IMG, EVIL_SCRIPT)


def assert_markup_safe(markup: str, what: str, *, scripts: int | None = None) -> None:
    """No element or handler made from a name; names only escaped."""
    doc = parse(markup)
    for tag, attrs in doc.tags:
        assert tag not in ("img", "svg"), f"{what}: an <{tag}> element was injected: {attrs}"
        handlers = [a for a in attrs if a.lower().startswith("on")]
        assert not handlers, f"{what}: <{tag}> has event handlers {handlers}"
    for s in EVIL_STRINGS:
        assert s not in markup, f"{what}: {s!r} appears unescaped"
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    for _, body in doc.scripts:
        if body != js:  # plotly.js itself builds <svg> elements, by design
            assert not RAW_TAG.search(body), f"{what}: a raw tag inside a <script> block"
    if scripts is not None:
        assert len(doc.scripts) == scripts, f"{what}: {len(doc.scripts)} script blocks"


def figure_strings(fig) -> list[str]:
    out: list[str] = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif hasattr(v, "tolist"):
            walk(v.tolist())

    walk(fig.to_plotly_json())
    return out


def assert_figure_safe(fig, what: str, *, must_show: tuple[str, ...] = ()) -> None:
    strings = figure_strings(fig)
    bad = [s for s in strings if RAW_TAG.search(s)]
    assert not bad, f"{what}: raw tags in figure text: {bad[:3]}"
    joined = "\n".join(strings)
    for name in must_show:  # present, escaped for plotly (which decodes &lt; &gt; &amp;)
        assert name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in joined, (
            f"{what}: {name!r} not shown"
        )


@pytest.fixture(scope="module")
def evil_report(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("evil") / "report.html"
    assert main(["report", "--db", str(evil_store()), "-o", str(out)]) == 0
    return out, out.read_text(encoding="utf-8")


def test_report_static(evil_report):
    _, page = evil_report
    # plotly.js, one script per chart, the manifest: an early </script> would add blocks.
    assert_markup_safe(page, "report", scripts=2 + len(CHARTS) + 1)
    m = manifest(page)  # the JSON block still parses
    assert [s["id"] for s in m["sections"] if s["skipped"]] == []
    # Shown, escaped: in markup as entities, in plotly's JSON as \u003c.
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "main.filterChain&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in page
    # The label, in the fleet summary (the templates escape " as &#34;, html.escape as &quot;).
    assert re.search(r"&(quot|#34);&gt;&lt;svg onload=alert\(3\)&gt;", page)
    # In plotly's JSON (plotly renders its text as markup): wherever a chart shows the
    # name it is escaped for plotly's text, never a JSON-escaped raw tag. Which charts
    # show it depends on the demo run's samples, so every chart is checked, none required.
    charts = [body for _, body in parse(page).scripts if "Plotly.newPlot" in body]
    assert charts
    for body in charts:
        assert "\\u003cimg src=x onerror" not in body, "a raw tag in a chart's text"
    text = " ".join(parse(page).text)
    for s in EVIL_STRINGS:
        assert s in text, f"{s!r} is not shown as text"


def test_hostile_label_in_the_selection(tmp_path):
    """The selection (store path, label value) reaches the page heading, the commands and
    the JSON manifest inside <script>: escaped in each."""
    out = tmp_path / "label.html"
    assert (
        main(["report", "--db", str(evil_store()), "--label", f"team={EVIL_LABEL}", "-o", str(out)])
        == 0
    )
    page = out.read_text(encoding="utf-8")
    assert_markup_safe(page, "report with a hostile selection")
    assert (
        "\\u0022\\u003e\\u003csvg onload=alert(3)\\u003e" in page
        or '\\"\\u003e\\u003csvg onload=alert(3)\\u003e' in page
    )  # manifest JSON
    m = manifest(page)
    assert EVIL_LABEL in m["selection"]
    assert any(EVIL_LABEL in c for s in m["sections"] for c in s["commands"])
    text = " ".join(parse(page).text)
    assert f"team={EVIL_LABEL}" in text


def test_result_reprs_and_figures(tmp_path):
    import pyproflab

    with pyproflab.open(evil_store(), read_only=True) as lab:
        cpu = {"profile_type": "cpu"}
        top = lab.top(**cpu, nodecount=30, cum_sort=True)
        assert set(FUNCTION_NAMES) <= set(top.rows.column("name").to_pylist())
        reg = lab.regressions({**cpu, "version": "v1"}, {**cpu, "version": "v2"})
        reprs = {
            "TopResult": top._repr_html_(),
            "GcResult": lab.gc()._repr_html_(),
            "RegressionsResult": reg._repr_html_(),
            "GogcResult": lab.gogc(budget="1.5x")._repr_html_(),
            "PgoResult": lab.pgo(**cpu)._repr_html_(),
            "FlameGraph": pyproflab.flame(lab.merged(**cpu))._repr_html_(),
            "regressions FlameGraph": reg.figure_flame()._repr_html_(),
        }
        for what, markup in reprs.items():
            assert_markup_safe(markup, what)
        for name in FUNCTION_NAMES:
            assert name.replace("<", "&lt;").replace(">", "&gt;") in reprs["TopResult"]
        figures = {
            "regressions top": (reg.figure_top(n=300), FUNCTION_NAMES),
            "gogc": (lab.gogc(budget="1.5x").figure(), ()),
        }
        for what, (fig, names) in figures.items():
            assert_figure_safe(fig, what, must_show=names)


def test_notebooks_on_hostile_names(tmp_path):
    """Notebooks 01 and 02 on the hostile store: every HTML output and figure is safe."""
    pytest.importorskip("nbclient")
    from support.notebooks_helpers import _outputs, run_notebook

    for name in ("01_fleet_overview", "02_top_regressions"):
        nb = run_notebook(name, evil_store(), tmp_path, FUNCTION=EVIL_IMG)
        html_out = _outputs(nb, "text/html")
        assert html_out
        for i, markup in enumerate(html_out):
            if "<table" in markup or "pyproflab-" in markup:
                assert_markup_safe(markup, f"{name} html output {i}")
        shown = "\n".join(html_out)
        assert "&lt;img src=x onerror=alert(1)&gt;" in shown
        for i, fig_json in enumerate(_outputs(nb, "application/vnd.plotly.v1+json")):
            strings = []

            def walk(v, strings=strings):
                if isinstance(v, str):
                    strings.append(v)
                elif isinstance(v, dict):
                    for x in v.values():
                        walk(x)
                elif isinstance(v, list):
                    for x in v:
                        walk(x)

            walk(json.loads(fig_json))
            bad = [s for s in strings if RAW_TAG.search(s)]
            assert not bad, f"{name} figure {i}: raw tags {bad[:3]}"


@pytest.mark.skipif(
    chromium_binary() is None, reason="chromium is not installed (scripts/install-system-deps.sh)"
)
def test_report_in_browser(evil_report):
    out, _ = evil_report
    # The drawn text of each chart (its SVG <text> elements and, for the flame graphs,
    # whose labels are cut to the frame's width, the <title> tooltips), not its script.
    probe = (
        "JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('.chart'))"
        ".map(c => [c.dataset.chart, Array.from(c.querySelectorAll('svg text, svg title'))"
        ".map(t => t.textContent).join('\\n')])))"
    )
    with Browser() as b:
        hooked = b.open_page(out.as_uri(), timeout=60, probe=probe)
        unhooked = b.open_page(out.as_uri(), timeout=60, init_script=None)
    assert hooked.any_dialog == [] and unhooked.dialogs == [], "a script from a name ran"
    assert hooked.console_errors == [] and unhooked.console_errors == []
    assert all(c["svg"] for c in hooked.charts)
    for s in EVIL_STRINGS:
        assert s in hooked.text, f"{s!r} not visible as text"
    assert not re.search(r"<(img|svg)[^>]*\son(error|load)=", hooked.dom, re.I)
    charts = json.loads(hooked.probe)
    for name in FUNCTION_NAMES:
        assert name in charts["flame-cpu"], f"{name!r} not a label of the CPU flame graph"
    assert "&lt;" not in charts["flame-cpu"] and "&quot;" not in charts["flame-cpu"]
    assert EVIL_LABEL not in hooked.dom  # the DOM serializes it escaped, never as markup
