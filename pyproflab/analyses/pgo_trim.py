"""Trim a PGO profile to the edges that matter, and say when its size would
slow the build (golang/go#58102).

What a profile's size costs: ``go build -pgo`` recompiles every package of the
build (the standard library included) whenever the profile changes, and each
compile reads every edge of it; ``bench/bench_pgo.py`` measures build time
against edge count (``make bench``, section pgo-size). Cutting stacks to two
leaf frames (``--trim-leaf 2``) shrinks the file without changing one edge;
``--max-edges`` cuts the edges themselves.

Rules of ``trim_edges``:

1. The edges kept are the ``max_edges`` heaviest (the compiler's order).
   Every sample whose edges are all among the others is dropped; a sample
   that also feeds a kept edge stays, so some light edges may stay too, and
   every kept edge keeps its weight.
2. The dropped weight leaves the total, so the compiler's 99% cutoff is
   recomputed on what remains: ``TrimReport`` says how many edges and how
   much weight went, and which edges the compiler took as hot before and
   does not now (with their share of the weight before).
3. What is given up, beyond those: devirtualization of calls whose edges
   all went (the compiler reads every edge at an interface call's line, hot
   or not), which together carry the dropped share of the CPU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from pyproflab.analyses.pgo_edges import Edge, EdgeSet, compute_edges, sample_edges
from pyproflab.arrays import from_numpy
from pyproflab.model import Profile

# A profile with more call edges than this gets a note (pgo.PgoResult.notes):
# bench/bench_pgo.py (pgo-size) measured the build times behind it.
EDGES_WARNING = 20_000


@dataclass
class TrimReport:
    """What ``trim_edges`` did: edges before and after, weight dropped, hot edges lost."""

    edges_before: int
    edges_after: int
    weight_dropped: int
    total_before: int
    hot_lost: list[Edge] = field(default_factory=list)

    @property
    def dropped_share(self) -> float:
        return 100.0 * self.weight_dropped / self.total_before if self.total_before else 0.0

    def __str__(self) -> str:
        lost = sum(e.share for e in self.hot_lost)
        return (
            f"trimmed to the heaviest edges: {self.edges_before} -> {self.edges_after} call "
            f"edges, {self.dropped_share:.2f}% of the weight dropped; "
            f"{len(self.hot_lost)} edges hot before are not now ({lost:.2f}% of the weight)"
        )


def trim_edges(
    profile: Profile, max_edges: int, edges: EdgeSet | None = None
) -> tuple[Profile, EdgeSet, TrimReport]:
    """``profile`` cut to its ``max_edges`` heaviest edges (module rules), its
    edges, and what was given up."""
    edges = edges if edges is not None else compute_edges(profile)
    keep = {e.key for e in edges.edges[: max(max_edges, 1)]}
    per_sample = list(sample_edges(profile))
    drop = np.array([bool(keys) and not keep.intersection(keys) for _, keys, _ in per_sample])
    if not drop.any():
        return profile, edges, TrimReport(len(edges), len(edges), 0, edges.total)
    trimmed = dataclasses.replace(profile, samples=profile.samples.filter(from_numpy(~drop)))
    after = compute_edges(trimmed)
    hot_now = {e.key for e in after.hot}
    lost = [e for e in edges.hot if e.key not in hot_now]
    report = TrimReport(len(edges), len(after), edges.total - after.total, edges.total, lost)
    return trimmed, after, report
