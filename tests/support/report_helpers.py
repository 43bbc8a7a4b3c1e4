"""Helpers of tests/reports/test_report.py that other test modules use too
(cut out of it by scripts/relayout_tests.py: no test module imports another)."""

from __future__ import annotations

import html.parser
import json
import re

CHARTS = (
    "flame-cpu",
    "flame-allocs",
    "regressions-top",
    "regressions-flame",
    "gc-share",
    "gogc-curve",
    "pgo-edges",
)


class Page(html.parser.HTMLParser):
    """Tags, attributes and script blocks of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "script":
            self._in_script = a
            self.scripts.append((a, ""))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            attrs, body = self.scripts[-1]
            self.scripts[-1] = (attrs, body + data)
        else:
            self.text.append(data)


def parse(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


def manifest(page: str) -> dict:
    m = re.search(
        r'<script type="application/json" id="pyproflab-report">(.*?)</script>', page, re.S
    )
    assert m, "no report manifest"
    return json.loads(m.group(1))
