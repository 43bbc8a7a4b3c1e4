"""Renderings of analysis results: text (like pprof), JSON, CSV and HTML.

``render_top(result, fmt)`` returns the text; ``render_top(result, fmt, out)``
also writes it to ``out`` (a text stream). The reporter classes
(``TextReporter`` …) follow the same shape as memray's: build one on a result,
call ``render(out)``.
"""

from __future__ import annotations

import importlib
from typing import IO, Any

FORMATS = ("text", "json", "csv", "html")

# Reporter class name -> its module. Loaded on first use: ``import pyproflab``
# imports this package (for ``registry``), and the reporters would pull in the
# analyses and pyarrow.compute on every start of the CLI.
_REPORTER_MODULES = {
    "TextReporter": "pyproflab.reports.text",
    "JsonReporter": "pyproflab.reports.json",
    "CsvReporter": "pyproflab.reports.csv",
    "HtmlReporter": "pyproflab.reports.html",
}
_FORMAT_REPORTERS = {
    "text": "TextReporter",
    "json": "JsonReporter",
    "csv": "CsvReporter",
    "html": "HtmlReporter",
}


def __getattr__(name: str) -> Any:
    if name in _REPORTER_MODULES:
        return getattr(importlib.import_module(_REPORTER_MODULES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render_top(
    result,
    fmt: str = "text",
    out: IO[str] | None = None,
    *,
    exact: bool = False,
    unit: str | None = None,
) -> str:
    """Render a ``TopResult`` as ``fmt`` (text, json, csv, html); ``exact`` makes text print
    exact integers in the sample type's unit instead of pprof's scaled values; ``unit``
    is pprof's -unit (text values in that unit, e.g. ``ms``, ``MB``)."""
    from pyproflab.errors import UsageError

    name = _FORMAT_REPORTERS.get(fmt)
    if name is None:
        raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    cls = __getattr__(name)
    reporter = cls(result, exact=exact, unit=unit) if name == "TextReporter" else cls(result)
    text = reporter.render_to_string()
    if out is not None:
        out.write(text)
    return text


__all__ = ["CsvReporter", "FORMATS", "HtmlReporter", "JsonReporter", "TextReporter", "render_top"]
