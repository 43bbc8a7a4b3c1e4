"""The flame graphs in headless Chromium, on the demo store's profiles.

For each kind (merged CPU, allocs' alloc_space, the v1 -> v2 differential), one
offline page holding ``pyproflab.flame(...)``'s HTML is opened; a probe then
acts as a user would and reports what the page shows:

- search: typing a regex highlights the matching frames and prints their
  share, which equals the share computed here from the graph's own data (the
  matching frames without a matching ancestor, over the total);
- zoom: clicking a frame makes it the visible root (full width), clicking it
  again zooms out;
- sandwich: after a click, the button draws the function's callers and callees;
- the differential graph has its legend and frames coloured by change;
- no console error, no dialog. A screenshot of each kind is saved under
  artifacts/ (flame-cpu.png, flame-alloc_space.png, flame-diff.png).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.browser.cdp import Browser, chromium_binary
from support.browser.stores import demo_store

import pyproflab

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"

pytestmark = pytest.mark.skipif(
    chromium_binary() is None,
    reason="Chromium is not installed (scripts/install-system-deps.sh installs it)",
)

PROBE = """
(() => {
  const host = document.querySelector('.pyproflab-flame');
  const out = {frames: host.querySelectorAll('.pf-frame').length};
  const frame = (name) => Array.from(host.querySelectorAll('.pf-graph .pf-frame'))
    .find(g => g.querySelector('title').textContent.split('\\n')[0] === name);
  const search = host.querySelector('.pf-search');
  search.value = %(query)s;
  search.dispatchEvent(new Event('input'));
  out.hits = host.querySelectorAll('.pf-hit').length;
  out.share = Number(host.querySelector('.pf-match').dataset.share);
  out.matchText = host.querySelector('.pf-match').textContent;
  const target = frame(%(zoom)s);
  out.zoomFound = !!target;
  if (target) {
    target.dispatchEvent(new MouseEvent('click'));
    out.rootAfterZoom = host.dataset.root;
    const again = frame(%(zoom)s);
    out.zoomedWidth = Number(again.querySelector('rect').getAttribute('width'));
    out.svgWidth = Number(host.querySelector('.pf-graph svg').getAttribute('width'));
    host.querySelector('.pf-sandwich').dispatchEvent(new MouseEvent('click'));
    out.sandwichGraphs = host.querySelectorAll('.pf-sandwich-view svg').length;
    out.sandwichTitles = Array.from(host.querySelectorAll('.pf-sandwich-title'))
      .map(t => t.textContent);
  }
  out.legend = host.querySelectorAll('.pf-graph .pf-legend rect').length;
  out.diffFills = Array.from(host.querySelectorAll('.pf-graph rect'))
    .filter(r => (r.getAttribute('fill') || '').startsWith('rgb(')).length;
  return JSON.stringify(out);
})()
"""


def expected_share(fg, query: str) -> float:
    """Share of the frames matching ``query`` (case-insensitive) with no matching
    ancestor, over the total: what the page must print."""
    d = fg.data
    rx = re.compile(query, re.I)
    names, nodes = d["names"], d["nodes"]
    matched = [False] * len(nodes)
    total = 0
    for i, n in enumerate(nodes):
        if i == 0:
            continue
        parent = int(n[1])
        here = bool(rx.search(names[int(n[0])]))
        if here and not matched[parent]:
            total += n[2]
        matched[i] = here or matched[parent]
    return total / d["total"]


def _page(fg, path: Path) -> Path:
    path.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>flame</title></head>'
        '<body style="width:1200px"><div class="chart" data-chart="flame">'
        f"{fg.html()}</div></body></html>",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def graphs():
    lab = pyproflab.open(demo_store(), read_only=True)
    try:
        cpu = lab.merged(profile_type="cpu")
        allocs = lab.merged(profile_type="allocs")
        v1 = lab.merged(profile_type="cpu", version="v1")
        v2 = lab.merged(profile_type="cpu", version="v2")
    finally:
        lab.close()
    return {
        "cpu": (pyproflab.flame(cpu, "cpu"), "scoreNote", "main.(*api).search"),
        "alloc_space": (pyproflab.flame(allocs, "alloc_space"), "^main\\.", "main.(*api).search"),
        "diff": (
            pyproflab.flame(v2, "cpu", base=v1, title="v1 -> v2"),
            "scoreNote",
            "main.(*api).search",
        ),
    }


@pytest.mark.parametrize("kind", ["cpu", "alloc_space", "diff"])
def test_flame_graph_in_the_browser(kind, graphs, tmp_path):
    fg, query, zoom = graphs[kind]
    page = _page(fg, tmp_path / f"{kind}.html")
    probe = PROBE % {"query": json.dumps(query), "zoom": json.dumps(zoom)}
    with Browser() as b:
        res = b.open_page(page.as_uri(), timeout=60, probe=probe)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"flame-{kind}.png"
    shot.write_bytes(res.screenshot)
    print(f"\nflame graph ({kind}) screenshot: {shot}")
    assert res.console_errors == [] and res.any_dialog == []
    got = json.loads(res.probe)
    assert got["frames"] > 20
    # Search: highlighted frames, and the share printed is the one the data gives.
    want = expected_share(fg, query)
    assert got["hits"] > 0 and want > 0
    assert abs(got["share"] - want) < 1e-12, (got["share"], want)
    assert got["matchText"].startswith("matched: ")
    # Zoom: the clicked frame becomes the root, drawn across the whole width.
    assert got["zoomFound"], f"no frame {zoom} drawn"
    assert got["rootAfterZoom"] == zoom
    assert got["zoomedWidth"] >= got["svgWidth"] - 2
    # Sandwich of the clicked function: its callers and its callees.
    assert got["sandwichGraphs"] == 2
    assert got["sandwichTitles"][0].startswith(f"callers of {zoom}")
    if kind == "diff":
        assert got["legend"] == 11 and got["diffFills"] > 10
    else:
        assert got["legend"] == 0
    assert res.screenshot[:8] == b"\x89PNG\r\n\x1a\n"
