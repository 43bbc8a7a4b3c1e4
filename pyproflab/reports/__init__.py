"""Renderings of analysis results: text (like pprof), JSON, CSV, HTML and figures.

One interface (``pyproflab.display``): a renderer is a function
``renderer(result, /, **options)`` of a module here, named for each (result
class, format) in the table ``registry.RENDERERS``. Front ends call
``render(result, fmt, **options)``; a command writes ``output(result, fmt,
title=...)``, which is the same text except that ``html`` becomes a whole page
around the result's ``<div>``. A front end passes the options it has, and each
format takes those its renderer names (``exact`` is top's text's; its csv
leaves it out). Importing this package loads no renderer: the table names
modules, which load when they render.
"""

from __future__ import annotations

import functools
import html
import inspect
from typing import Any

from pyproflab import display
from pyproflab.errors import UsageError

FORMATS = ("text", "json", "csv", "html")


def render(result: Any, fmt: str, /, **options: Any) -> Any:
    """``result`` rendered as ``fmt`` by its registered renderer (see the module
    rules); a format the result has no renderer for is a ``UsageError`` naming those it has."""
    try:
        fn = display.renderer(result, fmt)
    except LookupError:
        have = [f for f in display.formats(result) if f in FORMATS] or display.formats(result)
        raise UsageError(
            f"{type(result).__name__} has no {fmt!r} format; choose one of {', '.join(have)}"
        ) from None
    taken = _options(fn)
    if taken is not None:
        options = {k: v for k, v in options.items() if k in taken}
    return fn(result, **options)


@functools.cache
def _options(fn) -> frozenset[str] | None:
    """The keyword options ``fn`` names (None: it takes any)."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params)


def page(title: str, body: str) -> str:
    """A minimal HTML page around ``body`` (already escaped markup); ``title`` is a
    command's name, never data."""
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"</head><body>{body}</body></html>\n"
    )


def output(result: Any, fmt: str, /, *, title: str, **options: Any) -> str:
    """What a command writes for ``--format fmt``: ``render``'s text, and for
    ``html`` a page (``title``) around the result's ``<div>``."""
    text = render(result, fmt, **options)
    return page(title, text) if fmt == "html" else text


__all__ = ["FORMATS", "output", "page", "render"]
