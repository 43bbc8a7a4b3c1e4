"""Interactive flame graphs: our own small script (templates/flame.js), no library.

Why our own: the report and the notebooks must work offline and self-contained,
and the viewers worth copying (pprof's web flame graph, speedscope) are apps,
not embeddable pieces; d3-flame-graph would bring d3 (about 280 KB) for what
300 lines of plain JavaScript do here. The script draws SVG (rect and text
elements), so the same browser checks apply as to plotly's charts.

Rules:

- The tree is ``flame.flame_tree``'s (frames named as pprof names them, inlined
  calls expanded, nodes below ``min_fraction`` of the total or beyond
  ``max_nodes`` left out). Root on top, callees below.
- ``paths_flame_graph`` draws call paths already summed (the regressions'
  ``figure_flame`` gives it the stacks of its two sides): one flame graph
  for profiles, reports and regressions alike.
- A differential graph is as wide as ``profile`` (the new side) and coloured
  by each call path's relative change from ``base`` (red: more, blue: less,
  saturated at +-100%; grey: unchanged); ``base_scale`` multiplies the base's
  values first (e.g. new duration / base duration, to compare rates).
- The data reaches the page as JSON inside ``<script type="application/json">``
  with ``<``, ``>``, ``&`` and U+2028/9 escaped (``script_json``), and the script
  puts names into the SVG as ``textContent``: no name can become markup.
- ``FlameGraph`` shows itself in Jupyter (``_repr_html_``: the script, guarded
  so that it defines itself once per page, then the data); ``html(...,
  with_script=False)`` is the fragment for a page that includes ``script()`` once.
"""

from __future__ import annotations

import importlib.resources
import itertools
import json
from dataclasses import dataclass
from typing import Any

from pyproflab.model import Profile
from pyproflab.reports.flame import call_paths

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


@dataclass
class FlameGraph:
    """A flame graph's data (``data``: title, unit, total, names, nodes) and its HTML."""

    data: dict[str, Any]

    def html(self, div_id: str | None = None, *, with_script: bool = True) -> str:
        """The ``<div>`` with the data (and the script unless the page has it)."""
        div_id = div_id or f"pyproflab-flame-{next(_ids)}"
        parts = [
            f'<div class="pyproflab-flame" id="{div_id}">'
            f'<script type="application/json">{script_json(self.data)}</script></div>'
        ]
        if with_script:
            parts.append(f"<script>{script()}</script>")
        return "".join(parts)

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        d = self.data
        kind = "differential flame graph" if d["diff"] else "flame graph"
        return f"FlameGraph({kind} of {d['sample']}/{d['unit']}, {len(d['nodes'])} frames)"


def flame_graph(
    profile: Profile,
    sample_index: int | str | None = None,
    *,
    base: Profile | None = None,
    base_scale: float = 1.0,
    title: str | None = None,
    min_fraction: float = 0.002,
    max_nodes: int = 2500,
) -> FlameGraph:
    """A ``FlameGraph`` of ``profile`` (differential against ``base`` when given)."""
    from pyproflab.analyses.graph import resolve_sample_index

    index = resolve_sample_index(profile, sample_index)
    st = profile.sample_types[index]
    acc, total = call_paths(profile, index)
    base_paths = None
    if base is not None:
        base_paths = call_paths(base, resolve_sample_index(base, st.type))
    return paths_flame_graph(
        acc,
        total,
        st.type,
        st.unit,
        base=base_paths,
        base_scale=base_scale,
        title=title,
        min_fraction=min_fraction,
        max_nodes=max_nodes,
    )


Paths = dict[tuple[str, ...], int]


def paths_flame_graph(
    acc: Paths,
    total: int,
    sample: str,
    unit: str,
    *,
    base: tuple[Paths, int] | None = None,
    base_scale: float = 1.0,
    title: str | None = None,
    min_fraction: float = 0.002,
    max_nodes: int = 2500,
) -> FlameGraph:
    """A ``FlameGraph`` of call paths (names, root first) -> value below each, and
    their ``total``; ``base``: the base side's paths and total (differential)."""
    base_acc, base_total = base if base is not None else ({}, 0)
    root: list[float] = [0, -1, total]
    if base is not None:
        root.append(round(base_total * base_scale, 3))
    keep = [k for k, v in acc.items() if v >= min_fraction * total]
    keep.sort(key=lambda k: (len(k), -acc[k]))
    names: dict[str, int] = {"total": 0}
    nodes: list[list[float]] = [root]
    index_of: dict[tuple[str, ...], int] = {(): 0}
    for key in keep:
        if len(nodes) >= max_nodes:
            break
        parent = index_of.get(key[:-1])
        if parent is None:
            continue  # its parent was cut: so is the whole subtree
        index_of[key] = len(nodes)
        node: list[float] = [names.setdefault(key[-1], len(names)), parent, acc[key]]
        if base is not None:
            node.append(round(base_acc.get(key, 0) * base_scale, 3))
        nodes.append(node)
    return FlameGraph(
        {
            "title": title or f"{sample} ({unit})",
            "unit": unit,
            "sample": sample,
            "total": total,
            "names": list(names),
            "nodes": nodes,
            "diff": base is not None,
            "left_out": len(acc) - (len(nodes) - 1),
        }
    )
