"""How the weighting of a fleet merge changes the PGO profile's hot edges
(``pyproflab pgo weights``; golang/go#64487).

Rules:

- The same inputs (files, or a store selection with the same ``top``) are
  merged under each weighting of ``pgo.WEIGHTS``: ``none`` (a plain sum),
  ``duration`` (each profile per second), ``instance`` (each instance once).
  A weighting that refuses (``duration`` without durations) is reported with
  its reason and left out of the comparisons.
- Each instance's share of a merge is the sum over its profiles of
  factor x CPU time, over the merge's total: what it brought to the profile.
- Each weighting is compared with ``none`` and ``duration`` with ``instance``
  by ``pgo_edges.diff_edges`` (hot edges added, removed, and re-weighted by at
  least ``min_change`` points of share), plus the overlap of the two hot sets
  (Jaccard: shared hot edges over hot edges in either).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyproflab.analyses.options import PgoOptions
from pyproflab.analyses.pgo import WEIGHTS, PgoResult, pgo, pgo_files
from pyproflab.analyses.pgo_edges import EdgeDiff, diff_edges
from pyproflab.display import render

if TYPE_CHECKING:
    from pyproflab.store.connection import Store
    from pyproflab.store.select import Selection

PAIRS = (("none", "duration"), ("none", "instance"), ("duration", "instance"))


@dataclass
class WeightComparison:
    """One merge per weighting and the differences of their hot edge sets."""

    results: dict[str, PgoResult]
    diffs: list[tuple[str, str, EdgeDiff, float]] = field(default_factory=list)  # + Jaccard
    min_change: float = PgoOptions.min_change

    def instance_shares(self, weight: str) -> dict[str, float]:
        """Instance -> percent of the merge under ``weight`` (module rules)."""
        res = self.results[weight]
        brought: dict[str, float] = {}
        for i in res.inputs:
            key = i.instance or i.label
            brought[key] = brought.get(key, 0.0) + float(i.factor) * i.cpu_nanos
        total = sum(brought.values())
        return {k: 100.0 * v / total for k, v in brought.items()} if total else {}

    def __repr__(self) -> str:
        hot = ", ".join(
            f"{w}: {len(r.edges.hot)} hot" if r.ok else f"{w}: refused"
            for w, r in self.results.items()
        )
        return f"WeightComparison({hot})"

    def __str__(self) -> str:
        return render(self, "text")

    def _repr_html_(self) -> str:
        return render(self, "html")


def compare_weights(
    store: Store | None = None,
    selection: Selection | None = None,
    *,
    files: Iterable[str | os.PathLike] | None = None,
    min_change: float = PgoOptions.min_change,
    **options: Any,
) -> WeightComparison:
    """Merge the files (or the store selection) under every weighting and compare
    the hot edge sets (module rules). ``options``: those of ``pgo``/``pgo_files``
    but ``weight``."""
    options.pop("weight", None)
    PgoOptions.build(min_change=min_change)  # refused before any merge
    paths = list(files) if files is not None else None
    results: dict[str, PgoResult] = {}
    for weight in WEIGHTS:
        if paths is not None:
            results[weight] = pgo_files(paths, weight=weight, **options)
        else:
            assert store is not None, "a store or files"
            results[weight] = pgo(store, selection, weight=weight, **options)
    out = WeightComparison(results, min_change=min_change)
    for a, b in PAIRS:
        ra, rb = results[a], results[b]
        if not (ra.ok and rb.ok):
            continue
        d = diff_edges(ra.edges, rb.edges, min_change=min_change)
        d.old_name, d.new_name = f"--weight {a}", f"--weight {b}"
        ha, hb = {e.key for e in ra.edges.hot}, {e.key for e in rb.edges.hot}
        jaccard = len(ha & hb) / len(ha | hb) if ha | hb else 1.0
        out.diffs.append((a, b, d, jaccard))
    return out
