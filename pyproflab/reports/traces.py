"""Text like ``go tool pprof -traces``: every sample's stack, leaf first, with its labels.

Layout (pprof's ``printTraces``): the header is pprof's profile labels (File,
Build ID, comments, Type, Time, Duration with the total), without top's
"Showing nodes" lines; values are scaled one by one (pprof's "minimum" output
unit). Each sample follows a separator line: its string labels as
``%10s:  v1 v2`` lines, sorted, then its numeric labels (values auto-scaled in
the key's unit), sorted, then its frames, the value beside the first, inline
frames marked ``(inline)``. A final separator ends the text.
"""

from __future__ import annotations

from pyproflab.analyses import units
from pyproflab.reports.formatting import text_name
from pyproflab.reports.top import header_lines

SEPARATOR = "-----------+-------------------------------------------------------"


def render_text(result) -> str:
    """A ``TracesResult`` as ``go tool pprof -traces`` prints it (module rules)."""
    unit = result.unit
    head = header_lines(result.facts, lambda v: units.scaled_label(v, unit, "minimum"))
    # pprof prints its labels as one line group: an empty line when there are none.
    out = ["\n".join(ln for ln in head if not ln.startswith(("Showing ", "Dropped ")))]
    for trace in result.traces:
        out.append(SEPARATOR)
        out += _label_lines(trace.labels, result.label_units)
        value = units.scaled_label(trace.value, unit, "minimum")
        for i, (name, inline) in enumerate(trace.frames):
            out.append(
                f"{value if i == 0 else '':>10}   {text_name(name)}{' (inline)' if inline else ''}"
            )
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
    text += sorted(f"{k:>10}:  {' '.join(v)}" for k, v in nums.items())
    return [text_name(line) for line in text]
