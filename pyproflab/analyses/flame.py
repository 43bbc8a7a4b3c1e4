"""Flame graphs: the call tree of a profile, or of two (differential), trimmed to draw.

Rules:

- Frames are pprof's nodes at functions granularity (``graph.build_nodes``):
  a location's inlined lines are expanded, innermost first in the location
  and marked inline but for its last line; a frame is named by its function,
  else by its mapping's file base name in brackets, else ``<unknown>``.
  ``location_frames`` gives them per location (``traces`` prints the same).
- Paths are root first; every sample adds the absolute value of one sample
  type (chosen as ``top`` chooses it) to each prefix of its path (widths
  cannot be negative); samples whose value is zero are skipped.
- Trimming (``paths_flame_graph``): paths below ``min_fraction`` of the total
  are left out, with everything under them, and at most ``max_nodes`` nodes
  are kept, the widest first within each depth, so a figure of a fleet-wide
  merge stays light.
- A differential graph is as wide as ``profile`` (the new side) and carries,
  per node, the base's value of the same path times ``base_scale`` (e.g. new
  duration / base duration, to compare rates); the renderer colours by the
  relative change.
- ``FlameGraph`` holds the data only (names as they are: the renderer, in
  ``reports.flamegraph``, keeps them text); it shows itself in Jupyter
  through the renderer table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyproflab.analyses.graph import build_nodes, resolve_sample_index
from pyproflab.display import render
from pyproflab.model import Profile

Paths = dict[tuple[str, ...], int]


@dataclass
class FlameGraph:
    """A flame graph's data: ``title``, ``unit``, ``sample``, ``total``, ``names``
    (distinct frame names), ``nodes`` (``[name index, parent node, value]``, plus
    the base's value in a differential graph; node 0 is the root), ``diff`` and
    ``left_out`` (paths trimmed away)."""

    data: dict[str, Any]

    def html(self, div_id: str | None = None, *, with_script: bool = True) -> str:
        """The ``<div>`` with the data (and the script unless the page has it)."""
        return render(self, "html", div_id=div_id, with_script=with_script)

    def _repr_html_(self) -> str:
        return render(self, "html")

    def __repr__(self) -> str:
        d = self.data
        kind = "differential flame graph" if d["diff"] else "flame graph"
        return f"FlameGraph({kind} of {d['sample']}/{d['unit']}, {len(d['nodes'])} frames)"


def location_frames(profile: Profile) -> dict[int, list[tuple[str, bool]]]:
    """location id -> its frames ``(name, inline)``, innermost first (module rules)."""
    nodes = build_nodes(profile, "functions")
    names = [nodes.label(n) for n in range(nodes.count)]
    slot_node = nodes.slot_node.tolist()
    slot_inline = nodes.slot_inline.tolist()
    out: dict[int, list[tuple[str, bool]]] = {}
    for loc_id, first, n in zip(
        profile.locations.column("id").to_pylist(),
        nodes.loc_slot_off.tolist(),
        nodes.loc_nslots.tolist(),
        strict=True,
    ):
        out[loc_id] = [(names[slot_node[s]], slot_inline[s]) for s in range(first, first + n)]
    return out


def call_paths(profile: Profile, index: int) -> tuple[Paths, int]:
    """Every call path (frame names, root first) -> the sum of the absolute values
    of sample type ``index`` below it; and the total of those values."""
    outer_first = {loc: [n for n, _ in fr[::-1]] for loc, fr in location_frames(profile).items()}
    acc: Paths = {}
    total = 0
    for loc_ids, values in zip(
        profile.samples.column("location_ids").to_pylist(),
        profile.samples.column("values").to_pylist(),
        strict=True,
    ):
        v = abs(values[index])
        if v == 0:
            continue
        total += v
        path: list[str] = []
        for loc in reversed(loc_ids):  # leaf first in the profile: reverse to root first
            path.extend(outer_first.get(loc, ["<unknown>"]))
        for depth in range(1, len(path) + 1):
            key = tuple(path[:depth])
            acc[key] = acc.get(key, 0) + v
    return acc, total


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
