"""How result objects render themselves without the analyses importing the reports.

Analyses return result objects and reports render them, so ``analyses`` may not
import ``reports``. Yet a result should show itself in Jupyter (``_repr_html_``)
and hand out its figures. Rules:

- A result's convenience method calls ``render(self, KIND, ...)``; ``KIND`` is a
  short name such as ``"html"`` or ``"figure_top"``.
- The reports layer's table ``pyproflab/reports/registry.py`` (``RENDERERS``)
  names, for each (result class, kind), the module and function that renders
  it. ``render`` reads the table on first use, by module name (this layer
  imports nothing above it); nothing fills it as a side effect of an import,
  and the modules it names load only when they render. A kind the table does
  not name raises ``LookupError``.
- Lookup walks the result's class hierarchy, nearest class first.
"""

from __future__ import annotations

import importlib
from typing import Any

REGISTRY = "pyproflab.reports.registry"


def renderers() -> dict[tuple[str, str], tuple[str, str, dict[str, Any]]]:
    """The reports layer's table: (class "module.QualName", kind) -> (module,
    function, default keyword arguments)."""
    return importlib.import_module(REGISTRY).RENDERERS


def render(result: Any, kind: str, /, *args: Any, **kwargs: Any) -> Any:
    """What the function registered for ``kind`` of ``result``'s class returns."""
    table = renderers()
    for cls in type(result).__mro__:
        entry = table.get((f"{cls.__module__}.{cls.__qualname__}", kind))
        if entry is not None:
            module, function, defaults = entry
            fn = getattr(importlib.import_module(module), function)
            return fn(result, *args, **{**defaults, **kwargs})
    raise LookupError(f"no {kind!r} renderer registered for {type(result).__name__}")
