"""``traces``: every sample's stack and labels, as ``go tool pprof -traces`` lists them.

Rules (pprof's ``printTraces``, re-expressed; ``reports.traces`` prints them):

- The header's facts are ``top``'s for the whole profile (before the filters
  below: they choose what is listed, and leave the total as it was).
- Samples in file order, after drop_frames pruning, then ``focus``/``ignore``,
  then pprof's other filters (hide, show, show_from, tagfocus, tagignore,
  tagshow, taghide), as ``top`` takes them.
- A sample's frames are ``flame.location_frames``' (pprof's nodes at
  functions granularity: one per line, innermost first, all but a location's
  last line inline). Samples without frames are left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pyproflab.analyses.top import TopResult
from pyproflab.display import render
from pyproflab.model import Profile


@dataclass
class Trace:
    """One sample: its value, its frames ``(name, inline)`` leaf first, its labels
    (the profile's ``{key, str, num, num_unit}`` records)."""

    value: int
    frames: list[tuple[str, bool]]
    labels: list[dict[str, Any]]


@dataclass
class TracesResult:
    """The samples ``go tool pprof -traces`` lists (see the module rules)."""

    facts: TopResult  # the header's facts: pprof's profile labels and total
    unit: str  # the sample type's unit
    traces: list[Trace]
    label_units: dict[str, str]  # numeric label key -> its unit

    def __len__(self) -> int:
        return len(self.traces)

    def __repr__(self) -> str:
        return f"TracesResult({self.facts.sample_type}, {len(self.traces)} samples)"

    def __str__(self) -> str:
        """The text ``go tool pprof -traces`` prints."""
        return render(self, "text")


def traces(
    profile: Profile, sample_index: int | str | None = None, **filters: str | None
) -> TracesResult:
    """The samples of ``profile`` as ``-traces`` lists them (see the module rules);
    ``filters``: pprof's focus, ignore, hide, show, show_from, tagfocus,
    tagignore, tagshow and taghide."""
    from pyproflab.analyses import pprof_filters
    from pyproflab.analyses.flame import location_frames
    from pyproflab.analyses.graph import resolve_sample_index
    from pyproflab.analyses.top import top

    index = resolve_sample_index(profile, sample_index)
    facts = top(profile, sample_index=index, nodecount=1)
    work = _filtered(profile, dict(filters))
    frames = location_frames(work)
    out = []
    for loc_ids, values, labels in zip(
        work.samples.column("location_ids").to_pylist(),
        work.samples.column("values").to_pylist(),
        work.samples.column("labels").to_pylist(),
        strict=True,
    ):
        stack = [f for loc in loc_ids for f in frames.get(loc, [])]
        if stack:
            out.append(Trace(values[index], stack, labels))
    unit = profile.sample_types[index].unit
    return TracesResult(facts, unit, out, pprof_filters.label_units(work))


def _filtered(profile: Profile, options: dict[str, str | None]) -> Profile:
    """``profile`` pruned by drop_frames, then pprof's filters (focus first)."""
    import pyarrow as pa

    from pyproflab.analyses import filters, pprof_filters

    work = filters.remove_uninteresting(profile)
    mask = filters.sample_mask(work, options.pop("focus", None), options.pop("ignore", None))
    if mask is not None:
        work = dataclasses.replace(work, samples=work.samples.filter(pa.array(mask)))
    if any(options.values()):
        work = pprof_filters.apply(work, **options)
    return work
