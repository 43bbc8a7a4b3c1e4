"""Renderings of analysis results: text (like pprof), JSON, CSV and HTML.

``render_top(result, fmt)`` returns the text; ``render_top(result, fmt, out)``
also writes it to ``out`` (a text stream). The reporter classes
(``TextReporter`` …) follow the same shape as memray's: build one on a result,
call ``render(out)``.
"""

from __future__ import annotations

from typing import IO

from pyproflab.reports.csv import CsvReporter
from pyproflab.reports.html import HtmlReporter
from pyproflab.reports.json import JsonReporter
from pyproflab.reports.text import TextReporter

FORMATS = ("text", "json", "csv", "html")

REPORTERS = {
    "text": TextReporter,
    "json": JsonReporter,
    "csv": CsvReporter,
    "html": HtmlReporter,
}


def render_top(
    result, fmt: str = "text", out: IO[str] | None = None, *, exact: bool = False
) -> str:
    """Render a ``TopResult`` as ``fmt`` (text, json, csv, html); ``exact`` makes text print
    exact integers in the sample type's unit instead of pprof's scaled values."""
    from pyproflab.errors import UsageError

    cls = REPORTERS.get(fmt)
    if cls is None:
        raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    reporter = cls(result, exact=exact) if cls is TextReporter else cls(result)
    text = reporter.render_to_string()
    if out is not None:
        out.write(text)
    return text


__all__ = ["CsvReporter", "FORMATS", "HtmlReporter", "JsonReporter", "TextReporter", "render_top"]
