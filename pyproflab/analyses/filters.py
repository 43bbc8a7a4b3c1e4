"""Sample filters with pprof's semantics: focus/ignore, and drop_frames pruning.

Rules:

- A location *matches* a regular expression when the name or the file name of
  any function on any of its lines matches, or when it has a mapping whose file
  matches. Matching is a search (unanchored), like Go's ``MatchString``.
- ``focus``: keep samples with at least one matching location. ``ignore``: drop
  samples with any matching location; ignore wins over focus. With only
  ``ignore`` given, every non-ignored location counts as focused, so samples
  without locations are dropped too (as in pprof).
- The patterns use **Python ``re`` syntax**. pprof uses Go's RE2; the common
  subset (classes, alternation, anchors, repetition, ``(?i)``) means the same.
  RE2-only syntax such as ``\\pN`` or ``[[:alpha:]]`` is not accepted.
- pprof computes the report's total before it applies focus/ignore, so
  percentages of a filtered top are shares of the unfiltered total.
- ``remove_uninteresting``: a profile's ``drop_frames``/``keep_frames`` prune
  frames the way pprof does on reading (``Profile.RemoveUninteresting``).
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from pyproflab import schema
from pyproflab.analyses._arrays import IdIndex, to_np
from pyproflab.arrays import list_parts
from pyproflab.errors import UsageError
from pyproflab.model import Profile


def compile_regex(option: str, pattern: str | re.Pattern | None) -> re.Pattern | None:
    """Compile a user's pattern; a bad one is a ``UsageError`` naming the option."""
    if pattern is None or isinstance(pattern, re.Pattern):
        return pattern
    if pattern == "":
        return None
    if not isinstance(pattern, str):  # peek(5) was re's "first argument must be string"
        raise UsageError(f"{option} regexp {pattern!r}: expected a string")
    try:
        return re.compile(pattern)
    except re.error as e:
        raise UsageError(f"parsing {option} regexp {pattern!r}: {e}") from None


def location_matches(profile: Profile, rx: re.Pattern) -> np.ndarray:
    """Per location row: whether the location matches ``rx`` (see the module rules)."""
    funcs = profile.functions
    names = funcs.column("name").to_pylist()
    files = funcs.column("filename").to_pylist()
    fmatch = np.array(
        [bool(rx.search(n) or rx.search(f)) for n, f in zip(names, files, strict=True)] + [False],
        dtype=bool,
    )  # the extra last entry stands for "no function"
    mfiles = profile.mappings.column("filename").to_pylist()
    mmatch = np.array([bool(rx.search(f)) for f in mfiles] + [False], dtype=bool)

    locs = profile.locations
    nloc = locs.num_rows
    offsets, lines = list_parts(locs.column("lines"))
    fid = to_np(lines.field("function_id"), np.uint64) if len(lines) else np.zeros(0, np.uint64)
    frow = IdIndex(to_np(funcs.column("id"), np.uint64)).rows(fid)
    line_hit = fmatch[frow]  # row -1 picks the "no function" entry
    loc_of_line = np.repeat(np.arange(nloc), np.diff(offsets))
    hit = np.zeros(nloc, dtype=bool)
    hit[loc_of_line[line_hit]] = True
    mrow = IdIndex(to_np(profile.mappings.column("id"), np.uint64)).rows(
        to_np(locs.column("mapping_id"), np.uint64)
    )
    hit |= mmatch[mrow]
    return hit


def sample_mask(
    profile: Profile,
    focus: str | re.Pattern | None = None,
    ignore: str | re.Pattern | None = None,
    *,
    unmatched: list[str] | None = None,
) -> np.ndarray | None:
    """Boolean mask of the samples that focus/ignore keep; None when neither is given.

    ``unmatched``: a list to which "Focus"/"Ignore" is added when that option
    matches no location (pprof's test: a focus location ignore also matches does
    not count), for pprof's "Focus expression matched no samples".
    """
    focus_rx = compile_regex("focus", focus)
    ignore_rx = compile_regex("ignore", ignore)
    if focus_rx is None and ignore_rx is None:
        return None
    nloc = profile.locations.num_rows
    ignored = location_matches(profile, ignore_rx) if ignore_rx else np.zeros(nloc, bool)
    focused = location_matches(profile, focus_rx) if focus_rx else np.ones(nloc, bool)
    focused &= ~ignored
    if unmatched is not None:
        unmatched += [
            n
            for n, rx, m in (("Focus", focus_rx, focused), ("Ignore", ignore_rx, ignored))
            if rx is not None and not m.any()
        ]
    offsets, flat = list_parts(profile.samples.column("location_ids"))
    ns = profile.samples.num_rows
    rows = IdIndex(to_np(profile.locations.column("id"), np.uint64)).rows(to_np(flat, np.uint64))
    known = rows >= 0
    sample_of = np.repeat(np.arange(ns), np.diff(offsets))[known]
    rows = rows[known]
    has_focus = np.bincount(sample_of, weights=focused[rows], minlength=ns) > 0
    has_ignore = np.bincount(sample_of, weights=ignored[rows], minlength=ns) > 0
    return has_focus & ~has_ignore


# --- drop_frames ------------------------------------------------------------------

_BRACKET = re.compile(r"\(anonymous namespace\)|operator\(\)|\(")
_RESERVED = ("(anonymous namespace)", "operator()")


def simplify_function_name(name: str) -> str:
    """A function name without its argument list (pprof's ``simplifyFunc``)."""
    name = name.removeprefix(".")
    for m in _BRACKET.finditer(name):
        if m.group(0) not in _RESERVED:
            return name[: m.start()]
    return name


def remove_uninteresting(profile: Profile) -> Profile:
    """Apply the profile's ``drop_frames``/``keep_frames`` as pprof does on reading.

    A location whose outermost matching line (a function whose simplified name
    fully matches drop_frames and not keep_frames) is its last line is pruned
    whole; otherwise only that line and the lines inlined into it go. In each
    sample, scanning from the root, the first pruned location after a kept
    ("user") one cuts the stack there.
    """
    if not profile.drop_frames:
        return profile
    try:
        drop = re.compile(f"(?:{profile.drop_frames})")
        keep = re.compile(f"(?:{profile.keep_frames})") if profile.keep_frames else None
    except re.error:
        return profile  # pprof reports the error and leaves the profile as is
    names = dict(
        zip(
            profile.functions.column("id").to_pylist(),
            profile.functions.column("name").to_pylist(),
            strict=True,
        )
    )
    cache: dict[str, bool] = {}

    def prunes(name: str) -> bool:
        if name not in cache:
            simple = simplify_function_name(name)
            cache[name] = bool(drop.fullmatch(simple)) and not (keep and keep.fullmatch(simple))
        return cache[name]

    locs = profile.locations.to_pylist()
    prune: set[int] = set()
    beneath: set[int] = set()
    changed = False
    for loc in locs:
        lines = loc["lines"]
        for i in range(len(lines) - 1, -1, -1):
            name = names.get(lines[i]["function_id"])
            if name and prunes(name):
                beneath.add(loc["id"])
                if i == len(lines) - 1:
                    prune.add(loc["id"])
                else:
                    loc["lines"] = lines[i + 1 :]
                    changed = True
                break
    if not beneath:
        return profile
    stacks = profile.samples.column("location_ids").to_pylist()
    for s, ids in enumerate(stacks):
        found_user = False
        for i in range(len(ids) - 1, -1, -1):
            lid = ids[i]
            if lid not in prune and lid not in beneath:
                found_user = True
                continue
            if not found_user:
                continue
            stacks[s] = ids[i + 1 :] if lid in prune else ids[i:]
            break
    samples = profile.samples.set_column(
        0, "location_ids", pa.array(stacks, type=schema.PROFILE_SAMPLES.field("location_ids").type)
    )
    locations = profile.locations
    if changed:
        locations = pa.Table.from_pylist(locs, schema=schema.PROFILE_LOCATIONS)
    return _replace(profile, samples=samples, locations=locations)


def _replace(profile: Profile, **changes) -> Profile:
    import dataclasses

    return dataclasses.replace(profile, **changes)
