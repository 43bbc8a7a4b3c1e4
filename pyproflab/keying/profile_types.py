"""The profile type of a pprof profile, from its sample types (Go's conventions).

Rules, first match wins (type names compared case-insensitively):

- ``contentions`` and ``delay`` sample types: ``mutex`` or ``block``. Go writes
  both profiles with exactly the same shape (contentions/count,
  delay/nanoseconds, period contentions/count), so the content alone cannot
  always tell. In order: a ``hint`` naming one of them (ingest passes the
  ``{type}`` of a path template, then the file name if it contains
  ``mutex`` or ``block``); then the leaf frames: mutex profiles are recorded
  by the unlocker (``sync.(*Mutex).Unlock``, ``runtime.unlock`` …), block
  profiles at the blocking call (``runtime.chanrecv1``, ``sync.(*Mutex).Lock``
  …); else ``block``.
- any ``inuse_*`` type: ``heap``, unless default_sample_type is ``alloc_*``
  (Go's ``allocs`` profile is the heap profile with default alloc_space):
  then ``allocs``. Only ``alloc_*`` types (a truncated heap profile): ``allocs``.
- ``goroutine``: ``goroutine``; ``threadcreate``: ``threadcreate``.
- a ``wall`` sample type or a ``wall``/``wallclock`` period type, without a
  ``cpu`` sample type: ``wall`` (Node.js, fgprof, async-profiler wall mode).
- a ``cpu`` sample type or period type: ``cpu``.
- anything else: ``other``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pyproflab.errors import StoreError

if TYPE_CHECKING:
    from pyproflab.model import Profile

PROFILE_TYPES = (
    "cpu",
    "heap",
    "allocs",
    "goroutine",
    "mutex",
    "block",
    "threadcreate",
    "wall",
    "other",
    # the blocking profiles of Go execution traces (go tool trace -pprof=KIND)
    "trace-net",
    "trace-sync",
    "trace-syscall",
    "trace-sched",
)

# Leaf functions that only a mutex profile has: Go records mutex contention when
# the lock is released, so the sample's leaf is the unlock.
MUTEX_LEAVES = (
    "sync.(*Mutex).Unlock",
    "sync.(*RWMutex).Unlock",
    "sync.(*RWMutex).RUnlock",
    "internal/sync.(*Mutex).Unlock",
    "runtime.unlock",
    "runtime.unlockWithRank",
    "runtime.unlock2",
)


def _type_of(vt: Any) -> str:
    if vt is None:
        return ""
    if isinstance(vt, (tuple, list)):
        return str(vt[0]).lower()
    return str(getattr(vt, "type", vt)).lower()


def _is_mutex_leaf(name: str) -> bool:
    return name in MUTEX_LEAVES or name.endswith("Unlock") or "unlockSlow" in name


def infer_profile_type(
    sample_types: Sequence[Any],
    period_type: Any = None,
    *,
    default_sample_type: str = "",
    hint: str | None = None,
    leaf_functions: Iterable[str] | None = None,
) -> str:
    """One of ``PROFILE_TYPES`` (see the module docstring for the rules).

    ``sample_types`` are ``ValueType``s or (type, unit) pairs; ``hint`` is a
    type name or a file name, used only to tell mutex from block.
    """
    types = [_type_of(st) for st in sample_types]
    tset = set(types)
    ptype = _type_of(period_type)
    if {"contentions", "delay"} <= tset:
        h = (hint or "").lower()
        if "mutex" in h:
            return "mutex"
        if "block" in h:
            return "block"
        if leaf_functions is not None and any(_is_mutex_leaf(f) for f in leaf_functions):
            return "mutex"
        return "block"
    if any(t.startswith("inuse_") for t in types):
        return "allocs" if default_sample_type.lower().startswith("alloc_") else "heap"
    if types and all(t.startswith("alloc_") for t in types):
        return "allocs"
    if "goroutine" in tset or "goroutines" in tset:
        return "goroutine"
    if "threadcreate" in tset:
        return "threadcreate"
    if "cpu" not in tset and ("wall" in tset or ptype in ("wall", "wallclock")):
        return "wall"
    if "cpu" in tset or ptype == "cpu":
        return "cpu"
    return "other"


def profile_type_of(profile: Profile, given: str | None, hint: str | None) -> str:
    """The profile type of ``profile``: ``given`` when set (one of ``PROFILE_TYPES``,
    else ``StoreError``), else inferred (``infer_profile_type``, the leaf frames
    read only for a profile of contentions)."""
    if given:
        if given not in PROFILE_TYPES:
            raise StoreError(f"unknown profile type {given!r} (one of {', '.join(PROFILE_TYPES)})")
        return given
    types = [st.type.lower() for st in profile.sample_types]
    leaves = _leaf_functions(profile) if "contentions" in types else None
    return infer_profile_type(
        profile.sample_types,
        profile.period_type,
        default_sample_type=profile.default_sample_type,
        hint=hint,
        leaf_functions=leaves,
    )


def _leaf_functions(profile: Profile) -> list[str]:
    """Names of the innermost function of every location that is some sample's
    leaf, in the locations' order ("" for a function that is not there)."""
    import numpy as np

    from pyproflab.arrays import list_parts, to_numpy

    offsets, values = list_parts(profile.samples.column("location_ids"))
    starts = offsets[:-1][np.diff(offsets) > 0]
    leaves = to_numpy(values).astype(np.uint64)[starts]
    loc_ids = to_numpy(profile.locations.column("id")).astype(np.uint64)
    line_offsets, lines = list_parts(profile.locations.column("lines"))
    chosen = np.isin(loc_ids, leaves) & (np.diff(line_offsets) > 0)
    if not chosen.any():
        return []
    line_fn = to_numpy(lines.field("function_id")).astype(np.uint64)
    wanted = line_fn[line_offsets[:-1][chosen]]
    fn_ids = to_numpy(profile.functions.column("id")).astype(np.uint64)
    # The last function of an id names it (as a dict of them would).
    last = {int(f): k for k, f in enumerate(fn_ids.tolist())}
    rows = [last.get(int(f), -1) for f in wanted.tolist()]
    found = [r for r in rows if r >= 0]
    names = iter(profile.functions.column("name").take(found).to_pylist() if found else [])
    return [next(names) if r >= 0 else "" for r in rows]
