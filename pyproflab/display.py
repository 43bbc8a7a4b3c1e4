"""The one way results are rendered: a table of renderers, looked up by name.

Analyses return result objects and reports render them, so ``analyses`` may not
import ``reports``; yet a result should show itself in Jupyter (``_repr_html_``),
print itself (``__str__``) and hand out its figures, and every front end (the
CLI, jobs, the report, ``Lab``) renders the same results. Rules:

- A renderer is a function ``renderer(result, /, **options)`` of the reports
  layer. It returns the text of a format (``"text"``, ``"json"``, ``"csv"``;
  ``"html"`` is a self-contained ``<div>``, which a page or a notebook embeds),
  or, for a figure kind (``"figure"``, ``"figure_top"``, ...), the figure.
  Options are keywords, each with a default, so ``renderer(result)`` always works.
- The table ``pyproflab/reports/registry.py`` (``RENDERERS``) names, for each
  (result class, format or kind), the module and function. There is no other
  way in: ``reports.render`` (front ends) and a result's own methods
  (``render(self, "html")``) both read it here.
- The table is read on first use, by module name (this layer imports nothing
  above it); nothing fills it as a side effect of an import, and the modules it
  names load only when they render. Lookup walks the result's class hierarchy,
  nearest class first. A format the table does not name raises ``LookupError``.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

REGISTRY = "pyproflab.reports.registry"


class Renderer(Protocol):
    """A function of the reports layer that renders one kind of result in one format."""

    def __call__(self, result: Any, /, **options: Any) -> Any: ...

    # Hashable, as functions are: reports caches the options each one takes.
    def __hash__(self) -> int: ...


def renderers() -> dict[tuple[str, str], tuple[str, str]]:
    """The reports layer's table: (class "module.QualName", format) -> (module, function)."""
    return importlib.import_module(REGISTRY).RENDERERS


def _key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def formats(result: Any) -> list[str]:
    """The formats and kinds the table has for ``result``'s class, sorted."""
    keys = {_key(cls) for cls in type(result).__mro__}
    return sorted({kind for name, kind in renderers() if name in keys})


def renderer(result: Any, kind: str) -> Renderer:
    """The function registered for ``kind`` of ``result``'s class (``LookupError``
    when there is none)."""
    table = renderers()
    for cls in type(result).__mro__:
        entry = table.get((_key(cls), kind))
        if entry is not None:
            module, function = entry
            return getattr(importlib.import_module(module), function)
    raise LookupError(f"no {kind!r} renderer registered for {type(result).__name__}")


def render(result: Any, kind: str, /, **options: Any) -> Any:
    """What the function registered for ``kind`` of ``result``'s class returns."""
    return renderer(result, kind)(result, **options)
