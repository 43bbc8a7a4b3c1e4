"""The report in a real browser: headless Chromium (Debian's), driven over the DevTools
protocol (tests/support/browser/cdp.py).

First the method itself is checked on pages built to fail: a console.error, an
uncaught exception, an alert (hooked, and unhooked so a real dialog opens)
and a chart div plotly never drew must all be caught. Then the demo store's
report (file://) must load with no console error, no exception, no dialog,
every chart div holding plotly's SVG; its screenshot is saved as
``artifacts/report.png`` (gitignored) and its path printed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.browser.cdp import Browser, chromium_binary
from support.browser.stores import demo_store
from support.report_helpers import manifest

from pyproflab.cli import main

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"

pytestmark = pytest.mark.skipif(
    chromium_binary() is None,
    reason="chromium is not installed (scripts/install-system-deps.sh installs it as root)",
)

BROKEN = """<!DOCTYPE html><html><body><p>visible text</p>
<div class="chart" data-chart="never-drawn"></div>
<script>console.error("deliberate console error"); alert("deliberate alert");</script>
<script>throw new Error("deliberate exception")</script></body></html>"""


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def test_the_method_catches_errors_dialogs_and_undrawn_charts(browser, tmp_path):
    page = tmp_path / "broken.html"
    page.write_text(BROKEN)
    r = browser.open_page(page.as_uri(), timeout=3)
    assert "deliberate console error" in r.console_errors
    assert any("deliberate exception" in e for e in r.console_errors)
    assert r.recorded_dialogs == ["alert:deliberate alert"]
    assert r.charts == [{"name": "never-drawn", "svg": 0, "width": r.charts[0]["width"]}]
    assert "visible text" in r.text
    # Without the hook, the dialog really opens: Page.javascriptDialogOpening sees it.
    r = browser.open_page(page.as_uri(), timeout=3, init_script=None)
    assert r.dialogs == ["alert:deliberate alert"]


def test_report_opens_draws_every_chart_without_errors(browser, tmp_path):
    out, db = tmp_path / "report.html", demo_store()
    started = time.perf_counter()
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    built = time.perf_counter() - started
    r = browser.open_page(out.as_uri(), timeout=60)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.write_bytes(r.screenshot)
    print(
        f"\nreport: {out.stat().st_size / 1e6:.2f} MB, built in {built:.2f} s, "
        f"loaded and drawn in {r.seconds:.1f} s; screenshot: {shot}"
    )
    assert r.console_errors == []
    # plotly's own warnings (console.trace): an error bar given a marker's colour
    # array drew black with 'Invalid color specifier'.
    assert [c["text"] for c in r.console if "WARN" in c["text"]] == []
    assert r.any_dialog == []
    expected = [n for s in manifest(out.read_text())["sections"] for n in s["charts"]]
    skipped = {s["id"]: s["notes"] for s in manifest(out.read_text())["sections"] if s["skipped"]}
    assert not skipped, f"sections skipped on the demo store: {skipped}"
    assert [c["name"] for c in r.charts] == expected
    assert {
        "flame-cpu",
        "flame-allocs",
        "regressions-top",
        "regressions-flame",
        "gc-share",
        "gogc-curve",
        "pgo-edges",
    } <= set(expected)
    undrawn = [c["name"] for c in r.charts if not c["svg"] or c["width"] < 100]
    assert not undrawn, f"charts without plotly's SVG: {undrawn}"
    assert "Fleet summary" in r.text and "main.scoreNote" in r.text
    assert r.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(r.screenshot) > 50_000
