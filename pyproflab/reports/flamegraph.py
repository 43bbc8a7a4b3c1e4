"""Interactive flame graphs: our own small script (templates/flame.js), no library.

Why our own: the report and the notebooks must work offline and self-contained,
and the viewers worth copying (pprof's web flame graph, speedscope) are apps,
not embeddable pieces; d3-flame-graph would bring d3 (about 280 KB) for what
300 lines of plain JavaScript do here. The script draws SVG (rect and text
elements), so the same browser checks apply as to plotly's charts.

Rules:

- The data is ``analyses.flame.FlameGraph``'s (frames named as pprof names
  them, inlined calls expanded, trimmed): one flame graph for profiles,
  reports and regressions alike. Root on top, callees below.
- A differential graph is coloured by each call path's relative change from
  the base (red: more, blue: less, saturated at +-100%; grey: unchanged).
- The data reaches the page as JSON inside ``<script type="application/json">``
  with ``<``, ``>``, ``&`` and U+2028/9 escaped (``script_json``), and the script
  puts names into the SVG as ``textContent``: no name can become markup.
- ``render_html`` (what a ``FlameGraph`` shows in Jupyter): the data, then the
  script, guarded so that it defines itself once per page;
  ``with_script=False`` is the fragment for a page that includes ``script()`` once.
"""

from __future__ import annotations

import importlib.resources
import itertools
import json
from typing import Any

_ids = itertools.count(1)


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``</script>``, ``<!--`` or line separators."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    for raw, safe in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, safe)
    return text


def script() -> str:
    """The flame graph script (see templates/flame.js); it contains no ``</script``."""
    return (importlib.resources.files("pyproflab.reports") / "templates" / "flame.js").read_text(
        encoding="utf-8"
    )


def render_html(graph, div_id: str | None = None, *, with_script: bool = True) -> str:
    """The ``<div>`` with ``graph``'s data (and the script unless the page has it)."""
    div_id = div_id or f"pyproflab-flame-{next(_ids)}"
    parts = [
        f'<div class="pyproflab-flame" id="{div_id}">'
        f'<script type="application/json">{script_json(graph.data)}</script></div>'
    ]
    if with_script:
        parts.append(f"<script>{script()}</script>")
    return "".join(parts)
