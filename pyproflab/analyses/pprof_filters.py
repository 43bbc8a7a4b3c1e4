"""pprof's -hide, -show, -show_from, -tagfocus, -tagignore, -tagshow and -taghide.

Rules (pprof's ``applyFocus``, re-expressed; applied after the report's total
is computed, so percentages stay shares of the unfiltered total):

- A line *matches* a regex when its function's name or file name does; a
  location's mapping file matching counts for every line of the location.
- ``hide``: lines that match are removed from their locations; a location left
  without lines is removed from every sample; a sample left without locations
  is dropped. ``show``: the same with the lines that do *not* match. A
  location that has no lines (unsymbolized) is removed by ``hide`` when its
  mapping file matches and by ``show`` whatever it matches (pprof keeps the
  location's matching lines, and there are none).
- ``show_from``: per location, the lines above (callers of) the last line
  that matches are removed (a matching mapping file keeps them all); per
  sample, the locations above the matching one nearest the root are removed;
  a sample with no matching location is dropped.
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pyproflab.analyses import units
from pyproflab.analyses.filters import compile_regex
from pyproflab.arrays import list_parts, to_numpy
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
    options = {"hide": hide, "show": show, "show_from": show_from, "tagfocus": tagfocus}
    options |= {"tagignore": tagignore, "tagshow": tagshow, "taghide": taghide}
    return _apply(profile, options, None)


def _apply(
    profile: Profile, options: dict[str, str | None], unmatched: list[str] | None
) -> Profile:
    """``apply``; ``unmatched``: a list to which pprof's name of each option that
    matched nothing is added ("Hide", "Show", "ShowFrom", "TagFocus", "TagIgnore",
    "TagShow", "TagHide"), for its "<name> expression matched no samples"."""
    hide, show, show_from = options.get("hide"), options.get("show"), options.get("show_from")
    tagfocus, tagignore = options.get("tagfocus"), options.get("tagignore")
    tagshow, taghide = options.get("tagshow"), options.get("taghide")
    hide_rx, show_rx = compile_regex("hide", hide), compile_regex("show", show)
    from_rx = compile_regex("show_from", show_from)
    # Checked before any work, so a bad regex is refused at once.
    focus_test, ignore_test = tag_test("tagfocus", tagfocus), tag_test("tagignore", tagignore)
    # Units of the numeric labels are those of the whole profile, as before filtering.
    num_units = label_units(profile) if (focus_test or ignore_test) else {}
    matched: dict[str, bool] = {}
    if hide_rx or show_rx:
        profile = _hide_show(profile, hide_rx, show_rx, matched)
    if from_rx:
        profile = _show_from(profile, from_rx, matched)
    if focus_test or ignore_test:
        labels = Labels(profile.samples)
        keep = np.ones(profile.samples.num_rows, dtype=bool)
        if focus_test:
            focused = focus_test(labels, num_units)
            matched["TagFocus"] = bool(focused.any())
            keep &= focused
        if ignore_test:
            ignored = ignore_test(labels, num_units)
            matched["TagIgnore"] = bool(ignored.any())
            keep &= ~ignored
        profile = _with_samples(profile, profile.samples.filter(pa.array(keep, pa.bool_())))
    if tagshow or taghide:
        profile = _filter_label_keys(
            profile, compile_regex("tagshow", tagshow), compile_regex("taghide", taghide), matched
        )
    if unmatched is not None:
        unmatched += [name for name, hit in matched.items() if not hit]
    return profile


def unmatched(
    profile: Profile, focus: str | None = None, ignore: str | None = None, **options: str | None
) -> list[str]:
    """pprof's names of the filters given that match nothing in ``profile``, in the
    order pprof warns "<name> expression matched no samples": each is tested on
    what the filters before it left, after drop_frames, as pprof applies them."""
    from pyproflab.analyses import filters

    out: list[str] = []
    work = filters.remove_uninteresting(profile)
    mask = filters.sample_mask(work, focus, ignore, unmatched=out)
    if mask is not None:
        work = _with_samples(work, work.samples.filter(pa.array(mask, pa.bool_())))
    if any(options.values()):
        _apply(work, options, out)
    return out


FILTERS = (
    "focus",
    "ignore",
    "hide",
    "show",
    "show_from",
    "tagfocus",
    "tagignore",
    "tagshow",
    "taghide",
)


class FilterMatchedNothing(UserWarning):
    """A filter (focus, ignore, hide, ...) matched no sample: pprof's warning."""


def warn_unmatched(profile: Profile, options: dict[str, Any], stacklevel: int = 3) -> None:
    """pprof's "<name> expression matched no samples" as a ``FilterMatchedNothing``
    warning for each filter in ``options`` that matched nothing in ``profile`` (the
    Python API's: a notebook showed an empty table and "0, 0% of" the total only)."""
    given = {k: options[k] for k in FILTERS if options.get(k)}
    if not given:
        return
    import warnings

    for name in unmatched(profile, **given):
        warnings.warn(
            f"{name} expression matched no samples", FilterMatchedNothing, stacklevel=stacklevel
        )


# --- names ----------------------------------------------------------------------------


def _line_matchers(profile: Profile, rx: re.Pattern):
    """(function id -> its name or file name matches, mapping id -> its file matches)."""
    f = profile.functions
    fn = {
        fid: bool(rx.search(name) or rx.search(fname))
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


def _hide_show(
    profile: Profile, hide: re.Pattern | None, show: re.Pattern | None, matched: dict[str, bool]
) -> Profile:
    """pprof's -hide/-show; ``matched`` gets "Hide" (some location matched) and
    "Show" (some location kept a line)."""
    hide_fn, hide_map = _line_matchers(profile, hide) if hide else ({}, {})
    show_fn, show_map = _line_matchers(profile, show) if show else ({}, {})
    locs = profile.locations.to_pylist()
    hidden: set[int] = set()
    if hide is not None:
        matched["Hide"] = False
    if show is not None:
        matched["Show"] = False
    for loc in locs:
        lines, drop = loc["lines"], False
        if hide is not None:
            if hide_map.get(loc["mapping_id"], False):
                lines = []
            else:
                lines = [ln for ln in lines if not hide_fn.get(ln["function_id"], False)]
            if len(lines) != len(loc["lines"]) or hide_map.get(loc["mapping_id"], False):
                matched["Hide"] = True
                drop = not lines
        if show is not None and not show_map.get(loc["mapping_id"], False):
            lines = [ln for ln in lines if show_fn.get(ln["function_id"], True)]
        if show is not None:
            matched["Show"] = matched["Show"] or bool(lines)
            drop = drop or not lines
        if len(lines) != len(loc["lines"]):
            loc["lines"] = lines
        if drop:
            hidden.add(loc["id"])
    profile = dataclasses.replace(
        profile, locations=pa.Table.from_pylist(locs, schema=profile.locations.schema)
    )
    if not hidden:
        return profile
    return _rewrite_stacks(profile, lambda ids: [i for i in ids if i not in hidden])


def _show_from(profile: Profile, rx: re.Pattern, found: dict[str, bool]) -> Profile:
    """pprof's -show_from; ``found`` gets "ShowFrom" (some location matched)."""
    fn, mp = _line_matchers(profile, rx)
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
    found["ShowFrom"] = bool(matched)
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


class Labels:
    """The samples' labels flattened to one row per label, each string as an index
    into a table of its distinct values (the column's dictionary): a value shared
    by many samples is looked at once, never copied per sample."""

    def __init__(self, samples: pa.Table):
        self.offsets, flat = list_parts(samples.column("labels"))
        self.samples = samples.num_rows
        # The sample each label row belongs to.
        self.owner = np.repeat(np.arange(self.samples), np.diff(self.offsets))
        self.key, self.keys = _codes(flat.field("key"))
        self.str, self.strs = _codes(flat.field("str"))
        self.unit, self.unit_names = _codes(flat.field("num_unit"))
        num = flat.field("num")
        self.has_num = to_numpy(num.is_valid()) if num.null_count else np.ones(len(num), bool)
        self.num = to_numpy(num.fill_null(0)) if num.null_count else to_numpy(num)

    def any_per_sample(self, row_mask: np.ndarray) -> np.ndarray:
        """Per sample: does any of its label rows pass ``row_mask``?"""
        hits = np.bincount(self.owner[row_mask], minlength=self.samples)
        return hits > 0

    def units(self) -> dict[str, str]:
        """Unit of each numeric label key (pprof's ``NumLabelUnits``): the first
        non-empty ``num_unit`` seen, else ``bytes`` for request/alignment, else the key."""
        rows = np.flatnonzero(self.has_num & (self.key >= 0))
        named = rows[np.isin(self.unit[rows], [c for c, u in self.unit_names.items() if u])]
        # np.unique's return_index is each key's first row: pprof keeps the first unit.
        first_keys, first = np.unique(self.key[named], return_index=True)
        out = {
            self.keys[k]: self.unit_names[self.unit[named[i]]]
            for k, i in zip(first_keys.tolist(), first.tolist(), strict=True)
        }
        for k in np.unique(self.key[rows]).tolist():
            name = self.keys[k]
            if name not in out:
                out[name] = "bytes" if name in ("alignment", "request") else name
        return out


def _codes(arr: pa.Array) -> tuple[np.ndarray, dict[int, str]]:
    """(index of each value into its distinct values, -1 for null; those of the
    distinct values that are used, by index). A dictionary column is read as it is
    (its dictionary may be the whole string table: only the used entries are
    turned into Python strings)."""
    if not pa.types.is_dictionary(arr.type):
        import pyarrow.compute as pc

        arr = pc.dictionary_encode(arr)
    idx = arr.indices
    codes = to_numpy(idx.fill_null(-1) if idx.null_count else idx).astype(np.int64)
    used = np.unique(codes[codes >= 0])
    values = arr.dictionary.take(pa.array(used, pa.int64())).to_pylist()
    return codes, dict(zip(used.tolist(), values, strict=True))


def label_units(profile: Profile) -> dict[str, str]:
    """Unit of each numeric label key of ``profile`` (see ``Labels.units``)."""
    return Labels(profile.samples).units()


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


TagTest = Callable[[Labels, dict[str, str]], np.ndarray]


def tag_test(option: str, spec: str | None) -> TagTest | None:
    """For ``-tagfocus``/``-tagignore`` (module rules): a function of the samples'
    labels and the numeric labels' units giving, per sample, whether it matches.
    Each test runs once per distinct (key, value), not once per sample."""
    if not spec:
        return None
    key, sep, value = spec.partition("=")
    want = key if sep else None
    value = value if sep else spec
    numeric = _range(value)
    if numeric is not None:

        def num_match(labels: Labels, num_units: dict[str, str]) -> np.ndarray:
            rows = labels.has_num & (labels.key >= 0)
            if want is not None:
                rows &= _is_key(labels, want)
            where = np.flatnonzero(rows)
            pairs, inverse = np.unique(
                np.stack([labels.key[where], labels.num[where]]), axis=1, return_inverse=True
            )
            names = [labels.keys[k] for k in pairs[0].tolist()]
            good = np.array(
                [
                    numeric(v, num_units.get(n, n))
                    for n, v in zip(names, pairs[1].tolist(), strict=True)
                ],
                dtype=bool,
            )
            hit = np.zeros(len(rows), dtype=bool)
            hit[where] = good[inverse.reshape(-1)] if len(where) else False
            return labels.any_per_sample(hit)

        return num_match
    regexes = []
    for part in value.split(","):
        try:
            regexes.append(re.compile(part))
        except re.error as e:
            raise UsageError(f"parsing {option} regexp {part!r}: {e}") from None

    def str_match(labels: Labels, _units: dict[str, str]) -> np.ndarray:
        rows = (labels.str >= 0) & (labels.key >= 0)
        if want is not None:
            rows &= _is_key(labels, want)
            values = _matching(labels.strs, labels.str, rows, regexes)
            return labels.any_per_sample(values)
        out = np.ones(labels.samples, dtype=bool)
        for rx in regexes:  # every regex must match some key:value of the sample
            pairs = _pairs_matching(labels, rows, rx)
            out &= labels.any_per_sample(pairs)
        return out

    return str_match


def _is_key(labels: Labels, want: str) -> np.ndarray:
    ids = [i for i, k in labels.keys.items() if k == want]
    return np.isin(labels.key, ids)


def _matching(
    values: Sequence[str] | Mapping[int, str],
    codes: np.ndarray,
    rows: np.ndarray,
    regexes: list[re.Pattern],
) -> np.ndarray:
    """Rows whose value (``values[codes]``) some regex matches; each distinct value
    tested once."""
    used = np.unique(codes[rows])
    good = [c for c in used.tolist() if any(rx.search(values[c]) for rx in regexes)]
    return rows & np.isin(codes, good)


def _pairs_matching(labels: Labels, rows: np.ndarray, rx: re.Pattern) -> np.ndarray:
    """Rows whose ``key:value`` matches ``rx``; each distinct pair tested once."""
    width = max(labels.strs, default=0) + 1
    pair = labels.key * width + labels.str
    used = np.unique(pair[rows])
    good = [
        p for p in used.tolist() if rx.search(f"{labels.keys[p // width]}:{labels.strs[p % width]}")
    ]
    return rows & np.isin(pair, good)


def _filter_label_keys(
    profile: Profile, show: re.Pattern | None, hide: re.Pattern | None, found: dict[str, bool]
) -> Profile:
    """Each sample's labels without those whose key fails tagshow/taghide; the
    label values stay interned (the kept rows are taken, not rebuilt). ``found``
    gets "TagShow"/"TagHide": whether some sample's label key matched it."""

    def kept(key: str) -> bool:
        return (show is None or bool(show.search(key))) and not (hide and hide.search(key))

    samples = profile.samples
    col = samples.schema.get_field_index("labels")
    offsets, flat = list_parts(samples.column(col))
    key, keys = _codes(flat.field("key"))
    for name, rx in (("TagShow", show), ("TagHide", hide)):
        if rx is not None:
            found[name] = any(rx.search(k) for k in keys.values())
    good = [i for i, k in keys.items() if kept(k)]
    rows = np.isin(key, good)
    owner = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    counts = np.bincount(owner[rows], minlength=len(offsets) - 1)
    new_offsets = np.zeros(len(offsets), dtype=np.int32)
    np.cumsum(counts, out=new_offsets[1:])
    values = flat.filter(pa.array(rows, pa.bool_()))
    field = samples.schema.field(col)
    labels = pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), values, type=field.type)
    return _with_samples(profile, samples.set_column(col, field, labels))
