"""pprof's -hide, -show, -show_from, -tagfocus, -tagignore, -tagshow and -taghide.

Rules (pprof's ``applyFocus``, re-expressed; applied after the report's total
is computed, so percentages stay shares of the unfiltered total):

- A line *matches* a regex when its function's name or file name does; a
  location's mapping file matching counts for every line of the location.
- ``hide``: lines that match are removed from their locations; a location left
  without lines is removed from every sample; a sample left without locations
  is dropped. ``show``: the same with the lines that do *not* match.
- ``show_from``: per location, the lines above (callers of) the last line
  whose function name matches are removed (a matching mapping file keeps them
  all); per sample, the locations above the matching one nearest the root are
  removed; a sample with no matching location is dropped.
- ``tagfocus``/``tagignore``: ``KEY=VALUE`` or ``VALUE``. VALUE is a numeric
  range (``64kb``, ``1mb:2mb``, ``:64kb``, ``1mb:``; units scaled as pprof's
  ``measurement`` scales them, the unit of a label being its ``num_unit``, or
  ``bytes`` for ``request``/``alignment``, else the key's name) or regexes
  joined by ``,``. With a key, a sample matches when any of its values for the
  key matches any regex (or the range). Without a key, every regex must
  match some ``key:value`` of the sample (numeric: some numeric label in range).
  A sample is kept when tagfocus matches (or is not given) and tagignore does not.
- ``tagshow``/``taghide``: labels whose key does not match tagshow, or matches
  taghide, are removed from the samples (they do not change the values).
- Patterns are Python ``re`` syntax (see ``filters``): pprof's RE2 and Python
  agree on the common subset.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import pyarrow as pa

from pyproflab.analyses import units
from pyproflab.analyses.filters import compile_regex
from pyproflab.errors import UsageError
from pyproflab.model import Profile

_RANGE_PART = re.compile(r"([+-]?[0-9]+)([A-Za-z]+)?")


def apply(
    profile: Profile,
    *,
    hide: str | None = None,
    show: str | None = None,
    show_from: str | None = None,
    tagfocus: str | None = None,
    tagignore: str | None = None,
    tagshow: str | None = None,
    taghide: str | None = None,
) -> Profile:
    """``profile`` with the filters applied in pprof's order (see the module rules)."""
    hide_rx, show_rx = compile_regex("hide", hide), compile_regex("show", show)
    from_rx = compile_regex("show_from", show_from)
    num_units = label_units(profile) if (tagfocus or tagignore) else {}
    focus_fn = tag_filter("tagfocus", tagfocus, num_units)
    ignore_fn = tag_filter("tagignore", tagignore, num_units)
    if hide_rx or show_rx:
        profile = _hide_show(profile, hide_rx, show_rx)
    if from_rx:
        profile = _show_from(profile, from_rx)
    if focus_fn or ignore_fn:
        keep = [
            (focus_fn is None or focus_fn(ls)) and not (ignore_fn and ignore_fn(ls))
            for ls in profile.samples.column("labels").to_pylist()
        ]
        profile = _with_samples(profile, profile.samples.filter(pa.array(keep, pa.bool_())))
    if tagshow or taghide:
        profile = _filter_label_keys(
            profile, compile_regex("tagshow", tagshow), compile_regex("taghide", taghide)
        )
    return profile


# --- names ----------------------------------------------------------------------------


def _line_matchers(profile: Profile, rx: re.Pattern, *, files: bool = True):
    """(function id -> matches, mapping id -> its file matches)."""
    f = profile.functions
    fn = {
        fid: bool(rx.search(name) or (files and rx.search(fname)))
        for fid, name, fname in zip(
            f.column("id").to_pylist(),
            f.column("name").to_pylist(),
            f.column("filename").to_pylist(),
            strict=True,
        )
    }
    m = profile.mappings
    mp = {
        mid: bool(rx.search(file))
        for mid, file in zip(
            m.column("id").to_pylist(), m.column("filename").to_pylist(), strict=True
        )
    }
    return fn, mp


def _hide_show(profile: Profile, hide: re.Pattern | None, show: re.Pattern | None) -> Profile:
    hide_fn, hide_map = _line_matchers(profile, hide) if hide else ({}, {})
    show_fn, show_map = _line_matchers(profile, show) if show else ({}, {})
    locs = profile.locations.to_pylist()
    hidden: set[int] = set()
    for loc in locs:
        lines = loc["lines"]
        if hide is not None:
            if hide_map.get(loc["mapping_id"], False):
                lines = []
            else:
                lines = [ln for ln in lines if not hide_fn.get(ln["function_id"], False)]
        if show is not None and not show_map.get(loc["mapping_id"], False):
            lines = [ln for ln in lines if show_fn.get(ln["function_id"], True)]
        changed = len(lines) != len(loc["lines"])
        if changed:
            loc["lines"] = lines
        if changed and not lines:
            hidden.add(loc["id"])
    profile = dataclasses.replace(
        profile, locations=pa.Table.from_pylist(locs, schema=profile.locations.schema)
    )
    if not hidden:
        return profile
    return _rewrite_stacks(profile, lambda ids: [i for i in ids if i not in hidden])


def _show_from(profile: Profile, rx: re.Pattern) -> Profile:
    fn, mp = _line_matchers(profile, rx, files=False)
    locs = profile.locations.to_pylist()
    matched: set[int] = set()
    for loc in locs:
        if mp.get(loc["mapping_id"], False):
            matched.add(loc["id"])
            continue
        lines = loc["lines"]
        # lines are innermost first: keep up to the last (outermost) match.
        last = max((i for i, ln in enumerate(lines) if fn.get(ln["function_id"])), default=-1)
        if last >= 0:
            loc["lines"] = lines[: last + 1]
            matched.add(loc["id"])
    profile = dataclasses.replace(
        profile, locations=pa.Table.from_pylist(locs, schema=profile.locations.schema)
    )

    def cut(ids: list[int]) -> list[int]:
        for i in range(len(ids) - 1, -1, -1):  # from the root down
            if ids[i] in matched:
                return ids[: i + 1]
        return []

    return _rewrite_stacks(profile, cut)


def _rewrite_stacks(profile: Profile, change: Callable[[list[int]], list[int]]) -> Profile:
    """Each sample's location ids through ``change``; samples left empty are dropped."""
    new_ids = [change(ids) for ids in profile.samples.column("location_ids").to_pylist()]
    keep = pa.array([bool(ids) for ids in new_ids], pa.bool_())
    col = profile.samples.schema.get_field_index("location_ids")
    samples = profile.samples.set_column(
        col, profile.samples.schema.field(col), pa.array(new_ids, pa.list_(pa.uint64()))
    )
    return _with_samples(profile, samples.filter(keep))


def _with_samples(profile: Profile, samples: pa.Table) -> Profile:
    return dataclasses.replace(profile, samples=samples)


# --- labels ---------------------------------------------------------------------------


def label_units(profile: Profile) -> dict[str, str]:
    """Unit of each numeric label key (pprof's ``NumLabelUnits``): the first non-empty
    ``num_unit`` seen, else ``bytes`` for request/alignment, else the key itself."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for labels in profile.samples.column("labels").to_pylist():
        for lb in labels:
            if lb["num"] is None:
                continue
            seen.add(lb["key"])
            if lb["num_unit"] and lb["key"] not in out:
                out[lb["key"]] = lb["num_unit"]
    for key in seen - set(out):
        out[key] = "bytes" if key in ("alignment", "request") else key
    return out


def _range(value: str) -> Callable[[int, str], bool] | None:
    """pprof's ``parseTagFilterRange``: a test of (value, unit), or None (not a range)."""
    parts = _RANGE_PART.findall(value)[:2]
    spans = [m.group(0) for m in _RANGE_PART.finditer(value)][:2]
    if not parts:
        return None
    v1, unit = units.scale(int(parts[0][0]), parts[0][1], parts[0][1])

    def scaled(v: int, u: str) -> float | None:
        sv, su = units.scale(v, u, unit)
        return sv if su == unit else None

    if len(parts) == 1:
        m = spans[0]
        if value == m:
            return lambda v, u: scaled(v, u) == v1
        if value == m + ":":
            return lambda v, u: (s := scaled(v, u)) is not None and s >= v1
        if value == ":" + m:
            return lambda v, u: (s := scaled(v, u)) is not None and s <= v1
        return None
    if value != spans[0] + ":" + spans[1]:
        return None
    v2, _ = units.scale(int(parts[1][0]), parts[1][1], unit)
    return lambda v, u: (s := scaled(v, u)) is not None and v1 <= s <= v2


def tag_filter(
    option: str, spec: str | None, num_units: dict[str, str]
) -> Callable[[list[dict]], bool] | None:
    """A test of one sample's labels for ``-tagfocus``/``-tagignore`` (module rules)."""
    if not spec:
        return None
    key, sep, value = spec.partition("=")
    want = key if sep else None
    value = value if sep else spec
    numeric = _range(value)
    if numeric is not None:

        def num_match(labels: list[dict]) -> bool:
            return any(
                lb["num"] is not None
                and (want is None or lb["key"] == want)
                and numeric(lb["num"], num_units.get(lb["key"], lb["key"]))
                for lb in labels
            )

        return num_match
    regexes = []
    for part in value.split(","):
        try:
            regexes.append(re.compile(part))
        except re.error as e:
            raise UsageError(f"parsing {option} regexp {part!r}: {e}") from None
    if want is None:
        return lambda labels: all(
            any(lb["str"] is not None and rx.search(f"{lb['key']}:{lb['str']}") for lb in labels)
            for rx in regexes
        )
    return lambda labels: any(
        lb["key"] == want and lb["str"] is not None and rx.search(lb["str"])
        for lb in labels
        for rx in regexes
    )


def _filter_label_keys(
    profile: Profile, show: re.Pattern | None, hide: re.Pattern | None
) -> Profile:
    def kept(key: str) -> bool:
        return (show is None or bool(show.search(key))) and not (hide and hide.search(key))

    labels = [
        [lb for lb in ls if kept(lb["key"])] for ls in profile.samples.column("labels").to_pylist()
    ]
    col = profile.samples.schema.get_field_index("labels")
    field = profile.samples.schema.field(col)
    return _with_samples(
        profile, profile.samples.set_column(col, field, pa.array(labels, field.type))
    )
