"""How result objects render themselves without the analyses importing the reports.

Analyses return result objects and reports render them, so ``analyses`` may not
import ``reports``. Yet a result should show itself in Jupyter (``_repr_html_``)
and hand out its figures. Rules:

- A result's convenience method calls ``render(self, KIND, ...)``; ``KIND`` is a
  short name such as ``"html"`` or ``"figure_top"``.
- The reports layer registers, for each (result class, kind), the module and
  function that renders it (``pyproflab/reports/registry.py``); the module is
  imported on first use, so registering costs nothing.
- ``import pyproflab`` imports that registry, so it is filled before any
  result object exists. A kind nobody registered raises ``LookupError``.
- Lookup walks the result's class hierarchy, nearest class first.
"""

from __future__ import annotations

import importlib
from typing import Any

# (class "module.QualName", kind) -> (module, function, default keyword arguments)
_RENDERERS: dict[tuple[str, str], tuple[str, str, dict[str, Any]]] = {}


def register(result_class: str, kind: str, module: str, function: str, **defaults: Any) -> None:
    """Render ``kind`` of instances of ``result_class`` with ``module.function``."""
    _RENDERERS[(result_class, kind)] = (module, function, defaults)


def render(result: Any, kind: str, /, *args: Any, **kwargs: Any) -> Any:
    """What the function registered for ``kind`` of ``result``'s class returns."""
    for cls in type(result).__mro__:
        entry = _RENDERERS.get((f"{cls.__module__}.{cls.__qualname__}", kind))
        if entry is not None:
            module, function, defaults = entry
            fn = getattr(importlib.import_module(module), function)
            return fn(result, *args, **{**defaults, **kwargs})
    raise LookupError(f"no {kind!r} renderer registered for {type(result).__name__}")
