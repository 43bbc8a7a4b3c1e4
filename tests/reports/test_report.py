"""``pyproflab report``: one self-contained offline HTML file (static checks).

On a short demo run's store (tests/support/browser/stores.py):

- one file, plotly.js embedded exactly once, no ``<script src>``, no external
  link, stylesheet or font (nothing ``http(s)://`` is loaded);
- every section is there and drawn (one plotly div per chart), and names the
  commands that give its data; those commands run and print JSON;
- sections without data stay with a note: one version (no regressions), no GC
  tables (no GC share, no GOGC), no Go (no PGO summary).
"""

from __future__ import annotations

import html
import json
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest
from support.browser.stores import demo_store
from support.report_helpers import CHARTS, manifest, parse

from pyproflab.cli import main

SECTIONS = ("fleet", "top", "flame", "regressions", "gc", "gogc", "pgo")
FLAMES = ("flame-cpu", "flame-allocs", "regressions-flame")  # our flame graphs, not plotly


def build(db: Path, out: Path, *args: str, capsys=None) -> tuple[str, float]:
    started = time.perf_counter()
    assert main(["report", "--db", str(db), "-o", str(out), *args]) == 0
    return out.read_text(encoding="utf-8"), time.perf_counter() - started


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory) -> tuple[Path, str]:
    db = demo_store()
    out = tmp_path_factory.mktemp("report") / "report.html"
    page, seconds = build(db, out)
    print(
        f"\nreport of the demo store: {out.stat().st_size / 1e6:.2f} MB, built in "
        f"{seconds:.2f} s (CLI, in-process)"
    )
    return out, page


def test_self_contained_offline(demo_report):
    from plotly.offline import get_plotlyjs

    _, page = demo_report
    doc = parse(page)
    assert not [a for t, a in doc.tags if t == "script" and "src" in a], "a <script src>"
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    for tag, attrs in doc.tags:
        for name in ("src", "href"):
            v = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", v), f"<{tag} {name}={v}> loads from the net"
        assert tag not in ("link", "iframe", "img"), f"unexpected <{tag}>"
    assert "@import" not in page and "url(http" not in page
    js = get_plotlyjs()
    assert page.count(js) == 1, "plotly.js must be embedded exactly once"
    assert "</script" not in js.lower()
    # One script for plotly.js, one for the flame graphs, one per chart (plotly's
    # drawing call or a flame graph's JSON), one manifest: nothing more.
    assert len(doc.scripts) == 2 + len(CHARTS) + 1


def test_every_section_and_chart(demo_report):
    _, page = demo_report
    m = manifest(page)
    assert [s["id"] for s in m["sections"]] == list(SECTIONS)
    for s in m["sections"]:
        assert not s["skipped"], f"section {s['id']} skipped on the demo store: {s['notes']}"
        assert s["commands"], f"section {s['id']} names no command"
        assert f'<section id="{s["id"]}"' in page
    charts = re.findall(r'<div class="chart" data-chart="([^"]+)">', page)
    assert charts == list(CHARTS)
    for name in CHARTS:
        if name in FLAMES:
            assert f'<div class="pyproflab-flame" id="chart-{name}">' in page
        else:
            assert re.search(rf'Plotly\.newPlot\(\s*"chart-{name}"', page), name
    text = " ".join(parse(page).text)
    for heading in (
        "Fleet summary",
        "Top CPU functions",
        "Flame graphs",
        "Regressions",
        "GC share over time",
        "GOGC",
        "PGO summary",
        "As text or JSON",
    ):
        assert heading in text
    assert "main.scoreNote" in text  # the planted function is in the top table


def test_the_regressions_section_compares_v1_to_v2(demo_report):
    """The demo runs v1 and v2 together, so their first profiles' order is the
    order the requests finished (v2's was first in one run of `make demo`, and
    the section showed main.scoreNote's +18 % as -4.3 points): the section
    compares by name and says why (tests/workflows/test_versions_order.py)."""
    _, page = demo_report
    by = {s["id"]: s for s in manifest(page)["sections"]}
    assert any("v1 and v2 started together" in n for n in by["regressions"]["notes"])
    section = re.search(r'<section id="regressions".*?</section>', page, re.S)
    assert section and "--base version=v1" in html.unescape(section.group(0))


def test_the_gogc_section_is_fitted_on_each_setting(demo_report):
    """Issue 34 defect 7: the demo's instances run GOGC 50 and 200. The GOGC
    section fits one model on both settings, lists each with its own cycles,
    and marks both observed; nothing is "taken as current" and dropped."""
    _, page = demo_report
    section = re.search(r'<section id="gogc".*?</section>', page, re.S)
    assert section, "no GOGC section"
    text = html.unescape(re.sub(r"<[^>]+>", "\n", section.group(0)))
    assert "Observed settings (the model is fitted on all of them):" in text
    for g in (50, 200):
        assert re.search(rf"^\s*GOGC={g}: \d+ cycles, 2 run\(s\)", text, re.M), g
    assert "fitted on 2 observed setting(s): GOGC=50" in text
    assert "taken as current" not in text and "modelled on the" not in text
    observed = re.findall(r"^\s*(>?[*o]|>)\s*$\n^\s*(\d+|off)\s*$\n^\s*off\s*$", text, re.M)
    assert {g for mark, g in observed if mark[-1] in "*o"} == {"50", "200"}, observed


def test_section_commands_give_json(demo_report, tmp_path, capsys, monkeypatch):
    """Each command a section names runs on the same store; the --format json ones parse."""
    _, page = demo_report
    monkeypatch.chdir(tmp_path)  # commands writing files (merge, pgo) write here
    ran = 0
    for s in manifest(page)["sections"]:
        for command in s["commands"]:
            words = shlex.split(command)
            assert words[0] == "pyproflab"
            capsys.readouterr()
            code = main(words[1:])
            out = capsys.readouterr()
            assert code == 0, f"{command}: exit {code}: {out.err}"
            if "--format" in words and words[words.index("--format") + 1] == "json":
                json.loads(out.out)
            ran += 1
    assert ran >= len(SECTIONS)
    assert (tmp_path / "cpu.pb.gz").stat().st_size > 0
    assert (tmp_path / "default.pgo").stat().st_size > 0


def test_one_version_skips_regressions_with_a_note(tmp_path):
    page, _ = build(demo_store(), tmp_path / "v1.html", "--version", "v1")
    by = {s["id"]: s for s in manifest(page)["sections"]}
    assert by["regressions"]["skipped"]
    assert "1 version(s) (v1): nothing to compare" in by["regressions"]["notes"][0]
    assert '<section id="regressions" data-skipped="true">' in page
    assert "nothing to compare" in page
    assert not by["flame"]["skipped"] and not by["gc"]["skipped"]


@pytest.mark.parametrize("budget", ["abc", "nan", "-1", "0x"])
def test_bad_budget_is_refused(budget, tmp_path, capsys):
    """A --budget gogc refuses is one line and exit 2, no file written (the report
    was written with its GOGC section skipped, exit 0)."""
    out = tmp_path / "r.html"
    assert main(["report", "--db", str(demo_store()), "-o", str(out), "--budget", budget]) == 2
    err = capsys.readouterr().err
    assert "budget" in err and budget in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_no_gc_tables_and_no_go_skip_with_notes(tmp_path, monkeypatch):
    import duckdb

    db = tmp_path / "nogc.duckdb"
    shutil.copyfile(demo_store(), db)
    with duckdb.connect(str(db)) as con:
        for t in ("metric_samples", "gc_cycles"):
            con.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
    import pyproflab.analyses.pgo_edges as pgo_edges

    monkeypatch.setattr(pgo_edges, "go_binary", lambda: None)
    page, _ = build(db, tmp_path / "nogc.html")
    by = {s["id"]: s for s in manifest(page)["sections"]}
    for sid in ("gc", "gogc"):
        assert by[sid]["skipped"] and "no GC data" in by[sid]["notes"][0]
    assert by["pgo"]["skipped"] and "Go is not installed" in by["pgo"]["notes"][0]
    assert not by["top"]["skipped"] and not by["regressions"]["skipped"]
    assert len(re.findall(r'<div class="chart"', page)) == 4  # flames and regressions


def test_script_json_escapes_script_ends():
    from pyproflab.reports.html_report import script_json

    text = script_json({"n": "</script><script>alert(2)</script>", "m": "<!-- \u2028 &"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"n": "</script><script>alert(2)</script>", "m": "<!-- \u2028 &"}


def test_a_windowed_reports_gogc_command_runs(capsys):
    """gogc refuses a time window (it models every stored cycle): the section's
    command leaves it out, the section says so, and the command runs as shown."""
    from pyproflab.store import Selection, Store
    from pyproflab.workflows.report import gogc_section

    db = demo_store()
    with Store.open(db, read_only=True) as store:
        s = gogc_section(store, Selection(service="notesd", since="72h"), str(db), "1.5x")
    assert "gogc" in s.found and not s.skipped
    assert any("time window, labels and type of the selection do not apply" in n for n in s.notes)
    (command,) = s.commands
    assert "--since" not in command and "--service notesd" in command
    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err
