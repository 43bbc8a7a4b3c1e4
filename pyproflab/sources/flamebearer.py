"""Pyroscope's flamebearer (the JSON of the legacy ``/pyroscope/render``) as a pprof profile.

The format: ``flamebearer.names`` is a list of frame names and
``flamebearer.levels`` a list of levels, root first; each level is a flat list
of nodes, four integers each (``format`` "single"): the node's x offset, its
total, its self value and its name's index. The offset is relative: a node
starts ``offset`` after the end (start + total) of the node before it in the
level (the first node: after 0). A node's parent is the node of the level
above whose span ``[start, start + total)`` holds its start.

Rules of ``to_pprof``:

- Each node with a self value becomes one sample: its stack is the path of
  names from the root down to it, leaf first, and its value the self value.
  The root (level 0, named ``total``) is not a frame.
- One function, and one location, per distinct name (no files, lines or
  addresses: the format has none); ids 1, 2, ... in first-seen order.
- The sample type and period type are the caller's (from the profile type
  the query named); ``time_nanos`` and ``duration_nanos`` the window's.
- A document that is not a single-format flamebearer, or whose levels do not
  nest, is a ``ValueError`` (one line).
"""

from __future__ import annotations

from typing import Any


def to_pprof(
    doc: Any,
    *,
    sample_type: tuple[str, str],
    period_type: tuple[str, str],
    time_nanos: int,
    duration_nanos: int,
) -> bytes:
    """The protobuf bytes of the profile a flamebearer document holds (module rules)."""
    from pyproflab._proto import profile_pb2

    fb = doc.get("flamebearer") if isinstance(doc, dict) else None
    fmt = (doc.get("metadata") or {}).get("format", "single") if isinstance(doc, dict) else None
    if not isinstance(fb, dict) or fmt != "single":
        raise ValueError("not a single-format flamebearer document")
    names, levels = fb.get("names"), fb.get("levels")
    if not isinstance(names, list) or not isinstance(levels, list):
        raise ValueError("the flamebearer has no names or levels")
    p = profile_pb2.Profile()
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings)
            p.string_table.append(text)
        return strings[text]

    s("")
    p.sample_type.add(type=s(sample_type[0]), unit=s(sample_type[1]))
    p.period_type.type, p.period_type.unit = s(period_type[0]), s(period_type[1])
    p.time_nanos, p.duration_nanos = time_nanos, duration_nanos
    ids: dict[str, int] = {}
    for stack, value in _stacks(names, levels):
        for name in stack:
            if name not in ids:
                ids[name] = len(ids) + 1
                p.function.add(id=ids[name], name=s(name), system_name=s(name))
                p.location.add(id=ids[name]).line.add(function_id=ids[name])
        p.sample.add(location_id=[ids[n] for n in stack], value=[value])
    return p.SerializeToString(deterministic=True)


def _stacks(names: list[Any], levels: list[Any]) -> list[tuple[list[str], int]]:
    """(stack leaf first, self value) of every node with a self value."""
    out: list[tuple[list[str], int]] = []
    above: list[tuple[int, int, list[str]]] = []  # (start, end, path root first)
    for depth, level in enumerate(levels):
        if not isinstance(level, list) or len(level) % 4:
            raise ValueError(f"level {depth} is not a list of 4-number nodes")
        here: list[tuple[int, int, list[str]]] = []
        x, j = 0, 0  # both levels run left to right: the parent index only advances
        for i in range(0, len(level), 4):
            offset, total, self_value, name_index = level[i : i + 4]
            try:
                name = str(names[name_index])
            except (IndexError, TypeError):
                raise ValueError(f"level {depth}: name index {name_index} out of range") from None
            start = x + offset
            x = start + total
            while j < len(above) and above[j][1] <= start:
                j += 1
            parent = above[j] if j < len(above) and above[j][0] <= start else None
            if depth and parent is None:
                raise ValueError(f"level {depth}: a node at {start} has no parent")
            path = [] if depth == 0 and name == "total" else [*(parent[2] if parent else []), name]
            here.append((start, start + total, path))
            if self_value and path:
                out.append((path[::-1], int(self_value)))
        above = here
    return out
