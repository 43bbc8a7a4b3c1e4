"""The call tree of one profile, which the flame graphs (``reports.flamegraph``) draw.

Rules:

- A frame is a function name; a location's inlined lines are expanded
  (innermost last on the path, as pprof's ``-traces`` prints them, outermost
  caller first). A location without lines is named by its mapping's file
  base name in brackets, else ``<unknown>``.
- Paths are root first; every sample adds its value (one sample type, chosen
  as ``top`` chooses it) to each prefix of its path. Samples whose value is
  zero are skipped; negative values are counted by their absolute value
  (widths cannot be negative).
- Nodes below ``min_fraction`` of the total are left out (with everything
  under them), and at most ``max_nodes`` nodes are kept, the widest first
  within each depth, so a figure of a fleet-wide merge stays light.
- Node ids are numbers, never names, so a name cannot collide with the id
  syntax. ``plotly_text`` escapes a name for plotly's pseudo-HTML (the other
  charts' labels): ``"`` is left as is because plotly does not decode ``&quot;``.

(The plotly icicle that drew this tree is gone: ``reports.flamegraph`` is the
one flame graph, in the report, in Jupyter and from ``pyproflab.flame``.)
"""

from __future__ import annotations

import html
import posixpath
from dataclasses import dataclass

from pyproflab.model import Profile


def plotly_text(s: str) -> str:
    """``s`` escaped for plotly's pseudo-HTML text (labels, hover, titles)."""
    return html.escape(s, quote=False)


@dataclass
class FlameTree:
    """A call tree in plotly's ids/parents form (index 0 is the root, ``total``)."""

    ids: list[str]
    parents: list[str]
    names: list[str]  # raw names (not escaped)
    values: list[int]
    total: int
    unit: str
    sample_type: str
    left_out: int  # nodes dropped by min_fraction / max_nodes


def _location_frames(profile: Profile) -> dict[int, list[str]]:
    """location id -> its function names, outermost first."""
    funcs = dict(
        zip(
            profile.functions.column("id").to_pylist(),
            profile.functions.column("name").to_pylist(),
            strict=True,
        )
    )
    maps = dict(
        zip(
            profile.mappings.column("id").to_pylist(),
            profile.mappings.column("filename").to_pylist(),
            strict=True,
        )
    )
    out: dict[int, list[str]] = {}
    for loc_id, mapping_id, lines in zip(
        profile.locations.column("id").to_pylist(),
        profile.locations.column("mapping_id").to_pylist(),
        profile.locations.column("lines").to_pylist(),
        strict=True,
    ):
        names = [funcs.get(ln["function_id"], "") or "<unknown>" for ln in reversed(lines)]
        if not names:
            mfile = maps.get(mapping_id) or ""
            names = [f"[{posixpath.basename(mfile)}]" if mfile else "<unknown>"]
        out[loc_id] = names
    return out


def call_paths(profile: Profile, index: int) -> tuple[dict[tuple[str, ...], int], int]:
    """Every call path (function names, root first, inline frames expanded) -> the sum of
    the absolute values of sample type ``index`` below it; and the total of those values."""
    frames = _location_frames(profile)
    acc: dict[tuple[str, ...], int] = {}
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
            path.extend(frames.get(loc, ["<unknown>"]))
        for depth in range(1, len(path) + 1):
            key = tuple(path[:depth])
            acc[key] = acc.get(key, 0) + v
    return acc, total


def flame_tree(
    profile: Profile,
    sample_index: int | str | None = None,
    *,
    min_fraction: float = 0.002,
    max_nodes: int = 2500,
) -> FlameTree:
    """The call tree of ``profile`` for one sample type (see the module rules)."""
    from pyproflab.analyses.graph import resolve_sample_index

    index = resolve_sample_index(profile, sample_index)
    st = profile.sample_types[index]
    acc, total = call_paths(profile, index)
    keep = [k for k, v in acc.items() if v >= min_fraction * total]
    keep.sort(key=lambda k: (len(k), -acc[k]))
    kept: set[tuple[str, ...]] = set()
    ids, parents, names, values = ["0"], [""], ["total"], [total]
    index_of: dict[tuple[str, ...], str] = {(): "0"}
    for key in keep:
        if len(ids) >= max_nodes:
            break
        parent = key[:-1]
        if parent and parent not in kept:
            continue  # its parent was cut: so is the whole subtree
        kept.add(key)
        index_of[key] = str(len(ids))
        ids.append(index_of[key])
        parents.append(index_of[parent])
        names.append(key[-1])
        values.append(acc[key])
    return FlameTree(ids, parents, names, values, total, st.unit, st.type, len(acc) - len(kept))
