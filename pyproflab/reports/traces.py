"""Text like ``go tool pprof -traces``: every sample's stack, leaf first, with its labels.

Rules (pprof's ``printTraces``, re-expressed):

- The header is pprof's profile labels (File, Build ID, comments, Type, Time,
  Duration with the total), without top's "Showing nodes" lines; values are
  scaled one by one (pprof's "minimum" output unit).
- Samples in file order (after drop_frames pruning), each after a separator
  line: its string labels as ``%10s:  v1 v2`` lines, sorted, then its numeric
  labels (values auto-scaled in the key's unit), sorted, then its frames, the
  value beside the first. A location gives one frame per line, innermost
  first; all but its last line are marked ``(inline)``. Frames are named as
  the flame graphs name them: a location without lines by its mapping's file
  (``[name]``), else ``<unknown>``, as is a line without a function name.
  Samples without locations are left out; a final separator ends the text.
"""

from __future__ import annotations

from pyproflab.analyses import units
from pyproflab.model import Profile

SEPARATOR = "-----------+-------------------------------------------------------"


def render_traces(
    profile: Profile, sample_index: int | str | None = None, **filters: str | None
) -> str:
    """``profile`` as ``go tool pprof -traces`` prints it (see the module rules).

    ``filters``: pprof's focus, ignore, hide, show, show_from, tagfocus, tagignore,
    tagshow and taghide (as ``top`` takes them); they choose the samples, frames and
    labels printed, and leave the header's total as it was.
    """
    from pyproflab.analyses import pprof_filters
    from pyproflab.analyses.graph import resolve_sample_index
    from pyproflab.analyses.top import top
    from pyproflab.reports.flame import _location_frames
    from pyproflab.reports.text import header_lines

    index = resolve_sample_index(profile, sample_index)
    unit = profile.sample_types[index].unit
    facts = top(profile, sample_index=index, nodecount=1)
    head = header_lines(facts, lambda v: units.scaled_label(v, unit, "minimum"))
    # pprof prints its labels as one line group: an empty line when there are none.
    out = ["\n".join(ln for ln in head if not ln.startswith(("Showing ", "Dropped ")))]
    work = _filtered(profile, filters)
    frames: dict[int, list[tuple[str, bool]]] = {}
    for loc_id, outer_first in _location_frames(work).items():
        names = outer_first[::-1]
        frames[loc_id] = [(n, i != len(names) - 1) for i, n in enumerate(names)]
    num_units = pprof_filters.label_units(work)
    for loc_ids, values, labels in zip(
        work.samples.column("location_ids").to_pylist(),
        work.samples.column("values").to_pylist(),
        work.samples.column("labels").to_pylist(),
        strict=True,
    ):
        stack = [f for loc in loc_ids for f in frames.get(loc, [])]
        if not stack:
            continue
        out.append(SEPARATOR)
        out += _label_lines(labels, num_units)
        value = units.scaled_label(values[index], unit, "minimum")
        for i, (name, inline) in enumerate(stack):
            out.append(f"{value if i == 0 else '':>10}   {name}{' (inline)' if inline else ''}")
    out.append(SEPARATOR)
    return "\n".join(out) + "\n"


def _label_lines(labels: list[dict], num_units: dict[str, str]) -> list[str]:
    strs: dict[str, list[str]] = {}
    nums: dict[str, list[str]] = {}
    for lb in labels:
        if lb["str"] is not None:
            strs.setdefault(lb["key"], []).append(lb["str"])
        elif lb["num"] is not None:
            unit = num_units.get(lb["key"], lb["key"])
            nums.setdefault(lb["key"], []).append(units.label(lb["num"], unit))
    text = sorted(f"{k:>10}:  {' '.join(v)}" for k, v in strs.items())
    return text + sorted(f"{k:>10}:  {' '.join(v)}" for k, v in nums.items())


def _filtered(profile: Profile, options: dict[str, str | None]) -> Profile:
    """``profile`` pruned by drop_frames, then pprof's filters (focus first)."""
    import dataclasses

    import pyarrow as pa

    from pyproflab.analyses import filters, pprof_filters

    work = filters.remove_uninteresting(profile)
    mask = filters.sample_mask(work, options.pop("focus", None), options.pop("ignore", None))
    if mask is not None:
        work = dataclasses.replace(work, samples=work.samples.filter(pa.array(mask)))
    if any(options.values()):
        work = pprof_filters.apply(work, **options)
    return work
